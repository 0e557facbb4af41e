//! CreateTopics. A single broker: replication factor −1 or 1; explicit replica
//! assignments must name only this broker; −1 partitions means
//! `topics.default_partitions`. Topic-level configs are the ones DescribeConfigs lists
//! ([`crate::broker::topic_config::KEYS`]), checked as AlterConfigs checks them
//! (`INVALID_CONFIG` with Kafka's message for an unknown name, a bad value or
//! `cleanup.policy=compact`; a null value or a name given twice is `INVALID_REQUEST`),
//! stored with the topic, and listed in the v5+ response with their sources. Partitions
//! beyond what the broker's open-file limit leaves room for are refused with
//! `POLICY_VIOLATION` and a message naming the limit.

use std::{collections::HashMap, sync::Arc};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        create_topics_response::{CreatableTopicConfigs, CreatableTopicResult},
        CreateTopicsRequest, CreateTopicsResponse,
    },
    protocol::StrBytes,
};

use super::errors::first_error;
use crate::{
    broker::{
        topic_config::{self, Overrides},
        topics::validate_name,
        Broker, TopicError,
    },
    server::reply::Reply,
};

/// Handles CreateTopics v2–v7.
///
/// Authorization (Kafka's `KafkaApis.handleCreateTopicsRequest`): Create on the cluster
/// or on each topic, else TOPIC_AUTHORIZATION_FAILED; the created topic's configs
/// (v5+) only with DescribeConfigs on it, else `topic_config_error_code`
/// TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    broker: &Arc<Broker>,
    authz: &crate::authz::RequestAuthz,
    version: i16,
    request: CreateTopicsRequest,
) -> Reply {
    use crate::authz::{AclOperation, Allowed, ResourceType};
    let config = &broker.config.topics;
    let creatable = if authz.allows_quietly(
        ResourceType::Cluster,
        crate::authz::CLUSTER_RESOURCE_NAME,
        AclOperation::Create,
    ) {
        Allowed::All
    } else {
        authz.allowed_names(
            ResourceType::Topic,
            AclOperation::Create,
            request.topics.iter().map(|t| t.name.0.as_str()),
        )
    };
    let configs_visible = authz.allowed_names_quietly(
        ResourceType::Topic,
        AclOperation::DescribeConfigs,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.0.to_string()).or_default() += 1;
    }
    let results: Vec<CreatableTopicResult> = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let mut r = CreatableTopicResult::default();
            r.name = t.name.clone();
            r.num_partitions = -1;
            r.replication_factor = -1;
            let partitions = if t.num_partitions == -1 {
                if t.assignments.is_empty() {
                    i64::from(config.default_partitions)
                } else {
                    t.assignments.len() as i64
                }
            } else {
                i64::from(t.num_partitions)
            };
            let outcome: Result<(), (ResponseError, String)> = (|| {
                if seen[&name] > 1 {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("topic `{name}` appears more than once"),
                    ));
                }
                if !creatable.contains(&name) {
                    return Err((
                        ResponseError::TopicAuthorizationFailed,
                        "Authorization failed.".into(),
                    ));
                }
                validate_name(&name)
                    .map_err(|e| (ResponseError::InvalidTopicException, e.to_string()))?;
                if crate::broker::topics::is_internal(&name) {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("Creation of internal topic {name} is prohibited."),
                    ));
                }
                if !matches!(t.replication_factor, -1 | 1) {
                    return Err((
                        ResponseError::InvalidReplicationFactor,
                        format!(
                            "replication factor {} is larger than the 1 available broker",
                            t.replication_factor
                        ),
                    ));
                }
                if t.assignments
                    .iter()
                    .any(|a| a.broker_ids.iter().any(|b| b.0 != broker.identity.node.id))
                {
                    return Err((
                        ResponseError::InvalidReplicaAssignment,
                        "assignments may only name this broker".into(),
                    ));
                }
                let overrides = overrides(&t.configs)?;
                if partitions < 1 || partitions > i64::from(config.max_partitions) {
                    return Err((
                        ResponseError::InvalidPartitions,
                        format!(
                            "{partitions} partitions: expected 1..={}",
                            config.max_partitions
                        ),
                    ));
                }
                if broker.topics.get(&name).is_some() {
                    return Err((
                        ResponseError::TopicAlreadyExists,
                        format!("topic `{name}` already exists"),
                    ));
                }
                if request.validate_only {
                    return Ok(());
                }
                // Cluster mode: the topic is placed and recorded in ZooKeeper first;
                // every broker then keeps a local copy with the same id.
                let id = match broker.cluster() {
                    None => uuid::Uuid::new_v4(),
                    Some(cluster) => {
                        match cluster.create_topic(&name, partitions as u32, &overrides) {
                            Ok(placement) => placement.id,
                            Err(e) => return Err(super::errors::cluster_refusal(e)),
                        }
                    }
                };
                match broker.topics.create_with_configs(
                    &name,
                    id,
                    partitions,
                    config.max_partitions,
                    &overrides,
                ) {
                    Ok(topic) => {
                        r.topic_id = topic.id;
                        Ok(())
                    }
                    Err(TopicError::AlreadyExists(_)) => Err((
                        ResponseError::TopicAlreadyExists,
                        format!("topic `{name}` already exists"),
                    )),
                    // The broker-wide partition limit (open files): a policy of this
                    // broker, not a fault; the message says which limit.
                    Err(e @ TopicError::PartitionLimit { .. }) => {
                        Err((ResponseError::PolicyViolation, e.to_string()))
                    }
                    Err(e) => Err((ResponseError::KafkaStorageError, e.to_string())),
                }
            })();
            match outcome {
                Ok(()) => {
                    if version >= 5 {
                        r.num_partitions = partitions as i32;
                        r.replication_factor = 1;
                        if configs_visible.contains(&name) {
                            r.configs = Some(described(broker, &name));
                        } else {
                            r.topic_config_error_code =
                                ResponseError::TopicAuthorizationFailed.code();
                        }
                    }
                }
                Err((code, message)) => {
                    r.error_code = code.code();
                    r.error_message = Some(StrBytes::from_string(message));
                }
            }
            if version < 7 {
                r.topic_id = uuid::Uuid::nil();
            }
            r
        })
        .collect();
    let error = first_error(results.iter().map(|r| r.error_code));
    let mut response = CreateTopicsResponse::default();
    response.topics = results;
    Reply::new(response, error)
}

/// The overrides CreateTopics `configs` ask for, validated.
fn overrides(
    configs: &[kafka_protocol::messages::create_topics_request::CreatableTopicConfig],
) -> Result<Overrides, (ResponseError, String)> {
    let mut out = Overrides::new();
    for c in configs {
        let name = c.name.as_str();
        let short: String = name.chars().take(128).collect();
        let Some(value) = c.value.as_deref() else {
            return Err((
                ResponseError::InvalidRequest,
                format!("Null value not supported for topic config: {short}"),
            ));
        };
        let value = topic_config::validate(name, value)
            .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
        if out.insert(name.to_owned(), value).is_some() {
            return Err((
                ResponseError::InvalidRequest,
                format!("topic config `{short}` appears more than once"),
            ));
        }
    }
    Ok(out)
}

/// The configs of the created topic `name`, for the v5+ response.
fn described(broker: &Broker, name: &str) -> Vec<CreatableTopicConfigs> {
    super::describe_configs::topic_entries(
        broker.topics.base_log_config(),
        &broker.topics.overrides(name),
    )
    .into_iter()
    .map(|e| {
        let mut c = CreatableTopicConfigs::default();
        c.name = StrBytes::from_static_str(e.name);
        c.value = Some(StrBytes::from_string(e.value));
        c.read_only = e.read_only;
        c.config_source = e.source.code();
        c.is_sensitive = false;
        c
    })
    .collect()
}
