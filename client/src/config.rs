//! The connector's configuration.

use std::time::Duration;

use crate::error::ClientError;

/// Where a partition without a committed offset starts (Kafka's `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// The log start offset.
    #[default]
    Earliest,
    /// The log end offset: only new records.
    Latest,
    /// No default: the application gets [`ClientError::NoCommittedOffset`].
    None,
}

/// A consumer's configuration. [`ConsumerConfig::new`] gives defaults for everything
/// but the brokers and the group.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Bootstrap brokers, `host:port`; tried in turn.
    pub brokers: Vec<String>,
    /// The consumer group.
    pub group: String,
    /// This consumer's id in the group. Default: `<group>-<random uuid>`.
    pub consumer_id: String,
    /// Host name reported to the coordinator (shown in the admin API). Default: the
    /// `HOSTNAME` environment variable or `localhost`.
    pub host: String,
    /// Session timeout, ms: without a frame from the coordinator for this long the
    /// consumer stops delivering (docs/protocol.md §6.2). Default 10,000; the
    /// coordinator accepts 6,000–1,800,000 by default.
    pub session_timeout_ms: i32,
    /// Where partitions without a committed offset start. Default earliest.
    pub auto_offset_reset: OffsetReset,
    /// The assignor to ask for; `None` for the coordinator's default.
    pub assignor: Option<String>,
    /// How often the connector commits consumed offsets with CommitOffset, ms, in
    /// addition to reporting them in every Heartbeat answer; 0 = only on
    /// [`crate::Consumer::commit`] and at shutdown. Default 5,000 (Kafka's
    /// `auto.commit.interval.ms`).
    pub auto_commit_interval_ms: u64,
    /// Longest a fetch waits for data, ms. Default 500 (Kafka's `fetch.max.wait.ms`).
    pub fetch_max_wait_ms: i32,
    /// Bytes a fetch waits for. Default 1.
    pub fetch_min_bytes: i32,
    /// Most bytes one fetch response may carry. Default 50 MiB.
    pub fetch_max_bytes: i32,
    /// Most bytes per partition in one fetch. Default 1 MiB (Kafka's
    /// `max.partition.fetch.bytes`).
    pub partition_max_bytes: i32,
    /// Most bytes of fetched, undelivered messages held in memory across all streams;
    /// fetchers wait when it is reached (backpressure). Default 64 MiB.
    pub max_buffered_bytes: usize,
    /// Timeout of one request, ms. Default 30,000 (Kafka's `request.timeout.ms`).
    pub request_timeout_ms: u64,
    /// How long to keep trying to reach a broker before giving up, ms. Default 30,000.
    pub bootstrap_timeout_ms: u64,
    /// Pause between retries, ms. Default 100, doubling up to 2,000.
    pub retry_backoff_ms: u64,
}

impl ConsumerConfig {
    /// Defaults for `group` at `brokers`.
    pub fn new(brokers: impl IntoIterator<Item = impl Into<String>>, group: &str) -> Self {
        ConsumerConfig {
            brokers: brokers.into_iter().map(Into::into).collect(),
            group: group.to_owned(),
            consumer_id: format!("{group}-{}", uuid::Uuid::new_v4().simple()),
            host: std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into()),
            session_timeout_ms: 10_000,
            auto_offset_reset: OffsetReset::Earliest,
            assignor: None,
            auto_commit_interval_ms: 5_000,
            fetch_max_wait_ms: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            max_buffered_bytes: 64 * 1024 * 1024,
            request_timeout_ms: 30_000,
            bootstrap_timeout_ms: 30_000,
            retry_backoff_ms: 100,
        }
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: String| Err(ClientError::Config(m));
        if self.brokers.is_empty() {
            return bad("brokers is empty".into());
        }
        if self.group.is_empty() {
            return bad("group is empty".into());
        }
        if self.consumer_id.is_empty() {
            return bad("consumer_id is empty".into());
        }
        if self.session_timeout_ms < 1 {
            return bad(format!(
                "session_timeout_ms {} must be positive",
                self.session_timeout_ms
            ));
        }
        if self.max_buffered_bytes < 1024 {
            return bad("max_buffered_bytes must be at least 1024".into());
        }
        if self.fetch_max_bytes < 1 || self.partition_max_bytes < 1 {
            return bad("fetch_max_bytes and partition_max_bytes must be positive".into());
        }
        Ok(())
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}
