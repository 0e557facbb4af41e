//! The boundary with Kafka's own group APIs: which ones the coordinator serves, and
//! decoding their requests and encoding their responses with the `kafka-protocol`
//! crate (generated from Kafka 4.1's message schemas).
//!
//! The host routes every request whose key is in [`KAFKA_GROUP_APIS`] to the
//! coordinator as an [`crate::Input::Frame`], exactly as it routes the native APIs.
//! It learns which of them this coordinator serves, and in which versions, by sending
//! an ApiVersions request (key 18) on a connection of its own at startup
//! (answered by `api_versions_response`); a coordinator that serves none answers with an empty
//! list, an older one closes that connection, and the host then advertises none.
//!
//! Kafka's rules for a request that cannot be served (Kafka protocol guide): an
//! unsupported version or an undecodable body closes the connection.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, VersionRange};

/// The Kafka group APIs the coordinator serves, each in the version range Kafka 4.1
/// serves ([`served_versions`]): the classic protocol (JoinGroup, SyncGroup,
/// Heartbeat, LeaveGroup), offsets (OffsetCommit, OffsetFetch, OffsetDelete), group
/// administration (DescribeGroups, ListGroups, DeleteGroups) and KIP-848
/// (ConsumerGroupHeartbeat, ConsumerGroupDescribe), TxnOffsetCommit (coordinator
/// ABI 3.4: the host routes it only to a coordinator of 3.4 or later), and share
/// groups' membership, ShareGroupHeartbeat and ShareGroupDescribe at v1 (coordinator
/// ABI 3.7: routed only to a coordinator of 3.7 or later).
pub const KAFKA_GROUP_APIS: &[ApiKey] = &[
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::TxnOffsetCommit,
    ApiKey::ShareGroupHeartbeat,
    ApiKey::ShareGroupDescribe,
];

/// The versions of `key` the coordinator serves: Kafka 4.1's range
/// (`ApiKey::valid_versions`), except OffsetCommit and OffsetFetch, which stop at v9 as
/// in Kafka 4.0 (their v10 names topics by id only).
pub fn served_versions(key: ApiKey) -> VersionRange {
    let range = key.valid_versions();
    match key {
        ApiKey::OffsetCommit | ApiKey::OffsetFetch => VersionRange {
            min: range.min,
            max: range.max.min(9),
        },
        _ => range,
    }
}

/// Whether `raw_key` is a Kafka group API (served by the coordinator, not the broker).
pub fn is_group_api(raw_key: i16) -> bool {
    KAFKA_GROUP_APIS.iter().any(|k| *k as i16 == raw_key)
}

/// A decoded Kafka request.
#[derive(Debug)]
pub(crate) struct KafkaRequest {
    /// The API.
    pub key: ApiKey,
    /// Its version.
    pub version: i16,
    /// The header (correlation id, client id).
    pub header: RequestHeader,
    /// The body.
    pub body: RequestKind,
}

/// Where a Kafka answer goes and how it is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KafkaReplyTo {
    pub key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
}

impl KafkaRequest {
    pub(crate) fn reply_to(&self) -> KafkaReplyTo {
        KafkaReplyTo {
            key: self.key,
            version: self.version,
            correlation_id: self.header.correlation_id,
        }
    }
}

/// Decodes a request frame (without the size prefix) of a served group API or of
/// ApiVersions. Errors are a message for the log; the caller closes the connection.
/// Never panics; the `kafka-protocol` decoders cap what they pre-allocate by the bytes
/// left in the frame (third_party/README.md).
pub(crate) fn decode_request(mut frame: Bytes) -> Result<KafkaRequest, String> {
    if frame.len() < 8 {
        return Err(format!("frame of {} bytes has no header", frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|()| format!("unknown API key {raw_key}"))?;
    if !(KAFKA_GROUP_APIS.contains(&key) || key == ApiKey::ApiVersions) {
        return Err(format!("{key:?} is not served by the coordinator"));
    }
    let range = served_versions(key);
    if version < range.min || version > range.max {
        return Err(format!(
            "{key:?} v{version} is not supported (supported: v{}..=v{})",
            range.min, range.max
        ));
    }
    let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
        .map_err(|e| format!("{key:?} v{version}: bad request header: {e}"))?;
    let body = RequestKind::decode(key, &mut frame, version).map_err(|e| {
        format!(
            "{key:?} v{version} (correlation id {}): undecodable body: {e}",
            header.correlation_id
        )
    })?;
    Ok(KafkaRequest {
        key,
        version,
        header,
        body,
    })
}

/// Encodes a response (header and body, without the size prefix). An error means the
/// response has a field its version cannot carry: a bug, reported and the connection
/// closed by the caller.
pub(crate) fn encode_response(to: KafkaReplyTo, response: &ResponseKind) -> Result<Bytes, String> {
    // A steady ConsumerGroupHeartbeat or OffsetCommit answer fits in its first
    // allocation.
    let mut out = BytesMut::with_capacity(128);
    let mut header = ResponseHeader::default();
    header.correlation_id = to.correlation_id;
    header
        .encode(&mut out, to.key.response_header_version(to.version))
        .map_err(|e| format!("{:?} v{} header: {e}", to.key, to.version))?;
    response
        .encode(&mut out, to.version)
        .map_err(|e| format!("{:?} v{}: {e}", to.key, to.version))?;
    Ok(out.freeze())
}

/// The answer to the host's ApiVersions probe: every API of [`KAFKA_GROUP_APIS`] with
/// its version range.
pub(crate) fn api_versions_response() -> ResponseKind {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = KAFKA_GROUP_APIS
        .iter()
        .map(|key| {
            let range = served_versions(*key);
            let mut v = ApiVersion::default();
            v.api_key = *key as i16;
            v.min_version = range.min;
            v.max_version = range.max;
            v
        })
        .collect();
    ResponseKind::ApiVersions(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::HeartbeatRequest;
    use kafka_protocol::protocol::StrBytes;

    fn frame(key: ApiKey, version: i16, body: &RequestKind) -> Bytes {
        let mut out = BytesMut::new();
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = 42;
        header
            .encode(&mut out, key.request_header_version(version))
            .unwrap();
        body.encode(&mut out, version).unwrap();
        out.freeze()
    }

    #[test]
    fn a_heartbeat_decodes_and_other_apis_are_refused() {
        let mut hb = HeartbeatRequest::default();
        hb.group_id = StrBytes::from_static_str("g").into();
        hb.generation_id = 3;
        let bytes = frame(ApiKey::Heartbeat, 4, &RequestKind::Heartbeat(hb));
        let r = decode_request(bytes.clone()).unwrap();
        assert_eq!(
            (r.key, r.version, r.header.correlation_id),
            (ApiKey::Heartbeat, 4, 42)
        );
        // Truncated: an error, no panic.
        assert!(decode_request(bytes.slice(..bytes.len() - 3)).is_err());
        // A version Kafka does not have.
        let mut bad = bytes.to_vec();
        bad[3] = 99;
        assert!(decode_request(Bytes::from(bad))
            .unwrap_err()
            .contains("not supported"));
        // Produce is the broker's.
        let mut produce = bytes.to_vec();
        produce[1] = 0;
        assert!(decode_request(Bytes::from(produce)).is_err());
    }

    #[test]
    fn the_probe_answer_lists_every_group_api() {
        let ResponseKind::ApiVersions(r) = api_versions_response() else {
            unreachable!()
        };
        assert_eq!(r.api_keys.len(), KAFKA_GROUP_APIS.len());
        assert!(is_group_api(ApiKey::JoinGroup as i16));
        assert!(!is_group_api(ApiKey::Fetch as i16));
    }
}
