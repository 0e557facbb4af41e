//! The native API keys, who sends each, and the versions this codec implements.
//!
//! The keys sit in a private range far from Kafka's (which end below 100). They are
//! not listed in the Kafka ApiVersions response, so Kafka clients' version inference is
//! undisturbed; a native client sends the lowest version that carries its values
//! (version 0 of every API, RegisterConsumer v1 for a consumer that declares member
//! data).

use std::fmt;

/// First key of the range reserved for native APIs (20000–20099).
pub const NATIVE_API_KEY_FIRST: i16 = 20_000;
/// Last key of the range reserved for native APIs.
pub const NATIVE_API_KEY_LAST: i16 = 20_099;

/// Which side sends the request of an API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The consumer sends the request, the coordinator answers.
    ConsumerToCoordinator,
    /// The coordinator sends the request on the consumer's coordinator channel, the
    /// consumer answers.
    CoordinatorToConsumer,
}

/// An inclusive range of API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Lowest version.
    pub min: i16,
    /// Highest version.
    pub max: i16,
}

impl VersionRange {
    /// Whether `version` is in the range.
    pub const fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// A native coordinator API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ApiKey {
    /// 20000, consumer → coordinator: join a group; the connection becomes the
    /// consumer's coordinator channel.
    RegisterConsumer,
    /// 20001, coordinator → consumer: the "ping", answered with consumed offsets.
    Heartbeat,
    /// 20002, coordinator → consumer: stop fetching and delivering partitions.
    StopFetcher,
    /// 20003, coordinator → consumer: the consumer's complete assignment of a new
    /// generation.
    StartFetcher,
    /// 20004, consumer → coordinator: commit offsets.
    CommitOffset,
    /// 20005, consumer → coordinator: read committed offsets.
    FetchOffsets,
    /// 20006, consumer → coordinator: leave the group.
    LeaveGroup,
    /// 20007, consumer or admin tool → coordinator: describe groups (state, members,
    /// assignment).
    DescribeGroups,
    /// 20008, admin tool → coordinator: the groups' recent rebalances (cause, duration,
    /// partitions moved).
    DescribeRebalances,
}

impl ApiKey {
    /// Every native API, in key order.
    pub const ALL: [ApiKey; 9] = [
        ApiKey::RegisterConsumer,
        ApiKey::Heartbeat,
        ApiKey::StopFetcher,
        ApiKey::StartFetcher,
        ApiKey::CommitOffset,
        ApiKey::FetchOffsets,
        ApiKey::LeaveGroup,
        ApiKey::DescribeGroups,
        ApiKey::DescribeRebalances,
    ];

    /// The INT16 key on the wire.
    pub const fn code(self) -> i16 {
        match self {
            ApiKey::RegisterConsumer => 20_000,
            ApiKey::Heartbeat => 20_001,
            ApiKey::StopFetcher => 20_002,
            ApiKey::StartFetcher => 20_003,
            ApiKey::CommitOffset => 20_004,
            ApiKey::FetchOffsets => 20_005,
            ApiKey::LeaveGroup => 20_006,
            ApiKey::DescribeGroups => 20_007,
            ApiKey::DescribeRebalances => 20_008,
        }
    }

    /// The API with that wire key, if it is a native API this codec knows.
    pub const fn from_code(code: i16) -> Option<ApiKey> {
        Some(match code {
            20_000 => ApiKey::RegisterConsumer,
            20_001 => ApiKey::Heartbeat,
            20_002 => ApiKey::StopFetcher,
            20_003 => ApiKey::StartFetcher,
            20_004 => ApiKey::CommitOffset,
            20_005 => ApiKey::FetchOffsets,
            20_006 => ApiKey::LeaveGroup,
            20_007 => ApiKey::DescribeGroups,
            20_008 => ApiKey::DescribeRebalances,
            _ => return None,
        })
    }

    /// Whether `code` is in the range reserved for native APIs (known or not), so a
    /// broker can route it to the coordinator rather than its Kafka dispatcher.
    pub const fn is_native_code(code: i16) -> bool {
        NATIVE_API_KEY_FIRST <= code && code <= NATIVE_API_KEY_LAST
    }

    /// The versions this codec implements.
    pub const fn versions(self) -> VersionRange {
        // docs/protocol.md, "Versions and evolution": v0 is never retired.
        match self {
            // v1 appends the member data (rack, weight, labels).
            ApiKey::RegisterConsumer => VersionRange { min: 0, max: 1 },
            // v1's answer appends member data and partition loads, v2's the group's
            // protocol (and v2 describes KIP-848 groups too).
            ApiKey::DescribeGroups => VersionRange { min: 0, max: 2 },
            _ => VersionRange { min: 0, max: 0 },
        }
    }

    /// Who sends the request.
    pub const fn direction(self) -> Direction {
        match self {
            ApiKey::Heartbeat | ApiKey::StopFetcher | ApiKey::StartFetcher => {
                Direction::CoordinatorToConsumer
            }
            ApiKey::RegisterConsumer
            | ApiKey::CommitOffset
            | ApiKey::FetchOffsets
            | ApiKey::LeaveGroup
            | ApiKey::DescribeGroups
            | ApiKey::DescribeRebalances => Direction::ConsumerToCoordinator,
        }
    }

    /// The API's name as in docs/protocol.md.
    pub const fn name(self) -> &'static str {
        match self {
            ApiKey::RegisterConsumer => "RegisterConsumer",
            ApiKey::Heartbeat => "Heartbeat",
            ApiKey::StopFetcher => "StopFetcher",
            ApiKey::StartFetcher => "StartFetcher",
            ApiKey::CommitOffset => "CommitOffset",
            ApiKey::FetchOffsets => "FetchOffsets",
            ApiKey::LeaveGroup => "LeaveGroup",
            ApiKey::DescribeGroups => "DescribeGroups",
            ApiKey::DescribeRebalances => "DescribeRebalances",
        }
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_stay_in_range() {
        for key in ApiKey::ALL {
            assert_eq!(ApiKey::from_code(key.code()), Some(key));
            assert!(ApiKey::is_native_code(key.code()));
            assert!(key.versions().contains(0));
        }
        assert_eq!(ApiKey::from_code(20_007), Some(ApiKey::DescribeGroups));
        assert_eq!(
            ApiKey::DescribeGroups.direction(),
            Direction::ConsumerToCoordinator
        );
        assert_eq!(ApiKey::from_code(20_008), Some(ApiKey::DescribeRebalances));
        assert_eq!(ApiKey::from_code(20_009), None);
        assert_eq!(ApiKey::from_code(0), None);
        assert!(!ApiKey::is_native_code(68));
        assert!(ApiKey::RegisterConsumer.versions().contains(1));
        assert!(!ApiKey::Heartbeat.versions().contains(1));
    }
}
