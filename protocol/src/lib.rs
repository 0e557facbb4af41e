//! Drover's native consumer-coordinator protocol: message types and their codec.
//!
//! The byte-level specification — framing, field types, every message, who sends what
//! and when, error codes, limits and a worked example — is `docs/protocol.md`. This
//! crate implements it for both sides: the coordinator (which decodes consumer requests
//! and the responses to its own requests) and the consumer (the reverse).
//!
//! - [`primitives`]: Kafka's classic field types with bounded readers.
//! - [`header`]: request header v1 and response header v0.
//! - [`messages`]: one struct per request and response, [`NativeRequest`] /
//!   [`NativeResponse`], and [`decode_request`] / [`decode_response`].
//! - [`frame`]: whole frames with their size prefix.
//! - [`ApiKey`] (keys 20000–20008, versions), [`ErrorCode`], [`limits`].
//! - [`slot`]: the coordinator slot of a group in cluster mode.
//!
//! Decoding never panics and never allocates more than a small multiple of the input:
//! every length and count is checked against the remaining bytes and a cap in
//! [`limits`] first. Encoding enforces the same caps, so whatever encodes decodes to an
//! equal value.
//!
//! ```
//! use bytes::BytesMut;
//! use drover_protocol::{
//!     decode_request_frame, encode_request_frame, AutoOffsetReset, NativeRequest,
//!     MemberData, RegisterConsumerRequest, Subscription,
//! };
//!
//! let request = NativeRequest::RegisterConsumer(RegisterConsumerRequest {
//!     group_id: "billing".into(),
//!     consumer_id: "billing-1".into(),
//!     host: "10.0.0.5".into(),
//!     session_timeout_ms: 30_000,
//!     subscription: Subscription::static_topics([("invoices", 2)]),
//!     auto_offset_reset: AutoOffsetReset::EARLIEST,
//!     assignor: None,
//!     member: MemberData::default(),
//! });
//! let mut buf = BytesMut::new();
//! encode_request_frame(&mut buf, 1, Some("app"), &request).unwrap();
//! let frame = buf.freeze().slice(4..); // what a transport hands over after the size
//! let (header, decoded) = decode_request_frame(frame).unwrap();
//! assert_eq!(header.correlation_id, 1);
//! assert_eq!(decoded, request);
//! ```

pub mod api_key;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod header;
pub mod limits;
pub mod messages;
pub mod primitives;
pub mod slot;

pub use api_key::{ApiKey, Direction, VersionRange};
pub use error::{DecodeError, EncodeError};
pub use error_code::ErrorCode;
pub use frame::{
    decode_request_frame, decode_response_frame, encode_request_frame, encode_response_frame,
};
pub use header::{RequestHeader, ResponseHeader};
pub use limits::{
    MAX_GROUPS_PER_REQUEST, MAX_LABELS_PER_CONSUMER, MAX_MEMBERS_PER_GROUP, MAX_MEMBER_STRING_LEN,
    MAX_PARTITIONS_PER_TOPIC, MAX_STRING_LEN, MAX_TOPICS_PER_REQUEST,
};
pub use messages::*;
pub use slot::coordinator_slot;
