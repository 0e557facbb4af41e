//! Topics and their partitions, persisted under the data directory:
//! `<data_dir>/topics/<name>.json` holds a topic's id and partition count and
//! `<data_dir>/logs/<name>-<partition>/` its partition logs.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, RwLock},
};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

use crate::log::{LogConfig, LogError, PartitionLog};

/// Errors of topic management.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopicError {
    /// Kafka topic naming rules were broken.
    #[error("invalid topic name `{name}`: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Which rule.
        reason: &'static str,
    },
    /// The topic exists.
    #[error("topic `{0}` already exists")]
    AlreadyExists(String),
    /// The topic does not exist.
    #[error("topic `{0}` does not exist")]
    Unknown(String),
    /// Partition count out of range.
    #[error("invalid partition count {count}: expected 1..={max}")]
    InvalidPartitions {
        /// Requested.
        count: i64,
        /// Allowed maximum.
        max: u32,
    },
    /// Reading or writing topic metadata failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A partition log could not be opened or deleted.
    #[error("partition log: {0}")]
    Log(#[from] LogError),
    /// A topic metadata file is unreadable.
    #[error("{path}: invalid topic metadata: {message}")]
    Metadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// One partition: its log behind a mutex (appends and reads are short, blocking calls
/// made from the blocking pool), and the group-commit state that makes appends durable
/// before they are acknowledged.
pub struct Partition {
    /// Partition index.
    pub index: i32,
    /// The log.
    pub log: Mutex<PartitionLog>,
    /// The log's flushed offset, published after every group-commit fsync.
    durable: watch::Sender<i64>,
    /// Held by the one task fsyncing this partition; the others wait, then usually find
    /// their appends covered by that fsync (group commit).
    flushing: tokio::sync::Mutex<()>,
    /// Bumped after appends; long-polling fetches of this partition wait on it.
    appended: watch::Sender<u64>,
}

impl Partition {
    fn new(index: i32, log: PartitionLog) -> Partition {
        let flushed = log.flushed_offset();
        Partition {
            index,
            log: Mutex::new(log),
            durable: watch::channel(flushed).0,
            flushing: tokio::sync::Mutex::new(()),
            appended: watch::channel(0).0,
        }
    }

    /// Wakes the fetches waiting on this partition.
    pub fn notify_appended(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes after appends to this partition.
    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// Waits until every offset below `end` is on disk, fsyncing if nobody else is:
    /// appends made with `PartitionLog::append_deferred` are acknowledged after this.
    /// Concurrent waiters share one fsync.
    pub async fn wait_durable(self: &Arc<Self>, end: i64) -> Result<(), LogError> {
        loop {
            if *self.durable.borrow() >= end {
                return Ok(());
            }
            let _gate = self.flushing.lock().await;
            if *self.durable.borrow() >= end {
                return Ok(());
            }
            let partition = Arc::clone(self);
            let dir = partition
                .log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .dir()
                .to_owned();
            let flushed = tokio::task::spawn_blocking(move || {
                let mut log = partition.log.lock().unwrap_or_else(|e| e.into_inner());
                log.flush().map(|()| log.flushed_offset())
            })
            .await
            .map_err(|_| LogError::Offline { path: dir })??;
            self.durable.send_replace(flushed);
            if flushed < end {
                // A successful flush covers the whole log, so this means `end` did not
                // come from this log; there is nothing this partition can make durable.
                return Ok(());
            }
        }
    }
}

/// A topic.
pub struct Topic {
    /// Topic name.
    pub name: String,
    /// Topic id (KIP-516), stable across restarts.
    pub id: Uuid,
    /// Partitions, indexed by partition number.
    pub partitions: Vec<Arc<Partition>>,
}

#[derive(Serialize, Deserialize)]
struct TopicFile {
    id: Uuid,
    partitions: u32,
}

/// Every topic of this broker.
pub struct TopicRegistry {
    data_dir: PathBuf,
    log_config: LogConfig,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Bumped after every create and delete, for the coordinator's topic metadata.
    changes: watch::Sender<u64>,
}

/// Kafka's topic name rules: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason| {
        Err(TopicError::InvalidName {
            name: name.chars().take(300).collect(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("empty");
    }
    if name.len() > 249 {
        return invalid("longer than 249 characters");
    }
    if name == "." || name == ".." {
        return invalid("`.` and `..` are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid("only ASCII letters, digits, `.`, `_` and `-` are allowed");
    }
    Ok(())
}

impl TopicRegistry {
    /// Loads every topic under `data_dir` and opens (recovers) its partition logs.
    pub fn open(data_dir: &Path, log_config: LogConfig) -> Result<TopicRegistry, TopicError> {
        let registry = TopicRegistry {
            data_dir: data_dir.to_owned(),
            log_config,
            topics: RwLock::new(BTreeMap::new()),
            changes: watch::channel(0).0,
        };
        let dir = registry.meta_dir();
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| TopicError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        std::fs::create_dir_all(registry.logs_dir()).map_err(io(&registry.logs_dir()))?;
        let mut loaded = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let path = entry.map_err(io(&dir))?.path();
            let Some(name) = path
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_suffix(".json"))
            else {
                continue;
            };
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            let file: TopicFile =
                serde_json::from_str(&text).map_err(|e| TopicError::Metadata {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            let topic = registry.open_topic(name, file.id, file.partitions)?;
            loaded.insert(name.to_owned(), Arc::new(topic));
        }
        tracing::info!(topics = loaded.len(), "topics loaded");
        registry.remove_retired();
        *registry.topics.write().unwrap_or_else(|e| e.into_inner()) = loaded;
        Ok(registry)
    }

    fn meta_dir(&self) -> PathBuf {
        self.data_dir.join("topics")
    }

    fn logs_dir(&self) -> PathBuf {
        self.data_dir.join("logs")
    }

    fn open_topic(&self, name: &str, id: Uuid, partitions: u32) -> Result<Topic, TopicError> {
        let partitions = (0..partitions as i32)
            .map(|index| {
                let dir = self.logs_dir().join(format!("{name}-{index}"));
                Ok(Arc::new(Partition::new(
                    index,
                    PartitionLog::open(&dir, &self.log_config)?,
                )))
            })
            .collect::<Result<Vec<_>, TopicError>>()?;
        Ok(Topic {
            name: name.to_owned(),
            id,
            partitions,
        })
    }

    /// The topic named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// The topic with id `id`.
    pub fn get_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|t| t.id == id)
            .cloned()
    }

    /// A receiver that changes after every topic creation and deletion (its value
    /// counts them); the coordinator driver watches it to re-send topic metadata.
    pub fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every topic, by name.
    pub fn list(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Creates a topic with `partitions` partitions (1..=`max_partitions`).
    pub fn create(
        &self,
        name: &str,
        partitions: i64,
        max_partitions: u32,
    ) -> Result<Arc<Topic>, TopicError> {
        validate_name(name)?;
        if partitions < 1 || partitions > i64::from(max_partitions) {
            return Err(TopicError::InvalidPartitions {
                count: partitions,
                max: max_partitions,
            });
        }
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        if topics.contains_key(name) {
            return Err(TopicError::AlreadyExists(name.to_owned()));
        }
        let id = Uuid::new_v4();
        // Directories left by a failed create or an interrupted delete must not come
        // back to life as this new topic's data: move them aside first.
        for index in 0..partitions as i32 {
            self.retire_partition_dir(name, index, Uuid::nil())?;
        }
        let topic = match self.open_topic(name, id, partitions as u32) {
            Ok(topic) => Arc::new(topic),
            Err(e) => {
                for index in 0..partitions as i32 {
                    let _ = self.retire_partition_dir(name, index, id);
                }
                self.remove_retired();
                return Err(e);
            }
        };
        let path = self.meta_dir().join(format!("{name}.json"));
        let body = serde_json::to_vec(&TopicFile {
            id,
            partitions: partitions as u32,
        })
        .unwrap_or_default();
        if let Err(source) = write_atomically(&path, &body) {
            for index in 0..partitions as i32 {
                let _ = self.retire_partition_dir(name, index, id);
            }
            self.remove_retired();
            return Err(TopicError::Io { path, source });
        }
        topics.insert(name.to_owned(), topic.clone());
        drop(topics);
        self.changes.send_modify(|n| *n += 1);
        tracing::info!(topic = name, partitions, %id, "topic created");
        Ok(topic)
    }

    /// Deletes a topic, as Kafka does: under the registry lock, each partition
    /// directory is renamed to `<topic>-<partition>.<id>-delete` and the metadata file
    /// removed, so a topic of the same name created right after (even by
    /// auto-creation racing the delete) starts from fresh directories; the renamed
    /// directories are then removed. Leftover `-delete` directories are removed at the
    /// next start.
    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let topic = {
            let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
            let topic = topics
                .get(name)
                .cloned()
                .ok_or_else(|| TopicError::Unknown(name.to_owned()))?;
            for partition in &topic.partitions {
                self.retire_partition_dir(name, partition.index, topic.id)?;
            }
            let path = self.meta_dir().join(format!("{name}.json"));
            std::fs::remove_file(&path).map_err(|source| TopicError::Io { path, source })?;
            topics.remove(name);
            topic
        };
        self.changes.send_modify(|n| *n += 1);
        self.remove_retired();
        tracing::info!(topic = name, "topic deleted");
        Ok(topic)
    }

    /// Renames `logs/<topic>-<index>` (if present) to a `-delete` name; `id` makes the
    /// new name unique.
    fn retire_partition_dir(&self, name: &str, index: i32, id: Uuid) -> Result<(), TopicError> {
        let dir = self.logs_dir().join(format!("{name}-{index}"));
        if !dir.exists() {
            return Ok(());
        }
        let id = if id.is_nil() { Uuid::new_v4() } else { id };
        let retired =
            self.logs_dir()
                .join(format!("{}.{}-delete", short(name, index), id.simple()));
        std::fs::rename(&dir, &retired).map_err(|source| TopicError::Io { path: dir, source })?;
        if let Ok(logs) = std::fs::File::open(self.logs_dir()) {
            let _ = logs.sync_all();
        }
        Ok(())
    }

    /// Removes every retired (`-delete`) partition directory; failures are logged and
    /// retried at the next start.
    pub fn remove_retired(&self) {
        let Ok(entries) = std::fs::read_dir(self.logs_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("-delete"))
            {
                if let Err(e) = std::fs::remove_dir_all(&path) {
                    tracing::warn!(
                        "cannot remove deleted partition directory {}: {e}",
                        path.display()
                    );
                }
            }
        }
    }
}

/// A retired directory name stays within file-name limits: a long topic name is cut
/// (the id keeps it unique).
fn short(name: &str, index: i32) -> String {
    let mut s = format!("{name}-{index}");
    s.truncate(200);
    s
}

/// Writes `body` to `path` via a temporary file, fsync and rename.
fn write_atomically(path: &Path, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    // A short temp name: `<topic>.json.tmp` would exceed 255 bytes for 247+ character
    // topic names.
    let tmp = path.with_file_name(format!(".{}.tmp", Uuid::new_v4().simple()));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(body)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate_name;

    #[test]
    fn kafka_topic_name_rules() {
        assert!(validate_name("orders.v1_eu-west").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name(".").is_err());
        assert!(validate_name("..").is_err());
        assert!(validate_name("has space").is_err());
        assert!(validate_name("slash/es").is_err());
        assert!(validate_name(&"a".repeat(249)).is_ok());
        assert!(validate_name(&"a".repeat(250)).is_err());
    }
}
