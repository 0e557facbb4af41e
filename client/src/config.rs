//! The connector's configuration.

use std::time::Duration;

use drover_protocol::{Label, MemberData};

use crate::{error::ClientError, security::Security};

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
    /// This consumer's rack (Kafka's `client.rack`), for assignors that keep consumers
    /// next to their partitions' leaders. Default `None`. 1–255 bytes when set.
    pub rack: Option<String>,
    /// This consumer's capacity relative to the group's other members, ≥ 1 (a
    /// unitless ratio; weight 2 asks a weight-aware assignor for twice the work of
    /// weight 1). Default 1.
    pub weight: u32,
    /// Free-form `(key, value)` labels for the assignor: at most 32, keys 1–255 bytes
    /// and distinct, values at most 255 bytes. Default none.
    ///
    /// `rack`, `weight` and `labels` travel in RegisterConsumer version 1
    /// (docs/protocol.md §5.1). The connector sends v1 **only when one of them is set**
    /// (not the default) and v0 otherwise: a consumer that declares nothing keeps
    /// working with coordinators that only know v0, while one that declares member
    /// data needs a coordinator that serves v1 (an older one closes the connection,
    /// and the consumer keeps retrying and logging it rather than registering without
    /// the data the operator asked for).
    pub labels: Vec<(String, String)>,
    /// Whether the coordinator commits for the consumer (Kafka's `enable.auto.commit`;
    /// default true): every Heartbeat answer carries the consumed (processed) offsets,
    /// and they are committed every `auto_commit_interval_ms` too. When false the
    /// application commits with [`crate::Consumer::commit`]; Heartbeat answers carry no
    /// offsets. In **both** modes the answers that hand partitions over — StopFetcher,
    /// and a Heartbeat reporting a dead fetcher — carry the processed offsets of those
    /// partitions, which the coordinator commits (docs/protocol.md §5.3: a CommitOffset
    /// after the answer would get REBALANCE_IN_PROGRESS), and
    /// [`crate::Consumer::shutdown`] commits before it leaves (§6.7).
    pub enable_auto_commit: bool,
    /// How often the connector commits consumed offsets with CommitOffset, ms, in
    /// addition to reporting them in every Heartbeat answer; 0 = only on
    /// [`crate::Consumer::commit`] and at shutdown. Not used when `enable_auto_commit`
    /// is false. Default 5,000 (Kafka's `auto.commit.interval.ms`).
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
    /// Pause before registering again after a session that ended because a fetcher
    /// died (docs/protocol.md §6.3: an offset out of range, or no committed offset, with
    /// `auto_offset_reset` none), ms. It doubles with every further such session in a
    /// row, up to `fetcher_failure_backoff_max_ms`, and falls back after a session that
    /// ends otherwise: a partition that kills its fetcher on every start then costs the
    /// group a rebalance per backoff, not one per heartbeat. No jitter. Default 1,000.
    pub fetcher_failure_backoff_ms: u64,
    /// Cap of `fetcher_failure_backoff_ms`, ms; at least it. Default 60,000.
    pub fetcher_failure_backoff_max_ms: u64,
    /// TLS and SASL to the brokers' listeners (SSL, SASL_PLAINTEXT, SASL_SSL). Default:
    /// neither (PLAINTEXT).
    pub security: Security,
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
            rack: None,
            weight: 1,
            labels: Vec::new(),
            enable_auto_commit: true,
            auto_commit_interval_ms: 5_000,
            fetch_max_wait_ms: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            max_buffered_bytes: 64 * 1024 * 1024,
            request_timeout_ms: 30_000,
            bootstrap_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            fetcher_failure_backoff_ms: 1_000,
            fetcher_failure_backoff_max_ms: 60_000,
            security: Security::default(),
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
        if self.fetcher_failure_backoff_ms < 1
            || self.fetcher_failure_backoff_max_ms < self.fetcher_failure_backoff_ms
        {
            return bad(format!(
                "fetcher_failure_backoff_ms {} must be at least 1 and at most \
                 fetcher_failure_backoff_max_ms {}",
                self.fetcher_failure_backoff_ms, self.fetcher_failure_backoff_max_ms
            ));
        }
        if self.labels.len() > drover_protocol::MAX_LABELS_PER_CONSUMER {
            return bad(format!(
                "{} labels; at most {}",
                self.labels.len(),
                drover_protocol::MAX_LABELS_PER_CONSUMER
            ));
        }
        self.member_data()?.validate().map_err(ClientError::Config)
    }

    /// The member data of RegisterConsumer v1 (docs/protocol.md §5.1); fails for a
    /// weight above `i32::MAX` (the wire's INT32).
    pub(crate) fn member_data(&self) -> Result<MemberData, ClientError> {
        Ok(MemberData {
            rack: self.rack.clone(),
            weight: i32::try_from(self.weight).map_err(|_| {
                ClientError::Config(format!("weight {} exceeds {}", self.weight, i32::MAX))
            })?,
            labels: self
                .labels
                .iter()
                .map(|(key, value)| Label {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
        })
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// The pause before the `streak`-th registration in a row that follows a dead
    /// fetcher (`streak` ≥ 1): `fetcher_failure_backoff_ms · 2^(streak − 1)`, capped at
    /// `fetcher_failure_backoff_max_ms`.
    pub(crate) fn fetcher_failure_backoff(&self, streak: u32) -> Duration {
        let doublings = streak.saturating_sub(1).min(32);
        let ms = self
            .fetcher_failure_backoff_ms
            .saturating_mul(1u64 << doublings)
            .min(self.fetcher_failure_backoff_max_ms);
        Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetcher_failure_backoff_doubles_up_to_its_cap() {
        let mut config = ConsumerConfig::new(["b:9092"], "g");
        config.fetcher_failure_backoff_ms = 200;
        config.fetcher_failure_backoff_max_ms = 1_000;
        let ms: Vec<u128> = (1..=6)
            .map(|n| config.fetcher_failure_backoff(n).as_millis())
            .collect();
        assert_eq!(ms, [200, 400, 800, 1_000, 1_000, 1_000]);
        assert_eq!(config.fetcher_failure_backoff(u32::MAX).as_millis(), 1_000);
        config.fetcher_failure_backoff_max_ms = 100;
        assert!(matches!(config.validate(), Err(ClientError::Config(_))));
    }

    #[test]
    fn member_data_is_checked_with_the_protocol_rules() {
        let mut config = ConsumerConfig::new(["b:9092"], "g");
        assert_eq!(config.member_data().unwrap(), MemberData::default());
        config.rack = Some("eu-1a".into());
        config.weight = 3;
        config.labels = vec![("disk".into(), "ssd".into())];
        assert!(config.validate().is_ok());
        assert_eq!(config.member_data().unwrap().weight, 3);
        for broken in [
            ConsumerConfig {
                weight: 0,
                ..config.clone()
            },
            ConsumerConfig {
                weight: u32::MAX,
                ..config.clone()
            },
            ConsumerConfig {
                rack: Some(String::new()),
                ..config.clone()
            },
            ConsumerConfig {
                labels: vec![("k".into(), "1".into()), ("k".into(), "2".into())],
                ..config.clone()
            },
            ConsumerConfig {
                labels: (0..33).map(|i| (format!("k{i}"), String::new())).collect(),
                ..config.clone()
            },
        ] {
            assert!(
                matches!(broken.validate(), Err(ClientError::Config(_))),
                "{broken:?}"
            );
        }
    }
}
