//! DescribeGroups (20007, consumer or admin tool → coordinator), versions 0 to 2.
//!
//! Version 1 has the same request body; its answer appends to each member its member
//! data ([`MemberData`]: rack, weight, labels, as RegisterConsumer v1 declared them) and
//! to each group the load of its partitions as the group's last assignment saw it
//! ([`TopicLoads`]). A v0 answer carries neither; decoded, it reads as the defaults (no
//! rack, weight 1, no labels, no loads).
//!
//! Version 2 has the same request body again; its answer appends to each group its
//! protocol ([`DescribedGroup::group_type`]: `native` or `consumer`), and describes
//! KIP-848 groups as well as native ones (v0 and v1 describe native groups only). A v0
//! or v1 answer decodes with `group_type` `native`.

use bytes::{BufMut, Bytes, BytesMut};

use super::common::{TopicPartitions, TOPIC_ENTRY_MIN};
use super::register_consumer::{AutoOffsetReset, MemberData};
use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::{
    MAX_GROUPS_PER_REQUEST, MAX_MEMBERS_PER_GROUP, MAX_PARTITIONS_PER_TOPIC, MAX_TOPICS_PER_REQUEST,
};
use crate::primitives::{
    atomic, read_array, read_i16, read_i32, read_i64, read_i8, read_nullable_array,
    read_nullable_string, read_string, write_array, write_nullable_array, write_nullable_string,
    write_string,
};

/// Minimum encoded size of a STRING element: its INT16 length.
const STRING_MIN: usize = 2;

/// The highest DescribeGroups version this codec implements.
pub const DESCRIBE_GROUPS_MAX_VERSION: i16 = 2;

/// DescribeGroups request v0 to v2: `groups: nullable ARRAY of STRING` (the same body
/// in every version).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescribeGroupsRequest {
    /// The group ids to describe, at most [`MAX_GROUPS_PER_REQUEST`]; `None` (null) for
    /// every group the coordinator has.
    pub groups: Option<Vec<String>>,
    /// The version the request is sent at (not a body field; it travels in the request
    /// header): 0; 1 to be answered with member data and partition loads; 2 to be
    /// answered with each group's protocol as well, KIP-848 groups included. The
    /// decoder sets it from the header; the answer must be at the same version.
    pub version: i16,
}

impl DescribeGroupsRequest {
    /// A request at the highest version ([`DESCRIBE_GROUPS_MAX_VERSION`]) for `groups`
    /// (`None`: every group).
    pub fn new(groups: Option<Vec<String>>) -> Self {
        DescribeGroupsRequest {
            groups,
            version: DESCRIBE_GROUPS_MAX_VERSION,
        }
    }

    /// Appends the body (the same in every version) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_nullable_array(
                buf,
                self.groups.as_deref(),
                "DescribeGroupsRequest.groups",
                MAX_GROUPS_PER_REQUEST,
                |buf, g| write_string(buf, g, "DescribeGroupsRequest.groups[]"),
            )
        })
    }

    /// Reads a body of `version` (0 to 2; the caller checked it) from the front of
    /// `buf`.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {
        Ok(DescribeGroupsRequest {
            groups: read_nullable_array(
                buf,
                "DescribeGroupsRequest.groups",
                MAX_GROUPS_PER_REQUEST,
                STRING_MIN,
                |buf| read_string(buf, "DescribeGroupsRequest.groups[]"),
            )?,
            version,
        })
    }
}

/// The load of one partition as a group's last assignment saw it (DescribeGroups v1):
/// `partition INT32, bytes_per_sec INT64, records_per_sec INT64, lag INT64`; each of
/// the last three is −1 when the coordinator did not know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionLoad {
    /// The partition index.
    pub partition: i32,
    /// Recent produce rate into the partition, bytes per second (rounded down), over
    /// the window the broker measures (`coordinator.produce_rate_window_ms`); −1 unknown.
    pub bytes_per_sec: i64,
    /// Recent produce rate, records per second (rounded down), same window; −1 unknown.
    pub records_per_sec: i64,
    /// Records between the group's committed offset and the log end offset (never
    /// below 0); −1 when either was unknown.
    pub lag: i64,
}

impl PartitionLoad {
    /// Encoded size: INT32 and three INT64s.
    const SIZE: usize = 4 + 8 * 3;
}

/// The loads of one topic's partitions (DescribeGroups v1):
/// `topic STRING, partitions ARRAY{PartitionLoad}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicLoads {
    /// The topic name.
    pub topic: String,
    /// Ascending by partition, at most [`MAX_PARTITIONS_PER_TOPIC`].
    pub partitions: Vec<PartitionLoad>,
}

impl TopicLoads {
    fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        write_string(buf, &self.topic, "TopicLoads.topic")?;
        write_array(
            buf,
            &self.partitions,
            "TopicLoads.partitions",
            MAX_PARTITIONS_PER_TOPIC,
            |buf, p| {
                buf.put_i32(p.partition);
                buf.put_i64(p.bytes_per_sec);
                buf.put_i64(p.records_per_sec);
                buf.put_i64(p.lag);
                Ok(())
            },
        )
    }

    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(TopicLoads {
            topic: read_string(buf, "TopicLoads.topic")?,
            partitions: read_array(
                buf,
                "TopicLoads.partitions",
                MAX_PARTITIONS_PER_TOPIC,
                PartitionLoad::SIZE,
                |buf| {
                    Ok(PartitionLoad {
                        partition: read_i32(buf, "PartitionLoad.partition")?,
                        bytes_per_sec: read_i64(buf, "PartitionLoad.bytes_per_sec")?,
                        records_per_sec: read_i64(buf, "PartitionLoad.records_per_sec")?,
                        lag: read_i64(buf, "PartitionLoad.lag")?,
                    })
                },
            )?,
        })
    }
}

/// One registered consumer of a described group:
/// `consumer_id STRING, host STRING, session_timeout_ms INT32, generation INT32,
/// subscription STRING, topics ARRAY{STRING}, auto_offset_reset INT8,
/// partitions ARRAY{TopicPartitions}`; v1 appends `rack NULLABLE_STRING, weight INT32,
/// labels ARRAY{Label}` ([`MemberData`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescribedMember {
    /// The consumer id it registered with.
    pub consumer_id: String,
    /// The host it declared at registration (may be empty).
    pub host: String,
    /// Its session timeout, in milliseconds.
    pub session_timeout_ms: i32,
    /// The generation the coordinator believes the consumer is in (that of the last
    /// StartFetcher it sent it, or of its registration before the first one).
    pub generation: i32,
    /// The subscription as human-readable text, for operators only (not a stable
    /// format): `static: a(2), b(1)` (topic(streams)), `whitelist: re (2 streams)` or
    /// `blacklist: re (2 streams)`.
    pub subscription: String,
    /// The subscribed topics, sorted by name: a static subscription's topics (whether
    /// they exist yet or not), or the topics a wildcard matches in the coordinator's
    /// current topic metadata.
    pub topics: Vec<String>,
    /// Its reset policy as registered: 0 earliest, 1 latest, 2 none.
    pub auto_offset_reset: AutoOffsetReset,
    /// The partitions the consumer may be delivering in the coordinator's view: those
    /// of its last StartFetcher, minus any it has since stopped. Sorted by topic, then
    /// partition.
    pub partitions: Vec<TopicPartitions>,
    /// What it declared for the assignor at registration (v1; the default — no rack,
    /// weight 1, no labels — in a v0 answer).
    pub member: MemberData,
}

impl DescribedMember {
    /// Minimum encoded size: two STRING lengths, two INT32s, a STRING length, an ARRAY
    /// count, an INT8 and an ARRAY count.
    const MIN: usize = 2 + 2 + 4 + 4 + 2 + 4 + 1 + 4;

    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        write_string(buf, &self.consumer_id, "DescribedMember.consumer_id")?;
        write_string(buf, &self.host, "DescribedMember.host")?;
        buf.put_i32(self.session_timeout_ms);
        buf.put_i32(self.generation);
        write_string(buf, &self.subscription, "DescribedMember.subscription")?;
        write_array(
            buf,
            &self.topics,
            "DescribedMember.topics",
            MAX_TOPICS_PER_REQUEST,
            |buf, t| write_string(buf, t, "DescribedMember.topics[]"),
        )?;
        buf.put_i8(self.auto_offset_reset.0);
        write_array(
            buf,
            &self.partitions,
            "DescribedMember.partitions",
            MAX_TOPICS_PER_REQUEST,
            |buf, t| t.encode(buf),
        )?;
        if version >= 1 {
            self.member.encode(buf)?;
        }
        Ok(())
    }

    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {
        Ok(DescribedMember {
            consumer_id: read_string(buf, "DescribedMember.consumer_id")?,
            host: read_string(buf, "DescribedMember.host")?,
            session_timeout_ms: read_i32(buf, "DescribedMember.session_timeout_ms")?,
            generation: read_i32(buf, "DescribedMember.generation")?,
            subscription: read_string(buf, "DescribedMember.subscription")?,
            topics: read_array(
                buf,
                "DescribedMember.topics",
                MAX_TOPICS_PER_REQUEST,
                STRING_MIN,
                |buf| read_string(buf, "DescribedMember.topics[]"),
            )?,
            auto_offset_reset: AutoOffsetReset(read_i8(buf, "DescribedMember.auto_offset_reset")?),
            partitions: read_array(
                buf,
                "DescribedMember.partitions",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                TopicPartitions::decode,
            )?,
            member: if version >= 1 {
                MemberData::decode(buf)?
            } else {
                MemberData::default()
            },
        })
    }
}

/// One described group:
/// `group_id STRING, error_code INT16, state STRING, generation INT32,
/// assignor NULLABLE_STRING, rebalance_mode STRING, members ARRAY{DescribedMember},
/// held_by_failed ARRAY{TopicPartitions}`; v1 appends
/// `partition_loads ARRAY{TopicLoads}`, v2 then `group_type STRING`.
///
/// When `error_code` is not NONE, every other field is empty: `state`,
/// `rebalance_mode` and `group_type` are `""`, `generation` is 0, `assignor` is null
/// and the arrays are empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescribedGroup {
    /// The group id, as requested (or, for a null request, as the coordinator has it).
    pub group_id: String,
    /// NONE; GROUP_ID_NOT_FOUND when the coordinator has no such group;
    /// INVALID_GROUP_ID for an empty group id; NOT_COORDINATOR or
    /// COORDINATOR_NOT_AVAILABLE when the broker cannot serve the request
    /// ([`DescribeGroupsResponse::error`]).
    pub error_code: ErrorCode,
    /// Where the group is in its rebalance cycle. A native group:
    /// [`DescribedGroup::STABLE`], [`DescribedGroup::STOPPING`],
    /// [`DescribedGroup::FETCHING`], [`DescribedGroup::STARTING`] or
    /// [`DescribedGroup::EMPTY`]; a KIP-848 group (v2) Kafka's names: `Empty`,
    /// `Assigning`, `Reconciling`, `Stable`. A reader treats any other value as an
    /// unknown state.
    pub state: String,
    /// The group's current generation (0 until its first completed rebalance); a
    /// KIP-848 group's group epoch.
    pub generation: i32,
    /// The assignor its members use; null when it has no members.
    pub assignor: Option<String>,
    /// The rebalance mode for that assignor (the coordinator's default mode when the
    /// group has no members): [`DescribedGroup::INCREMENTAL`] or
    /// [`DescribedGroup::EAGER`].
    pub rebalance_mode: String,
    /// The registered consumers, sorted by consumer id.
    pub members: Vec<DescribedMember>,
    /// Partitions of failed consumers that are not released yet (their lease is still
    /// running, docs/protocol.md §6.2 rule d); no live member owns them. Sorted by topic,
    /// then partition.
    pub held_by_failed: Vec<TopicPartitions>,
    /// v1: the partitions the group's last assignment was given data about, with their
    /// produce rates and lag as it saw them (so an operator sees what the assignor
    /// balanced); sorted by topic, then partition. Empty before the first assignment,
    /// in a v0 answer, and for partitions the coordinator knew nothing about.
    pub partition_loads: Vec<TopicLoads>,
    /// v2: the group's protocol, [`DescribedGroup::NATIVE`],
    /// [`DescribedGroup::CONSUMER`] (KIP-848) or [`DescribedGroup::SHARE`] (KIP-932);
    /// a reader treats another value as a
    /// protocol it does not know. `native` in a v0 or v1 answer (they describe native
    /// groups only); `""` in an error entry.
    pub group_type: String,
}

impl DescribedGroup {
    /// `state`: no rebalance is running and the group has members.
    pub const STABLE: &'static str = "stable";
    /// `state`: a rebalance is stopping partitions (StopFetcher round).
    pub const STOPPING: &'static str = "stopping";
    /// `state`: a rebalance is flushing commits and reading start offsets.
    pub const FETCHING: &'static str = "fetching";
    /// `state`: a rebalance's StartFetcher round is out.
    pub const STARTING: &'static str = "starting";
    /// `state`: the group has no registered consumers (it may still have committed
    /// offsets).
    pub const EMPTY: &'static str = "empty";
    /// `rebalance_mode`: incremental rebalances (docs/protocol.md §6.4).
    pub const INCREMENTAL: &'static str = "incremental";
    /// `rebalance_mode`: eager rebalances (docs/protocol.md §6.4).
    pub const EAGER: &'static str = "eager";
    /// `group_type`: a group of the native protocol (RegisterConsumer).
    pub const NATIVE: &'static str = "native";
    /// `group_type`: a KIP-848 group (Kafka's ConsumerGroupHeartbeat).
    pub const CONSUMER: &'static str = "consumer";
    /// `group_type`: a share group (KIP-932, Kafka's ShareGroupHeartbeat): its members
    /// may share partitions.
    pub const SHARE: &'static str = "share";

    /// Minimum encoded size: STRING length, INT16, STRING length, INT32,
    /// NULLABLE_STRING length, STRING length and two ARRAY counts.
    const MIN: usize = 2 + 2 + 2 + 4 + 2 + 2 + 4 + 4;

    /// The entry for a group that cannot be described: `error_code` with every other
    /// field empty.
    pub fn error(group_id: impl Into<String>, error_code: ErrorCode) -> Self {
        DescribedGroup {
            group_id: group_id.into(),
            error_code,
            state: String::new(),
            generation: 0,
            assignor: None,
            rebalance_mode: String::new(),
            members: Vec::new(),
            held_by_failed: Vec::new(),
            partition_loads: Vec::new(),
            group_type: String::new(),
        }
    }

    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        write_string(buf, &self.group_id, "DescribedGroup.group_id")?;
        buf.put_i16(self.error_code.0);
        write_string(buf, &self.state, "DescribedGroup.state")?;
        buf.put_i32(self.generation);
        write_nullable_string(buf, self.assignor.as_deref(), "DescribedGroup.assignor")?;
        write_string(buf, &self.rebalance_mode, "DescribedGroup.rebalance_mode")?;
        write_array(
            buf,
            &self.members,
            "DescribedGroup.members",
            MAX_MEMBERS_PER_GROUP,
            |buf, m| m.encode(buf, version),
        )?;
        write_array(
            buf,
            &self.held_by_failed,
            "DescribedGroup.held_by_failed",
            MAX_TOPICS_PER_REQUEST,
            |buf, t| t.encode(buf),
        )?;
        if version >= 1 {
            write_array(
                buf,
                &self.partition_loads,
                "DescribedGroup.partition_loads",
                MAX_TOPICS_PER_REQUEST,
                |buf, t| t.encode(buf),
            )?;
        }
        if version >= 2 {
            write_string(buf, &self.group_type, "DescribedGroup.group_type")?;
        }
        Ok(())
    }

    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {
        let mut group = DescribedGroup {
            group_id: read_string(buf, "DescribedGroup.group_id")?,
            error_code: ErrorCode(read_i16(buf, "DescribedGroup.error_code")?),
            state: read_string(buf, "DescribedGroup.state")?,
            generation: read_i32(buf, "DescribedGroup.generation")?,
            assignor: read_nullable_string(buf, "DescribedGroup.assignor")?,
            rebalance_mode: read_string(buf, "DescribedGroup.rebalance_mode")?,
            members: read_array(
                buf,
                "DescribedGroup.members",
                MAX_MEMBERS_PER_GROUP,
                DescribedMember::MIN,
                |buf| DescribedMember::decode(buf, version),
            )?,
            held_by_failed: read_array(
                buf,
                "DescribedGroup.held_by_failed",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                TopicPartitions::decode,
            )?,
            partition_loads: if version >= 1 {
                read_array(
                    buf,
                    "DescribedGroup.partition_loads",
                    MAX_TOPICS_PER_REQUEST,
                    TOPIC_ENTRY_MIN,
                    TopicLoads::decode,
                )?
            } else {
                Vec::new()
            },
            group_type: String::new(),
        };
        group.group_type = if version >= 2 {
            read_string(buf, "DescribedGroup.group_type")?
        } else if !group.error_code.is_none() {
            String::new()
        } else {
            Self::NATIVE.to_owned()
        };
        Ok(group)
    }
}

/// DescribeGroups response v0 to v2: `groups: ARRAY{DescribedGroup}` (each group and
/// member in the shape of its version).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescribeGroupsResponse {
    /// One entry per requested group id, in request order (duplicates included); for a
    /// null request, one per group the coordinator has, sorted by group id. At most
    /// [`MAX_GROUPS_PER_REQUEST`].
    pub groups: Vec<DescribedGroup>,
    /// The version the answer is encoded at: that of the request (not a body field).
    /// At v0 the member data and partition loads are left out, below v2 the groups'
    /// protocol.
    pub version: i16,
}

impl DescribeGroupsResponse {
    /// The answer of a broker that cannot serve `request` at all, with `error_code`
    /// NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE (docs/protocol.md §7.2): that code
    /// on an entry for every requested group id, or, for a null request, on a single
    /// entry with an empty group id (never a real group).
    pub fn error(request: &DescribeGroupsRequest, error_code: ErrorCode) -> Self {
        let groups = match &request.groups {
            Some(ids) => ids
                .iter()
                .take(MAX_GROUPS_PER_REQUEST)
                .map(|id| DescribedGroup::error(id.as_str(), error_code))
                .collect(),
            None => vec![DescribedGroup::error("", error_code)],
        };
        DescribeGroupsResponse {
            groups,
            version: request.version,
        }
    }

    /// Appends the body at [`version`](Self::version) to `buf`; on error `buf` is left
    /// unchanged. Fails with [`EncodeError::UnsupportedVersion`] for a version other
    /// than 0 to 2.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        if !(0..=DESCRIBE_GROUPS_MAX_VERSION).contains(&self.version) {
            return Err(EncodeError::UnsupportedVersion {
                api_key: crate::ApiKey::DescribeGroups.code(),
                version: self.version,
            });
        }
        atomic(buf, |buf| {
            write_array(
                buf,
                &self.groups,
                "DescribeGroupsResponse.groups",
                MAX_GROUPS_PER_REQUEST,
                |buf, g| g.encode(buf, self.version),
            )
        })
    }

    /// Reads a body of `version` (0 to 2; the caller checked it) from the front of
    /// `buf`.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {
        Ok(DescribeGroupsResponse {
            groups: read_array(
                buf,
                "DescribeGroupsResponse.groups",
                MAX_GROUPS_PER_REQUEST,
                DescribedGroup::MIN,
                |buf| DescribedGroup::decode(buf, version),
            )?,
            version,
        })
    }
}
