//! Drover's PostgreSQL offset store, plugin `postgres`: committed offsets in a table of
//! a PostgreSQL database (10 or newer), which several brokers can share.
//!
//! # Configuration
//!
//! ```toml
//! [plugins.config.postgres]
//! url = "postgres://drover:secret@db.example:5432/drover"  # or the discrete keys below
//! # host = "db.example"          # default localhost; a path means a Unix socket directory
//! # port = 5432
//! # user = "drover"              # required (in `url` or here)
//! # password = "secret"          # may also accompany a `url` that has none
//! # dbname = "drover"            # default: the user's name
//! table = "drover_offsets"       # default; created when missing
//! # schema = "drover"            # default: the session's search_path; created when missing
//! pool_size = 4                  # connections, 1..=64
//! connect_timeout_ms = 5000      # one connection: TCP, authentication, session setup
//! statement_timeout_ms = 10000   # the sessions' statement_timeout
//! max_metadata_bytes = 4096      # longer commit metadata is refused
//! ```
//!
//! `url` takes a `postgres://` URL or a libpq `key=value` string, with the parameters
//! tokio-postgres understands (`sslmode=disable|prefer`, `application_name`, several
//! hosts, `target_session_attrs`, ...). This build has no TLS: `sslmode=require` is
//! refused. See [`config`].
//!
//! # Layout
//!
//! One table keyed by `(group_id, topic, partition)` holding `committed_offset`,
//! `metadata` and `commit_time_ms`, with group and topic in the `"C"` collation so the
//! primary key's order is the ABI's key order (the names' UTF-8 bytes). See [`layout`]
//! for the DDL and the statements. An existing table must have that layout (checked at
//! open). The database must be UTF-8 (or SQL_ASCII).
//!
//! # Durability and atomicity
//!
//! A `commit` batch is deduplicated (a later record for a key wins) and upserted in one
//! transaction; `commit` returns `Ok` only once PostgreSQL's `COMMIT` did, so the batch
//! survives `kill -9` of the broker (and of the database server, as far as its own
//! durability settings go: the store turns a server default of `synchronous_commit =
//! off` back on for its sessions). Concurrent commits share transactions (group
//! commit, see `drover_offsets_common::group_commit`). `delete_group` is one
//! autocommitted statement.
//! `flush` has nothing to do. Reads see only whole batches (each statement sees one
//! snapshot).
//!
//! # Connections, timeouts and failures
//!
//! The plugin runs its own tokio runtime (one I/O thread) for tokio-postgres and a pool
//! of up to `pool_size` connections; the host's threads call it synchronously. Every
//! call is bounded by `connect_timeout_ms + statement_timeout_ms`: a server that is down
//! or does not answer makes the call fail with `Unavailable` (retriable) within that
//! time, never hang; broken connections are replaced on the next call, so service
//! resumes by itself when the server is back. See [`pool`] and, for how errors map onto
//! the ABI's kinds, [`errors`].
//!
//! # Limitations
//!
//! PostgreSQL `text` cannot hold the NUL character: a commit whose group, topic or
//! metadata contains one is refused with `InvalidInput` (reads of such names find
//! nothing). Group and topic together must fit a B-tree index entry (about 2,700 bytes);
//! longer keys are refused with `InvalidInput`.

pub mod config;
pub mod errors;
pub mod layout;
pub mod pool;
pub mod share_state;
pub mod store;

use drover_abi::{
    sdk::{OffsetStorePlugin, PluginContext, PluginInfo},
    OffsetKey, OffsetRecord, PluginError, ShareStateRecord, TopicPartitions,
};

use crate::{config::Config, store::Store};

/// The `postgres` offset-store plugin: a [`Store`] opened from the plugin's config.
pub struct PostgresStore {
    store: Store,
}

impl PostgresStore {
    /// Opens a store from a config string (the TOML the host passes the plugin).
    pub fn open_with_config(config: &str) -> Result<PostgresStore, PluginError> {
        Ok(PostgresStore {
            store: Store::open(Config::parse(config)?)?,
        })
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl PluginInfo for PostgresStore {
    const NAME: &'static str = "postgres";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "offset store in a PostgreSQL table";
}

impl OffsetStorePlugin for PostgresStore {
    fn open(ctx: &PluginContext) -> Result<Self, PluginError> {
        PostgresStore::open_with_config(&ctx.config)
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

drover_abi::export_offset_store!(PostgresStore);
