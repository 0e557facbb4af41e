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
//!   replicas (ELR is not used). Topic authorized operations (KIP-430) are always
//!   given, as Kafka does: every operation without an authorizer. Describe on a topic
//!   is required: with every topic, the others are left out; a named one gets
//!   TOPIC_AUTHORIZATION_FAILED.
//!
//! Bound: at most [`MAX_TOPICS`] named topics; beyond it every topic is answered
//! `INVALID_REQUEST` without looking anything up.

use crate::authz::{AclOperation, RequestAuthz, ResourceType};
use std::{collections::BTreeSet, ops::Range};

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
    authz: &RequestAuthz,
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
    let names: Vec<String> = if fetch_all {
        partitions
            .topics
            .list()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    // Kafka: Describe on each topic. With every topic, the others are left out quietly;
    // a named one gets TOPIC_AUTHORIZATION_FAILED, after the described ones.
    let describable = if fetch_all {
        authz.allowed_names_quietly(
            ResourceType::Topic,
            AclOperation::Describe,
            names.iter().map(String::as_str),
        )
    } else {
        authz.allowed_names(
            ResourceType::Topic,
            AclOperation::Describe,
            names.iter().map(String::as_str),
        )
    };
    let (names, refused_names): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| describable.contains(n));
    let limit = request.response_partition_limit;
    let lookup = |name: &str| {
        let topic = partitions.topics.get(name)?;
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        Some((topic, count))
    };
    let Some(plan) = plan(names, !fetch_all, cursor, limit, lookup) else {
        return refused(&request, ResponseError::InvalidRequest);
    };
    let placement = Placement::new(partitions, listener);
    let mut response = DescribeTopicPartitionsResponse::default();
    for (name, listed) in plan.topics {
        match listed {
            Some((topic, range)) => {
                let mut entry = topic_entry(&name, topic.id, 0);
                entry.topic_authorized_operations =
                    authz.authorized_operations(ResourceType::Topic, &name);
                entry.partitions = range
                    .map(|index| placement.partition(&topic, index))
                    .collect();
                response.topics.push(entry);
            }
            // With every topic, one deleted meanwhile is left out, as Kafka does.
            None if fetch_all => {}
            None => {
                let error = match validate_name(&name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                response
                    .topics
                    .push(topic_entry(&name, Uuid::nil(), error.code()));
            }
        }
    }
    let mut refused_names = refused_names;
    refused_names.sort();
    refused_names.dedup();
    for name in refused_names {
        response.topics.push(topic_entry(
            &name,
            Uuid::nil(),
            ResponseError::TopicAuthorizationFailed.code(),
        ));
    }
    response.next_cursor = plan.next.map(|(name, index)| cursor_at(&name, index));
    let error = super::errors::first_error(response.topics.iter().map(|t| t.error_code));
    Reply::new(response, error)
}

/// A topic and the range of its partitions an answer lists.
type Listed<T> = (T, Range<i32>);

/// What one answer lists: each topic (in name order) with the range of partitions
/// listed, or None when it does not exist; and the cursor of the next answer.
struct Plan<T> {
    topics: Vec<(String, Option<Listed<T>>)>,
    next: Option<(String, i32)>,
}

/// Kafka's paging (`KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`): the
/// topics of `names` taken once each in name order from the cursor's topic on, the
/// cursor's topic from its partition, until `limit` partitions (clamped to
/// 1..=[`MAX_RESPONSE_PARTITIONS`]) are listed. `lookup` gives a topic and its partition
/// count. None when the cursor is invalid: its partition is negative or, when the
/// topics were `named`, its topic is not one of them.
fn plan<T>(
    names: Vec<String>,
    named: bool,
    cursor: Option<(&str, i32)>,
    limit: i32,
    lookup: impl Fn(&str) -> Option<(T, i32)>,
) -> Option<Plan<T>> {
    let from = cursor.map_or("", |(name, _)| name);
    let names: BTreeSet<String> = names
        .into_iter()
        .filter(|name| name.as_str() >= from)
        .collect();
    if let Some((name, index)) = cursor {
        if (named && !names.contains(name)) || index < 0 {
            return None;
        }
    }
    let mut remaining = limit.clamp(1, MAX_RESPONSE_PARTITIONS);
    let mut plan = Plan {
        topics: Vec::new(),
        next: None,
    };
    for name in names {
        if remaining == 0 {
            // The limit stops the answer before this topic.
            plan.next = Some((name, 0));
            break;
        }
        let Some((topic, count)) = lookup(&name) else {
            plan.topics.push((name, None));
            continue;
        };
        let start = match cursor {
            Some((cursor_topic, index)) if cursor_topic == name => index,
            _ => 0,
        };
        let upper = count.min(start.saturating_add(remaining));
        remaining -= (upper - start).max(0);
        let stop = upper < count;
        plan.topics
            .push((name.clone(), Some((topic, start..upper))));
        if stop {
            plan.next = Some((name, upper));
            break;
        }
    }
    Some(plan)
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// Follows the cursor from the first answer to the last over topics of `counts`
    /// (name → partition count) asking for `names`; the pages as
    /// (name, listed partitions or None).
    fn follow(
        counts: &BTreeMap<String, i32>,
        names: &[String],
        named: bool,
        limit: i32,
    ) -> Vec<Vec<(String, Option<Range<i32>>)>> {
        let lookup = |name: &str| counts.get(name).map(|c| ((), *c));
        let mut pages = Vec::new();
        let mut cursor: Option<(String, i32)> = None;
        for _ in 0..10_000 {
            let at = cursor.as_ref().map(|(n, i)| (n.as_str(), *i));
            let plan = plan(names.to_vec(), named, at, limit, lookup).expect("valid cursor");
            pages.push(
                plan.topics
                    .into_iter()
                    .map(|(name, listed)| (name, listed.map(|((), r)| r)))
                    .collect(),
            );
            match plan.next {
                Some(next) => cursor = Some(next),
                None => return pages,
            }
        }
        panic!("the cursor never ran out");
    }

    #[test]
    fn the_limit_stops_inside_a_topic_and_before_the_next() {
        let counts: BTreeMap<String, i32> = [("a".to_owned(), 3), ("b".to_owned(), 2)].into();
        let names = vec!["b".to_owned(), "a".to_owned(), "zz".to_owned()];
        let pages = follow(&counts, &names, true, 2);
        assert_eq!(
            pages,
            vec![
                vec![("a".to_owned(), Some(0..2))],
                // a's last partition fills the page only partly; b does not fit.
                vec![("a".to_owned(), Some(2..3)), ("b".to_owned(), Some(0..1))],
                vec![("b".to_owned(), Some(1..2)), ("zz".to_owned(), None)],
            ]
        );
        // Exactly full: the next answer starts at the next topic's partition 0.
        let plan = plan(names.clone(), true, None, 3, |n: &str| {
            counts.get(n).map(|c| ((), *c))
        })
        .unwrap();
        assert_eq!(plan.next, Some(("b".to_owned(), 0)));
    }

    #[test]
    fn invalid_cursors_are_refused() {
        let lookup = |_: &str| Some(((), 1));
        let names = vec!["a".to_owned()];
        assert!(plan(names.clone(), true, Some(("b", 0)), 5, lookup).is_none());
        assert!(plan(names.clone(), true, Some(("a", -1)), 5, lookup).is_none());
        // With every topic the cursor's topic need not exist.
        assert!(plan(names.clone(), false, Some(("0", 0)), 5, lookup).is_some());
        // A cursor past the topic's partitions lists none of them.
        let past = plan(names, true, Some(("a", 9)), 5, lookup).unwrap();
        assert_eq!(past.topics[0].1.as_ref().map(|(_, r)| r.len()), Some(0));
        assert!(past.next.is_none());
    }

    proptest! {
        /// Following the cursor lists every partition of every topic asked for exactly
        /// once, in (name, partition) order, at most `limit` per answer, and every
        /// missing topic once.
        #[test]
        fn paging_lists_every_partition_once_in_order(
            counts in prop::collection::btree_map("[a-e]{1,2}", 1i32..30, 0..8),
            missing in prop::collection::vec("[f-g]{1,2}", 0..3),
            limit in -5i32..40,
            named in any::<bool>(),
        ) {
            let names: Vec<String> = if named {
                counts.keys().cloned().chain(missing.iter().cloned()).collect()
            } else {
                counts.keys().cloned().collect()
            };
            let pages = follow(&counts, &names, named, limit);
            let per_page = limit.clamp(1, MAX_RESPONSE_PARTITIONS);
            let mut listed = Vec::new();
            let mut absent = BTreeSet::new();
            for page in &pages {
                let mut on_page = 0;
                for (name, range) in page {
                    match range {
                        Some(r) => {
                            on_page += r.len();
                            listed.extend(r.clone().map(|i| (name.clone(), i)));
                        }
                        None => prop_assert!(absent.insert(name.clone())),
                    }
                }
                prop_assert!(on_page <= per_page as usize);
            }
            let expected: Vec<(String, i32)> = counts
                .iter()
                .flat_map(|(name, c)| (0..*c).map(move |i| (name.clone(), i)))
                .collect();
            prop_assert_eq!(listed, expected);
            let expected_absent: BTreeSet<String> = if named {
                missing.into_iter().filter(|m| !counts.contains_key(m)).collect()
            } else {
                BTreeSet::new()
            };
            prop_assert_eq!(absent, expected_absent);
        }
    }
}
