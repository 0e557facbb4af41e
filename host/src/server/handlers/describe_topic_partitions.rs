//! DescribeTopicPartitions (API 75, v0; KIP-966): topics with their partitions, paged by
//! a cursor, as Kafka 4.1's `DescribeTopicPartitionsRequestHandler` and
//! `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse` answer it. Kafka's
//! admin client describes topics by name with it (`describeTopics`).
//!
//! - An empty topic list means every topic; otherwise the topics named. Either way the
//!   topics are taken once each, in name order, from the cursor's topic on (names
//!   before it are skipped), the cursor's topic from the cursor's partition.
//! - At most `min(response_partition_limit, 2000)` partitions (at least 1) are
//!   listed; 2000 is Kafka's `max.request.partition.size.limit` default. When the limit
//!   stops the answer inside a topic, `next_cursor` names that topic and its first
//!   partition not listed; when it stops before a topic, that topic and partition 0.
//! - A named topic that does not exist: `UNKNOWN_TOPIC_OR_PARTITION`, or
//!   `INVALID_TOPIC_EXCEPTION` for a name that breaks the naming rules (with every topic,
//!   only existing topics are listed). These take no room of the limit.
//! - A cursor whose topic is not among the named topics, or whose partition is
//!   negative: every named topic is answered `INVALID_REQUEST` (Kafka's error response
//!   for the request).
//! - Each partition as Metadata reports it: standalone this broker leads it (replicas
//!   and ISR this broker); in cluster mode its leader is the broker it was placed on,
//!   or −1 while that broker is down or has no address on the listener the request came
//!   in on, when it is listed as an offline replica. Leader epoch 0, no eligible leader
//!   replicas (ELR is not used). Topic authorized operations are not computed (Kafka's
//!   "not requested" value, `i32::MIN`), since Drover has no authorizer yet.
//!
//! Bound: at most [`MAX_TOPICS`] named topics; beyond it every topic is answered
//! `INVALID_REQUEST` without looking anything up.

use std::collections::BTreeSet;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_topic_partitions_response::{
            Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
        },
        BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
    },
    protocol::StrBytes,
};
use uuid::Uuid;

use crate::{
    broker::{
        topics::{validate_name, INTERNAL_TOPICS},
        Partitions, Topic,
    },
    cluster::ClusterView,
    config::listeners::ListenerName,
    server::reply::Reply,
};

/// The most partitions one response lists (Kafka's `max.request.partition.size.limit`
/// default).
pub const MAX_RESPONSE_PARTITIONS: i32 = 2000;

/// The most topics one request may name.
pub const MAX_TOPICS: usize = 10_000;

/// Handles DescribeTopicPartitions v0 that came in on `listener`.
pub fn handle(
    partitions: Partitions<'_>,
    listener: &ListenerName,
    request: DescribeTopicPartitionsRequest,
) -> Reply {
    if request.topics.len() > MAX_TOPICS {
        crate::info_limited!(
            "describe_topic_partitions.too_many",
            topics = request.topics.len(),
            "DescribeTopicPartitions refused: more than {MAX_TOPICS} topics"
        );
        return refused(&request, ResponseError::InvalidRequest);
    }
    let fetch_all = request.topics.is_empty();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.as_str(), c.partition_index));
    let from = cursor.map_or("", |(name, _)| name);
    let names: BTreeSet<String> = if fetch_all {
        partitions
            .topics
            .list()
            .iter()
            .filter(|t| t.name.as_str() >= from)
            .map(|t| t.name.clone())
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.as_str())
            .filter(|name| *name >= from)
            .map(str::to_owned)
            .collect()
    };
    if let Some((name, index)) = cursor {
        // The cursor's topic must be one of those named, its partition valid.
        if (!fetch_all && !names.contains(name)) || index < 0 {
            return refused(&request, ResponseError::InvalidRequest);
        }
    }
    let placement = Placement::new(partitions, listener);
    let mut remaining = request
        .response_partition_limit
        .clamp(1, MAX_RESPONSE_PARTITIONS);
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in names {
        if remaining == 0 {
            // The limit stops the answer before this topic.
            response.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        let Some(topic) = partitions.topics.get(&name) else {
            if !fetch_all {
                let error = match validate_name(&name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                response
                    .topics
                    .push(topic_entry(&name, Uuid::nil(), error.code()));
            }
            continue;
        };
        let start = match cursor {
            Some((cursor_topic, index)) if cursor_topic == name => index,
            _ => 0,
        };
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let upper = count.min(start.saturating_add(remaining));
        let mut entry = topic_entry(&name, topic.id, 0);
        entry.partitions = (start..upper)
            .map(|index| placement.partition(&topic, index))
            .collect();
        let listed = i32::try_from(entry.partitions.len()).unwrap_or(i32::MAX);
        response.topics.push(entry);
        if upper < count {
            response.next_cursor = Some(cursor_at(&name, upper));
            break;
        }
        remaining -= listed;
    }
    let error = super::errors::first_error(response.topics.iter().map(|t| t.error_code));
    Reply::new(response, error)
}

/// Kafka's error response for the whole request: every topic named, with `error`.
fn refused(request: &DescribeTopicPartitionsRequest, error: ResponseError) -> Reply {
    let mut response = DescribeTopicPartitionsResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|t| {
            let mut entry = topic_entry(&t.name.0, Uuid::nil(), error.code());
            entry.is_internal = false;
            entry
        })
        .collect();
    Reply::new(response, error.code())
}

/// A topic's entry without partitions, with error code `error`.
fn topic_entry(name: &str, id: Uuid, error: i16) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.error_code = error;
    t.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    t.topic_id = id;
    t.is_internal = INTERNAL_TOPICS.contains(&name);
    t.topic_authorized_operations = i32::MIN;
    t
}

fn cursor_at(name: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(StrBytes::from_string(name.to_owned()));
    c.partition_index = partition;
    c
}

/// Who holds each partition, as this request sees it.
enum Placement {
    /// This broker (standalone) leads every partition.
    Standalone(BrokerId),
    /// Cluster mode: the topics' placement and the live brokers, and this broker.
    Cluster {
        view: ClusterView,
        me: i32,
        listener: ListenerName,
    },
}

impl Placement {
    fn new(partitions: Partitions<'_>, listener: &ListenerName) -> Placement {
        let me = partitions.identity.node.id;
        match partitions.identity.cluster() {
            None => Placement::Standalone(BrokerId(me)),
            Some(cluster) => Placement::Cluster {
                view: cluster.view(),
                me,
                listener: listener.clone(),
            },
        }
    }

    fn partition(&self, topic: &Topic, index: i32) -> DescribeTopicPartitionsResponsePartition {
        let mut p = DescribeTopicPartitionsResponsePartition::default();
        p.partition_index = index;
        p.leader_epoch = 0;
        p.eligible_leader_replicas = Some(Vec::new());
        p.last_known_elr = Some(Vec::new());
        match self {
            Placement::Standalone(me) => {
                p.leader_id = *me;
                p.replica_nodes = vec![*me];
                p.isr_nodes = vec![*me];
            }
            Placement::Cluster { view, me, listener } => {
                let placed = view
                    .topics
                    .get(&topic.name)
                    .and_then(|t| t.leaders.get(usize::try_from(index).ok()?))
                    .copied();
                let Some(placed) = placed else {
                    // Not placed yet as this broker's view has it.
                    p.leader_id = BrokerId(-1);
                    return p;
                };
                // This broker has the listener the request came in on.
                let reachable = placed == *me
                    || view
                        .brokers
                        .get(&placed)
                        .is_some_and(|b| b.endpoint(listener).is_some());
                p.leader_id = BrokerId(if reachable { placed } else { -1 });
                p.replica_nodes = vec![BrokerId(placed)];
                p.isr_nodes = vec![BrokerId(placed)];
                if !reachable {
                    p.offline_replicas = vec![BrokerId(placed)];
                }
            }
        }
        p
    }
}
