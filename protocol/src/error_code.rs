//! Error codes carried in native responses. They reuse Kafka's numbers and names
//! (Kafka protocol guide, "Error Codes"); docs/protocol.md lists which API returns
//! which, and when.

use std::fmt;

/// An INT16 error code. Any value can be carried; the constants are the ones the
/// native protocol uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    /// 0: success.
    pub const NONE: ErrorCode = ErrorCode(0);
    /// 3: the topic or partition does not exist.
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
    /// 12: offset metadata longer than the coordinator accepts.
    pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = ErrorCode(12);
    /// 15: the coordinator is not running, still loading, or its offset store failed;
    /// retry after a backoff.
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
    /// 16: this broker is not the group's coordinator; rediscover it.
    pub const NOT_COORDINATOR: ErrorCode = ErrorCode(16);
    /// 22: the generation is not the current one (or the partition is not owned in it).
    pub const ILLEGAL_GENERATION: ErrorCode = ErrorCode(22);
    /// 23: the consumer names an assignor other than the one the group's members use.
    pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = ErrorCode(23);
    /// 24: the group id is empty (or, in a coordinator request, not the consumer's group).
    pub const INVALID_GROUP_ID: ErrorCode = ErrorCode(24);
    /// 25: the consumer id is not registered in the group.
    pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
    /// 26: the session timeout is outside the coordinator's configured bounds.
    pub const INVALID_SESSION_TIMEOUT: ErrorCode = ErrorCode(26);
    /// 27: the group is rebalancing and the partition is being moved.
    pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode(27);
    /// 42: the request is well-formed bytes but breaks a protocol rule.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
    /// 69: the group does not exist on this coordinator (DescribeGroups, for a group id
    /// it has never seen).
    pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode(69);
    /// 81: the group already has its maximum number of consumers.
    pub const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
    /// 128: the subscription pattern is not a valid regular expression (Kafka 4.0+).
    pub const INVALID_REGULAR_EXPRESSION: ErrorCode = ErrorCode(128);

    /// Whether this is [`ErrorCode::NONE`].
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Kafka's name of the code, if it is one the native protocol uses.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "NONE",
            3 => "UNKNOWN_TOPIC_OR_PARTITION",
            12 => "OFFSET_METADATA_TOO_LARGE",
            15 => "COORDINATOR_NOT_AVAILABLE",
            16 => "NOT_COORDINATOR",
            22 => "ILLEGAL_GENERATION",
            23 => "INCONSISTENT_GROUP_PROTOCOL",
            24 => "INVALID_GROUP_ID",
            25 => "UNKNOWN_MEMBER_ID",
            26 => "INVALID_SESSION_TIMEOUT",
            27 => "REBALANCE_IN_PROGRESS",
            42 => "INVALID_REQUEST",
            69 => "GROUP_ID_NOT_FOUND",
            81 => "GROUP_MAX_SIZE_REACHED",
            128 => "INVALID_REGULAR_EXPRESSION",
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}({})", self.0),
            None => write!(f, "error code {}", self.0),
        }
    }
}
