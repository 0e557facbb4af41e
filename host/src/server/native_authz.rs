//! Authorization of the native coordinator protocol's requests (docs/protocol.md),
//! checked by the host before the coordinator plugin sees them, as the Kafka group APIs
//! are (server/group_authz). Only with an authorizer configured. The rules (one
//! place, [`check`]), after Kafka's for the group APIs:
//!
//! - RegisterConsumer: Read on the group (GROUP_AUTHORIZATION_FAILED) and Read on every
//!   topic of a static subscription (TOPIC_AUTHORIZATION_FAILED, naming them). A
//!   pattern subscription would match topics the principal may not read, and the
//!   coordinator cannot yet leave those out per principal: it needs Read on every topic
//!   (an ACL on the `*` topic), else TOPIC_AUTHORIZATION_FAILED;
//! - CommitOffset: Read on the group, then Read on each topic (every partition of the
//!   request GROUP_/TOPIC_AUTHORIZATION_FAILED, or OPERATION_NOT_ATTEMPTED beside a
//!   denied topic);
//! - FetchOffsets: Describe on the group and each topic named;
//! - LeaveGroup: Read on the group;
//! - DescribeGroups: Describe on every group named (listing every group needs Describe
//!   on the cluster); a refused request is answered with no groups.
//!
//! Heartbeat, StopFetcher and StartFetcher are the coordinator's requests on a channel,
//! not the client's.

use bytes::{Bytes, BytesMut};
use drover_protocol::{
    error_code::ErrorCode,
    frame::{decode_request_frame, encode_response_frame},
    messages::{
        CommitOffsetResponse, DescribeGroupsResponse, FetchOffsetsResponse, LeaveGroupResponse,
        NativeRequest, NativeResponse, PartitionError, RegisterConsumerResponse, TopicErrors,
    },
};
use kafka_protocol::error::ResponseError;

use crate::authz::{AclOperation, RequestAuthz, ResourceType};

/// A native request decoded, for the caller's context.
pub struct Decoded {
    /// The header's API key.
    pub api_key: i16,
    /// Its version.
    pub version: i16,
    /// The correlation id.
    pub correlation_id: i32,
    /// The client id.
    pub client_id: Option<String>,
    /// The request.
    pub request: NativeRequest,
}

/// Decodes a native request frame; `None` (handed on: the coordinator answers or
/// closes) when it does not decode.
pub fn decode(frame: &Bytes) -> Option<Decoded> {
    let (header, request) = decode_request_frame(frame.clone()).ok()?;
    Some(Decoded {
        api_key: header.api_key,
        version: header.api_version,
        correlation_id: header.correlation_id,
        client_id: header.client_id,
        request,
    })
}

fn code(e: ResponseError) -> ErrorCode {
    ErrorCode(e.code())
}

/// The host's answer (the response frame's body, header included) when the request is
/// refused; `None`: hand it to the coordinator.
pub fn check(authz: &RequestAuthz, decoded: &Decoded) -> Option<(Bytes, i16)> {
    if !authz.is_enabled() {
        return None;
    }
    let group_denied = code(ResponseError::GroupAuthorizationFailed);
    let topic_denied = code(ResponseError::TopicAuthorizationFailed);
    let response = match &decoded.request {
        NativeRequest::RegisterConsumer(r) => {
            let refused = if !authz.allows(ResourceType::Group, &r.group_id, AclOperation::Read) {
                Some((
                    group_denied,
                    format!("not authorized to read group {}", r.group_id),
                ))
            } else if r.subscription.kind.is_wildcard() {
                (!authz.allows(
                    ResourceType::Topic,
                    crate::authz::WILDCARD,
                    AclOperation::Read,
                ))
                .then(|| {
                    (
                        topic_denied,
                        "a pattern subscription needs Read on every topic (an ACL on the \
                             `*` topic)"
                            .to_owned(),
                    )
                })
            } else {
                let allowed = authz.allowed_names(
                    ResourceType::Topic,
                    AclOperation::Read,
                    r.subscription.topics.iter().map(|t| t.topic.as_str()),
                );
                let denied: Vec<&str> = r
                    .subscription
                    .topics
                    .iter()
                    .map(|t| t.topic.as_str())
                    .filter(|t| !allowed.contains(t))
                    .collect();
                (!denied.is_empty()).then(|| {
                    (
                        topic_denied,
                        format!("not authorized to read topics: {}", denied.join(", ")),
                    )
                })
            };
            let (error_code, message) = refused?;
            NativeResponse::RegisterConsumer(RegisterConsumerResponse {
                error_code,
                error_message: Some(message),
                heartbeat_interval_ms: 0,
                generation: 0,
            })
        }
        NativeRequest::CommitOffset(r) => {
            let group_ok = authz.allows(ResourceType::Group, &r.group_id, AclOperation::Read);
            let allowed = authz.allowed_names(
                ResourceType::Topic,
                AclOperation::Read,
                r.topics.iter().map(|t| t.topic.as_str()),
            );
            if group_ok && r.topics.iter().all(|t| allowed.contains(&t.topic)) {
                return None;
            }
            NativeResponse::CommitOffset(CommitOffsetResponse {
                topics: r
                    .topics
                    .iter()
                    .map(|t| {
                        let error_code = if !group_ok {
                            group_denied
                        } else if !allowed.contains(&t.topic) {
                            topic_denied
                        } else {
                            code(ResponseError::OperationNotAttempted)
                        };
                        TopicErrors {
                            topic: t.topic.clone(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|p| PartitionError {
                                    partition: p.partition,
                                    error_code,
                                })
                                .collect(),
                        }
                    })
                    .collect(),
            })
        }
        NativeRequest::FetchOffsets(r) => {
            let error_code =
                if !authz.allows(ResourceType::Group, &r.group_id, AclOperation::Describe) {
                    group_denied
                } else {
                    let topics = r.topics.iter().flatten();
                    let allowed = authz.allowed_names(
                        ResourceType::Topic,
                        AclOperation::Describe,
                        topics.clone().map(|t| t.topic.as_str()),
                    );
                    if topics.clone().all(|t| allowed.contains(&t.topic)) {
                        return None;
                    }
                    topic_denied
                };
            NativeResponse::FetchOffsets(FetchOffsetsResponse {
                error_code,
                topics: Vec::new(),
            })
        }
        NativeRequest::LeaveGroup(r)
            if !authz.allows(ResourceType::Group, &r.group_id, AclOperation::Read) =>
        {
            NativeResponse::LeaveGroup(LeaveGroupResponse {
                error_code: group_denied,
            })
        }
        NativeRequest::DescribeGroups(r) => {
            let allowed = match &r.groups {
                None => authz.allows_cluster(AclOperation::Describe),
                Some(groups) => {
                    let allowed = authz.allowed_names(
                        ResourceType::Group,
                        AclOperation::Describe,
                        groups.iter().map(String::as_str),
                    );
                    groups.iter().all(|g| allowed.contains(g))
                }
            };
            if allowed {
                return None;
            }
            NativeResponse::DescribeGroups(DescribeGroupsResponse {
                groups: Vec::new(),
                version: r.version,
            })
        }
        _ => return None,
    };
    let error = match &response {
        NativeResponse::RegisterConsumer(r) => r.error_code.0,
        NativeResponse::FetchOffsets(r) => r.error_code.0,
        NativeResponse::LeaveGroup(r) => r.error_code.0,
        _ => group_denied.0,
    };
    let mut buf = BytesMut::new();
    encode_response_frame(&mut buf, decoded.correlation_id, &response).ok()?;
    // The frame without its size prefix, as the connection's writer sends bodies.
    Some((buf.freeze().slice(4..), error))
}
