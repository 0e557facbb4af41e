//! The coordinator plugin kind: the consumer group coordinator as a sans-IO state machine.
//!
//! The host owns sockets, timers and the offset store; the coordinator owns group state.
//! The host feeds it [`CoordinatorInput`]s with the current time and executes the
//! [`CoordinatorOutput`]s it returns; [`Coordinator::poll_timeout`] tells the host when to
//! deliver the next [`CoordinatorInput::TimerFired`]. A coordinator never reads a clock,
//! opens a socket or sleeps (DESIGN.md, "The coordinator core is sans-IO").
//!
//! Times are milliseconds on the host's monotonic clock (`now_ms`), not wall time.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RString, RVec},
    StableAbi,
};

use crate::{
    assignor::AssignorArc,
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

/// An event the host delivers to the coordinator.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone)]
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
}

/// An action the coordinator asks the host to perform.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone)]
pub enum CoordinatorOutput {
    /// Send `bytes` (a frame without the size prefix; the host adds it) on `conn`.
    SendFrame {
        /// The connection id.
        conn: u64,
        /// The frame bytes.
        bytes: RVec<u8>,
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
    /// A counter or gauge for the host's metrics (`drover_coordinator_<name>`).
    Metric {
        /// Metric name suffix.
        name: RString,
        /// Value: the new gauge value, or the increment of a counter.
        value: i64,
    },
}

/// The coordinator interface across the boundary. Called from one host thread at a time.
#[sabi_trait]
pub trait Coordinator: Send {
    /// Feeds one input at time `now_ms`; returns the outputs to execute in order.
    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> RResult<RVec<CoordinatorOutput>, PluginError>;
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
    ) -> RResult<RVec<CoordinatorOutput>, PluginError>;
    /// This broker no longer owns coordinator slot `slot` (cluster mode).
    fn slot_lost(
        &mut self,
        now_ms: u64,
        slot: u32,
    ) -> RResult<RVec<CoordinatorOutput>, PluginError>;
    /// The broker is stopping: final outputs (commits, closes). No call follows.
    #[sabi(last_prefix_field)]
    fn shutdown(&mut self, now_ms: u64) -> RResult<RVec<CoordinatorOutput>, PluginError>;
}

/// An owned coordinator instance.
pub type CoordinatorBox = Coordinator_TO<'static, RBox<()>>;

/// Root module of a coordinator plugin.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = CoordinatorModRef)))]
#[sabi(missing_field(panic))]
pub struct CoordinatorMod {
    /// What the plugin is; `kind` is [`crate::PluginKind::Coordinator`].
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
    const VERSION_STRINGS: VersionStrings = crate::ABI_VERSION_STRINGS;
}
