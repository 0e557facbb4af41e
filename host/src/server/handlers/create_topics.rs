//! CreateTopics. A single broker: replication factor −1 or 1; explicit replica
//! assignments must name only this broker; −1 partitions means
//! `topics.default_partitions`. Topic-level configs are not supported yet and are
//! refused with `INVALID_CONFIG` naming the key, rather than silently ignored. Partitions
//! beyond what the broker's open-file limit leaves room for are refused with
//! `POLICY_VIOLATION` and a message naming the limit.

use std::{collections::HashMap, sync::Arc};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        create_topics_response::CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
    },
    protocol::StrBytes,
};

use super::first_error;
use crate::{
    broker::{topics::validate_name, Broker, TopicError},
    server::dispatch::Reply,
};

/// Handles CreateTopics v2–v7.
pub fn handle(broker: &Arc<Broker>, version: i16, request: CreateTopicsRequest) -> Reply {
    let config = &broker.config.topics;
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
                validate_name(&name)
                    .map_err(|e| (ResponseError::InvalidTopicException, e.to_string()))?;
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
                    .any(|a| a.broker_ids.iter().any(|b| b.0 != broker.node.id))
                {
                    return Err((
                        ResponseError::InvalidReplicaAssignment,
                        "assignments may only name this broker".into(),
                    ));
                }
                if let Some(c) = t.configs.first() {
                    return Err((
                        ResponseError::InvalidConfig,
                        format!("topic config `{}` is not supported", c.name),
                    ));
                }
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
                    Some(cluster) => match cluster.create_topic(&name, partitions as u32) {
                        Ok(placement) => placement.id,
                        Err(e) => return Err(super::cluster_refusal(e)),
                    },
                };
                match broker
                    .topics
                    .create_with_id(&name, id, partitions, config.max_partitions)
                {
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
                        r.configs = Some(Vec::new());
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
