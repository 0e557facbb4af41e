//! The offset-store plugin kind: where committed offsets live.
//!
//! A store keeps (group, topic, partition) → (offset, metadata, commit time). The host
//! calls it from a blocking pool, from several threads at once, with batches; a commit
//! that returned `ROk` must survive a crash of the broker (`kill -9`). docs/design.md, "Offset
//! stores and hot swap", describes how the host moves offsets between stores using
//! [`OffsetStore::scan`].

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, ROption, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

use crate::{error::PluginError, host::HostServices, manifest::Manifest, types::TopicPartitions};

/// The key of one committed offset.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetKey {
    /// Consumer group id.
    pub group: RString,
    /// Topic name.
    pub topic: RString,
    /// Partition index.
    pub partition: i32,
}

/// One committed offset: what a commit writes and what fetches and scans return.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct OffsetRecord {
    /// Consumer group id.
    pub group: RString,
    /// Topic name.
    pub topic: RString,
    /// Partition index.
    pub partition: i32,
    /// The committed offset: the next record the group will consume.
    pub offset: i64,
    /// Client-supplied metadata string (Kafka's `committed_metadata`), possibly empty.
    /// Stores bound its length in UTF-8 bytes (`max_metadata_bytes`, Kafka's
    /// `offset.metadata.max.bytes`, default 4096) and refuse a batch with a longer one.
    pub metadata: RString,
    /// When the commit was accepted, in ms since the Unix epoch (broker clock).
    pub commit_time_ms: i64,
}

impl OffsetRecord {
    /// The record's key.
    pub fn key(&self) -> OffsetKey {
        OffsetKey {
            group: self.group.clone(),
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }
}

/// One run of a share-partition's in-flight window: consecutive offsets in one state
/// with one delivery count (offset-store ABI 3.2; Kafka's `PersisterStateBatch`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareStateRun {
    /// The first offset.
    pub first_offset: i64,
    /// The last offset (inclusive).
    pub last_offset: i64,
    /// The record state: 0 available, 1 acquired, 2 acknowledged, 4 archived (Kafka's
    /// `RecordState` ids). A store keeps the number as given.
    pub state: u8,
    /// How often these offsets were delivered.
    pub delivery_count: u16,
}

/// The durable state of one share-partition, a share group's view of one
/// topic-partition (KIP-932; offset-store ABI 3.2). A write replaces the whole record of
/// its key.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ShareStateRecord {
    /// Share group id.
    pub group: RString,
    /// Topic name.
    pub topic: RString,
    /// Partition index.
    pub partition: i32,
    /// The id (KIP-516) of the topic the state was written for, so the state of a
    /// deleted topic is not taken for a new topic of the same name; all zeros: unknown.
    pub topic_id: [u8; 16],
    /// The state epoch (Kafka's): raised each time the broker loads the state.
    pub state_epoch: i32,
    /// The share-partition start offset: every offset below is done with.
    pub start_offset: i64,
    /// The in-flight window from `start_offset`, in offset order. Stores bound how many
    /// runs they accept (at least 10,000: the window holds at most that many offsets).
    pub runs: RVec<ShareStateRun>,
    /// When it was written, in ms since the Unix epoch (broker clock).
    pub write_time_ms: i64,
}

impl ShareStateRecord {
    /// The record's key (the same shape as a committed offset's).
    pub fn key(&self) -> OffsetKey {
        OffsetKey {
            group: self.group.clone(),
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }
}

/// Most runs a [`ShareStateRecord`] holds: one per offset of the largest window
/// (`group.share.partition.max.record.locks` is at most 10,000). Stores refuse more
/// with `InvalidInput`.
pub const MAX_SHARE_STATE_RUNS: usize = 10_000;

/// The offset-store interface across the boundary. Plugin authors implement
/// [`crate::sdk::OffsetStorePlugin`] instead. All methods may be called concurrently.
///
/// Errors: [`crate::ErrorKind::Unavailable`] for a backend that is down (retriable),
/// [`crate::ErrorKind::Closed`] after [`OffsetStore::close`],
/// [`crate::ErrorKind::InvalidInput`] for values the store cannot hold.
#[sabi_trait]
pub trait OffsetStore: Send + Sync {
    /// Durably writes a batch. All records become visible together or, on error, the
    /// caller must treat the whole batch as not committed. Within a batch a later record
    /// for the same key wins.
    fn commit(&self, batch: RSlice<'_, OffsetRecord>) -> RResult<(), PluginError>;
    /// The committed offsets of `group` for the given partitions; partitions without a
    /// committed offset are absent from the result.
    fn fetch(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<RVec<OffsetRecord>, PluginError>;
    /// Every committed offset of `group` (empty for an unknown group).
    fn fetch_group(&self, group: RStr<'_>) -> RResult<RVec<OffsetRecord>, PluginError>;
    /// Every group with at least one committed offset, sorted.
    fn list_groups(&self) -> RResult<RVec<RString>, PluginError>;
    /// Deletes every offset of `group`, durably; returns how many were deleted.
    fn delete_group(&self, group: RStr<'_>) -> RResult<u64, PluginError>;
    /// Iterates everything in key order (group, topic, partition): up to `limit` records
    /// strictly after `after` (from the start when `RNone`). An empty page means the end.
    /// `limit` must be at least 1 (`InvalidInput` otherwise, so an empty page is never
    /// mistaken for the end).
    fn scan(
        &self,
        after: ROption<OffsetKey>,
        limit: u32,
    ) -> RResult<RVec<OffsetRecord>, PluginError>;
    /// Makes every acknowledged commit durable (a no-op for stores that are durable on
    /// commit).
    fn flush(&self) -> RResult<(), PluginError>;
    /// Flushes and releases the backend; later calls return `Closed`.
    #[sabi(last_prefix_field)]
    fn close(&self) -> RResult<(), PluginError>;

    /// Deletes the committed offsets of `group` for `partitions`, durably and all
    /// together (Kafka's OffsetDelete); returns how many existed. Added in offset-store
    /// ABI 3.1: optional. A store built against 3.0 has no such method, and the call
    /// returns [`crate::ErrorKind::Unsupported`] (this default) without entering it; so
    /// does a newer store that does not implement it. The host then falls back to
    /// reading the group, deleting it and committing back the rest.
    fn delete_partitions(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<u64, PluginError> {
        let _ = (group, partitions);
        RResult::RErr(PluginError::unsupported(
            "this offset store does not implement delete_partitions (offset-store ABI 3.1)",
        ))
    }

    /// Whether this store keeps share-group state (the four methods below). Added in
    /// offset-store ABI 3.2: a store built before reads as `false` (this default), and
    /// the host refuses it as a share-state target, saying so.
    fn share_state_supported(&self) -> bool {
        false
    }

    /// Durably writes share-partition states, all together; each replaces the record of
    /// its key (offset-store ABI 3.2). The host answers an acknowledgement only after
    /// this returned `ROk`, so it must survive `kill -9`.
    fn write_share_state(&self, batch: RSlice<'_, ShareStateRecord>) -> RResult<(), PluginError> {
        let _ = batch;
        RResult::RErr(share_state_unsupported())
    }

    /// The share-partition states of `group` for `partitions`; absent ones are left out
    /// (offset-store ABI 3.2).
    fn read_share_state(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<RVec<ShareStateRecord>, PluginError> {
        let _ = (group, partitions);
        RResult::RErr(share_state_unsupported())
    }

    /// Deletes `group`'s share-partition states of `partitions`, or all of the group's
    /// when `partitions` is empty, durably; returns how many existed (offset-store ABI
    /// 3.2).
    fn delete_share_state(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<u64, PluginError> {
        let _ = (group, partitions);
        RResult::RErr(share_state_unsupported())
    }

    /// Iterates every share-partition state in key order (group, topic, partition): up
    /// to `limit` strictly after `after` (from the start when `RNone`); an empty page is
    /// the end; `limit` at least 1 (offset-store ABI 3.2; what a swap copies).
    fn scan_share_state(
        &self,
        after: ROption<OffsetKey>,
        limit: u32,
    ) -> RResult<RVec<ShareStateRecord>, PluginError> {
        let _ = (after, limit);
        RResult::RErr(share_state_unsupported())
    }
}

/// What the share-state methods of a store without them answer.
fn share_state_unsupported() -> PluginError {
    PluginError::unsupported(
        "this offset store keeps no share-group state (offset-store ABI 3.2 added it)",
    )
}

/// A shareable offset-store instance.
pub type OffsetStoreArc = RArc<OffsetStore_TO<'static, RBox<()>>>;

/// Root module of an offset-store plugin.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = OffsetStoreModRef)))]
pub struct OffsetStoreMod {
    /// What the plugin is; `kind` is [`crate::ManifestKind::OffsetStore`].
    pub manifest: Manifest,
    /// Opens a store with the host's services and the plugin's config. Errors:
    /// [`crate::ErrorKind::InvalidConfig`], [`crate::ErrorKind::Unavailable`].
    #[sabi(last_prefix_field)]
    pub open: extern "C" fn(HostServices) -> RResult<OffsetStoreArc, PluginError>,
}

impl RootModule for OffsetStoreModRef {
    declare_root_module_statics! {OffsetStoreModRef}
    const BASE_NAME: &'static str = "drover_offset_store";
    const NAME: &'static str = "drover_offset_store";
    const VERSION_STRINGS: VersionStrings = crate::version::OFFSET_STORE_VERSION_STRINGS;
}
