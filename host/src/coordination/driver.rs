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

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
    thread::JoinHandle,
};

use abi_stable::std_types::{RResult, RString, RVec};
use bytes::Bytes;
use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorOutput, NamedAssignor, TopicId},
    PluginError, TopicInfo,
};
use tokio::sync::oneshot;

use super::{
    conns::{ConnTable, Delivery, Slot},
    store_worker::StoreOp,
    topic_deletion::{self, GroupOwner},
};
use crate::{
    broker::Broker,
    plugins::CoordinatorHandle,
    server::{
        conn_id::{next_conn_id, ConnId},
        dispatch::Outcome,
        queue::ConnSink,
    },
};

/// A coordinator call at least this long is logged: the whole coordinator, every group
/// of the broker, waited for it (assignors run inside it, docs/plugins.md).
const SLOW_CALL: std::time::Duration = std::time::Duration::from_millis(500);

/// The coordinator thread has stopped (broker shutdown, or it never started).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The coordinator thread is gone.
    #[error("the coordinator is not running")]
    Stopped,
    /// The coordinator closed the connection instead of answering.
    #[error("the coordinator closed the request's connection: {0}")]
    Refused(String),
}

/// A message to the coordinator thread.
pub enum Msg {
    /// A connection's first native frame comes with its sink.
    Attach {
        /// Connection id.
        conn: ConnId,
        /// Where answers and pushed frames go.
        sink: ConnSink,
    },
    /// A native request; its answer goes to `reply`.
    Request {
        /// Connection id.
        conn: ConnId,
        /// The request's native API key.
        api_key: i16,
        /// The frame after the size prefix.
        bytes: Bytes,
        /// Receives the answer.
        reply: oneshot::Sender<Outcome>,
    },
    /// A frame read on a coordinator channel (the consumer's answer).
    ChannelFrame {
        /// Connection id.
        conn: ConnId,
        /// The frame after the size prefix.
        bytes: Bytes,
    },
    /// A connection that spoke a native API ended.
    Closed {
        /// Connection id.
        conn: ConnId,
    },
    /// The topic metadata changed: every topic with its partition count, and every
    /// topic's id.
    TopicsChanged(RVec<TopicInfo>, RVec<TopicId>),
    /// Results of offset-store operations.
    Store(Vec<CoordinatorInput>),
    /// Cluster mode: this broker now owns coordinator slot `n`; its previous owner has
    /// not coordinated it for at least the second value, ms.
    SlotGained(u32, u64),
    /// Cluster mode: this broker no longer owns coordinator slot `n`.
    SlotLost(u32),
    /// A rescan changed the loaded assignors: the whole new set and the default.
    AssignorsChanged(RVec<NamedAssignor>, RString),
    /// Stop: final coordinator outputs, drain the store worker, close channels.
    Shutdown(oneshot::Sender<()>),
}

/// The handle connections and the admin API use to reach the coordinator thread.
#[derive(Clone)]
pub struct CoordinatorClient {
    tx: flume::Sender<Msg>,
    plugin: String,
    kafka_apis: Arc<std::sync::OnceLock<Vec<(i16, i16, i16)>>>,
}

impl CoordinatorClient {
    /// The coordinator plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    async fn send(&self, msg: Msg) -> Result<(), DriverError> {
        self.tx
            .send_async(msg)
            .await
            .map_err(|_| DriverError::Stopped)
    }

    /// Registers connection `conn`'s sink (before its first native request).
    pub async fn attach(&self, conn: ConnId, sink: ConnSink) -> Result<(), DriverError> {
        self.send(Msg::Attach { conn, sink }).await
    }

    /// Sends a native request frame (after the size prefix); its answer goes to
    /// `reply`. The caller queues the receiver first, so the answer keeps its place in
    /// the connection's response order.
    pub async fn request(
        &self,
        conn: ConnId,
        api_key: i16,
        bytes: Bytes,
        reply: oneshot::Sender<Outcome>,
    ) -> Result<(), DriverError> {
        self.send(Msg::Request {
            conn,
            api_key,
            bytes,
            reply,
        })
        .await
    }

    /// Sends a frame read on a coordinator channel.
    pub async fn channel_frame(&self, conn: ConnId, bytes: Bytes) -> Result<(), DriverError> {
        self.send(Msg::ChannelFrame { conn, bytes }).await
    }

    /// Reports that connection `conn` ended.
    pub async fn closed(&self, conn: ConnId) {
        let _ = self.send(Msg::Closed { conn }).await;
    }

    /// One request on a connection of its own, for the admin API: returns the answer
    /// frame (after the size prefix).
    pub async fn call(&self, api_key: i16, bytes: Bytes) -> Result<Bytes, DriverError> {
        let conn = next_conn_id();
        let (reply, answer) = oneshot::channel();
        let result = match self.request(conn, api_key, bytes, reply).await {
            Ok(()) => match answer.await {
                Ok(Outcome::Respond(bytes)) => Ok(bytes),
                Ok(Outcome::Close(_, why)) => Err(DriverError::Refused(why)),
                Ok(Outcome::Silent) | Err(_) => Err(DriverError::Refused(
                    "the coordinator gave no answer".into(),
                )),
            },
            Err(e) => Err(e),
        };
        self.closed(conn).await;
        result
    }

    /// Cluster mode: this broker now owns coordinator slot `slot`, whose previous owner
    /// has not coordinated it for at least `stopped_ms` ms.
    pub async fn slot_gained(&self, slot: u32, stopped_ms: u64) {
        let _ = self.send(Msg::SlotGained(slot, stopped_ms)).await;
    }

    /// Cluster mode: this broker no longer owns coordinator slot `slot`.
    pub async fn slot_lost(&self, slot: u32) {
        let _ = self.send(Msg::SlotLost(slot)).await;
    }

    /// A rescan changed the loaded assignors: `assignors` is the whole new set. Blocks
    /// while the driver's queue is full: call it off the async runtime (a rescan runs on
    /// a blocking thread).
    pub fn assignors_changed(
        &self,
        assignors: RVec<NamedAssignor>,
        default_assignor: &str,
    ) -> Result<(), DriverError> {
        self.tx
            .send(Msg::AssignorsChanged(
                assignors,
                RString::from(default_assignor),
            ))
            .map_err(|_| DriverError::Stopped)
    }

    /// Describes `groups` (every group when `None`) with a native DescribeGroups
    /// request on a connection of its own (docs/protocol.md §5.8).
    pub async fn describe_groups(
        &self,
        groups: Option<Vec<String>>,
    ) -> Result<Vec<drover_protocol::DescribedGroup>, DriverError> {
        use drover_protocol::{ApiKey, DescribeGroupsRequest, NativeRequest, NativeResponse};
        let request = NativeRequest::DescribeGroups(DescribeGroupsRequest { groups });
        let mut frame = bytes::BytesMut::new();
        drover_protocol::encode_request_frame(&mut frame, 0, Some("drover-host"), &request)
            .map_err(|e| DriverError::Refused(e.to_string()))?;
        let answer = self
            .call(ApiKey::DescribeGroups.code(), frame.freeze().slice(4..))
            .await?;
        match drover_protocol::decode_response_frame(answer, ApiKey::DescribeGroups, 0) {
            Ok((_, NativeResponse::DescribeGroups(r))) => Ok(r.groups),
            Ok((_, other)) => Err(DriverError::Refused(format!(
                "the coordinator answered {:?}",
                other.api_key()
            ))),
            Err(e) => Err(DriverError::Refused(format!(
                "undecodable DescribeGroups answer: {e}"
            ))),
        }
    }

    /// Sends new topic metadata: partition counts and ids.
    pub async fn topics_changed(
        &self,
        topics: RVec<TopicInfo>,
        ids: RVec<TopicId>,
    ) -> Result<(), DriverError> {
        self.send(Msg::TopicsChanged(topics, ids)).await
    }

    /// The Kafka APIs the coordinator serves, as (key, min version, max version):
    /// learnt at startup by [`CoordinatorClient::probe_kafka_apis`]; empty before and
    /// for a coordinator that serves none.
    pub fn kafka_apis(&self) -> &[(i16, i16, i16)] {
        self.kafka_apis.get().map_or(&[], Vec::as_slice)
    }

    /// Whether requests with API key `key` go to the coordinator: a native key, or a
    /// Kafka group API the coordinator serves.
    pub fn serves(&self, key: i16) -> bool {
        drover_protocol::ApiKey::is_native_code(key)
            || self.kafka_apis().iter().any(|(k, _, _)| *k == key)
    }

    /// Records the Kafka APIs the coordinator serves (once; see
    /// [`CoordinatorClient::probe_kafka_apis`]).
    pub(super) fn set_kafka_apis(&self, apis: Vec<(i16, i16, i16)>) {
        let _ = self.kafka_apis.set(apis);
    }

    /// Stops the coordinator thread after its final outputs and pending offset commits.
    pub async fn shutdown(&self) {
        let (done, finished) = oneshot::channel();
        if self.send(Msg::Shutdown(done)).await.is_ok() {
            let _ = finished.await;
        }
    }
}

/// The coordinator thread's state.
pub struct Driver {
    coordinator: CoordinatorHandle,
    conns: ConnTable,
    store: flume::Sender<StoreOp>,
    store_thread: Option<JoinHandle<()>>,
    broker: Arc<Broker>,
    clock: crate::clock::Epoch,
    /// Whether connections were closed after the coordinator went out of service.
    failed_over: bool,
    /// Topic ids by name as last forwarded, to tell which topics a new list lost.
    topic_ids: BTreeMap<String, [u8; 16]>,
}

/// Starts the coordinator thread; returns its client and join handle.
pub fn spawn(
    coordinator: CoordinatorHandle,
    store: flume::Sender<StoreOp>,
    store_thread: JoinHandle<()>,
    broker: Arc<Broker>,
    channel: (flume::Sender<Msg>, flume::Receiver<Msg>),
) -> std::io::Result<(CoordinatorClient, JoinHandle<()>)> {
    let (tx, rx) = channel;
    let plugin = coordinator.summary().name.clone();
    let topic_ids = topic_deletion::id_map(&super::start::topic_ids(&broker));
    let driver = Driver {
        coordinator,
        conns: ConnTable::default(),
        store,
        store_thread: Some(store_thread),
        broker,
        clock: crate::clock::Epoch::start(),
        failed_over: false,
        topic_ids,
    };
    let thread = std::thread::Builder::new()
        .name("drover-coordinator".into())
        .spawn(move || driver.run(rx))?;
    Ok((
        CoordinatorClient {
            tx,
            plugin,
            kafka_apis: Arc::default(),
        },
        thread,
    ))
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn run(mut self, rx: flume::Receiver<Msg>) {
        let done = loop {
            let msg = match self.coordinator.poll_timeout() {
                Some(deadline) => {
                    let at = self.clock.instant_at(deadline);
                    match rx.recv_deadline(at) {
                        Ok(msg) => Some(msg),
                        Err(flume::RecvTimeoutError::Timeout) => None,
                        Err(flume::RecvTimeoutError::Disconnected) => break None,
                    }
                }
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
            Msg::Attach { conn, sink } => {
                let peer = sink.peer.ip().to_string();
                self.conns.attach(conn, sink);
                self.feed(CoordinatorInput::ConnectionOpened {
                    conn,
                    peer: peer.into(),
                });
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
                self.conns.reserve(conn, Slot { api_key, reply });
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
                    let owner = match self.broker.cluster() {
                        None => GroupOwner::All,
                        Some(cluster) => GroupOwner::Slots(Arc::clone(cluster)),
                    };
                    let _ = self.store.send(StoreOp::DeleteTopics {
                        topics: lost,
                        owner,
                    });
                }
            }
            Msg::Store(results) => {
                for input in results {
                    self.feed(input);
                }
            }
            Msg::SlotGained(slot, stopped_ms) => {
                let now = self.now_ms();
                let result = self.coordinator.slot_gained(now, slot, stopped_ms);
                self.run_outputs(result);
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
            Msg::Shutdown(_) => unreachable!("handled by run"),
        }
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
                    self.broker.metrics.coordinator_event("plugin_errors", 1);
                    tracing::error!("coordinator: {e}");
                    if self.coordinator.is_out_of_service() && !self.failed_over {
                        // Consumers must rediscover rather than wait on a dead
                        // coordinator: close every channel.
                        self.failed_over = true;
                        for conn in self.conns.ids() {
                            self.conns.close(conn);
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Executes the outputs of a slot hook and everything they lead to.
    fn run_outputs(&mut self, result: Result<Vec<CoordinatorOutput>, crate::plugins::CallError>) {
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

    /// Counts an answered request; closes a channel whose consumer does not read, or a
    /// connection on which the coordinator broke its contract.
    fn delivered(
        &mut self,
        conn: ConnId,
        delivery: Delivery,
        inputs: &mut VecDeque<CoordinatorInput>,
    ) {
        match delivery {
            Delivery::Answered { api_key } => {
                if drover_protocol::ApiKey::is_native_code(api_key) {
                    self.broker.metrics.native_request(api_key)
                } else if let Ok(key) = kafka_protocol::messages::ApiKey::try_from(api_key) {
                    // Kafka group APIs count with the broker's own requests (their error
                    // codes are inside the answer: counted as 0 here).
                    self.broker
                        .metrics
                        .request(crate::server::dispatch::api_name(key), 0)
                }
            }
            Delivery::Pushed | Delivery::Gone => {}
            Delivery::Overflow => {
                tracing::info!(
                    conn,
                    "closing a coordinator channel: the consumer does not read it"
                );
                self.conns.close(conn);
                inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
            }
            Delivery::Violation(what) => {
                crate::warn_limited!(
                    "coordinator-contract",
                    conn,
                    "closing a connection: the coordinator plugin sent {what}"
                );
                self.broker
                    .metrics
                    .coordinator_event("contract_violations", 1);
                if self.conns.close(conn) {
                    inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
                }
            }
        }
    }

    // One arm per output reads better than guards folded into the match, which clippy
    // suggests once the non-exhaustive enum needs its wildcard arm.
    #[allow(clippy::collapsible_match)]
    fn execute(&mut self, output: CoordinatorOutput, inputs: &mut VecDeque<CoordinatorInput>) {
        match output {
            CoordinatorOutput::Answer { conn, bytes } => {
                let delivery = self.conns.answer(conn, Bytes::from(bytes.into_vec()));
                self.delivered(conn, delivery, inputs);
            }
            CoordinatorOutput::Push { conn, bytes } => {
                let delivery = self.conns.push(conn, Bytes::from(bytes.into_vec()));
                self.delivered(conn, delivery, inputs);
            }
            CoordinatorOutput::ChannelOpened { conn } => {
                self.conns.open_channel(conn);
            }
            CoordinatorOutput::CloseConnection { conn } => {
                if self.conns.close(conn) {
                    inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
                }
            }
            CoordinatorOutput::CommitOffsets { op, records } => {
                if self.store.send(StoreOp::Commit { op, records }).is_err() {
                    inputs.push_back(CoordinatorInput::OffsetsCommitted {
                        op,
                        result: RResult::RErr(store_gone()),
                    });
                }
            }
            CoordinatorOutput::FetchOffsets {
                op,
                group,
                partitions,
            } => {
                if self
                    .store
                    .send(StoreOp::Fetch {
                        op,
                        group,
                        partitions,
                    })
                    .is_err()
                {
                    inputs.push_back(CoordinatorInput::OffsetsFetched {
                        op,
                        result: RResult::RErr(store_gone()),
                    });
                }
            }
            CoordinatorOutput::DeleteOffsets {
                op,
                group,
                partitions,
            } => {
                if self
                    .store
                    .send(StoreOp::Delete {
                        op,
                        group,
                        partitions,
                    })
                    .is_err()
                {
                    inputs.push_back(CoordinatorInput::OffsetsDeleted {
                        op,
                        result: RResult::RErr(store_gone()),
                    });
                }
            }
            CoordinatorOutput::Metric { name, value } => {
                self.broker.metrics.coordinator_event(&name, value)
            }
            // A variant of a later minor than this build: `known_outputs` (plugins::handle)
            // already dropped those; the arm is what the non-exhaustive enum requires.
            _ => {}
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
        drop(std::mem::replace(&mut self.store, closed));
        if let Some(worker) = self.store_thread.take() {
            let _ = worker.join();
        }
        for conn in self.conns.ids() {
            self.conns.close(conn);
        }
        tracing::info!("coordinator stopped");
    }
}

fn store_gone() -> PluginError {
    PluginError::unavailable("the offset-store worker has stopped")
}
