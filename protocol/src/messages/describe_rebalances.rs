//! DescribeRebalances (20008, admin tool → coordinator), version 0: each group's recent
//! rebalances as the coordinator recorded them (at most [`MAX_REBALANCES_PER_GROUP`]
//! per group, oldest first), for operators (the admin API's
//! `GET /v1/groups/{group}/rebalances` and the web console's timeline).
//!
//! A coordinator that does not know the API closes the connection, as for any unknown
//! native API key; a caller reads that as "not recorded".

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::MAX_GROUPS_PER_REQUEST;
use crate::primitives::{
    atomic, read_array, read_i16, read_i32, read_i64, read_nullable_string, read_string,
    write_array, write_nullable_string, write_string,
};

/// Most rebalances one group's entry carries (and a coordinator keeps).
pub const MAX_REBALANCES_PER_GROUP: usize = 50;

/// Minimum encoded size of a STRING element: its INT16 length.
const STRING_MIN: usize = 2;

/// DescribeRebalances request v0: `groups ARRAY{STRING}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescribeRebalancesRequest {
    /// The group ids, at most [`MAX_GROUPS_PER_REQUEST`].
    pub groups: Vec<String>,
}

impl DescribeRebalancesRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_array(
                buf,
                &self.groups,
                "DescribeRebalancesRequest.groups",
                MAX_GROUPS_PER_REQUEST,
                |buf, g| write_string(buf, g, "DescribeRebalancesRequest.groups[]"),
            )
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(DescribeRebalancesRequest {
            groups: read_array(
                buf,
                "DescribeRebalancesRequest.groups",
                MAX_GROUPS_PER_REQUEST,
                STRING_MIN,
                |buf| read_string(buf, "DescribeRebalancesRequest.groups[]"),
            )?,
        })
    }
}

/// One recorded rebalance: `generation INT32, cause STRING, age_ms INT64,
/// duration_ms INT64, partitions_moved INT32, members INT32, assignor NULLABLE_STRING`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RebalanceRecord {
    /// The generation it started from (a KIP-848 group: the group epoch it set).
    pub generation: i32,
    /// Why it ran: [`RebalanceRecord::JOIN`], [`RebalanceRecord::LEAVE`],
    /// [`RebalanceRecord::SESSION_EXPIRY`], [`RebalanceRecord::TOPIC_CHANGE`],
    /// [`RebalanceRecord::LOAD_DRIFT`], [`RebalanceRecord::PLUGIN_RESCAN`],
    /// [`RebalanceRecord::SUBSCRIPTION_CHANGE`] or [`RebalanceRecord::OTHER`] (the
    /// first trigger of the series the rebalance answered); a reader shows another
    /// value as it is.
    pub cause: String,
    /// How long before the answer it started, ms.
    pub age_ms: i64,
    /// How long it took, ms; −1 while it runs.
    pub duration_ms: i64,
    /// Partitions whose owner it changed (given to another member, or taken from one);
    /// −1 while it runs.
    pub partitions_moved: i32,
    /// Members when it started.
    pub members: i32,
    /// The assignor it ran, if known.
    pub assignor: Option<String>,
}

impl RebalanceRecord {
    /// `cause`: a member joined.
    pub const JOIN: &'static str = "join";
    /// `cause`: a member left (LeaveGroup, or its channel closed).
    pub const LEAVE: &'static str = "leave";
    /// `cause`: a member's session expired.
    pub const SESSION_EXPIRY: &'static str = "session_expiry";
    /// `cause`: a subscribed topic was created, deleted or grew.
    pub const TOPIC_CHANGE: &'static str = "topic_change";
    /// `cause`: the assignor's inputs (produce rates, lag) drifted.
    pub const LOAD_DRIFT: &'static str = "load_drift";
    /// `cause`: a plugin rescan changed the group's assignor.
    pub const PLUGIN_RESCAN: &'static str = "plugin_rescan";
    /// `cause`: a member's subscription changed.
    pub const SUBSCRIPTION_CHANGE: &'static str = "subscription_change";
    /// `cause`: anything else (a retry after a failed assignment, a safety check).
    pub const OTHER: &'static str = "other";

    /// Minimum encoded size.
    const MIN: usize = 4 + 2 + 8 + 8 + 4 + 4 + 2;

    fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        buf.put_i32(self.generation);
        write_string(buf, &self.cause, "RebalanceRecord.cause")?;
        buf.put_i64(self.age_ms);
        buf.put_i64(self.duration_ms);
        buf.put_i32(self.partitions_moved);
        buf.put_i32(self.members);
        write_nullable_string(buf, self.assignor.as_deref(), "RebalanceRecord.assignor")
    }

    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(RebalanceRecord {
            generation: read_i32(buf, "RebalanceRecord.generation")?,
            cause: read_string(buf, "RebalanceRecord.cause")?,
            age_ms: read_i64(buf, "RebalanceRecord.age_ms")?,
            duration_ms: read_i64(buf, "RebalanceRecord.duration_ms")?,
            partitions_moved: read_i32(buf, "RebalanceRecord.partitions_moved")?,
            members: read_i32(buf, "RebalanceRecord.members")?,
            assignor: read_nullable_string(buf, "RebalanceRecord.assignor")?,
        })
    }
}

/// One group of the answer: `group_id STRING, error_code INT16,
/// rebalances ARRAY{RebalanceRecord}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupRebalances {
    /// The group id, as requested.
    pub group_id: String,
    /// NONE; GROUP_ID_NOT_FOUND when the coordinator has no such group; NOT_COORDINATOR
    /// when another coordinator serves it.
    pub error_code: ErrorCode,
    /// Its recorded rebalances, oldest first, at most [`MAX_REBALANCES_PER_GROUP`].
    pub rebalances: Vec<RebalanceRecord>,
}

impl GroupRebalances {
    const MIN: usize = 2 + 2 + 4;
}

/// DescribeRebalances response v0: `groups ARRAY{GroupRebalances}`, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescribeRebalancesResponse {
    /// One entry per requested group.
    pub groups: Vec<GroupRebalances>,
}

impl DescribeRebalancesResponse {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_array(
                buf,
                &self.groups,
                "DescribeRebalancesResponse.groups",
                MAX_GROUPS_PER_REQUEST,
                |buf, g| {
                    write_string(buf, &g.group_id, "GroupRebalances.group_id")?;
                    buf.put_i16(g.error_code.0);
                    write_array(
                        buf,
                        &g.rebalances,
                        "GroupRebalances.rebalances",
                        MAX_REBALANCES_PER_GROUP,
                        |buf, r| r.encode(buf),
                    )
                },
            )
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(DescribeRebalancesResponse {
            groups: read_array(
                buf,
                "DescribeRebalancesResponse.groups",
                MAX_GROUPS_PER_REQUEST,
                GroupRebalances::MIN,
                |buf| {
                    Ok(GroupRebalances {
                        group_id: read_string(buf, "GroupRebalances.group_id")?,
                        error_code: ErrorCode(read_i16(buf, "GroupRebalances.error_code")?),
                        rebalances: read_array(
                            buf,
                            "GroupRebalances.rebalances",
                            MAX_REBALANCES_PER_GROUP,
                            RebalanceRecord::MIN,
                            RebalanceRecord::decode,
                        )?,
                    })
                },
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_caps_the_history() {
        let record = RebalanceRecord {
            generation: 3,
            cause: RebalanceRecord::SESSION_EXPIRY.into(),
            age_ms: 1_500,
            duration_ms: -1,
            partitions_moved: -1,
            members: 2,
            assignor: Some("range".into()),
        };
        let response = DescribeRebalancesResponse {
            groups: vec![GroupRebalances {
                group_id: "g".into(),
                error_code: ErrorCode::NONE,
                rebalances: vec![record.clone(); MAX_REBALANCES_PER_GROUP],
            }],
        };
        let mut buf = BytesMut::new();
        response.encode(&mut buf).unwrap();
        let mut bytes = buf.freeze();
        assert_eq!(
            DescribeRebalancesResponse::decode(&mut bytes).unwrap(),
            response
        );
        assert!(bytes.is_empty());

        let mut too_many = response.clone();
        too_many.groups[0].rebalances.push(record);
        let mut buf = BytesMut::new();
        assert!(too_many.encode(&mut buf).is_err());
        assert!(
            buf.is_empty(),
            "a failed encode leaves the buffer as it was"
        );

        let request = DescribeRebalancesRequest {
            groups: vec!["a".into(), "b".into()],
        };
        let mut buf = BytesMut::new();
        request.encode(&mut buf).unwrap();
        assert_eq!(
            DescribeRebalancesRequest::decode(&mut buf.freeze()).unwrap(),
            request
        );
    }

    #[test]
    fn a_forged_count_allocates_nothing() {
        let mut buf = BytesMut::new();
        buf.put_i32(1);
        write_string(&mut buf, "g", "g").unwrap();
        buf.put_i16(0);
        buf.put_i32(1_000_000);
        assert!(DescribeRebalancesResponse::decode(&mut buf.freeze()).is_err());
    }
}
