//! Metadata: brokers (this one), and topics with partitions led by this broker.
//!
//! Brokers are named by their address on the listener the request came in on (Kafka's
//! `MetadataCache.getAliveBrokerNodes(listenerName)`): in cluster mode a broker without
//! that listener is left out, and a partition it leads is answered with leader −1 and
//! `LISTENER_NOT_FOUND` (v6+; `LEADER_NOT_AVAILABLE` before), as Kafka does.
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
//!
//! **Authorization** (Kafka's `KafkaApis.handleTopicMetadataRequest`): Describe on each
//! topic. Every topic: only those the principal may describe are listed. Named topics
//! it may not describe: TOPIC_AUTHORIZATION_FAILED, whether they exist or not (by id:
//! the id back with a null name). An unknown topic that would be auto-created needs
//! Create on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. KIP-430:
//! `include_topic_authorized_operations` and (v8–10)
//! `include_cluster_authorized_operations` are answered when an authorizer is
//! configured (without one the answer is as before).

use std::{collections::BTreeSet, sync::Arc};

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
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::{auto_create::AutoCreateBudget, topics::validate_name, Broker, Topic, TopicError},
    config::listeners::ListenerName,
    server::reply::Reply,
};

/// What a Metadata answer is built with: the request's version and the live brokers
/// that have no address on its listener.
struct Ask<'a> {
    broker: &'a Arc<Broker>,
    version: i16,
    unreachable: BTreeSet<i32>,
    authz: &'a RequestAuthz,
    /// Answer each topic's KIP-430 authorized operations.
    topic_operations: bool,
}

/// Handles Metadata v0–v13 that came in on `listener`.
pub fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    listener: &ListenerName,
    version: i16,
    request: MetadataRequest,
) -> Reply {
    let allow_create = broker.auto_create() && (version < 4 || request.allow_auto_topic_creation);
    let cluster_operations = (authz.is_enabled()
        && (8..=10).contains(&version)
        && request.include_cluster_authorized_operations)
        .then(|| {
            if authz.allows_cluster(AclOperation::Describe) {
                authz.authorized_operations(
                    ResourceType::Cluster,
                    crate::authz::CLUSTER_RESOURCE_NAME,
                )
            } else {
                0
            }
        });
    let mut budget = allow_create.then(|| broker.topics.auto_create_budget());
    let unreachable = broker
        .cluster()
        .map(|c| {
            c.view()
                .brokers
                .iter()
                .filter(|(_, a)| a.endpoint(listener).is_none())
                .map(|(id, _)| *id)
                .collect()
        })
        .unwrap_or_default();
    let ask = Ask {
        broker,
        version,
        unreachable,
        authz,
        topic_operations: authz.is_enabled()
            && version >= 8
            && request.include_topic_authorized_operations,
    };
    // Describe on every named topic, asked once (by id: of the topic the id names).
    let named: Vec<String> = request
        .topics
        .iter()
        .flatten()
        .filter(|_| authz.is_enabled())
        .filter_map(|t| match &t.name {
            Some(name) => Some(name.0.to_string()),
            None => broker.topics.get_by_id(t.topic_id).map(|t| t.name.clone()),
        })
        .collect();
    let describable = authz.allowed_names(
        ResourceType::Topic,
        AclOperation::Describe,
        named.iter().map(String::as_str),
    );
    let topics: Vec<MetadataResponseTopic> = match request.topics {
        None => all(&ask),
        Some(list) if list.is_empty() && version == 0 => all(&ask),
        Some(list) => list
            .into_iter()
            .map(|t| match t.name {
                Some(name) if !describable.contains(name.0.as_str()) => {
                    let mut out = MetadataResponseTopic::default();
                    out.name = Some(name);
                    out.error_code = ResponseError::TopicAuthorizationFailed.code();
                    out
                }
                Some(name) => by_name(&ask, name.0.as_str(), budget.as_mut()),
                None => match broker.topics.get_by_id(t.topic_id) {
                    Some(topic) if !describable.contains(&topic.name) => {
                        let mut out = MetadataResponseTopic::default();
                        out.topic_id = t.topic_id;
                        out.error_code = ResponseError::TopicAuthorizationFailed.code();
                        out
                    }
                    _ => by_id(&ask, t.topic_id),
                },
            })
            .collect(),
    };
    let error = super::errors::first_error(topics.iter().map(|t| t.error_code));
    let mut response = MetadataResponse::default();
    response.brokers = brokers(broker, listener);
    response.cluster_id = Some(StrBytes::from_string(broker.identity.reported_cluster_id()));
    response.controller_id = BrokerId(broker.identity.controller_id());
    response.topics = topics;
    if let Some(operations) = cluster_operations {
        response.cluster_authorized_operations = operations;
    }
    Reply::new(response, error)
}

/// This broker, or in cluster mode every live broker that has `listener`, at its
/// address on `listener`, with racks where configured (Metadata v1+ and
/// DescribeCluster carry them).
pub(super) fn brokers(
    broker: &Arc<Broker>,
    listener: &ListenerName,
) -> Vec<MetadataResponseBroker> {
    let entry = |id: i32, host: &str, port: i32, rack: Option<&String>| {
        let mut node = MetadataResponseBroker::default();
        node.node_id = BrokerId(id);
        node.host = StrBytes::from_string(host.to_owned());
        node.port = port;
        node.rack = rack.map(|r| StrBytes::from_string(r.clone()));
        node
    };
    let me = &broker.identity.node;
    // The request came in on `listener`, so this broker has it.
    let mine = me.endpoint(listener).unwrap_or(crate::cluster::Endpoint {
        host: me.host.clone(),
        port: me.port,
    });
    match broker.cluster() {
        None => vec![entry(me.id, &mine.host, mine.port, me.rack.as_ref())],
        Some(cluster) => {
            let view = cluster.view();
            let mut out: Vec<MetadataResponseBroker> = view
                .brokers
                .iter()
                .filter_map(|(id, a)| {
                    let at = a.endpoint(listener)?;
                    Some(entry(*id, &at.host, at.port, a.rack.as_ref()))
                })
                .collect();
            if !view.brokers.contains_key(&me.id) {
                out.push(entry(me.id, &mine.host, mine.port, me.rack.as_ref()));
            }
            out
        }
    }
}

fn all(ask: &Ask<'_>) -> Vec<MetadataResponseTopic> {
    let topics = ask.broker.topics.list();
    let describable = ask.authz.allowed_names_quietly(
        ResourceType::Topic,
        AclOperation::Describe,
        topics.iter().map(|t| t.name.as_str()),
    );
    topics
        .iter()
        .filter(|t| describable.contains(&t.name))
        .map(|t| describe(ask, t))
        .collect()
}

/// A topic by name; an unknown one is created if `budget` (auto-creation allowed) has
/// room left.
fn by_name(
    ask: &Ask<'_>,
    name: &str,
    budget: Option<&mut AutoCreateBudget<'_>>,
) -> MetadataResponseTopic {
    let broker = ask.broker;
    if let Some(topic) = broker.topics.get(name) {
        return describe(ask, &topic);
    }
    let error = if let Err(e) = validate_name(name) {
        tracing::debug!("metadata: {e}");
        ResponseError::InvalidTopicException
    } else if crate::broker::topics::is_internal(name) {
        // Kafka's internal names are never auto-created (`topics::INTERNAL_TOPICS`).
        ResponseError::UnknownTopicOrPartition
    } else if budget.is_some()
        && !ask.authz.allows_quietly(
            ResourceType::Cluster,
            crate::authz::CLUSTER_RESOURCE_NAME,
            AclOperation::Create,
        )
        && !ask
            .authz
            .allows(ResourceType::Topic, name, AclOperation::Create)
    {
        ResponseError::TopicAuthorizationFailed
    } else if let Some(budget) = budget {
        if budget.try_take() {
            let topics = &broker.config.topics;
            match broker.topics.create(
                name,
                i64::from(topics.default_partitions),
                topics.max_partitions,
            ) {
                Ok(topic) => return describe(ask, &topic),
                Err(TopicError::AlreadyExists(_)) => match broker.topics.get(name) {
                    Some(topic) => return describe(ask, &topic),
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

fn by_id(ask: &Ask<'_>, id: Uuid) -> MetadataResponseTopic {
    match ask.broker.topics.get_by_id(id) {
        Some(topic) => describe(ask, &topic),
        None => {
            let mut t = MetadataResponseTopic::default();
            t.topic_id = id;
            t.error_code = ResponseError::UnknownTopicId.code();
            t
        }
    }
}

fn describe(ask: &Ask<'_>, topic: &Topic) -> MetadataResponseTopic {
    let (broker, version) = (ask.broker, ask.version);
    let me = BrokerId(broker.identity.node.id);
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
    if version >= 10 {
        t.topic_id = topic.id;
    }
    if ask.topic_operations {
        t.topic_authorized_operations = ask
            .authz
            .authorized_operations(ResourceType::Topic, &topic.name);
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
            mp.leader_epoch = 0;
            if ask.unreachable.contains(&leader.0) {
                mp.leader_id = BrokerId(-1);
                mp.error_code = if version >= 6 {
                    ResponseError::ListenerNotFound.code()
                } else {
                    ResponseError::LeaderNotAvailable.code()
                };
            } else if leader.0 < 0 {
                mp.leader_id = leader;
                mp.error_code = ResponseError::LeaderNotAvailable.code();
            } else {
                mp.leader_id = leader;
                mp.replica_nodes = vec![leader];
                mp.isr_nodes = vec![leader];
            }
            mp
        })
        .collect();
    t
}
