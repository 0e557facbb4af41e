//! Partition logs: the storage engine behind Produce, Fetch and ListOffsets.
//!
//! A partition is a directory of segments, laid out as in Kafka's log design
//! (`kafka.log.UnifiedLog` / `LogSegment`):
//!
//! ```text
//! <dir>/00000000000000000000.log        record batches back to back, exactly as stored
//! <dir>/00000000000000000000.index      sparse offset index  (relative offset u32, position u32)
//! <dir>/00000000000000000000.timeindex  sparse time index    (timestamp i64, relative offset u32)
//! <dir>/00000000000000004711.log        the next segment; its name is its base offset
//! ```
//!
//! Batches are Kafka record batches v2 ([`batch`]). A produced batch is validated first
//! ([`validate`]: every record walked, compressed ones through a streaming decoder), then
//! stored as produced, so compressed batches pass through untouched. The broker rewrites
//! the two header fields the batch CRC does not cover (the base offset and the partition
//! leader epoch), and maxTimestamp with the CRC when the producer's was wrong.
//!
//! The engine is synchronous (`std::fs`, positioned reads); the network layer calls it
//! from `tokio::task::spawn_blocking` or holds it behind a mutex. [`PartitionLog::read`]
//! and the other `&self` methods may run concurrently with each other (e.g. behind an
//! `RwLock`).
//!
//! File descriptors: a partition holds one for good, its active segment's `.log`; the
//! `.log` of sealed segments and every index file are opened on demand through a
//! broker-wide [`FileCache`] of bounded size, so a log of many segments costs no more
//! descriptors than a log of one.
//!
//! Idempotent producers' state (epochs, last sequences) is kept per partition
//! ([`producer_state`]), checked on append, snapshotted to `<offset>.snapshot` files at
//! segment roll and close, and rebuilt from batch headers on open.
//!
//! Transactions (KIP-98): transactional batches open a producer's transaction in the
//! partition, a marker ([`txn_marker`], written by the transaction coordinator with
//! [`PartitionLog::append_txn_marker`]) ends it; the last stable offset
//! ([`PartitionLog::last_stable_offset`]) is the first offset of the earliest ongoing
//! transaction, and aborted transactions are listed per segment in `<base>.txnindex`
//! ([`txn_index`]) for read_committed fetches.
//!
//! Durability follows [`LogConfig::flush_messages`]: by default every append is fsynced
//! before it returns, so an acknowledged produce survives a crash. On open, the last
//! segment (and any segment whose indexes are missing or corrupt) is scanned and a torn
//! tail is cut; see [`PartitionLog::open`].

pub mod batch;
pub mod clock;
pub mod compression;
mod config;
mod error;
mod file_cache;
mod index;
mod partition;
pub mod producer_state;
pub mod records;
mod recovery;
mod segment;
pub mod start_offset;
mod time_index;
pub mod txn_index;
pub mod txn_marker;
pub mod validate;
pub mod walk;

#[cfg(any(test, feature = "test-util"))]
pub mod test_util;

pub use config::{LogConfig, MIN_SEGMENT_BYTES};
pub use error::LogError;
pub use file_cache::FileCache;
pub use partition::{
    AppendInfo, FlushTicket, PartitionLog, PlannedRead, ReadResult, TimestampOffset,
    FIRST_RECOVERY_BACKOFF, MAX_RECOVERY_BACKOFF,
};
pub use txn_index::AbortedTxn;
pub use txn_marker::{TxnMarker, TxnResult};

/// The partition leader epoch the log stamps into every appended batch (bytes 12..16 of
/// the batch header). Drover partitions have a single replica whose leadership never
/// changes, so the epoch is always 0; Metadata, ListOffsets and OffsetForLeaderEpoch
/// responses must report the same value.
pub const LEADER_EPOCH: i32 = 0;

/// The timestamp Kafka uses for "no timestamp" (`RecordBatch.NO_TIMESTAMP`), in ms.
pub const NO_TIMESTAMP: i64 = -1;
