//! The coordinator thread's mailbox: the messages it takes ([`Msg`]) and the handle
//! connections, the admin API, the cluster task and the topic watcher send them
//! through ([`CoordinatorClient`]).

use std::sync::Arc;

use abi_stable::std_types::{RString, RVec};
use bytes::Bytes;
use drover_abi::{
    assignor::{BrokerContext, TopicContext},
    coordinator::{CoordinatorInput, NamedAssignor, PendingTxnOffsets, TopicId},
    TopicInfo,
};
use tokio::sync::oneshot;

use crate::server::{
    conn_id::{next_conn_id, ConnId},
    queue::ConnSink,
    reply::Outcome,
};

/// The coordinator ABI minor (of major 3) from which the host routes share groups'
/// membership APIs to the coordinator (KIP-932; [`CoordinatorClient::serves`]).
pub(crate) const SHARE_MINOR: u32 = 7;

/// ShareGroupHeartbeat (76) and ShareGroupDescribe (77).
const SHARE_GROUP_KEYS: [i16; 2] = [
    kafka_protocol::messages::ApiKey::ShareGroupHeartbeat as i16,
    kafka_protocol::messages::ApiKey::ShareGroupDescribe as i16,
];

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
        /// The connection's authorization context, for its topic scope
        /// (`coordination::driver::topic_scopes`); allows everything without an authorizer.
        scope: crate::authz::RequestAuthz,
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
    /// Cluster mode: this broker now owns coordinator slot `slot`.
    SlotGained {
        /// The slot.
        slot: u32,
        /// Its previous owner has not coordinated it for at least this long, ms.
        stopped_ms: u64,
        /// Its transactional offsets still pending, handed over before anything else
        /// of the slot reaches the coordinator.
        staged: Vec<PendingTxnOffsets>,
    },
    /// Cluster mode: this broker no longer owns coordinator slot `n`.
    SlotLost(u32),
    /// A rescan changed the loaded assignors: the whole new set and the default.
    AssignorsChanged(RVec<NamedAssignor>, RString),
    /// The partition table for assignors: brokers with racks, per-topic partition data
    /// ([`crate::coordination::partition_stats`]).
    PartitionStats(RVec<BrokerContext>, RVec<TopicContext>),
    /// The ledger's answer to the coordinator's `StageTxnOffsets` `op`: a Kafka error
    /// code, 0 once recorded.
    TxnStaged {
        /// The coordinator's operation id.
        op: u64,
        /// The ledger's code.
        error_code: i16,
    },
    /// A transaction ended; `done` fires once the coordinator applied it.
    TxnCompleted {
        /// The transactional producer's id.
        producer_id: i64,
        /// The epoch whose transaction ended.
        producer_epoch: i16,
        /// Commit or abort.
        committed: bool,
        /// Fired on `TxnCompletionApplied`.
        done: oneshot::Sender<()>,
    },
    /// Transactional offsets recorded before (startup, slot gained), still pending.
    RestoreTxnOffsets(Vec<PendingTxnOffsets>),
    /// An assignor call the coordinator handed out (`RunAssignor` `op`) returned
    /// ([`super::assignor_runs`]).
    AssignorDone {
        /// The coordinator's call id.
        op: u64,
        /// What the call returned.
        result: drover_abi::std_types::RResult<
            drover_abi::assignor::Assignment,
            drover_abi::PluginError,
        >,
    },
    /// Stop: final coordinator outputs, drain the store worker, close channels.
    Shutdown(oneshot::Sender<()>),
}

/// The handle connections and the admin API use to reach the coordinator thread.
#[derive(Clone)]
pub struct CoordinatorClient {
    pub(super) tx: flume::Sender<Msg>,
    pub(super) plugin: String,
    /// The coordinator ABI the plugin was built against.
    pub(super) abi: drover_abi::KindVersion,
    /// The Kafka APIs the coordinator serves, as learnt by
    /// [`CoordinatorClient::probe_kafka_apis`] at startup, before the client is handed to
    /// the server and the admin API (a coordinator's Kafka APIs are fixed for its
    /// lifetime). A clone shares them.
    pub(super) kafka_apis: Arc<[(i16, i16, i16)]>,
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

    /// Registers connection `conn`'s sink (before its first native request) and its
    /// authorization context (`scope`, for its topic scope: `coordination::driver::topic_scopes`).
    pub async fn attach(
        &self,
        conn: ConnId,
        sink: ConnSink,
        scope: crate::authz::RequestAuthz,
    ) -> Result<(), DriverError> {
        self.send(Msg::Attach { conn, sink, scope }).await
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
    /// has not coordinated it for at least `stopped_ms` ms. `staged` are the slot's
    /// transactional offsets still pending (txn::group_offsets): the coordinator holds
    /// them before it serves any request of the slot, so OffsetFetch with
    /// `require_stable` never answers stable for them. Errors: the driver stopped.
    pub async fn slot_gained(
        &self,
        slot: u32,
        stopped_ms: u64,
        staged: Vec<PendingTxnOffsets>,
    ) -> Result<(), DriverError> {
        self.send(Msg::SlotGained {
            slot,
            stopped_ms,
            staged,
        })
        .await
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

    /// Sends the partition table for assignors; the driver passes it on to a
    /// coordinator of ABI 3.3 or later and drops it for an older one. Waits while the
    /// driver's queue is full. Errors: the driver stopped.
    pub async fn partition_stats(
        &self,
        brokers: RVec<BrokerContext>,
        topics: RVec<TopicContext>,
    ) -> Result<(), DriverError> {
        self.send(Msg::PartitionStats(brokers, topics)).await
    }

    /// Describes `groups` (every group when `None`) with a native DescribeGroups
    /// request on a connection of its own (docs/protocol.md §5.8): at v2 (native and
    /// KIP-848 groups, each naming its protocol; members' rack, weight and labels, the
    /// partition loads of the last assignment), and at the next lower version when the
    /// coordinator refuses one (a coordinator built before it, which closes the
    /// connection of a version it does not know): v1 and v0 describe native groups
    /// only, and v0's answer reads as the defaults. Errors: the driver stopped, or the
    /// coordinator refused every version or answered something undecodable.
    pub async fn describe_groups(
        &self,
        groups: Option<Vec<String>>,
    ) -> Result<Vec<drover_protocol::DescribedGroup>, DriverError> {
        let mut version = drover_protocol::DESCRIBE_GROUPS_MAX_VERSION;
        loop {
            match self.describe_groups_at(groups.clone(), version).await {
                Err(DriverError::Refused(why)) if version > 0 => {
                    tracing::debug!(%why, version, "DescribeGroups refused; asking one version lower");
                    version -= 1;
                }
                other => return other,
            }
        }
    }

    async fn describe_groups_at(
        &self,
        groups: Option<Vec<String>>,
        version: i16,
    ) -> Result<Vec<drover_protocol::DescribedGroup>, DriverError> {
        use drover_protocol::{ApiKey, DescribeGroupsRequest, NativeRequest, NativeResponse};
        let request = NativeRequest::DescribeGroups(DescribeGroupsRequest { groups, version });
        let mut frame = bytes::BytesMut::new();
        drover_protocol::encode_request_frame(&mut frame, 0, Some("drover-host"), &request)
            .map_err(|e| DriverError::Refused(e.to_string()))?;
        let answer = self
            .call(ApiKey::DescribeGroups.code(), frame.freeze().slice(4..))
            .await?;
        match drover_protocol::decode_response_frame(answer, ApiKey::DescribeGroups, version) {
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
        &self.kafka_apis
    }

    /// Whether the coordinator restricts pattern subscriptions to the topics each
    /// connection's principal may describe (ABI 3.9, `CoordinatorInput::TopicScope`;
    /// the driver sends scopes when an authorizer is configured).
    pub fn scopes_patterns(&self) -> bool {
        self.abi.minor >= super::topic_scopes::TOPIC_SCOPE_MINOR
    }

    /// Whether requests with API key `key` go to the coordinator: a native key, or a
    /// Kafka group API the coordinator serves.
    ///
    /// TxnOffsetCommit (API 28) goes to a coordinator of ABI 3.4 or later only (an
    /// older one cannot stage its offsets); the broker answers it otherwise.
    /// ShareGroupHeartbeat (76) and ShareGroupDescribe (77) go to a coordinator of ABI
    /// 3.7 or later only: the host authorizes them before routing
    /// (`server::group_authz`), which a broker before 3.7 did not know to do.
    pub fn serves(&self, key: i16) -> bool {
        if key == kafka_protocol::messages::ApiKey::TxnOffsetCommit as i16
            && self.abi.minor < super::txn::TXN_MINOR
        {
            return false;
        }
        if SHARE_GROUP_KEYS.contains(&key) && self.abi.minor < SHARE_MINOR {
            return false;
        }
        drover_protocol::ApiKey::is_native_code(key)
            || self.kafka_apis().iter().any(|(k, _, _)| *k == key)
    }

    /// Tells the coordinator that transaction `producer_id`/`producer_epoch` ended
    /// (`committed` or aborted) and waits until it applied it: its pending offsets of
    /// every group are in the offset store, or dropped. Repeating it is harmless. A
    /// coordinator older than ABI 3.4 has none: done at once. Errors: the driver
    /// stopped (the completion may not be applied; send it again to the next one).
    pub async fn complete_txn(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        committed: bool,
    ) -> Result<(), DriverError> {
        let (done, applied) = oneshot::channel();
        self.send(Msg::TxnCompleted {
            producer_id,
            producer_epoch,
            committed,
            done,
        })
        .await?;
        applied.await.map_err(|_| DriverError::Stopped)
    }

    /// Hands the coordinator transactional offsets recorded earlier whose transactions
    /// are still open (at startup before client traffic; in cluster mode after a slot
    /// is gained): it holds them as pending without staging them again. Dropped for a
    /// coordinator older than ABI 3.4. Errors: the driver stopped.
    pub async fn restore_txn_offsets(
        &self,
        pending: Vec<PendingTxnOffsets>,
    ) -> Result<(), DriverError> {
        self.send(Msg::RestoreTxnOffsets(pending)).await
    }

    /// This client, knowing that the coordinator serves the Kafka APIs `apis` (see
    /// [`CoordinatorClient::probe_kafka_apis`]).
    pub(in crate::coordination) fn with_kafka_apis(mut self, apis: Vec<(i16, i16, i16)>) -> Self {
        self.kafka_apis = apis.into();
        self
    }

    /// Stops the coordinator thread after its final outputs and pending offset commits.
    pub async fn shutdown(&self) {
        let (done, finished) = oneshot::channel();
        if self.send(Msg::Shutdown(done)).await.is_ok() {
            let _ = finished.await;
        }
    }
}
