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

use super::auto_create::{AutoCreateBudget, AutoCreateLimiter};
use super::topic_config::{self, Overrides};
use super::topic_config_store::TopicConfigStore;
use crate::log::{FileCache, LogConfig, LogError, PartitionLog};

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
    /// The name is one of Kafka's internal topics ([`INTERNAL_TOPICS`]).
    #[error("`{0}` is a Kafka internal topic name: creating it is prohibited")]
    Internal(String),
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
    /// A new partition count that does not grow the topic (partitions are never
    /// removed).
    #[error("topic `{name}` has {current} partition(s); {requested} would not be an increase")]
    NotAnIncrease {
        /// The topic.
        name: String,
        /// Its partition count.
        current: usize,
        /// The requested total.
        requested: i64,
    },
    /// The broker would hold more partitions than its open-file limit leaves room for
    /// (each partition keeps its active segment's `.log` open; see
    /// [`super::descriptors`]).
    #[error(
        "{requested} more partition(s) would make {total}, above this broker's limit of {max} \
         (set by its open-file limit)"
    )]
    PartitionLimit {
        /// Partitions the request would add.
        requested: i64,
        /// Partitions after the request.
        total: i64,
        /// The most partitions this broker holds.
        max: usize,
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
    flushing: Arc<tokio::sync::Mutex<()>>,
    /// Bumped after appends; long-polling fetches of this partition wait on it.
    appended: watch::Sender<u64>,
    /// Its recent produce rate, counted by Produce after each append.
    pub produce_rate: super::produce_rate::ProduceRate,
}

impl Partition {
    fn new(index: i32, log: PartitionLog, produce_rate_window_ms: u64) -> Partition {
        let flushed = log.flushed_offset();
        Partition {
            index,
            log: Mutex::new(log),
            durable: watch::channel(flushed).0,
            flushing: Arc::new(tokio::sync::Mutex::new(())),
            appended: watch::channel(0).0,
            produce_rate: super::produce_rate::ProduceRate::new(
                produce_rate_window_ms,
                crate::clock::now_ms(),
            ),
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
    /// Concurrent waiters share one fsync, and the fsync runs without the log's lock,
    /// so appends to the partition go on while it runs (and the next fsync covers them).
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
            let flushed = tokio::task::spawn_blocking(move || partition.flush_unlocked())
                .await
                .unwrap_or_else(|_| Err(self.offline_error()))?;
            self.durable.send_replace(flushed);
            if flushed < end {
                // A successful flush covers the whole log, so this means `end` did not
                // come from this log; there is nothing this partition can make durable.
                return Ok(());
            }
        }
    }

    /// Starts a flush on the blocking pool without waiting for it, unless one is
    /// running: for `log.flush_messages` > 1, whose flushes acknowledgements do not
    /// wait for. A failure takes the log offline (and is logged).
    pub fn flush_in_background(self: &Arc<Self>) {
        let Ok(gate) = Arc::clone(&self.flushing).try_lock_owned() else {
            return;
        };
        let partition = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _gate = gate;
            match partition.flush_unlocked() {
                Ok(flushed) => {
                    partition.durable.send_replace(flushed);
                }
                Err(e) => crate::warn_limited!(
                    "log.background_flush_failed",
                    partition = partition.index,
                    "flush failed, partition offline: {e}"
                ),
            }
        });
    }

    /// Fsyncs the log up to its current end, holding the log's lock only to take and
    /// settle the [`crate::log::FlushTicket`]; returns the offset now durable.
    fn flush_unlocked(&self) -> Result<i64, LogError> {
        let ticket = self.lock_log().flush_ticket()?;
        let Some(ticket) = ticket else {
            return Ok(self.lock_log().flushed_offset());
        };
        match ticket.file.sync_data() {
            Ok(()) => {
                let mut log = self.lock_log();
                log.flush_done(ticket.end);
                Ok(log.flushed_offset())
            }
            Err(e) => {
                self.lock_log().flush_failed();
                Err(LogError::Io {
                    path: ticket.path,
                    source: e,
                })
            }
        }
    }

    /// Writes a transaction marker (a control batch) into this partition under its
    /// lock, fsynced as its `flush_messages` says, and wakes waiting fetches: see
    /// [`PartitionLog::append_txn_marker`]. Returns the marker's offset. Blocking
    /// (a write and maybe an fsync): call from a blocking thread.
    ///
    /// Errors: [`LogError::Producer`] for a fenced epoch (Kafka's
    /// `INVALID_PRODUCER_EPOCH`), [`LogError::Io`], [`LogError::Offline`].
    pub fn append_txn_marker(&self, marker: &crate::log::TxnMarker) -> Result<i64, LogError> {
        let offset = self
            .lock_log()
            .append_txn_marker(marker, crate::clock::now_ms())?;
        let _ = self.durable.send_replace(self.lock_log().flushed_offset());
        self.notify_appended();
        Ok(offset)
    }

    /// An operator's abort of `producer_id`'s transaction ongoing in this partition
    /// ([`PartitionLog::abort_open_transaction`]), waking waiting fetches. Blocking: call
    /// from a blocking thread; the caller waits for durability
    /// ([`Self::wait_durable`]) with the marker's offset + 1.
    ///
    /// Errors: as [`Self::append_txn_marker`].
    pub fn abort_open_transaction(&self, producer_id: i64) -> Result<Option<(i64, i64)>, LogError> {
        let aborted = self
            .lock_log()
            .abort_open_transaction(producer_id, crate::clock::now_ms())?;
        if aborted.is_some() {
            self.notify_appended();
        }
        Ok(aborted)
    }

    /// The partition's last stable offset ([`PartitionLog::last_stable_offset`]).
    pub fn last_stable_offset(&self) -> i64 {
        self.lock_log().last_stable_offset()
    }

    /// The partition's log, locked (a panic while it was held does not poison it: the
    /// log takes itself offline on failed I/O).
    pub fn lock_log(&self) -> std::sync::MutexGuard<'_, PartitionLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn offline_error(&self) -> LogError {
        LogError::Offline {
            path: self.lock_log().dir().to_owned(),
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

/// Bounds of a [`TopicRegistry`]: open files, partitions, auto-creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicLimits {
    /// Capacity of the broker-wide cache of open segment files (`[log]
    /// open_files_cache`), in files.
    pub open_files_cache: usize,
    /// The most partitions of all topics together; creating or growing a topic beyond
    /// it is refused with [`TopicError::PartitionLimit`]. Topics already on disk are
    /// loaded whatever their number.
    pub max_total_partitions: usize,
    /// `topics.auto_create_max_per_request`: topics one request may auto-create.
    pub auto_create_per_request: u32,
    /// `topics.auto_create_per_sec`: topics the broker auto-creates per second.
    pub auto_create_per_sec: u32,
    /// `coordinator.produce_rate_window_ms`: the window of each partition's produce
    /// rate, ms.
    pub produce_rate_window_ms: u64,
}

impl TopicLimits {
    /// The limits `config` sets, with [`TopicLimits::max_total_partitions`] from the
    /// process's open-file limit ([`super::descriptors::DescriptorBudget`]), whose soft
    /// value is first raised to the hard one
    /// ([`super::descriptors::raise_soft_limit`]), as the broker does at startup.
    pub fn from_config(config: &crate::config::Config) -> TopicLimits {
        let limit = super::descriptors::raise_soft_limit();
        let budget = super::descriptors::DescriptorBudget::with_limit(config, limit);
        TopicLimits {
            open_files_cache: usize::try_from(budget.open_files_cache).unwrap_or(usize::MAX),
            max_total_partitions: budget.max_partitions(),
            auto_create_per_request: config.topics.auto_create_max_per_request,
            auto_create_per_sec: config.topics.auto_create_per_sec,
            produce_rate_window_ms: config.coordinator.produce_rate_window_ms,
        }
    }
}

impl Default for TopicLimits {
    /// The default cache and auto-creation bounds, and no partition limit.
    fn default() -> Self {
        let topics = crate::config::TopicsConfig::default();
        TopicLimits {
            open_files_cache: FileCache::DEFAULT_CAPACITY,
            max_total_partitions: usize::MAX,
            auto_create_per_request: topics.auto_create_max_per_request,
            auto_create_per_sec: topics.auto_create_per_sec,
            produce_rate_window_ms: crate::config::CoordinatorSection::default()
                .produce_rate_window_ms,
        }
    }
}

/// Every topic of this broker.
pub struct TopicRegistry {
    data_dir: PathBuf,
    log_config: LogConfig,
    /// Per-topic overrides of `log_config` (DescribeConfigs / AlterConfigs).
    configs: TopicConfigStore,
    /// Open segment files of every partition log.
    files: Arc<FileCache>,
    /// See [`TopicLimits::max_total_partitions`].
    max_total_partitions: usize,
    /// Bounds on auto-creation.
    auto_create: AutoCreateLimiter,
    /// See [`TopicLimits::produce_rate_window_ms`].
    produce_rate_window_ms: u64,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Bumped after every create, delete and partition addition, for the coordinator's
    /// topic metadata.
    changes: watch::Sender<u64>,
}

/// Kafka's internal topic names (`Topic.GROUP_METADATA_TOPIC_NAME`,
/// `TRANSACTION_STATE_TOPIC_NAME`, `SHARE_GROUP_STATE_TOPIC_NAME`). Drover keeps what
/// they hold in the offset stores and the transaction store, never in a topic; the names
/// stay reserved as Kafka's tools expect: CreateTopics answers INVALID_REQUEST ("Creation
/// of internal topic … is prohibited"), DeleteTopics INVALID_REQUEST, and they are never
/// auto-created.
pub const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// Whether `name` is one of [`INTERNAL_TOPICS`] or collides with one as Kafka's
/// `Topic.hasCollision` defines it (`.` and `_` count as the same character, since
/// metric names replace one by the other).
pub fn is_internal(name: &str) -> bool {
    let normalized = name.replace('.', "_");
    INTERNAL_TOPICS.contains(&normalized.as_str())
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
    /// Loads every topic under `data_dir` and opens (recovers) its partition logs, with
    /// [`TopicLimits::default`].
    pub fn open(data_dir: &Path, log_config: LogConfig) -> Result<TopicRegistry, TopicError> {
        TopicRegistry::open_with(data_dir, log_config, TopicLimits::default())
    }

    /// [`Self::open`] with explicit `limits`.
    pub fn open_with(
        data_dir: &Path,
        log_config: LogConfig,
        limits: TopicLimits,
    ) -> Result<TopicRegistry, TopicError> {
        let configs = TopicConfigStore::open(data_dir).map_err(|source| TopicError::Io {
            path: data_dir.join("topic-configs"),
            source,
        })?;
        let registry = TopicRegistry {
            data_dir: data_dir.to_owned(),
            log_config,
            configs,
            files: FileCache::new(limits.open_files_cache),
            max_total_partitions: limits.max_total_partitions,
            produce_rate_window_ms: limits.produce_rate_window_ms,
            auto_create: AutoCreateLimiter::new(
                limits.auto_create_per_request,
                limits.auto_create_per_sec,
            ),
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
        let partitions: usize = loaded.values().map(|t| t.partitions.len()).sum();
        tracing::info!(topics = loaded.len(), partitions, "topics loaded");
        if partitions > registry.max_total_partitions {
            tracing::warn!(
                partitions,
                max = registry.max_total_partitions,
                "more partitions on disk than the open-file limit leaves room for: new \
                 topics and partitions are refused until some are deleted or the limit \
                 is raised"
            );
        }
        registry.remove_retired();
        *registry.topics.write().unwrap_or_else(|e| e.into_inner()) = loaded;
        Ok(registry)
    }

    fn meta_dir(&self) -> PathBuf {
        self.data_dir.join("topics")
    }

    /// The directory of the partition logs, `<data_dir>/logs` (DescribeLogDirs' one log
    /// directory).
    pub fn logs_dir(&self) -> PathBuf {
        self.data_dir.join("logs")
    }

    fn open_topic(&self, name: &str, id: Uuid, partitions: u32) -> Result<Topic, TopicError> {
        let config = self.topic_log_config(name);
        let partitions = (0..partitions as i32)
            .map(|index| {
                let dir = self.logs_dir().join(format!("{name}-{index}"));
                Ok(Arc::new(Partition::new(
                    index,
                    PartitionLog::open_in(&dir, &config, &self.files)?,
                    self.produce_rate_window_ms,
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

    /// A receiver that changes after every topic creation, deletion and partition
    /// addition (its value counts them); the coordinator driver watches it to re-send
    /// topic metadata, so groups rebalance when a topic grows.
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
        self.create_with_id(name, Uuid::new_v4(), partitions, max_partitions)
    }

    /// Creates a topic with a given id (cluster mode: every broker creates its copy of
    /// a topic with the id recorded in ZooKeeper).
    pub fn create_with_id(
        &self,
        name: &str,
        id: Uuid,
        partitions: i64,
        max_partitions: u32,
    ) -> Result<Arc<Topic>, TopicError> {
        self.create_with_configs(name, id, partitions, max_partitions, &Overrides::new())
    }

    /// [`Self::create_with_id`] with config overrides (CreateTopics `configs`, already
    /// validated with [`topic_config::validate`]). They are stored before the logs are
    /// opened, replacing whatever a topic of the same name left behind.
    pub fn create_with_configs(
        &self,
        name: &str,
        id: Uuid,
        partitions: i64,
        max_partitions: u32,
        configs: &Overrides,
    ) -> Result<Arc<Topic>, TopicError> {
        validate_name(name)?;
        if is_internal(name) {
            return Err(TopicError::Internal(name.to_owned()));
        }
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
        self.check_total(&topics, partitions)?;

        // Directories left by a failed create or an interrupted delete must not come
        // back to life as this new topic's data: move them aside first.
        for index in 0..partitions as i32 {
            self.retire_partition_dir(name, index, Uuid::nil())?;
        }
        self.persist_configs(name, configs)?;
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

    /// The broker's `[log]` settings, every topic's defaults.
    pub fn base_log_config(&self) -> &LogConfig {
        &self.log_config
    }

    /// The config overrides of topic `name` (empty if none).
    pub fn overrides(&self, name: &str) -> Overrides {
        self.configs.get(name)
    }

    /// Writes topic `name`'s overrides durably (`<data_dir>/topic-configs/<topic>.json`,
    /// replaced atomically; an empty set removes the file). Errors: [`TopicError::Io`].
    fn persist_configs(&self, name: &str, configs: &Overrides) -> Result<(), TopicError> {
        self.configs
            .put(name, configs)
            .map_err(|source| TopicError::Io {
                path: self.data_dir.join("topic-configs"),
                source,
            })
    }

    /// The settings of topic `name`'s logs: the broker's with its overrides applied.
    pub fn topic_log_config(&self, name: &str) -> LogConfig {
        topic_config::effective(&self.log_config, &self.configs.get(name))
    }

    /// Replaces the overrides of topic `name` (validated by the caller) and applies
    /// them to its running logs: retention and roll settings take effect at the next
    /// retention pass and append. `persist` false only updates memory (cluster mode,
    /// where ZooKeeper holds them). Errors: [`TopicError::Unknown`], [`TopicError::Io`].
    pub fn set_overrides(
        &self,
        name: &str,
        configs: &Overrides,
        persist: bool,
    ) -> Result<(), TopicError> {
        let topic = self
            .get(name)
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))?;
        if persist {
            self.persist_configs(name, configs)?;
        } else {
            self.configs.cache(name, configs.clone());
        }
        let config = self.topic_log_config(name);
        for partition in &topic.partitions {
            partition.lock_log().set_config(&config)?;
        }
        Ok(())
    }

    /// What one Metadata or Produce request may auto-create (see
    /// [`super::auto_create`]).
    pub fn auto_create_budget(&self) -> AutoCreateBudget<'_> {
        self.auto_create.request()
    }

    /// The cache of open segment files the partition logs share.
    pub fn files(&self) -> &Arc<FileCache> {
        &self.files
    }

    /// Partitions of all topics together.
    pub fn partition_count(&self) -> usize {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.values().map(|t| t.partitions.len()).sum()
    }

    /// Whether `more` partitions fit under [`TopicLimits::max_total_partitions`]
    /// beside those in `topics`.
    fn check_total(
        &self,
        topics: &BTreeMap<String, Arc<Topic>>,
        more: i64,
    ) -> Result<(), TopicError> {
        let current: usize = topics.values().map(|t| t.partitions.len()).sum();
        let total = current as i64 + more;
        if total > self.max_total_partitions.min(i64::MAX as usize) as i64 {
            return Err(TopicError::PartitionLimit {
                requested: more,
                total,
                max: self.max_total_partitions,
            });
        }
        Ok(())
    }

    /// Checks what [`Self::add_partitions`] would check, without changing anything
    /// (CreatePartitions with `validate_only`); returns the topic as it is.
    pub fn check_add_partitions(
        &self,
        name: &str,
        count: i64,
        max_partitions: u32,
    ) -> Result<Arc<Topic>, TopicError> {
        let topic = self
            .get(name)
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))?;
        check_growth(&topic, count, max_partitions)?;
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        self.check_total(&topics, count - topic.partitions.len() as i64)?;
        drop(topics);
        Ok(topic)
    }

    /// Grows topic `name` to `count` partitions in total (Kafka's CreatePartitions;
    /// partitions are only ever added). Crash-safe like [`Self::create`]: under the
    /// registry lock, stale directories of the new partition numbers (left by a crash
    /// between these steps, or an interrupted delete) are moved aside (and removed
    /// once the topic has grown), the new
    /// partition logs are opened, and only then is the metadata file rewritten
    /// atomically with the new count; a crash before that rename leaves the topic as
    /// it was. The new [`Topic`] keeps the id and shares the existing partitions'
    /// `Arc<Partition>`s, so produces and fetches in flight are unaffected; it is
    /// published in the registry and the change is signalled to
    /// [`Self::subscribe_changes`].
    pub fn add_partitions(
        &self,
        name: &str,
        count: i64,
        max_partitions: u32,
    ) -> Result<Arc<Topic>, TopicError> {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        let old = topics
            .get(name)
            .cloned()
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))?;
        check_growth(&old, count, max_partitions)?;
        self.check_total(&topics, count - old.partitions.len() as i64)?;
        let added = old.partitions.len() as i32..count as i32;
        let mut stale = false;
        for index in added.clone() {
            stale |= self.logs_dir().join(format!("{name}-{index}")).exists();
            self.retire_partition_dir(name, index, Uuid::nil())?;
        }
        let undo = |opened: Vec<Arc<Partition>>| {
            drop(opened);
            for index in added.clone() {
                let _ = self.retire_partition_dir(name, index, Uuid::nil());
            }
            self.remove_retired();
        };
        let mut opened = Vec::with_capacity(added.len());
        for index in added.clone() {
            let dir = self.logs_dir().join(format!("{name}-{index}"));
            match PartitionLog::open_in(&dir, &self.topic_log_config(name), &self.files) {
                Ok(log) => opened.push(Arc::new(Partition::new(
                    index,
                    log,
                    self.produce_rate_window_ms,
                ))),
                Err(e) => {
                    undo(opened);
                    return Err(e.into());
                }
            }
        }
        let path = self.meta_dir().join(format!("{name}.json"));
        let body = serde_json::to_vec(&TopicFile {
            id: old.id,
            partitions: count as u32,
        })
        .unwrap_or_default();
        if let Err(source) = write_atomically(&path, &body) {
            // The rename may have happened (a failed directory fsync): put the old
            // count back, so a restart does not see partitions this call refused.
            let previous = serde_json::to_vec(&TopicFile {
                id: old.id,
                partitions: old.partitions.len() as u32,
            })
            .unwrap_or_default();
            if let Err(e) = write_atomically(&path, &previous) {
                tracing::error!(topic = name, "cannot restore {}: {e}", path.display());
            }
            undo(opened);
            return Err(TopicError::Io { path, source });
        }
        let mut partitions = old.partitions.clone();
        partitions.extend(opened);
        let topic = Arc::new(Topic {
            name: old.name.clone(),
            id: old.id,
            partitions,
        });
        topics.insert(name.to_owned(), Arc::clone(&topic));
        drop(topics);
        self.changes.send_modify(|n| *n += 1);
        if stale {
            self.remove_retired();
        }
        tracing::info!(
            topic = name,
            from = old.partitions.len(),
            partitions = count,
            id = %old.id,
            "partitions added"
        );
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
            if let Err(e) = self.configs.put(name, &Overrides::new()) {
                // Harmless until a topic of the same name is created, which replaces it.
                tracing::warn!(topic = name, "removing the topic's config overrides: {e}");
            }
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

/// Whether `topic` may grow to `count` partitions: more than it has, at most
/// `max_partitions`.
fn check_growth(topic: &Topic, count: i64, max_partitions: u32) -> Result<(), TopicError> {
    let current = topic.partitions.len();
    if count <= current as i64 {
        return Err(TopicError::NotAnIncrease {
            name: topic.name.clone(),
            current,
            requested: count,
        });
    }
    if count > i64::from(max_partitions) {
        return Err(TopicError::InvalidPartitions {
            count,
            max: max_partitions,
        });
    }
    Ok(())
}

/// A retired directory name stays within file-name limits: a long topic name is cut
/// (the id keeps it unique).
fn short(name: &str, index: i32) -> String {
    let mut s = format!("{name}-{index}");
    s.truncate(200);
    s
}

/// Writes `body` to `path` via a temporary file, fsync and rename.
/// The directory is fsynced too: after a crash `path` holds the old or the new body.
pub(crate) fn write_atomically(path: &Path, body: &[u8]) -> std::io::Result<()> {
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
    use super::*;
    use crate::log::test_util::batch;

    /// No fsync per append: these tests are not about durability.
    fn registry(dir: &Path) -> TopicRegistry {
        let config = LogConfig {
            flush_messages: u64::MAX,
            ..LogConfig::default()
        };
        TopicRegistry::open(dir, config).unwrap()
    }

    fn append(partition: &Partition, records: usize) {
        let data = batch(records, 10, 1_000);
        partition.log.lock().unwrap().append(&data, 1_000).unwrap();
    }

    fn end_offsets(topic: &Topic) -> Vec<i64> {
        topic
            .partitions
            .iter()
            .map(|p| p.log.lock().unwrap().log_end_offset())
            .collect()
    }

    #[test]
    fn txn_markers_through_the_partition_survive_a_crash() {
        use crate::log::{test_util::RawBatch, TxnMarker, TxnResult};
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicRegistry::open(dir.path(), LogConfig::default()).unwrap();
        let partition = Arc::clone(&topics.create("txn", 1, 100).unwrap().partitions[0]);
        let mut raw = RawBatch::from_records(&[(1_000, b"a".to_vec()), (1_000, b"b".to_vec())]);
        (raw.producer_id, raw.producer_epoch, raw.base_sequence) = (5, 1, 0);
        raw.attributes |= 1 << 4;
        partition.lock_log().append(&raw.encode(), 1_000).unwrap();
        assert_eq!(partition.last_stable_offset(), 0);
        let mut marker = TxnMarker {
            producer_id: 5,
            producer_epoch: 0,
            coordinator_epoch: 1,
            result: TxnResult::Abort,
            timestamp_ms: 1_000,
        };
        let fenced = partition.append_txn_marker(&marker).unwrap_err();
        assert_eq!(fenced.error_code(), 47);
        marker.producer_epoch = 1;
        assert_eq!(partition.append_txn_marker(&marker).unwrap(), 2);
        assert_eq!(partition.last_stable_offset(), 3);
        // `kill -9`: no close; the registry reopens the same data directory.
        drop((partition, topics));
        let topics = TopicRegistry::open(dir.path(), LogConfig::default()).unwrap();
        let log = topics.get("txn").unwrap().partitions[0]
            .lock_log()
            .last_stable_offset();
        assert_eq!(log, 3);
        let topic = topics.get("txn").unwrap();
        let aborted = topic.partitions[0].lock_log().aborted_transactions(0, 3);
        assert_eq!(
            aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset, a.last_offset))
                .collect::<Vec<_>>(),
            [(5, 0, 2)]
        );
    }

    #[test]
    fn add_partitions_grows_a_topic_and_keeps_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let topics = registry(dir.path());
        let before = topics.create("grow", 3, 100).unwrap();
        for (i, p) in before.partitions.iter().enumerate() {
            append(p, i + 1);
        }
        let mut changes = topics.subscribe_changes();
        changes.mark_unchanged();

        let after = topics.add_partitions("grow", 6, 100).unwrap();
        assert!(changes.has_changed().unwrap(), "changes watch not bumped");
        assert_eq!(after.id, before.id);
        assert_eq!(after.partitions.len(), 6);
        let indexes: Vec<i32> = after.partitions.iter().map(|p| p.index).collect();
        assert_eq!(indexes, [0, 1, 2, 3, 4, 5]);
        // The old partitions are the same objects: in-flight produce/fetch keep working.
        for (old, new) in before.partitions.iter().zip(&after.partitions) {
            assert!(Arc::ptr_eq(old, new));
        }
        assert_eq!(
            before.partitions.len(),
            3,
            "the old Arc<Topic> is untouched"
        );
        assert_eq!(end_offsets(&after), [1, 2, 3, 0, 0, 0]);
        assert!(Arc::ptr_eq(&topics.get("grow").unwrap(), &after));
        assert!(Arc::ptr_eq(&topics.get_by_id(before.id).unwrap(), &after));

        // The new partitions take appends; the old ones still do.
        append(&after.partitions[5], 4);
        append(&before.partitions[0], 1);
        assert_eq!(end_offsets(&after), [2, 2, 3, 0, 0, 4]);
        let first = after.partitions[0]
            .log
            .lock()
            .unwrap()
            .read(0, 1 << 20)
            .unwrap();
        assert!(!first.records.is_empty());

        // From disk: the new count, the same id, every partition's data.
        drop((before, after));
        drop(topics);
        let topics = registry(dir.path());
        let reopened = topics.get("grow").unwrap();
        assert_eq!(reopened.partitions.len(), 6);
        assert_eq!(end_offsets(&reopened), [2, 2, 3, 0, 0, 4]);
        assert_eq!(topics.list().len(), 1);
    }

    #[test]
    fn add_partitions_refuses_what_is_not_an_increase() {
        let dir = tempfile::tempdir().unwrap();
        let topics = registry(dir.path());
        let topic = topics.create("t", 3, 10).unwrap();
        append(&topic.partitions[1], 2);
        let mut changes = topics.subscribe_changes();
        changes.mark_unchanged();
        for count in [-1, 0, 2, 3] {
            let Err(err) = topics.add_partitions("t", count, 10) else {
                panic!("{count}: accepted");
            };
            assert!(
                matches!(err, TopicError::NotAnIncrease { current: 3, requested, .. } if requested == count),
                "{count}: {err}"
            );
            assert!(
                err.to_string().contains("would not be an increase"),
                "{err}"
            );
            assert!(topics.check_add_partitions("t", count, 10).is_err());
        }
        assert!(matches!(
            topics.add_partitions("t", 11, 10),
            Err(TopicError::InvalidPartitions { count: 11, max: 10 })
        ));
        assert!(matches!(
            topics.add_partitions("missing", 4, 10),
            Err(TopicError::Unknown(_))
        ));
        assert!(matches!(
            topics.check_add_partitions("missing", 4, 10),
            Err(TopicError::Unknown(_))
        ));
        // A check that passes changes nothing either.
        let checked = topics.check_add_partitions("t", 10, 10).unwrap();
        assert!(Arc::ptr_eq(&checked, &topic));
        assert!(!changes.has_changed().unwrap());
        assert!(Arc::ptr_eq(&topics.get("t").unwrap(), &topic));
        assert!(!dir.path().join("logs/t-3").exists());

        drop((topic, checked));
        drop(topics);
        let topics = registry(dir.path());
        let reopened = topics.get("t").unwrap();
        assert_eq!(end_offsets(&reopened), [0, 2, 0]);
    }

    #[test]
    fn stale_directories_of_new_partitions_do_not_come_back() {
        // A crash after the new partition directories were opened but before the
        // metadata file was rewritten leaves directories beyond the topic's count; the
        // next growth must start those partitions empty.
        let dir = tempfile::tempdir().unwrap();
        let topics = registry(dir.path());
        topics.create("s", 1, 10).unwrap();
        let stale = dir.path().join("logs/s-1");
        {
            let mut log = PartitionLog::open(&stale, &LogConfig::default()).unwrap();
            log.append(&batch(5, 10, 1_000), 1_000).unwrap();
            log.close().unwrap();
        }
        drop(topics);
        let topics = registry(dir.path());
        assert_eq!(topics.get("s").unwrap().partitions.len(), 1);

        let grown = topics.add_partitions("s", 2, 10).unwrap();
        assert_eq!(end_offsets(&grown), [0, 0]);
        let leftovers: Vec<String> = std::fs::read_dir(dir.path().join("logs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with("-delete"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn partitions_beyond_the_broker_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let limits = TopicLimits {
            open_files_cache: 4,
            max_total_partitions: 5,
            ..TopicLimits::default()
        };
        let topics = TopicRegistry::open_with(dir.path(), LogConfig::default(), limits).unwrap();
        topics.create("a", 3, 100).unwrap();
        let err = topics.create("b", 3, 100).err().unwrap();
        assert!(
            matches!(
                err,
                TopicError::PartitionLimit {
                    requested: 3,
                    total: 6,
                    max: 5
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("open-file limit"), "{err}");
        assert!(topics.get("b").is_none());
        assert!(!dir.path().join("logs/b-0").exists());
        topics.create("b", 2, 100).unwrap();
        assert!(matches!(
            topics.add_partitions("a", 4, 100),
            Err(TopicError::PartitionLimit { .. })
        ));
        assert!(matches!(
            topics.check_add_partitions("a", 4, 100),
            Err(TopicError::PartitionLimit { .. })
        ));
        topics.delete("b").unwrap();
        topics.add_partitions("a", 5, 100).unwrap();
        assert_eq!(topics.partition_count(), 5);
        assert!(topics.files().len() <= 4);
    }

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
