//! The coordinator thread: owns the coordinator instance, feeds it inputs, executes its
//! outputs, fires its timers.
//!
//! Everything reaches the thread as a [`Msg`] on one bounded channel
//! (`coordinator.queue_capacity`; senders wait when it is full). The thread waits for
//! the next message or the coordinator's `poll_timeout` deadline, whichever is first.
//! Executing outputs never blocks: frames are handed to connection queues with
//! `try_send` (a consumer that does not read its channel is disconnected), offset-store
//! operations go to the store worker's queue. A topic-id list that lost a topic
//! (deleted, or re-created with a new id) also queues the removal of its committed
//! offsets there, after the coordinator has seen the list ([`super::topic_deletion`]).
//!
//! The driver takes only what it uses ([`DriverDeps`], [`StoreQueue`]) and any
//! [`Coordinator`], so its unit tests (`tests.rs`) run it with a scripted coordinator.
//! Files: this one is the run loop and the messages' handling; [`client`] the mailbox
//! and its handle; `outputs.rs` executes outputs; [`coordinator`] the interface.

pub mod assignor_runs;
pub mod client;
pub mod coordinator;
mod outputs;
#[cfg(test)]
mod tests;
mod topic_scopes;
mod txn;

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
    thread::JoinHandle,
};

use abi_stable::std_types::RVec;
use drover_abi::coordinator::{
    metrics::CoordinatorCounter, CoordinatorInput, CoordinatorOutput, TopicId,
};

use super::{
    conns::{ConnTable, Slot},
    store_worker::StoreOp,
    topic_deletion::{self, GroupOwner},
};
use crate::{clock::Epoch, metrics::Metrics, plugins::CallError, server::reply::Outcome};

use outputs::CloseReason;

pub use client::{CoordinatorClient, DriverError, Msg};
pub use coordinator::Coordinator;

/// A coordinator call at least this long is logged: the whole coordinator, every group
/// of the broker, waited for it (assignors run inside it, docs/plugins.md).
const SLOW_CALL: std::time::Duration = std::time::Duration::from_millis(500);

/// The coordinator ABI minor (of major 3) that added `CoordinatorInput::PartitionStats`.
const PARTITION_STATS_MINOR: u32 = 3;

/// What the driver uses of the broker.
pub struct DriverDeps {
    /// Where answers, closed connections and the coordinator's counters are counted.
    pub metrics: Arc<Metrics>,
    /// Whose groups lose the committed offsets of a deleted topic: every group
    /// standalone, the groups of the owned slots in cluster mode.
    pub owner: GroupOwner,
    /// Every topic's id at startup (to tell which topics a later list lost).
    pub topic_ids: RVec<TopicId>,
    /// Where the coordinator's transactional offsets are recorded (the transaction
    /// coordinator); `None`: TxnOffsetCommit is answered COORDINATOR_NOT_AVAILABLE.
    pub txn_ledger: Option<Arc<dyn crate::coordination::txn_ledger::TxnOffsetLedger>>,
    /// `coordinator.assignor_timeout_ms`: also the longest an assignor call waits for a
    /// thread of its assignor ([`assignor_runs`]); 0: no bound.
    pub assignor_timeout_ms: u64,
}

/// The offset-store worker's queue ([`super::store_worker`]) and its thread, which the
/// driver joins at shutdown after closing the queue.
pub struct StoreQueue {
    /// Operations in; the worker answers through [`Msg::Store`].
    pub ops: flume::Sender<StoreOp>,
    /// The worker thread.
    pub worker: Option<JoinHandle<()>>,
}

/// The coordinator thread's state.
struct Driver<C> {
    coordinator: C,
    conns: ConnTable,
    store: StoreQueue,
    deps: DriverDeps,
    clock: Epoch,
    /// Whether connections were closed after the coordinator went out of service.
    failed_over: bool,
    /// Topic ids by name as last forwarded, to tell which topics a new list lost.
    topic_ids: BTreeMap<String, [u8; 16]>,
    /// Transactional offsets: the ledger, completions in flight, metrics.
    txn: txn::TxnState,
    /// The threads that run the coordinator's assignor calls.
    assignor_runs: assignor_runs::AssignorRuns,
    /// The authorization context of each attached connection, for topic scopes.
    scopes: topic_scopes::TopicScopes,
}

/// Starts the coordinator thread on `channel` (its receiver is the thread's mailbox);
/// returns its client and join handle. Errors: the thread could not be spawned.
pub fn spawn<C: Coordinator>(
    coordinator: C,
    deps: DriverDeps,
    store: StoreQueue,
    channel: (flume::Sender<Msg>, flume::Receiver<Msg>),
) -> std::io::Result<(CoordinatorClient, JoinHandle<()>)> {
    let (tx, rx) = channel;
    let plugin = coordinator.name();
    let abi = coordinator.abi();
    let topic_ids = topic_deletion::id_map(&deps.topic_ids);
    let txn = txn::TxnState::new(deps.txn_ledger.clone(), tx.downgrade());
    let driver = Driver {
        txn,
        assignor_runs: assignor_runs::AssignorRuns::new(tx.downgrade(), deps.assignor_timeout_ms),
        coordinator,
        conns: ConnTable::default(),
        store,
        deps,
        clock: Epoch::start(),
        failed_over: false,
        topic_ids,
        scopes: topic_scopes::TopicScopes::default(),
    };
    let thread = std::thread::Builder::new()
        .name("drover-coordinator".into())
        .spawn(move || driver.run(rx))?;
    Ok((
        CoordinatorClient {
            tx,
            plugin,
            abi,
            kafka_apis: Arc::default(),
        },
        thread,
    ))
}

impl<C: Coordinator> Driver<C> {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn run(mut self, rx: flume::Receiver<Msg>) {
        let done = loop {
            let msg = match self.coordinator.poll_timeout() {
                Some(deadline) => match rx.recv_deadline(self.clock.instant_at(deadline)) {
                    Ok(msg) => Some(msg),
                    Err(flume::RecvTimeoutError::Timeout) => None,
                    Err(flume::RecvTimeoutError::Disconnected) => break None,
                },
                None => match rx.recv() {
                    Ok(msg) => Some(msg),
                    Err(_) => break None,
                },
            };
            match msg {
                None => self.feed(CoordinatorInput::TimerFired),
                Some(Msg::Shutdown(done)) => break Some(done),
                Some(msg) => self.on_message(msg),
            }
        };
        drop(rx);
        self.stop();
        if let Some(done) = done {
            let _ = done.send(());
        }
    }

    fn on_message(&mut self, msg: Msg) {
        match msg {
            Msg::Attach { conn, sink, scope } => {
                let peer = sink.peer.ip().to_string();
                self.conns.attach(conn, sink);
                self.feed(CoordinatorInput::ConnectionOpened {
                    conn,
                    peer: peer.into(),
                });
                // Before the connection's first frame: a pattern subscription on it is
                // never resolved unscoped (added in coordinator ABI 3.9).
                if self.coordinator.abi().minor >= topic_scopes::TOPIC_SCOPE_MINOR
                    && self.scopes.attach(conn, scope)
                {
                    if let Some(input) = self.topic_scope(conn) {
                        self.feed(input);
                    }
                }
            }
            Msg::Request {
                conn,
                api_key,
                bytes,
                reply,
            } => {
                if self.conns.is_closing(conn) {
                    return;
                }
                if self.coordinator.is_out_of_service() {
                    let _ = reply.send(Outcome::Close(
                        "coordinator_unavailable",
                        "the coordinator plugin is out of service".into(),
                    ));
                    return;
                }
                if api_key == kafka_protocol::messages::ApiKey::TxnOffsetCommit as i16
                    && self.txn.ledger.is_some()
                {
                    self.txn.ids.note_request(&bytes);
                }
                // The request header's version, after the API key (every frame routed
                // here has a header: the connection read its key).
                let api_version = bytes
                    .get(2..4)
                    .map_or(0, |v| i16::from_be_bytes([v[0], v[1]]));
                self.conns.reserve(
                    conn,
                    Slot {
                        api_key,
                        api_version,
                        reply,
                    },
                );
                self.feed(CoordinatorInput::Frame {
                    conn,
                    bytes: RVec::from(bytes.to_vec()),
                });
            }
            Msg::ChannelFrame { conn, bytes } => {
                if !self.conns.is_closing(conn) {
                    self.feed(CoordinatorInput::Frame {
                        conn,
                        bytes: RVec::from(bytes.to_vec()),
                    });
                }
            }
            Msg::Closed { conn } => {
                self.scopes.remove(conn);
                if self.conns.remove(conn) {
                    self.feed(CoordinatorInput::ConnectionClosed { conn });
                }
            }
            Msg::TopicsChanged(topics, ids) => {
                let now = topic_deletion::id_map(&ids);
                let lost = topic_deletion::lost_topics(&self.topic_ids, &now);
                self.topic_ids = now;
                self.feed(CoordinatorInput::TopicIds { topics: ids });
                self.feed(CoordinatorInput::TopicsChanged { topics });
                if !lost.is_empty() {
                    // After the coordinator forgot the topics, so no commit it issues
                    // from now on names them; after every commit it issued before.
                    tracing::info!(topics = ?lost, "topics deleted: removing their committed offsets");
                    let _ = self.store.ops.send(StoreOp::DeleteTopics {
                        topics: lost,
                        owner: self.deps.owner.clone(),
                    });
                }
            }
            Msg::Store(results) => {
                for input in results {
                    self.feed(input);
                }
            }
            Msg::SlotGained {
                slot,
                stopped_ms,
                staged,
            } => {
                let now = self.now_ms();
                let result = self.coordinator.slot_gained(now, slot, stopped_ms);
                self.run_outputs(result);
                // In the same message: no request of the slot comes in between.
                self.restore_txn_offsets(staged);
            }
            Msg::SlotLost(slot) => {
                let now = self.now_ms();
                let result = self.coordinator.slot_lost(now, slot);
                self.run_outputs(result);
            }
            Msg::AssignorsChanged(assignors, default_assignor) => {
                self.feed(CoordinatorInput::AssignorsChanged {
                    assignors,
                    default_assignor,
                });
            }
            Msg::PartitionStats(brokers, topics) => {
                // Added in coordinator ABI 3.3: an older coordinator would only skip it.
                if self.coordinator.abi().minor >= PARTITION_STATS_MINOR {
                    self.feed(CoordinatorInput::PartitionStats { brokers, topics });
                }
            }
            Msg::TxnStaged { op, error_code } => self.txn_staged(op, error_code),
            Msg::TxnCompleted {
                producer_id,
                producer_epoch,
                committed,
                done,
            } => self.complete_txn(producer_id, producer_epoch, committed, done),
            Msg::RestoreTxnOffsets(pending) => self.restore_txn_offsets(pending),
            Msg::AssignorDone { op, result } => {
                self.feed(CoordinatorInput::AssignorDone { op, result })
            }
            Msg::Shutdown(_) => unreachable!("handled by run"),
        }
    }

    /// `conn`'s topic scope over every topic, if it has an authorization context.
    fn topic_scope(&self, conn: crate::server::conn_id::ConnId) -> Option<CoordinatorInput> {
        self.scopes
            .input(conn, self.topic_ids.keys().map(String::as_str))
    }

    /// Feeds `input` and everything its outputs lead to (connections the coordinator
    /// closed are reported back at once).
    fn feed(&mut self, input: CoordinatorInput) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let now = self.now_ms();
            let started = std::time::Instant::now();
            let result = self.coordinator.handle(now, input);
            let took = started.elapsed();
            if took >= SLOW_CALL {
                // Every group waits while the coordinator runs (assignors run inside it).
                crate::warn_limited!(
                    "coordinator-slow-call",
                    took_ms = took.as_millis() as u64,
                    "a coordinator call took {} ms; every group waited meanwhile (a slow assignor?)",
                    took.as_millis()
                );
            }
            match result {
                Ok(outputs) => {
                    for output in outputs {
                        self.execute(output, &mut inputs);
                    }
                }
                Err(e) => {
                    self.deps
                        .metrics
                        .coordinator_event(CoordinatorCounter::PluginErrors.name(), 1);
                    tracing::error!("coordinator: {e}");
                    if self.coordinator.is_out_of_service() && !self.failed_over {
                        // Consumers must rediscover rather than wait on a dead
                        // coordinator: close every channel.
                        self.failed_over = true;
                        for conn in self.conns.ids() {
                            self.close(conn, CloseReason::OutOfService);
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Executes the outputs of a slot hook and everything they lead to.
    fn run_outputs(&mut self, result: Result<Vec<CoordinatorOutput>, CallError>) {
        match result {
            Ok(outputs) => {
                let mut inputs = VecDeque::new();
                for output in outputs {
                    self.execute(output, &mut inputs);
                }
                for input in inputs {
                    self.feed(input);
                }
            }
            Err(e) => tracing::error!("coordinator slot hook: {e}"),
        }
    }

    /// Final outputs, then the store worker drains its queue, then channels close.
    fn stop(&mut self) {
        let now = self.now_ms();
        match self.coordinator.shutdown(now) {
            Ok(outputs) => {
                let mut ignored = VecDeque::new();
                for output in outputs {
                    self.execute(output, &mut ignored);
                }
            }
            Err(e) => tracing::warn!("coordinator shutdown: {e}"),
        }
        // Closing the queue lets the worker finish what it has, then stop.
        let (closed, _) = flume::bounded(0);
        drop(std::mem::replace(&mut self.store.ops, closed));
        if let Some(worker) = self.store.worker.take() {
            let _ = worker.join();
        }
        for conn in self.conns.ids() {
            self.conns.close(conn);
        }
        tracing::info!("coordinator stopped");
    }
}
