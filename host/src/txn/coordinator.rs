//! The transaction coordinator's synchronous driver: the state machine
//! ([`super::state::Transactions`]) behind one lock, and the durable store. Each call
//! decides, writes the change to the store, then applies it in memory and answers —
//! a change is never acknowledged before it is durable. Calls block (an fsync per
//! change): request handlers run them on the blocking pool.
//!
//! Transactions whose outcome is decided (Prepare*) are queued for the completion
//! driver ([`super::completion`]), which writes markers and completes group offsets.
//!
//! Standalone, the store is redb in the data directory and every transactional id is
//! served. In cluster mode ([`TxnCoordinator::open_cluster`]) the store is ZooKeeper
//! ([`super::zk_store`]) and the coordinator serves the ids of the slots it has taken
//! over ([`TxnCoordinator::take_over_slot`], [`TxnCoordinator::give_up_slot`]); a
//! request for another id is `NOT_COORDINATOR`, or `COORDINATOR_LOAD_IN_PROGRESS`
//! while its slot is owned here but not loaded yet. A write refused because another
//! broker took the slot over drops the slot's state here and answers `NOT_COORDINATOR`.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Condvar, Mutex, MutexGuard,
    },
    time::{Duration, Instant},
};

use tokio::sync::mpsc;

use super::{
    error::TxnError,
    state::{Caller, InitDecision, InitRequest, Limits, Transactions},
    store::{RedbStore, StoreError, TxnStore},
    types::{
        ProducerIdEpoch, StagedOffset, TopicPartition, TransactionalId, TxnMetadata, TxnState,
    },
    zk_store::ZkTxnStore,
};

/// Counters of the coordinator's work since startup (for `/metrics`).
#[derive(Debug, Default)]
pub struct TxnCounters {
    /// Open transactions aborted because their timeout passed.
    pub aborted_by_timeout: AtomicU64,
    /// Transaction markers written (one per partition per completed transaction).
    pub markers_written: AtomicU64,
    /// Transactions completed as committed.
    pub committed: AtomicU64,
    /// Transactions completed as aborted.
    pub aborted: AtomicU64,
    /// Transactional ids removed by `transactional.id.expiration.ms` (or
    /// `transactions.unused_id_expiration_ms` for ids that never opened a transaction).
    pub expired: AtomicU64,
    /// Idle transactional ids evicted to make room for a new one at
    /// `transactions.max_transactional_ids`.
    pub evicted: AtomicU64,
    /// InitProducerId calls for a new id refused by
    /// `transactions.new_ids_per_sec_per_client`.
    pub throttled: AtomicU64,
}

/// One group's offsets staged by one producer's open transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedGroupOffsets {
    /// The producer id and epoch.
    pub producer: ProducerIdEpoch,
    /// The consumer group.
    pub group: String,
    /// The offsets.
    pub offsets: Vec<(TopicPartition, StagedOffset)>,
}

/// Standalone, how long EndTxn waits for the transaction it ends to complete (its
/// markers written, all local) before answering, and how long AddPartitionsToTxn and
/// AddOffsetsToTxn wait for the producer's previous transaction to complete before
/// answering `CONCURRENT_TRANSACTIONS`: clients send the next transaction's first call
/// right after EndTxn returns, and kafkajs logs an ERROR line and waits 300 ms for each
/// such refusal (issue 28 item 6). Completing local markers takes an fsync or two, so
/// the wait is usually a few ms; in cluster mode markers may wait on another broker,
/// and both calls are answered at once, as Kafka does.
pub const COMPLETION_HOLD: Duration = Duration::from_millis(1_000);

/// Most calls held at once ([`COMPLETION_HOLD`]), broker-wide: a held call occupies a
/// thread of the blocking pool that marker writes, fsyncs and other handlers share, so
/// beyond this many a call is answered `CONCURRENT_TRANSACTIONS` at once, as without
/// the hold (clients retry it). Honest back-to-back producers hold for a few ms each.
pub const MAX_HELD_CALLS: usize = 16;

/// One of the [`MAX_HELD_CALLS`] slots, given back on drop.
struct HeldSlot<'a>(&'a AtomicUsize);

impl Drop for HeldSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The transaction coordinator.
pub struct TxnCoordinator {
    state: Mutex<Transactions>,
    /// Notified (with `state`'s mutex) whenever a transaction completes, for calls
    /// held while the producer's previous transaction completes ([`COMPLETION_HOLD`]).
    completed: Condvar,
    /// Calls held now (at most [`MAX_HELD_CALLS`]).
    held: AtomicUsize,
    store: Box<dyn TxnStore>,
    /// Cluster mode: the ZooKeeper store, which also knows the slots taken over.
    zk: Option<Arc<ZkTxnStore>>,
    to_complete: mpsc::UnboundedSender<TransactionalId>,
    queued: Mutex<Option<mpsc::UnboundedReceiver<TransactionalId>>>,
    /// Counters for the metrics.
    pub counters: TxnCounters,
    /// Cluster mode: KIP-890 answers for transactions coordinated elsewhere
    /// ([`super::remote_verify`]).
    pub verified: super::remote_verify::VerifiedCache,
}

impl TxnCoordinator {
    /// Opens the store in `data_dir` and loads every transactional id. Transactions
    /// found in Prepare* are queued to be completed again (their markers rewritten);
    /// Ongoing ones abort when their timeout passes, counted from their start.
    ///
    /// Errors: [`StoreError`].
    pub fn open(data_dir: &Path, limits: Limits) -> Result<TxnCoordinator, StoreError> {
        let store = RedbStore::open(data_dir)?;
        let mut state = Transactions::new(limits);
        for meta in store.load()? {
            state.apply(meta);
        }
        let (to_complete, queued) = mpsc::unbounded_channel();
        for id in state.preparing() {
            let _ = to_complete.send(id);
        }
        Ok(TxnCoordinator {
            state: Mutex::new(state),
            completed: Condvar::new(),
            held: AtomicUsize::new(0),
            store: Box::new(store),
            zk: None,
            to_complete,
            queued: Mutex::new(Some(queued)),
            counters: TxnCounters::default(),
            verified: Default::default(),
        })
    }

    /// The cluster-mode coordinator over `store`: it serves no transactional id until
    /// it takes slots over.
    pub fn open_cluster(store: Arc<ZkTxnStore>, limits: Limits) -> TxnCoordinator {
        let (to_complete, queued) = mpsc::unbounded_channel();
        TxnCoordinator {
            state: Mutex::new(Transactions::new(limits)),
            completed: Condvar::new(),
            held: AtomicUsize::new(0),
            store: Box::new(Arc::clone(&store)),
            zk: Some(store),
            to_complete,
            queued: Mutex::new(Some(queued)),
            counters: TxnCounters::default(),
            verified: Default::default(),
        }
    }

    /// The bounds.
    pub fn limits(&self) -> Limits {
        *self.lock().limits()
    }

    fn lock(&self) -> MutexGuard<'_, Transactions> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, locked, once `id` is known to be served here. The check is made
    /// under the lock, which a slot's state is dropped under too, so a slot given up
    /// between the check and the decision cannot make a known id look unknown.
    ///
    /// Errors: see [`TxnCoordinator::check_owner`].
    fn lock_for(&self, id: &TransactionalId) -> Result<MutexGuard<'_, Transactions>, TxnError> {
        let state = self.lock();
        self.check_owner(id)?;
        Ok(state)
    }

    /// The ZooKeeper store, in cluster mode.
    pub fn zk_store(&self) -> Option<&Arc<ZkTxnStore>> {
        self.zk.as_ref()
    }

    /// Whether this coordinator serves `id` now: always standalone; in cluster mode
    /// when its slot is taken over here.
    ///
    /// Errors: [`TxnError::LoadInProgress`] (the slot is owned here, not loaded yet),
    /// [`TxnError::NotCoordinator`].
    pub fn check_owner(&self, id: &TransactionalId) -> Result<(), TxnError> {
        let Some(zk) = &self.zk else {
            return Ok(());
        };
        let slot = zk.slot_of(id);
        if zk.epoch(slot).is_some() {
            Ok(())
        } else if zk.owns(slot) {
            Err(TxnError::LoadInProgress)
        } else {
            Err(TxnError::NotCoordinator)
        }
    }

    /// The coordinator epoch markers of `id` carry: 0 standalone (one coordinator
    /// forever), the slot's epoch in cluster mode (−1 when it is not taken over).
    pub fn coordinator_epoch(&self, id: &TransactionalId) -> i32 {
        self.zk
            .as_ref()
            .map_or(0, |zk| zk.epoch(zk.slot_of(id)).unwrap_or(-1))
    }

    /// Cluster mode: takes `slot` over (its coordinator epoch bumped, its records
    /// read from ZooKeeper) and serves its transactional ids; queues those found in
    /// Prepare* for completion (Ongoing ones abort when their timeout passes). Does
    /// nothing if the slot is not owned any more when the records are read. Blocking.
    ///
    /// Errors: [`StoreError`] (the caller tries again).
    pub fn take_over_slot(&self, slot: u32) -> Result<usize, StoreError> {
        let Some(zk) = &self.zk else {
            return Ok(0);
        };
        let (epoch, records) = zk.take_over(slot)?;
        let mut state = self.lock();
        if !zk.owns(slot) {
            return Ok(0);
        }
        // Whatever this broker still held of the slot from an earlier ownership goes.
        let stale: Vec<TransactionalId> = state
            .iter()
            .filter(|m| zk.slot_of(&m.id) == slot)
            .map(|m| m.id.clone())
            .collect();
        for id in &stale {
            state.remove(id);
        }
        let n = records.len();
        for meta in records {
            if zk.slot_of(&meta.id) == slot {
                state.apply(meta);
            }
        }
        if !zk.adopt(slot, epoch) {
            // Lost while loading: the records go with the next owner.
            for id in state
                .iter()
                .filter(|m| zk.slot_of(&m.id) == slot)
                .map(|m| m.id.clone())
                .collect::<Vec<_>>()
            {
                state.remove(&id);
            }
            return Ok(0);
        }
        for id in state.preparing() {
            if zk.slot_of(&id) == slot {
                let _ = self.to_complete.send(id);
            }
        }
        tracing::info!(
            slot,
            coordinator_epoch = epoch,
            transactional_ids = n,
            "transaction coordinator took a slot over"
        );
        Ok(n)
    }

    /// Cluster mode: stops serving `slot` and forgets its transactional ids (their
    /// completions in flight stop at their next step).
    pub fn give_up_slot(&self, slot: u32) {
        let mut state = self.lock();
        self.forget_slot(&mut state, slot);
    }

    /// Cluster mode: drops the in-memory state of slots given up with
    /// [`ZkTxnStore::give_up`] (which only stops serving them) unless taken over again
    /// since.
    pub fn forget_dropped(&self) {
        let Some(zk) = &self.zk else {
            return;
        };
        for slot in zk.take_dropped() {
            let mut state = self.lock();
            if zk.epoch(slot).is_none() {
                self.forget_slot(&mut state, slot);
            }
        }
    }

    fn forget_slot(&self, state: &mut Transactions, slot: u32) {
        let Some(zk) = &self.zk else {
            return;
        };
        let was_loaded = zk.epoch(slot).is_some();
        zk.give_up(slot);
        let ids: Vec<TransactionalId> = state
            .iter()
            .filter(|m| zk.slot_of(&m.id) == slot)
            .map(|m| m.id.clone())
            .collect();
        for id in &ids {
            state.remove(id);
        }
        if was_loaded {
            tracing::info!(
                slot,
                transactional_ids = ids.len(),
                "transaction coordinator gave a slot up"
            );
        }
    }

    /// The slots taken over (cluster mode; empty standalone).
    pub fn slots(&self) -> std::collections::BTreeSet<u32> {
        self.zk.as_ref().map(|zk| zk.slots()).unwrap_or_default()
    }

    /// Writes `meta` durably, then applies it; queues it for completion if it is
    /// Prepare*.
    fn commit(&self, state: &mut Transactions, meta: TxnMetadata) -> Result<(), TxnError> {
        self.store
            .put(std::slice::from_ref(&meta))
            .map_err(|e| self.store_failed(state, e))?;
        let queue = meta.state.is_prepare().then(|| meta.id.clone());
        state.apply(meta);
        if let Some(id) = queue {
            let _ = self.to_complete.send(id);
        }
        Ok(())
    }

    /// The answer to a failed write: a slot another broker took over is dropped
    /// (`NOT_COORDINATOR`), a record too large for the store is POLICY_VIOLATION,
    /// anything else COORDINATOR_NOT_AVAILABLE.
    fn store_failed(&self, state: &mut Transactions, e: StoreError) -> TxnError {
        match e {
            StoreError::Fenced { slot } => {
                tracing::warn!(
                    slot,
                    "transaction slot taken over by another broker: dropping it here"
                );
                self.forget_slot(state, slot);
                TxnError::NotCoordinator
            }
            StoreError::TooLarge { .. } => TxnError::TooLarge,
            e => {
                crate::warn_limited!("txn.store_failed", "writing transaction state: {e}");
                TxnError::Storage
            }
        }
    }

    /// The queue of transactions to complete; taken once, by the completion driver.
    pub fn take_queue(&self) -> Option<mpsc::UnboundedReceiver<TransactionalId>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// InitProducerId with a transactional id: the producer id and epoch to answer.
    /// `fresh` hands out a new producer id (called only when one is needed);
    /// `admit_new` is asked, once, whether the caller may create a new id (called only
    /// when `request.id` is not known: the per-client bound,
    /// [`crate::broker::new_txn_ids`]). At `max_transactional_ids` an idle id is
    /// evicted first, durably, through the store's removal as expiry does.
    ///
    /// Errors: see [`Transactions::init_producer_id`]; [`TxnError::Concurrent`] also
    /// when an open transaction was just aborted for this call (the client retries);
    /// [`TxnError::Throttled`] (`admit_new` said no); [`TxnError::Storage`].
    pub fn init_producer_id(
        &self,
        now_ms: i64,
        request: &InitRequest,
        fresh: &dyn Fn() -> Result<i64, TxnError>,
        admit_new: &dyn Fn() -> bool,
    ) -> Result<ProducerIdEpoch, TxnError> {
        let mut state = self.lock_for(&request.id)?;
        if state.get(&request.id).is_none() && !admit_new() {
            self.counters.throttled.fetch_add(1, Ordering::Relaxed);
            crate::info_limited!(
                "txn.new_ids_throttled",
                transactional_id = %request.id,
                "InitProducerId for a new transactional id beyond \
                 transactions.new_ids_per_sec_per_client: answered \
                 COORDINATOR_LOAD_IN_PROGRESS (retriable)"
            );
            return Err(TxnError::Throttled);
        }
        let mut producer_id = None;
        // At most one eviction and one producer id: each step leaves room or an id.
        let mut decision = state.init_producer_id(now_ms, request, None)?;
        for _ in 0..2 {
            match decision {
                InitDecision::Evict(idle) => self.evict(&mut state, idle)?,
                InitDecision::NeedProducerId if producer_id.is_none() => {
                    producer_id = Some(fresh()?)
                }
                _ => break,
            }
            decision = state.init_producer_id(now_ms, request, producer_id)?;
        }
        match decision {
            InitDecision::Grant(meta) => {
                let producer = meta.producer;
                self.commit(&mut state, meta)?;
                Ok(producer)
            }
            InitDecision::Unchanged(producer) => Ok(producer),
            InitDecision::AbortOpen(meta) => {
                self.commit(&mut state, meta)?;
                Err(TxnError::Concurrent)
            }
            InitDecision::NeedProducerId | InitDecision::Evict(_) => Err(TxnError::Storage),
        }
    }

    /// Removes the idle id `idle` durably (the store's removal, as expiry) to make room
    /// for a new one at `max_transactional_ids`.
    ///
    /// Errors: as [`TxnCoordinator::expire`].
    fn evict(&self, state: &mut Transactions, idle: TransactionalId) -> Result<(), TxnError> {
        self.store
            .remove(std::slice::from_ref(&idle))
            .map_err(|e| self.store_failed(state, e))?;
        crate::info_limited!(
            "txn.evicted",
            transactional_id = %idle,
            "transactional id evicted for a new one at transactions.max_transactional_ids \
             (idle: no transaction open)"
        );
        state.remove(&idle);
        self.counters.evicted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// AddPartitionsToTxn and AddOffsetsToTxn: `decide` (one of the two decisions)
    /// under the lock, written if it changes the transaction. While `caller`'s previous
    /// transaction is being completed (Prepare*, the only cause of
    /// `CONCURRENT_TRANSACTIONS` for these calls), standalone, the call waits for a
    /// completion and decides again, up to [`COMPLETION_HOLD`]; a refusal that stands is
    /// noted (the librdkafka abort case, [`Transactions::note_refused`]).
    ///
    /// Errors: `decide`'s; [`TxnError::NotCoordinator`] when, in cluster mode, the id
    /// is no longer served here; [`TxnError::Storage`].
    fn add_held(
        &self,
        caller: &Caller,
        decide: impl Fn(&Transactions) -> Result<Option<TxnMetadata>, TxnError>,
    ) -> Result<(), TxnError> {
        let mut state = self.lock_for(&caller.id)?;
        let deadline = Instant::now() + COMPLETION_HOLD;
        let mut decided = decide(&state);
        let release = (decided == Err(TxnError::Concurrent) && self.zk.is_none())
            .then(|| self.held_slot())
            .flatten();
        let hold = release.is_some();
        while hold && decided == Err(TxnError::Concurrent) {
            let preparing = state
                .get(&caller.id)
                .is_some_and(|m| m.state.is_prepare() && m.producer.id == caller.producer.id);
            let now = Instant::now();
            if !preparing || now >= deadline {
                break;
            }
            state = self
                .completed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            self.check_owner(&caller.id)?;
            decided = decide(&state);
        }
        if decided == Err(TxnError::Concurrent) {
            state.note_refused(caller);
        }
        match decided? {
            Some(meta) => self.commit(&mut state, meta),
            None => Ok(()),
        }
    }

    /// AddPartitionsToTxn (client form).
    ///
    /// Errors: see [`Transactions::add_partitions`]; [`TxnError::Storage`].
    pub fn add_partitions(
        &self,
        now_ms: i64,
        caller: &Caller,
        partitions: &[TopicPartition],
    ) -> Result<(), TxnError> {
        self.add_held(caller, |state| {
            state.add_partitions(now_ms, caller, partitions)
        })
    }

    /// KIP-890 verification: whether `partition` is in producer `producer`'s open
    /// transaction (see [`Transactions::verify_partition`]).
    pub fn verify_partition(
        &self,
        producer: ProducerIdEpoch,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        self.lock().verify_partition(producer, partition)
    }

    /// KIP-890 verification for transactional id `id`, atomically with the check that
    /// `id` is served here (cluster mode).
    ///
    /// Errors: see [`TxnCoordinator::check_owner`] and
    /// [`Transactions::verify_partition`].
    pub fn verify_partition_of(
        &self,
        id: &TransactionalId,
        producer: ProducerIdEpoch,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        self.lock_for(id)?.verify_partition(producer, partition)
    }

    /// Whether `caller`'s id and producer are the current ones (the checks of
    /// AddPartitionsToTxn `verify_only`).
    pub fn check_caller(&self, caller: &Caller) -> Result<(), TxnError> {
        let state = self.lock_for(&caller.id)?;
        let meta = state.get(&caller.id).ok_or(TxnError::UnknownMapping)?;
        if meta.producer.id != caller.producer.id {
            return Err(TxnError::UnknownMapping);
        }
        if meta.producer.epoch != caller.producer.epoch {
            return Err(TxnError::Fenced);
        }
        Ok(())
    }

    /// AddOffsetsToTxn.
    ///
    /// Errors: see [`Transactions::add_offsets`]; [`TxnError::Storage`].
    pub fn add_offsets(&self, now_ms: i64, caller: &Caller, group: &str) -> Result<(), TxnError> {
        self.add_held(caller, |state| state.add_offsets(now_ms, caller, group))
    }

    /// Records a validated TxnOffsetCommit's offsets durably with the producer's open
    /// transaction (the group coordinator's `StageTxnOffsets`).
    ///
    /// Errors: see [`Transactions::stage_offsets`]; [`TxnError::Storage`].
    pub fn stage_offsets(
        &self,
        now_ms: i64,
        producer: ProducerIdEpoch,
        group: &str,
        offsets: &[(TopicPartition, StagedOffset)],
    ) -> Result<(), TxnError> {
        let mut state = self.lock();
        let meta = state.stage_offsets(now_ms, producer, group, offsets)?;
        self.commit(&mut state, meta)
    }

    /// EndTxn: the outcome is written (Prepare*) before this returns; markers and group
    /// offsets are completed by the completion driver. Standalone, where the markers
    /// are all local, the answer also waits for that completion, up to
    /// [`COMPLETION_HOLD`] (one of the [`MAX_HELD_CALLS`]): the client's next
    /// transaction then finds its previous one complete, and its first
    /// AddPartitionsToTxn is answered at once. Holding that call instead (as
    /// [`TxnCoordinator::add_partitions`] does when EndTxn's wait ran out) keeps it in
    /// flight long enough for librdkafka's `abort_transaction()` to overtake it: the
    /// client then ignores the late success as outdated and sends no EndTxn, leaving
    /// the transaction Ongoing here until its timeout.
    ///
    /// Errors: see [`Transactions::end_txn`]; [`TxnError::Storage`].
    pub fn end_txn(&self, now_ms: i64, caller: &Caller, committed: bool) -> Result<(), TxnError> {
        let mut state = self.lock_for(&caller.id)?;
        let Some(meta) = state.end_txn(now_ms, caller, committed)? else {
            return Ok(());
        };
        let preparing = meta.state;
        self.commit(&mut state, meta)?;
        let Some(_slot) = self.zk.is_none().then(|| self.held_slot()).flatten() else {
            return Ok(());
        };
        let deadline = Instant::now() + COMPLETION_HOLD;
        loop {
            let still = state
                .get(&caller.id)
                .is_some_and(|m| m.state == preparing && m.producer.id == caller.producer.id);
            let now = Instant::now();
            if !still || now >= deadline {
                return Ok(());
            }
            state = self
                .completed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// One of the [`MAX_HELD_CALLS`] slots for a call held while a transaction
    /// completes, if one is free.
    fn held_slot(&self) -> Option<HeldSlot<'_>> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_HELD_CALLS).then_some(n + 1)
            })
            .is_ok()
            .then(|| HeldSlot(&self.held))
    }

    /// The transaction of `id` as it is now, if it is known.
    pub fn get(&self, id: &TransactionalId) -> Option<TxnMetadata> {
        self.lock().get(id).cloned()
    }

    /// What this coordinator knows of producer `producer_id`'s transaction: its
    /// transactional id, state, and whether `partition` is in it while it is open
    /// (Ongoing or Prepare*). `None` when no transactional id served here has this
    /// producer id.
    pub fn open_in(
        &self,
        producer_id: i64,
        partition: &TopicPartition,
    ) -> Option<(TransactionalId, TxnState, bool)> {
        let state = self.lock();
        let meta = state.by_producer_id(producer_id)?;
        let open = !meta.state.is_idle() && meta.partitions.contains(partition);
        Some((meta.id.clone(), meta.state, open))
    }

    /// Every transaction as it is now, sorted by transactional id.
    pub fn snapshot(&self) -> Vec<TxnMetadata> {
        let mut all: Vec<TxnMetadata> = self.lock().iter().cloned().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// The staged offsets of every transaction not completed yet (Ongoing or
    /// Prepare*), per group: what the group coordinator must hold as pending at startup.
    pub fn staged_offsets(&self) -> Vec<StagedGroupOffsets> {
        self.lock()
            .iter()
            .filter(|m| m.state == TxnState::Ongoing || m.state.is_prepare())
            .flat_map(|m| {
                m.groups
                    .iter()
                    .filter(|(_, o)| !o.is_empty())
                    .map(|(group, offsets)| StagedGroupOffsets {
                        producer: m.producer,
                        group: group.clone(),
                        offsets: offsets
                            .iter()
                            .map(|(p, o)| (p.clone(), o.clone()))
                            .collect(),
                    })
            })
            .collect()
    }

    /// Number of transactional ids per state.
    pub fn counts(&self) -> BTreeMap<TxnState, usize> {
        self.lock().counts()
    }

    /// After its markers and group offsets are done: `id` becomes Complete*.
    ///
    /// Errors: [`TxnError::Storage`] (the caller retries).
    pub fn complete(&self, now_ms: i64, id: &TransactionalId) -> Result<(), TxnError> {
        let mut state = self.lock();
        let Some(meta) = state.complete(now_ms, id) else {
            return Ok(());
        };
        let counter = if meta.state == TxnState::CompleteCommit {
            &self.counters.committed
        } else {
            &self.counters.aborted
        };
        self.commit(&mut state, meta)?;
        counter.fetch_add(1, Ordering::Relaxed);
        self.completed.notify_all();
        Ok(())
    }

    /// Aborts every open transaction past its timeout at `now_ms`; returns how many.
    ///
    /// Errors: [`TxnError::Storage`].
    pub fn abort_timed_out(&self, now_ms: i64) -> Result<usize, TxnError> {
        let mut state = self.lock();
        let timed_out = state.timed_out(now_ms);
        let n = timed_out.len();
        for meta in timed_out {
            tracing::info!(
                transactional_id = %meta.id,
                producer_id = meta.producer.id,
                "transaction timed out: aborting it"
            );
            self.commit(&mut state, meta)?;
            self.counters
                .aborted_by_timeout
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(n)
    }

    /// Removes the transactional ids idle for `transactional.id.expiration.ms` at
    /// `now_ms`, and those that never opened a transaction after
    /// `transactions.unused_id_expiration_ms`; returns how many.
    ///
    /// Errors: [`TxnError::Storage`].
    pub fn expire(&self, now_ms: i64) -> Result<usize, TxnError> {
        let mut state = self.lock();
        let expired = state.expired(now_ms);
        if expired.is_empty() {
            return Ok(0);
        }
        self.store
            .remove(&expired)
            .map_err(|e| self.store_failed(&mut state, e))?;
        for id in &expired {
            state.remove(id);
        }
        self.counters
            .expired
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        Ok(expired.len())
    }
}
