//! The boundary with `drover-protocol`: encoding frames and converting wire values to
//! the core's domain types and back.

use bytes::{Bytes, BytesMut};
use drover_protocol as proto;
use drover_protocol::{EncodeError, NativeRequest, NativeResponse};

use crate::types::{TopicName, TopicPartition};

/// A request frame (header v1, null client id) without the size prefix.
pub(crate) fn encode_request(
    correlation_id: i32,
    request: &NativeRequest,
) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::new();
    proto::encode_request_frame(&mut buf, correlation_id, None, request)?;
    Ok(buf.freeze().slice(4..))
}

/// A response frame (header v0) without the size prefix.
pub(crate) fn encode_response(
    correlation_id: i32,
    response: &NativeResponse,
) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::new();
    proto::encode_response_frame(&mut buf, correlation_id, response)?;
    Ok(buf.freeze().slice(4..))
}

/// One offset as carried by Heartbeat, StopFetcher and CommitOffset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireOffset {
    pub tp: TopicPartition,
    pub offset: i64,
    pub metadata: Option<String>,
}

/// Flattens a wire offsets array, in order.
pub(crate) fn offsets_from_wire(topics: Vec<proto::TopicOffsets>) -> Vec<WireOffset> {
    let mut out = Vec::new();
    for t in topics {
        let topic = TopicName::from(t.topic);
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
