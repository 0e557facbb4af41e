//! Drover's ZooKeeper offset store, plugin `zookeeper`: committed offsets as ZooKeeper
//! nodes, in the layout of the original design (and of Kafka's ZooKeeper offset storage).
//!
//! # Configuration
//!
//! ```toml
//! [plugins.config.zookeeper]
//! connect = "zk1:2181,zk2:2181,zk3:2181"  # required standalone; host:port pairs, no path
//! chroot = "/drover"                       # optional; created when missing (see below)
//! session_timeout_ms = 18000               # optional; asked of the server
//! request_timeout_ms = 10000               # optional; bound on each ZooKeeper wait
//! max_metadata_bytes = 4096                # optional; longer commit metadata is refused
//! max_multi_bytes = 524288                 # optional; bound on one multi-operation
//! ```
//!
//! See [`config`] for the ranges.
//!
//! # Which ZooKeeper session
//!
//! - **Standalone broker** (`HostServices.zookeeper` is `RNone`): the store opens its
//!   own session from `connect` ([`connection`]); `connect` is required and `chroot`
//!   is an absolute path on that ensemble.
//! - **Cluster mode** (the broker lends its session in [`PluginContext::zookeeper`]):
//!   the store uses the broker's session (the ABI's synchronous `ZkSession`) and opens
//!   none of its own. Paths are then relative to the broker's chroot: `chroot` names
//!   the store's root below it (default `/`, the broker's chroot itself), so offsets
//!   live at `<broker chroot><chroot>/consumers/...`; `connect` may be left out and is
//!   ignored (as is `session_timeout_ms`; the host bounds every call by the broker's
//!   session timeout, and `request_timeout_ms` does not apply). Opening makes no
//!   request, because the broker may not be connected yet: the first commit creates the
//!   root. The store follows the broker across session expiries.
//!
//! The store logs once at open which session it uses. The logic — layout, batching into
//! multi-operations, size limits, conflict retries — is the same over both
//! ([`backend`]).
//!
//! # Layout
//!
//! `<chroot>/consumers/<group>/offsets/<topic>/<partition>`, one node per committed
//! offset, whose value is a small JSON object:
//! `{"version":1,"offset":42,"metadata":"…","commit_time_ms":1700000000000}`. Group and
//! topic names are escaped into node names where needed (`/`, `%`, non-ASCII, control
//! characters, `.`, `..`, the empty name); see [`layout`] for the exact rules and for
//! reading values written by Kafka 0.8 (a plain decimal offset).
//!
//! # Atomicity and durability
//!
//! A `commit` first keeps only the last record of each key, then plans which nodes must
//! be created (partition nodes and missing parents, found with batched multi-reads)
//! and which overwritten, and sends the writes as ZooKeeper
//! multi-operations: one multi is applied entirely or not at all. A multi is bounded by
//! `max_multi_bytes` (ZooKeeper refuses requests larger than its `jute.maxbuffer`, 1 MiB
//! by default):
//!
//! - a batch that fits in one multi — with the defaults about 2,800 records with short
//!   names and empty metadata, or about 120 with 4 KiB of metadata each — is
//!   **atomic**: all of it becomes visible at once, or, on error, none of it;
//! - a larger batch is split into several multis, sent one after the other, keeping each
//!   group's records in one multi whenever they fit in one. Across multis there is **no
//!   atomicity**: readers may see the first multis of a batch before the last ones, and
//!   when `commit` fails, the multis before the failing one stay applied. The caller
//!   treats a failed batch as not committed (the ABI's contract) and normally retries
//!   it; committing a record again is harmless.
//!
//! A multi that fails because another writer created or deleted one of its nodes in the
//! meantime is re-planned and sent again (up to [`store::MAX_CONFLICTS`] times). ZooKeeper
//! acknowledges a write once it is in the transaction log of a quorum of servers, so a
//! commit that returned `Ok` survives a crash of the broker; `flush` has nothing to do.
//! Like every ZooKeeper client, a commit that failed with a lost connection or a timeout
//! may nevertheless have been applied.
//!
//! # Availability
//!
//! With its own session, every ZooKeeper request is bounded by `request_timeout_ms`:
//! while ZooKeeper is down, calls fail with `Unavailable` (retriable) after at most
//! about that long, never hang. The session reconnects by itself, and a new session is
//! opened when the old one has expired, so service resumes when ZooKeeper is back. See
//! [`connection`] and [`errors`]. Over the broker's session the host gives the same
//! guarantees, with its session timeout as the bound, and the broker opens the new
//! session after an expiry (calls in between wait for it, within that bound).
//!
//! # Errors
//!
//! Invalid input (negative partition, metadata over the limit, a record too large for a
//! multi) refuses the whole batch with `InvalidInput`. A node value this store cannot
//! decode is `Internal`, naming the node. After `close` every call returns `Closed`.

pub mod backend;
pub mod config;
pub mod connection;
pub mod errors;
pub mod layout;
pub mod store;

#[cfg(test)]
mod tests;

use drover_abi::{
    sdk::{OffsetStorePlugin, PluginContext, PluginInfo},
    OffsetKey, OffsetRecord, PluginError, ShareStateRecord, TopicPartitions,
};

use crate::{
    config::{Config, SessionSource},
    store::Store,
};

/// The `zookeeper` offset-store plugin: a [`Store`] opened from the plugin's config.
pub struct ZookeeperStore {
    store: Store,
}

impl ZookeeperStore {
    /// Opens a store with its own session from a config string (the TOML the host
    /// passes the plugin). Errors: `InvalidConfig` (see [`Config::parse`]),
    /// `Unavailable` when ZooKeeper cannot be reached (see [`Store::open`]).
    pub fn open_with_config(config: &str) -> Result<ZookeeperStore, PluginError> {
        Ok(ZookeeperStore {
            store: Store::open(Config::parse(config)?)?,
        })
    }

    /// Opens a store over the broker's ZooKeeper `session` (cluster mode) from a config
    /// string; paths are below the broker's chroot. Errors: `InvalidConfig` only (see
    /// [`Config::parse_for`]); no ZooKeeper request is made.
    pub fn open_with_session(
        config: &str,
        session: drover_abi::host::ZkSessionArc,
    ) -> Result<ZookeeperStore, PluginError> {
        let config = Config::parse_for(config, SessionSource::Broker)?;
        Ok(ZookeeperStore {
            store: Store::open_with_session(config, session),
        })
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl PluginInfo for ZookeeperStore {
    const NAME: &'static str = "zookeeper";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "offset store in ZooKeeper (consumers/<group>/offsets/...)";
}

impl OffsetStorePlugin for ZookeeperStore {
    fn open(ctx: &PluginContext) -> Result<Self, PluginError> {
        match &ctx.zookeeper {
            Some(session) => ZookeeperStore::open_with_session(&ctx.config, session.clone()),
            None => ZookeeperStore::open_with_config(&ctx.config),
        }
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

drover_abi::export_offset_store!(ZookeeperStore);
