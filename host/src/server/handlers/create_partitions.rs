//! CreatePartitions: grows topics, as Kafka's controller does (`ReplicationControlManager
//! .createPartitions`). Per topic, `count` is the new total: it must be larger than the
//! current count (partitions are never removed) and at most `topics.max_partitions`,
//! else `INVALID_PARTITIONS`. An unknown topic gets `UNKNOWN_TOPIC_OR_PARTITION`; a
//! topic named more than once gets one `INVALID_REQUEST` result. A single broker:
//! manual assignments are accepted only when there is one per new partition and each
//! names exactly this broker, else `INVALID_REPLICA_ASSIGNMENT` (Kafka's rules: no empty
//! replica list, no broker listed twice, no unknown broker, and the topic's replication
//! factor, here 1).
//! `validate_only` runs every check and changes nothing.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic},
        create_partitions_response::CreatePartitionsTopicResult,
        CreatePartitionsRequest, CreatePartitionsResponse,
    },
    protocol::StrBytes,
};

use super::errors::first_error;
use crate::{
    broker::{Broker, TopicError},
    server::reply::Reply,
};

/// Handles CreatePartitions v0–v3 (the versions differ only in encoding).
///
/// Authorization (Kafka's `KafkaApis.handleCreatePartitionsRequest`): Alter on each
/// topic, else TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    broker: &Arc<Broker>,
    authz: &crate::authz::RequestAuthz,
    _version: i16,
    request: CreatePartitionsRequest,
) -> Reply {
    let alterable = authz.allowed_names(
        crate::authz::ResourceType::Topic,
        crate::authz::AclOperation::Alter,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut answered: HashSet<String> = HashSet::new();
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.name.0.to_string();
        if !answered.insert(name.clone()) {
            // A repeated name is answered once (Kafka: "Duplicate topic name.").
            continue;
        }
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        let outcome = if seen[&name] > 1 {
            Err((
                ResponseError::InvalidRequest,
                format!("topic `{name}` appears more than once in the request"),
            ))
        } else if !alterable.contains(&name) {
            Err((
                ResponseError::TopicAuthorizationFailed,
                "Authorization failed.".into(),
            ))
        } else {
            grow(broker, &name, t, request.validate_only)
        };
        if let Err((code, message)) = outcome {
            r.error_code = code.code();
            r.error_message = Some(StrBytes::from_string(message));
        }
        results.push(r);
    }
    let error = first_error(results.iter().map(|r| r.error_code));
    let mut response = CreatePartitionsResponse::default();
    response.results = results;
    Reply::new(response, error)
}

/// Checks one topic's request and, unless `validate_only`, grows the topic.
fn grow(
    broker: &Arc<Broker>,
    name: &str,
    t: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let max = broker.config.topics.max_partitions;
    let count = i64::from(t.count);
    let topic = broker
        .topics
        .check_add_partitions(name, count, max)
        .map_err(refusal)?;
    if let Some(assignments) = &t.assignments {
        let added = count - topic.partitions.len() as i64;
        check_assignments(broker.identity.node.id, added, assignments)
            .map_err(|message| (ResponseError::InvalidReplicaAssignment, message))?;
    }
    if validate_only {
        return Ok(());
    }
    if let Some(cluster) = broker.cluster() {
        cluster
            .add_partitions(name, count as u32)
            .map_err(super::errors::cluster_refusal)?;
    }
    // Checked again under the registry lock: the topic may have changed meanwhile.
    broker
        .topics
        .add_partitions(name, count, max)
        .map(|_| ())
        .map_err(refusal)
}

/// The Kafka error for a registry refusal.
fn refusal(e: TopicError) -> (ResponseError, String) {
    let code = match &e {
        TopicError::Unknown(_) => ResponseError::UnknownTopicOrPartition,
        TopicError::NotAnIncrease { .. } | TopicError::InvalidPartitions { .. } => {
            ResponseError::InvalidPartitions
        }
        TopicError::PartitionLimit { .. } => ResponseError::PolicyViolation,
        _ => {
            tracing::warn!("adding partitions: {e}");
            ResponseError::KafkaStorageError
        }
    };
    (code, e.to_string())
}

/// Manual placement of `added` new partitions on a single broker `me`: one assignment
/// per new partition, each exactly `[me]`.
fn check_assignments(
    me: i32,
    added: i64,
    assignments: &[CreatePartitionsAssignment],
) -> Result<(), String> {
    if assignments.len() as i64 != added {
        return Err(format!(
            "attempted to add {added} partition(s), but {} assignment(s) were given",
            assignments.len()
        ));
    }
    for a in assignments {
        let replicas: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
        if replicas.is_empty() {
            return Err("an assignment has an empty replica list".into());
        }
        if let Some(other) = replicas.iter().find(|b| **b != me) {
            return Err(format!(
                "an assignment names broker {other}, but the only broker is {me}"
            ));
        }
        if replicas.len() > 1 {
            return Err(format!(
                "an assignment names broker {me} {} times; the topic has 1 replica per \
                 partition",
                replicas.len()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::{
        messages::{ApiKey, BrokerId, TopicName},
        protocol::{Decodable, Encodable},
    };

    use super::*;
    use crate::{
        broker::NodeInfo,
        config::Config,
        server::dispatch::{encode_response, supported_versions},
    };

    fn broker(dir: &std::path::Path) -> Arc<Broker> {
        let mut config = Config {
            data_dir: dir.join("data"),
            ..Config::default()
        };
        config.plugins.dir = dir.join("no-plugins");
        config.log.flush_messages = u64::MAX;
        config.topics.max_partitions = 50;
        // Room for the partitions under an open-file limit as low as 1024.
        config.server.max_connections = 10;
        config.log.open_files_cache = 16;
        let plugins = crate::startup::load_plugins(&config).unwrap();
        let node = NodeInfo {
            id: 7,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            endpoints: Default::default(),
        };
        Arc::new(Broker::open(config, node, plugins, None).unwrap())
    }

    fn topic(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
        let mut t = CreatePartitionsTopic::default();
        t.name = TopicName(StrBytes::from_string(name.to_owned()));
        t.count = count;
        t.assignments = assignments.map(|list| {
            list.into_iter()
                .map(|ids| {
                    let mut a = CreatePartitionsAssignment::default();
                    a.broker_ids = ids.into_iter().map(BrokerId).collect();
                    a
                })
                .collect()
        });
        t
    }

    /// Runs one request; returns (name, error code, message) per result, and the
    /// summary error.
    fn run(
        broker: &Arc<Broker>,
        topics: Vec<CreatePartitionsTopic>,
        validate_only: bool,
    ) -> (Vec<(String, i16, Option<String>)>, i16) {
        let mut request = CreatePartitionsRequest::default();
        request.topics = topics;
        request.timeout_ms = 30_000;
        request.validate_only = validate_only;
        let reply = handle(broker, &crate::authz::RequestAuthz::allow_all(), 3, request);
        let Some(kafka_protocol::messages::ResponseKind::CreatePartitions(response)) =
            reply.response
        else {
            panic!("not a CreatePartitions response");
        };
        let results = response
            .results
            .into_iter()
            .map(|r| {
                (
                    r.name.0.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                )
            })
            .collect();
        (results, reply.error)
    }

    fn count(broker: &Broker, name: &str) -> usize {
        broker.topics.get(name).unwrap().partitions.len()
    }

    #[test]
    fn grows_topics_and_refuses_as_kafka_does() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        for name in ["a", "b", "c", "d", "dup"] {
            b.topics.create(name, 3, 50).unwrap();
        }
        let invalid_partitions = ResponseError::InvalidPartitions.code();
        let (results, error) = run(
            &b,
            vec![
                topic("a", 6, None),
                topic("b", 2, None),
                topic("c", 3, None),
                topic("d", 51, None),
                topic("missing", 4, None),
                topic("dup", 4, None),
                topic("dup", 5, None),
            ],
            false,
        );
        let codes: Vec<(&str, i16)> = results.iter().map(|r| (r.0.as_str(), r.1)).collect();
        assert_eq!(
            codes,
            [
                ("a", 0),
                ("b", invalid_partitions),
                ("c", invalid_partitions),
                ("d", invalid_partitions),
                ("missing", ResponseError::UnknownTopicOrPartition.code()),
                ("dup", ResponseError::InvalidRequest.code()),
            ]
        );
        assert_eq!(error, invalid_partitions);
        assert_eq!(results[0].2, None);
        for r in &results[1..] {
            assert!(r.2.as_deref().is_some_and(|m| !m.is_empty()), "{r:?}");
        }
        assert!(results[1]
            .2
            .as_deref()
            .unwrap()
            .contains("not be an increase"));
        assert_eq!(
            ["a", "b", "c", "d", "dup"].map(|n| count(&b, n)),
            [6, 3, 3, 3, 3]
        );
    }

    #[test]
    fn validate_only_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.topics.create("v", 2, 50).unwrap();
        let mut changes = b.topics.subscribe_changes();
        changes.mark_unchanged();
        let (results, error) = run(&b, vec![topic("v", 5, None)], true);
        assert_eq!((results[0].1, error), (0, 0));
        let (results, _) = run(&b, vec![topic("v", 1, None)], true);
        assert_eq!(results[0].1, ResponseError::InvalidPartitions.code());
        assert_eq!(count(&b, "v"), 2);
        assert!(!changes.has_changed().unwrap());
        assert!(!dir.path().join("data/logs/v-2").exists());
    }

    #[test]
    fn assignments_must_name_only_this_broker_once_per_new_partition() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.topics.create("m", 1, 50).unwrap();
        let invalid = ResponseError::InvalidReplicaAssignment.code();
        for assignments in [
            vec![vec![7], vec![8]],
            vec![vec![7]],
            vec![vec![7], vec![7], vec![7]],
            vec![vec![7], vec![]],
            vec![vec![7], vec![7, 7]],
        ] {
            let (results, error) = run(&b, vec![topic("m", 3, Some(assignments.clone()))], false);
            assert_eq!((results[0].1, error), (invalid, invalid), "{assignments:?}");
            assert_eq!(count(&b, "m"), 1);
        }
        let (results, _) = run(&b, vec![topic("m", 3, Some(vec![vec![7], vec![7]]))], false);
        assert_eq!(results[0].1, 0, "{results:?}");
        assert_eq!(count(&b, "m"), 3);
        let (results, _) = run(&b, vec![topic("m", 4, Some(vec![]))], false);
        assert_eq!(results[0].1, invalid);
    }

    #[test]
    fn responses_encode_at_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.topics.create("e", 1, 50).unwrap();
        let range = supported_versions(ApiKey::CreatePartitions).unwrap();
        assert_eq!((range.min, range.max), (0, 3));
        for version in range.min..=range.max {
            let mut request = CreatePartitionsRequest::default();
            request.topics = vec![
                topic("e", 2 + i32::from(version), None),
                topic("x", 2, None),
            ];
            let mut bytes = bytes::BytesMut::new();
            request.encode(&mut bytes, version).unwrap();
            let decoded = CreatePartitionsRequest::decode(&mut bytes.freeze(), version).unwrap();
            let reply = handle(
                &b,
                &crate::authz::RequestAuthz::allow_all(),
                version,
                decoded,
            );
            let response = reply.response.unwrap();
            encode_response(ApiKey::CreatePartitions, version, 1, &response).unwrap();
        }
        assert_eq!(count(&b, "e"), 5);
    }
}
