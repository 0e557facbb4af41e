//! The connector's errors.

use std::time::Duration;

/// What went wrong, as the application sees it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The configuration cannot work (empty broker list, bad value).
    #[error("invalid consumer config: {0}")]
    Config(String),
    /// A whitelist/blacklist pattern is not a valid regular expression.
    #[error("invalid topic pattern `{pattern}`: {message}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// What the regex parser said.
        message: String,
    },
    /// A topic of a static subscription does not exist.
    #[error("unknown topic `{0}` (the broker has no such topic)")]
    UnknownTopic(String),
    /// No bootstrap broker answered within the bootstrap timeout.
    #[error("gave up after {:.1} s (brokers tried: {tried}); last error: {last}", waited.as_secs_f64())]
    Unreachable {
        /// The brokers tried.
        tried: String,
        /// How long we tried.
        waited: Duration,
        /// The last connection or protocol error.
        last: String,
    },
    /// The coordinator refused the registration (docs/protocol.md §7.2).
    #[error("the coordinator refused the registration: {code} ({message})")]
    Refused {
        /// The error code's name.
        code: String,
        /// The coordinator's message.
        message: String,
    },
    /// A partition has no committed offset and `auto_offset_reset` is `none`.
    #[error(
        "no committed offset for {topic}-{partition} and auto_offset_reset = none; \
         commit an offset for it or choose earliest/latest"
    )]
    NoCommittedOffset {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
    /// A partition's position is outside its log (Kafka's OFFSET_OUT_OF_RANGE) and
    /// `auto_offset_reset` is `none`: the consumer cannot read it. It reports the dead
    /// fetcher to the coordinator (docs/protocol.md §6.3), which moves the group's
    /// partitions; the consumer registers again after `fetcher_failure_backoff_ms`,
    /// doubling while the fetcher keeps dying. Commit an offset inside the log (the
    /// non-member CommitOffset of §5.5, while the group is empty) or choose
    /// earliest/latest.
    #[error(
        "offset {offset} of {topic}-{partition} is out of range{} and auto_offset_reset = none",
        log.map_or_else(String::new, |(start, end)| format!(" (log {start}..{end})"))
    )]
    OffsetOutOfRange {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The position that was out of range.
        offset: i64,
        /// The log start and end offsets the broker reported with the error; `None`
        /// when the offset was refused for having been out of range before (a
        /// StartFetcher that gives it again).
        log: Option<(i64, i64)>,
    },
    /// A network or protocol failure talking to a broker.
    #[error("{0}")]
    Io(String),
    /// A request was answered with an error code.
    #[error("{api} failed: {code}")]
    Response {
        /// The API.
        api: &'static str,
        /// The error code's name or number.
        code: String,
    },
    /// The consumer is shut down.
    #[error("the consumer is shut down")]
    Shutdown,
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e.to_string())
    }
}
