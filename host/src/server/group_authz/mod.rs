//! Authorization of the group APIs the coordinator plugin serves, checked by the host
//! before the plugin sees the request, so that a third-party coordinator cannot skip
//! the check (issue 30 item 4). Only with an authorizer configured: the frame is then
//! decoded here (the coordinator decodes it again), and a denied action never reaches
//! the plugin.
//!
//! The rules, as Kafka's `KafkaApis` (one place: [`check`]):
//! - JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat,
//!   ShareGroupHeartbeat: Read on the group, else GROUP_AUTHORIZATION_FAILED;
//!   ConsumerGroupHeartbeat also Describe on each topic of `SubscribedTopicNames`, else
//!   TOPIC_AUTHORIZATION_FAILED (KAFKA-18813; a `SubscribedTopicRegex` is resolved by
//!   the coordinator against every topic, see docs/security.md "Not yet");
//! - OffsetCommit: Read on the group (else every partition GROUP_AUTHORIZATION_FAILED)
//!   and Read on each topic (TOPIC_AUTHORIZATION_FAILED);
//! - TxnOffsetCommit: Write on the transactional id
//!   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group and each topic;
//! - OffsetFetch: Describe on each group and each named topic (Kafka's rule: Describe,
//!   not Read); a fetch of all a group's offsets answers only the topics the principal
//!   may describe;
//! - OffsetDelete: Delete on the group, Read on each topic;
//! - DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe: Describe on each
//!   group; a KIP-848 group whose assignments name a topic the principal may not
//!   describe is answered TOPIC_AUTHORIZATION_FAILED, no members (KAFKA-18813);
//!   DeleteGroups: Delete on each group;
//! - ListGroups: served as is with Describe on the cluster; without it, the
//!   coordinator's answer keeps only the groups the principal may describe (Kafka's
//!   `handleListGroupsRequest`).
//!
//! **Partly refused requests** are served as Kafka serves them: the host hands the
//! coordinator the request re-encoded with only the allowed items (same API version
//! and header, `reframe`), then merges the refused items, with their error, into the
//! coordinator's answer where Kafka puts them: refused topics before the
//! coordinator's in OffsetCommit, TxnOffsetCommit and OffsetDelete; after them, per
//! group, in OffsetFetch; refused groups first in DescribeGroups,
//! ConsumerGroupDescribe and ShareGroupDescribe and last in DeleteGroups
//! (`offsets`, `groups`). A request whose items are all refused (or whose group is)
//! is answered by the host; the coordinator never sees it.
//!
//! **KIP-430**: where a describe request asks for the authorized operations
//! (DescribeGroups v3+, ConsumerGroupDescribe, ShareGroupDescribe), the host puts the
//! authorizer's answer in each described group in place of the coordinator's.

mod groups;
mod offsets;
mod reframe;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use kafka_protocol::{
    error::ResponseError,
    messages::{
        ApiKey, ConsumerGroupHeartbeatResponse, HeartbeatResponse, JoinGroupResponse,
        LeaveGroupResponse, RequestHeader, RequestKind, ResponseKind, ShareGroupHeartbeatResponse,
        SyncGroupResponse,
    },
    protocol::Decodable,
};

pub use reframe::{edit_answer, EncodeError};

use crate::authz::{AclOperation, RequestAuthz, ResourceType};

/// What to do with a group API request.
pub enum GroupCheck {
    /// Hand it to the coordinator unchanged.
    Forward,
    /// Hand the coordinator `request` (its allowed items only; `None`: the client's
    /// frame as it came), then pass its answer through `edit` ([`edit_answer`]).
    Edit {
        /// The request to hand on instead of the client's, to encode
        /// ([`Decoded::encode`]).
        request: Option<Box<Decoded>>,
        /// The change to the coordinator's answer.
        edit: AnswerEdit,
    },
    /// Answer with this response; the coordinator never sees the request.
    Refuse {
        /// The API.
        key: ApiKey,
        /// Its version.
        version: i16,
        /// The correlation id to answer.
        correlation_id: i32,
        /// The response.
        response: Box<ResponseKind>,
        /// Its summary error for the metrics.
        error: i16,
    },
}

/// A change to the coordinator's decoded answer (refused items merged in, groups the
/// principal may not describe removed, KIP-430 operations); an answer of another kind
/// is left as is.
pub type AnswerEdit = Box<dyn FnOnce(&mut ResponseKind) + Send>;

/// The decoded request, for the caller's context.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The API.
    pub key: ApiKey,
    /// Its version.
    pub version: i16,
    /// The header.
    pub header: RequestHeader,
    /// The body.
    pub body: RequestKind,
}

/// Decodes a group API frame; `None` (forwarded as is: the coordinator answers or
/// closes) when it does not decode.
pub fn decode(frame: &Bytes) -> Option<Decoded> {
    if frame.len() < 8 {
        return None;
    }
    let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).ok()?;
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if version < key.valid_versions().min || version > key.valid_versions().max {
        return None;
    }
    let mut buf = frame.clone();
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version)).ok()?;
    let body = RequestKind::decode(key, &mut buf, version).ok()?;
    Some(Decoded {
        key,
        version,
        header,
        body,
    })
}

const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

/// One request being checked: the authorizer's verdicts and how to answer.
struct Checking<'a> {
    authz: &'a RequestAuthz,
    key: ApiKey,
    version: i16,
    header: RequestHeader,
}

impl Checking<'_> {
    /// Whether the principal may do `operation` on group `group`.
    fn group(&self, group: &str, operation: AclOperation) -> bool {
        self.authz.allows(ResourceType::Group, group, operation)
    }

    /// The host's answer: `response`, with `error` for the metrics.
    fn refuse(&self, response: impl Into<ResponseKind>, error: ResponseError) -> GroupCheck {
        GroupCheck::Refuse {
            key: self.key,
            version: self.version,
            correlation_id: self.header.correlation_id,
            response: Box::new(response.into()),
            error: error.code(),
        }
    }

    /// Hands the coordinator `body` (the allowed part of the request) in place of the
    /// client's, and its answer to `edit`.
    fn partly(
        &self,
        body: RequestKind,
        edit: impl FnOnce(&mut ResponseKind) + Send + 'static,
    ) -> GroupCheck {
        GroupCheck::Edit {
            request: Some(Box::new(Decoded {
                key: self.key,
                version: self.version,
                header: self.header.clone(),
                body,
            })),
            edit: Box::new(edit),
        }
    }

    /// Hands the coordinator the client's frame, and its answer to `edit`.
    fn edited(&self, edit: impl FnOnce(&mut ResponseKind) + Send + 'static) -> GroupCheck {
        GroupCheck::Edit {
            request: None,
            edit: Box::new(edit),
        }
    }
}

/// `items` split into those `allowed` keeps and the others, each in request order.
fn split<T>(items: Vec<T>, allowed: impl Fn(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|item| allowed(item))
}

/// Checks a decoded group API request (module docs).
pub fn check(authz: &RequestAuthz, request: Decoded) -> GroupCheck {
    if !authz.is_enabled() {
        return GroupCheck::Forward;
    }
    let Decoded {
        key,
        version,
        header,
        body,
    } = request;
    let c = Checking {
        authz,
        key,
        version,
        header,
    };
    let read_group = |g: &str| c.group(g, AclOperation::Read);
    match body {
        RequestKind::JoinGroup(r) if !read_group(&r.group_id) => {
            let mut out = JoinGroupResponse::default();
            out.error_code = GROUP_DENIED.code();
            out.generation_id = -1;
            out.member_id = r.member_id;
            if version >= 7 {
                out.protocol_name = None;
            }
            c.refuse(out, GROUP_DENIED)
        }
        RequestKind::SyncGroup(r) if !read_group(&r.group_id) => {
            let mut out = SyncGroupResponse::default();
            out.error_code = GROUP_DENIED.code();
            c.refuse(out, GROUP_DENIED)
        }
        RequestKind::Heartbeat(r) if !read_group(&r.group_id) => {
            let mut out = HeartbeatResponse::default();
            out.error_code = GROUP_DENIED.code();
            c.refuse(out, GROUP_DENIED)
        }
        RequestKind::LeaveGroup(r) if !read_group(&r.group_id) => {
            let mut out = LeaveGroupResponse::default();
            out.error_code = GROUP_DENIED.code();
            c.refuse(out, GROUP_DENIED)
        }
        RequestKind::ConsumerGroupHeartbeat(r) if !read_group(&r.group_id) => {
            let mut out = ConsumerGroupHeartbeatResponse::default();
            out.error_code = GROUP_DENIED.code();
            out.error_message = Some("Group authorization failed.".into());
            c.refuse(out, GROUP_DENIED)
        }
        RequestKind::ConsumerGroupHeartbeat(r) => groups::heartbeat_topics(&c, &r),
        RequestKind::ShareGroupHeartbeat(r) if !read_group(&r.group_id) => {
            let mut out = ShareGroupHeartbeatResponse::default();
            out.error_code = GROUP_DENIED.code();
            out.error_message = Some("Group authorization failed.".into());
            c.refuse(out, GROUP_DENIED)
        }
        RequestKind::OffsetCommit(r) => offsets::commit(&c, r),
        RequestKind::TxnOffsetCommit(r) => offsets::txn_commit(&c, r),
        RequestKind::OffsetFetch(r) if version < 8 => offsets::fetch_one(&c, r),
        RequestKind::OffsetFetch(r) => offsets::fetch_groups(&c, r),
        RequestKind::OffsetDelete(r) => offsets::delete(&c, r),
        RequestKind::DescribeGroups(r) => groups::describe_classic(&c, r),
        RequestKind::ConsumerGroupDescribe(r) => groups::describe_consumer(&c, r),
        RequestKind::ShareGroupDescribe(r) => groups::describe_share(&c, r),
        RequestKind::DeleteGroups(r) => groups::delete(&c, r),
        RequestKind::ListGroups(_)
            if !authz.allows_quietly(
                ResourceType::Cluster,
                crate::authz::CLUSTER_RESOURCE_NAME,
                AclOperation::Describe,
            ) =>
        {
            groups::filter_list(&c)
        }
        _ => GroupCheck::Forward,
    }
}
