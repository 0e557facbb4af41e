//! The transaction coordinator's synchronous driver: the state machine
//! ([`super::state::Transactions`]) behind one lock, and the durable store. Each call
//! decides, writes the change to the store, then applies it in memory and answers —
//! a change is never acknowledged before it is durable. Calls block (an fsync per
//! change): request handlers run them on the blocking pool.
//!
//! Transactions whose outcome is decided (Prepare*) are queued for the completion
//! driver ([`super::completion`]), which writes markers and completes group offsets.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex, MutexGuard,
    },
};

use tokio::sync::mpsc;

use super::{
    error::TxnError,
    state::{Caller, InitDecision, InitRequest, Limits, Transactions},
    store::{StoreError, TxnStore},
    types::{
        ProducerIdEpoch, StagedOffset, TopicPartition, TransactionalId, TxnMetadata, TxnState,
    },
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
    /// Transactional ids removed by `transactional.id.expiration.ms`.
    pub expired: AtomicU64,
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

/// The transaction coordinator (standalone).
pub struct TxnCoordinator {
    state: Mutex<Transactions>,
    store: TxnStore,
    to_complete: mpsc::UnboundedSender<TransactionalId>,
    queued: Mutex<Option<mpsc::UnboundedReceiver<TransactionalId>>>,
    /// Counters for the metrics.
    pub counters: TxnCounters,
}

impl TxnCoordinator {
    /// Opens the store in `data_dir` and loads every transactional id. Transactions
    /// found in Prepare* are queued to be completed again (their markers rewritten);
    /// Ongoing ones abort when their timeout passes, counted from their start.
    ///
    /// Errors: [`StoreError`].
    pub fn open(data_dir: &Path, limits: Limits) -> Result<TxnCoordinator, StoreError> {
        let store = TxnStore::open(data_dir)?;
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
            store,
            to_complete,
            queued: Mutex::new(Some(queued)),
            counters: TxnCounters::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Transactions> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `meta` durably, then applies it; queues it for completion if it is
    /// Prepare*.
    fn commit(&self, state: &mut Transactions, meta: TxnMetadata) -> Result<(), TxnError> {
        self.store.put(std::slice::from_ref(&meta)).map_err(|e| {
            crate::warn_limited!("txn.store_failed", "writing transaction state: {e}");
            TxnError::Storage
        })?;
        let queue = meta.state.is_prepare().then(|| meta.id.clone());
        state.apply(meta);
        if let Some(id) = queue {
            let _ = self.to_complete.send(id);
        }
        Ok(())
    }

    /// The queue of transactions to complete; taken once, by the completion driver.
    pub fn take_queue(&self) -> Option<mpsc::UnboundedReceiver<TransactionalId>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// InitProducerId with a transactional id: the producer id and epoch to answer.
    /// `fresh` hands out a new producer id (called only when one is needed).
    ///
    /// Errors: see [`Transactions::init_producer_id`]; [`TxnError::Concurrent`] also
    /// when an open transaction was just aborted for this call (the client retries);
    /// [`TxnError::Storage`].
    pub fn init_producer_id(
        &self,
        now_ms: i64,
        request: &InitRequest,
        fresh: &dyn Fn() -> Result<i64, TxnError>,
    ) -> Result<ProducerIdEpoch, TxnError> {
        let mut state = self.lock();
        let mut decision = state.init_producer_id(now_ms, request, None)?;
        if decision == InitDecision::NeedProducerId {
            decision = state.init_producer_id(now_ms, request, Some(fresh()?))?;
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
            InitDecision::NeedProducerId => Err(TxnError::Storage),
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
        let mut state = self.lock();
        match state.add_partitions(now_ms, caller, partitions)? {
            Some(meta) => self.commit(&mut state, meta),
            None => Ok(()),
        }
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

    /// Whether `caller`'s id and producer are the current ones (the checks of
    /// AddPartitionsToTxn `verify_only`).
    pub fn check_caller(&self, caller: &Caller) -> Result<(), TxnError> {
        let state = self.lock();
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
        let mut state = self.lock();
        match state.add_offsets(now_ms, caller, group)? {
            Some(meta) => self.commit(&mut state, meta),
            None => Ok(()),
        }
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
    /// offsets are completed afterwards by the completion driver.
    ///
    /// Errors: see [`Transactions::end_txn`]; [`TxnError::Storage`].
    pub fn end_txn(&self, now_ms: i64, caller: &Caller, committed: bool) -> Result<(), TxnError> {
        let mut state = self.lock();
        match state.end_txn(now_ms, caller, committed)? {
            Some(meta) => self.commit(&mut state, meta),
            None => Ok(()),
        }
    }

    /// The transaction of `id` as it is now, if it is known.
    pub fn get(&self, id: &TransactionalId) -> Option<TxnMetadata> {
        self.lock().get(id).cloned()
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
    /// `now_ms`; returns how many.
    ///
    /// Errors: [`TxnError::Storage`].
    pub fn expire(&self, now_ms: i64) -> Result<usize, TxnError> {
        let mut state = self.lock();
        let expired = state.expired(now_ms);
        if expired.is_empty() {
            return Ok(0);
        }
        self.store.remove(&expired).map_err(|e| {
            crate::warn_limited!(
                "txn.store_failed",
                "removing expired transactional ids: {e}"
            );
            TxnError::Storage
        })?;
        for id in &expired {
            state.remove(id);
        }
        self.counters
            .expired
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        Ok(expired.len())
    }
}
