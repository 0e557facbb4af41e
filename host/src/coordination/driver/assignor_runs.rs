//! Runs the coordinator's assignor calls off its thread (coordinator ABI 3.6's
//! `RunAssignor`; issue 28 item 2, after Kafka's KIP-1263).
//!
//! Each call goes to a queue of its assignor, served by one thread of that assignor
//! (started at its first call, kept while the driver runs); the result comes back to
//! the coordinator thread's mailbox as [`Msg::AssignorDone`]. So a strategy that takes
//! 20 s holds the groups waiting for it and nothing else: the coordinator thread goes on
//! serving heartbeats, joins and commits of every group, and groups on other assignors
//! are assigned by their own threads meanwhile.
//!
//! The call itself goes through the assignor instance the host handed the coordinator,
//! which is wrapped in its time budget ([`crate::coordination::assignor_budget`]): a
//! call past `coordinator.assignor_timeout_ms` returns `Unavailable` (the group falls
//! back to the default assignor, counted), and further calls of a plugin stuck in an
//! abandoned call fail at once. A queue thread therefore waits at most one budget per
//! call, and a stuck plugin's queue drains as fast as its calls are refused.
//!
//! Threads: one per assignor name that has run (the loaded assignors are capped).

use std::collections::HashMap;

use drover_abi::coordinator::{AssignorJobArc, CoordinatorInput};
use drover_abi::std_types::RResult;
use drover_abi::PluginError;

use super::client::Msg;

/// One call waiting for its assignor's thread.
type Queued = (u64, AssignorJobArc);

/// The assignor threads and their queues (public for the hand-off benchmark,
/// `tests/conformance/benches/assignor_handoff.rs`).
pub struct AssignorRuns {
    /// Where results go: the coordinator thread's mailbox (weak: the driver owns it).
    mailbox: flume::WeakSender<Msg>,
    /// Per assignor name, its thread's queue.
    queues: HashMap<String, flume::Sender<Queued>>,
}

impl AssignorRuns {
    /// No thread yet; results go to `mailbox` (the coordinator thread's).
    pub fn new(mailbox: flume::WeakSender<Msg>) -> Self {
        AssignorRuns {
            mailbox,
            queues: HashMap::new(),
        }
    }

    /// Queues call `op` on its assignor's thread (started if it has none). When no
    /// thread can run it, returns its result at once: an `Unavailable` error.
    pub fn run(&mut self, op: u64, job: AssignorJobArc) -> Option<CoordinatorInput> {
        let name = job.assignor().to_string();
        let mut queued = (op, job);
        // A thread that ended (it panicked, or could not start) is replaced once.
        for _ in 0..2 {
            let tx = match self.queues.get(&name) {
                Some(tx) => tx.clone(),
                None => match self.spawn(&name) {
                    Ok(tx) => tx,
                    Err(e) => {
                        tracing::error!(assignor = %name, error = %e, "cannot start an assignor thread");
                        break;
                    }
                },
            };
            match tx.send(queued) {
                Ok(()) => return None,
                Err(flume::SendError(back)) => {
                    self.queues.remove(&name);
                    queued = back;
                }
            }
        }
        let error = PluginError::unavailable(format!("no thread could run assignor `{name}`"));
        Some(CoordinatorInput::AssignorDone {
            op: queued.0,
            result: RResult::RErr(error),
        })
    }

    fn spawn(&mut self, name: &str) -> std::io::Result<flume::Sender<Queued>> {
        let (tx, rx) = flume::unbounded::<Queued>();
        let mailbox = self.mailbox.clone();
        std::thread::Builder::new()
            .name(format!("drover-assign-{name}"))
            .spawn(move || {
                while let Ok((op, job)) = rx.recv() {
                    let result = job.run();
                    drop(job);
                    let Some(tx) = mailbox.upgrade() else {
                        return;
                    };
                    if tx.send(Msg::AssignorDone { op, result }).is_err() {
                        return;
                    }
                }
            })?;
        self.queues.insert(name.to_owned(), tx.clone());
        Ok(tx)
    }
}
