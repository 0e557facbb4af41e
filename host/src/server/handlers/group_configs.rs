//! Group configs through the config APIs (resource type GROUP, 32; Kafka's
//! `GroupConfig`, KIP-848 and KIP-932): DescribeConfigs lists each supported config
//! ([`crate::broker::group_configs::KEYS`]) with its override (`GROUP_CONFIG`) or its
//! default (`DEFAULT_CONFIG`); IncrementalAlterConfigs SETs and DELETEs overrides (a
//! group needs no members to have them). APPEND and SUBTRACT are `INVALID_CONFIG`: no
//! group config is a list. The legacy AlterConfigs is refused with `INVALID_REQUEST`,
//! as group configs are altered incrementally (`kafka-configs.sh --entity-type
//! groups`). Standalone the overrides are written to the data directory before the
//! answer; in cluster mode to ZooKeeper ([`crate::cluster::group_configs`]), and
//! every broker follows them. Authorization (DescribeConfigs / AlterConfigs on the
//! group) is the config handlers' per-resource check.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::describe_configs::{Entry, Source};
use crate::broker::{
    group_configs::{self, GroupConfigError, GroupOverrides, KEYS},
    Broker,
};

/// Kafka's `ConfigResource.Type` GROUP.
pub const RESOURCE_GROUP: i8 = 32;

/// A refusal: the error code and its message.
pub type Refusal = (ResponseError, String);

/// The entries DescribeConfigs lists for `group`.
pub fn describe(broker: &Broker, group: &str) -> Result<Vec<Entry>, Refusal> {
    check_group_id(group)?;
    let overrides = broker.groups.configs.overrides(group);
    Ok(KEYS
        .iter()
        .map(|key| {
            let default = (key.name, key.default.to_owned(), Source::Default);
            let (value, source, synonyms) = match overrides.get(key.name) {
                Some(v) => (
                    v.clone(),
                    Source::Group,
                    vec![(key.name, v.clone(), Source::Group), default],
                ),
                None => (key.default.to_owned(), Source::Default, vec![default]),
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
        .collect())
}

/// IncrementalAlterConfigs on `group`: applies `changes` (name, operation code, value)
/// to its overrides and, unless `validate_only`, stores them durably and installs them.
pub fn alter_incremental(
    broker: &Broker,
    group: &str,
    changes: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> Result<(), Refusal> {
    check_group_id(group)?;
    let change = |current: &GroupOverrides| incremental(current, changes);
    let stored = |e: GroupConfigError| match e {
        GroupConfigError::Io(_) => (ResponseError::KafkaStorageError, e.to_string()),
        other => (ResponseError::InvalidRequest, other.to_string()),
    };
    if validate_only {
        change(&broker.groups.configs.overrides(group))?;
        return Ok(());
    }
    match broker.cluster() {
        None => {
            let _serial = ALTERING.lock().unwrap_or_else(|e| e.into_inner());
            let next = change(&broker.groups.configs.overrides(group))?;
            broker.groups.configs.store(group, next).map_err(stored)?;
        }
        Some(cluster) => {
            let all = cluster
                .update_group_configs(|all| {
                    let next = change(&all.get(group).cloned().unwrap_or_default())?;
                    let mut all = all.clone();
                    group_configs::apply(&mut all, group, next).map_err(stored)?;
                    Ok::<_, Refusal>(all)
                })
                .map_err(super::errors::cluster_refusal)??;
            broker.groups.configs.replace_all(all);
        }
    }
    tracing::info!(
        group,
        configs = ?broker.groups.configs.overrides(group),
        "group configs altered"
    );
    Ok(())
}

/// Serializes the standalone read-modify-write of group configs.
static ALTERING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The legacy AlterConfigs' answer for a group.
pub fn legacy_refusal() -> Refusal {
    (
        ResponseError::InvalidRequest,
        "group configs are altered with IncrementalAlterConfigs \
         (kafka-configs.sh --entity-type groups --alter)"
            .into(),
    )
}

fn check_group_id(group: &str) -> Result<(), Refusal> {
    if group.is_empty() || group.len() > group_configs::MAX_GROUP_ID_BYTES {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "a group's configs need a group id of 1 to {} bytes",
                group_configs::MAX_GROUP_ID_BYTES
            ),
        ));
    }
    Ok(())
}

/// The overrides after `changes` to `current` (SET 0, DELETE 1; APPEND 2 and SUBTRACT
/// 3 are INVALID_CONFIG, no group config being a list).
fn incremental(
    current: &GroupOverrides,
    changes: &[(&str, i8, Option<&str>)],
) -> Result<GroupOverrides, Refusal> {
    let mut names = BTreeSet::new();
    let mut out = current.clone();
    for &(name, code, value) in changes {
        let shown: String = name.chars().take(128).collect();
        if !names.insert(name) {
            return Err((
                ResponseError::InvalidRequest,
                format!("Error due to duplicate config keys: {shown}"),
            ));
        }
        let invalid = |m: String| (ResponseError::InvalidConfig, m);
        match code {
            0 => {
                let value = value.ok_or_else(|| {
                    (
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for: {shown}"),
                    )
                })?;
                let value = group_configs::validate(name, value).map_err(invalid)?;
                out.insert(name.to_owned(), value);
            }
            1 => {
                // Deleting an override of an unknown name is as invalid as setting it
                // (`validate` says why the name is not a group config).
                if !KEYS.iter().any(|k| k.name == name) {
                    let why = group_configs::validate(name, "").err().unwrap_or_default();
                    return Err(invalid(why));
                }
                out.remove(name);
            }
            2 | 3 => {
                return Err(invalid(format!(
                    "Config value append or subtract is not allowed for config key: {shown} \
                     (no group config is a list)"
                )))
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other} for `{shown}`"),
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_delete_and_refusals() {
        let none = GroupOverrides::new();
        let set = incremental(&none, &[("share.auto.offset.reset", 0, Some("earliest"))]).unwrap();
        assert_eq!(set["share.auto.offset.reset"], "earliest");
        assert!(incremental(&set, &[("share.auto.offset.reset", 1, None)])
            .unwrap()
            .is_empty());
        let code = |r: Result<GroupOverrides, Refusal>| r.unwrap_err().0;
        assert_eq!(
            code(incremental(
                &none,
                &[("share.auto.offset.reset", 0, Some("soon"))]
            )),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            code(incremental(
                &none,
                &[("share.auto.offset.reset", 2, Some("x"))]
            )),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            code(incremental(&none, &[("no.such", 1, None)])),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            code(incremental(&none, &[("share.isolation.level", 0, None)])),
            ResponseError::InvalidRequest
        );
        assert_eq!(
            code(incremental(
                &none,
                &[
                    ("share.isolation.level", 0, Some("read_committed")),
                    ("share.isolation.level", 1, None)
                ]
            )),
            ResponseError::InvalidRequest
        );
        assert_eq!(
            code(incremental(
                &none,
                &[("share.isolation.level", 9, Some("x"))]
            )),
            ResponseError::InvalidRequest
        );
    }
}
