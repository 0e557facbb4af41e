//! [`LogConfig`]: per-partition log settings, named and defaulted after Kafka's topic
//! configs (`segment.bytes`, `segment.ms`, `retention.bytes`, `retention.ms`,
//! `index.interval.bytes`, `flush.messages`, `flush.ms`, `max.message.bytes`,
//! `message.timestamp.before.max.ms`, `message.timestamp.after.max.ms`).

use serde::Deserialize;

use super::{batch::BATCH_HEADER_LEN, LogError};

/// 7 days in ms: Kafka's default for `segment.ms` and `retention.ms`.
const SEVEN_DAYS_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// Settings of one partition log. Every field has a default, so an empty TOML table is
/// valid. Checked by [`LogConfig::validate`] (which [`super::PartitionLog::open`] calls).
///
/// ```toml
/// segment_bytes = 1073741824     # roll the active segment before it exceeds 1 GiB
/// segment_ms = 604800000         # ... or once it is 7 days old
/// retention_bytes = -1           # keep any amount of data (-1 = unlimited)
/// retention_ms = 604800000       # delete segments whose newest record is > 7 days old
/// index_interval_bytes = 4096    # one offset index entry per 4 KiB of log
/// flush_messages = 1             # fsync every append before it is acknowledged
/// flush_ms = -1                  # no time-based flush (see `needs_flush`)
/// max_batch_bytes = 1048588      # largest record batch accepted (1 MiB + 12)
/// message_timestamp_before_max_ms = 9223372036854775807  # any age accepted
/// message_timestamp_after_max_ms = 3600000               # at most 1 hour ahead
/// max_decompressed_batch_bytes = 67108864                # 64 MiB decompressed
/// open_files_cache = 1024        # broker-wide: sealed-segment and index files kept open
/// producer_id_expiration_ms = 86400000   # forget an idempotent producer after 1 day idle
/// max_producer_ids_per_partition = 10000 # producer ids remembered per partition
/// producer_id_eviction_min_idle_ms = 600000 # never evict one that wrote in the last 10 min
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// Kafka `segment.bytes`: the active segment is rolled before an append would make it
    /// larger than this, in bytes. A single append larger than this is refused
    /// ([`LogError::BatchTooLarge`]). The broker's configuration and topic configs accept
    /// [`MIN_SEGMENT_BYTES`] (1 MiB, Kafka 4.x's minimum) ..= 2^31 − 1 (file positions in
    /// the index are 32-bit), checked by [`LogConfig::validate_settings`]; the log itself
    /// works from 61 (one batch header), which only its own unit tests use: no client
    /// or configuration file can set less than 1 MiB. Default 1 GiB.
    pub segment_bytes: u64,
    /// Kafka `segment.ms`: the active segment is rolled once it is this old, in ms. Its age
    /// is `now_ms` − the time of its first append (after a restart: the max timestamp of its
    /// first batch, the rolling base Kafka uses). At least 1. Default 7 days.
    pub segment_ms: i64,
    /// Kafka `retention.bytes`: [`super::PartitionLog::apply_retention`] deletes the oldest
    /// segments while the partition would still hold at least this many bytes without them,
    /// in bytes. −1 = unlimited (default).
    pub retention_bytes: i64,
    /// Kafka `retention.ms`: [`super::PartitionLog::apply_retention`] deletes the oldest
    /// segments whose newest batch timestamp (or file modification time, if no batch has a
    /// timestamp) is more than this far behind `now_ms`, in ms. −1 = unlimited. Default
    /// 7 days.
    pub retention_ms: i64,
    /// Kafka `index.interval.bytes`: one offset index entry (and at most one time index
    /// entry) per this many bytes of log, in bytes. Smaller means faster lookups and
    /// larger indexes. At most 2^31 − 1. Default 4096.
    pub index_interval_bytes: u64,
    /// Kafka `flush.messages`: the log fsyncs the active segment once this many records
    /// were appended since the last flush ([`super::PartitionLog::append`] does so before
    /// returning; the broker's produce path uses [`super::PartitionLog::flush_due`] and
    /// flushes in the background). The default 1 makes every append durable before it is
    /// acknowledged (acks are durable), which a single-replica broker needs; larger
    /// values trade durability of the newest records for throughput (Kafka's own default
    /// leaves flushing to the OS and relies on replication). At least 1.
    pub flush_messages: u64,
    /// Kafka `flush.ms`: the longest time appended records may stay unflushed, in ms.
    /// The log does not run timers: the caller polls
    /// [`super::PartitionLog::needs_flush`] and calls [`super::PartitionLog::flush`]. −1 =
    /// no time-based flush (default; with `flush_messages = 1` nothing is ever unflushed).
    pub flush_ms: i64,
    /// Kafka `max.message.bytes` / broker `message.max.bytes`: the largest record batch
    /// accepted, in bytes, including its 12-byte log overhead (baseOffset and batchLength).
    /// Range 61 ..= 2^31 − 1. Default 1048588 (1 MiB + 12), Kafka's default.
    pub max_batch_bytes: u64,
    /// Kafka `message.timestamp.before.max.ms` (KIP-937): a produced record whose
    /// timestamp is more than this before the broker's clock is refused with
    /// INVALID_TIMESTAMP, in ms. At least 0. Default 9223372036854775807 (no bound), as
    /// Kafka's.
    pub message_timestamp_before_max_ms: i64,
    /// Kafka `message.timestamp.after.max.ms` (KIP-937): a produced record whose
    /// timestamp is more than this after the broker's clock is refused with
    /// INVALID_TIMESTAMP, in ms. At least 0. Default 3600000 (1 hour), Kafka 4.x's.
    pub message_timestamp_after_max_ms: i64,
    /// The most bytes the records of one compressed batch may decompress to while the
    /// broker validates them; above it the batch is refused with MESSAGE_TOO_LARGE.
    /// Bounds the CPU one produced batch can cost (Kafka has no such bound). Range
    /// 61 ..= 2^31 − 1. Default 67108864 (64 MiB).
    pub max_decompressed_batch_bytes: u64,
    /// Broker-wide, read once at startup (not a per-partition setting; Kafka has no
    /// equivalent, as it keeps every segment's three files open): how many files the
    /// shared cache of open segment files keeps open — the `.log` of sealed segments and
    /// the `.index` / `.timeindex` of every segment, opened on demand and closed least
    /// recently used first. Each partition also keeps its active segment's `.log` open
    /// outside the cache. Range 1 ..= 1000000. Default 1024.
    pub open_files_cache: usize,
    /// Kafka `producer.id.expiration.ms`: a partition forgets an idempotent producer
    /// (its epoch and last sequences, see `log::producer_state`) once it has not
    /// appended for this long, in ms; its next batch is then accepted with any sequence,
    /// as Kafka does. At least 1. Default 86400000 (1 day), Kafka's.
    pub producer_id_expiration_ms: i64,
    /// The most producer ids one partition remembers (Kafka has no bound). A batch from
    /// one more producer id, after expired ones are swept, evicts the producer idle
    /// longest (whose retries are then no longer recognised as duplicates) if it has been
    /// idle for `producer_id_eviction_min_idle_ms`, so a client holding many producer ids
    /// cannot grow the broker's memory without bound (about 300 bytes per id). Range 1
    /// ..= `MAX_PRODUCER_IDS_PER_PARTITION`. Default 10000.
    pub max_producer_ids_per_partition: usize,
    /// At `max_producer_ids_per_partition`, a producer is evicted only once it has not
    /// written for this long, in ms; while every remembered producer wrote more
    /// recently, a new producer's batch is refused with a retriable error
    /// (`NOT_ENOUGH_REPLICAS`) rather than let a flood of newcomers turn an honest
    /// producer's retry into a duplicate. Longer than clients' retry windows
    /// (librdkafka's `message.timeout.ms` 300000, Java's `delivery.timeout.ms` 120000).
    /// At least 0. Default 600000 (10 minutes).
    pub producer_id_eviction_min_idle_ms: i64,
}

/// Kafka 4.x's smallest `segment.bytes` / `log.segment.bytes` (KIP-1030, Kafka's
/// `LogConfig`: `atLeast(1024 * 1024)`), in bytes: the least the broker's `[log]
/// segment_bytes` and a topic's `segment.bytes` may be. Smaller segments let one client
/// fill a partition directory with files (issue 28: 42,116 files at 128 bytes).
pub const MIN_SEGMENT_BYTES: u64 = 1024 * 1024;

/// The highest `max_producer_ids_per_partition` accepted; also the cap on the producers
/// a snapshot file may hold (one written under a higher cap than today's is loaded and
/// trimmed).
pub const MAX_PRODUCER_IDS_PER_PARTITION: usize = 1_000_000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: SEVEN_DAYS_MS,
            retention_bytes: -1,
            retention_ms: SEVEN_DAYS_MS,
            index_interval_bytes: 4096,
            flush_messages: 1,
            flush_ms: -1,
            max_batch_bytes: 1024 * 1024 + 12,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 60 * 60 * 1000,
            max_decompressed_batch_bytes: 64 * 1024 * 1024,
            open_files_cache: super::FileCache::DEFAULT_CAPACITY,
            producer_id_expiration_ms: 24 * 60 * 60 * 1000,
            max_producer_ids_per_partition: 10_000,
            producer_id_eviction_min_idle_ms: 10 * 60 * 1000,
        }
    }
}

impl LogConfig {
    /// Checks every field against the range documented on it.
    pub fn validate(&self) -> Result<(), LogError> {
        const MAX_I32: u64 = i32::MAX as u64;
        let min = BATCH_HEADER_LEN as u64;
        let checks = [
            (
                (min..=MAX_I32).contains(&self.segment_bytes),
                "segment_bytes must be 61 ..= 2147483647",
            ),
            (self.segment_ms >= 1, "segment_ms must be at least 1"),
            (
                self.retention_bytes >= -1,
                "retention_bytes must be -1 (unlimited) or >= 0",
            ),
            (
                self.retention_ms >= -1,
                "retention_ms must be -1 (unlimited) or >= 0",
            ),
            (
                self.index_interval_bytes <= MAX_I32,
                "index_interval_bytes must be at most 2147483647",
            ),
            (
                self.flush_messages >= 1,
                "flush_messages must be at least 1",
            ),
            (self.flush_ms >= -1, "flush_ms must be -1 (never) or >= 0"),
            (
                (min..=MAX_I32).contains(&self.max_batch_bytes),
                "max_batch_bytes must be 61 ..= 2147483647",
            ),
            (
                self.message_timestamp_before_max_ms >= 0,
                "message_timestamp_before_max_ms must be at least 0",
            ),
            (
                self.message_timestamp_after_max_ms >= 0,
                "message_timestamp_after_max_ms must be at least 0",
            ),
            (
                (min..=MAX_I32).contains(&self.max_decompressed_batch_bytes),
                "max_decompressed_batch_bytes must be 61 ..= 2147483647",
            ),
            (
                (1..=1_000_000).contains(&self.open_files_cache),
                "open_files_cache must be 1 ..= 1000000",
            ),
            (
                self.producer_id_expiration_ms >= 1,
                "producer_id_expiration_ms must be at least 1",
            ),
            (
                (1..=MAX_PRODUCER_IDS_PER_PARTITION).contains(&self.max_producer_ids_per_partition),
                "max_producer_ids_per_partition must be 1 ..= 1000000",
            ),
            (
                self.producer_id_eviction_min_idle_ms >= 0,
                "producer_id_eviction_min_idle_ms must be at least 0",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, message)) => Err(LogError::InvalidConfig(message.to_string())),
            None => Ok(()),
        }
    }

    /// Checks settings an operator chose (`[log]` in the configuration file):
    /// [`LogConfig::validate`], plus Kafka 4.x's minimums the log itself does not need —
    /// `segment_bytes` at least [`MIN_SEGMENT_BYTES`], as Kafka's `log.segment.bytes`.
    /// `flush_ms` keeps −1 (Kafka's `log.flush.interval.ms` has no lower bound either).
    ///
    /// Errors: [`LogError::InvalidConfig`] naming the key and its bound.
    pub fn validate_settings(&self) -> Result<(), LogError> {
        self.validate()?;
        if self.segment_bytes < MIN_SEGMENT_BYTES {
            return Err(LogError::InvalidConfig(format!(
                "segment_bytes must be at least {MIN_SEGMENT_BYTES} (1 MiB, Kafka 4.x's \
                 minimum for log.segment.bytes); {} is below it",
                self.segment_bytes
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_table_gives_defaults() {
        let config: LogConfig = toml::from_str("").unwrap();
        assert_eq!(config, LogConfig::default());
        assert_eq!(config.max_batch_bytes, 1_048_588);
        assert_eq!(config.segment_ms, 604_800_000);
        assert_eq!(config.producer_id_expiration_ms, 86_400_000);
        config.validate().unwrap();
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = toml::from_str::<LogConfig>("segment_byte = 10").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let bad = [
            LogConfig {
                segment_bytes: 10,
                ..LogConfig::default()
            },
            LogConfig {
                segment_bytes: 1 << 31,
                ..LogConfig::default()
            },
            LogConfig {
                segment_ms: 0,
                ..LogConfig::default()
            },
            LogConfig {
                retention_ms: -2,
                ..LogConfig::default()
            },
            LogConfig {
                flush_messages: 0,
                ..LogConfig::default()
            },
            LogConfig {
                max_batch_bytes: 60,
                ..LogConfig::default()
            },
            LogConfig {
                producer_id_expiration_ms: 0,
                ..LogConfig::default()
            },
            LogConfig {
                max_producer_ids_per_partition: 0,
                ..LogConfig::default()
            },
        ];
        for config in bad {
            assert!(
                matches!(config.validate(), Err(LogError::InvalidConfig(_))),
                "{config:?}"
            );
        }
    }

    #[test]
    fn the_configured_segment_size_is_at_least_kafkas_minimum() {
        LogConfig::default().validate_settings().unwrap();
        let small = LogConfig {
            segment_bytes: MIN_SEGMENT_BYTES - 1,
            ..LogConfig::default()
        };
        small.validate().unwrap();
        let e = small.validate_settings().unwrap_err().to_string();
        assert!(e.contains("segment_bytes must be at least 1048576"), "{e}");
        LogConfig {
            segment_bytes: MIN_SEGMENT_BYTES,
            ..LogConfig::default()
        }
        .validate_settings()
        .unwrap();
    }
}
