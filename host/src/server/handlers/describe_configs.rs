//! DescribeConfigs (API 32, v1–v4): a topic's configs and the broker's, as Kafka's
//! `ConfigHelper` answers them.
//!
//! - A topic (resource type 2) lists every config of
//!   [`crate::broker::topic_config::KEYS`]: its override (`DYNAMIC_TOPIC_CONFIG`) if it
//!   has one, else the broker's `[log]` value under the topic-level name, with source
//!   `STATIC_BROKER_CONFIG` when drover.toml sets a value other than the default and
//!   `DEFAULT_CONFIG` otherwise (Drover cannot tell a default written out in the file
//!   from one left out). With `include_synonyms`, each entry lists the values it was
//!   chosen from, most specific first (override, broker setting, default), under their
//!   own names (`retention.ms`, `log.retention.ms`). An unknown topic is answered
//!   `UNKNOWN_TOPIC_OR_PARTITION`, a bad name `INVALID_TOPIC_EXCEPTION`.
//! - The broker (resource type 4), named by its id, lists the broker-level names of the
//!   same settings and a few more (`broker.id`, `log.dirs`, `num.partitions`,
//!   `auto.create.topics.enable`), all read-only: broker settings change in drover.toml.
//!   The empty name means Kafka's cluster-wide dynamic defaults, of which Drover has
//!   none: an empty list. Another broker's id is `INVALID_REQUEST`, as in Kafka.
//! - A group (resource type 32) lists the group configs Drover supports
//!   ([`super::group_configs`]).
//! - Other resource types get `INVALID_REQUEST`. Names in `configuration_keys` that are
//!   not configs are simply absent. Documentation is always null.
//!
//! Bounds: at most [`MAX_RESOURCES`] resources and [`MAX_KEYS`] configuration keys per
//! resource; beyond them every resource (or the resource) is answered `INVALID_REQUEST`
//! with a message, without looking anything up.

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_configs_response::{
            DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
        },
        DescribeConfigsRequest, DescribeConfigsResponse,
    },
    protocol::StrBytes,
};

use super::errors::first_error;
use crate::{
    broker::{
        topic_config::{ConfigType, Overrides, KEYS},
        topics::validate_name,
        Broker,
    },
    config::TopicsConfig,
    log::LogConfig,
    server::reply::Reply,
};

/// Kafka's `ConfigResource.Type` TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// Kafka's `ConfigResource.Type` BROKER.
pub const RESOURCE_BROKER: i8 = 4;

/// The most resources one config request (describe or alter) may name.
pub const MAX_RESOURCES: usize = 1000;
/// The most configuration keys (describe) or config changes (alter) per resource.
pub const MAX_KEYS: usize = 1000;

/// Kafka's `ConfigSource` values (DescribeConfigs v1+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A topic override (`DYNAMIC_TOPIC_CONFIG`, 1).
    DynamicTopic,
    /// Set in the broker's config file (`STATIC_BROKER_CONFIG`, 4).
    StaticBroker,
    /// The built-in default (`DEFAULT_CONFIG`, 5).
    Default,
    /// A group's override (`GROUP_CONFIG`, 8).
    Group,
}

impl Source {
    /// The wire value.
    pub fn code(self) -> i8 {
        match self {
            Source::DynamicTopic => 1,
            Source::StaticBroker => 4,
            Source::Default => 5,
            Source::Group => 8,
        }
    }
}

/// One described config, before it becomes a response entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Kafka's name.
    pub name: &'static str,
    /// The value in force.
    pub value: String,
    /// Where it comes from.
    pub source: Source,
    /// Whether AlterConfigs may change it.
    pub read_only: bool,
    /// Its type.
    pub kind: i8,
    /// (name, value, source) of the candidates, most specific first.
    pub synonyms: Vec<(&'static str, String, Source)>,
}

/// The configs of a topic with `overrides`, over the broker settings `base`.
pub fn topic_entries(base: &LogConfig, overrides: &Overrides) -> Vec<Entry> {
    let defaults = LogConfig::default();
    KEYS.iter()
        .map(|key| {
            let (broker_value, default_value) = ((key.get)(base), (key.get)(&defaults));
            let broker_source = if broker_value != default_value {
                Source::StaticBroker
            } else {
                Source::Default
            };
            let mut synonyms = Vec::with_capacity(3);
            if let Some(v) = overrides.get(key.name) {
                synonyms.push((key.name, v.clone(), Source::DynamicTopic));
            }
            if broker_source == Source::StaticBroker {
                synonyms.push((key.broker_name, broker_value.clone(), Source::StaticBroker));
            }
            synonyms.push((key.broker_name, default_value, Source::Default));
            let (value, source) = match overrides.get(key.name) {
                Some(v) => (v.clone(), Source::DynamicTopic),
                None => (broker_value, broker_source),
            };
            Entry {
                name: key.name,
                value,
                source,
                read_only: false,
                kind: key.kind.code(),
                synonyms,
            }
        })
        .collect()
}

/// The configs of this broker (all read-only).
pub fn broker_entries(broker: &Broker) -> Vec<Entry> {
    let base = broker.topics.base_log_config();
    let defaults = LogConfig::default();
    let entry = |name: &'static str, value: String, default: String, kind: i8| {
        let source = if value != default {
            Source::StaticBroker
        } else {
            Source::Default
        };
        Entry {
            name,
            synonyms: vec![(name, value.clone(), source)],
            value,
            source,
            read_only: true,
            kind,
        }
    };
    let topics = &broker.config.topics;
    let topic_defaults = TopicsConfig::default();
    let mut out = vec![
        Entry {
            name: "broker.id",
            value: broker.identity.node.id.to_string(),
            source: Source::StaticBroker,
            read_only: true,
            kind: ConfigType::Int.code(),
            synonyms: vec![(
                "broker.id",
                broker.identity.node.id.to_string(),
                Source::StaticBroker,
            )],
        },
        entry(
            "log.dirs",
            broker.config.data_dir.join("logs").display().to_string(),
            String::new(),
            2,
        ),
        entry(
            "num.partitions",
            topics.default_partitions.to_string(),
            topic_defaults.default_partitions.to_string(),
            ConfigType::Int.code(),
        ),
        entry(
            "auto.create.topics.enable",
            topics.auto_create.to_string(),
            topic_defaults.auto_create.to_string(),
            1,
        ),
    ];
    out.extend(KEYS.iter().map(|key| {
        entry(
            key.broker_name,
            (key.get)(base),
            (key.get)(&defaults),
            key.kind.code(),
        )
    }));
    out
}

/// Authorization of one config resource (Kafka's `ConfigHelper` and
/// `KafkaApis.authorizeAlterConfigs`): `operation` (DescribeConfigs or AlterConfigs) on
/// the topic (TOPIC_AUTHORIZATION_FAILED), on the cluster for broker, broker-logger and
/// client-metrics resources (CLUSTER_AUTHORIZATION_FAILED), on the group for a group's
/// configs (GROUP_AUTHORIZATION_FAILED).
pub(super) fn config_refusal(
    authz: &crate::authz::RequestAuthz,
    resource_type: i8,
    name: &str,
    operation: crate::authz::AclOperation,
) -> Option<(ResponseError, String)> {
    use crate::authz::ResourceType;
    let (kind, resource, error) = match resource_type {
        2 => (
            ResourceType::Topic,
            name,
            ResponseError::TopicAuthorizationFailed,
        ),
        4 | 8 | 16 => (
            ResourceType::Cluster,
            crate::authz::CLUSTER_RESOURCE_NAME,
            ResponseError::ClusterAuthorizationFailed,
        ),
        32 => (
            ResourceType::Group,
            name,
            ResponseError::GroupAuthorizationFailed,
        ),
        _ => return None,
    };
    (!authz.allows(kind, resource, operation)).then(|| (error, error.to_string()))
}

/// Handles DescribeConfigs v1–v4.
///
/// Authorization: DescribeConfigs on each resource (`config_refusal`).
pub fn handle(
    broker: &Arc<Broker>,
    authz: &crate::authz::RequestAuthz,
    version: i16,
    request: DescribeConfigsRequest,
) -> Reply {
    let too_many = request.resources.len() > MAX_RESOURCES;
    let count = request.resources.len();
    let results: Vec<DescribeConfigsResult> = request
        .resources
        .into_iter()
        .map(|resource| {
            let mut r = DescribeConfigsResult::default();
            r.resource_type = resource.resource_type;
            let outcome = if too_many {
                Err((
                    ResponseError::InvalidRequest,
                    format!("{count} resources in one request; at most {MAX_RESOURCES}"),
                ))
            } else if let Some(refused) = config_refusal(
                authz,
                resource.resource_type,
                resource.resource_name.as_str(),
                crate::authz::AclOperation::DescribeConfigs,
            ) {
                Err(refused)
            } else {
                describe(broker, &resource)
            };
            r.resource_name = resource.resource_name;
            match outcome {
                Ok(entries) => {
                    let wanted = resource.configuration_keys.as_deref();
                    r.configs = entries
                        .into_iter()
                        .filter(|e| wanted.is_none_or(|w| w.iter().any(|k| k.as_str() == e.name)))
                        .map(|e| wire_entry(e, version, request.include_synonyms))
                        .collect();
                }
                Err((code, message)) => {
                    r.error_code = code.code();
                    r.error_message = Some(StrBytes::from_string(message));
                }
            }
            r
        })
        .collect();
    let error = first_error(results.iter().map(|r| r.error_code));
    let mut response = DescribeConfigsResponse::default();
    response.results = results;
    Reply::new(response, error)
}

/// The entries of one resource, or its error.
fn describe(
    broker: &Broker,
    resource: &kafka_protocol::messages::describe_configs_request::DescribeConfigsResource,
) -> Result<Vec<Entry>, (ResponseError, String)> {
    if let Some(keys) = &resource.configuration_keys {
        if keys.len() > MAX_KEYS {
            return Err((
                ResponseError::InvalidRequest,
                format!("{} configuration keys; at most {MAX_KEYS}", keys.len()),
            ));
        }
    }
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        RESOURCE_TOPIC => {
            validate_name(name)
                .map_err(|e| (ResponseError::InvalidTopicException, e.to_string()))?;
            if broker.topics.get(name).is_none() {
                return Err((
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic `{name}` does not exist"),
                ));
            }
            Ok(topic_entries(
                broker.topics.base_log_config(),
                &broker.topics.overrides(name),
            ))
        }
        RESOURCE_BROKER => {
            if name.is_empty() {
                return Ok(Vec::new());
            }
            check_broker_name(broker, name)?;
            Ok(broker_entries(broker))
        }
        super::group_configs::RESOURCE_GROUP => super::group_configs::describe(broker, name),
        other => Err((
            ResponseError::InvalidRequest,
            format!(
                "resource type {other} is not supported (topics 2, brokers 4 and groups 32 are)"
            ),
        )),
    }
}

/// Whether a broker resource's `name` is this broker's id (Kafka refuses another).
pub fn check_broker_name(broker: &Broker, name: &str) -> Result<(), (ResponseError, String)> {
    if name.trim().parse::<i32>().ok() == Some(broker.identity.node.id) {
        return Ok(());
    }
    Err((
        ResponseError::InvalidRequest,
        format!(
            "unexpected broker id, expected {} or an empty string, but received {}",
            broker.identity.node.id,
            name.chars().take(64).collect::<String>()
        ),
    ))
}

fn wire_entry(e: Entry, version: i16, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let mut out = DescribeConfigsResourceResult::default();
    out.name = StrBytes::from_static_str(e.name);
    out.value = Some(StrBytes::from_string(e.value));
    out.read_only = e.read_only;
    out.config_source = e.source.code();
    out.is_sensitive = false;
    if include_synonyms {
        out.synonyms = e
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                let mut s = DescribeConfigsSynonym::default();
                s.name = StrBytes::from_static_str(name);
                s.value = Some(StrBytes::from_string(value));
                s.source = source.code();
                s
            })
            .collect();
    }
    if version >= 3 {
        out.config_type = e.kind;
    }
    out.documentation = None;
    out
}
