//! Drover's embedded default offset store, plugin `embedded`: committed offsets in a
//! local [redb](https://docs.rs/redb) database file.
//!
//! # Configuration
//!
//! ```toml
//! [plugins.config.embedded]
//! path = "/var/lib/drover/offsets.redb"   # required; the parent directory is created
//! max_metadata_bytes = 4096               # optional; longer commit metadata is refused
//! ```
//!
//! # Layout
//!
//! One table, `offsets`, maps the tuple key `(group, topic, partition)` to
//! `(offset, commit_time_ms, metadata)`. redb orders tuple keys field by field (strings
//! by bytes, the partition as a signed integer), which is exactly the ABI's key order, so
//! a group's offsets are one contiguous key range, `scan` is a range query starting
//! strictly after the caller's key, and `list_groups` seeks from group to group. See
//! [`layout`].
//!
//! # Durability and atomicity
//!
//! Each `commit` batch is written in one redb write transaction with
//! [`redb::Durability::Immediate`]: `commit` returns `Ok` only after redb's commit has
//! been `fsync`ed, so the batch survives `kill -9` (and power loss, on storage that
//! honours `fsync`), and redb's copy-on-write B-trees plus its checksummed commit slots
//! make the whole batch appear at once or not at all. After a crash, opening the file runs redb's repair. Concurrent
//! commits share transactions (group commit, see `drover_offsets_common::group_commit`),
//! so many committers pay for one `fsync` together; each still returns only once its own batch is durable.
//! `flush` therefore has nothing to do. `delete_group` is durable on return as well.
//!
//! Reads use redb read transactions (MVCC snapshots): they never block on writers and
//! see only whole batches.
//!
//! # Errors
//!
//! See [`errors`] for how redb failures map onto the ABI's error kinds. Invalid input
//! (negative partition, metadata over the limit) refuses the whole batch. After `close`
//! every call returns `Closed`.

pub mod config;
pub mod errors;
pub mod layout;
pub mod share_state;
pub mod store;

#[cfg(test)]
mod tests;

use drover_abi::{
    sdk::{OffsetStorePlugin, PluginContext, PluginInfo},
    OffsetKey, OffsetRecord, PluginError, ShareStateRecord, TopicPartitions,
};

use crate::{config::Config, store::Store};

/// The `embedded` offset-store plugin: a [`Store`] opened from the plugin's config.
pub struct EmbeddedStore {
    store: Store,
}

impl EmbeddedStore {
    /// Opens a store from a config string (the TOML the host passes the plugin).
    pub fn open_with_config(config: &str) -> Result<EmbeddedStore, PluginError> {
        Ok(EmbeddedStore {
            store: Store::open(Config::parse(config)?)?,
        })
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl PluginInfo for EmbeddedStore {
    const NAME: &'static str = "embedded";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "embedded crash-safe offset store (redb file)";
}

impl OffsetStorePlugin for EmbeddedStore {
    fn open(ctx: &PluginContext) -> Result<Self, PluginError> {
        EmbeddedStore::open_with_config(&ctx.config)
    }

    fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        self.store.commit(batch)
    }

    fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        self.store.fetch(group, partitions)
    }

    fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        self.store.fetch_group(group)
    }

    fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        self.store.list_groups()
    }

    fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        self.store.delete_group(group)
    }

    fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        self.store.scan(after, limit)
    }

    fn flush(&self) -> Result<(), PluginError> {
        self.store.flush()
    }

    fn close(&self) -> Result<(), PluginError> {
        self.store.close()
    }

    fn delete_partitions(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        self.store.delete_partitions(group, partitions)
    }

    fn share_state_supported(&self) -> bool {
        true
    }

    fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), PluginError> {
        self.store.write_share_state(batch)
    }

    fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        self.store.read_share_state(group, partitions)
    }

    fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        self.store.delete_share_state(group, partitions)
    }

    fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        self.store.scan_share_state(after, limit)
    }
}

drover_abi::export_offset_store!(EmbeddedStore);
