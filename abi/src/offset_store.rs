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
