//! The offset APIs' checks (OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete),
//! each as Kafka's `KafkaApis` handler: a refused group refuses the request; refused
//! topics are answered by the host and merged into the coordinator's answer to the
//! allowed ones (module docs of [`super`]).

use std::collections::{HashMap, VecDeque};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
        offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic},
        offset_fetch_response::{
            OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
            OffsetFetchResponseTopic, OffsetFetchResponseTopics,
        },
        txn_offset_commit_response::{
            TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
        },
        GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
        OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, RequestKind, ResponseKind,
        TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    },
};

use super::{split, Checking, GroupCheck, GROUP_DENIED, TOPIC_DENIED};
use crate::authz::{AclOperation, RequestAuthz, ResourceType};

/// Response topics (`$topic` of `$part`), one partition per partition of each request
/// topic in `$topics`, each with `$error`.
macro_rules! refused_topics {
    ($topics:expr, $topic:ty, $part:ty, $error:expr) => {
        $topics
            .iter()
            .map(|t| {
                let mut topic = <$topic>::default();
                topic.name = t.name.clone();
                topic.partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut part = <$part>::default();
                        part.partition_index = p.partition_index;
                        part.error_code = $error.code();
                        part
                    })
                    .collect();
                topic
            })
            .collect::<Vec<_>>()
    };
}

/// Read on each topic of `$r.topics` (a `RequestKind::$kind`, answered by `$response`
/// of `$topic`s of `$part`s): forwarded when all are allowed; answered by the host when
/// none is; else the allowed topics are handed on and the refused ones
/// (TOPIC_AUTHORIZATION_FAILED) put before the coordinator's, as Kafka's response
/// builders do.
macro_rules! split_topics {
    ($c:expr, $r:ident, $kind:ident, $response:ident, $topic:ty, $part:ty) => {{
        let names = $c.authz.allowed_names(
            ResourceType::Topic,
            AclOperation::Read,
            $r.topics.iter().map(|t| t.name.0.as_str()),
        );
        if $r.topics.iter().all(|t| names.contains(&t.name)) {
            return GroupCheck::Forward;
        }
        let (allowed, denied) = split(std::mem::take(&mut $r.topics), |t| names.contains(&t.name));
        let refused = refused_topics!(denied, $topic, $part, TOPIC_DENIED);
        if allowed.is_empty() {
            let mut out = $response::default();
            out.topics = refused;
            return $c.refuse(out, TOPIC_DENIED);
        }
        $r.topics = allowed;
        $c.partly(RequestKind::$kind($r), move |answer| {
            if let ResponseKind::$kind(a) = answer {
                a.topics.splice(0..0, refused);
            }
        })
    }};
}

/// OffsetCommit: Read on the group, then on each topic.
pub(super) fn commit(c: &Checking, mut r: OffsetCommitRequest) -> GroupCheck {
    if !c.group(&r.group_id, AclOperation::Read) {
        let mut out = OffsetCommitResponse::default();
        out.topics = refused_topics!(
            r.topics,
            OffsetCommitResponseTopic,
            OffsetCommitResponsePartition,
            GROUP_DENIED
        );
        return c.refuse(out, GROUP_DENIED);
    }
    split_topics!(
        c,
        r,
        OffsetCommit,
        OffsetCommitResponse,
        OffsetCommitResponseTopic,
        OffsetCommitResponsePartition
    )
}

/// TxnOffsetCommit: Write on the transactional id, Read on the group, then on each
/// topic.
pub(super) fn txn_commit(c: &Checking, mut r: TxnOffsetCommitRequest) -> GroupCheck {
    let whole = if !c.authz.allows(
        ResourceType::TransactionalId,
        &r.transactional_id,
        AclOperation::Write,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !c.group(&r.group_id, AclOperation::Read) {
        Some(GROUP_DENIED)
    } else {
        None
    };
    if let Some(error) = whole {
        let mut out = TxnOffsetCommitResponse::default();
        out.topics = refused_topics!(
            r.topics,
            TxnOffsetCommitResponseTopic,
            TxnOffsetCommitResponsePartition,
            error
        );
        return c.refuse(out, error);
    }
    split_topics!(
        c,
        r,
        TxnOffsetCommit,
        TxnOffsetCommitResponse,
        TxnOffsetCommitResponseTopic,
        TxnOffsetCommitResponsePartition
    )
}

/// OffsetDelete: Delete on the group (else the request's error), then Read on each
/// topic.
pub(super) fn delete(c: &Checking, mut r: OffsetDeleteRequest) -> GroupCheck {
    if !c.group(&r.group_id, AclOperation::Delete) {
        let mut out = OffsetDeleteResponse::default();
        out.error_code = GROUP_DENIED.code();
        return c.refuse(out, GROUP_DENIED);
    }
    split_topics!(
        c,
        r,
        OffsetDelete,
        OffsetDeleteResponse,
        OffsetDeleteResponseTopic,
        OffsetDeleteResponsePartition
    )
}

/// OffsetFetch response topics (`$topic` of `$part`) for request topics `$topics`, each
/// partition with no offset and `$error`.
macro_rules! unfetched_topics {
    ($topics:expr, $topic:ty, $part:ty, $error:expr) => {
        IntoIterator::into_iter($topics)
            .map(|t| {
                let mut topic = <$topic>::default();
                topic.name = t.name.clone();
                topic.partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&i| {
                        let mut part = <$part>::default();
                        part.partition_index = i;
                        part.committed_offset = -1;
                        part.committed_leader_epoch = -1;
                        part.error_code = $error.code();
                        part
                    })
                    .collect();
                topic
            })
            .collect::<Vec<_>>()
    };
}

/// The names among `names` the principal may describe.
fn describable<'n>(
    authz: &RequestAuthz,
    names: impl IntoIterator<Item = &'n str>,
) -> crate::authz::Allowed {
    authz.allowed_names(ResourceType::Topic, AclOperation::Describe, names)
}

/// OffsetFetch v0–7 (one group): Describe on the group, then on each named topic; a
/// fetch of all the group's offsets answers only the topics the principal may describe
/// (Kafka's `fetchAllOffsetsForGroup`). Refused topics follow the coordinator's, unless
/// it answered with an error (Kafka's `fetchOffsetsForGroup`).
pub(super) fn fetch_one(c: &Checking, mut r: OffsetFetchRequest) -> GroupCheck {
    if !c.group(&r.group_id, AclOperation::Describe) {
        let mut out = OffsetFetchResponse::default();
        out.error_code = GROUP_DENIED.code();
        out.topics = unfetched_topics!(
            r.topics.iter().flatten(),
            OffsetFetchResponseTopic,
            OffsetFetchResponsePartition,
            GROUP_DENIED
        );
        return c.refuse(out, GROUP_DENIED);
    }
    let Some(topics) = r.topics.take() else {
        let authz = c.authz.clone();
        return c.edited(move |answer| {
            if let ResponseKind::OffsetFetch(a) = answer {
                let names = describable(&authz, a.topics.iter().map(|t| t.name.0.as_str()));
                a.topics.retain(|t| names.contains(&t.name));
            }
        });
    };
    let names = describable(c.authz, topics.iter().map(|t| t.name.0.as_str()));
    if topics.iter().all(|t| names.contains(&t.name)) {
        return GroupCheck::Forward;
    }
    let (allowed, denied) = split(topics, |t| names.contains(&t.name));
    let refused = unfetched_topics!(
        &denied,
        OffsetFetchResponseTopic,
        OffsetFetchResponsePartition,
        TOPIC_DENIED
    );
    if allowed.is_empty() {
        let mut out = OffsetFetchResponse::default();
        out.topics = refused;
        return c.refuse(out, TOPIC_DENIED);
    }
    r.topics = Some(allowed);
    c.partly(RequestKind::OffsetFetch(r), move |answer| {
        if let ResponseKind::OffsetFetch(a) = answer {
            if a.error_code == 0 {
                a.topics.extend(refused);
            }
        }
    })
}

/// One group of an OffsetFetch v8+ request, as checked.
enum Fetching {
    /// Answered by the host (the group refused, or every named topic).
    Answered(OffsetFetchResponseGroup),
    /// Handed on; the coordinator's answer for it gets `refused` after its topics and,
    /// for a fetch of all its offsets (`all`), keeps only the topics the principal may
    /// describe.
    Asked {
        group_id: GroupId,
        all: bool,
        refused: Vec<OffsetFetchResponseTopics>,
    },
}

/// OffsetFetch v8+ (several groups): each group as [`fetch_one`]'s; the answer lists
/// the groups in request order (Kafka's `handleOffsetFetchRequestFromCoordinator`).
pub(super) fn fetch_groups(c: &Checking, mut r: OffsetFetchRequest) -> GroupCheck {
    let mut plan = Vec::with_capacity(r.groups.len());
    let mut asked = Vec::with_capacity(r.groups.len());
    for mut g in std::mem::take(&mut r.groups) {
        let mut answered = OffsetFetchResponseGroup::default();
        answered.group_id = g.group_id.clone();
        if !c.group(&g.group_id, AclOperation::Describe) {
            answered.error_code = GROUP_DENIED.code();
            plan.push(Fetching::Answered(answered));
            continue;
        }
        let (all, refused) = match g.topics.take() {
            None => (true, Vec::new()),
            Some(topics) => {
                let names = describable(c.authz, topics.iter().map(|t| t.name.0.as_str()));
                let (allowed, denied) = split(topics, |t| names.contains(&t.name));
                let refused = unfetched_topics!(
                    &denied,
                    OffsetFetchResponseTopics,
                    OffsetFetchResponsePartitions,
                    TOPIC_DENIED
                );
                if allowed.is_empty() && !refused.is_empty() {
                    answered.topics = refused;
                    plan.push(Fetching::Answered(answered));
                    continue;
                }
                g.topics = Some(allowed);
                (false, refused)
            }
        };
        plan.push(Fetching::Asked {
            group_id: g.group_id.clone(),
            all,
            refused,
        });
        asked.push(g);
    }
    let unchanged = plan
        .iter()
        .all(|p| matches!(p, Fetching::Asked { refused, .. } if refused.is_empty()));
    let filters = plan
        .iter()
        .any(|p| matches!(p, Fetching::Asked { all: true, .. }));
    if unchanged && !filters {
        return GroupCheck::Forward;
    }
    if asked.is_empty() {
        let mut out = OffsetFetchResponse::default();
        let error = if plan
            .iter()
            .any(|p| matches!(p, Fetching::Answered(g) if g.error_code == GROUP_DENIED.code()))
        {
            GROUP_DENIED
        } else {
            TOPIC_DENIED
        };
        out.groups = plan
            .into_iter()
            .filter_map(|p| match p {
                Fetching::Answered(g) => Some(g),
                Fetching::Asked { .. } => None,
            })
            .collect();
        return c.refuse(out, error);
    }
    let authz = filters.then(|| c.authz.clone());
    let edit = move |answer: &mut ResponseKind| {
        if let ResponseKind::OffsetFetch(a) = answer {
            merge_groups(a, plan, authz.as_ref());
        }
    };
    if unchanged {
        return c.edited(edit);
    }
    r.groups = asked;
    c.partly(RequestKind::OffsetFetch(r), edit)
}

/// The groups of the coordinator's OffsetFetch v8+ answer `a` merged with `plan` in
/// request order; `authz` filters the fetches of all offsets. A group the coordinator
/// answered that the plan does not name (none should) is kept, last.
fn merge_groups(a: &mut OffsetFetchResponse, plan: Vec<Fetching>, authz: Option<&RequestAuthz>) {
    let mut by_id: HashMap<GroupId, VecDeque<OffsetFetchResponseGroup>> = HashMap::new();
    for g in std::mem::take(&mut a.groups) {
        by_id.entry(g.group_id.clone()).or_default().push_back(g);
    }
    for p in plan {
        match p {
            Fetching::Answered(g) => a.groups.push(g),
            Fetching::Asked {
                group_id,
                all,
                refused,
            } => {
                let Some(mut g) = by_id.get_mut(&group_id).and_then(VecDeque::pop_front) else {
                    continue;
                };
                if g.error_code == 0 {
                    if let (true, Some(authz)) = (all, authz) {
                        let names = describable(authz, g.topics.iter().map(|t| t.name.0.as_str()));
                        g.topics.retain(|t| names.contains(&t.name));
                    }
                    g.topics.extend(refused);
                }
                a.groups.push(g);
            }
        }
    }
    a.groups.extend(by_id.into_values().flatten());
}
