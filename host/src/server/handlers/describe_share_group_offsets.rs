//! DescribeShareGroupOffsets (API 90, v0; KIP-932): each share-partition's start offset
//! (SPSO: below it every record is acknowledged or archived), as
//! `kafka-share-groups.sh --describe --offsets` and the Admin client's
//! `listShareGroupOffsets` read it.
//!
//! - Read from the active offset store, where every change of a share-partition is
//!   written before it is answered ([`crate::offsets::share_state`]), so any broker —
//!   the group's coordinator, to which clients send it — answers what the partition
//!   leaders last made durable.
//! - Named topics: each named partition; one with no share state yet has start offset
//!   −1 (not initialised, as Kafka answers); an unknown topic's partitions, and
//!   partitions the topic does not have, are UNKNOWN_TOPIC_OR_PARTITION. Null topics: every share-partition of the group with
//!   state, of topics that still exist (a topic re-created under its name is not the
//!   one its old state was for).
//! - Authorization (Kafka's `handleDescribeShareGroupOffsetsRequest`): Describe on the
//!   group, else GROUP_AUTHORIZATION_FAILED for it; Describe on each named topic, else
//!   its partitions are TOPIC_AUTHORIZATION_FAILED; with null topics the topics the
//!   principal may not describe are left out.
//! - No offset store, or one that keeps no share state: the group's error is
//!   COORDINATOR_NOT_AVAILABLE with the reason.
//!
//! Bounds: at most [`MAX_GROUPS`] groups and [`MAX_PARTITIONS`] partitions per
//! request (INVALID_REQUEST for each group beyond), and null topics answer at most
//! [`MAX_PARTITIONS`] share-partitions of a group.

use std::{collections::BTreeMap, sync::Arc};

use drover_abi::{ShareStateRecord, TopicPartitions};
use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup,
        describe_share_group_offsets_response::{
            DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
            DescribeShareGroupOffsetsResponseTopic,
        },
        DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
    },
    protocol::StrBytes,
};

use super::errors::first_error;
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::Broker,
    server::reply::Reply,
};

/// The most groups one request may name.
pub const MAX_GROUPS: usize = 1000;
/// The most partitions one request may name in all, and one group's answer to null
/// topics may list.
pub const MAX_PARTITIONS: usize = 10_000;

/// Handles DescribeShareGroupOffsets v0 (on the blocking pool: it reads the store).
pub fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    request: DescribeShareGroupOffsetsRequest,
) -> Reply {
    let named: usize = request
        .groups
        .iter()
        .flat_map(|g| g.topics.iter().flatten())
        .map(|t| t.partitions.len())
        .sum();
    let too_many = if request.groups.len() > MAX_GROUPS {
        Some(format!(
            "{} groups; at most {MAX_GROUPS}",
            request.groups.len()
        ))
    } else if named > MAX_PARTITIONS {
        Some(format!("{named} partitions; at most {MAX_PARTITIONS}"))
    } else {
        None
    };
    let groups: Vec<_> = request
        .groups
        .into_iter()
        .map(|g| {
            let id = g.group_id.clone();
            let outcome = match &too_many {
                Some(why) => Err((ResponseError::InvalidRequest, why.clone())),
                None => describe(broker, authz, &g),
            };
            let mut out = DescribeShareGroupOffsetsResponseGroup::default();
            out.group_id = id;
            match outcome {
                Ok(topics) => out.topics = topics,
                Err((code, message)) => {
                    out.error_code = code.code();
                    out.error_message = Some(StrBytes::from_string(message));
                }
            }
            out
        })
        .collect();
    let error = first_error(groups.iter().map(|g| g.error_code));
    let mut response = DescribeShareGroupOffsetsResponse::default();
    response.groups = groups;
    Reply::new(response, error)
}

type Refusal = (ResponseError, String);

fn describe(
    broker: &Broker,
    authz: &RequestAuthz,
    group: &DescribeShareGroupOffsetsRequestGroup,
) -> Result<Vec<DescribeShareGroupOffsetsResponseTopic>, Refusal> {
    let id = group.group_id.as_str();
    if !authz.allows(ResourceType::Group, id, AclOperation::Describe) {
        let e = ResponseError::GroupAuthorizationFailed;
        return Err((e, e.to_string()));
    }
    let stores = broker.offsets().ok_or_else(|| {
        (
            ResponseError::CoordinatorNotAvailable,
            "no offset store is open".to_owned(),
        )
    })?;
    let unavailable = |e: crate::offsets::share_state::ShareStateError| {
        (ResponseError::CoordinatorNotAvailable, e.to_string())
    };
    match &group.topics {
        Some(topics) => {
            let mut out = Vec::with_capacity(topics.len());
            for t in topics {
                let name = t.topic_name.as_str();
                let topic = broker.topics.get(name);
                let refused = match &topic {
                    None => Some(ResponseError::UnknownTopicOrPartition),
                    Some(_) if !authz.allows(ResourceType::Topic, name, AclOperation::Describe) => {
                        Some(ResponseError::TopicAuthorizationFailed)
                    }
                    Some(_) => None,
                };
                let count = topic.as_ref().map_or(0, |t| t.partitions.len());
                let (topic_id, saved) = match (refused, topic) {
                    (None, Some(topic)) => {
                        let asked = [TopicPartitions {
                            topic: name.into(),
                            partitions: t.partitions.clone().into(),
                        }];
                        let saved = stores.read_share_state(id, &asked).map_err(unavailable)?;
                        let of_this_topic = saved
                            .into_iter()
                            .filter(|r| r.topic_id == *topic.id.as_bytes() || r.topic_id == [0; 16])
                            .map(|r| (r.partition, r.start_offset))
                            .collect::<BTreeMap<_, _>>();
                        (topic.id, of_this_topic)
                    }
                    _ => (Default::default(), BTreeMap::new()),
                };
                let partitions = t
                    .partitions
                    .iter()
                    .map(|&p| match refused {
                        Some(e) => partition(p, -1, Some(e)),
                        None if p < 0 || p as usize >= count => {
                            partition(p, -1, Some(ResponseError::UnknownTopicOrPartition))
                        }
                        None => partition(p, saved.get(&p).copied().unwrap_or(-1), None),
                    })
                    .collect();
                out.push(topic_entry(t.topic_name.clone(), topic_id, partitions));
            }
            Ok(out)
        }
        None => {
            let saved = stores
                .group_share_state(id, MAX_PARTITIONS)
                .map_err(unavailable)?;
            let mut by_topic: BTreeMap<String, Vec<&ShareStateRecord>> = BTreeMap::new();
            for r in &saved {
                by_topic.entry(r.topic.to_string()).or_default().push(r);
            }
            Ok(by_topic
                .into_iter()
                .filter_map(|(name, records)| {
                    let topic = broker.topics.get(&name)?;
                    if !authz.allows_quietly(ResourceType::Topic, &name, AclOperation::Describe) {
                        return None;
                    }
                    let partitions: Vec<_> = records
                        .into_iter()
                        .filter(|r| r.topic_id == *topic.id.as_bytes() || r.topic_id == [0; 16])
                        .map(|r| partition(r.partition, r.start_offset, None))
                        .collect();
                    (!partitions.is_empty()).then(|| {
                        topic_entry(TopicName(StrBytes::from_string(name)), topic.id, partitions)
                    })
                })
                .collect())
        }
    }
}

fn partition(
    index: i32,
    start_offset: i64,
    error: Option<ResponseError>,
) -> DescribeShareGroupOffsetsResponsePartition {
    let mut p = DescribeShareGroupOffsetsResponsePartition::default();
    p.partition_index = index;
    p.start_offset = start_offset;
    p.leader_epoch = -1;
    if let Some(error) = error {
        p.error_code = error.code();
        p.error_message = Some(StrBytes::from_string(error.to_string()));
    }
    p
}

fn topic_entry(
    name: TopicName,
    id: uuid::Uuid,
    partitions: Vec<DescribeShareGroupOffsetsResponsePartition>,
) -> DescribeShareGroupOffsetsResponseTopic {
    let mut t = DescribeShareGroupOffsetsResponseTopic::default();
    t.topic_name = name;
    t.topic_id = id;
    t.partitions = partitions;
    t
}
