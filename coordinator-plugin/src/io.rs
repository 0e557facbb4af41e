//! What goes into the coordinator ([`Input`]) and what comes out ([`Output`]).
//!
//! These are the core's own types. The cdylib wrapper converts them to and from
//! `drover_abi::coordinator::{CoordinatorInput, CoordinatorOutput}` at one boundary,
//! the crate's `abi` module.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
pub use drover_abi::coordinator::metrics::CoordinatorCounter;

use crate::assignor_job::AssignorJob;
use crate::types::{ConnId, ConsumerId, Generation, GroupId, OffsetEntry, OpId, StoreError};
use crate::types::{PendingTxnOffsets, TxnProducer};
use crate::types::{TopicName, TopicPartition};

/// An event the host delivers to [`crate::Coordinator::handle`].
#[derive(Debug, Clone)]
pub enum Input {
    /// A complete frame received on `conn`: Kafka framing without the 4-byte size
    /// prefix. Requests from consumers and admin tools (RegisterConsumer, CommitOffset,
    /// FetchOffsets, LeaveGroup, DescribeGroups), and on a coordinator channel the
    /// consumer's responses to the coordinator's Heartbeat, StopFetcher and
    /// StartFetcher.
    Frame {
        /// The connection.
        conn: ConnId,
        /// The frame bytes after the size prefix.
        bytes: Bytes,
    },
    /// `conn` sent its first request for the coordinator, from IP address `peer`
    /// (reported as the member host of Kafka groups). Optional: without it the host is
    /// empty.
    ConnectionOpened {
        /// The connection.
        conn: ConnId,
        /// The client's IP address.
        peer: String,
    },
    /// `conn` closed (by the peer, an error, or a [`Output::CloseConnection`]).
    ConnectionClosed {
        /// The connection.
        conn: ConnId,
    },
    /// The deadline from [`crate::Coordinator::poll_timeout`] has passed. (Every input
    /// also runs the timers that are due, so a late timer is harmless.)
    Timer,
    /// The topic metadata changed; the whole new list of topics with partition counts.
    /// The host delivers it once at startup too.
    TopicsChanged {
        /// Every topic and its partition count.
        topics: BTreeMap<TopicName, u32>,
    },
    /// Result of [`Output::CommitOffsets`] `op`: `Ok` once every record is durable.
    OffsetsCommitted {
        /// The operation.
        op: OpId,
        /// The outcome.
        result: Result<(), StoreError>,
    },
    /// Result of [`Output::FetchOffsets`] `op`: the committed offsets found (partitions
    /// with none are absent).
    OffsetsFetched {
        /// The operation.
        op: OpId,
        /// The outcome.
        result: Result<Vec<OffsetEntry>, StoreError>,
    },
    /// Result of [`Output::DeleteOffsets`] `op`: how many committed offsets were
    /// deleted.
    OffsetsDeleted {
        /// The operation.
        op: OpId,
        /// The outcome.
        result: Result<u64, StoreError>,
    },
    /// The ids of the topics (16-byte UUIDs as in Kafka's Metadata), by name: the whole
    /// map, replacing the previous one. Needed by the KIP-848 APIs, which name topics by
    /// id. The host delivers it before every [`Input::TopicsChanged`].
    TopicIds {
        /// Topic id by name.
        ids: BTreeMap<TopicName, [u8; 16]>,
    },
    /// Cluster mode: this broker now owns coordinator slot `slot` (it won the slot's
    /// election). The slot's groups start empty: their consumers re-register, and the
    /// first rebalance of each waits until [`CoordinatorConfig::takeover_wait_ms`] after
    /// the previous owner stopped coordinating the slot, that is `takeover_wait_ms −
    /// stopped_ms` after this input (docs/protocol.md §6.8). Ignored (with a warning)
    /// standalone, for a slot out of range, or for a slot already owned.
    ///
    /// [`CoordinatorConfig::takeover_wait_ms`]: crate::CoordinatorConfig::takeover_wait_ms
    SlotGained {
        /// The slot, below the slot count.
        slot: u32,
        /// A lower bound of how long the slot's previous owner has not coordinated it,
        /// ms (0 when unknown): from the host, which knows when its ZooKeeper session
        /// guard stops an owner (docs/design.md, cluster mode).
        stopped_ms: u64,
    },
    /// Cluster mode: this broker no longer owns coordinator slot `slot`. Every group of
    /// the slot is dropped: its consumers' channels are closed, its timers removed, its
    /// accepted but unwritten offsets discarded (docs/protocol.md §6.8). The host
    /// delivers it as soon as ownership may have ended: on losing contact with
    /// ZooKeeper, not only on session expiry. Ignored standalone or for a slot not
    /// owned.
    SlotLost {
        /// The slot.
        slot: u32,
    },
    /// What the host measured of its partitions (leaders and racks, log offsets,
    /// produce rates): the whole table, replacing the previous one. It fills the
    /// context of every later assignor run (coordinator ABI 3.3); nothing is rebalanced
    /// because of it.
    PartitionStats(crate::PartitionStats),
    /// Result of [`Output::StageTxnOffsets`] `op`: `Ok` once the host recorded the
    /// offsets with their transaction; otherwise the error the TxnOffsetCommit is
    /// answered with (coordinator ABI 3.4).
    TxnOffsetsStaged {
        /// The operation.
        op: OpId,
        /// The outcome, as a Kafka error.
        result: Result<(), kafka_protocol::ResponseError>,
    },
    /// Transactional offsets the host recorded earlier, of transactions still open
    /// (at startup, or after gaining a slot): held as pending, not staged again.
    /// Offsets of groups this coordinator does not own are ignored.
    TxnOffsetsPending {
        /// Per group and producer, the pending offsets.
        pending: Vec<PendingTxnOffsets>,
    },
    /// `producer`'s transaction ended: `committed` commits its pending offsets of every
    /// group (those staged with `producer.epoch` or earlier) through the commit path,
    /// otherwise they are dropped; then [`Output::TxnCompletionApplied`] `op`.
    TxnCompleted {
        /// The host's id for this completion.
        op: u64,
        /// The producer and the epoch whose transaction ended.
        producer: TxnProducer,
        /// Commit (`true`) or abort.
        committed: bool,
    },
    /// The result of [`Output::RunAssignor`]: the call [`AssignorJob::id`] returned
    /// `result` (the assignor's output, unchecked, or its error; a call past the host's
    /// time budget is an `Unavailable` error). A result for a call the coordinator no
    /// longer waits for (its group moved on, or is gone) is dropped (coordinator ABI
    /// 3.6).
    AssignorDone {
        /// The call's id.
        call: u64,
        /// What the call returned.
        result: Result<drover_abi::assignor::Assignment, drover_abi::PluginError>,
    },
    /// The topics the principal of `conn` may Describe, replacing the previous list:
    /// pattern subscriptions of members on `conn` match only these (KAFKA-18813;
    /// `core::topic_scope`). Sent by a host with an authorizer when the connection
    /// attaches and after each [`Output::WantTopicScope`] (coordinator ABI 3.9).
    TopicScope {
        /// The connection.
        conn: ConnId,
        /// The topics.
        topics: std::collections::BTreeSet<TopicName>,
    },
}

/// Which offsets an [`Output::FetchOffsets`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchScope {
    /// These partitions.
    Partitions(Vec<TopicPartition>),
    /// Every offset the group has committed (FetchOffsets with null `topics`).
    WholeGroup,
}

/// An action for the host, in the order returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The answer to the oldest unanswered request on `conn` (a frame without the size
    /// prefix; the host adds it). Answers leave in request order.
    Answer {
        /// The connection.
        conn: ConnId,
        /// The frame bytes after the size prefix.
        bytes: Bytes,
    },
    /// A request the coordinator sends on channel `conn` (Heartbeat, StopFetcher,
    /// StartFetcher), a frame without the size prefix.
    Push {
        /// The channel.
        conn: ConnId,
        /// The frame bytes after the size prefix.
        bytes: Bytes,
    },
    /// `conn` became a coordinator channel; precedes the RegisterConsumer answer that
    /// tells the consumer. Every later frame on `conn` answers a `Push`.
    ChannelOpened {
        /// The connection.
        conn: ConnId,
    },
    /// Close `conn`. The host answers with [`Input::ConnectionClosed`]; frames that
    /// arrive on it meanwhile are ignored.
    CloseConnection {
        /// The connection.
        conn: ConnId,
    },
    /// Write these offsets to the active offset store, as one batch; the result comes
    /// back as [`Input::OffsetsCommitted`]. At most one commit per group is outstanding,
    /// so batches of a group may be executed in any order relative to other groups.
    CommitOffsets {
        /// The operation id.
        op: OpId,
        /// The records.
        records: Vec<OffsetEntry>,
    },
    /// Read committed offsets; the result comes back as [`Input::OffsetsFetched`].
    FetchOffsets {
        /// The operation id.
        op: OpId,
        /// The group.
        group: GroupId,
        /// What to read.
        scope: FetchScope,
    },
    /// Delete a group's committed offsets: every one ([`FetchScope::WholeGroup`],
    /// DeleteGroups) or those of some partitions (OffsetDelete). The result comes back
    /// as [`Input::OffsetsDeleted`].
    DeleteOffsets {
        /// The operation id.
        op: OpId,
        /// The group.
        group: GroupId,
        /// What to delete.
        scope: FetchScope,
    },
    /// Record `pending` durably with its producer's transaction; the result comes back
    /// as [`Input::TxnOffsetsStaged`] (coordinator ABI 3.4).
    StageTxnOffsets {
        /// The operation id.
        op: OpId,
        /// The validated offsets of one TxnOffsetCommit.
        pending: PendingTxnOffsets,
    },
    /// [`Input::TxnCompleted`] `op` is applied: its offsets are in the store, or dropped.
    TxnCompletionApplied {
        /// The host's id from the input.
        op: u64,
    },
    /// Run this assignor call off the coordinator's thread and deliver its result as
    /// [`Input::AssignorDone`] (coordinator ABI 3.6; [`crate::assignor_job`]).
    RunAssignor(Arc<AssignorJob>),
    /// Send [`Input::TopicScope`] for `conn` again: a pattern member uses it and its
    /// scope is older than the refresh interval, or the topics changed (coordinator ABI
    /// 3.9). Only for connections with a scope.
    WantTopicScope {
        /// The connection.
        conn: ConnId,
    },
    /// Something operators care about, for logs.
    Event(Event),
    /// Adds `value` to one of Drover's coordinator counters. The counters, what each
    /// counts and how the host exports them: `drover_abi::coordinator::metrics`.
    Metric {
        /// The counter.
        counter: CoordinatorCounter,
        /// The increment (counters only go up).
        value: u64,
    },
}

/// Why a consumer was failed (docs/protocol.md §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// Nothing received on the channel for the session timeout.
    SessionTimeout,
    /// The channel closed.
    ChannelClosed,
    /// A malformed frame, a frame when no request was outstanding, or a wrong
    /// correlation id.
    ProtocolViolation,
    /// An answer with an error code other than NONE.
    ErrorResponse,
    /// A Heartbeat answer with `fetchers_healthy` false.
    FetchersUnhealthy,
    /// The same consumer id registered again.
    Replaced,
    /// A StartFetcher could not be encoded (the assignment is over a protocol limit).
    EncodeFailure,
}

impl FailureReason {
    /// Whether the failure releases the consumer's partitions at once (rule b) rather
    /// than after its lease (rule d).
    pub fn releases_at_once(self) -> bool {
        matches!(
            self,
            FailureReason::ErrorResponse | FailureReason::FetchersUnhealthy
        )
    }
}

/// A structured log/metric event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A consumer registered.
    MemberRegistered {
        /// The group.
        group: GroupId,
        /// The consumer.
        consumer: ConsumerId,
        /// The group's generation at registration.
        generation: Generation,
    },
    /// A consumer was failed and removed.
    MemberFailed {
        /// The group.
        group: GroupId,
        /// The consumer.
        consumer: ConsumerId,
        /// Why.
        reason: FailureReason,
    },
    /// A consumer left with LeaveGroup.
    MemberLeft {
        /// The group.
        group: GroupId,
        /// The consumer.
        consumer: ConsumerId,
    },
    /// A rebalance started (from `generation`).
    RebalanceStarted {
        /// The group.
        group: GroupId,
        /// The generation being ended.
        generation: Generation,
        /// `"incremental"` or `"eager"`.
        mode: &'static str,
    },
    /// The group switched to a new generation and sent its StartFetcher round.
    GenerationStarted {
        /// The group.
        group: GroupId,
        /// The new generation.
        generation: Generation,
        /// Live consumers in the round.
        members: usize,
    },
    /// Every consumer acknowledged its StartFetcher.
    RebalanceCompleted {
        /// The group.
        group: GroupId,
        /// The generation now in force.
        generation: Generation,
        /// Consumers in the group.
        members: usize,
    },
    /// The group's assignor failed or returned an invalid assignment; retried later.
    AssignorFailed {
        /// The group.
        group: GroupId,
        /// The assignor.
        assignor: String,
        /// What went wrong.
        message: String,
    },
    /// A rebalance of `group` ran the default assignor because the one its members
    /// name is not loaded (missing, refused, or removed by a rescan).
    AssignorFallback {
        /// The group.
        group: GroupId,
        /// The assignor the members named.
        requested: String,
        /// The assignor used instead (the default).
        used: String,
    },
    /// An offset-store commit failed.
    CommitFailed {
        /// The group.
        group: GroupId,
        /// Records in the batch.
        records: usize,
        /// Whether the records will be retried.
        retrying: bool,
        /// The store's message.
        message: String,
    },
    /// An offset fetch for a rebalance failed; retried later.
    OffsetFetchFailed {
        /// The group.
        group: GroupId,
        /// The store's message.
        message: String,
    },
    /// A connection was closed for a protocol violation (malformed frame, coordinator
    /// API sent as a request).
    ConnectionRejected {
        /// The connection.
        conn: ConnId,
        /// Why.
        message: String,
    },
    /// An internal safety check caught a would-be double assignment; the partition was
    /// withheld. Never expected; reported loudly.
    SafetyCheckFailed {
        /// The group.
        group: GroupId,
        /// What was caught.
        message: String,
    },
    /// Cluster mode: the coordinator took slot `slot`; its groups' first rebalances
    /// wait until `takeover_until` (ms, the host's monotonic clock).
    SlotGained {
        /// The slot.
        slot: u32,
        /// No StartFetcher for a group of the slot before this time.
        takeover_until: u64,
    },
    /// Cluster mode: the coordinator gave up slot `slot` and dropped its groups.
    SlotLost {
        /// The slot.
        slot: u32,
        /// Groups dropped.
        groups: usize,
        /// Consumers whose channels were closed.
        consumers: usize,
        /// Accepted offsets not yet sent to the store, discarded.
        discarded_offsets: usize,
    },
}

impl Event {
    /// Writes the event to the log (`tracing`; through the plugin log bridge this
    /// reaches the broker's log): membership and rebalance milestones at info,
    /// failures at warn, a caught safety violation at error.
    pub fn log(&self) {
        match self {
            Event::MemberRegistered { .. } | Event::ConnectionRejected { .. } => {
                // Logged where they happen, with more context.
            }
            Event::MemberFailed {
                group,
                consumer,
                reason,
            } => tracing::info!(%group, %consumer, ?reason, "consumer failed"),
            Event::MemberLeft { group, consumer } => {
                tracing::info!(%group, %consumer, "consumer left")
            }
            Event::RebalanceStarted {
                group,
                generation,
                mode,
            } => tracing::info!(%group, %generation, mode, "rebalance started"),
            Event::GenerationStarted {
                group,
                generation,
                members,
            } => tracing::info!(%group, %generation, members, "generation started"),
            Event::RebalanceCompleted {
                group,
                generation,
                members,
            } => tracing::info!(%group, %generation, members, "rebalance completed"),
            Event::AssignorFailed {
                group,
                assignor,
                message,
            } => tracing::warn!(%group, assignor, error = %message, "assignor failed; retrying"),
            Event::AssignorFallback { .. } => {
                // Logged where it happens (`native::effects::effective_assignor`).
            }
            Event::CommitFailed {
                group,
                records,
                retrying,
                message,
            } => {
                tracing::warn!(%group, records, retrying, error = %message, "offset commit failed")
            }
            Event::OffsetFetchFailed { group, message } => {
                tracing::warn!(%group, error = %message, "offset fetch failed; retrying")
            }
            Event::SafetyCheckFailed { group, message } => {
                tracing::error!(%group, error = %message, "safety check failed")
            }
            Event::SlotGained {
                slot,
                takeover_until,
            } => tracing::info!(slot, takeover_until, "coordinator slot gained"),
            Event::SlotLost {
                slot,
                groups,
                consumers,
                discarded_offsets,
            } => tracing::info!(
                slot,
                groups,
                consumers,
                discarded_offsets,
                "coordinator slot lost; its groups dropped"
            ),
        }
    }
}
