//! Property tests of the native codec: round trips of every message, truncation,
//! random and mutated input.

use bytes::{Bytes, BytesMut};
use drover_protocol::*;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

fn string() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

fn nullable_string() -> impl Strategy<Value = Option<String>> {
    option::of(string())
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        Just(ErrorCode::NONE),
        Just(ErrorCode::ILLEGAL_GENERATION),
        any::<i16>().prop_map(ErrorCode),
    ]
}

fn topic_offsets() -> impl Strategy<Value = Vec<TopicOffsets>> {
    vec(
        (
            string(),
            vec(
                (any::<i32>(), any::<i64>(), nullable_string()).prop_map(
                    |(partition, offset, metadata)| PartitionOffset {
                        partition,
                        offset,
                        metadata,
                    },
                ),
                0..4,
            ),
        )
            .prop_map(|(topic, partitions)| TopicOffsets { topic, partitions }),
        0..4,
    )
}

fn topic_partitions() -> impl Strategy<Value = Vec<TopicPartitions>> {
    vec(
        (string(), vec(any::<i32>(), 0..5)).prop_map(|(t, p)| TopicPartitions::new(t, p)),
        0..4,
    )
}

fn subscription() -> impl Strategy<Value = Subscription> {
    (
        any::<i8>(),
        vec(
            (string(), any::<i32>()).prop_map(|(topic, streams)| TopicStreams { topic, streams }),
            0..4,
        ),
        nullable_string(),
        any::<i32>(),
    )
        .prop_map(|(kind, topics, pattern, pattern_streams)| Subscription {
            kind: SubscriptionKind(kind),
            topics,
            pattern,
            pattern_streams,
        })
}

fn described_group() -> impl Strategy<Value = DescribedGroup> {
    let member = (
        (string(), string(), any::<i32>(), any::<i32>(), string()),
        vec(string(), 0..4),
        any::<i8>(),
        topic_partitions(),
    )
        .prop_map(
            |(
                (consumer_id, host, session_timeout_ms, generation, subscription),
                topics,
                reset,
                partitions,
            )| DescribedMember {
                consumer_id,
                host,
                session_timeout_ms,
                generation,
                subscription,
                topics,
                auto_offset_reset: AutoOffsetReset(reset),
                partitions,
                member: MemberData::default(),
            },
        );
    (
        (string(), error_code(), string(), any::<i32>()),
        (nullable_string(), string()),
        vec(member, 0..3),
        topic_partitions(),
    )
        .prop_map(
            |(
                (group_id, error_code, state, generation),
                (assignor, rebalance_mode),
                members,
                held_by_failed,
            )| DescribedGroup {
                group_id,
                error_code,
                state,
                generation,
                assignor,
                rebalance_mode,
                members,
                held_by_failed,
                partition_loads: Vec::new(),
                group_type: String::new(),
            },
        )
}

/// The `group_type` a v0 or v1 answer decodes with: `native`, or `""` in an error
/// entry (docs/protocol.md §5.8).
fn below_v2(mut g: DescribedGroup) -> DescribedGroup {
    g.group_type = if g.error_code.is_none() {
        DescribedGroup::NATIVE.into()
    } else {
        String::new()
    };
    g
}

/// Partition loads of a DescribeGroups v1 group.
fn topic_loads() -> impl Strategy<Value = Vec<TopicLoads>> {
    vec(
        (
            string(),
            vec(
                (any::<i32>(), any::<i64>(), any::<i64>(), any::<i64>()).prop_map(
                    |(partition, bytes_per_sec, records_per_sec, lag)| PartitionLoad {
                        partition,
                        bytes_per_sec,
                        records_per_sec,
                        lag,
                    },
                ),
                0..4,
            ),
        )
            .prop_map(|(topic, partitions)| TopicLoads { topic, partitions }),
        0..3,
    )
}

/// A DescribeGroups answer at v0 (no member data, no loads), v1 (with them) or v2
/// (with the group's protocol too).
fn describe_groups_response() -> impl Strategy<Value = DescribeGroupsResponse> {
    let v1_group = || {
        (
            described_group(),
            vec(member_data(), 3),
            topic_loads(),
            string(),
        )
            .prop_map(|(mut g, data, loads, group_type)| {
                for (m, d) in g.members.iter_mut().zip(data) {
                    m.member = d;
                }
                g.partition_loads = loads;
                g.group_type = group_type;
                g
            })
    };
    prop_oneof![
        vec(described_group(), 0..3).prop_map(|groups| DescribeGroupsResponse {
            groups: groups.into_iter().map(below_v2).collect(),
            version: 0
        }),
        vec(v1_group(), 0..3).prop_map(|groups| DescribeGroupsResponse {
            groups: groups.into_iter().map(below_v2).collect(),
            version: 1,
        }),
        vec(v1_group(), 0..3).prop_map(|groups| DescribeGroupsResponse { groups, version: 2 }),
    ]
}

/// Member data of RegisterConsumer v1: half the time the default (which v0 carries),
/// else anything the wire can hold, valid or not.
fn member_data() -> impl Strategy<Value = MemberData> {
    prop_oneof![
        Just(MemberData::default()),
        (
            nullable_string(),
            prop_oneof![Just(1), any::<i32>()],
            vec(
                (string(), string()).prop_map(|(key, value)| Label { key, value }),
                0..4
            ),
        )
            .prop_map(|(rack, weight, labels)| MemberData {
                rack,
                weight,
                labels
            }),
    ]
}

fn request() -> impl Strategy<Value = NativeRequest> {
    prop_oneof![
        (
            string(),
            string(),
            string(),
            any::<i32>(),
            subscription(),
            any::<i8>(),
            nullable_string(),
            member_data(),
        )
            .prop_map(
                |(
                    group_id,
                    consumer_id,
                    host,
                    session_timeout_ms,
                    subscription,
                    reset,
                    assignor,
                    member,
                )| {
                    NativeRequest::RegisterConsumer(RegisterConsumerRequest {
                        group_id,
                        consumer_id,
                        host,
                        session_timeout_ms,
                        subscription,
                        auto_offset_reset: AutoOffsetReset(reset),
                        assignor,
                        member,
                    })
                }
            ),
        (string(), any::<i32>()).prop_map(|(group_id, generation)| {
            NativeRequest::Heartbeat(HeartbeatRequest {
                group_id,
                generation,
            })
        }),
        (string(), any::<i32>(), any::<bool>(), topic_partitions()).prop_map(
            |(group_id, generation, stop_all, partitions)| {
                NativeRequest::StopFetcher(StopFetcherRequest {
                    group_id,
                    generation,
                    stop_all,
                    partitions,
                })
            }
        ),
        (
            string(),
            any::<i32>(),
            vec(
                (
                    string(),
                    vec(
                        (any::<i32>(), any::<i64>()).prop_map(|(partition, start_offset)| {
                            PartitionStart {
                                partition,
                                start_offset,
                            }
                        }),
                        0..5
                    )
                )
                    .prop_map(|(topic, partitions)| TopicAssignment { topic, partitions }),
                0..4
            )
        )
            .prop_map(|(group_id, generation, assignment)| {
                NativeRequest::StartFetcher(StartFetcherRequest {
                    group_id,
                    generation,
                    assignment,
                })
            }),
        (string(), string(), any::<i32>(), topic_offsets()).prop_map(
            |(group_id, consumer_id, generation, topics)| {
                NativeRequest::CommitOffset(CommitOffsetRequest {
                    group_id,
                    consumer_id,
                    generation,
                    topics,
                })
            }
        ),
        (string(), option::of(topic_partitions())).prop_map(|(group_id, topics)| {
            NativeRequest::FetchOffsets(FetchOffsetsRequest { group_id, topics })
        }),
        (string(), string()).prop_map(|(group_id, consumer_id)| {
            NativeRequest::LeaveGroup(LeaveGroupRequest {
                group_id,
                consumer_id,
            })
        }),
        (
            option::of(vec(string(), 0..5)),
            0..=DESCRIBE_GROUPS_MAX_VERSION
        )
            .prop_map(|(groups, version)| {
                NativeRequest::DescribeGroups(DescribeGroupsRequest { groups, version })
            }),
    ]
}

fn response() -> impl Strategy<Value = NativeResponse> {
    prop_oneof![
        (error_code(), nullable_string(), any::<i32>(), any::<i32>()).prop_map(
            |(error_code, error_message, heartbeat_interval_ms, generation)| {
                NativeResponse::RegisterConsumer(RegisterConsumerResponse {
                    error_code,
                    error_message,
                    heartbeat_interval_ms,
                    generation,
                })
            }
        ),
        (error_code(), any::<bool>(), topic_offsets()).prop_map(
            |(error_code, fetchers_healthy, offsets)| {
                NativeResponse::Heartbeat(HeartbeatResponse {
                    error_code,
                    fetchers_healthy,
                    offsets,
                })
            }
        ),
        (error_code(), topic_offsets()).prop_map(|(error_code, offsets)| {
            NativeResponse::StopFetcher(StopFetcherResponse {
                error_code,
                offsets,
            })
        }),
        error_code().prop_map(
            |error_code| NativeResponse::StartFetcher(StartFetcherResponse { error_code })
        ),
        vec(
            (
                string(),
                vec(
                    (any::<i32>(), error_code()).prop_map(|(partition, error_code)| {
                        PartitionError {
                            partition,
                            error_code,
                        }
                    }),
                    0..5
                )
            )
                .prop_map(|(topic, partitions)| TopicErrors { topic, partitions }),
            0..4
        )
        .prop_map(|topics| NativeResponse::CommitOffset(CommitOffsetResponse { topics })),
        (
            error_code(),
            vec(
                (
                    string(),
                    vec(
                        (any::<i32>(), any::<i64>(), nullable_string(), error_code()).prop_map(
                            |(partition, offset, metadata, error_code)| FetchedOffset {
                                partition,
                                offset,
                                metadata,
                                error_code,
                            }
                        ),
                        0..4
                    )
                )
                    .prop_map(|(topic, partitions)| TopicFetchedOffsets { topic, partitions }),
                0..4
            )
        )
            .prop_map(|(error_code, topics)| {
                NativeResponse::FetchOffsets(FetchOffsetsResponse { error_code, topics })
            }),
        error_code()
            .prop_map(|error_code| NativeResponse::LeaveGroup(LeaveGroupResponse { error_code })),
        describe_groups_response().prop_map(NativeResponse::DescribeGroups),
    ]
}

/// The body in the request's own version ([`NativeRequest::version`]).
fn body_of_request(request: &NativeRequest) -> Bytes {
    body_of_request_at(request, request.version())
}

fn body_of_request_at(request: &NativeRequest, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    request
        .encode_version(&mut buf, version)
        .expect("generated values are within limits");
    buf.freeze()
}

/// Every version of the request's API that can carry its values; a DescribeGroups
/// request names its own version (its body is the same in every version).
fn versions_of(request: &NativeRequest) -> std::ops::RangeInclusive<i16> {
    match request {
        NativeRequest::DescribeGroups(r) => r.version..=r.version,
        _ => request.version()..=request.api_key().versions().max,
    }
}

/// The versions a response decodes at: the one a DescribeGroups answer carries, every
/// version of the API for the others (their bodies are the same in each).
fn response_versions(response: &NativeResponse) -> std::ops::RangeInclusive<i16> {
    match response {
        NativeResponse::DescribeGroups(r) => r.version..=r.version,
        _ => 0..=response.api_key().versions().max,
    }
}

fn body_of_response(response: &NativeResponse) -> Bytes {
    let mut buf = BytesMut::new();
    response
        .encode(&mut buf)
        .expect("generated values are within limits");
    buf.freeze()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn requests_round_trip(request in request()) {
        let key = request.api_key();
        for version in versions_of(&request) {
            let body = body_of_request_at(&request, version);
            prop_assert_eq!(&decode_request(key.code(), version, body.clone()).unwrap(), &request);
            // A trailing byte is refused.
            let mut longer = BytesMut::from(&body[..]);
            longer.extend_from_slice(&[0]);
            prop_assert_eq!(
                decode_request(key.code(), version, longer.freeze()),
                Err(DecodeError::TrailingBytes(1))
            );
        }
        // Below its version the request does not encode, and changes nothing.
        let lowest = match &request {
            // Its body is the same in every version.
            NativeRequest::DescribeGroups(_) => 0,
            _ => request.version(),
        };
        for version in 0..lowest {
            let mut buf = BytesMut::new();
            let refused = matches!(
                request.encode_version(&mut buf, version),
                Err(EncodeError::VersionTooLow { .. })
            );
            prop_assert!(refused);
            prop_assert!(buf.is_empty());
        }

        // Whole frames too.
        let mut frame = BytesMut::new();
        encode_request_frame(&mut frame, 7, Some("client"), &request).unwrap();
        let frame = frame.freeze();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        prop_assert_eq!(size as usize, frame.len() - 4);
        let (header, decoded) = decode_request_frame(frame.slice(4..)).unwrap();
        prop_assert_eq!(header.api_key, key.code());
        prop_assert_eq!(header.api_version, request.version());
        prop_assert_eq!(header.correlation_id, 7);
        prop_assert_eq!(header.client_id.as_deref(), Some("client"));
        prop_assert_eq!(decoded, request);
    }

    #[test]
    fn responses_round_trip(response in response()) {
        let key = response.api_key();
        let body = body_of_response(&response);
        for version in response_versions(&response) {
            prop_assert_eq!(&decode_response(key, version, body.clone()).unwrap(), &response);
        }

        let mut frame = BytesMut::new();
        encode_response_frame(&mut frame, -3, &response).unwrap();
        let frame = frame.freeze();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        prop_assert_eq!(size as usize, frame.len() - 4);
        let version = *response_versions(&response).start();
        let (header, decoded) = decode_response_frame(frame.slice(4..), key, version).unwrap();
        prop_assert_eq!(header.correlation_id, -3);
        prop_assert_eq!(decoded, response);
    }

    #[test]
    fn truncated_requests_fail_cleanly(request in request()) {
        let key = request.api_key().code();
        for version in versions_of(&request) {
            let body = body_of_request_at(&request, version);
            for len in 0..body.len() {
                prop_assert!(
                    decode_request(key, version, body.slice(..len)).is_err(),
                    "prefix {len} of v{version} decoded"
                );
            }
        }
        let mut frame = BytesMut::new();
        encode_request_frame(&mut frame, 1, None, &request).unwrap();
        let frame = frame.freeze().slice(4..);
        for len in 0..frame.len() {
            prop_assert!(decode_request_frame(frame.slice(..len)).is_err());
        }
    }

    #[test]
    fn truncated_responses_fail_cleanly(response in response()) {
        let key = response.api_key();
        let body = body_of_response(&response);
        for version in response_versions(&response) {
            for len in 0..body.len() {
                prop_assert!(
                    decode_response(key, version, body.slice(..len)).is_err(),
                    "prefix {len} decoded"
                );
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(data in vec(any::<u8>(), 0..256)) {
        let data = Bytes::from(data);
        for key in ApiKey::ALL {
            for version in 0..=key.versions().max {
                if let Ok(request) = decode_request(key.code(), version, data.clone()) {
                    // Whatever decodes re-encodes, in the version it came in, to
                    // something that decodes the same.
                    let body = body_of_request_at(&request, version);
                    let again = decode_request(key.code(), version, body).unwrap();
                    prop_assert_eq!(again, request);
                }
                if let Ok(response) = decode_response(key, version, data.clone()) {
                    let body = body_of_response(&response);
                    let again = decode_response(key, version, body).unwrap();
                    prop_assert_eq!(again, response);
                }
            }
        }
        let _ = decode_request_frame(data);
    }

    #[test]
    fn mutated_encodings_never_panic(
        request in request(),
        response in response(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut req = body_of_request(&request).to_vec();
        let mut resp = body_of_response(&response).to_vec();
        for (at, byte) in &flips {
            if !req.is_empty() {
                let i = at.index(req.len());
                req[i] = *byte;
            }
            if !resp.is_empty() {
                let i = at.index(resp.len());
                resp[i] = *byte;
            }
        }
        let req = Bytes::from(req);
        let resp = Bytes::from(resp);
        for key in ApiKey::ALL {
            for version in 0..=key.versions().max {
                if let Ok(decoded) = decode_request(key.code(), version, req.clone()) {
                    let body = body_of_request_at(&decoded, version);
                    let again = decode_request(key.code(), version, body).unwrap();
                    prop_assert_eq!(again, decoded);
                }
                if let Ok(decoded) = decode_response(key, version, resp.clone()) {
                    let body = body_of_response(&decoded);
                    let again = decode_response(key, version, body).unwrap();
                    prop_assert_eq!(again, decoded);
                }
            }
        }
    }
}

#[test]
fn unknown_keys_and_versions_are_refused() {
    assert_eq!(
        decode_request(20_009, 0, Bytes::new()),
        Err(DecodeError::UnknownApiKey(20_009))
    );
    assert_eq!(
        decode_request(3, 0, Bytes::new()),
        Err(DecodeError::UnknownApiKey(3))
    );
    assert_eq!(
        decode_request(20_000, 2, Bytes::new()),
        Err(DecodeError::UnsupportedVersion {
            api_key: 20_000,
            version: 2
        })
    );
    assert_eq!(
        decode_request(20_006, 1, Bytes::new()),
        Err(DecodeError::UnsupportedVersion {
            api_key: 20_006,
            version: 1
        })
    );
    assert_eq!(
        decode_response(ApiKey::LeaveGroup, -1, Bytes::new()),
        Err(DecodeError::UnsupportedVersion {
            api_key: 20_006,
            version: -1
        })
    );
}

#[test]
fn encoders_enforce_the_decoders_caps() {
    let too_many = StartFetcherRequest {
        group_id: "g".into(),
        generation: 1,
        assignment: vec![TopicAssignment {
            topic: "t".into(),
            partitions: vec![
                PartitionStart {
                    partition: 0,
                    start_offset: 0
                };
                MAX_PARTITIONS_PER_TOPIC + 1
            ],
        }],
    };
    let mut buf = BytesMut::from(&b"x"[..]);
    assert!(matches!(
        too_many.encode(&mut buf),
        Err(EncodeError::TooManyElements { max, .. }) if max == MAX_PARTITIONS_PER_TOPIC
    ));
    assert_eq!(
        &buf[..],
        b"x",
        "a failed encode leaves the buffer unchanged"
    );

    let long = LeaveGroupRequest {
        group_id: "g".repeat(MAX_STRING_LEN + 1),
        consumer_id: "c".into(),
    };
    let mut frame = BytesMut::new();
    assert!(matches!(
        encode_request_frame(&mut frame, 1, None, &NativeRequest::LeaveGroup(long)),
        Err(EncodeError::StringTooLong { .. })
    ));
    assert!(frame.is_empty());

    // At the caps exactly, it round-trips.
    let at_cap = FetchOffsetsRequest {
        group_id: "g".into(),
        topics: Some(vec![
            TopicPartitions::new(
                "t",
                vec![0; MAX_PARTITIONS_PER_TOPIC]
            );
            2
        ]),
    };
    let mut buf = BytesMut::new();
    at_cap.encode(&mut buf).unwrap();
    assert_eq!(
        decode_request(ApiKey::FetchOffsets.code(), 0, buf.freeze()).unwrap(),
        NativeRequest::FetchOffsets(at_cap)
    );
}

#[test]
fn describe_groups_null_and_empty_differ() {
    // Null (count −1) asks for every group; an empty list for none.
    let null = DescribeGroupsRequest {
        groups: None,
        version: 0,
    };
    let mut buf = BytesMut::new();
    null.encode(&mut buf).unwrap();
    assert_eq!(&buf[..], &[0xff, 0xff, 0xff, 0xff]);
    let empty = DescribeGroupsRequest {
        groups: Some(Vec::new()),
        version: 0,
    };
    let mut buf = BytesMut::new();
    empty.encode(&mut buf).unwrap();
    assert_eq!(&buf[..], &[0, 0, 0, 0]);
    assert_eq!(
        decode_request(ApiKey::DescribeGroups.code(), 0, buf.freeze()).unwrap(),
        NativeRequest::DescribeGroups(empty)
    );
    // The response's array is not nullable.
    assert_eq!(
        decode_response(
            ApiKey::DescribeGroups,
            0,
            Bytes::from_static(&[0xff, 0xff, 0xff, 0xff])
        ),
        Err(DecodeError::UnexpectedNull {
            what: "DescribeGroupsResponse.groups"
        })
    );
}

#[test]
fn describe_groups_encoding_is_the_documented_layout() {
    // docs/protocol.md §5.8, field by field.
    let response = DescribeGroupsResponse {
        groups: vec![
            DescribedGroup {
                group_id: "g".into(),
                error_code: ErrorCode::NONE,
                state: DescribedGroup::STABLE.into(),
                generation: 3,
                assignor: Some("range".into()),
                rebalance_mode: DescribedGroup::EAGER.into(),
                members: vec![DescribedMember {
                    consumer_id: "c".into(),
                    host: "h".into(),
                    session_timeout_ms: 30_000,
                    generation: 3,
                    subscription: "static: t(1)".into(),
                    topics: vec!["t".into()],
                    auto_offset_reset: AutoOffsetReset::LATEST,
                    partitions: vec![TopicPartitions::new("t", vec![0, 1])],
                    member: MemberData::default(),
                }],
                held_by_failed: vec![TopicPartitions::new("t", vec![2])],
                partition_loads: Vec::new(),
                group_type: DescribedGroup::NATIVE.into(),
            },
            DescribedGroup::error("x", ErrorCode::GROUP_ID_NOT_FOUND),
        ],
        version: 0,
    };
    let mut expected: Vec<u8> = Vec::new();
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    expected.extend_from_slice(&2i32.to_be_bytes());
    string(&mut expected, "g");
    expected.extend_from_slice(&0i16.to_be_bytes());
    string(&mut expected, "stable");
    expected.extend_from_slice(&3i32.to_be_bytes());
    string(&mut expected, "range");
    string(&mut expected, "eager");
    expected.extend_from_slice(&1i32.to_be_bytes());
    string(&mut expected, "c");
    string(&mut expected, "h");
    expected.extend_from_slice(&30_000i32.to_be_bytes());
    expected.extend_from_slice(&3i32.to_be_bytes());
    string(&mut expected, "static: t(1)");
    expected.extend_from_slice(&1i32.to_be_bytes());
    string(&mut expected, "t");
    expected.push(1);
    expected.extend_from_slice(&1i32.to_be_bytes());
    string(&mut expected, "t");
    expected.extend_from_slice(&2i32.to_be_bytes());
    expected.extend_from_slice(&0i32.to_be_bytes());
    expected.extend_from_slice(&1i32.to_be_bytes());
    expected.extend_from_slice(&1i32.to_be_bytes());
    string(&mut expected, "t");
    expected.extend_from_slice(&1i32.to_be_bytes());
    expected.extend_from_slice(&2i32.to_be_bytes());
    // The not-found entry: empty fields.
    string(&mut expected, "x");
    expected.extend_from_slice(&69i16.to_be_bytes());
    string(&mut expected, "");
    expected.extend_from_slice(&0i32.to_be_bytes());
    expected.extend_from_slice(&(-1i16).to_be_bytes());
    string(&mut expected, "");
    expected.extend_from_slice(&0i32.to_be_bytes());
    expected.extend_from_slice(&0i32.to_be_bytes());

    let mut buf = BytesMut::new();
    response.encode(&mut buf).unwrap();
    assert_eq!(&buf[..], &expected[..]);
    assert_eq!(
        decode_response(ApiKey::DescribeGroups, 0, buf.freeze()).unwrap(),
        NativeResponse::DescribeGroups(response)
    );
}

#[test]
fn describe_groups_v1_appends_member_data_and_loads() {
    // docs/protocol.md §5.8: v1 appends rack, weight, labels to each member and
    // partition_loads to each group; the same values at v0 leave them out.
    let mut group = DescribedGroup::error("g", ErrorCode::NONE);
    group.members = vec![DescribedMember {
        consumer_id: "c".into(),
        host: String::new(),
        session_timeout_ms: 1,
        generation: 1,
        subscription: String::new(),
        topics: Vec::new(),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        partitions: Vec::new(),
        member: MemberData {
            rack: Some("b".into()),
            weight: 2,
            labels: vec![Label {
                key: "k".into(),
                value: "v".into(),
            }],
        },
    }];
    group.partition_loads = vec![TopicLoads {
        topic: "t".into(),
        partitions: vec![PartitionLoad {
            partition: 0,
            bytes_per_sec: 1000,
            records_per_sec: 10,
            lag: -1,
        }],
    }];
    group.group_type = DescribedGroup::NATIVE.into();
    let v1 = DescribeGroupsResponse {
        groups: vec![group.clone()],
        version: 1,
    };
    let v0 = DescribeGroupsResponse {
        groups: vec![group],
        version: 0,
    };
    let (mut b1, mut b0) = (BytesMut::new(), BytesMut::new());
    v1.encode(&mut b1).unwrap();
    v0.encode(&mut b0).unwrap();
    let mut tail: Vec<u8> = Vec::new();
    // The member's v1 fields sit after its partitions: rack "b", weight 2, one label.
    tail.extend_from_slice(&[0, 1, b'b', 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, b'k', 0, 1, b'v']);
    let member_end = b0.len() - 4; // then v0 has only held_by_failed's count
    assert_eq!(&b1[..member_end], &b0[..member_end]);
    assert_eq!(&b1[member_end..member_end + tail.len()], &tail[..]);
    let mut loads: Vec<u8> = vec![0, 0, 0, 0]; // held_by_failed: empty
    loads.extend_from_slice(&1i32.to_be_bytes());
    loads.extend_from_slice(&[0, 1, b't']);
    loads.extend_from_slice(&1i32.to_be_bytes());
    loads.extend_from_slice(&0i32.to_be_bytes());
    loads.extend_from_slice(&1000i64.to_be_bytes());
    loads.extend_from_slice(&10i64.to_be_bytes());
    loads.extend_from_slice(&(-1i64).to_be_bytes());
    assert_eq!(&b1[member_end + tail.len()..], &loads[..]);
    // Each decodes at its own version; v0 reads as the defaults.
    let d0 = decode_response(ApiKey::DescribeGroups, 0, b0.freeze()).unwrap();
    let NativeResponse::DescribeGroups(d0) = d0 else {
        panic!("another answer")
    };
    assert_eq!(d0.groups[0].members[0].member, MemberData::default());
    assert!(d0.groups[0].partition_loads.is_empty());
    assert_eq!(
        decode_response(ApiKey::DescribeGroups, 1, b1.freeze()).unwrap(),
        NativeResponse::DescribeGroups(v1)
    );
    // A version the codec does not have is refused.
    let v3 = DescribeGroupsResponse {
        groups: Vec::new(),
        version: 3,
    };
    assert!(matches!(
        v3.encode(&mut BytesMut::new()),
        Err(EncodeError::UnsupportedVersion { version: 3, .. })
    ));
}

#[test]
fn describe_groups_v2_appends_the_group_type() {
    // docs/protocol.md §5.8: v2 appends `group_type` to each group, after v1's
    // partition_loads; v0 and v1 answers decode as `native` (`""` in an error entry).
    let mut group = DescribedGroup::error("k", ErrorCode::NONE);
    group.state = "Stable".into();
    group.generation = 4;
    group.group_type = DescribedGroup::CONSUMER.into();
    let missing = DescribedGroup::error("x", ErrorCode::GROUP_ID_NOT_FOUND);
    let v2 = DescribeGroupsResponse {
        groups: vec![group.clone(), missing.clone()],
        version: 2,
    };
    let v1 = DescribeGroupsResponse {
        groups: vec![group, missing],
        version: 1,
    };
    let (mut b2, mut b1) = (BytesMut::new(), BytesMut::new());
    v2.encode(&mut b2).unwrap();
    v1.encode(&mut b1).unwrap();
    // The first group: v1's bytes, then "consumer"; the error entry: v1's, then "".
    let first_end = 4 + (2 + 1) + 2 + (2 + 6) + 4 + 2 + 2 + 4 + 4 + 4;
    let mut expected: Vec<u8> = b1[..first_end].to_vec();
    expected.extend_from_slice(&[0, 8]);
    expected.extend_from_slice(b"consumer");
    expected.extend_from_slice(&b1[first_end..]);
    expected.extend_from_slice(&[0, 0]);
    assert_eq!(&b2[..], &expected[..]);
    assert_eq!(
        decode_response(ApiKey::DescribeGroups, 2, b2.freeze()).unwrap(),
        NativeResponse::DescribeGroups(v2)
    );
    let NativeResponse::DescribeGroups(d1) =
        decode_response(ApiKey::DescribeGroups, 1, b1.freeze()).unwrap()
    else {
        panic!("another answer")
    };
    assert_eq!(d1.groups[0].group_type, DescribedGroup::NATIVE);
    assert_eq!(d1.groups[1].group_type, "");
}

#[test]
fn describe_groups_error_answers() {
    let named = DescribeGroupsRequest {
        groups: Some(vec!["a".into(), "b".into()]),
        version: 1,
    };
    let r = DescribeGroupsResponse::error(&named, ErrorCode::NOT_COORDINATOR);
    assert_eq!(r.version, 1);
    assert_eq!(
        r.groups,
        [
            DescribedGroup::error("a", ErrorCode::NOT_COORDINATOR),
            DescribedGroup::error("b", ErrorCode::NOT_COORDINATOR)
        ]
    );
    let all = DescribeGroupsRequest::new(None);
    let r = DescribeGroupsResponse::error(&all, ErrorCode::COORDINATOR_NOT_AVAILABLE);
    assert_eq!(
        r.groups,
        [DescribedGroup::error(
            "",
            ErrorCode::COORDINATOR_NOT_AVAILABLE
        )]
    );
    let g = &r.groups[0];
    assert!(g.state.is_empty() && g.rebalance_mode.is_empty() && g.assignor.is_none());
    assert_eq!(g.generation, 0);
    assert!(g.members.is_empty() && g.held_by_failed.is_empty());
}

#[test]
fn describe_groups_caps_are_enforced() {
    let too_many =
        DescribeGroupsRequest::new(Some(vec![String::new(); MAX_GROUPS_PER_REQUEST + 1]));
    let mut buf = BytesMut::new();
    assert!(matches!(
        too_many.encode(&mut buf),
        Err(EncodeError::TooManyElements { max, .. }) if max == MAX_GROUPS_PER_REQUEST
    ));
    assert!(buf.is_empty());

    let member = DescribedMember {
        consumer_id: String::new(),
        host: String::new(),
        session_timeout_ms: 0,
        generation: 0,
        subscription: String::new(),
        topics: Vec::new(),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        partitions: Vec::new(),
        member: MemberData::default(),
    };
    let mut group = DescribedGroup::error("g", ErrorCode::NONE);
    group.members = vec![member; MAX_MEMBERS_PER_GROUP + 1];
    let response = DescribeGroupsResponse {
        groups: vec![group],
        version: 1,
    };
    let mut buf = BytesMut::new();
    assert!(matches!(
        response.encode(&mut buf),
        Err(EncodeError::TooManyElements { max, .. }) if max == MAX_MEMBERS_PER_GROUP
    ));
    assert!(buf.is_empty());

    // v1's loads: at most MAX_PARTITIONS_PER_TOPIC partitions per topic.
    let mut group = DescribedGroup::error("g", ErrorCode::NONE);
    let load = PartitionLoad {
        partition: 0,
        bytes_per_sec: -1,
        records_per_sec: -1,
        lag: -1,
    };
    group.partition_loads = vec![TopicLoads {
        topic: "t".into(),
        partitions: vec![load; MAX_PARTITIONS_PER_TOPIC + 1],
    }];
    let response = DescribeGroupsResponse {
        groups: vec![group],
        version: 1,
    };
    assert!(matches!(
        response.encode(&mut buf),
        Err(EncodeError::TooManyElements { max, .. }) if max == MAX_PARTITIONS_PER_TOPIC
    ));
    assert!(buf.is_empty());
}

#[test]
fn register_consumer_labels_are_capped_both_ways() {
    let label = |i: usize| Label {
        key: format!("k{i}"),
        value: String::new(),
    };
    let mut request = RegisterConsumerRequest {
        group_id: "g".into(),
        consumer_id: "c".into(),
        host: "h".into(),
        session_timeout_ms: 30_000,
        subscription: Subscription::static_topics([("t", 1)]),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        assignor: None,
        member: MemberData {
            labels: (0..MAX_LABELS_PER_CONSUMER).map(label).collect(),
            ..MemberData::default()
        },
    };
    let mut buf = BytesMut::new();
    request.encode(&mut buf).unwrap();
    let at_cap = buf.split().freeze();
    assert_eq!(
        decode_request(ApiKey::RegisterConsumer.code(), 1, at_cap.clone()),
        Ok(NativeRequest::RegisterConsumer(request.clone()))
    );

    request.member.labels.push(label(MAX_LABELS_PER_CONSUMER));
    assert!(matches!(
        request.encode(&mut buf),
        Err(EncodeError::TooManyElements { .. })
    ));
    // The same bytes with the count raised by one and a label's worth of bytes more
    // (empty key and value: 4 bytes): refused for the cap, not for lack of bytes.
    let mut forged = at_cap.to_vec();
    let labels_bytes: usize = (0..MAX_LABELS_PER_CONSUMER)
        .map(|i| 4 + format!("k{i}").len())
        .sum();
    let count_at = forged.len() - labels_bytes - 4;
    let count = u32::from_be_bytes(forged[count_at..count_at + 4].try_into().unwrap());
    assert_eq!(count as usize, MAX_LABELS_PER_CONSUMER);
    forged[count_at..count_at + 4]
        .copy_from_slice(&(MAX_LABELS_PER_CONSUMER as u32 + 1).to_be_bytes());
    forged.extend_from_slice(&[0; 4]);
    assert!(matches!(
        decode_request(ApiKey::RegisterConsumer.code(), 1, Bytes::from(forged)),
        Err(DecodeError::TooManyElements { .. })
    ));
}
