//! The boundary with `drover-protocol`: encoding frames and converting wire values to
//! the core's domain types and back.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes, BytesMut};
use drover_protocol as proto;
use drover_protocol::{EncodeError, NativeRequest, NativeResponse};
use kafka_protocol::ResponseError;

use crate::core::GroupSnapshot;
use crate::seen_loads::SeenLoad;
use crate::types::{TopicName, TopicPartition};

/// The first allocation of an encoded frame, bytes: a ping, a Heartbeat answer or a
/// small StartFetcher fits, so the hot path allocates each frame once (a larger frame
/// grows as before). The size prefix is dropped by advancing past it, which keeps the
/// frame in its one allocation (`slice` would share it through a second one).
const FRAME_CAPACITY: usize = 128;

/// A request frame (header v1, null client id) without the size prefix.
pub(crate) fn encode_request(
    correlation_id: i32,
    request: &NativeRequest,
) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::with_capacity(FRAME_CAPACITY);
    proto::encode_request_frame(&mut buf, correlation_id, None, request)?;
    buf.advance(4);
    Ok(buf.freeze())
}

/// A response frame (header v0) without the size prefix.
pub(crate) fn encode_response(
    correlation_id: i32,
    response: &NativeResponse,
) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::with_capacity(FRAME_CAPACITY);
    proto::encode_response_frame(&mut buf, correlation_id, response)?;
    buf.advance(4);
    Ok(buf.freeze())
}

/// The native protocol's error code for the core's answer: `None` (success) is NONE, an
/// error its Kafka code (the native protocol reuses Kafka's numbers and names,
/// docs/protocol.md). Every native response takes its error codes from here.
pub(crate) fn error_code(error: impl Into<Option<ResponseError>>) -> proto::ErrorCode {
    proto::ErrorCode(error.into().map_or(0, |e| e.code()))
}

/// The core's name for an error code of the native protocol (from the protocol crate's
/// own request checks); `None` for NONE.
pub(crate) fn kafka_error(code: proto::ErrorCode) -> Option<ResponseError> {
    ResponseError::try_from_code(code.0)
}

/// One offset as carried by Heartbeat, StopFetcher and CommitOffset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireOffset {
    pub tp: TopicPartition,
    pub offset: i64,
    pub metadata: Option<String>,
}

/// Flattens a wire offsets array, in order.
pub(crate) fn offsets_from_wire(
    topics: Vec<proto::TopicOffsets>,
    known: &BTreeMap<TopicName, u32>,
) -> Vec<WireOffset> {
    let mut out = Vec::new();
    for t in topics {
        // A known topic's name is shared, not allocated again for every answer.
        let topic = match known.get_key_value(t.topic.as_str()) {
            Some((name, _)) => name.clone(),
            None => TopicName::from(t.topic),
        };
        for p in t.partitions {
            out.push(WireOffset {
                tp: TopicPartition {
                    topic: topic.clone(),
                    partition: p.partition,
                },
                offset: p.offset,
                metadata: p.metadata,
            });
        }
    }
    out
}

/// Groups sorted partitions by topic, in the wire's shape.
pub(crate) fn partitions_to_wire<'a>(
    tps: impl IntoIterator<Item = &'a TopicPartition>,
) -> Vec<proto::TopicPartitions> {
    let mut out: Vec<proto::TopicPartitions> = Vec::new();
    for tp in tps {
        match out.last_mut() {
            Some(last) if last.topic == tp.topic.as_str() => last.partitions.push(tp.partition),
            _ => out.push(proto::TopicPartitions::new(
                tp.topic.as_str(),
                vec![tp.partition],
            )),
        }
    }
    out
}

/// Flattens a wire partition list.
pub(crate) fn partitions_from_wire(topics: Vec<proto::TopicPartitions>) -> Vec<TopicPartition> {
    let mut out = Vec::new();
    for t in topics {
        let topic = TopicName::from(t.topic);
        for p in t.partitions {
            out.push(TopicPartition {
                topic: topic.clone(),
                partition: p,
            });
        }
    }
    out
}

/// A StartFetcher assignment (sorted by partition) in the wire's shape.
pub(crate) fn assignment_to_wire<'a>(
    starts: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
) -> Vec<proto::TopicAssignment> {
    let mut out: Vec<proto::TopicAssignment> = Vec::new();
    for (tp, start_offset) in starts {
        let start = proto::PartitionStart {
            partition: tp.partition,
            start_offset,
        };
        match out.last_mut() {
            Some(last) if last.topic == tp.topic.as_str() => last.partitions.push(start),
            _ => out.push(proto::TopicAssignment {
                topic: tp.topic.as_str().to_owned(),
                partitions: vec![start],
            }),
        }
    }
    out
}

/// Cuts `items` to `max` entries, logging what was cut (only beyond the protocol's caps).
fn capped<T>(mut items: Vec<T>, max: usize, group: &str, what: &'static str) -> Vec<T> {
    if items.len() > max {
        tracing::warn!(
            group,
            what,
            count = items.len(),
            max,
            "DescribeGroups: array over the protocol cap cut"
        );
        items.truncate(max);
    }
    items
}

/// Cuts a string to the longest STRING the protocol carries, at a character boundary.
fn clipped(mut text: String) -> String {
    if text.len() > proto::MAX_STRING_LEN {
        let mut end = proto::MAX_STRING_LEN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Sorted partitions in the wire's shape, cut at the protocol's caps.
fn partitions_capped(
    tps: &[TopicPartition],
    group: &str,
    what: &'static str,
) -> Vec<proto::TopicPartitions> {
    let topics = partitions_to_wire(tps)
        .into_iter()
        .map(|mut t| {
            t.partitions = capped(t.partitions, proto::MAX_PARTITIONS_PER_TOPIC, group, what);
            t
        })
        .collect();
    capped(topics, proto::MAX_TOPICS_PER_REQUEST, group, what)
}

/// A group snapshot as a DescribeGroups entry (error NONE), within the protocol's caps.
pub(crate) fn group_to_wire(snapshot: GroupSnapshot) -> proto::DescribedGroup {
    let group = snapshot.group.as_str();
    let members = snapshot
        .members
        .into_iter()
        .map(|m| proto::DescribedMember {
            consumer_id: m.consumer.as_str().to_owned(),
            host: clipped(m.host),
            session_timeout_ms: i32::try_from(m.session_timeout_ms).unwrap_or(i32::MAX),
            generation: m.generation.0,
            subscription: clipped(m.subscription),
            topics: capped(
                m.topics.iter().map(|t| t.as_str().to_owned()).collect(),
                proto::MAX_TOPICS_PER_REQUEST,
                group,
                "topics",
            ),
            auto_offset_reset: proto::AutoOffsetReset(m.auto_offset_reset),
            partitions: partitions_capped(&m.owned, group, "partitions"),
            // Checked against the protocol's caps at registration.
            member: m.data,
        })
        .collect();
    let loads = snapshot
        .loads
        .into_iter()
        .map(|t| proto::TopicLoads {
            topic: t.topic.as_str().to_owned(),
            partitions: capped(
                t.partitions.iter().map(load_to_wire).collect(),
                proto::MAX_PARTITIONS_PER_TOPIC,
                group,
                "partition_loads",
            ),
        })
        .collect();
    proto::DescribedGroup {
        group_id: group.to_owned(),
        error_code: error_code(None),
        state: snapshot.state.to_owned(),
        generation: snapshot.generation.0,
        assignor: snapshot.assignor.map(clipped),
        rebalance_mode: snapshot.mode.as_str().to_owned(),
        members: capped(members, proto::MAX_MEMBERS_PER_GROUP, group, "members"),
        held_by_failed: partitions_capped(&snapshot.held_by_failed, group, "held_by_failed"),
        partition_loads: capped(
            loads,
            proto::MAX_TOPICS_PER_REQUEST,
            group,
            "partition_loads",
        ),
        group_type: snapshot.group_type.to_owned(),
    }
}

/// A seen load in the wire's shape: rates rounded down to whole units per second, −1
/// for what was unknown.
fn load_to_wire(load: &SeenLoad) -> proto::PartitionLoad {
    // `as` saturates (and maps NaN to 0); rates are never negative.
    let rate = |r: Option<f64>| r.map_or(-1, |r| r.max(0.0) as i64);
    proto::PartitionLoad {
        partition: load.partition,
        bytes_per_sec: rate(load.bytes_per_sec),
        records_per_sec: rate(load.records_per_sec),
        lag: load.lag.unwrap_or(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_round_trips() {
        let tps = vec![
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 2),
            TopicPartition::new("b", 1),
        ];
        let wire = partitions_to_wire(&tps);
        assert_eq!(wire.len(), 2);
        assert_eq!(partitions_from_wire(wire), tps);
        let starts = assignment_to_wire(tps.iter().map(|tp| (tp, -2)));
        assert_eq!(starts[0].partitions.len(), 2);
        assert_eq!(starts[1].partitions[0].start_offset, -2);
    }

    #[test]
    fn descriptions_stay_within_the_caps() {
        use crate::core::MemberSnapshot;
        use crate::types::{ConsumerId, Generation, GroupId};

        let long = "é".repeat(proto::MAX_STRING_LEN); // 2 bytes per char
        let snapshot = GroupSnapshot {
            group: GroupId::new("g"),
            group_type: "native",
            state: "stable",
            generation: Generation(4),
            assignor: Some("range".into()),
            mode: crate::RebalanceMode::Eager,
            members: vec![MemberSnapshot {
                consumer: ConsumerId::new("c"),
                host: "h".into(),
                session_timeout_ms: 6_000,
                generation: Generation(4),
                subscription: long,
                topics: vec![TopicName::new("t")],
                auto_offset_reset: 1,
                owned: (0..(proto::MAX_PARTITIONS_PER_TOPIC as i32 + 5))
                    .map(|p| TopicPartition::new("t", p))
                    .collect(),
                data: proto::MemberData::default(),
            }],
            held_by_failed: vec![TopicPartition::new("u", 1)],
            loads: vec![crate::seen_loads::TopicSeenLoads {
                topic: TopicName::new("t"),
                partitions: vec![SeenLoad {
                    partition: 0,
                    bytes_per_sec: Some(1500.7),
                    records_per_sec: None,
                    lag: Some(3),
                }],
            }],
        };
        let described = group_to_wire(snapshot);
        let m = &described.members[0];
        assert_eq!(m.subscription.len(), proto::MAX_STRING_LEN - 1);
        assert_eq!(
            m.partitions[0].partitions.len(),
            proto::MAX_PARTITIONS_PER_TOPIC
        );
        assert_eq!(described.rebalance_mode, "eager");
        assert_eq!(
            described.held_by_failed,
            [proto::TopicPartitions::new("u", [1])]
        );
        assert_eq!(
            described.partition_loads[0].partitions,
            [proto::PartitionLoad {
                partition: 0,
                bytes_per_sec: 1500,
                records_per_sec: -1,
                lag: 3
            }]
        );
        let response = NativeResponse::DescribeGroups(proto::DescribeGroupsResponse {
            groups: vec![described],
            version: 1,
        });
        assert!(encode_response(1, &response).is_ok());
    }

    #[test]
    fn native_error_codes_are_kafkas() {
        assert_eq!(error_code(None), proto::ErrorCode::NONE);
        assert_eq!(
            error_code(ResponseError::NotCoordinator),
            proto::ErrorCode::NOT_COORDINATOR
        );
        assert_eq!(
            error_code(ResponseError::InvalidRegularExpression),
            proto::ErrorCode::INVALID_REGULAR_EXPRESSION
        );
        assert_eq!(
            kafka_error(proto::ErrorCode::INVALID_SESSION_TIMEOUT),
            Some(ResponseError::InvalidSessionTimeout)
        );
        assert_eq!(kafka_error(proto::ErrorCode::NONE), None);
    }

    #[test]
    fn frames_have_no_size_prefix() {
        let bytes = encode_response(
            7,
            &NativeResponse::LeaveGroup(proto::LeaveGroupResponse {
                error_code: proto::ErrorCode::NONE,
            }),
        )
        .unwrap();
        assert_eq!(&bytes[..], &[0, 0, 0, 7, 0, 0]);
    }
}
