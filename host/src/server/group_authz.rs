//! Authorization of the group APIs the coordinator plugin serves, checked by the host
//! before the plugin sees the request, so that a third-party coordinator cannot skip
//! the check (issue 30 item 4). Only with an authorizer configured: the frame is then
//! decoded here (the coordinator decodes it again), and a refused request is answered
//! by the host with Kafka's error and never reaches the plugin.
//!
//! The rules, as Kafka's `KafkaApis` (one place: [`check`]):
//! - JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat,
//!   ShareGroupHeartbeat: Read on the group, else GROUP_AUTHORIZATION_FAILED;
//! - OffsetCommit: Read on the group (else every partition GROUP_AUTHORIZATION_FAILED)
//!   and Read on each topic (TOPIC_AUTHORIZATION_FAILED);
//! - TxnOffsetCommit: Write on the transactional id
//!   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group and each topic;
//! - OffsetFetch: Describe on each group and each named topic (Kafka's rule: Describe,
//!   not Read);
//! - OffsetDelete: Delete on the group, Read on each topic;
//! - DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe: Describe on each
//!   group; DeleteGroups: Delete on each group;
//! - ListGroups: served as is with Describe on the cluster; without it, the
//!   coordinator's answer keeps only the groups the principal may describe (Kafka's
//!   `handleListGroupsRequest`).
//!
//! **Partly refused requests**: where Kafka serves the allowed part of a request and
//! refuses the rest (a commit to an allowed and a denied topic, DeleteGroups of an
//! allowed and a denied group), the host refuses the whole request: the denied items
//! with the authorization error, the others OPERATION_NOT_ATTEMPTED (never forwarding a
//! denied action to the plugin). Serving the allowed part needs the host to split the
//! request and merge the coordinator's answer, left for later.

use bytes::Bytes;
use kafka_protocol::{
    error::ResponseError,
    messages::{
        consumer_group_describe_response::DescribedGroup,
        delete_groups_response::DeletableGroupResult,
        describe_groups_response::DescribedGroup as ClassicDescribed,
        offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
        offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic},
        offset_fetch_response::{
            OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
            OffsetFetchResponseTopic, OffsetFetchResponseTopics,
        },
        share_group_describe_response::DescribedGroup as ShareDescribed,
        txn_offset_commit_response::{
            TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
        },
        ApiKey, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse,
        DeleteGroupsResponse, DescribeGroupsResponse, GroupId, HeartbeatResponse,
        JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse, OffsetCommitResponse,
        OffsetDeleteResponse, OffsetFetchResponse, RequestHeader, RequestKind, ResponseKind,
        ShareGroupDescribeResponse, ShareGroupHeartbeatResponse, SyncGroupResponse,
        TxnOffsetCommitResponse,
    },
    protocol::Decodable,
};

use crate::authz::{AclOperation, Allowed, RequestAuthz, ResourceType};

/// What to do with a group API request.
pub enum GroupCheck {
    /// Hand it to the coordinator unchanged.
    Forward,
    /// ListGroups (this version) without Describe on the cluster: hand it on, then
    /// keep in the coordinator's answer only the groups the principal may describe
    /// ([`filter_list_groups`]).
    FilterListGroups(i16),
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

/// The decoded request, for the caller's context.
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
const NOT_ATTEMPTED: ResponseError = ResponseError::OperationNotAttempted;

/// The code of an item: its own refusal, or, when another item of the request was
/// refused, OPERATION_NOT_ATTEMPTED.
fn item(refusal: Option<ResponseError>) -> i16 {
    refusal.unwrap_or(NOT_ATTEMPTED).code()
}

/// The answer to a request about several groups, `$codes` from [`group_codes`]:
/// forwarded when `None`, else refused with a `$response` whose `$field` lists each
/// group as an `$item` (its id and code, then `$more`).
macro_rules! refuse_groups {
    ($refuse:ident, $codes:expr, $response:ident . $field:ident, |$d:ident: $item:ty| $($more:expr)?) => {
        match $codes {
            None => GroupCheck::Forward,
            Some(codes) => {
                let mut out = $response::default();
                out.$field = codes
                    .into_iter()
                    .map(|(group_id, error_code)| {
                        let mut $d = <$item>::default();
                        $d.group_id = group_id;
                        $d.error_code = error_code;
                        $($more;)?
                        $d
                    })
                    .collect();
                $refuse(out.into(), GROUP_DENIED)
            }
        }
    };
}

/// `operation` on each of `groups`: `None` when every one is allowed, else each group
/// with its code (GROUP_AUTHORIZATION_FAILED, or OPERATION_NOT_ATTEMPTED for the
/// allowed ones).
fn group_codes(
    authz: &RequestAuthz,
    operation: AclOperation,
    groups: &[GroupId],
) -> Option<Vec<(GroupId, i16)>> {
    let allowed = authz.allowed_names(
        ResourceType::Group,
        operation,
        groups.iter().map(|g| g.0.as_str()),
    );
    if groups.iter().all(|g| allowed.contains(g)) {
        return None;
    }
    Some(
        groups
            .iter()
            .map(|g| {
                (
                    g.clone(),
                    item((!allowed.contains(g)).then_some(GROUP_DENIED)),
                )
            })
            .collect(),
    )
}

/// Checks a decoded group API request (module docs).
pub fn check(authz: &RequestAuthz, request: Decoded) -> GroupCheck {
    if !authz.is_enabled() {
        return GroupCheck::Forward;
    }
    let (key, version) = (request.key, request.version);
    let read_group = |g: &str| authz.allows(ResourceType::Group, g, AclOperation::Read);
    let refuse = |response: ResponseKind, error: ResponseError| GroupCheck::Refuse {
        key,
        version,
        correlation_id: request.header.correlation_id,
        response: Box::new(response),
        error: error.code(),
    };
    match request.body {
        RequestKind::JoinGroup(r) if !read_group(&r.group_id) => {
            let mut out = JoinGroupResponse::default();
            out.error_code = GROUP_DENIED.code();
            out.generation_id = -1;
            out.member_id = r.member_id;
            if version >= 7 {
                out.protocol_name = None;
            }
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::SyncGroup(r) if !read_group(&r.group_id) => {
            let mut out = SyncGroupResponse::default();
            out.error_code = GROUP_DENIED.code();
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::Heartbeat(r) if !read_group(&r.group_id) => {
            let mut out = HeartbeatResponse::default();
            out.error_code = GROUP_DENIED.code();
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::LeaveGroup(r) if !read_group(&r.group_id) => {
            let mut out = LeaveGroupResponse::default();
            out.error_code = GROUP_DENIED.code();
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::ConsumerGroupHeartbeat(r) if !read_group(&r.group_id) => {
            let mut out = ConsumerGroupHeartbeatResponse::default();
            out.error_code = GROUP_DENIED.code();
            out.error_message = Some("Group authorization failed.".into());
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::ShareGroupHeartbeat(r) if !read_group(&r.group_id) => {
            let mut out = ShareGroupHeartbeatResponse::default();
            out.error_code = GROUP_DENIED.code();
            out.error_message = Some("Group authorization failed.".into());
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::OffsetCommit(r) => {
            let group_ok = read_group(&r.group_id);
            let topics = authz.allowed_names(
                ResourceType::Topic,
                AclOperation::Read,
                r.topics.iter().map(|t| t.name.0.as_str()),
            );
            let topic_refusal = |name: &str| (!topics.contains(name)).then_some(TOPIC_DENIED);
            if group_ok && r.topics.iter().all(|t| topics.contains(&t.name)) {
                return GroupCheck::Forward;
            }
            let mut out = OffsetCommitResponse::default();
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let refusal = if group_ok {
                        topic_refusal(&t.name)
                    } else {
                        Some(GROUP_DENIED)
                    };
                    let mut topic = OffsetCommitResponseTopic::default();
                    topic.name = t.name.clone();
                    topic.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut part = OffsetCommitResponsePartition::default();
                            part.partition_index = p.partition_index;
                            part.error_code = item(refusal);
                            part
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(
                out.into(),
                if group_ok { TOPIC_DENIED } else { GROUP_DENIED },
            )
        }
        RequestKind::TxnOffsetCommit(r) => {
            let whole = if !authz.allows(
                ResourceType::TransactionalId,
                &r.transactional_id,
                AclOperation::Write,
            ) {
                Some(ResponseError::TransactionalIdAuthorizationFailed)
            } else if !read_group(&r.group_id) {
                Some(GROUP_DENIED)
            } else {
                None
            };
            let topics = match whole {
                Some(_) => Allowed::All,
                None => authz.allowed_names(
                    ResourceType::Topic,
                    AclOperation::Read,
                    r.topics.iter().map(|t| t.name.0.as_str()),
                ),
            };
            if whole.is_none() && r.topics.iter().all(|t| topics.contains(&t.name)) {
                return GroupCheck::Forward;
            }
            let mut out = TxnOffsetCommitResponse::default();
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let refusal = whole.or((!topics.contains(&t.name)).then_some(TOPIC_DENIED));
                    let mut topic = TxnOffsetCommitResponseTopic::default();
                    topic.name = t.name.clone();
                    topic.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut part = TxnOffsetCommitResponsePartition::default();
                            part.partition_index = p.partition_index;
                            part.error_code = item(refusal);
                            part
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(out.into(), whole.unwrap_or(TOPIC_DENIED))
        }
        RequestKind::OffsetFetch(r) => {
            let describe_group =
                |g: &str| authz.allows(ResourceType::Group, g, AclOperation::Describe);
            let describe_topics = |names: Vec<&str>| {
                authz.allowed_names(ResourceType::Topic, AclOperation::Describe, names)
            };
            if version < 8 {
                let group_ok = describe_group(&r.group_id);
                let topics = describe_topics(
                    r.topics
                        .iter()
                        .flatten()
                        .map(|t| t.name.0.as_str())
                        .collect(),
                );
                let all_topics_ok = r.topics.iter().flatten().all(|t| topics.contains(&t.name));
                if group_ok && all_topics_ok {
                    return GroupCheck::Forward;
                }
                let mut out = OffsetFetchResponse::default();
                if !group_ok {
                    out.error_code = GROUP_DENIED.code();
                }
                out.topics = r
                    .topics
                    .iter()
                    .flatten()
                    .map(|t| {
                        let refusal = if group_ok {
                            (!topics.contains(&t.name)).then_some(TOPIC_DENIED)
                        } else {
                            Some(GROUP_DENIED)
                        };
                        let mut topic = OffsetFetchResponseTopic::default();
                        topic.name = t.name.clone();
                        topic.partitions = t
                            .partition_indexes
                            .iter()
                            .map(|&i| {
                                let mut part = OffsetFetchResponsePartition::default();
                                part.partition_index = i;
                                part.committed_offset = -1;
                                part.committed_leader_epoch = -1;
                                part.error_code = item(refusal);
                                part
                            })
                            .collect();
                        topic
                    })
                    .collect();
                return refuse(
                    out.into(),
                    if group_ok { TOPIC_DENIED } else { GROUP_DENIED },
                );
            }
            let verdicts: Vec<(bool, Allowed)> = r
                .groups
                .iter()
                .map(|g| {
                    (
                        describe_group(&g.group_id),
                        describe_topics(
                            g.topics
                                .iter()
                                .flatten()
                                .map(|t| t.name.0.as_str())
                                .collect(),
                        ),
                    )
                })
                .collect();
            let ok = r
                .groups
                .iter()
                .zip(&verdicts)
                .all(|(g, (group_ok, topics))| {
                    *group_ok && g.topics.iter().flatten().all(|t| topics.contains(&t.name))
                });
            if ok {
                return GroupCheck::Forward;
            }
            let mut out = OffsetFetchResponse::default();
            out.groups = r
                .groups
                .iter()
                .zip(&verdicts)
                .map(|(g, (group_ok, topics))| {
                    let mut group = OffsetFetchResponseGroup::default();
                    group.group_id = g.group_id.clone();
                    if !group_ok {
                        group.error_code = GROUP_DENIED.code();
                        return group;
                    }
                    let topics_ok = g.topics.iter().flatten().all(|t| topics.contains(&t.name));
                    if topics_ok {
                        group.error_code = NOT_ATTEMPTED.code();
                        return group;
                    }
                    group.topics = g
                        .topics
                        .iter()
                        .flatten()
                        .map(|t| {
                            let refusal = (!topics.contains(&t.name)).then_some(TOPIC_DENIED);
                            let mut topic = OffsetFetchResponseTopics::default();
                            topic.name = t.name.clone();
                            topic.partitions = t
                                .partition_indexes
                                .iter()
                                .map(|&i| {
                                    let mut part = OffsetFetchResponsePartitions::default();
                                    part.partition_index = i;
                                    part.committed_offset = -1;
                                    part.committed_leader_epoch = -1;
                                    part.error_code = item(refusal);
                                    part
                                })
                                .collect();
                            topic
                        })
                        .collect();
                    group
                })
                .collect();
            refuse(out.into(), GROUP_DENIED)
        }
        RequestKind::OffsetDelete(r) => {
            let group_ok = authz.allows(ResourceType::Group, &r.group_id, AclOperation::Delete);
            if !group_ok {
                let mut out = OffsetDeleteResponse::default();
                out.error_code = GROUP_DENIED.code();
                return refuse(out.into(), GROUP_DENIED);
            }
            let topics = authz.allowed_names(
                ResourceType::Topic,
                AclOperation::Read,
                r.topics.iter().map(|t| t.name.0.as_str()),
            );
            if r.topics.iter().all(|t| topics.contains(&t.name)) {
                return GroupCheck::Forward;
            }
            let mut out = OffsetDeleteResponse::default();
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let refusal = (!topics.contains(&t.name)).then_some(TOPIC_DENIED);
                    let mut topic = OffsetDeleteResponseTopic::default();
                    topic.name = t.name.clone();
                    topic.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut part = OffsetDeleteResponsePartition::default();
                            part.partition_index = p.partition_index;
                            part.error_code = item(refusal);
                            part
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(out.into(), TOPIC_DENIED)
        }
        RequestKind::DescribeGroups(r) => refuse_groups!(
            refuse,
            group_codes(authz, AclOperation::Describe, &r.groups),
            DescribeGroupsResponse.groups,
            |d: ClassicDescribed| d.authorized_operations = i32::MIN
        ),
        RequestKind::ConsumerGroupDescribe(r) => refuse_groups!(
            refuse,
            group_codes(authz, AclOperation::Describe, &r.group_ids),
            ConsumerGroupDescribeResponse.groups,
            |d: DescribedGroup| d.authorized_operations = i32::MIN
        ),
        RequestKind::ShareGroupDescribe(r) => refuse_groups!(
            refuse,
            group_codes(authz, AclOperation::Describe, &r.group_ids),
            ShareGroupDescribeResponse.groups,
            |d: ShareDescribed| d.authorized_operations = i32::MIN
        ),
        RequestKind::DeleteGroups(r) => refuse_groups!(
            refuse,
            group_codes(authz, AclOperation::Delete, &r.groups_names),
            DeleteGroupsResponse.results,
            |d: DeletableGroupResult|
        ),
        RequestKind::ListGroups(_)
            if !authz.allows_quietly(
                ResourceType::Cluster,
                crate::authz::CLUSTER_RESOURCE_NAME,
                AclOperation::Describe,
            ) =>
        {
            GroupCheck::FilterListGroups(version)
        }
        _ => GroupCheck::Forward,
    }
}

/// The coordinator's ListGroups answer `frame` (response header and body, `version`)
/// with only the groups `authz` allows to describe; an answer that does not decode is
/// passed on as is.
pub fn filter_list_groups(authz: &RequestAuthz, version: i16, frame: Bytes) -> Bytes {
    use kafka_protocol::{messages::ResponseHeader, protocol::Decodable};
    let key = ApiKey::ListGroups;
    let mut buf = frame.clone();
    let Ok(header) = ResponseHeader::decode(&mut buf, key.response_header_version(version)) else {
        return frame;
    };
    let Ok(mut response) = ListGroupsResponse::decode(&mut buf, version) else {
        return frame;
    };
    let allowed = authz.allowed_names_quietly(
        ResourceType::Group,
        AclOperation::Describe,
        response.groups.iter().map(|g| g.group_id.0.as_str()),
    );
    response.groups.retain(|g| allowed.contains(&g.group_id));
    super::dispatch::encode_response(key, version, header.correlation_id, &response.into())
        .unwrap_or(frame)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::{
        messages::{
            offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
            GroupId, JoinGroupRequest, OffsetCommitRequest, TopicName,
        },
        protocol::StrBytes,
    };

    use super::*;

    fn checks() -> RequestAuthz {
        crate::authz::tests::ok_prefix_checks()
    }

    fn decoded(key: ApiKey, version: i16, body: RequestKind) -> Decoded {
        let mut header = RequestHeader::default();
        header.correlation_id = 9;
        Decoded {
            key,
            version,
            header,
            body,
        }
    }

    fn join(group: &str) -> Decoded {
        let mut r = JoinGroupRequest::default();
        r.group_id = GroupId(StrBytes::from_string(group.into()));
        decoded(ApiKey::JoinGroup, 9, RequestKind::JoinGroup(r))
    }

    fn commit(group: &str, topics: &[&str]) -> Decoded {
        let mut r = OffsetCommitRequest::default();
        r.group_id = GroupId(StrBytes::from_string(group.into()));
        r.topics = topics
            .iter()
            .map(|t| {
                let mut topic = OffsetCommitRequestTopic::default();
                topic.name = TopicName(StrBytes::from_string((*t).into()));
                topic.partitions = vec![OffsetCommitRequestPartition::default()];
                topic
            })
            .collect();
        decoded(ApiKey::OffsetCommit, 9, RequestKind::OffsetCommit(r))
    }

    fn refused(check: GroupCheck) -> (ResponseKind, i16) {
        match check {
            GroupCheck::Refuse {
                response,
                error,
                correlation_id,
                ..
            } => {
                assert_eq!(correlation_id, 9);
                (*response, error)
            }
            GroupCheck::Forward | GroupCheck::FilterListGroups(_) => panic!("forwarded"),
        }
    }

    #[test]
    fn without_an_authorizer_everything_is_forwarded() {
        let none = RequestAuthz::allow_all();
        assert!(matches!(check(&none, join("g")), GroupCheck::Forward));
        assert!(matches!(
            check(&none, commit("g", &["t"])),
            GroupCheck::Forward
        ));
    }

    #[test]
    fn a_join_without_read_on_the_group_is_answered_by_the_host() {
        assert!(matches!(
            check(&checks(), join("ok-g")),
            GroupCheck::Forward
        ));
        let (response, error) = refused(check(&checks(), join("g")));
        assert_eq!(error, GROUP_DENIED.code());
        let ResponseKind::JoinGroup(r) = response else {
            panic!("{response:?}")
        };
        assert_eq!((r.error_code, r.generation_id), (GROUP_DENIED.code(), -1));
    }

    #[test]
    fn a_commit_with_a_denied_topic_is_refused_whole() {
        assert!(matches!(
            check(&checks(), commit("ok-g", &["ok-a", "ok-b"])),
            GroupCheck::Forward
        ));
        let codes = |d| {
            let (response, _) = refused(check(&checks(), d));
            let ResponseKind::OffsetCommit(r) = response else {
                panic!("{response:?}")
            };
            r.topics
                .iter()
                .map(|t| t.partitions[0].error_code)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            codes(commit("ok-g", &["ok-a", "secret"])),
            [NOT_ATTEMPTED.code(), TOPIC_DENIED.code()]
        );
        assert_eq!(
            codes(commit("g", &["ok-a"])),
            [GROUP_DENIED.code()],
            "the group's refusal covers every partition"
        );
    }

    /// KIP-932 (coordinator ABI 3.7): ShareGroupHeartbeat needs Read on the group,
    /// ShareGroupDescribe Describe on each group, as Kafka's `KafkaApis`.
    #[test]
    fn share_group_requests_are_checked_on_their_groups() {
        let beat = |group: &str| {
            let mut r = kafka_protocol::messages::ShareGroupHeartbeatRequest::default();
            r.group_id = GroupId(StrBytes::from_string(group.into()));
            r.member_id = StrBytes::from_static_str("AAAAAAAAAAAAAAAAAAAAAA");
            decoded(
                ApiKey::ShareGroupHeartbeat,
                1,
                RequestKind::ShareGroupHeartbeat(r),
            )
        };
        assert!(matches!(
            check(&checks(), beat("ok-g")),
            GroupCheck::Forward
        ));
        let (response, error) = refused(check(&checks(), beat("g")));
        assert_eq!(error, GROUP_DENIED.code());
        let ResponseKind::ShareGroupHeartbeat(r) = response else {
            panic!("{response:?}")
        };
        assert_eq!(r.error_code, GROUP_DENIED.code());

        let describe = |groups: &[&str]| {
            let mut r = kafka_protocol::messages::ShareGroupDescribeRequest::default();
            r.group_ids = groups
                .iter()
                .map(|g| GroupId(StrBytes::from_string((*g).into())))
                .collect();
            decoded(
                ApiKey::ShareGroupDescribe,
                1,
                RequestKind::ShareGroupDescribe(r),
            )
        };
        assert!(matches!(
            check(&checks(), describe(&["ok-a", "ok-b"])),
            GroupCheck::Forward
        ));
        let (response, _) = refused(check(&checks(), describe(&["ok-a", "secret"])));
        let ResponseKind::ShareGroupDescribe(r) = response else {
            panic!("{response:?}")
        };
        let codes: Vec<i16> = r.groups.iter().map(|g| g.error_code).collect();
        assert_eq!(codes, [NOT_ATTEMPTED.code(), GROUP_DENIED.code()]);
    }
}
