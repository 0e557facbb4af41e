//! The worked example of docs/protocol.md ("Worked example") is what the encoder
//! produces, byte for byte, and decodes back: every frame's annotated listing and its
//! plain dump.

use bytes::{Bytes, BytesMut};
use drover_protocol::*;

const DOC: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md"));

/// The fenced blocks of the worked example section: (info string, lines).
fn example_blocks() -> Vec<(String, Vec<&'static str>)> {
    let section = DOC
        .split_once("\n## 9. Worked example\n")
        .expect("the document has a worked example section")
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut blocks = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in section.lines() {
        let trimmed = line.trim();
        match &mut current {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    current = Some((info.to_owned(), Vec::new()));
                }
            }
            Some(_) if trimmed == "```" => blocks.push(current.take().unwrap()),
            Some((_, lines)) => lines.push(line),
        }
    }
    assert!(current.is_none(), "unclosed fenced block");
    blocks
}

fn hex_byte(token: &str) -> Option<u8> {
    if token.len() == 2 {
        u8::from_str_radix(token, 16).ok()
    } else {
        None
    }
}

/// The bytes of a plain dump: every token is a hex byte.
fn plain_bytes(lines: &[&str]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .map(|b| hex_byte(b).unwrap_or_else(|| panic!("not a hex byte: {b:?}")))
        .collect()
}

/// The bytes of an annotated listing: the hex bytes at the start of each line, up to
/// the field annotation.
fn annotated_bytes(lines: &[&str]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in lines {
        let before = bytes.len();
        bytes.extend(line.split_whitespace().map_while(hex_byte));
        assert!(bytes.len() > before, "listing line without bytes: {line:?}");
    }
    bytes
}

/// The annotated listings and the plain dumps of the section, in order; each listing
/// is followed by its dump.
fn frames() -> Vec<Vec<u8>> {
    let blocks = example_blocks();
    assert_eq!(
        blocks.len() % 2,
        0,
        "every listing has a plain dump: {blocks:?}"
    );
    blocks
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let [(listing_info, listing), (dump_info, dump)] = pair else {
                unreachable!()
            };
            assert_eq!(listing_info, "", "frame {i}: the listing comes first");
            assert_eq!(dump_info, "hex", "frame {i}: then its ```hex dump");
            let listed = annotated_bytes(listing);
            let dumped = plain_bytes(dump);
            assert_eq!(listed, dumped, "frame {i}: listing and dump differ");
            dumped
        })
        .collect()
}

fn register() -> NativeRequest {
    NativeRequest::RegisterConsumer(RegisterConsumerRequest {
        group_id: "billing".into(),
        consumer_id: "billing-1".into(),
        host: "10.0.0.5".into(),
        session_timeout_ms: 30_000,
        subscription: Subscription::static_topics([("invoices", 2)]),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        assignor: Some("range".into()),
        member: MemberData::default(),
    })
}

/// The second consumer, with member data: RegisterConsumer v1.
fn register_v1() -> NativeRequest {
    let NativeRequest::RegisterConsumer(first) = register() else {
        unreachable!()
    };
    NativeRequest::RegisterConsumer(RegisterConsumerRequest {
        consumer_id: "billing-2".into(),
        host: "10.0.0.6".into(),
        member: MemberData {
            rack: Some("eu-1b".into()),
            weight: 2,
            labels: vec![Label {
                key: "disk".into(),
                value: "ssd".into(),
            }],
        },
        ..first
    })
}

fn registered() -> NativeResponse {
    NativeResponse::RegisterConsumer(RegisterConsumerResponse {
        error_code: ErrorCode::NONE,
        error_message: None,
        heartbeat_interval_ms: 10_000,
        generation: 0,
    })
}

fn start_fetcher() -> NativeRequest {
    let reset = |partition| PartitionStart {
        partition,
        start_offset: PartitionStart::NO_COMMITTED_OFFSET,
    };
    NativeRequest::StartFetcher(StartFetcherRequest {
        group_id: "billing".into(),
        generation: 1,
        assignment: vec![TopicAssignment {
            topic: "invoices".into(),
            partitions: vec![reset(0), reset(1)],
        }],
    })
}

fn started() -> NativeResponse {
    NativeResponse::StartFetcher(StartFetcherResponse {
        error_code: ErrorCode::NONE,
    })
}

fn heartbeat() -> NativeRequest {
    NativeRequest::Heartbeat(HeartbeatRequest {
        group_id: "billing".into(),
        generation: 1,
    })
}

fn heartbeat_answer() -> NativeResponse {
    let consumed = |partition, offset| PartitionOffset {
        partition,
        offset,
        metadata: None,
    };
    NativeResponse::Heartbeat(HeartbeatResponse {
        error_code: ErrorCode::NONE,
        fetchers_healthy: true,
        offsets: vec![TopicOffsets {
            topic: "invoices".into(),
            partitions: vec![consumed(0, 42), consumed(1, 17)],
        }],
    })
}

/// An admin tool describes the group at v1.
fn describe() -> NativeRequest {
    NativeRequest::DescribeGroups(DescribeGroupsRequest {
        groups: Some(vec!["billing".into()]),
        version: 1,
    })
}

/// The v1 answer: billing-1 alone, with the loads of the last assignment.
fn described() -> NativeResponse {
    let load = |partition, bytes_per_sec, records_per_sec, lag| PartitionLoad {
        partition,
        bytes_per_sec,
        records_per_sec,
        lag,
    };
    NativeResponse::DescribeGroups(DescribeGroupsResponse {
        groups: vec![DescribedGroup {
            group_id: "billing".into(),
            error_code: ErrorCode::NONE,
            state: DescribedGroup::STABLE.into(),
            generation: 1,
            assignor: Some("range".into()),
            rebalance_mode: DescribedGroup::INCREMENTAL.into(),
            members: vec![DescribedMember {
                consumer_id: "billing-1".into(),
                host: "10.0.0.5".into(),
                session_timeout_ms: 30_000,
                generation: 1,
                subscription: "static: invoices(2)".into(),
                topics: vec!["invoices".into()],
                auto_offset_reset: AutoOffsetReset::EARLIEST,
                partitions: vec![TopicPartitions::new("invoices", vec![0, 1])],
                member: MemberData::default(),
            }],
            held_by_failed: Vec::new(),
            partition_loads: vec![TopicLoads {
                topic: "invoices".into(),
                partitions: vec![load(0, 2048, 16, 8), load(1, 0, 0, -1)],
            }],
            group_type: DescribedGroup::NATIVE.into(),
        }],
        version: 1,
    })
}

/// A frame of the example: who sends it, with which correlation id.
enum Frame {
    /// A request with its client id (the coordinator's are null).
    Request(i32, Option<&'static str>, NativeRequest),
    /// A response.
    Response(i32, NativeResponse),
}

fn example() -> Vec<Frame> {
    vec![
        Frame::Request(1, Some("app"), register()),
        Frame::Response(1, registered()),
        Frame::Request(0, None, start_fetcher()),
        Frame::Response(0, started()),
        Frame::Request(1, None, heartbeat()),
        Frame::Response(1, heartbeat_answer()),
        Frame::Request(2, Some("admin"), describe()),
        Frame::Response(2, described()),
        Frame::Request(1, Some("app"), register_v1()),
    ]
}

#[test]
fn worked_example_matches_the_encoder() {
    let documented = frames();
    let example = example();
    assert_eq!(
        documented.len(),
        example.len(),
        "the section's frames: register, registered, StartFetcher and its answer, \
         Heartbeat and its answer, DescribeGroups v1 and its answer, a v1 registration"
    );
    for (i, (bytes, frame)) in documented.iter().zip(&example).enumerate() {
        let size = i32::from_be_bytes(bytes[..4].try_into().unwrap());
        assert_eq!(size as usize, bytes.len() - 4, "frame {i}: size prefix");
        let body = Bytes::from(bytes[4..].to_vec());
        let mut encoded = BytesMut::new();
        match frame {
            Frame::Request(correlation_id, client_id, request) => {
                encode_request_frame(&mut encoded, *correlation_id, *client_id, request).unwrap();
                assert_eq!(&encoded[..], &bytes[..], "frame {i}: request");
                let (header, decoded) = decode_request_frame(body).unwrap();
                assert_eq!(header.correlation_id, *correlation_id, "frame {i}");
                assert_eq!(header.client_id.as_deref(), *client_id, "frame {i}");
                assert_eq!(&decoded, request, "frame {i}");
            }
            Frame::Response(correlation_id, response) => {
                encode_response_frame(&mut encoded, *correlation_id, response).unwrap();
                assert_eq!(&encoded[..], &bytes[..], "frame {i}: response");
                let version = match response {
                    NativeResponse::DescribeGroups(r) => r.version,
                    _ => 0,
                };
                let (header, decoded) =
                    decode_response_frame(body, response.api_key(), version).unwrap();
                assert_eq!(header.correlation_id, *correlation_id, "frame {i}");
                assert_eq!(&decoded, response, "frame {i}");
            }
        }
    }
    let NativeRequest::RegisterConsumer(r) = register() else {
        unreachable!()
    };
    assert_eq!(r.validate(), Ok(()));
    let NativeRequest::RegisterConsumer(r) = register_v1() else {
        unreachable!()
    };
    assert_eq!(r.version(), 1);
    assert_eq!(r.validate(), Ok(()));
}
