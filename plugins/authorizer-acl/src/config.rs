//! The plugin's configuration: the TOML string the operator writes under
//! `[plugins.config.acl]` (the broker adds `path = "<data_dir>/acls"` when the table
//! sets none).

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use drover_abi::PluginError;
use serde::Deserialize;

/// Default cap on the number of ACL bindings.
pub const DEFAULT_MAX_ACLS: usize = 1_000_000;
/// Default cap on entries of one resource pattern (one ZooKeeper node in cluster mode:
/// 10,000 entries of about 90 bytes stay under ZooKeeper's default 1 MiB node limit).
pub const DEFAULT_MAX_ENTRIES_PER_RESOURCE: usize = 10_000;
/// Default cap on a resource name, principal or host, in bytes.
pub const DEFAULT_MAX_NAME_BYTES: usize = 1_024;
/// Default interval between two polls of the change counter (cluster mode).
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 1_000;
/// Default root of the ACL nodes, below the broker's chroot (cluster mode).
pub const DEFAULT_ZK_ROOT: &str = "/drover-acls";

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Principals (`User:admin`) allowed everything, whatever the ACLs say.
    pub super_users: BTreeSet<String>,
    /// Allow an action on a resource that no ACL names at all (Kafka's
    /// `allow.everyone.if.no.acl.found`).
    pub allow_everyone_if_no_acl_found: bool,
    /// The ACL file (standalone only; required there).
    pub path: Option<PathBuf>,
    /// How often every broker polls the change counter (cluster mode).
    pub poll_interval: Duration,
    /// The root node of the ACLs below the broker's chroot (cluster mode).
    pub zk_root: String,
    /// The most ACL bindings kept; creating more is refused per binding.
    pub max_acls: usize,
    /// The most entries (principal, host, operation, permission) on one resource pattern.
    pub max_entries_per_resource: usize,
    /// The longest resource name, principal or host, in UTF-8 bytes.
    pub max_name_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            super_users: BTreeSet::new(),
            allow_everyone_if_no_acl_found: false,
            path: None,
            poll_interval: Duration::from_millis(DEFAULT_POLL_INTERVAL_MS),
            zk_root: DEFAULT_ZK_ROOT.to_owned(),
            max_acls: DEFAULT_MAX_ACLS,
            max_entries_per_resource: DEFAULT_MAX_ENTRIES_PER_RESOURCE,
            max_name_bytes: DEFAULT_MAX_NAME_BYTES,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    super_users: Option<Vec<String>>,
    allow_everyone_if_no_acl_found: Option<bool>,
    path: Option<PathBuf>,
    poll_interval_ms: Option<u64>,
    zk_root: Option<String>,
    max_acls: Option<usize>,
    max_entries_per_resource: Option<usize>,
    max_name_bytes: Option<usize>,
}

fn invalid(message: impl std::fmt::Display) -> PluginError {
    PluginError::invalid_config(format!("authorizer `acl`: {message}"))
}

impl Config {
    /// Parses and validates `text`. Errors are [`drover_abi::ErrorKind::InvalidConfig`]:
    /// an unknown key (named), a wrong type, a super user that is not `Type:name`, a
    /// zero limit or poll interval, a `zk_root` that is not an absolute path.
    pub fn parse(text: &str) -> Result<Config, PluginError> {
        let raw: RawConfig = toml::from_str(text)
            .map_err(|e| invalid(format!("invalid config: {}", e.message())))?;
        let mut config = Config::default();
        for user in raw.super_users.unwrap_or_default() {
            if crate::acl::check_principal(&user).is_err() {
                return Err(invalid(format!(
                    "super_users: `{user}` is not a principal `Type:name` (e.g. \"User:admin\")"
                )));
            }
            config.super_users.insert(user);
        }
        config.allow_everyone_if_no_acl_found = raw.allow_everyone_if_no_acl_found.unwrap_or(false);
        config.path = raw.path.filter(|p| !p.as_os_str().is_empty());
        if let Some(ms) = raw.poll_interval_ms {
            if ms == 0 {
                return Err(invalid("poll_interval_ms must be at least 1"));
            }
            config.poll_interval = Duration::from_millis(ms);
        }
        if let Some(root) = raw.zk_root {
            let valid = root.starts_with('/')
                && root.len() > 1
                && !root.ends_with('/')
                && !root.contains("//")
                && root.split('/').skip(1).all(|p| p != "." && p != "..");
            if !valid {
                return Err(invalid(format!(
                    "zk_root `{root}` is not an absolute ZooKeeper path (e.g. \"/drover-acls\")"
                )));
            }
            config.zk_root = root;
        }
        for (key, value, target) in [
            ("max_acls", raw.max_acls, &mut config.max_acls),
            (
                "max_entries_per_resource",
                raw.max_entries_per_resource,
                &mut config.max_entries_per_resource,
            ),
            (
                "max_name_bytes",
                raw.max_name_bytes,
                &mut config.max_name_bytes,
            ),
        ] {
            if let Some(v) = value {
                if v == 0 {
                    return Err(invalid(format!("{key} must be at least 1")));
                }
                *target = v;
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use drover_abi::ErrorKind;

    use super::*;

    #[test]
    fn defaults_and_full_config() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse(
            "super_users = ['User:admin', 'User:ops']\nallow_everyone_if_no_acl_found = true\n\
             path = '/d/acls'\npoll_interval_ms = 50\nzk_root = '/x/acls'\nmax_acls = 7\n\
             max_entries_per_resource = 3\nmax_name_bytes = 9\n",
        )
        .unwrap();
        assert!(c.super_users.contains("User:admin") && c.super_users.len() == 2);
        assert!(c.allow_everyone_if_no_acl_found);
        assert_eq!(c.path, Some(PathBuf::from("/d/acls")));
        assert_eq!(c.poll_interval, Duration::from_millis(50));
        assert_eq!(c.zk_root, "/x/acls");
        assert_eq!(
            (c.max_acls, c.max_entries_per_resource, c.max_name_bytes),
            (7, 3, 9)
        );
    }

    #[test]
    fn mistakes_are_refused() {
        for (text, wanted) in [
            ("super.users = []", "unknown field `super`"),
            ("super_users = ['admin']", "admin"),
            ("super_users = 'User:a'", "invalid config"),
            ("poll_interval_ms = 0", "poll_interval_ms"),
            ("zk_root = 'acls'", "zk_root"),
            ("zk_root = '/a/'", "zk_root"),
            ("max_acls = 0", "max_acls"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text}");
            assert!(e.message.contains(wanted), "{text}: {e:?}");
        }
    }
}
