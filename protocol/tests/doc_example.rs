//! The worked example of docs/protocol.md ("Worked example") is what the encoder
//! produces, byte for byte, and decodes back.

use bytes::{Bytes, BytesMut};
use drover_protocol::*;

const DOC: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md"));

/// The bytes of every ```hex block of the document, in order.
fn hex_blocks() -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for line in DOC.lines() {
        match (&mut current, line.trim()) {
            (None, "```hex") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(bytes), text) => bytes.extend(
                text.split_whitespace()
                    .map(|b| u8::from_str_radix(b, 16).expect("hex byte")),
            ),
            (None, _) => {}
        }
    }
    blocks
}

fn example_request() -> NativeRequest {
    NativeRequest::RegisterConsumer(RegisterConsumerRequest {
        group_id: "billing".into(),
        consumer_id: "billing-1".into(),
        host: "10.0.0.5".into(),
        session_timeout_ms: 30_000,
        subscription: Subscription::static_topics([("invoices", 2)]),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        assignor: Some("range".into()),
    })
}

fn example_response() -> NativeResponse {
    NativeResponse::RegisterConsumer(RegisterConsumerResponse {
        error_code: ErrorCode::NONE,
        error_message: None,
        heartbeat_interval_ms: 10_000,
        generation: 0,
    })
}

#[test]
fn worked_example_matches_the_encoder() {
    let blocks = hex_blocks();
    assert_eq!(blocks.len(), 2, "expected the request and response dumps");

    let mut request = BytesMut::new();
    encode_request_frame(&mut request, 1, Some("app"), &example_request()).unwrap();
    assert_eq!(&request[..], &blocks[0][..], "request frame");

    let mut response = BytesMut::new();
    encode_response_frame(&mut response, 1, &example_response()).unwrap();
    assert_eq!(&response[..], &blocks[1][..], "response frame");

    let (header, decoded) = decode_request_frame(Bytes::from(blocks[0][4..].to_vec())).unwrap();
    assert_eq!(header.client_id.as_deref(), Some("app"));
    assert_eq!(decoded, example_request());
    let NativeRequest::RegisterConsumer(register) = &decoded else {
        unreachable!()
    };
    assert_eq!(register.validate(), Ok(()));

    let (header, decoded) = decode_response_frame(
        Bytes::from(blocks[1][4..].to_vec()),
        ApiKey::RegisterConsumer,
        0,
    )
    .unwrap();
    assert_eq!(header.correlation_id, 1);
    assert_eq!(decoded, example_response());
}
