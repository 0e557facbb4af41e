//! Metadata: brokers (this one), and topics with partitions led by this broker.
//!
//! Rules (Kafka protocol guide, Metadata): a null topic list (v1+) or an empty one (v0)
//! means every topic; v10+ requests may name topics by id. An unknown topic is created
//! when auto-creation is enabled and the request allows it (always for v0–v3), else
//! answered with `UNKNOWN_TOPIC_OR_PARTITION` (`UNKNOWN_TOPIC_ID` by id); a name that
//! breaks the naming rules gets `INVALID_TOPIC_EXCEPTION`.
//!
//! Auto-creation is bounded ([`crate::broker::auto_create`]): at most
//! `topics.auto_create_max_per_request` topics per request and
//! `topics.auto_create_per_sec` per second broker-wide, and no more partitions than the
//! open-file limit leaves room for; names beyond a bound are answered
//! `UNKNOWN_TOPIC_OR_PARTITION`, which clients retry.

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        metadata_response::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        },
        BrokerId, MetadataRequest, MetadataResponse, TopicName,
    },
    protocol::StrBytes,
};
use uuid::Uuid;

use crate::{
    broker::{auto_create::AutoCreateBudget, topics::validate_name, Broker, Topic, TopicError},
    server::reply::Reply,
};

/// Handles Metadata v0–v13.
pub fn handle(broker: &Arc<Broker>, version: i16, request: MetadataRequest) -> Reply {
    let allow_create = broker.auto_create() && (version < 4 || request.allow_auto_topic_creation);
    let mut budget = allow_create.then(|| broker.topics.auto_create_budget());
    let topics: Vec<MetadataResponseTopic> = match request.topics {
        None => all(broker, version),
        Some(list) if list.is_empty() && version == 0 => all(broker, version),
        Some(list) => list
            .into_iter()
            .map(|t| match t.name {
                Some(name) => by_name(broker, version, name.0.as_str(), budget.as_mut()),
                None => by_id(broker, version, t.topic_id),
            })
            .collect(),
    };
    let error = super::errors::first_error(topics.iter().map(|t| t.error_code));
    let mut response = MetadataResponse::default();
    response.brokers = brokers(broker);
    response.cluster_id = Some(StrBytes::from_string(broker.identity.reported_cluster_id()));
    response.controller_id = BrokerId(broker.identity.controller_id());
    response.topics = topics;
    Reply::new(response, error)
}

/// This broker, or in cluster mode every live broker, with racks where configured
/// (Metadata v1+ and DescribeCluster carry them).
pub(super) fn brokers(broker: &Arc<Broker>) -> Vec<MetadataResponseBroker> {
    let entry = |id: i32, host: &str, port: i32, rack: Option<&String>| {
        let mut node = MetadataResponseBroker::default();
        node.node_id = BrokerId(id);
        node.host = StrBytes::from_string(host.to_owned());
        node.port = port;
        node.rack = rack.map(|r| StrBytes::from_string(r.clone()));
        node
    };
    let me = &broker.identity.node;
    match broker.cluster() {
        None => vec![entry(me.id, &me.host, me.port, me.rack.as_ref())],
        Some(cluster) => {
            let view = cluster.view();
            let mut out: Vec<MetadataResponseBroker> = view
                .brokers
                .iter()
                .map(|(id, a)| entry(*id, &a.host, a.port, a.rack.as_ref()))
                .collect();
            if !view.brokers.contains_key(&me.id) {
                out.push(entry(me.id, &me.host, me.port, me.rack.as_ref()));
            }
            out
        }
    }
}

fn all(broker: &Arc<Broker>, version: i16) -> Vec<MetadataResponseTopic> {
    broker
        .topics
        .list()
        .iter()
        .map(|t| describe(broker, version, t))
        .collect()
}

/// A topic by name; an unknown one is created if `budget` (auto-creation allowed) has
/// room left.
fn by_name(
    broker: &Arc<Broker>,
    version: i16,
    name: &str,
    budget: Option<&mut AutoCreateBudget<'_>>,
) -> MetadataResponseTopic {
    if let Some(topic) = broker.topics.get(name) {
        return describe(broker, version, &topic);
    }
    let error = if let Err(e) = validate_name(name) {
        tracing::debug!("metadata: {e}");
        ResponseError::InvalidTopicException
    } else if crate::broker::topics::is_internal(name) {
        // Kafka's internal names are never auto-created (`topics::INTERNAL_TOPICS`).
        ResponseError::UnknownTopicOrPartition
    } else if let Some(budget) = budget {
        if budget.try_take() {
            let topics = &broker.config.topics;
            match broker.topics.create(
                name,
                i64::from(topics.default_partitions),
                topics.max_partitions,
            ) {
                Ok(topic) => return describe(broker, version, &topic),
                Err(TopicError::AlreadyExists(_)) => match broker.topics.get(name) {
                    Some(topic) => return describe(broker, version, &topic),
                    None => ResponseError::UnknownTopicOrPartition,
                },
                Err(e @ TopicError::PartitionLimit { .. }) => {
                    crate::warn_limited!(
                        "metadata.auto_create_partition_limit",
                        "auto-creating topic `{name}` refused: {e}"
                    );
                    ResponseError::UnknownTopicOrPartition
                }
                Err(e) => {
                    crate::warn_limited!(
                        "metadata.auto_create_failed",
                        "auto-creating topic `{name}`: {e}"
                    );
                    ResponseError::KafkaStorageError
                }
            }
        } else {
            crate::info_limited!(
                "metadata.auto_create_limited",
                "auto-creation limit reached (topics.auto_create_max_per_request, \
                 topics.auto_create_per_sec): `{name}` answered UNKNOWN_TOPIC_OR_PARTITION"
            );
            ResponseError::UnknownTopicOrPartition
        }
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    t.error_code = error.code();
    t
}

fn by_id(broker: &Arc<Broker>, version: i16, id: Uuid) -> MetadataResponseTopic {
    match broker.topics.get_by_id(id) {
        Some(topic) => describe(broker, version, &topic),
        None => {
            let mut t = MetadataResponseTopic::default();
            t.topic_id = id;
            t.error_code = ResponseError::UnknownTopicId.code();
            t
        }
    }
}

fn describe(broker: &Arc<Broker>, version: i16, topic: &Topic) -> MetadataResponseTopic {
    let me = BrokerId(broker.identity.node.id);
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
    if version >= 10 {
        t.topic_id = topic.id;
    }
    t.partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let mut mp = MetadataResponsePartition::default();
            mp.partition_index = p.index;
            let leader = match broker.cluster() {
                None => me,
                Some(c) => BrokerId(c.leader(&topic.name, p.index).unwrap_or(-1)),
            };
            mp.leader_id = leader;
            mp.leader_epoch = 0;
            if leader.0 < 0 {
                mp.error_code = ResponseError::LeaderNotAvailable.code();
            } else {
                mp.replica_nodes = vec![leader];
                mp.isr_nodes = vec![leader];
            }
            mp
        })
        .collect();
    t
}
