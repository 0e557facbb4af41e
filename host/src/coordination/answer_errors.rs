//! The error codes in a coordinator's answer, for the request metrics.
//!
//! The driver never decodes frames to route them (the coordinator contract), but it
//! does read an answer's error codes to count it: a group API answered with
//! REBALANCE_IN_PROGRESS must not show as NONE. Codes are counted as Kafka's
//! `AbstractResponse.errorCounts()` counts them (`kafka.network:type=RequestMetrics,
//! name=ErrorsPerSec`): the top-level `error_code` where the response has one, and the
//! code of every group, member or partition it reports on, NONE included. Native
//! answers (docs/protocol.md) are counted the same way; their codes are Kafka's.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::{
    messages::{ApiKey, ResponseHeader, ResponseKind},
    protocol::Decodable,
};

/// How many times each error code occurs in one answer (code → count).
pub type ErrorCounts = BTreeMap<i16, u64>;

/// The error counts of a Kafka answer `answer` (response header and body, after the
/// size prefix) to a request of `api_key` at `version`. `None` when the answer does not
/// decode as that API's response, or the API is not a group API the coordinator
/// serves.
pub fn kafka(api_key: ApiKey, version: i16, answer: &Bytes) -> Option<ErrorCounts> {
    let mut body = answer.clone();
    ResponseHeader::decode(&mut body, api_key.response_header_version(version)).ok()?;
    let response = ResponseKind::decode(api_key, &mut body, version).ok()?;
    let mut counts = ErrorCounts::new();
    let mut add = |code: i16| *counts.entry(code).or_default() += 1;
    match &response {
        ResponseKind::ApiVersions(r) => add(r.error_code),
        ResponseKind::JoinGroup(r) => add(r.error_code),
        ResponseKind::SyncGroup(r) => add(r.error_code),
        ResponseKind::Heartbeat(r) => add(r.error_code),
        ResponseKind::ListGroups(r) => add(r.error_code),
        ResponseKind::ConsumerGroupHeartbeat(r) => add(r.error_code),
        ResponseKind::ShareGroupHeartbeat(r) => add(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            add(r.error_code);
            r.members.iter().for_each(|m| add(m.error_code));
        }
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| add(p.error_code)),
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| add(p.error_code)),
        // v8+ answers per group; earlier versions for the one group of the request.
        ResponseKind::OffsetFetch(r) if version >= 8 => {
            for group in &r.groups {
                add(group.error_code);
                group
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .for_each(|p| add(p.error_code));
            }
        }
        ResponseKind::OffsetFetch(r) => {
            add(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| add(p.error_code));
        }
        ResponseKind::OffsetDelete(r) => {
            add(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| add(p.error_code));
        }
        ResponseKind::DescribeGroups(r) => r.groups.iter().for_each(|g| add(g.error_code)),
        ResponseKind::DeleteGroups(r) => r.results.iter().for_each(|g| add(g.error_code)),
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.iter().for_each(|g| add(g.error_code)),
        ResponseKind::ShareGroupDescribe(r) => r.groups.iter().for_each(|g| add(g.error_code)),
        _ => return None,
    }
    Some(counts)
}

/// The error counts of a native answer (docs/protocol.md) to a request of `api_key` at
/// `version`: the response's `error_code`, and each partition's (CommitOffset,
/// FetchOffsets) or group's (DescribeGroups). `None` when it does not decode.
pub fn native(
    api_key: drover_protocol::ApiKey,
    version: i16,
    answer: &Bytes,
) -> Option<ErrorCounts> {
    use drover_protocol::NativeResponse;
    let (_, response) =
        drover_protocol::decode_response_frame(answer.clone(), api_key, version).ok()?;
    let mut counts = ErrorCounts::new();
    let mut add = |code: drover_protocol::ErrorCode| *counts.entry(code.0).or_default() += 1;
    match &response {
        NativeResponse::RegisterConsumer(r) => add(r.error_code),
        NativeResponse::Heartbeat(r) => add(r.error_code),
        NativeResponse::StopFetcher(r) => add(r.error_code),
        NativeResponse::StartFetcher(r) => add(r.error_code),
        NativeResponse::CommitOffset(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| add(p.error_code)),
        NativeResponse::LeaveGroup(r) => add(r.error_code),
        NativeResponse::FetchOffsets(r) => {
            add(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| add(p.error_code));
        }
        NativeResponse::DescribeGroups(r) => r.groups.iter().for_each(|g| add(g.error_code)),
        _ => return None,
    }
    Some(counts)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::{
        messages::{
            offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
            offset_fetch_response::OffsetFetchResponseGroup,
            HeartbeatResponse, OffsetCommitResponse, OffsetFetchResponse,
        },
        protocol::{Encodable, StrBytes},
    };

    use super::*;

    fn answer(key: ApiKey, version: i16, response: &impl Encodable) -> Bytes {
        let mut buf = BytesMut::new();
        let mut header = ResponseHeader::default();
        header.correlation_id = 7;
        header
            .encode(&mut buf, key.response_header_version(version))
            .unwrap();
        response.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn a_heartbeat_counts_its_top_level_code() {
        let mut r = HeartbeatResponse::default();
        r.error_code = 27; // REBALANCE_IN_PROGRESS
        let counts = kafka(ApiKey::Heartbeat, 4, &answer(ApiKey::Heartbeat, 4, &r));
        assert_eq!(counts, Some(ErrorCounts::from([(27, 1)])));
    }

    #[test]
    fn an_offset_commit_counts_every_partition_none_included() {
        let partition = |index, code| {
            let mut p = OffsetCommitResponsePartition::default();
            p.partition_index = index;
            p.error_code = code;
            p
        };
        let mut topic = OffsetCommitResponseTopic::default();
        topic.name = StrBytes::from_static_str("t").into();
        topic.partitions = vec![partition(0, 0), partition(1, 1), partition(2, 0)];
        let mut r = OffsetCommitResponse::default();
        r.topics = vec![topic];
        for version in [2, 8, 9] {
            let counts = kafka(
                ApiKey::OffsetCommit,
                version,
                &answer(ApiKey::OffsetCommit, version, &r),
            );
            assert_eq!(
                counts,
                Some(ErrorCounts::from([(0, 2), (1, 1)])),
                "v{version}"
            );
        }
    }

    #[test]
    fn an_offset_fetch_counts_per_group_from_v8() {
        let mut group = OffsetFetchResponseGroup::default();
        group.group_id = StrBytes::from_static_str("g").into();
        group.error_code = 69; // GROUP_ID_NOT_FOUND
        let mut r = OffsetFetchResponse::default();
        r.groups = vec![group.clone(), group];
        let counts = kafka(ApiKey::OffsetFetch, 9, &answer(ApiKey::OffsetFetch, 9, &r));
        assert_eq!(counts, Some(ErrorCounts::from([(69, 2)])));
        let mut old = OffsetFetchResponse::default();
        old.error_code = 16; // NOT_COORDINATOR
        let counts = kafka(
            ApiKey::OffsetFetch,
            7,
            &answer(ApiKey::OffsetFetch, 7, &old),
        );
        assert_eq!(counts, Some(ErrorCounts::from([(16, 1)])));
    }

    #[test]
    fn an_undecodable_answer_has_no_counts() {
        assert_eq!(
            kafka(ApiKey::Heartbeat, 4, &Bytes::from_static(b"\0\0")),
            None
        );
        assert_eq!(
            native(
                drover_protocol::ApiKey::CommitOffset,
                0,
                &Bytes::from_static(b"x")
            ),
            None
        );
    }

    #[test]
    fn a_native_commit_counts_every_partition() {
        use drover_protocol::{
            CommitOffsetResponse, ErrorCode, NativeResponse, PartitionError, TopicErrors,
        };
        let response = NativeResponse::CommitOffset(CommitOffsetResponse {
            topics: vec![TopicErrors {
                topic: "t".into(),
                partitions: vec![
                    PartitionError {
                        partition: 0,
                        error_code: ErrorCode::NONE,
                    },
                    PartitionError {
                        partition: 1,
                        error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    },
                ],
            }],
        });
        let mut frame = BytesMut::new();
        drover_protocol::encode_response_frame(&mut frame, 1, &response).unwrap();
        let counts = native(
            drover_protocol::ApiKey::CommitOffset,
            0,
            &frame.freeze().slice(4..),
        );
        assert_eq!(counts, Some(ErrorCounts::from([(0, 1), (3, 1)])));
    }
}
