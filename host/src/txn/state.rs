//! The transaction coordinator's state machine: every transactional id's metadata and
//! the decisions of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit staging, EndTxn, completion, timeouts and expiry, as Kafka 4.x's
//! `TransactionCoordinator` / `TransactionMetadata` make them (transaction version 1:
//! KIP-98, KIP-360, KIP-447, KIP-890 part 1).
//!
//! Pure: no IO, no clock (every call that needs the time takes `now_ms`). A decision
//! that changes a transaction returns the new [`TxnMetadata`] without applying it; the
//! driver ([`super::coordinator`]) writes it to the durable store first and then
//! [`Transactions::apply`]s it, so nothing is acknowledged before it is durable.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{
    error::TxnError,
    types::{
        ProducerIdEpoch, StagedOffset, TopicPartition, TransactionalId, TxnMetadata, TxnState,
    },
};

/// The coordinator's bounds (`[transactions]` in the configuration file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest `transaction.timeout.ms` a producer may ask for, ms (Kafka's
    /// `transaction.max.timeout.ms`, default 900000).
    pub max_timeout_ms: i32,
    /// An id with no open transaction is forgotten this long after its last change, ms
    /// (Kafka's `transactional.id.expiration.ms`, default 604800000).
    pub id_expiration_ms: i64,
    /// An id that never opened a transaction (only InitProducerId calls) is forgotten
    /// this long after its last change, ms, when shorter than `id_expiration_ms`
    /// (`transactions.unused_id_expiration_ms`, this broker's; default 3600000).
    pub unused_id_expiration_ms: i64,
    /// Most transactional ids known at once (this broker's bound).
    pub max_transactional_ids: usize,
    /// Most partitions in one transaction (this broker's bound).
    pub max_partitions_per_transaction: usize,
    /// Most groups in one transaction, and most staged offsets over them.
    pub max_groups_per_transaction: usize,
    /// Most staged transactional offsets in one transaction, over all its groups.
    pub max_offsets_per_transaction: usize,
}

/// An InitProducerId with a transactional id.
#[derive(Debug, Clone)]
pub struct InitRequest {
    /// The transactional id.
    pub id: TransactionalId,
    /// `transaction.timeout.ms`, ms.
    pub timeout_ms: i32,
    /// The producer id and epoch the client has (KIP-360, InitProducerId v3+), or
    /// [`ProducerIdEpoch::NONE`].
    pub expected: ProducerIdEpoch,
}

/// What InitProducerId decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitDecision {
    /// Write this metadata, then answer its producer id and epoch.
    Grant(TxnMetadata),
    /// Answer this producer id and epoch, writing nothing (a retried call, KIP-360).
    Unchanged(ProducerIdEpoch),
    /// A new producer id is needed (a new id, or the epoch is exhausted): decide again
    /// with one.
    NeedProducerId,
    /// The id's open transaction is aborted first: write this metadata (PrepareAbort,
    /// the epoch bumped so the old producer is fenced), complete it, answer
    /// `CONCURRENT_TRANSACTIONS` so the client retries.
    AbortOpen(TxnMetadata),
    /// A new id at `max_transactional_ids`: remove this idle id durably (as expiry
    /// removes one), then decide again. It is the idle id (no open transaction) that
    /// never opened a transaction and changed longest ago, else the idle id that
    /// changed longest ago ([`Transactions::evictable`]).
    Evict(TransactionalId),
}

/// Who asks to change a transaction: the transactional id with the producer id and
/// epoch its request carries.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The transactional id.
    pub id: TransactionalId,
    /// The producer id and epoch of the request.
    pub producer: ProducerIdEpoch,
}

/// A producer epoch Kafka no longer bumps (`TransactionMetadata.isEpochExhausted`):
/// the next InitProducerId rotates to a new producer id.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Every transactional id's metadata, with an index by producer id.
#[derive(Debug)]
pub struct Transactions {
    limits: Limits,
    txns: HashMap<TransactionalId, TxnMetadata>,
    by_producer: HashMap<i64, TransactionalId>,
    /// The librdkafka case of [`Transactions::end_txn`]: ids whose current producer had
    /// an AddPartitionsToTxn or AddOffsetsToTxn refused `CONCURRENT_TRANSACTIONS` while
    /// the previous transaction was PrepareCommit, with no transaction opened since (the
    /// producer id and epoch refused). In memory only: after a restart an abort of
    /// committed data is answered INVALID_TXN_STATE, as Kafka answers it.
    refused_while_committing: HashMap<TransactionalId, ProducerIdEpoch>,
}

impl Transactions {
    /// An empty table with `limits`.
    pub fn new(limits: Limits) -> Transactions {
        Transactions {
            limits,
            txns: HashMap::new(),
            by_producer: HashMap::new(),
            refused_while_committing: HashMap::new(),
        }
    }

    /// The bounds.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The metadata of `id`, if known.
    pub fn get(&self, id: &TransactionalId) -> Option<&TxnMetadata> {
        self.txns.get(id)
    }

    /// The metadata of the transactional id whose current producer id is `producer_id`.
    pub fn by_producer_id(&self, producer_id: i64) -> Option<&TxnMetadata> {
        self.by_producer
            .get(&producer_id)
            .and_then(|id| self.txns.get(id))
    }

    /// Every transaction, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.txns.values()
    }

    /// Number of known transactional ids.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether no transactional id is known.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Records `meta` (after it was written durably): the decisions' results, and the
    /// store's contents at startup.
    pub fn apply(&mut self, meta: TxnMetadata) {
        if let Some(old) = self.txns.get(&meta.id) {
            if old.producer.id != meta.producer.id {
                self.by_producer.remove(&old.producer.id);
            }
        }
        // A transaction opened, or another producer (epoch): the librdkafka case of
        // `end_txn` is over.
        if meta.state == TxnState::Ongoing
            || self.refused_while_committing.get(&meta.id) != Some(&meta.producer)
        {
            self.refused_while_committing.remove(&meta.id);
        }
        self.by_producer.insert(meta.producer.id, meta.id.clone());
        self.txns.insert(meta.id.clone(), meta);
    }

    /// Forgets `id` (after its removal was written durably).
    pub fn remove(&mut self, id: &TransactionalId) {
        self.refused_while_committing.remove(id);
        if let Some(old) = self.txns.remove(id) {
            if self.by_producer.get(&old.producer.id) == Some(id) {
                self.by_producer.remove(&old.producer.id);
            }
        }
    }

    /// InitProducerId with a transactional id. `fresh` is a producer id never handed
    /// out, when the caller has one (after [`InitDecision::NeedProducerId`]).
    ///
    /// A new id at `max_transactional_ids` takes the place of an idle one
    /// ([`InitDecision::Evict`]); only when every id has a transaction open (Ongoing or
    /// Prepare*) is it refused.
    ///
    /// Errors: [`TxnError::InvalidTimeout`], [`TxnError::TooManyIds`] (at the cap, no
    /// idle id to evict), [`TxnError::Concurrent`] (being completed),
    /// [`TxnError::Fenced`] (the KIP-360 producer id and epoch are not the current ones
    /// nor a retry's).
    pub fn init_producer_id(
        &self,
        now_ms: i64,
        request: &InitRequest,
        fresh: Option<i64>,
    ) -> Result<InitDecision, TxnError> {
        if request.timeout_ms <= 0 || request.timeout_ms > self.limits.max_timeout_ms {
            return Err(TxnError::InvalidTimeout);
        }
        let Some(meta) = self.txns.get(&request.id) else {
            if self.txns.len() >= self.limits.max_transactional_ids {
                return match self.evictable() {
                    Some(idle) => Ok(InitDecision::Evict(idle)),
                    None => Err(TxnError::TooManyIds),
                };
            }
            let Some(producer_id) = fresh else {
                return Ok(InitDecision::NeedProducerId);
            };
            return Ok(InitDecision::Grant(TxnMetadata {
                id: request.id.clone(),
                producer: ProducerIdEpoch {
                    id: producer_id,
                    epoch: 0,
                },
                last_producer: ProducerIdEpoch::NONE,
                timeout_ms: request.timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                groups: BTreeMap::new(),
                start_ms: -1,
                last_update_ms: now_ms,
                timed_out: false,
                ever_opened: false,
            }));
        };
        let expected = (!request.expected.is_none()).then_some(request.expected);
        // Kafka's `isValidProducerId`: the client's producer id is the current one, or
        // the previous one with an exhausted epoch (a retry after a rotation).
        if let Some(e) = expected {
            let valid = meta.producer.epoch < 0
                || e.id == meta.producer.id
                || (e.id == meta.last_producer.id && epoch_exhausted(e.epoch));
            if !valid {
                return Err(TxnError::Fenced);
            }
        }
        match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => Err(TxnError::Concurrent),
            TxnState::Ongoing => {
                let mut next = meta.clone();
                next.producer.epoch = bumped(meta.producer.epoch);
                next.last_producer = ProducerIdEpoch::NONE;
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                Ok(InitDecision::AbortOpen(next))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = meta.clone();
                next.timeout_ms = request.timeout_ms;
                next.last_update_ms = now_ms;
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.groups.clear();
                next.start_ms = -1;
                next.timed_out = false;
                if epoch_exhausted(meta.producer.epoch)
                    && expected.is_none_or(|e| e.epoch == meta.producer.epoch)
                {
                    let Some(producer_id) = fresh else {
                        return Ok(InitDecision::NeedProducerId);
                    };
                    next.last_producer = meta.producer;
                    next.producer = ProducerIdEpoch {
                        id: producer_id,
                        epoch: 0,
                    };
                    return Ok(InitDecision::Grant(next));
                }
                match expected {
                    Some(e) if e.epoch != meta.producer.epoch && meta.producer.epoch >= 0 => {
                        if e.epoch == meta.last_producer.epoch {
                            Ok(InitDecision::Unchanged(meta.producer))
                        } else {
                            Err(TxnError::Fenced)
                        }
                    }
                    _ if epoch_exhausted(meta.producer.epoch) => Err(TxnError::Fenced),
                    _ => {
                        next.last_producer = meta.producer;
                        next.producer.epoch = meta.producer.epoch + 1;
                        Ok(InitDecision::Grant(next))
                    }
                }
            }
        }
    }

    /// The id to evict for a new one at `max_transactional_ids`: of the idle ids (no
    /// open transaction: Empty, CompleteCommit, CompleteAbort), one that never opened a
    /// transaction if there is one, and of those the one whose last change is oldest
    /// (ties: the smallest id). `None` when every id has a transaction open. A scan of
    /// every id (about 1 ms per 100,000), made only at the cap.
    pub fn evictable(&self) -> Option<TransactionalId> {
        self.txns
            .values()
            .filter(|m| m.state.is_idle())
            .min_by(|a, b| {
                (a.ever_opened, a.last_update_ms, &a.id).cmp(&(
                    b.ever_opened,
                    b.last_update_ms,
                    &b.id,
                ))
            })
            .map(|m| m.id.clone())
    }

    /// Records that `caller`'s AddPartitionsToTxn or AddOffsetsToTxn was refused
    /// [`TxnError::Concurrent`]: if its previous transaction is PrepareCommit, an abort
    /// that follows before any transaction opens is the librdkafka case of
    /// [`Transactions::end_txn`]. In memory only (not a durable change); cleared when a
    /// transaction opens or the producer (epoch) changes.
    pub fn note_refused(&mut self, caller: &Caller) {
        if let Some(meta) = self.txns.get(&caller.id) {
            if meta.state == TxnState::PrepareCommit && meta.producer == caller.producer {
                self.refused_while_committing
                    .insert(caller.id.clone(), caller.producer);
            }
        }
    }

    /// Whether `caller` is in the librdkafka case: see [`Transactions::note_refused`].
    fn refused_while_committing(&self, caller: &Caller) -> bool {
        self.refused_while_committing.get(&caller.id) == Some(&caller.producer)
    }

    /// The metadata `caller` may change: known, its producer id, its epoch, not being
    /// completed.
    fn check(&self, caller: &Caller) -> Result<&TxnMetadata, TxnError> {
        let meta = self.txns.get(&caller.id).ok_or(TxnError::UnknownMapping)?;
        if meta.producer.id != caller.producer.id {
            return Err(TxnError::UnknownMapping);
        }
        if meta.producer.epoch != caller.producer.epoch {
            return Err(TxnError::Fenced);
        }
        if meta.state.is_prepare() {
            return Err(TxnError::Concurrent);
        }
        Ok(meta)
    }

    /// `meta` with an open transaction: Ongoing, started now if it was idle.
    fn opened(meta: &TxnMetadata, now_ms: i64) -> TxnMetadata {
        let mut next = meta.clone();
        if meta.state.is_idle() {
            next.partitions.clear();
            next.groups.clear();
            next.start_ms = now_ms;
            next.timed_out = false;
        }
        next.state = TxnState::Ongoing;
        next.ever_opened = true;
        next.last_update_ms = now_ms;
        next
    }

    /// AddPartitionsToTxn: adds `partitions` to the caller's transaction, opening one
    /// if none is. `None`: they were all in it already (nothing to write).
    ///
    /// Errors: [`TxnError::UnknownMapping`], [`TxnError::Fenced`],
    /// [`TxnError::Concurrent`], [`TxnError::TooLarge`].
    pub fn add_partitions(
        &self,
        now_ms: i64,
        caller: &Caller,
        partitions: &[TopicPartition],
    ) -> Result<Option<TxnMetadata>, TxnError> {
        let meta = self.check(caller)?;
        if meta.state == TxnState::Ongoing && partitions.iter().all(|p| meta.partitions.contains(p))
        {
            return Ok(None);
        }
        let mut next = Self::opened(meta, now_ms);
        next.partitions.extend(partitions.iter().cloned());
        if next.partitions.len() > self.limits.max_partitions_per_transaction {
            return Err(TxnError::TooLarge);
        }
        Ok(Some(next))
    }

    /// KIP-890 part 1 (AddPartitionsToTxn `verify_only`, and the Produce handler):
    /// whether `partition` is in the open transaction of producer `producer`.
    ///
    /// Errors: [`TxnError::UnknownMapping`] (no transactional id has this producer id),
    /// [`TxnError::Fenced`] (an older epoch), [`TxnError::InvalidState`] (not added, or
    /// no transaction open).
    pub fn verify_partition(
        &self,
        producer: ProducerIdEpoch,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        let meta = self
            .by_producer_id(producer.id)
            .ok_or(TxnError::UnknownMapping)?;
        if producer.epoch < meta.producer.epoch {
            return Err(TxnError::Fenced);
        }
        if meta.state == TxnState::Ongoing
            && producer.epoch == meta.producer.epoch
            && meta.partitions.contains(partition)
        {
            Ok(())
        } else {
            Err(TxnError::InvalidState)
        }
    }

    /// AddOffsetsToTxn: adds `group` to the caller's transaction, opening one if none
    /// is. `None`: it was in it already.
    ///
    /// Errors: as [`Transactions::add_partitions`].
    pub fn add_offsets(
        &self,
        now_ms: i64,
        caller: &Caller,
        group: &str,
    ) -> Result<Option<TxnMetadata>, TxnError> {
        let meta = self.check(caller)?;
        if meta.state == TxnState::Ongoing && meta.groups.contains_key(group) {
            return Ok(None);
        }
        let mut next = Self::opened(meta, now_ms);
        next.groups.entry(group.to_owned()).or_default();
        if next.groups.len() > self.limits.max_groups_per_transaction {
            return Err(TxnError::TooLarge);
        }
        Ok(Some(next))
    }

    /// Staging of a validated TxnOffsetCommit (the group coordinator's
    /// `StageTxnOffsets`): the offsets join the open transaction of producer
    /// `producer`, to which AddOffsetsToTxn must have added `group`. Later offsets for
    /// a partition replace earlier ones.
    ///
    /// Errors: [`TxnError::UnknownMapping`], [`TxnError::Fenced`] (another epoch),
    /// [`TxnError::InvalidState`] (no open transaction, or the group was not added),
    /// [`TxnError::TooLarge`].
    pub fn stage_offsets(
        &self,
        now_ms: i64,
        producer: ProducerIdEpoch,
        group: &str,
        offsets: &[(TopicPartition, StagedOffset)],
    ) -> Result<TxnMetadata, TxnError> {
        let meta = self
            .by_producer_id(producer.id)
            .ok_or(TxnError::UnknownMapping)?;
        if producer.epoch != meta.producer.epoch {
            return Err(TxnError::Fenced);
        }
        if meta.state != TxnState::Ongoing || !meta.groups.contains_key(group) {
            return Err(TxnError::InvalidState);
        }
        let mut next = meta.clone();
        next.last_update_ms = now_ms;
        let staged = next.groups.entry(group.to_owned()).or_default();
        for (partition, offset) in offsets {
            staged.insert(partition.clone(), offset.clone());
        }
        if next.staged_offset_count() > self.limits.max_offsets_per_transaction {
            return Err(TxnError::TooLarge);
        }
        Ok(next)
    }

    /// EndTxn: `committed` true commits, false aborts the caller's open transaction.
    /// `None`: a retry of the call that completed it (nothing to write, answer
    /// success), or the librdkafka case below.
    ///
    /// An abort after a commit is INVALID_TXN_STATE, as Kafka answers it, except in the
    /// one case that led librdkafka to send it ([`Transactions::note_refused`]): this
    /// producer's AddPartitionsToTxn or AddOffsetsToTxn was refused
    /// CONCURRENT_TRANSACTIONS while its previous transaction was PrepareCommit, and no
    /// transaction opened since. Then the abort is retriable (`Concurrent`) while the
    /// commit completes and success (nothing written, the commit stays) after.
    ///
    /// Errors: [`TxnError::UnknownMapping`], [`TxnError::Fenced`],
    /// [`TxnError::Concurrent`] (the same outcome being completed),
    /// [`TxnError::InvalidState`] (no transaction open, or the other outcome).
    pub fn end_txn(
        &self,
        now_ms: i64,
        caller: &Caller,
        committed: bool,
    ) -> Result<Option<TxnMetadata>, TxnError> {
        let meta = self.txns.get(&caller.id).ok_or(TxnError::UnknownMapping)?;
        if meta.producer.id != caller.producer.id {
            return Err(TxnError::UnknownMapping);
        }
        if meta.producer.epoch != caller.producer.epoch {
            return Err(TxnError::Fenced);
        }
        match (meta.state, committed) {
            (TxnState::Ongoing, _) => {
                let mut next = meta.clone();
                next.state = if committed {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.last_update_ms = now_ms;
                Ok(Some(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            // An abort of a transaction that never opened here: the client's
            // AddPartitionsToTxn was refused `CONCURRENT_TRANSACTIONS` while the previous
            // transaction was still PrepareCommit, and the application aborted before the
            // client retried it (librdkafka purges the retry and still sends EndTxn, its
            // request count having counted the refused request). Nothing of this
            // transaction is in any log (KIP-890 verification refuses a Produce to a
            // partition not added), so there is nothing to abort: success, nothing
            // written. Kafka answers INVALID_TXN_STATE here, which librdkafka treats as
            // fatal (librdkafka#4849); this answer is Drover's deviation, made only when
            // that refusal was recorded for this producer. Any other abort of committed
            // data is INVALID_TXN_STATE, as in Kafka.
            (TxnState::CompleteCommit, false) if self.refused_while_committing(caller) => Ok(None),
            // The same case with the EndTxn arriving before the commit completed:
            // retriable, the retried abort finds CompleteCommit.
            (TxnState::PrepareCommit, false) if self.refused_while_committing(caller) => {
                Err(TxnError::Concurrent)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::Concurrent)
            }
            _ => Err(TxnError::InvalidState),
        }
    }

    /// After every marker was written and the group offsets completed: `id`'s
    /// Prepare* state becomes Complete*, its partitions and groups cleared. `None` if
    /// it is not in a Prepare* state.
    pub fn complete(&self, now_ms: i64, id: &TransactionalId) -> Option<TxnMetadata> {
        let meta = self.txns.get(id)?;
        let state = match meta.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let mut next = meta.clone();
        next.state = state;
        next.partitions.clear();
        next.groups.clear();
        next.start_ms = -1;
        next.last_update_ms = now_ms;
        Some(next)
    }

    /// Open transactions past their timeout at `now_ms`, each as PrepareAbort with the
    /// epoch bumped (Kafka's `abortTimedOutTransactions`: the producer is fenced).
    pub fn timed_out(&self, now_ms: i64) -> Vec<TxnMetadata> {
        self.txns
            .values()
            .filter(|m| {
                m.state == TxnState::Ongoing
                    && m.start_ms.saturating_add(i64::from(m.timeout_ms)) <= now_ms
            })
            .map(|m| {
                let mut next = m.clone();
                next.producer.epoch = bumped(m.producer.epoch);
                next.last_producer = ProducerIdEpoch::NONE;
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                next.timed_out = true;
                next
            })
            .collect()
    }

    /// Ids with no open transaction whose last change is `transactional.id.expiration.ms`
    /// old at `now_ms` (Kafka removes them as `Dead`), and ids that never opened a
    /// transaction whose last change is `unused_id_expiration_ms` old (if shorter).
    pub fn expired(&self, now_ms: i64) -> Vec<TransactionalId> {
        let unused = self
            .limits
            .unused_id_expiration_ms
            .min(self.limits.id_expiration_ms);
        self.txns
            .values()
            .filter(|m| {
                let after = if m.ever_opened {
                    self.limits.id_expiration_ms
                } else {
                    unused
                };
                m.state.is_idle() && m.last_update_ms.saturating_add(after) <= now_ms
            })
            .map(|m| m.id.clone())
            .collect()
    }

    /// Ids whose transaction is decided but not completed (Prepare*): at startup, their
    /// markers are written again.
    pub fn preparing(&self) -> Vec<TransactionalId> {
        self.txns
            .values()
            .filter(|m| m.state.is_prepare())
            .map(|m| m.id.clone())
            .collect()
    }

    /// Number of transactional ids per state (for the metrics).
    pub fn counts(&self) -> BTreeMap<TxnState, usize> {
        let mut counts: BTreeMap<TxnState, usize> = TxnState::ALL.iter().map(|s| (*s, 0)).collect();
        for meta in self.txns.values() {
            *counts.entry(meta.state).or_default() += 1;
        }
        counts
    }
}

/// `epoch` + 1, or `epoch` when it cannot grow (Kafka's fencing keeps the epoch then).
fn bumped(epoch: i16) -> i16 {
    epoch.checked_add(1).unwrap_or(epoch)
}

/// Roomy limits for unit tests of the drivers around the state machine (ten of
/// everything, 60 s timeouts).
#[cfg(test)]
pub(crate) const TEST_LIMITS: Limits = Limits {
    max_timeout_ms: 60_000,
    id_expiration_ms: 1_000_000,
    unused_id_expiration_ms: 1_000_000,
    max_transactional_ids: 10,
    max_partitions_per_transaction: 10,
    max_groups_per_transaction: 10,
    max_offsets_per_transaction: 10,
};

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
