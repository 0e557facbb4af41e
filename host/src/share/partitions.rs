//! The share-partitions in memory: one [`drover_share::SharePartition`] per (share
//! group, topic, partition), each behind its own lock, loaded from the active offset
//! store the first time it is used and written back whenever it changes.
//!
//! - **Durable before answered**: every change a caller makes is written with
//!   [`SharePartitions::persist`] before the caller answers (acknowledgements) or hands
//!   records out (acquisitions: KIP-932 counts records acquired when the broker fails
//!   as delivered). A write that fails drops the share-partition from memory, so the
//!   next use reads the durable state again rather than serve one ahead of it.
//! - **Bounded**: at most `share.max_share_partitions` are held. A new one makes room
//!   by dropping one that holds no acquired record and that nobody is using (its state
//!   is durable); when there is none, the new one is refused ([`ShareError::Full`]).
//! - A new share-partition (no saved state) starts where `share.auto.offset.reset`
//!   says, and that start is written at once, so a restart does not move it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use drover_abi::{ShareStateRecord, ShareStateRun, TopicPartitions};
use drover_share::{
    AutoOffsetReset, RecordState, ShareCounters, ShareLimits, SharePartition, ShareSnapshot,
    ShareStats, StateRun,
};

use super::store::{ShareStateError, ShareStateStore};

/// A share-partition's key: share group, topic name, partition index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareKey {
    /// Share group id.
    pub group: Arc<str>,
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
}

/// Why a share-partition cannot be served now.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// `share.max_share_partitions` are held and each has records acquired.
    #[error("{0} share-partitions are held, each with records acquired")]
    Full(usize),
    /// No offset store keeps share state, or the store failed.
    #[error(transparent)]
    Store(#[from] ShareStateError),
    /// The saved state is damaged.
    #[error("share state of {0:?} is damaged: {1}")]
    Damaged(ShareKey, String),
}

/// One share-partition's place: its state once loaded, and the id of the topic it was
/// loaded for (a topic deleted and re-created under its name starts afresh).
#[derive(Debug, Default)]
pub struct Slot {
    state: Option<SharePartition>,
    topic_id: [u8; 16],
}

impl Slot {
    /// The state, when loaded.
    pub fn loaded(&mut self) -> Option<&mut SharePartition> {
        self.state.as_mut()
    }
}

/// Where the log of a share-partition is now, for loading it.
#[derive(Debug, Clone, Copy)]
pub struct LogBounds {
    /// The log start offset.
    pub start: i64,
    /// The log end offset.
    pub end: i64,
}

/// The broker's `[share]` settings and the group configs that override them per group.
pub struct GroupDefaults {
    /// The `[share]` settings.
    pub defaults: super::GroupSettings,
    /// Per-group overrides.
    pub configs: Arc<crate::broker::group_configs::GroupConfigs>,
}

/// The share-partitions in memory (module docs).
pub struct SharePartitions {
    limits: ShareLimits,
    groups: GroupDefaults,
    max: usize,
    table: Mutex<HashMap<ShareKey, Arc<Mutex<Slot>>>>,
    stores: Option<Arc<dyn ShareStateStore>>,
    /// Bumped when records become available again without an append (a release, a
    /// lock expiry), so waiting share fetches look again.
    available: tokio::sync::watch::Sender<u64>,
    /// The counters of share-partitions dropped from memory, so broker-wide totals
    /// (metrics) never go down.
    retired: Mutex<ShareCounters>,
}

impl SharePartitions {
    /// At most `max` share-partitions with `limits`, each group's lock duration and
    /// where its new ones start as `groups` says, persisted through `stores`.
    pub fn new(
        limits: ShareLimits,
        groups: GroupDefaults,
        max: usize,
        stores: Option<Arc<dyn ShareStateStore>>,
    ) -> SharePartitions {
        SharePartitions {
            limits,
            groups,
            max,
            table: Mutex::new(HashMap::new()),
            stores,
            available: tokio::sync::watch::channel(0).0,
            retired: Mutex::new(ShareCounters::default()),
        }
    }

    /// Wakes share fetches waiting for records: some became available again.
    pub fn notify_available(&self) {
        self.available.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes when records become available again without an append.
    pub fn subscribe_available(&self) -> tokio::sync::watch::Receiver<u64> {
        self.available.subscribe()
    }

    /// The limits every share-partition keeps.
    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// What `group`'s delivery follows: its group configs over the `[share]` settings
    /// (a stored value that no longer reads — none can, configs being checked when
    /// altered — falls back to the setting).
    pub fn settings(&self, group: &str) -> super::GroupSettings {
        use crate::broker::group_configs::{ISOLATION_LEVEL, LOCK_DURATION_MS, RESET};
        let d = self.groups.defaults;
        let o = self.groups.configs.overrides(group);
        if o.is_empty() {
            return d;
        }
        super::GroupSettings {
            reset: o
                .get(RESET)
                .and_then(|v| AutoOffsetReset::parse(v).ok())
                .unwrap_or(d.reset),
            read_committed: o
                .get(ISOLATION_LEVEL)
                .map_or(d.read_committed, |v| v == "read_committed"),
            lock_duration_ms: o
                .get(LOCK_DURATION_MS)
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.lock_duration_ms),
        }
    }

    /// The limits of `group`'s share-partitions: the broker's, with the group's lock
    /// duration.
    fn group_limits(&self, settings: &super::GroupSettings) -> ShareLimits {
        ShareLimits {
            record_lock_duration_ms: settings.lock_duration_ms,
            ..self.limits
        }
    }

    /// How many share-partitions are in memory.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn table(&self) -> MutexGuard<'_, HashMap<ShareKey, Arc<Mutex<Slot>>>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The place of `key`, made (and room made for it) when it is new.
    pub fn slot(&self, key: &ShareKey) -> Result<Arc<Mutex<Slot>>, ShareError> {
        let mut table = self.table();
        if let Some(slot) = table.get(key) {
            return Ok(Arc::clone(slot));
        }
        if table.len() >= self.max {
            let idle = table.iter().find_map(|(k, slot)| {
                if Arc::strong_count(slot) > 1 {
                    return None;
                }
                let held = slot.try_lock().ok()?;
                let idle = held.state.as_ref().is_none_or(|p| p.acquired_count() == 0);
                idle.then(|| (k.clone(), held.state.as_ref().map(SharePartition::counters)))
            });
            match idle {
                Some((k, counters)) => {
                    table.remove(&k);
                    if let Some(c) = counters {
                        self.retire(&c);
                    }
                }
                None => return Err(ShareError::Full(table.len())),
            }
        }
        let slot = Arc::new(Mutex::new(Slot::default()));
        table.insert(key.clone(), Arc::clone(&slot));
        Ok(slot)
    }

    /// The state of `key` (of the topic with id `topic_id`) in `slot`, read from the
    /// store when not loaded yet (a new one starts where `share.auto.offset.reset` says,
    /// at `now_ms`, in a log at `log`; `offset_at` is ListOffsets by timestamp), with the
    /// log start applied. State saved for another topic id (a topic of the same name,
    /// since deleted) is not used: the share-partition starts afresh.
    pub fn load<'s>(
        &self,
        key: &ShareKey,
        slot: &'s mut Slot,
        topic_id: [u8; 16],
        log: LogBounds,
        now_ms: i64,
        offset_at: impl FnOnce(i64) -> Option<i64>,
    ) -> Result<&'s mut SharePartition, ShareError> {
        if slot.topic_id != topic_id {
            self.drop_state(slot);
            slot.topic_id = topic_id;
        }
        if slot.state.is_none() {
            let settings = self.settings(&key.group);
            let limits = self.group_limits(&settings);
            let stores = self.stores()?;
            let partitions = [TopicPartitions {
                topic: key.topic.as_ref().into(),
                partitions: vec![key.partition].into(),
            }];
            let saved = stores.read_share_state(&key.group, &partitions)?;
            let saved = saved
                .into_iter()
                .find(|r| r.topic_id == topic_id || r.topic_id == [0; 16]);
            let partition = match saved {
                Some(record) => {
                    let snapshot = snapshot_of(&record).ok_or_else(|| {
                        ShareError::Damaged(key.clone(), "unknown record state".into())
                    })?;
                    SharePartition::restore(limits, &snapshot).ok_or_else(|| {
                        ShareError::Damaged(key.clone(), "runs do not form a window".into())
                    })?
                }
                None => {
                    let start = settings
                        .reset
                        .start_offset(log.start, log.end, now_ms, offset_at);
                    SharePartition::new(limits, start)
                }
            };
            // Written at once: the new state epoch, or where a new one starts.
            stores.write_share_state(&[record_of(key, topic_id, &partition.snapshot(), now_ms)])?;
            slot.state = Some(partition);
        }
        let Some(partition) = slot.state.as_mut() else {
            unreachable!("loaded above");
        };
        if let Some(snapshot) = partition.advance_to(log.start) {
            if let Err(e) = self.write(key, topic_id, &snapshot, now_ms) {
                self.drop_state(slot);
                return Err(e);
            }
        }
        slot.state
            .as_mut()
            .ok_or_else(|| ShareError::Damaged(key.clone(), "dropped".into()))
    }

    /// Writes `snapshot` of `key` durably; on failure drops `slot`'s state (module docs).
    pub fn persist(
        &self,
        key: &ShareKey,
        slot: &mut Slot,
        snapshot: &ShareSnapshot,
        now_ms: i64,
    ) -> Result<(), ShareError> {
        let written = self.write(key, slot.topic_id, snapshot, now_ms);
        if written.is_err() {
            self.drop_state(slot);
        }
        written
    }

    /// Drops `slot`'s state from memory (the next use reads the durable one), keeping
    /// its counters in the broker-wide totals.
    fn drop_state(&self, slot: &mut Slot) {
        if let Some(p) = slot.state.take() {
            self.retire(&p.counters());
        }
    }

    fn retire(&self, counters: &ShareCounters) {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(counters);
    }

    /// The counters of every share-partition dropped from memory so far; with those of
    /// the loaded ones ([`Self::stats`]), the broker-wide totals since start.
    pub fn retired_counters(&self) -> ShareCounters {
        *self.retired.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What operators see of every loaded share-partition ([`drover_share::ShareStats`]),
    /// in key order; `group` only that group's. Each is read under its lock, one at a
    /// time.
    pub fn stats(&self, group: Option<&str>) -> Vec<(ShareKey, ShareStats)> {
        let mut slots: Vec<(ShareKey, Arc<Mutex<Slot>>)> = self
            .table()
            .iter()
            .filter(|(k, _)| group.is_none_or(|g| &*k.group == g))
            .map(|(k, s)| (k.clone(), Arc::clone(s)))
            .collect();
        slots.sort_by(|a, b| a.0.cmp(&b.0));
        slots
            .into_iter()
            .filter_map(|(key, slot)| {
                let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                slot.state.as_ref().map(|p| (key, p.stats()))
            })
            .collect()
    }

    /// Replaces the durable state of `group`'s share-partitions that `affected` picks
    /// (AlterShareGroupOffsets, DeleteShareGroupOffsets): holds the lock of each one in
    /// memory, in key order, while `write` changes the store, then drops their states,
    /// so the next ShareFetch reads what `write` left (Kafka reloads a share-partition
    /// whose state epoch moved). The group has no members then; a share-partition
    /// first used while `write` runs may have read the state before it.
    pub fn replace_durable<R>(
        &self,
        group: &str,
        affected: impl Fn(&ShareKey) -> bool,
        write: impl FnOnce() -> R,
    ) -> R {
        let mut slots: Vec<(ShareKey, Arc<Mutex<Slot>>)> = self
            .table()
            .iter()
            .filter(|(k, _)| &*k.group == group && affected(k))
            .map(|(k, s)| (k.clone(), Arc::clone(s)))
            .collect();
        slots.sort_by(|a, b| a.0.cmp(&b.0));
        let mut held: Vec<MutexGuard<'_, Slot>> = slots
            .iter()
            .map(|(_, s)| s.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let out = write();
        for slot in &mut held {
            self.drop_state(slot);
        }
        out
    }

    fn write(
        &self,
        key: &ShareKey,
        topic_id: [u8; 16],
        snapshot: &ShareSnapshot,
        now_ms: i64,
    ) -> Result<(), ShareError> {
        self.stores()?
            .write_share_state(&[record_of(key, topic_id, snapshot, now_ms)])
            .map_err(ShareError::from)
    }

    fn stores(&self) -> Result<&Arc<dyn ShareStateStore>, ShareError> {
        self.stores.as_ref().ok_or_else(|| {
            ShareError::Store(ShareStateError::Unsupported("(none configured)".into()))
        })
    }

    /// Ends the locks due at `now_ms` in every share-partition (writing each changed
    /// one); returns the earliest deadline left, ms.
    pub fn expire(&self, now_ms: i64) -> Option<i64> {
        let slots: Vec<(ShareKey, Arc<Mutex<Slot>>)> = self
            .table()
            .iter()
            .map(|(k, s)| (k.clone(), Arc::clone(s)))
            .collect();
        let mut next: Option<i64> = None;
        let mut released = false;
        for (key, slot) in slots {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            let Some(partition) = slot.state.as_mut() else {
                continue;
            };
            if let Some(snapshot) = partition.expire_locks(now_ms) {
                released = true;
                if let Err(e) = self.persist(&key, &mut slot, &snapshot, now_ms) {
                    crate::warn_limited!(
                        "share.state_write_failed",
                        "writing share state of {key:?} after lock expiry: {e}"
                    );
                    continue;
                }
            }
            if let Some(deadline) = slot.state.as_ref().and_then(SharePartition::poll_timeout) {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
            }
        }
        if released {
            self.notify_available();
        }
        next
    }

    /// Releases every record `member` of `group` holds (its share session closed or was
    /// evicted, or it left the group), writing each changed share-partition.
    pub fn release_member(&self, group: &str, member: &str, now_ms: i64) {
        let slots: Vec<(ShareKey, Arc<Mutex<Slot>>)> = self
            .table()
            .iter()
            .filter(|(k, _)| &*k.group == group)
            .map(|(k, s)| (k.clone(), Arc::clone(s)))
            .collect();
        for (key, slot) in slots {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            let Some(snapshot) = slot.state.as_mut().and_then(|p| p.release_member(member)) else {
                continue;
            };
            self.notify_available();
            if let Err(e) = self.persist(&key, &mut slot, &snapshot, now_ms) {
                crate::warn_limited!(
                    "share.state_write_failed",
                    "writing share state of {key:?} after releasing {member}: {e}"
                );
            }
        }
    }
}

/// `snapshot` of `key` (of the topic with id `topic_id`) as the offset store keeps it.
pub fn record_of(
    key: &ShareKey,
    topic_id: [u8; 16],
    snapshot: &ShareSnapshot,
    now_ms: i64,
) -> ShareStateRecord {
    ShareStateRecord {
        group: key.group.as_ref().into(),
        topic: key.topic.as_ref().into(),
        partition: key.partition,
        topic_id,
        state_epoch: snapshot.state_epoch,
        start_offset: snapshot.start_offset,
        runs: snapshot
            .runs
            .iter()
            .map(|r| ShareStateRun {
                first_offset: r.first_offset,
                last_offset: r.last_offset,
                state: r.state.code(),
                delivery_count: r.delivery_count,
            })
            .collect(),
        write_time_ms: now_ms,
    }
}

/// The snapshot a store's record holds; `None` for a state number this build does not
/// know.
pub fn snapshot_of(record: &ShareStateRecord) -> Option<ShareSnapshot> {
    Some(ShareSnapshot {
        start_offset: record.start_offset,
        state_epoch: record.state_epoch,
        runs: record
            .runs
            .iter()
            .map(|r| {
                Some(StateRun {
                    first_offset: r.first_offset,
                    last_offset: r.last_offset,
                    state: RecordState::from_code(r.state)?,
                    delivery_count: r.delivery_count,
                })
            })
            .collect::<Option<Vec<_>>>()?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use drover_share::LogBatch;

    use super::*;

    /// Share states in memory, keyed as the offset stores key them.
    #[derive(Default)]
    struct MemStore(Mutex<BTreeMap<(String, String, i32), ShareStateRecord>>);

    impl ShareStateStore for MemStore {
        fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), ShareStateError> {
            let mut held = self.0.lock().unwrap();
            for r in batch {
                held.insert(
                    (r.group.to_string(), r.topic.to_string(), r.partition),
                    r.clone(),
                );
            }
            Ok(())
        }

        fn read_share_state(
            &self,
            group: &str,
            partitions: &[TopicPartitions],
        ) -> Result<Vec<ShareStateRecord>, ShareStateError> {
            let held = self.0.lock().unwrap();
            Ok(partitions
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(move |p| (group.to_owned(), t.topic.to_string(), *p))
                })
                .filter_map(|k| held.get(&k).cloned())
                .collect())
        }
    }

    const TOPIC_ID: [u8; 16] = [7; 16];

    fn partitions(store: Arc<MemStore>) -> SharePartitions {
        let dir = tempfile::tempdir().unwrap();
        let configs = crate::broker::group_configs::GroupConfigs::open(dir.path()).unwrap();
        let defaults = super::super::GroupSettings {
            reset: AutoOffsetReset::Earliest,
            read_committed: false,
            lock_duration_ms: 30_000,
        };
        SharePartitions::new(
            ShareLimits::default(),
            GroupDefaults {
                defaults,
                configs: Arc::new(configs),
            },
            10,
            Some(store),
        )
    }

    fn key() -> ShareKey {
        ShareKey {
            group: Arc::from("g"),
            topic: Arc::from("t"),
            partition: 0,
        }
    }

    /// Loads the share-partition of [`key`] over a log of `0..10` and acquires up to
    /// `max` records for member `m`; returns its stats.
    fn acquire(shares: &SharePartitions, max: usize) -> ShareStats {
        let slot = shares.slot(&key()).unwrap();
        let mut slot = slot.lock().unwrap();
        let log = LogBounds { start: 0, end: 10 };
        let p = shares
            .load(&key(), &mut slot, TOPIC_ID, log, 0, |_| None)
            .unwrap();
        let from = p.next_fetch_offset().unwrap();
        let batches: Vec<LogBatch> = (from..10)
            .map(|o| LogBatch {
                first_offset: o,
                last_offset: o,
                producer_id: -1,
                transactional: false,
                control: false,
            })
            .collect();
        let acquired = p.acquire(&Arc::from("m"), 0, from, &batches, &[], max);
        let snapshot = acquired.persist.unwrap();
        shares.persist(&key(), &mut slot, &snapshot, 0).unwrap();
        slot.loaded().unwrap().stats()
    }

    #[test]
    fn replacing_the_durable_state_drops_the_one_in_memory_and_keeps_its_counters() {
        let store = Arc::new(MemStore::default());
        let shares = partitions(Arc::clone(&store));
        let before = acquire(&shares, 4);
        assert_eq!((before.start_offset, before.window.acquired), (0, 4));
        assert_eq!(shares.stats(Some("g")).len(), 1);
        assert!(shares.stats(Some("other")).is_empty());

        // As AlterShareGroupOffsets writes it: start 7, nothing in flight.
        let mut record = store.0.lock().unwrap()[&("g".to_owned(), "t".to_owned(), 0)].clone();
        record.start_offset = 7;
        record.runs = Vec::new().into();
        let written = shares.replace_durable(
            "g",
            |k| &*k.topic == "t",
            || store.write_share_state(&[record]),
        );
        assert!(written.is_ok());
        // Dropped from memory, its counters kept in the totals.
        assert!(shares.stats(None).is_empty());
        assert_eq!(shares.retired_counters().deliveries[0], 4);

        // The next use reads the new state: from 7, every record a first delivery.
        let after = acquire(&shares, 10);
        assert_eq!((after.start_offset, after.end_offset), (7, 10));
        assert_eq!(after.window.acquired, 3);
        assert_eq!(after.counters.deliveries[0], 3);
    }

    #[test]
    fn replacing_another_groups_state_leaves_this_one_in_memory() {
        let store = Arc::new(MemStore::default());
        let shares = partitions(Arc::clone(&store));
        acquire(&shares, 2);
        let ran = shares.replace_durable("other", |_| true, || true);
        assert!(ran);
        assert_eq!(shares.stats(Some("g")).len(), 1);
        assert_eq!(shares.retired_counters(), ShareCounters::default());
    }
}
