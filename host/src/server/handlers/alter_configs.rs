//! IncrementalAlterConfigs (API 44, v0–v1, KIP-339) and the legacy AlterConfigs (API
//! 33, v0–v2): a topic's config overrides, as a Kafka 4.x controller validates them.
//!
//! - Incremental: per config, SET (0) a value, DELETE (1) the override (back to the
//!   broker's value), APPEND (2) / SUBTRACT (3) list items — only for list configs
//!   (`cleanup.policy`); on any other config they are `INVALID_CONFIG`. Legacy: the
//!   given configs become the topic's whole override set (every other config goes back
//!   to the broker's value), as Kafka's AlterConfigs replaces.
//! - Values are checked as Kafka's `ConfigDef` does
//!   ([`crate::broker::topic_config::validate`]): an unknown name, a bad number or an
//!   out-of-range one is `INVALID_CONFIG` with Kafka's message; `cleanup.policy=compact`
//!   is `INVALID_CONFIG` (Drover does not compact). A null value to SET, a config named
//!   twice in one resource, a resource named twice in one request or an unknown
//!   operation is `INVALID_REQUEST`. An unknown topic is `UNKNOWN_TOPIC_OR_PARTITION`.
//! - Broker resources are refused with `INVALID_CONFIG`: broker settings live in
//!   drover.toml. Group resources (32) take incremental changes only
//!   ([`super::group_configs`]). Other resource types are `INVALID_REQUEST`.
//! - `validate_only` checks everything and changes nothing. Otherwise the overrides are
//!   stored durably first — standalone in the data directory
//!   ([`crate::broker::topic_config_store`]), in cluster mode in ZooKeeper with the
//!   topic ([`crate::cluster::topic_configs`]) — then applied to the running logs:
//!   roll settings from the next append, retention at its next pass (every second).
//!
//! Bounds: at most [`MAX_RESOURCES`] resources per request and [`MAX_KEYS`] configs per
//! resource, beyond which resources are refused with `INVALID_REQUEST` unexamined.
//! Alterations are serialized broker-wide, so two concurrent requests never lose each
//! other's changes.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
        AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    },
    protocol::StrBytes,
};

use super::{
    describe_configs::{
        check_broker_name, MAX_KEYS, MAX_RESOURCES, RESOURCE_BROKER, RESOURCE_TOPIC,
    },
    errors::first_error,
    group_configs::{self, RESOURCE_GROUP},
};
use crate::{
    broker::{
        topic_config::{self, ConfigType, Overrides},
        topics::validate_name,
        Broker, TopicError,
    },
    log::LogConfig,
    server::reply::Reply,
};

/// A refusal: the error code and its message.
type Refusal = (ResponseError, String);

/// Serializes read-modify-write of topic overrides.
static ALTERING: Mutex<()> = Mutex::new(());

/// One incremental change (KIP-339 `config_operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Set,
    Delete,
    Append,
    Subtract,
}

impl Op {
    fn from_code(code: i8) -> Option<Op> {
        match code {
            0 => Some(Op::Set),
            1 => Some(Op::Delete),
            2 => Some(Op::Append),
            3 => Some(Op::Subtract),
            _ => None,
        }
    }
}

/// Handles IncrementalAlterConfigs v0–v1.
///
/// Authorization: AlterConfigs on each resource (`describe_configs::config_refusal`).
pub fn handle_incremental(
    broker: &Arc<Broker>,
    authz: &crate::authz::RequestAuthz,
    _version: i16,
    request: IncrementalAlterConfigsRequest,
) -> Reply {
    let count = request.resources.len();
    let dups = duplicates(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let responses: Vec<_> = request
        .resources
        .iter()
        .map(|resource| {
            let outcome = precheck(
                count,
                &dups,
                authz,
                resource.resource_type,
                &resource.resource_name,
            )
            .and_then(|()| {
                let changes: Vec<(&str, i8, Option<&str>)> = resource
                    .configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.config_operation, c.value.as_deref()))
                    .collect();
                if resource.resource_type == RESOURCE_GROUP {
                    if changes.len() > MAX_KEYS {
                        return Err(too_many_keys(changes.len()));
                    }
                    return group_configs::alter_incremental(
                        broker,
                        &resource.resource_name,
                        &changes,
                        request.validate_only,
                    );
                }
                alter(
                    broker,
                    resource.resource_type,
                    &resource.resource_name,
                    resource.configs.len(),
                    request.validate_only,
                    |current| incremental(broker.topics.base_log_config(), current, &changes),
                )
            });
            let mut r = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
            r.resource_type = resource.resource_type;
            r.resource_name = resource.resource_name.clone();
            if let Err((code, message)) = outcome {
                r.error_code = code.code();
                r.error_message = Some(StrBytes::from_string(message));
            }
            r
        })
        .collect();
    let error = first_error(responses.iter().map(|r| r.error_code));
    let mut response = IncrementalAlterConfigsResponse::default();
    response.responses = responses;
    Reply::new(response, error)
}

/// Handles AlterConfigs v0–v2 (the whole override set is replaced).
///
/// Authorization: AlterConfigs on each resource (`describe_configs::config_refusal`).
pub fn handle_legacy(
    broker: &Arc<Broker>,
    authz: &crate::authz::RequestAuthz,
    _version: i16,
    request: AlterConfigsRequest,
) -> Reply {
    let count = request.resources.len();
    let dups = duplicates(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let responses: Vec<_> = request
        .resources
        .iter()
        .map(|resource| {
            let outcome = precheck(
                count,
                &dups,
                authz,
                resource.resource_type,
                &resource.resource_name,
            )
            .and_then(|()| {
                if resource.resource_type == RESOURCE_GROUP {
                    return Err(group_configs::legacy_refusal());
                }
                alter(
                    broker,
                    resource.resource_type,
                    &resource.resource_name,
                    resource.configs.len(),
                    request.validate_only,
                    |_current| {
                        let mut out = Overrides::new();
                        for c in &resource.configs {
                            let name = c.name.as_str();
                            let value = c.value.as_deref().ok_or_else(|| null_value(name))?;
                            let value = topic_config::validate(name, value)
                                .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
                            if out.insert(name.to_owned(), value).is_some() {
                                return Err(duplicate_key(name));
                            }
                        }
                        Ok(out)
                    },
                )
            });
            let mut r = alter_configs_response::AlterConfigsResourceResponse::default();
            r.resource_type = resource.resource_type;
            r.resource_name = resource.resource_name.clone();
            if let Err((code, message)) = outcome {
                r.error_code = code.code();
                r.error_message = Some(StrBytes::from_string(message));
            }
            r
        })
        .collect();
    let error = first_error(responses.iter().map(|r| r.error_code));
    let mut response = AlterConfigsResponse::default();
    response.responses = responses;
    Reply::new(response, error)
}

/// (type, name) pairs named more than once in a request.
fn duplicates<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> BTreeSet<(i8, String)> {
    let mut seen: HashMap<(i8, &str), usize> = HashMap::new();
    for key in resources {
        *seen.entry(key).or_default() += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((t, name), _)| (t, name.to_owned()))
        .collect()
}

/// The request-level checks of one resource: the resource count bound and duplicates.
fn precheck(
    count: usize,
    dups: &BTreeSet<(i8, String)>,
    authz: &crate::authz::RequestAuthz,
    resource_type: i8,
    name: &str,
) -> Result<(), Refusal> {
    if let Some(refused) = super::describe_configs::config_refusal(
        authz,
        resource_type,
        name,
        crate::authz::AclOperation::AlterConfigs,
    ) {
        return Err(refused);
    }
    if count > MAX_RESOURCES {
        return Err((
            ResponseError::InvalidRequest,
            format!("{count} resources in one request; at most {MAX_RESOURCES}"),
        ));
    }
    if dups.contains(&(resource_type, name.to_owned())) {
        return Err((
            ResponseError::InvalidRequest,
            "the resource appears more than once in the request".into(),
        ));
    }
    Ok(())
}

/// Checks one resource, computes its new overrides with `change` (given the current
/// ones) and, unless `validate_only`, stores and applies them. In cluster mode the
/// current overrides are ZooKeeper's, read and written back as one versioned
/// read-modify-write ([`crate::cluster::Cluster::update_topic_configs`]), so a change
/// made through another broker a moment ago is kept, not overwritten with this
/// broker's older copy; `validate_only` checks against the local copy.
fn alter(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    configs: usize,
    validate_only: bool,
    change: impl Fn(&Overrides) -> Result<Overrides, Refusal>,
) -> Result<(), Refusal> {
    if configs > MAX_KEYS {
        return Err(too_many_keys(configs));
    }
    match resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => {
            if !name.is_empty() {
                check_broker_name(broker, name)?;
            }
            return Err((
                ResponseError::InvalidConfig,
                "broker configs cannot be changed at run time: set them in the broker's \
                 drover.toml and restart it (topic configs can be altered)"
                    .into(),
            ));
        }
        other => {
            return Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported (topics 2 are)"),
            ))
        }
    }
    validate_name(name).map_err(|e| (ResponseError::InvalidTopicException, e.to_string()))?;
    let _serial = ALTERING.lock().unwrap_or_else(|e| e.into_inner());
    let unknown = || {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("topic `{name}` does not exist"),
        )
    };
    if broker.topics.get(name).is_none() {
        return Err(unknown());
    }
    let updated = match broker.cluster() {
        Some(cluster) if !validate_only => cluster
            .update_topic_configs(name, &change)
            .map_err(super::errors::cluster_refusal)??,
        _ => change(&broker.topics.overrides(name))?,
    };
    if validate_only {
        return Ok(());
    }
    broker
        .topics
        .set_overrides(name, &updated, true)
        .map_err(|e| match e {
            TopicError::Unknown(_) => unknown(),
            e => {
                tracing::warn!(topic = name, "storing topic configs: {e}");
                (ResponseError::KafkaStorageError, e.to_string())
            }
        })?;
    tracing::info!(topic = name, configs = ?updated, "topic configs altered");
    Ok(())
}

/// The overrides after the incremental `changes` (name, operation code, value) to
/// `current`, over the broker's settings `base`.
fn incremental(
    base: &LogConfig,
    current: &Overrides,
    changes: &[(&str, i8, Option<&str>)],
) -> Result<Overrides, Refusal> {
    let mut names = BTreeSet::new();
    for (name, _, _) in changes {
        if !names.insert(*name) {
            return Err(duplicate_key(name));
        }
    }
    let mut out = current.clone();
    for &(name, code, value) in changes {
        let op = Op::from_code(code).ok_or_else(|| {
            (
                ResponseError::InvalidRequest,
                format!("unknown config operation {code} for `{}`", short(name)),
            )
        })?;
        let key = topic_config::key(name).ok_or_else(|| {
            (
                ResponseError::InvalidConfig,
                topic_config::ConfigError::Unknown(short(name)).to_string(),
            )
        })?;
        let invalid = |e: topic_config::ConfigError| (ResponseError::InvalidConfig, e.to_string());
        match op {
            Op::Set => {
                let value = value.ok_or_else(|| null_value(name))?;
                out.insert(
                    name.to_owned(),
                    topic_config::validate(name, value).map_err(invalid)?,
                );
            }
            Op::Delete => {
                out.remove(name);
            }
            Op::Append | Op::Subtract => {
                if key.kind != ConfigType::List {
                    let verb = if op == Op::Append {
                        "append"
                    } else {
                        "subtract"
                    };
                    return Err((
                        ResponseError::InvalidConfig,
                        format!(
                            "Config value {verb} is not allowed for config key: {name} \
                             (only list configs such as cleanup.policy take APPEND and \
                             SUBTRACT)"
                        ),
                    ));
                }
                let now = out.get(name).cloned().unwrap_or_else(|| (key.get)(base));
                let mut items: Vec<String> = split(&now);
                for item in split(value.unwrap_or("")) {
                    if op == Op::Append {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|i| *i != item);
                    }
                }
                out.insert(
                    name.to_owned(),
                    topic_config::validate(name, &items.join(",")).map_err(invalid)?,
                );
            }
        }
    }
    Ok(out)
}

fn too_many_keys(configs: usize) -> Refusal {
    (
        ResponseError::InvalidRequest,
        format!("{configs} configs in one resource; at most {MAX_KEYS}"),
    )
}

fn split(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn null_value(name: &str) -> Refusal {
    (
        ResponseError::InvalidRequest,
        format!("Null value not supported for: {}", short(name)),
    )
}

fn duplicate_key(name: &str) -> Refusal {
    (
        ResponseError::InvalidRequest,
        format!("Error due to duplicate config keys: {}", short(name)),
    )
}

/// A client-sent name, cut for messages.
fn short(name: &str) -> String {
    name.chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(changes: &[(&str, i8, Option<&str>)]) -> Result<Overrides, Refusal> {
        let current: Overrides = [("segment.ms".to_owned(), "1000".to_owned())].into();
        incremental(&LogConfig::default(), &current, changes)
    }

    #[test]
    fn set_and_delete() {
        let out = run(&[("retention.ms", 0, Some("5000")), ("segment.ms", 1, None)]).unwrap();
        assert_eq!(out, [("retention.ms".to_owned(), "5000".to_owned())].into());
    }

    #[test]
    fn refusals_carry_kafka_codes() {
        let code = |changes: &[(&str, i8, Option<&str>)]| run(changes).unwrap_err().0;
        assert_eq!(
            code(&[("retention.ms", 0, Some("x"))]),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            code(&[("retention.ms", 0, None)]),
            ResponseError::InvalidRequest
        );
        assert_eq!(
            code(&[("retention.ms", 2, Some("1"))]),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            code(&[("retention.ms", 3, Some("1"))]),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            code(&[("retention.ms", 9, Some("1"))]),
            ResponseError::InvalidRequest
        );
        assert_eq!(code(&[("nope", 1, None)]), ResponseError::InvalidConfig);
        assert_eq!(
            code(&[("retention.ms", 0, Some("1")), ("retention.ms", 1, None)]),
            ResponseError::InvalidRequest
        );
        assert_eq!(
            code(&[("cleanup.policy", 0, Some("compact"))]),
            ResponseError::InvalidConfig
        );
    }

    #[test]
    fn list_operations_on_cleanup_policy() {
        let out = run(&[("cleanup.policy", 2, Some("delete"))]).unwrap();
        assert_eq!(out["cleanup.policy"], "delete");
        // Appending compact, or subtracting the only policy, leaves no valid policy.
        let (code, message) = run(&[("cleanup.policy", 2, Some("compact"))]).unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig);
        assert!(
            message.contains("compaction is not implemented"),
            "{message}"
        );
        let (code, _) = run(&[("cleanup.policy", 3, Some("delete"))]).unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig);
    }
}
