//! The coordinator plugin kind: the consumer group coordinator as a sans-IO state machine.
//!
//! The host owns sockets, timers and the offset store; the coordinator owns group state.
//! The host feeds it [`CoordinatorInput`]s with the current time and executes the
//! [`CoordinatorOutput`]s it returns; [`Coordinator::poll_timeout`] tells the host when to
//! deliver the next [`CoordinatorInput::TimerFired`]. A coordinator never reads a clock,
//! opens a socket or sleeps (docs/design.md, "The coordinator core is sans-IO").
//!
//! Times are milliseconds on the host's monotonic clock (`now_ms`), not wall time.
//!
//! ## The contract between host and coordinator
//! Everything the host needs to know about protocol state comes from outputs; the host
//! never decodes the coordinator's frames to learn it. The rules a coordinator must
//! follow (docs/plugins.md, "The coordinator contract", says the same with examples):
//! 1. Every request frame the host delivers with [`CoordinatorInput::Frame`] on a
//!    connection that is not a channel gets exactly one [`CoordinatorOutput::Answer`]
//!    on that connection, **in the order the requests arrived** (the host matches
//!    answers to requests by position and keeps them in request order with the broker's
//!    own answers on the same connection), or the coordinator closes the connection. An
//!    answer with no request waiting breaks the contract: the host closes the
//!    connection.
//! 2. A connection becomes a *channel* with [`CoordinatorOutput::ChannelOpened`], sent
//!    before the `Answer` that tells the client so (the native RegisterConsumer). From
//!    then on every frame read on it is delivered as the client's answer to a request the
//!    coordinator pushed, not as a request: the host reserves no answer for it.
//! 3. [`CoordinatorOutput::Push`] sends a coordinator-initiated request on a channel; a
//!    push on a connection that is not a channel breaks the contract (the host closes
//!    it). The host closes a channel whose client does not read (its queue is full).
//! 4. After [`CoordinatorOutput::CloseConnection`] the host answers with
//!    [`CoordinatorInput::ConnectionClosed`]; frames already on their way are dropped.
//! 5. Offset operations carry coordinator-chosen ids; each gets exactly one result
//!    input with the same id. At most one `CommitOffsets` per group is in flight.
//! 6. Inputs and outputs are non-exhaustive: a variant this build does not know arrives
//!    as an `Err` from `into_enum()`. The SDK hands unknown inputs to
//!    [`crate::sdk::CoordinatorPlugin::unknown_input`] (default: logged and skipped);
//!    the host logs and skips unknown outputs.
//! 7. Times are ms of the host's monotonic clock; the host delivers
//!    [`CoordinatorInput::TimerFired`] at or after the deadline of
//!    [`Coordinator::poll_timeout`].
//! 8. (3.4) Transactional offsets: docs/plugins.md, "The coordinator contract", rule 8.
//! 9. (3.6) [`CoordinatorOutput::RunAssignor`] hands the host an assignor call to run
//!    off the coordinator's thread, under the assignor's time budget
//!    (`coordinator.assignor_timeout_ms`); its result comes back as exactly one
//!    [`CoordinatorInput::AssignorDone`] with the same `op` (assignor call ids are a
//!    space of their own, apart from offset operations). Meanwhile every other input
//!    is delivered as usual: one slow strategy holds only the groups waiting for it.
//! 10. (3.9) Topic scopes: with an authorizer, every connection gets a
//!     [`CoordinatorInput::TopicScope`] before its first frame; pattern subscriptions
//!     of members on it match only those topics; [`CoordinatorOutput::WantTopicScope`]
//!     asks for a fresh one, which arrives as another `TopicScope`.

pub mod metrics;

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    nonexhaustive_enum::NonExhaustiveFor,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, ROption, RResult, RString, RVec},
    StableAbi,
};

use crate::{
    assignor::{Assignment, AssignorArc, BrokerContext, TopicContext},
    error::PluginError,
    host::{HostServices, ZkSessionArc},
    manifest::Manifest,
    offset_store::OffsetRecord,
    types::{TopicInfo, TopicPartitions},
};

/// An assignor the coordinator may select for a group, by name.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct NamedAssignor {
    /// The assignor's manifest name (`range`, `round-robin`, `sticky`, ...).
    pub name: RString,
    /// The instance.
    pub assignor: AssignorArc,
}

impl std::fmt::Debug for NamedAssignor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedAssignor")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What the coordinator gets at startup, standalone or in cluster mode.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct CoordinatorStartup {
    /// This broker's id.
    pub broker_id: i32,
    /// Every loaded assignor.
    pub assignors: RVec<NamedAssignor>,
    /// The assignor for groups that name none (config `coordinator.default_assignor`).
    pub default_assignor: RString,
    /// Every topic the broker knows, with partition counts.
    pub topics: RVec<TopicInfo>,
}

/// What the coordinator additionally gets when ZooKeeper is enabled (cluster mode).
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct ZkCoordinatorStartup {
    /// The same as standalone.
    pub base: CoordinatorStartup,
    /// Number of coordinator slots; a group belongs to slot hash(group) mod `slot_count`.
    pub slot_count: u32,
    /// The broker's ZooKeeper session.
    pub session: ZkSessionArc,
}

/// A topic's id, as Kafka's Metadata reports it (KIP-516).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct TopicId {
    /// Topic name.
    pub name: RString,
    /// The id: a UUID's 16 bytes, most significant first.
    pub id: [u8; 16],
}

/// An event the host delivers to the coordinator. Crosses the boundary as
/// [`CoordinatorInputNE`]; later minors may add variants (module docs, rule 6).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone)]
#[sabi(kind(WithNonExhaustive(size = [usize; 12], traits(Debug, Clone))))]
#[non_exhaustive]
pub enum CoordinatorInput {
    /// A complete request or response frame (Kafka framing, without the 4-byte size
    /// prefix) received on connection `conn`, which the host routes to the coordinator.
    Frame {
        /// Host-assigned connection id, unique for the broker's lifetime.
        conn: u64,
        /// The frame bytes.
        bytes: RVec<u8>,
    },
    /// Connection `conn` sent its first request for the coordinator; `peer` is the
    /// client's IP address (Kafka's DescribeGroups shows it as the member's host).
    ConnectionOpened {
        /// The connection id.
        conn: u64,
        /// The client's IP address, as text.
        peer: RString,
    },
    /// Connection `conn` closed (by the peer, by an error or by a `CloseConnection`).
    ConnectionClosed {
        /// The connection id.
        conn: u64,
    },
    /// The deadline from [`Coordinator::poll_timeout`] has passed.
    TimerFired,
    /// The topic metadata changed; `topics` is the whole new list.
    TopicsChanged {
        /// Every topic with its partition count.
        topics: RVec<TopicInfo>,
    },
    /// The result of a [`CoordinatorOutput::CommitOffsets`] with the same `op`.
    OffsetsCommitted {
        /// The operation id from the output.
        op: u64,
        /// `ROk` once durable.
        result: RResult<(), PluginError>,
    },
    /// The result of a [`CoordinatorOutput::FetchOffsets`] with the same `op`.
    OffsetsFetched {
        /// The operation id from the output.
        op: u64,
        /// The committed offsets found (absent partitions have none).
        result: RResult<RVec<OffsetRecord>, PluginError>,
    },
    /// The result of a [`CoordinatorOutput::DeleteOffsets`] with the same `op`.
    OffsetsDeleted {
        /// The operation id from the output.
        op: u64,
        /// The number of committed offsets deleted.
        result: RResult<u64, PluginError>,
    },
    /// The id of every topic, replacing the previous list; the host sends it before
    /// every `TopicsChanged` and once after startup. Kafka's KIP-848 APIs name topics by
    /// id.
    TopicIds {
        /// Every topic with its id.
        topics: RVec<TopicId>,
    },
    /// The set of loaded assignors changed (`drover plugins rescan` loaded a new or a
    /// newer file, or a file was removed); `assignors` is the whole new set. Rebalances
    /// that start from now on use it; one in progress may finish with the instance it
    /// started with. A group whose assignor is no longer in the set falls back to
    /// `default_assignor`. Added in coordinator ABI 3.1: a 3.0 coordinator receives it
    /// as an unknown variant.
    AssignorsChanged {
        /// Every loaded assignor, by name.
        assignors: RVec<NamedAssignor>,
        /// The assignor for groups that name none or name one that is not loaded.
        default_assignor: RString,
    },
    /// What the broker measures of its partitions, for assignors
    /// ([`crate::assignor::AssignContext`]): the whole table, replacing the previous
    /// one. The host sends it every `coordinator.partition_stats_interval_ms` (default
    /// 10,000 ms), once at startup and after every topic change. Added in coordinator
    /// ABI 3.3: the host sends it only to a coordinator built against 3.3 or later (an
    /// older one would receive it as an unknown variant and skip it).
    ///
    /// Size: one [`PartitionContext`](crate::assignor::PartitionContext) (96 bytes on 64-bit targets) per
    /// partition the broker has data about, plus one [`TopicContext`] per topic.
    PartitionStats {
        /// Every live broker with its rack (`server.rack`): standalone, this broker
        /// (id `server.broker_id`); in cluster mode, every registered broker.
        brokers: RVec<BrokerContext>,
        /// Per topic, its partitions in ascending order, each at most once. Per
        /// partition: `leader` (this broker standalone; from the cluster metadata in
        /// cluster mode, `None` while the leader is down), and for a partition this
        /// broker leads its `log_start_offset`, `log_end_offset` and produce rates
        /// (bytes and records per second over `coordinator.produce_rate_window_ms`);
        /// `None` for a partition led elsewhere. `committed_offset` is always `None`
        /// (the coordinator knows the group's own).
        topics: RVec<TopicContext>,
    },
    /// The result of a [`CoordinatorOutput::StageTxnOffsets`] with the same `op`:
    /// `error_code` 0 once the host recorded the pending offsets durably with their
    /// transaction; otherwise the Kafka error code the coordinator answers the
    /// TxnOffsetCommit with for every partition it accepted (COORDINATOR_NOT_AVAILABLE,
    /// 15, when the broker has no transaction coordinator). Added in coordinator ABI 3.4.
    TxnOffsetsStaged {
        /// The operation id from the output.
        op: u64,
        /// A Kafka error code; 0 = recorded.
        error_code: i16,
    },
    /// Transactional offsets the host already recorded durably, of transactions still
    /// open: sent once at startup (and when a coordinator slot is gained in cluster
    /// mode), before client traffic. The coordinator holds them as pending for their
    /// (group, producer id) without staging them again. Added in coordinator ABI 3.4.
    TxnOffsetsPending {
        /// Per (group, producer id, epoch), the pending offsets.
        pending: RVec<PendingTxnOffsets>,
    },
    /// Transaction `producer_id`/`producer_epoch` ended: `committed` makes that
    /// producer's pending offsets of every group committed offsets (through the
    /// coordinator's commit path to the offset store); otherwise they are dropped. The
    /// coordinator answers with [`CoordinatorOutput::TxnCompletionApplied`] `op` once
    /// done (the store acknowledged the commits, or nothing was pending). Idempotent: a
    /// repeat finds nothing pending and is just acknowledged. Added in coordinator ABI
    /// 3.4.
    TxnCompleted {
        /// Host-chosen operation id, echoed by `TxnCompletionApplied`.
        op: u64,
        /// The transactional producer's id (KIP-98).
        producer_id: i64,
        /// The epoch whose transaction ended; pending offsets staged with this epoch or
        /// an earlier one are resolved.
        producer_epoch: i16,
        /// `true`: commit; `false`: abort.
        committed: bool,
    },
    /// The result of [`CoordinatorOutput::RunAssignor`] `op` (rule 9): the assignor's
    /// output, unchecked (the coordinator checks it), or its error. A call abandoned
    /// past its time budget, or refused because the plugin is still busy with an
    /// abandoned one, is an [`crate::ErrorKind::Unavailable`] error. Added in
    /// coordinator ABI 3.6.
    AssignorDone {
        /// The call's id from the output.
        op: u64,
        /// What the call returned.
        result: RResult<Assignment, PluginError>,
    },
    /// The topics the principal of connection `conn` may Describe (its *topic scope*,
    /// KAFKA-18813): the whole list, replacing the previous one. A regex or pattern
    /// subscription of a member on `conn` matches only these topics. The host sends it
    /// only when an authorizer is configured, to a coordinator of ABI 3.9 or later:
    /// once when the connection attaches, before its first frame, and as the answer to
    /// each [`CoordinatorOutput::WantTopicScope`]. A connection without one is not
    /// scoped (no authorizer). Added in coordinator ABI 3.9.
    ///
    /// Size: one name per describable topic (at most every topic of the broker).
    TopicScope {
        /// The connection.
        conn: u64,
        /// Topic names, each at most once.
        topics: RVec<RString>,
    },
}

/// Offsets a transactional producer committed for `group` with TxnOffsetCommit (API
/// 28, KIP-98/KIP-447), visible only once its transaction commits. Added in
/// coordinator ABI 3.4.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct PendingTxnOffsets {
    /// The consumer group id.
    pub group: RString,
    /// The transactional producer's id.
    pub producer_id: i64,
    /// The producer's epoch when it sent them.
    pub producer_epoch: i16,
    /// The offsets (`group` equal to the field above; `commit_time_ms` the broker's
    /// wall clock, ms since the epoch, when they were staged).
    pub offsets: RVec<OffsetRecord>,
}

/// [`CoordinatorInput`] as it crosses the boundary: a fixed-size, non-exhaustive
/// wrapper (`abi_stable`'s `NonExhaustive`); `into_enum()` is `Err` for a variant added
/// by a later minor than the receiver was built against.
pub type CoordinatorInputNE = NonExhaustiveFor<CoordinatorInput>;

/// An action the coordinator asks the host to perform. Crosses the boundary as
/// [`CoordinatorOutputNE`]; the rules of each are in the module docs.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone)]
#[sabi(kind(WithNonExhaustive(size = [usize; 12], traits(Debug, Clone))))]
#[non_exhaustive]
pub enum CoordinatorOutput {
    /// The answer to the oldest unanswered request on `conn` (rule 1): `bytes` is a
    /// response frame without the size prefix (the host adds it).
    Answer {
        /// The connection id.
        conn: u64,
        /// The frame bytes.
        bytes: RVec<u8>,
    },
    /// A request the coordinator sends on channel `conn` (rule 3): a frame without the
    /// size prefix. The client's answer comes back as a `Frame` input.
    Push {
        /// The connection id; must be a channel.
        conn: u64,
        /// The frame bytes.
        bytes: RVec<u8>,
    },
    /// `conn` is now a coordinator channel (rule 2). Sent before the `Answer` that tells
    /// the client; every later frame read on `conn` is a `Frame` input that answers a
    /// `Push`.
    ChannelOpened {
        /// The connection id.
        conn: u64,
    },
    /// Close connection `conn`; the host answers with `ConnectionClosed`.
    CloseConnection {
        /// The connection id.
        conn: u64,
    },
    /// Commit `records` to the active offset store; the result comes back as
    /// `OffsetsCommitted { op }`.
    CommitOffsets {
        /// Coordinator-chosen operation id.
        op: u64,
        /// The records to commit, as one batch.
        records: RVec<OffsetRecord>,
    },
    /// Fetch committed offsets; the result comes back as `OffsetsFetched { op }`.
    FetchOffsets {
        /// Coordinator-chosen operation id.
        op: u64,
        /// The group.
        group: RString,
        /// The partitions to fetch. **Empty means every committed offset of the group**
        /// (the host calls the store's `fetch_group`), as a FetchOffsets request with
        /// null topics asks (docs/protocol.md §5.6).
        partitions: RVec<TopicPartitions>,
    },
    /// Delete committed offsets of `group`: the result comes back as
    /// `OffsetsDeleted { op }`.
    DeleteOffsets {
        /// Coordinator-chosen operation id.
        op: u64,
        /// The group.
        group: RString,
        /// The partitions whose offsets to delete. **Empty means every committed offset
        /// of the group** (the host calls the store's `delete_group`; DeleteGroups).
        /// Otherwise (OffsetDelete) the host reads the group's offsets, deletes the
        /// group and commits back the others: not atomic across a crash, since the
        /// store interface has no per-partition delete.
        partitions: RVec<TopicPartitions>,
    },
    /// Adds `value` to the counter `name` in the host's metrics
    /// (`drover_coordinator_events_total{name}`). Counters only: zero adds nothing and a
    /// negative value is ignored. What the host exports, and the names Drover's own
    /// coordinator uses: [`metrics`].
    Metric {
        /// The counter's name, `snake_case` ([`metrics::CoordinatorCounter::name`] for
        /// Drover's own; any other name is counted too).
        name: RString,
        /// The increment.
        value: i64,
    },
    /// Record `pending` durably with its producer's open transaction (a TxnOffsetCommit
    /// the coordinator validated); the result comes back as
    /// [`CoordinatorInput::TxnOffsetsStaged`] `op`, and only then does the coordinator
    /// answer the request. Added in coordinator ABI 3.4: the host sends TxnOffsetCommit
    /// only to a coordinator of 3.4 or later.
    StageTxnOffsets {
        /// Coordinator-chosen operation id.
        op: u64,
        /// The offsets to record with the transaction.
        pending: PendingTxnOffsets,
    },
    /// The [`CoordinatorInput::TxnCompleted`] with the same `op` is fully applied.
    /// Added in coordinator ABI 3.4.
    TxnCompletionApplied {
        /// The operation id from the input.
        op: u64,
    },
    /// Run `job` (one assignor call: the assignor, its input and context, all owned by
    /// the job) off the coordinator's thread and deliver its result as
    /// [`CoordinatorInput::AssignorDone`] `op` (rule 9). The job calls an assignor
    /// instance the host handed the coordinator (`NamedAssignor`), so the host's
    /// time budget applies. Added in coordinator ABI 3.6 (Kafka's KIP-1263 moves
    /// assignments off the group coordinator's thread the same way).
    RunAssignor {
        /// Coordinator-chosen call id.
        op: u64,
        /// The call.
        job: AssignorJobArc,
    },
    /// Send [`CoordinatorInput::TopicScope`] for `conn` again: the coordinator's copy
    /// is older than its refresh interval, or the topics changed, and a member on
    /// `conn` subscribes by pattern. Emitted only for connections that have a scope;
    /// the host ignores it for a connection that closed. Added in coordinator ABI 3.9.
    WantTopicScope {
        /// The connection.
        conn: u64,
    },
}

/// One assignor call, prepared by the coordinator and run by the host on a thread of
/// its own ([`CoordinatorOutput::RunAssignor`]). Added in coordinator ABI 3.6; methods
/// grow at the end with default bodies.
#[sabi_trait]
pub trait AssignorJob: Send + Sync {
    /// Runs the call: the assignor's output (unchecked) or its error. Called once, from
    /// a host thread that is not the coordinator's; it may take as long as the
    /// assignor does, up to the host's budget.
    fn run(&self) -> RResult<Assignment, PluginError>;
    /// The group the call assigns (for logs and the admin API).
    fn group(&self) -> RString;
    /// The assignor's name (`NamedAssignor::name`).
    #[sabi(last_prefix_field)]
    fn assignor(&self) -> RString;
}

/// An [`AssignorJob`] as it crosses the boundary: shared, because outputs are
/// `Clone` (the host runs it once).
pub type AssignorJobArc = RArc<AssignorJob_TO<'static, RBox<()>>>;

impl std::fmt::Debug for AssignorJob_TO<'static, RBox<()>> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssignorJob")
            .field("group", &self.group())
            .field("assignor", &self.assignor())
            .finish_non_exhaustive()
    }
}

/// [`CoordinatorOutput`] as it crosses the boundary (see [`CoordinatorInputNE`]).
pub type CoordinatorOutputNE = NonExhaustiveFor<CoordinatorOutput>;

/// The coordinator interface across the boundary. Called from one host thread at a time.
#[sabi_trait]
pub trait Coordinator: Send {
    /// Feeds one input at time `now_ms`; returns the outputs to execute in order.
    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInputNE,
    ) -> RResult<RVec<CoordinatorOutputNE>, PluginError>;
    /// When the coordinator next needs a `TimerFired` (ms on the same clock), if ever.
    fn poll_timeout(&self) -> ROption<u64>;
    /// This broker now owns coordinator slot `slot` (cluster mode). Its previous owner
    /// has not coordinated the slot for at least `stopped_ms` ms (0 when the host cannot
    /// tell): the coordinator may shorten its takeover wait by that much
    /// (docs/protocol.md §6.8).
    fn slot_gained(
        &mut self,
        now_ms: u64,
        slot: u32,
        stopped_ms: u64,
    ) -> RResult<RVec<CoordinatorOutputNE>, PluginError>;
    /// This broker no longer owns coordinator slot `slot` (cluster mode).
    fn slot_lost(
        &mut self,
        now_ms: u64,
        slot: u32,
    ) -> RResult<RVec<CoordinatorOutputNE>, PluginError>;
    /// The broker is stopping: final outputs (commits, closes). No call follows.
    #[sabi(last_prefix_field)]
    fn shutdown(&mut self, now_ms: u64) -> RResult<RVec<CoordinatorOutputNE>, PluginError>;
}

/// An owned coordinator instance.
pub type CoordinatorBox = Coordinator_TO<'static, RBox<()>>;

/// Root module of a coordinator plugin.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = CoordinatorModRef)))]
pub struct CoordinatorMod {
    /// What the plugin is; `kind` is [`crate::ManifestKind::Coordinator`].
    pub manifest: Manifest,
    /// Starts a standalone coordinator (no ZooKeeper): it owns every group.
    pub startup:
        extern "C" fn(HostServices, CoordinatorStartup) -> RResult<CoordinatorBox, PluginError>,
    /// Starts a coordinator in cluster mode; it owns no slot until `slot_gained`.
    #[sabi(last_prefix_field)]
    pub startup_zookeeper:
        extern "C" fn(HostServices, ZkCoordinatorStartup) -> RResult<CoordinatorBox, PluginError>,
}

impl RootModule for CoordinatorModRef {
    declare_root_module_statics! {CoordinatorModRef}
    const BASE_NAME: &'static str = "drover_coordinator";
    const NAME: &'static str = "drover_coordinator";
    const VERSION_STRINGS: VersionStrings = crate::version::COORDINATOR_VERSION_STRINGS;
}
