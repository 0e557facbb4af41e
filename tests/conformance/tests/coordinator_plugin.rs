//! The coordinator plugin through its loaded `.so`: it loads as kind `coordinator`,
//! starts with a loaded assignor, and answers a native RegisterConsumer frame.

use bytes::BytesMut;
use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorOutput, CoordinatorStartup, NamedAssignor},
    std_types::{RString, RVec},
    PluginKind, TopicInfo,
};
use drover_protocol::{
    decode_response_frame, encode_request_frame, ApiKey, AutoOffsetReset, ErrorCode, NativeRequest,
    NativeResponse, RegisterConsumerRequest, Subscription,
};
use drover_tests::{load_assignor, PluginDir};

#[test]
fn coordinator_plugin_loads_starts_and_confirms_a_registration() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_coordinator");
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Coordinator))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plugin.summary.name, "drover-coordinator");

    let (_, range) = load_assignor("drover_assignor_range");
    let startup = CoordinatorStartup {
        broker_id: 0,
        assignors: RVec::from(vec![NamedAssignor {
            name: RString::from("range"),
            assignor: range.instance(),
        }]),
        default_assignor: RString::from("range"),
        topics: RVec::from(vec![TopicInfo::new("orders", 3)]),
    };
    let mut coordinator = plugin
        .start_coordinator("", startup.clone())
        .unwrap_or_else(|e| panic!("{e}"));

    let request = NativeRequest::RegisterConsumer(RegisterConsumerRequest {
        group_id: "g".into(),
        consumer_id: "c1".into(),
        host: "127.0.0.1".into(),
        session_timeout_ms: 10_000,
        subscription: Subscription::static_topics([("orders", 1)]),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        assignor: None,
        member: drover_protocol::MemberData::default(),
    });
    let mut frame = BytesMut::new();
    encode_request_frame(&mut frame, 7, Some("test"), &request).unwrap();
    let body = frame.freeze().slice(4..);
    let outputs = coordinator
        .handle(
            1_000,
            CoordinatorInput::Frame {
                conn: 42,
                bytes: RVec::from(body.to_vec()),
            },
        )
        .unwrap();
    // The contract (drover_abi::coordinator): the channel opens before its answer.
    let opened = outputs
        .iter()
        .position(|o| matches!(o, CoordinatorOutput::ChannelOpened { conn: 42 }))
        .expect("the registering connection becomes a channel");
    let (answered, reply) = outputs
        .iter()
        .enumerate()
        .find_map(|(i, o)| match o {
            CoordinatorOutput::Answer { conn: 42, bytes } => Some((i, bytes.to_vec())),
            _ => None,
        })
        .expect("an answer on the registering connection");
    assert!(opened < answered, "{outputs:?}");
    let (header, response) =
        decode_response_frame(bytes::Bytes::from(reply), ApiKey::RegisterConsumer, 0).unwrap();
    assert_eq!(header.correlation_id, 7);
    match response {
        NativeResponse::RegisterConsumer(r) => {
            assert_eq!(r.error_code, ErrorCode::NONE, "{:?}", r.error_message);
            assert!(r.heartbeat_interval_ms > 0);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        coordinator.poll_timeout().is_some(),
        "a ping or rebalance is due later"
    );

    // A bad config is refused with the plugin's own message.
    let err = plugin
        .start_coordinator("x = 1", startup)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("unknown field `x`"), "{err}");
}
