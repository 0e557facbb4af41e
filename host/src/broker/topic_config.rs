//! Per-topic settings under Kafka's names: the table of topic configs Drover's logs
//! really have, each mapped to a [`LogConfig`] field, with Kafka's broker-level synonym,
//! type and value rules (Kafka's `TopicConfig` / `LogConfig` definitions).
//!
//! A topic's overrides are a map from Kafka name to value string ([`Overrides`]), as
//! Kafka keeps them (`/config/topics/<name>` in ZooKeeper); [`effective`] applies them
//! to the broker's `[log]` settings. [`validate`] checks one value the way Kafka's
//! `ConfigDef` does and answers with a message for `INVALID_CONFIG`.
//!
//! The bounds are Kafka 4.x's (`LogConfig`'s `ConfigDef` in Kafka's storage module):
//! `segment.bytes` at least 1048576 (KIP-1030), `segment.ms` at least 1, `flush.messages`
//! at least 1, `flush.ms` at least 0, `retention.ms` at least −1, `index.interval.bytes`
//! and both `message.timestamp.*.max.ms` at least 0. Two are stricter than Kafka's, where
//! Drover's log needs it: `max.message.bytes` at least 61 (one batch header; Kafka: 0,
//! which refuses every batch anyway) and `retention.bytes` at least −1 (Kafka: any
//! number, every negative one meaning unlimited).

use std::collections::BTreeMap;

use crate::log::LogConfig;

/// A topic's config overrides: Kafka config name → value, e.g. `retention.ms` → `"60000"`.
pub type Overrides = BTreeMap<String, String>;

/// Kafka's config types (DescribeConfigs v3+ `config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// A 32-bit integer (`INT`, 3).
    Int,
    /// A 64-bit integer (`LONG`, 5).
    Long,
    /// A comma-separated list (`LIST`, 7).
    List,
}

impl ConfigType {
    /// The wire value of the type (Kafka's `ConfigResource.Type` in DescribeConfigs).
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::List => 7,
        }
    }
}

/// One topic config: its Kafka names, type, and the [`LogConfig`] field behind it.
pub struct TopicConfigKey {
    /// The topic-level name (`retention.ms`).
    pub name: &'static str,
    /// The broker-level synonym that gives the default (`log.retention.ms`).
    pub broker_name: &'static str,
    /// Its type.
    pub kind: ConfigType,
    /// The value in `config`, as Kafka prints it.
    pub get: fn(&LogConfig) -> String,
    /// Sets the already validated value `v` in `config`.
    set: fn(&mut LogConfig, i64),
    /// The smallest and largest value accepted (numbers only).
    range: (i64, i64),
}

const MAX_INT: i64 = i32::MAX as i64;
/// A batch header: the smallest batch size setting a log accepts (61 bytes).
const MIN_BATCH: i64 = crate::log::batch::BATCH_HEADER_LEN as i64;
/// Kafka 4.x's smallest `segment.bytes` (KIP-1030): 1 MiB.
const MIN_SEGMENT: i64 = crate::log::MIN_SEGMENT_BYTES as i64;

/// The topic configs Drover serves. `cleanup.policy` is the only list config: its one
/// allowed value is `delete` (Drover has no log compaction).
pub const KEYS: &[TopicConfigKey] = &[
    TopicConfigKey {
        name: "cleanup.policy",
        broker_name: "log.cleanup.policy",
        kind: ConfigType::List,
        get: |_| "delete".into(),
        set: |_, _| {},
        range: (0, 0),
    },
    TopicConfigKey {
        name: "flush.messages",
        broker_name: "log.flush.interval.messages",
        kind: ConfigType::Long,
        get: |c| c.flush_messages.to_string(),
        set: |c, v| c.flush_messages = v as u64,
        range: (1, i64::MAX),
    },
    TopicConfigKey {
        name: "flush.ms",
        broker_name: "log.flush.interval.ms",
        kind: ConfigType::Long,
        // Kafka's default, Long.MAX_VALUE, is "never": Drover's −1 (no time-based
        // flush) is reported as it, so a value read back can be written again.
        get: |c| {
            if c.flush_ms < 0 {
                i64::MAX.to_string()
            } else {
                c.flush_ms.to_string()
            }
        },
        set: |c, v| c.flush_ms = v,
        range: (0, i64::MAX),
    },
    TopicConfigKey {
        name: "index.interval.bytes",
        broker_name: "log.index.interval.bytes",
        kind: ConfigType::Int,
        get: |c| c.index_interval_bytes.to_string(),
        set: |c, v| c.index_interval_bytes = v as u64,
        range: (0, MAX_INT),
    },
    TopicConfigKey {
        name: "max.message.bytes",
        broker_name: "message.max.bytes",
        kind: ConfigType::Int,
        get: |c| c.max_batch_bytes.to_string(),
        set: |c, v| c.max_batch_bytes = v as u64,
        range: (MIN_BATCH, MAX_INT),
    },
    TopicConfigKey {
        name: "message.timestamp.after.max.ms",
        broker_name: "log.message.timestamp.after.max.ms",
        kind: ConfigType::Long,
        get: |c| c.message_timestamp_after_max_ms.to_string(),
        set: |c, v| c.message_timestamp_after_max_ms = v,
        range: (0, i64::MAX),
    },
    TopicConfigKey {
        name: "message.timestamp.before.max.ms",
        broker_name: "log.message.timestamp.before.max.ms",
        kind: ConfigType::Long,
        get: |c| c.message_timestamp_before_max_ms.to_string(),
        set: |c, v| c.message_timestamp_before_max_ms = v,
        range: (0, i64::MAX),
    },
    TopicConfigKey {
        name: "retention.bytes",
        broker_name: "log.retention.bytes",
        kind: ConfigType::Long,
        get: |c| c.retention_bytes.to_string(),
        set: |c, v| c.retention_bytes = v,
        range: (-1, i64::MAX),
    },
    TopicConfigKey {
        name: "retention.ms",
        broker_name: "log.retention.ms",
        kind: ConfigType::Long,
        get: |c| c.retention_ms.to_string(),
        set: |c, v| c.retention_ms = v,
        range: (-1, i64::MAX),
    },
    TopicConfigKey {
        name: "segment.bytes",
        broker_name: "log.segment.bytes",
        kind: ConfigType::Int,
        get: |c| c.segment_bytes.to_string(),
        set: |c, v| c.segment_bytes = v as u64,
        range: (MIN_SEGMENT, MAX_INT),
    },
    TopicConfigKey {
        name: "segment.ms",
        broker_name: "log.roll.ms",
        kind: ConfigType::Long,
        get: |c| c.segment_ms.to_string(),
        set: |c, v| c.segment_ms = v,
        range: (1, i64::MAX),
    },
];

/// The most overrides one topic may hold: every key once.
pub const MAX_OVERRIDES: usize = KEYS.len();

/// The longest config value accepted, in bytes (a list of every policy fits many times).
pub const MAX_VALUE_LEN: usize = 256;

/// The key named `name` (topic-level name).
pub fn key(name: &str) -> Option<&'static TopicConfigKey> {
    KEYS.iter().find(|k| k.name == name)
}

/// A refused config value; its Display is the `INVALID_CONFIG` error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not one of [`KEYS`].
    #[error("Unknown topic config name: {0}")]
    Unknown(String),
    /// The value does not parse or is out of range.
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        /// The config name.
        name: String,
        /// The value (cut to [`MAX_VALUE_LEN`]).
        value: String,
        /// Why.
        reason: String,
    },
}

/// Checks `value` for the config `name` as Kafka's `ConfigDef` would (type, range,
/// allowed list entries) and returns it normalized (numbers without leading `+` or
/// zeros, lists without blanks). `cleanup.policy` accepts only `delete`: `compact` is
/// refused, as Drover does not compact logs.
pub fn validate(name: &str, value: &str) -> Result<String, ConfigError> {
    let key = key(name).ok_or_else(|| ConfigError::Unknown(cut(name)))?;
    let invalid = |reason: String| ConfigError::Invalid {
        name: name.to_owned(),
        value: cut(value),
        reason,
    };
    if value.len() > MAX_VALUE_LEN {
        return Err(invalid(format!("longer than {MAX_VALUE_LEN} bytes")));
    }
    match key.kind {
        ConfigType::List => {
            let items: Vec<&str> = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            if items.is_empty() {
                return Err(invalid("the list must not be empty".into()));
            }
            for item in &items {
                match *item {
                    "delete" => {}
                    "compact" => {
                        return Err(invalid(
                            "compaction is not implemented by this broker; only `delete` \
                             is supported"
                                .into(),
                        ))
                    }
                    _ => return Err(invalid("String must be one of: delete, compact".into())),
                }
            }
            Ok("delete".into())
        }
        ConfigType::Int | ConfigType::Long => {
            let type_name = if key.kind == ConfigType::Int {
                "INT"
            } else {
                "LONG"
            };
            let trimmed = value.trim();
            let parsed = if key.kind == ConfigType::Int {
                trimmed.parse::<i32>().map(i64::from).ok()
            } else {
                trimmed.parse::<i64>().ok()
            };
            let v = parsed.ok_or_else(|| invalid(format!("Not a number of type {type_name}")))?;
            let (min, max) = key.range;
            if v < min {
                return Err(invalid(format!("Value must be at least {min}")));
            }
            if v > max {
                return Err(invalid(format!("Value must be no more than {max}")));
            }
            Ok(v.to_string())
        }
    }
}

/// The settings of a topic with `overrides` on top of the broker's `base` (`[log]`).
/// Overrides that no longer validate (e.g. written by a newer version) are skipped with
/// a warning, so a topic always opens.
pub fn effective(base: &LogConfig, overrides: &Overrides) -> LogConfig {
    let mut config = base.clone();
    for (name, value) in overrides {
        match (key(name), validate(name, value)) {
            (Some(key), Ok(v)) => {
                if let Ok(n) = v.parse::<i64>() {
                    (key.set)(&mut config, n);
                }
            }
            (_, Err(e)) => tracing::warn!("ignoring a stored topic config: {e}"),
            (None, Ok(_)) => {}
        }
    }
    config
}

/// `s` cut to [`MAX_VALUE_LEN`] bytes (on a character boundary), for messages.
fn cut(s: &str) -> String {
    let mut end = s.len().min(MAX_VALUE_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked_for_type_and_range() {
        assert_eq!(validate("retention.ms", "60000").unwrap(), "60000");
        assert_eq!(validate("retention.ms", " -1 ").unwrap(), "-1");
        let e = validate("retention.ms", "abc").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid value abc for configuration retention.ms: Not a number of type LONG"
        );
        let e = validate("retention.ms", "-2").unwrap_err();
        assert!(e.to_string().ends_with("Value must be at least -1"), "{e}");
        let e = validate("segment.bytes", "4294967296").unwrap_err();
        assert!(e.to_string().contains("Not a number of type INT"), "{e}");
        assert!(validate("segment.bytes", "60").is_err());
        assert!(validate("segment.ms", "0").is_err());
        assert!(validate("flush.messages", "0").is_err());
        assert_eq!(validate("max.message.bytes", "2097152").unwrap(), "2097152");
    }

    /// Kafka 4.x's minimums (`LogConfig`'s `ConfigDef`), with Kafka's message naming the
    /// key and the bound: one below each is refused, the bound itself accepted.
    #[test]
    fn kafka_minimums_are_enforced() {
        for (name, min) in [
            ("segment.bytes", 1_048_576_i64),
            ("segment.ms", 1),
            ("flush.messages", 1),
            ("flush.ms", 0),
            ("retention.ms", -1),
            ("retention.bytes", -1),
            ("index.interval.bytes", 0),
            ("max.message.bytes", 61),
            ("message.timestamp.before.max.ms", 0),
            ("message.timestamp.after.max.ms", 0),
        ] {
            assert_eq!(validate(name, &min.to_string()).unwrap(), min.to_string());
            let below = (min - 1).to_string();
            assert_eq!(
                validate(name, &below).unwrap_err().to_string(),
                format!(
                    "Invalid value {below} for configuration {name}: Value must be at least {min}"
                )
            );
        }
        // The file explosion of issue 28: 128-byte segments.
        let e = validate("segment.bytes", "128").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid value 128 for configuration segment.bytes: Value must be at least 1048576"
        );
        // Every number key is covered above.
        let numbers = KEYS.iter().filter(|k| k.kind != ConfigType::List).count();
        assert_eq!(numbers, 10);
    }

    #[test]
    fn stored_overrides_below_the_minimums_are_ignored() {
        let base = LogConfig::default();
        let overrides: Overrides = [
            ("segment.bytes".to_owned(), "128".to_owned()),
            ("flush.ms".to_owned(), "-1".to_owned()),
        ]
        .into();
        let config = effective(&base, &overrides);
        assert_eq!(config.segment_bytes, base.segment_bytes);
        assert_eq!(config.flush_ms, base.flush_ms);
    }

    #[test]
    fn no_time_based_flush_reads_back_as_kafkas_never() {
        let key = key("flush.ms").unwrap();
        let never = (key.get)(&LogConfig::default());
        assert_eq!(never, i64::MAX.to_string());
        let mut config = LogConfig::default();
        (key.set)(
            &mut config,
            validate("flush.ms", &never).unwrap().parse().unwrap(),
        );
        assert_eq!(config.flush_ms, i64::MAX);
        config.validate().unwrap();
    }

    #[test]
    fn cleanup_policy_accepts_delete_only() {
        assert_eq!(validate("cleanup.policy", "delete").unwrap(), "delete");
        assert_eq!(
            validate("cleanup.policy", "delete, delete").unwrap(),
            "delete"
        );
        let e = validate("cleanup.policy", "compact").unwrap_err();
        assert!(
            e.to_string().contains("compaction is not implemented"),
            "{e}"
        );
        assert!(validate("cleanup.policy", "delete,compact").is_err());
        assert!(validate("cleanup.policy", "").is_err());
        assert!(validate("cleanup.policy", "shred").is_err());
    }

    #[test]
    fn unknown_names_and_long_values_are_refused() {
        assert_eq!(
            validate("retention.hours", "1").unwrap_err(),
            ConfigError::Unknown("retention.hours".into())
        );
        let long = "9".repeat(10_000);
        let e = validate("retention.ms", &long).unwrap_err();
        assert!(e.to_string().len() < 600, "{e}");
    }

    #[test]
    fn overrides_apply_on_top_of_the_broker_settings() {
        let base = LogConfig {
            retention_bytes: 1000,
            ..LogConfig::default()
        };
        let overrides: Overrides = [
            ("retention.ms".to_owned(), "5000".to_owned()),
            ("segment.bytes".to_owned(), "1048576".to_owned()),
            ("flush.ms".to_owned(), "bad".to_owned()),
        ]
        .into();
        let config = effective(&base, &overrides);
        assert_eq!(config.retention_ms, 5000);
        assert_eq!(config.segment_bytes, 1_048_576);
        assert_eq!(config.retention_bytes, 1000);
        assert_eq!(config.flush_ms, base.flush_ms);
        config.validate().unwrap();
        for key in KEYS {
            let value = (key.get)(&config);
            assert!(validate(key.name, &value).is_ok(), "{} = {value}", key.name);
        }
    }
}
