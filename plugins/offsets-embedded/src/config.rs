//! The plugin's configuration: the TOML string the operator writes under
//! `[plugins.config.embedded]`.

use std::path::PathBuf;

use drover_abi::PluginError;
use serde::Deserialize;

/// Kafka's default for `offset.metadata.max.bytes`.
pub const DEFAULT_MAX_METADATA_BYTES: usize = 4096;

/// The validated configuration of an embedded store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The database file. A relative path is relative to the broker's working directory.
    /// Its parent directory is created when missing.
    pub path: PathBuf,
    /// The longest metadata string (in UTF-8 bytes) a commit may carry; a batch with a
    /// longer one is refused as a whole.
    pub max_metadata_bytes: usize,
}

/// The TOML shape; every field optional so that a missing `path` gets our own message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    path: Option<PathBuf>,
    max_metadata_bytes: Option<usize>,
}

impl Config {
    /// Parses and validates `text`. Errors are [`drover_abi::ErrorKind::InvalidConfig`]:
    /// an empty config or a missing or empty `path`, an unknown key (named in the
    /// message), a value of the wrong type.
    pub fn parse(text: &str) -> Result<Config, PluginError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            PluginError::invalid_config(format!(
                "offset store `embedded`: invalid config: {}",
                e.message()
            ))
        })?;
        let path = match raw.path {
            Some(path) if !path.as_os_str().is_empty() => path,
            _ => {
                return Err(PluginError::invalid_config(
                    "offset store `embedded`: `path` is required (the database file, \
                     e.g. path = \"/var/lib/drover/offsets.redb\")",
                ))
            }
        };
        Ok(Config {
            path,
            max_metadata_bytes: raw.max_metadata_bytes.unwrap_or(DEFAULT_MAX_METADATA_BYTES),
        })
    }
}

#[cfg(test)]
mod tests {
    use drover_abi::ErrorKind;

    use super::*;

    #[test]
    fn full_config() {
        let c = Config::parse("path = \"/tmp/x/o.redb\"\nmax_metadata_bytes = 10\n").unwrap();
        assert_eq!(c.path, PathBuf::from("/tmp/x/o.redb"));
        assert_eq!(c.max_metadata_bytes, 10);
    }

    #[test]
    fn default_limit() {
        let c = Config::parse("path = \"o.redb\"").unwrap();
        assert_eq!(c.max_metadata_bytes, DEFAULT_MAX_METADATA_BYTES);
    }

    #[test]
    fn empty_or_missing_path_is_rejected() {
        for text in ["", "  \n", "path = \"\"", "max_metadata_bytes = 5"] {
            let e = Config::parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}");
            assert!(e.message.contains("`path` is required"), "{text:?}: {e}");
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let e = Config::parse("path = \"o.redb\"\ncache_mb = 3").unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidConfig);
        assert!(e.message.contains("cache_mb"), "{e}");
    }

    #[test]
    fn wrong_types_are_rejected() {
        for text in [
            "path = 3",
            "path = \"o\"\nmax_metadata_bytes = -1",
            "not toml [",
        ] {
            let e = Config::parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}");
        }
    }
}
