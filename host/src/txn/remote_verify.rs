//! KIP-890 part 1 at a leader that does not coordinate the transaction (cluster
//! mode): before appending a transactional batch, the leader checks that its
//! partition was added to the producer's open transaction. The Produce request names
//! the transactional id; the leader reads that id's record from ZooKeeper
//! ([`super::zk_store::ZkTxnStore::read`], after a `sync`) and decides with the same
//! pure rule the coordinator uses ([`super::state::Transactions::verify_partition`]).
//! A positive answer is cached per (producer id, epoch, partition) until the leader
//! writes that partition's marker for the producer ([`VerifiedCache::forget`]), so a
//! transaction costs one ZooKeeper read per partition, not one per batch.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
};

use super::{
    coordinator::TxnCoordinator,
    error::TxnError,
    state::Transactions,
    types::{ProducerIdEpoch, TopicPartition, TransactionalId},
};

/// Most cached answers; when full the cache starts over (answers are re-read).
pub const MAX_ENTRIES: usize = 100_000;

/// Positive answers: (producer id, partition) → the epoch that was verified.
#[derive(Debug, Default)]
pub struct VerifiedCache(Mutex<HashMap<(i64, TopicPartition), i16>>);

impl VerifiedCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<(i64, TopicPartition), i16>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `producer` was verified for `partition` since its last marker there.
    pub fn contains(&self, producer: ProducerIdEpoch, partition: &TopicPartition) -> bool {
        self.lock()
            .get(&(producer.id, partition.clone()))
            .is_some_and(|e| *e == producer.epoch)
    }

    /// Remembers a positive answer.
    pub fn insert(&self, producer: ProducerIdEpoch, partition: TopicPartition) {
        let mut cache = self.lock();
        if cache.len() >= MAX_ENTRIES {
            cache.clear();
        }
        cache.insert((producer.id, partition), producer.epoch);
    }

    /// Forgets `producer_id`'s answer for `partition` (its marker was written there:
    /// the transaction ended in this partition).
    pub fn forget(&self, producer_id: i64, partition: &TopicPartition) {
        self.lock().remove(&(producer_id, partition.clone()));
    }

    /// Number of cached answers.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// Verifies `partition` for `producer` in transactional id `id`'s open transaction,
/// coordinated by another broker: from the cache, else from ZooKeeper. Blocking.
///
/// Errors: [`TxnError::Fenced`] (an older epoch), [`TxnError::InvalidState`] (not
/// added, no open transaction, another producer id, an unknown id),
/// [`TxnError::Storage`] (ZooKeeper unavailable; the producer retries).
pub fn verify(
    txn: &TxnCoordinator,
    id: &TransactionalId,
    producer: ProducerIdEpoch,
    partition: &TopicPartition,
) -> Result<(), TxnError> {
    if txn.verified.contains(producer, partition) {
        return Ok(());
    }
    let Some(zk) = txn.zk_store() else {
        return Err(TxnError::InvalidState);
    };
    let meta = zk
        .read(id)
        .map_err(|e| {
            crate::warn_limited!(
                "txn.remote_verify_failed",
                "reading transactional id `{id}` for a produce check: {e}"
            );
            TxnError::Storage
        })?
        .ok_or(TxnError::InvalidState)?;
    decide(txn.limits(), meta, producer, partition)?;
    txn.verified.insert(producer, partition.clone());
    Ok(())
}

/// The coordinator's rule on one record.
fn decide(
    limits: super::state::Limits,
    meta: super::types::TxnMetadata,
    producer: ProducerIdEpoch,
    partition: &TopicPartition,
) -> Result<(), TxnError> {
    let mut one = Transactions::new(limits);
    one.apply(meta);
    one.verify_partition(producer, partition)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::txn::types::{TxnMetadata, TxnState};

    use crate::txn::state::TEST_LIMITS as LIMITS;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition: p,
        }
    }

    fn record(state: TxnState) -> TxnMetadata {
        TxnMetadata {
            id: TransactionalId::new("x").unwrap(),
            producer: ProducerIdEpoch { id: 9, epoch: 3 },
            last_producer: ProducerIdEpoch::NONE,
            timeout_ms: 1000,
            state,
            partitions: BTreeSet::from([tp(0)]),
            groups: BTreeMap::new(),
            start_ms: 1,
            last_update_ms: 1,
            timed_out: false,
            ever_opened: state != TxnState::Empty,
        }
    }

    #[test]
    fn the_coordinators_rule_on_a_record_read_from_zookeeper() {
        let p = ProducerIdEpoch { id: 9, epoch: 3 };
        assert_eq!(decide(LIMITS, record(TxnState::Ongoing), p, &tp(0)), Ok(()));
        assert_eq!(
            decide(LIMITS, record(TxnState::Ongoing), p, &tp(1)),
            Err(TxnError::InvalidState)
        );
        assert_eq!(
            decide(LIMITS, record(TxnState::PrepareCommit), p, &tp(0)),
            Err(TxnError::InvalidState)
        );
        let old = ProducerIdEpoch { id: 9, epoch: 2 };
        assert_eq!(
            decide(LIMITS, record(TxnState::Ongoing), old, &tp(0)),
            Err(TxnError::Fenced)
        );
        let other = ProducerIdEpoch { id: 10, epoch: 3 };
        assert_eq!(
            decide(LIMITS, record(TxnState::Ongoing), other, &tp(0)),
            Err(TxnError::UnknownMapping)
        );
    }

    #[test]
    fn the_cache_holds_an_epoch_until_the_marker() {
        let cache = VerifiedCache::default();
        let p = ProducerIdEpoch { id: 9, epoch: 3 };
        cache.insert(p, tp(0));
        assert!(cache.contains(p, &tp(0)));
        assert!(!cache.contains(ProducerIdEpoch { id: 9, epoch: 4 }, &tp(0)));
        assert!(!cache.contains(p, &tp(1)));
        cache.forget(9, &tp(0));
        assert!(!cache.contains(p, &tp(0)));
        assert!(cache.is_empty());
    }
}
