//! Group configs: per-group overrides of the settings that Kafka lets an operator set
//! on one group (Kafka's `GroupConfig`, KIP-848 and KIP-932), altered with
//! IncrementalAlterConfigs and described with DescribeConfigs on resource type GROUP
//! (32), as `kafka-configs.sh --entity-type groups` does.
//!
//! Drover supports the group configs that the host applies itself — the delivery side
//! of share groups, which lives with the partition leader:
//! `share.auto.offset.reset`, `share.isolation.level` and
//! `share.record.lock.duration.ms` ([`KEYS`]). Kafka's other group configs
//! (`consumer.session.timeout.ms`, `share.heartbeat.interval.ms`, ...) belong to the
//! coordinator plugin, whose settings apply to every group: they are refused with a
//! message saying so rather than stored and ignored.
//!
//! A group needs no members to have configs (an operator sets
//! `share.auto.offset.reset=earliest` before the first consumer starts). At most
//! [`MAX_GROUPS`] groups have overrides. Standalone, every group's overrides are one
//! file, `<data_dir>/group-configs.json` (`{"version":1,"groups":{"g":{"k":"v"}}}`),
//! replaced atomically on each change; in cluster mode the same document is one
//! ZooKeeper node (`crate::cluster::group_configs`), read by every broker with the rest
//! of the cluster view.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::RwLock,
};

use serde::{Deserialize, Serialize};

use super::topics::write_atomically;

/// One group's overrides: config name → value.
pub type GroupOverrides = BTreeMap<String, String>;

/// Every group's overrides.
pub type AllGroupConfigs = BTreeMap<String, GroupOverrides>;

/// `share.auto.offset.reset`.
pub const RESET: &str = "share.auto.offset.reset";
/// `share.isolation.level`.
pub const ISOLATION_LEVEL: &str = "share.isolation.level";
/// `share.record.lock.duration.ms`.
pub const LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";

/// The most groups that may have overrides (the document must stay well under
/// ZooKeeper's 1 MiB node size in cluster mode).
pub const MAX_GROUPS: usize = 5_000;

/// The longest group id that may have overrides, in bytes.
pub const MAX_GROUP_ID_BYTES: usize = 255;

/// The value type of a group config, as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupConfigType {
    /// `STRING` (2).
    String,
    /// `INT` (3).
    Int,
}

impl GroupConfigType {
    /// The wire value (Kafka's `ConfigType`).
    pub fn code(self) -> i8 {
        match self {
            GroupConfigType::String => 2,
            GroupConfigType::Int => 3,
        }
    }
}

/// One group config Drover supports.
pub struct GroupConfigKey {
    /// Kafka's name.
    pub name: &'static str,
    /// Its type.
    pub kind: GroupConfigType,
    /// The value of a group without an override (Kafka's default).
    pub default: &'static str,
    /// Checks a value; `Err` is Kafka's message for INVALID_CONFIG.
    pub validate: fn(&str) -> Result<(), String>,
}

/// The supported group configs, in the order DescribeConfigs lists them.
pub const KEYS: &[GroupConfigKey] = &[
    GroupConfigKey {
        name: RESET,
        kind: GroupConfigType::String,
        default: "latest",
        validate: validate_auto_offset_reset,
    },
    GroupConfigKey {
        name: ISOLATION_LEVEL,
        kind: GroupConfigType::String,
        default: "read_uncommitted",
        validate: |v| match v {
            "read_uncommitted" | "read_committed" => Ok(()),
            _ => Err(format!(
                "Invalid value {v} for configuration share.isolation.level: String must be \
                 one of: read_committed, read_uncommitted"
            )),
        },
    },
    GroupConfigKey {
        name: LOCK_DURATION_MS,
        kind: GroupConfigType::Int,
        default: "30000",
        // Kafka's group.share.min.record.lock.duration.ms and max (15 s, 60 s).
        validate: |v| match v.trim().parse::<i64>() {
            Ok(ms) if (15_000..=60_000).contains(&ms) => Ok(()),
            Ok(_) => Err(format!(
                "Invalid value {v} for configuration share.record.lock.duration.ms: must be \
                 between 15000 and 60000 (group.share.min/max.record.lock.duration.ms)"
            )),
            Err(_) => Err(format!(
                "Invalid value {v} for configuration share.record.lock.duration.ms: Not a \
                 number of type INT"
            )),
        },
    },
];

/// Kafka's group configs that the coordinator plugin owns: refused with a pointer to
/// the coordinator's settings.
const COORDINATOR_KEYS: &[&str] = &[
    "consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "streams.session.timeout.ms",
    "streams.heartbeat.interval.ms",
    "streams.num.standby.replicas",
];

/// `latest`, `earliest` or `by_duration:<ISO-8601 duration>` (KIP-932, KIP-1106), as
/// the share-partitions read it ([`drover_share::AutoOffsetReset::parse`]).
fn validate_auto_offset_reset(v: &str) -> Result<(), String> {
    drover_share::AutoOffsetReset::parse(v)
        .map(|_| ())
        .map_err(|_| {
            format!(
                "Invalid value {v} for configuration share.auto.offset.reset: must be latest, \
             earliest or by_duration:<ISO-8601 duration, e.g. PT1H>"
            )
        })
}

/// Checks one config name and value for a group: the value normalised, or Kafka's
/// INVALID_CONFIG message.
pub fn validate(name: &str, value: &str) -> Result<String, String> {
    if let Some(key) = KEYS.iter().find(|k| k.name == name) {
        let value = value.trim();
        (key.validate)(value)?;
        return Ok(value.to_owned());
    }
    if COORDINATOR_KEYS.contains(&name) {
        return Err(format!(
            "{name} is not a per-group config in Drover: the coordinator plugin's settings \
             in drover.toml apply to every group"
        ));
    }
    Err(format!("Unknown group config name: {name}"))
}

/// Why a change to the group configs was not stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GroupConfigError {
    /// [`MAX_GROUPS`] groups have overrides already.
    #[error("{MAX_GROUPS} groups have configs already; delete some first")]
    TooManyGroups,
    /// The group id is longer than [`MAX_GROUP_ID_BYTES`] or empty.
    #[error("a group id with configs must be 1 to {MAX_GROUP_ID_BYTES} bytes")]
    BadGroupId,
    /// Writing the file failed.
    #[error("storing group configs: {0}")]
    Io(#[from] std::io::Error),
}

/// The on-disk (and ZooKeeper) document.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct GroupConfigsFile {
    /// Always 1.
    pub version: u32,
    /// Group id → overrides.
    pub groups: AllGroupConfigs,
}

impl GroupConfigsFile {
    /// The document for `groups`.
    pub fn encode(groups: &AllGroupConfigs) -> Vec<u8> {
        serde_json::to_vec(&GroupConfigsFile {
            version: 1,
            groups: groups.clone(),
        })
        .unwrap_or_default()
    }

    /// Reads a document; `Err` names what is wrong.
    pub fn decode(data: &[u8]) -> Result<AllGroupConfigs, String> {
        if data.is_empty() {
            return Ok(AllGroupConfigs::new());
        }
        serde_json::from_slice::<GroupConfigsFile>(data)
            .map(|f| f.groups)
            .map_err(|e| e.to_string())
    }
}

/// The group configs in force on this broker.
#[derive(Debug)]
pub struct GroupConfigs {
    /// The standalone file; `None` in cluster mode (ZooKeeper holds them).
    file: Option<PathBuf>,
    groups: RwLock<AllGroupConfigs>,
}

impl GroupConfigs {
    /// Standalone: loads `<data_dir>/group-configs.json` (none yet: no overrides). An
    /// unreadable file is an error naming it.
    pub fn open(data_dir: &Path) -> std::io::Result<GroupConfigs> {
        let file = data_dir.join("group-configs.json");
        let groups = match std::fs::read(&file) {
            Ok(data) => GroupConfigsFile::decode(&data).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", file.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => AllGroupConfigs::new(),
            Err(e) => return Err(e),
        };
        Ok(GroupConfigs {
            file: Some(file),
            groups: RwLock::new(groups),
        })
    }

    /// Cluster mode: empty until the first read of ZooKeeper's copy
    /// ([`GroupConfigs::replace_all`]).
    pub fn clustered() -> GroupConfigs {
        GroupConfigs {
            file: None,
            groups: RwLock::new(AllGroupConfigs::new()),
        }
    }

    /// The overrides of `group` (empty when it has none).
    pub fn overrides(&self, group: &str) -> GroupOverrides {
        self.read().get(group).cloned().unwrap_or_default()
    }

    /// The value of config `name` for `group`: its override, else the default; `None`
    /// for a name that is not in [`KEYS`].
    pub fn value(&self, group: &str, name: &str) -> Option<String> {
        let key = KEYS.iter().find(|k| k.name == name)?;
        Some(
            self.read()
                .get(group)
                .and_then(|o| o.get(name).cloned())
                .unwrap_or_else(|| key.default.to_owned()),
        )
    }

    /// Every group's overrides (for the cluster's read-modify-write and the admin API).
    pub fn all(&self) -> AllGroupConfigs {
        self.read().clone()
    }

    /// Standalone: stores `overrides` as `group`'s (empty: removes the group) and writes
    /// the file before answering. Errors: [`GroupConfigError`]; nothing changes then.
    pub fn store(&self, group: &str, overrides: GroupOverrides) -> Result<(), GroupConfigError> {
        let mut groups = self.groups.write().unwrap_or_else(|e| e.into_inner());
        let mut next = groups.clone();
        apply(&mut next, group, overrides)?;
        if let Some(file) = &self.file {
            write_atomically(file, &GroupConfigsFile::encode(&next))?;
        }
        *groups = next;
        Ok(())
    }

    /// Cluster mode: replaces every group's overrides with ZooKeeper's.
    pub fn replace_all(&self, groups: AllGroupConfigs) {
        *self.groups.write().unwrap_or_else(|e| e.into_inner()) = groups;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, AllGroupConfigs> {
        self.groups.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sets `group`'s overrides in `groups` (empty: removes it), within the bounds.
pub fn apply(
    groups: &mut AllGroupConfigs,
    group: &str,
    overrides: GroupOverrides,
) -> Result<(), GroupConfigError> {
    if group.is_empty() || group.len() > MAX_GROUP_ID_BYTES {
        return Err(GroupConfigError::BadGroupId);
    }
    if overrides.is_empty() {
        groups.remove(group);
        return Ok(());
    }
    if !groups.contains_key(group) && groups.len() >= MAX_GROUPS {
        return Err(GroupConfigError::TooManyGroups);
    }
    groups.insert(group.to_owned(), overrides);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        assert_eq!(
            validate("share.auto.offset.reset", "earliest").unwrap(),
            "earliest"
        );
        assert!(validate("share.auto.offset.reset", "by_duration:PT10M").is_ok());
        assert!(validate("share.auto.offset.reset", "by_duration:10m").is_err());
        assert!(validate("share.auto.offset.reset", "none").is_err());
        assert!(validate("share.isolation.level", "read_committed").is_ok());
        assert!(validate("share.isolation.level", "READ_COMMITTED").is_err());
        assert!(validate("share.record.lock.duration.ms", "15000").is_ok());
        assert!(validate("share.record.lock.duration.ms", "14999").is_err());
        assert!(validate("share.record.lock.duration.ms", "x").is_err());
        let e = validate("consumer.session.timeout.ms", "45000").unwrap_err();
        assert!(e.contains("coordinator plugin"), "{e}");
        assert_eq!(
            validate("no.such", "1").unwrap_err(),
            "Unknown group config name: no.such"
        );
    }

    #[test]
    fn overrides_survive_a_reopen_and_defaults_fill_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let configs = GroupConfigs::open(dir.path()).unwrap();
        assert_eq!(
            configs.value("g", "share.auto.offset.reset").as_deref(),
            Some("latest")
        );
        let mut o = GroupOverrides::new();
        o.insert("share.auto.offset.reset".into(), "earliest".into());
        configs.store("g", o.clone()).unwrap();
        let reopened = GroupConfigs::open(dir.path()).unwrap();
        assert_eq!(reopened.overrides("g"), o);
        assert_eq!(
            reopened.value("g", "share.auto.offset.reset").as_deref(),
            Some("earliest")
        );
        assert_eq!(reopened.value("g", "no.such"), None);
        reopened.store("g", GroupOverrides::new()).unwrap();
        assert!(GroupConfigs::open(dir.path()).unwrap().all().is_empty());
    }

    #[test]
    fn the_number_of_groups_with_configs_is_bounded() {
        let mut groups = AllGroupConfigs::new();
        let o: GroupOverrides = [(
            "share.isolation.level".to_owned(),
            "read_committed".to_owned(),
        )]
        .into_iter()
        .collect();
        for i in 0..MAX_GROUPS {
            apply(&mut groups, &format!("g{i}"), o.clone()).unwrap();
        }
        assert!(matches!(
            apply(&mut groups, "one-more", o.clone()),
            Err(GroupConfigError::TooManyGroups)
        ));
        // Changing or removing an existing one still works.
        apply(&mut groups, "g0", o).unwrap();
        apply(&mut groups, "g1", GroupOverrides::new()).unwrap();
        assert_eq!(groups.len(), MAX_GROUPS - 1);
        assert!(matches!(
            apply(&mut groups, &"x".repeat(256), GroupOverrides::new()),
            Err(GroupConfigError::BadGroupId)
        ));
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("group-configs.json"), b"{not json").unwrap();
        let e = GroupConfigs::open(dir.path()).unwrap_err();
        assert!(e.to_string().contains("group-configs.json"), "{e}");
    }
}
