//! Runs the coordinator's assignor calls off its thread (coordinator ABI 3.6's
//! `RunAssignor`; issue 28 item 2, after Kafka's KIP-1263).
//!
//! Each call goes to the queue of its assignor, served by up to
//! [`THREADS_PER_ASSIGNOR`] threads of that assignor (started as calls queue up, kept
//! while the driver runs); the result comes back to the coordinator thread's mailbox as
//! [`Msg::AssignorDone`]. So a strategy that takes 20 s holds the groups waiting for it
//! and nothing else: the coordinator thread goes on serving heartbeats, joins and
//! commits of every group, and groups on other assignors are assigned by their own
//! threads meanwhile.
//!
//! The call itself goes through the assignor instance the host handed the coordinator,
//! which is wrapped in its time budget ([`crate::coordination::assignor_budget`]): a
//! call past `coordinator.assignor_timeout_ms` returns `Unavailable` (the group falls
//! back to the default assignor, counted), and further calls of a plugin stuck in an
//! abandoned call fail at once. The budget also bounds the wait in the queue: a call
//! that waited longer than the budget for a thread (many groups on one slow strategy)
//! is answered `Unavailable` without running, so its group falls back as for a call
//! past its budget, and no group waits much longer than one budget and one call.
//!
//! Threads: at most [`THREADS_PER_ASSIGNOR`] per assignor name that has run (the loaded
//! assignors are capped), matching the budget wrapper's worker threads per plugin.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_abi::coordinator::{AssignorJobArc, CoordinatorInput};
use drover_abi::std_types::RResult;
use drover_abi::PluginError;

use super::client::Msg;

/// The most threads that run one assignor's calls at once
/// ([`crate::coordination::assignor_budget::MAX_THREADS_PER_PLUGIN`] worker threads
/// serve them, one call each).
pub const THREADS_PER_ASSIGNOR: usize =
    crate::coordination::assignor_budget::MAX_THREADS_PER_PLUGIN;

/// One call waiting for a thread of its assignor: its id, the job, when it was queued.
type Queued = (u64, AssignorJobArc, Instant);

/// One assignor's queue and its threads.
struct Lane {
    tx: flume::Sender<Queued>,
    rx: flume::Receiver<Queued>,
    threads: usize,
    /// Threads waiting for a call now.
    idle: Arc<AtomicUsize>,
}

/// The assignor threads and their queues (public for the hand-off benchmark,
/// `tests/conformance/benches/assignor_handoff.rs`).
pub struct AssignorRuns {
    /// Where results go: the coordinator thread's mailbox (weak: the driver owns it).
    mailbox: flume::WeakSender<Msg>,
    /// The longest a call waits in its queue (`coordinator.assignor_timeout_ms`);
    /// `None`: no bound.
    budget: Option<Duration>,
    /// Per assignor name, its queue and threads.
    lanes: HashMap<String, Lane>,
}

impl AssignorRuns {
    /// No thread yet; results go to `mailbox` (the coordinator thread's); a call waits
    /// at most `budget_ms` for a thread (0: no bound).
    pub fn new(mailbox: flume::WeakSender<Msg>, budget_ms: u64) -> Self {
        AssignorRuns {
            mailbox,
            budget: (budget_ms > 0).then(|| Duration::from_millis(budget_ms)),
            lanes: HashMap::new(),
        }
    }

    /// Queues call `op` for a thread of its assignor (one more is started while every
    /// thread is busy, up to [`THREADS_PER_ASSIGNOR`]). When no thread can run it,
    /// returns its result at once: an `Unavailable` error.
    pub fn run(&mut self, op: u64, job: AssignorJobArc) -> Option<CoordinatorInput> {
        let name = job.assignor().to_string();
        let lane = self.lanes.entry(name.clone()).or_insert_with(|| {
            let (tx, rx) = flume::unbounded();
            Lane {
                tx,
                rx,
                threads: 0,
                idle: Arc::new(AtomicUsize::new(0)),
            }
        });
        // More calls queued than threads waiting: one more thread, within the cap.
        let busy = lane.tx.len() + 1 > lane.idle.load(Ordering::Acquire);
        if lane.threads < THREADS_PER_ASSIGNOR && busy {
            let idle = Arc::clone(&lane.idle);
            match spawn(
                &name,
                lane.rx.clone(),
                self.mailbox.clone(),
                self.budget,
                idle,
            ) {
                Ok(()) => lane.threads += 1,
                Err(e) => {
                    tracing::error!(assignor = %name, error = %e, "cannot start an assignor thread")
                }
            }
        }
        if lane.threads > 0 && lane.tx.send((op, job, Instant::now())).is_ok() {
            return None;
        }
        let error = PluginError::unavailable(format!("no thread could run assignor `{name}`"));
        Some(CoordinatorInput::AssignorDone {
            op,
            result: RResult::RErr(error),
        })
    }
}

/// Starts a thread that runs `name`'s queued calls until the queue closes or the
/// mailbox is gone.
fn spawn(
    name: &str,
    rx: flume::Receiver<Queued>,
    mailbox: flume::WeakSender<Msg>,
    budget: Option<Duration>,
    idle: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let assignor = name.to_owned();
    std::thread::Builder::new()
        .name(format!("drover-assign-{name}"))
        .spawn(move || loop {
            idle.fetch_add(1, Ordering::AcqRel);
            let next = rx.recv();
            idle.fetch_sub(1, Ordering::AcqRel);
            let Ok((op, job, queued)) = next else {
                return;
            };
            {
                let waited = queued.elapsed();
                let result = match budget {
                    Some(budget) if waited > budget => {
                        RResult::RErr(PluginError::unavailable(format!(
                            "the call of assignor `{assignor}` waited {} ms for a thread, \
                             past its {} ms budget (its earlier calls are slow)",
                            waited.as_millis(),
                            budget.as_millis()
                        )))
                    }
                    _ => job.run(),
                };
                drop(job);
                let Some(tx) = mailbox.upgrade() else {
                    return;
                };
                if tx.send(Msg::AssignorDone { op, result }).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}
