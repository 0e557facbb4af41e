//! The offset-store suite: the contract of [`drover_abi::offset_store`].
//!
//! Properties, in the order [`run`] checks them (the names reports use):
//!
//! | property | what |
//! |---|---|
//! | `open` | the store opens with the given config |
//! | `round_trip` | committed records come back from `fetch` exactly (offset, metadata, commit time); absent partitions and unknown groups are absent |
//! | `later_record_wins` | within one batch, the later record for a key wins |
//! | `all_or_nothing` | a batch with one record the store must refuse (metadata longer than `max_metadata_bytes`) is refused as a whole: `InvalidInput`, nothing of it visible |
//! | `fetch_group` | every offset of a group, and only that group's |
//! | `list_groups` | every group with an offset, sorted, no repeats |
//! | `delete_group` | returns how many were deleted; they are gone, other groups stay; deleting again returns 0 |
//! | `scan_paging` | one large batch, then `scan` page by page: key order, no repeats, nothing missing; `limit` 0 is `InvalidInput` |
//! | `concurrent_commits` | several threads committing at once; every thread's last batch is what remains |
//! | `close` | `close` succeeds; later calls fail with `Closed`; a second `close` returns `Ok` or `Closed` |
//! | `reopen` | commits acknowledged before the close are there after opening again with the same config |
//! | `share_state`, `share_state_reopen` | offset-store ABI 3.2's share-group state, skipped for a store without it ([`share_props`]) |
//!
//! Every property works on groups named after a prefix unique to the run
//! (`testkit-<time>-<pid>-…`), so it can run against a store that holds other data
//! (a shared ZooKeeper or PostgreSQL); those groups are deleted at the end. Crash
//! safety (`kill -9` after an acknowledged commit) needs a second process: see
//! [`crash`].

pub mod crash;
mod props;
pub mod share_props;

use drover_abi::{offset_store::OffsetStoreArc, PluginError};

use crate::Report;

/// Opens an instance of the store under test, always with the same config (so every
/// instance sees the same data): a loaded `.so`'s `open` with a fixed config string, or
/// [`drover_abi::sdk::in_process::offset_store`].
pub type Opener<'a> = dyn Fn() -> Result<OffsetStoreArc, PluginError> + Sync + 'a;

/// How to run the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// The store's metadata limit in UTF-8 bytes (Kafka's `offset.metadata.max.bytes`,
    /// default 4096): `all_or_nothing` commits a record with one byte more.
    pub max_metadata_bytes: usize,
    /// Records in `scan_paging`'s one batch; 100,000 by default.
    pub scan_records: usize,
    /// Threads committing at once in `concurrent_commits`; 8 by default.
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_metadata_bytes: 4096,
            scan_records: 100_000,
            threads: 8,
        }
    }
}

impl Options {
    /// These options with the store's metadata limit set to `bytes`.
    pub fn max_metadata_bytes(mut self, bytes: usize) -> Options {
        self.max_metadata_bytes = bytes;
        self
    }

    /// These options with `records` records in `scan_paging`'s batch.
    pub fn scan_records(mut self, records: usize) -> Options {
        self.scan_records = records;
        self
    }
}

/// Runs every property (see the module docs), opening the store with `open` once for
/// all but `reopen`, and once more for `reopen`. The store is closed at the end.
pub fn run(open: &Opener<'_>, options: &Options) -> Report {
    props::run(open, options)
}

/// A group-name prefix unique to this process and moment: `testkit-<ns since the
/// epoch, hex>-<pid>`.
pub fn unique_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("testkit-{nanos:x}-{}", std::process::id())
}
