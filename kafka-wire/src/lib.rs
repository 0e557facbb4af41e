//! # drover-kafka-wire — Kafka requests off the wire
//!
//! The first step of serving a Kafka request, apart from the broker that serves it:
//! which APIs and versions the broker serves ([`HANDLERS`], [`supported_versions`],
//! the one table ApiVersions is built from) and decoding a request frame against them
//! ([`decode_request`]: header, version checks, body, with `kafka-protocol`'s bounded
//! decoders). The broker host (`drover-host`, `server::dispatch`) routes what this
//! decodes to its handlers; the `request_decoder` fuzz target (fuzz/) builds against
//! this crate alone.
//!
//! Kafka's rules for what cannot be answered (Kafka protocol guide; Kafka's
//! `SocketServer`/`KafkaApis`): an unknown API key, an unsupported version (except
//! ApiVersions) or an undecodable body closes the connection; ApiVersions with an
//! unsupported version is answered in v0 with `UNSUPPORTED_VERSION` and the supported
//! ranges, so the client can retry with a version the broker knows (KIP-511). Here
//! that is a [`Rejection`]; the host answers or closes.

use bytes::Bytes;
use kafka_protocol::{
    messages::{ApiKey, RequestHeader, RequestKind},
    protocol::{Decodable, VersionRange},
};

/// The APIs this broker serves, each routed to its handler by the host
/// (`drover_host::server::handlers::handle`). Their version ranges are the ones Kafka
/// 4.1 advertises (the `kafka-protocol` crate is generated from Kafka 4.1's schemas),
/// and ApiVersions is built from this table.
pub const HANDLERS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::FindCoordinator,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::DeleteRecords,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    // Routed to the coordinator plugin when it serves it (coordinator ABI 3.4+);
    // answered COORDINATOR_NOT_AVAILABLE by the host's handler otherwise.
    ApiKey::TxnOffsetCommit,
    // SCRAM credentials (KIP-554; drover_host::auth::kip554).
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    // SASL (Kafka 4.1: SaslHandshake v0–1, SaslAuthenticate v0–2). A SASL listener's
    // connection answers them itself (drover_host::server::sasl); on other listeners
    // the host answers ILLEGAL_SASL_STATE, as Kafka does.
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    // The admin APIs tools call (issue 32): log directory sizes, a partition's active
    // producers, client quotas (none), and topics with paged partitions (KIP-966).
    ApiKey::DescribeLogDirs,
    ApiKey::DescribeProducers,
    ApiKey::DescribeClientQuotas,
    ApiKey::DescribeTopicPartitions,
    // ACLs (issue 30; Kafka 4.1: v1–3): SECURITY_DISABLED without an authorizer
    // (drover_host::server::handlers::acls).
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    // Share groups' delivery (KIP-932, issue 31; v1): served by the host beside the
    // partition logs (drover_host::share); membership (ShareGroupHeartbeat) is the
    // coordinator plugin's.
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
    // Share groups' start offsets from the offset store (drover_host::server::handlers::
    // describe_share_group_offsets), and setting or deleting them for an empty share
    // group (alter_share_group_offsets, delete_share_group_offsets).
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::DeleteShareGroupOffsets,
];

/// The versions of `key` this broker serves, if it serves it.
pub fn supported_versions(key: ApiKey) -> Option<VersionRange> {
    HANDLERS.contains(&key).then(|| match key {
        // Kafka 4.1 marks InitProducerId v6 (KIP-939's two-phase commit) unstable and
        // does not advertise it; the message type stops at v5 too.
        ApiKey::InitProducerId => {
            <kafka_protocol::messages::InitProducerIdRequest as kafka_protocol::protocol::Message>::VERSIONS
        }
        // EndTxn v5 is KIP-890 part 2 (transaction version 2: an epoch bump at every
        // commit, returned in the response), which the transaction coordinator does not
        // do: stopping at v4 keeps clients on transaction version 1
        // (docs/operations.md, "Transactions").
        ApiKey::EndTxn => VersionRange { min: 0, max: 4 },
        _ => key.valid_versions(),
    })
}

/// A decoded request handed to a handler.
pub struct Request {
    /// The request header (correlation id, client id).
    pub header: RequestHeader,
    /// API version of the request.
    pub version: i16,
    /// The decoded body.
    pub body: RequestKind,
}

/// Why a frame cannot be handed to a handler.
#[derive(Debug)]
pub enum Rejection {
    /// Close the connection: (metrics reason, log detail).
    Close(&'static str, String),
    /// ApiVersions with a version this broker does not know: answer in v0 with
    /// `UNSUPPORTED_VERSION` and this correlation id.
    ApiVersionsUnsupported(i32),
}

/// Decodes a request frame (header and body) without acting on it. Never panics and
/// never allocates more than the frame holds; this is the fuzzing target.
pub fn decode_request(frame: Bytes) -> Result<(ApiKey, Request), Rejection> {
    if frame.len() < 8 {
        return Err(Rejection::Close(
            "malformed",
            format!("frame of {} bytes has no header", frame.len()),
        ));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Ok(key) = ApiKey::try_from(raw_key) else {
        return Err(Rejection::Close(
            "unknown_api",
            format!("unknown API key {raw_key}"),
        ));
    };
    let Some(range) = supported_versions(key) else {
        return Err(Rejection::Close(
            "unsupported_api",
            format!("API {key:?} ({raw_key}) is not served"),
        ));
    };
    if version < range.min || version > range.max {
        if key == ApiKey::ApiVersions {
            let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            return Err(Rejection::ApiVersionsUnsupported(correlation_id));
        }
        return Err(Rejection::Close(
            "unsupported_version",
            format!(
                "{key:?} v{version} is not supported (supported: v{}..=v{})",
                range.min, range.max
            ),
        ));
    }
    let mut buf = frame;
    let header =
        RequestHeader::decode(&mut buf, key.request_header_version(version)).map_err(|e| {
            Rejection::Close(
                "malformed",
                format!("{key:?} v{version}: bad request header: {e}"),
            )
        })?;
    let body = RequestKind::decode(key, &mut buf, version).map_err(|e| {
        Rejection::Close(
            "malformed",
            format!(
                "{key:?} v{version} (correlation id {}): undecodable body: {e}",
                header.correlation_id
            ),
        )
    })?;
    Ok((
        key,
        Request {
            header,
            version,
            body,
        },
    ))
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::{
        messages::{MetadataRequest, RequestHeader},
        protocol::Encodable,
    };
    use proptest::prelude::*;

    use super::*;

    fn frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let mut out = BytesMut::new();
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = 7;
        header
            .encode(&mut out, key.request_header_version(version))
            .unwrap();
        body.encode(&mut out, version).unwrap();
        out.freeze()
    }

    #[test]
    fn decodes_a_valid_request() {
        let (key, request) =
            decode_request(frame(ApiKey::Metadata, 9, &MetadataRequest::default())).unwrap();
        assert_eq!(key, ApiKey::Metadata);
        assert_eq!(request.header.correlation_id, 7);
    }

    #[test]
    fn rejects_unknown_keys_and_versions() {
        let mut f = BytesMut::new();
        f.put_i16(9999);
        f.put_i16(0);
        f.put_i32(1);
        f.put_i16(-1);
        assert!(matches!(
            decode_request(f.freeze()),
            Err(Rejection::Close("unknown_api", _))
        ));
        let mut f = BytesMut::new();
        f.put_i16(ApiKey::Metadata as i16);
        f.put_i16(99);
        f.put_i32(1);
        f.put_i16(-1);
        assert!(matches!(
            decode_request(f.freeze()),
            Err(Rejection::Close("unsupported_version", _))
        ));
        let mut f = BytesMut::new();
        f.put_i16(ApiKey::ApiVersions as i16);
        f.put_i16(99);
        f.put_i32(42);
        assert!(matches!(
            decode_request(f.freeze()),
            Err(Rejection::ApiVersionsUnsupported(42))
        ));
    }

    #[test]
    fn a_forged_array_count_is_refused_without_a_huge_allocation() {
        // Metadata v1: header, then the topics array count 2^31 - 1 and nothing else.
        let mut f = BytesMut::new();
        f.put_i16(ApiKey::Metadata as i16);
        f.put_i16(1);
        f.put_i32(3);
        f.put_i16(-1);
        f.put_i32(i32::MAX);
        assert!(matches!(
            decode_request(f.freeze()),
            Err(Rejection::Close("malformed", _))
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_request(Bytes::from(data));
        }

        #[test]
        fn mutated_valid_frames_never_panic(
            key in prop::sample::select(HANDLERS.to_vec()),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let range = supported_versions(key).expect("served");
            let version = range.max;
            // A default request of this API at its newest version, then damaged.
            let mut out = BytesMut::new();
            let mut header = RequestHeader::default();
            header.request_api_key = key as i16;
            header.request_api_version = version;
            header.encode(&mut out, key.request_header_version(version)).unwrap();
            encode_default(key, version, &mut out);
            let body = out.freeze();
            let mut bytes = body.to_vec();
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = cut.index(bytes.len() + 1);
            bytes.truncate(keep.max(4));
            let _ = decode_request(Bytes::from(bytes));
        }
    }

    #[test]
    fn every_served_api_is_encoded() {
        for &key in HANDLERS {
            let version = supported_versions(key).expect("served").max;
            assert!(
                encode_default(key, version, &mut BytesMut::new()),
                "{key:?} has no arm in encode_default"
            );
        }
    }

    /// Encodes a default request of `key`; false for an API this table does not know.
    fn encode_default(key: ApiKey, version: i16, out: &mut BytesMut) -> bool {
        use kafka_protocol::messages::*;
        let result = match key {
            ApiKey::Produce => ProduceRequest::default().encode(out, version),
            ApiKey::Fetch => FetchRequest::default().encode(out, version),
            ApiKey::ListOffsets => ListOffsetsRequest::default().encode(out, version),
            ApiKey::Metadata => MetadataRequest::default().encode(out, version),
            ApiKey::FindCoordinator => FindCoordinatorRequest::default().encode(out, version),
            ApiKey::ApiVersions => ApiVersionsRequest::default().encode(out, version),
            ApiKey::CreateTopics => CreateTopicsRequest::default().encode(out, version),
            ApiKey::DeleteTopics => DeleteTopicsRequest::default().encode(out, version),
            ApiKey::CreatePartitions => CreatePartitionsRequest::default().encode(out, version),
            ApiKey::InitProducerId => InitProducerIdRequest::default().encode(out, version),
            ApiKey::AddPartitionsToTxn => AddPartitionsToTxnRequest::default().encode(out, version),
            ApiKey::AddOffsetsToTxn => AddOffsetsToTxnRequest::default().encode(out, version),
            ApiKey::EndTxn => EndTxnRequest::default().encode(out, version),
            ApiKey::DescribeTransactions => {
                DescribeTransactionsRequest::default().encode(out, version)
            }
            ApiKey::ListTransactions => ListTransactionsRequest::default().encode(out, version),
            ApiKey::TxnOffsetCommit => TxnOffsetCommitRequest::default().encode(out, version),
            ApiKey::DescribeUserScramCredentials => {
                DescribeUserScramCredentialsRequest::default().encode(out, version)
            }
            ApiKey::AlterUserScramCredentials => {
                AlterUserScramCredentialsRequest::default().encode(out, version)
            }
            ApiKey::SaslHandshake => SaslHandshakeRequest::default().encode(out, version),
            ApiKey::SaslAuthenticate => SaslAuthenticateRequest::default().encode(out, version),
            ApiKey::DeleteRecords => DeleteRecordsRequest::default().encode(out, version),
            ApiKey::DescribeConfigs => DescribeConfigsRequest::default().encode(out, version),
            ApiKey::AlterConfigs => AlterConfigsRequest::default().encode(out, version),
            ApiKey::IncrementalAlterConfigs => {
                IncrementalAlterConfigsRequest::default().encode(out, version)
            }
            ApiKey::DescribeCluster => DescribeClusterRequest::default().encode(out, version),
            ApiKey::DescribeLogDirs => DescribeLogDirsRequest::default().encode(out, version),
            ApiKey::DescribeProducers => DescribeProducersRequest::default().encode(out, version),
            ApiKey::DescribeClientQuotas => {
                DescribeClientQuotasRequest::default().encode(out, version)
            }
            ApiKey::DescribeTopicPartitions => {
                DescribeTopicPartitionsRequest::default().encode(out, version)
            }
            ApiKey::DescribeAcls => DescribeAclsRequest::default().encode(out, version),
            ApiKey::CreateAcls => CreateAclsRequest::default().encode(out, version),
            ApiKey::DeleteAcls => DeleteAclsRequest::default().encode(out, version),
            ApiKey::ShareFetch => ShareFetchRequest::default().encode(out, version),
            ApiKey::ShareAcknowledge => ShareAcknowledgeRequest::default().encode(out, version),
            ApiKey::DescribeShareGroupOffsets => {
                DescribeShareGroupOffsetsRequest::default().encode(out, version)
            }
            ApiKey::AlterShareGroupOffsets => {
                AlterShareGroupOffsetsRequest::default().encode(out, version)
            }
            ApiKey::DeleteShareGroupOffsets => {
                DeleteShareGroupOffsetsRequest::default().encode(out, version)
            }
            // Every served API has its arm above (`every_served_api_is_encoded`).
            _ => return false,
        };
        result.unwrap();
        true
    }
}
