//! Which offset store is active, kept across restarts (docs/design.md, "Offset stores and hot
//! swap": "the active store is durable state of the broker").
//!
//! `drover.toml` names a store (`[coordinator] offset_store` and its
//! `[plugins.config.NAME]` table). A swap on the running broker makes another one
//! active; the broker then records it in `<data_dir>/offset_store.json`, together with
//! the store drover.toml named at that time, before reads switch to it. At startup
//! [`choose`] decides:
//!
//! - no record: the configured store;
//! - the record's active store is what drover.toml names now: that store (the record is
//!   removed: the config says it all again);
//! - drover.toml still names what it named when the record was written: the recorded
//!   store, with its recorded config;
//! - drover.toml names a third store: startup is refused ([`ChoiceError`]) with a message
//!   that says how to move, unless the operator passed `--use-configured-offset-store`.
//!
//! Two stores are the same when their plugin names are equal and their configs parse to
//! equal TOML tables. The file is JSON, written atomically (temporary file, fsync,
//! rename, fsync of the directory) with mode 0600, since a store's config may hold a
//! password.

use std::{
    io::Write as _,
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::config::Config;

/// The record's file name in the data directory.
pub const FILE: &str = "offset_store.json";

/// The record's format version.
const VERSION: u32 = 1;

/// An offset store: its plugin and the config it is opened with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSpec {
    /// Offset-store plugin name (`embedded`, `zookeeper`, `postgres`, ...).
    pub plugin: String,
    /// The plugin's config, TOML text (may be empty).
    pub config: String,
}

impl StoreSpec {
    /// The store `config` names: `[coordinator] offset_store` with its
    /// `[plugins.config.NAME]` table as the broker passes it to the plugin (the
    /// embedded store's default `path` filled in).
    pub fn configured(config: &Config) -> StoreSpec {
        let plugin = config.coordinator.offset_store.clone();
        StoreSpec {
            config: config.plugin_config(&plugin),
            plugin,
        }
    }

    /// Whether `other` is the same store: the same plugin with a config that parses to
    /// the same TOML table (texts that do not parse are compared as text).
    pub fn same_store(&self, other: &StoreSpec) -> bool {
        if self.plugin != other.plugin {
            return false;
        }
        match (
            self.config.parse::<toml::Table>(),
            other.config.parse::<toml::Table>(),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.config.trim() == other.config.trim(),
        }
    }

    /// The top-level config keys whose values differ between the two (names only: a
    /// value may be a password).
    pub fn differing_keys(&self, other: &StoreSpec) -> Vec<String> {
        let a = self.config.parse::<toml::Table>().unwrap_or_default();
        let b = other.config.parse::<toml::Table>().unwrap_or_default();
        let mut keys: Vec<String> = a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// What `<data_dir>/offset_store.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveRecord {
    /// Format version (1).
    pub version: u32,
    /// The store that is active.
    pub active: StoreSpec,
    /// The store drover.toml named when the record was written.
    pub configured: StoreSpec,
    /// When the active store became active (the swap's switch), ms since the epoch.
    pub since_ms: i64,
}

impl ActiveRecord {
    /// A record of `active` becoming active at `since_ms` while drover.toml names
    /// `configured`.
    pub fn new(active: StoreSpec, configured: StoreSpec, since_ms: i64) -> ActiveRecord {
        ActiveRecord {
            version: VERSION,
            active,
            configured,
            since_ms,
        }
    }
}

/// Errors reading or writing the record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file could not be read, written or removed.
    #[error("{path}: {source}")]
    Io {
        /// The record file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a record this broker understands.
    #[error("{path}: not an offset-store record ({why}); it names the offset store a swap made active: restore it from a backup, or remove it to start on the store drover.toml names")]
    Invalid {
        /// The record file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The record's path in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// Reads the record; `None` when there is none.
pub fn read(data_dir: &Path) -> Result<Option<ActiveRecord>, RecordError> {
    let path = path(data_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RecordError::Io { path, source }),
    };
    let record: ActiveRecord = serde_json::from_str(&text).map_err(|e| RecordError::Invalid {
        path: path.clone(),
        why: e.to_string(),
    })?;
    if record.version != VERSION {
        return Err(RecordError::Invalid {
            path,
            why: format!("version {} (this broker reads {VERSION})", record.version),
        });
    }
    Ok(Some(record))
}

/// Writes the record atomically and durably: once this returns, a crash leaves either
/// the previous record or this one, never a mix.
pub fn write(data_dir: &Path, record: &ActiveRecord) -> Result<(), RecordError> {
    let path = path(data_dir);
    let io = |source| RecordError::Io {
        path: path.clone(),
        source,
    };
    let body = serde_json::to_vec_pretty(record).map_err(|e| io(std::io::Error::other(e)))?;
    std::fs::create_dir_all(data_dir).map_err(io)?;
    let tmp = data_dir.join(format!(".{FILE}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(&body).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io)?;
    sync_dir(data_dir).map_err(io)
}

/// Removes the record durably (no-op without one).
pub fn remove(data_dir: &Path) -> Result<(), RecordError> {
    let path = path(data_dir);
    match std::fs::remove_file(&path) {
        Ok(()) => sync_dir(data_dir).map_err(|source| RecordError::Io { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RecordError::Io { path, source }),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Records that `active` is now the active store of a broker whose drover.toml names
/// `configured`: writes the record, or removes it when `active` is the configured store.
pub fn set_active(
    data_dir: &Path,
    active: &StoreSpec,
    configured: &StoreSpec,
    now_ms: i64,
) -> Result<(), RecordError> {
    if active.same_store(configured) {
        remove(data_dir)
    } else {
        write(
            data_dir,
            &ActiveRecord::new(active.clone(), configured.clone(), now_ms),
        )
    }
}

/// Which store a starting broker makes active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The store to open as the active one.
    pub active: StoreSpec,
    /// Whether it comes from the record (drover.toml names another store).
    pub recorded: bool,
    /// Whether the record is obsolete and should be removed.
    pub remove_record: bool,
}

/// drover.toml names another store than the recorded active one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[coordinator] offset_store: drover.toml names offset store `{configured}`{differs}, \
     but the active offset store is `{active}` (made active by a swap at {since}, recorded \
     in {record}); starting on `{configured}` would serve the offsets \
     it held before that swap. To move to `{configured}`: start with the config the broker \
     had at the swap (it names `{configured_then}`; the broker then reopens `{active}`) and \
     swap on the running broker (`drover admin offset-store swap --to {configured} \
     --config FILE`); or make drover.toml describe `{active}` as recorded there; or start \
     once with `drover serve --use-configured-offset-store` to make `{configured}` active \
     without copying (offsets committed to `{active}` are then not served)"
)]
pub struct ChoiceError {
    /// The store drover.toml names now.
    pub configured: String,
    /// `" (its config differs in: path)"` when the plugin is the recorded one's.
    pub differs: String,
    /// The recorded active store.
    pub active: String,
    /// The store drover.toml named when the record was written.
    pub configured_then: String,
    /// When the recorded store became active (RFC 3339, UTC).
    pub since: String,
    /// The record file.
    pub record: String,
}

/// Decides which store to open at startup (see the module docs). `use_configured`:
/// the operator's `--use-configured-offset-store`.
pub fn choose(
    configured: &StoreSpec,
    record: Option<&ActiveRecord>,
    use_configured: bool,
    record_path: &Path,
) -> Result<Choice, Box<ChoiceError>> {
    let configured_choice = |remove_record| Choice {
        active: configured.clone(),
        recorded: false,
        remove_record,
    };
    let Some(record) = record else {
        return Ok(configured_choice(false));
    };
    if record.active.same_store(configured) || use_configured {
        return Ok(configured_choice(true));
    }
    if record.configured.same_store(configured) {
        return Ok(Choice {
            active: record.active.clone(),
            recorded: true,
            remove_record: false,
        });
    }
    let differs = if configured.plugin == record.active.plugin {
        format!(
            " (its config differs in: {})",
            configured.differing_keys(&record.active).join(", ")
        )
    } else {
        String::new()
    };
    Err(Box::new(ChoiceError {
        configured: configured.plugin.clone(),
        differs,
        active: record.active.plugin.clone(),
        configured_then: record.configured.plugin.clone(),
        since: chrono::DateTime::from_timestamp_millis(record.since_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_else(|| format!("{} ms since the epoch", record.since_ms)),
        record: record_path.display().to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(plugin: &str, config: &str) -> StoreSpec {
        StoreSpec {
            plugin: plugin.into(),
            config: config.into(),
        }
    }

    #[test]
    fn same_store_compares_parsed_tables() {
        let a = spec(
            "embedded",
            "path = \"/d/o.redb\"\nmax_metadata_bytes = 10\n",
        );
        let b = spec("embedded", "max_metadata_bytes = 10\npath = '/d/o.redb'");
        assert!(a.same_store(&b));
        assert!(!a.same_store(&spec("embedded", "path = \"/e/o.redb\"")));
        assert!(!a.same_store(&spec("postgres", &a.config)));
        assert!(spec("zookeeper", "").same_store(&spec("zookeeper", "\n")));
        assert_eq!(
            a.differing_keys(&spec("embedded", "path = \"/e/o.redb\"")),
            ["max_metadata_bytes", "path"]
        );
    }

    #[test]
    fn startup_choice() {
        let p = Path::new("/d/offset_store.json");
        let emb = spec("embedded", "path = \"/d/offsets.redb\"");
        let moved = spec("embedded", "path = \"/m/offsets.redb\"");
        let pg = spec("postgres", "url = \"postgres://u@h/db\"");
        // No record: the configured store.
        let c = choose(&emb, None, false, p).unwrap();
        assert_eq!(
            (c.active, c.recorded, c.remove_record),
            (emb.clone(), false, false)
        );
        // Swapped to `moved`, config unchanged: the recorded store.
        let r = ActiveRecord::new(moved.clone(), emb.clone(), 5);
        let c = choose(&emb, Some(&r), false, p).unwrap();
        assert_eq!((c.active, c.recorded), (moved.clone(), true));
        // drover.toml now describes the recorded store: it, and the record goes.
        let c = choose(&moved, Some(&r), false, p).unwrap();
        assert_eq!(
            (c.active, c.recorded, c.remove_record),
            (moved.clone(), false, true)
        );
        // drover.toml names a third store: refused, saying how to move.
        let e = choose(&pg, Some(&r), false, p).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("names offset store `postgres`"), "{text}");
        assert!(
            text.contains("the active offset store is `embedded`"),
            "{text}"
        );
        assert!(text.contains("/d/offset_store.json"), "{text}");
        assert!(
            text.contains("drover admin offset-store swap --to postgres"),
            "{text}"
        );
        assert!(text.contains("--use-configured-offset-store"), "{text}");
        // The same plugin with another config is another store; the message names the
        // keys, never their values.
        let other = spec("embedded", "path = \"/x/offsets.redb\"");
        let text = choose(&other, Some(&r), false, p).unwrap_err().to_string();
        assert!(text.contains("differs in: path"), "{text}");
        assert!(!text.contains("/x/offsets.redb"), "{text}");
        // The override: the configured store, and the record goes.
        let c = choose(&pg, Some(&r), true, p).unwrap();
        assert_eq!((c.active, c.recorded, c.remove_record), (pg, false, true));
    }

    #[test]
    fn record_round_trips_atomically_and_privately() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let emb = spec("embedded", "path = \"/d/offsets.redb\"");
        let pg = spec("postgres", "password = \"secret\"");
        set_active(dir.path(), &pg, &emb, 42).unwrap();
        let r = read(dir.path()).unwrap().unwrap();
        assert_eq!(r, ActiveRecord::new(pg.clone(), emb.clone(), 42));
        let mode = std::fs::metadata(path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Back to the configured store: no record.
        set_active(dir.path(), &emb, &emb, 43).unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A damaged record is an error that names the file, not "no record".
        std::fs::write(path(dir.path()), "{").unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains(FILE), "{e}");
    }
}
