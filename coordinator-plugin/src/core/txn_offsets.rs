//! Pending transactional offsets: what TxnOffsetCommit (KIP-98, KIP-447) left for a
//! transaction that has not ended, per group id and producer id — the one place the
//! coordinator keeps them, beside the group table (`Groups::txn`), after Kafka's
//! `OffsetMetadataManager` (`pendingTransactionalOffsets`, `openTransactionsByGroup`).
//!
//! A group id's pending offsets do not need a group: a simple transactional commit
//! (generation −1) has none. An entry is *open* until its transaction ends; when it
//! commits, its offsets leave the table for the commit queue and stay *committing*
//! (still unstable for OffsetFetch's `require_stable`) until the store has them; when
//! it aborts they are dropped. A TxnOffsetCommit of the same producer id with another
//! epoch while offsets are open does not replace them (`check_producer`).
//!
//! Bounds (Kafka has none): [`PendingBounds`] caps the open entries per group and over
//! every group, reservations of TxnOffsetCommits being staged included.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use crate::types::{GroupId, OffsetEntry, TopicName, TopicPartition, TxnProducer};

/// The open offsets of one producer for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenTxn {
    /// The epoch they were staged with (the latest, if several TxnOffsetCommits).
    pub epoch: i16,
    /// By partition, the latest offset.
    pub offsets: BTreeMap<TopicPartition, OffsetEntry>,
}

/// The caps of [`TxnOffsets`]: `per_group` open entries per group id, `total` over
/// every group (`max_pending_txn_offsets_per_group`, `max_pending_txn_offsets`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingBounds {
    pub per_group: usize,
    pub total: usize,
}

/// Every group's pending transactional offsets.
#[derive(Debug, Default)]
pub(crate) struct TxnOffsets {
    /// Per group id, per producer id, the open offsets.
    open: BTreeMap<GroupId, BTreeMap<i64, OpenTxn>>,
    /// Per group id, partitions whose committed transactional offsets are on their way
    /// to the store, with how many batches carry them.
    committing: BTreeMap<GroupId, BTreeMap<TopicPartition, usize>>,
    /// Open entries plus reservations, per group id.
    per_group: BTreeMap<GroupId, usize>,
    /// Open entries plus reservations, over every group.
    total: usize,
}

impl TxnOffsets {
    /// Whether `producer` may stage offsets for `group`: refused with
    /// INVALID_PRODUCER_EPOCH when the group holds open offsets of a newer epoch of the
    /// same producer id (a fenced producer), and CONCURRENT_TRANSACTIONS (retriable)
    /// when it holds offsets of an older epoch whose transaction has not ended: they
    /// are resolved by that transaction's outcome, never replaced silently.
    pub(crate) fn check_producer(
        &self,
        group: &str,
        producer: TxnProducer,
    ) -> Result<(), ResponseError> {
        match self.open.get(group).and_then(|p| p.get(&producer.id)) {
            Some(t) if t.epoch > producer.epoch => Err(ResponseError::InvalidProducerEpoch),
            Some(t) if t.epoch < producer.epoch => Err(ResponseError::ConcurrentTransactions),
            _ => Ok(()),
        }
    }

    /// How many of `offsets` would be new entries of `producer_id` in `group` (the
    /// others replace an open offset of the same partition and take no more room).
    pub(crate) fn new_entries(
        &self,
        group: &str,
        producer_id: i64,
        offsets: &[OffsetEntry],
    ) -> usize {
        match self.open.get(group).and_then(|p| p.get(&producer_id)) {
            None => offsets.len(),
            Some(t) => offsets
                .iter()
                .filter(|e| !t.offsets.contains_key(&e.tp))
                .count(),
        }
    }

    /// Reserves room for `count` entries of `group` being staged, or refuses with
    /// COORDINATOR_LOAD_IN_PROGRESS when a bound would be passed.
    pub(crate) fn reserve(
        &mut self,
        group: &GroupId,
        count: usize,
        bounds: PendingBounds,
    ) -> Result<(), ResponseError> {
        let held = self.per_group.get(group).copied().unwrap_or(0);
        if held + count > bounds.per_group || self.total + count > bounds.total {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        *self.per_group.entry(group.clone()).or_default() += count;
        self.total += count;
        Ok(())
    }

    /// Gives back a reservation of `count` entries of `group`.
    pub(crate) fn release(&mut self, group: &GroupId, count: usize) {
        if let Some(n) = self.per_group.get_mut(group) {
            *n = n.saturating_sub(count);
            if *n == 0 {
                self.per_group.remove(group);
            }
        }
        self.total = self.total.saturating_sub(count);
    }

    /// Adds staged (or restored) offsets of `producer` for `group` as open, within a
    /// reservation of `reserved` entries: an offset for a partition already open
    /// replaces it (the latest TxnOffsetCommit wins, as in Kafka), and the reservation
    /// left over is given back. A newer epoch than the open one is taken as the open
    /// epoch (a restore after a fencing the host resolved).
    pub(crate) fn add(
        &mut self,
        group: &GroupId,
        producer: TxnProducer,
        offsets: Vec<OffsetEntry>,
        reserved: usize,
    ) {
        let txn = self
            .open
            .entry(group.clone())
            .or_default()
            .entry(producer.id)
            .or_insert_with(|| OpenTxn {
                epoch: producer.epoch,
                offsets: BTreeMap::new(),
            });
        txn.epoch = txn.epoch.max(producer.epoch);
        let mut added = 0;
        for e in offsets {
            if txn.offsets.insert(e.tp.clone(), e).is_none() {
                added += 1;
            }
        }
        if txn.offsets.is_empty() {
            self.drop_empty(group, producer.id);
        }
        // The entries kept are counted; what the reservation did not use is returned
        // (restores reserve nothing and may go over the bounds: they are durable).
        if added >= reserved {
            *self.per_group.entry(group.clone()).or_default() += added - reserved;
            self.total += added - reserved;
        } else {
            self.release(group, reserved - added);
        }
    }

    fn drop_empty(&mut self, group: &GroupId, producer_id: i64) {
        if let Some(p) = self.open.get_mut(group) {
            if p.get(&producer_id).is_some_and(|t| t.offsets.is_empty()) {
                p.remove(&producer_id);
            }
            if p.is_empty() {
                self.open.remove(group);
            }
        }
    }

    /// Takes the open offsets of `producer`'s id staged with its epoch or an earlier
    /// one, of every group, in group order: its transaction ended. Offsets of a later
    /// epoch (a stale outcome) stay.
    pub(crate) fn take_producer(&mut self, producer: TxnProducer) -> Vec<(GroupId, OpenTxn)> {
        let groups: Vec<GroupId> = self
            .open
            .iter()
            .filter(|(_, p)| {
                p.get(&producer.id)
                    .is_some_and(|t| t.epoch <= producer.epoch)
            })
            .map(|(g, _)| g.clone())
            .collect();
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            let Some(per_producer) = self.open.get_mut(&g) else {
                continue;
            };
            let Some(txn) = per_producer.remove(&producer.id) else {
                continue;
            };
            if per_producer.is_empty() {
                self.open.remove(&g);
            }
            self.release(&g, txn.offsets.len());
            out.push((g, txn));
        }
        out
    }

    /// Marks `tps` of `group` as committing (their batch is queued or in flight).
    pub(crate) fn start_committing<'a>(
        &mut self,
        group: &GroupId,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) {
        let c = self.committing.entry(group.clone()).or_default();
        for tp in tps {
            *c.entry(tp.clone()).or_default() += 1;
        }
    }

    /// The batch carrying `tps` of `group` got its result.
    pub(crate) fn end_committing<'a>(
        &mut self,
        group: &GroupId,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) {
        if let Some(c) = self.committing.get_mut(group) {
            for tp in tps {
                if let Some(n) = c.get_mut(tp) {
                    *n -= 1;
                    if *n == 0 {
                        c.remove(tp);
                    }
                }
            }
            if c.is_empty() {
                self.committing.remove(group);
            }
        }
    }

    /// Whether `tp` of `group` has transactional offsets not yet committed to the store
    /// (open, or committed and on their way): OffsetFetch with `require_stable`
    /// answers UNSTABLE_OFFSET_COMMIT for it.
    pub(crate) fn is_unstable(&self, group: &str, tp: &TopicPartition) -> bool {
        self.open
            .get(group)
            .is_some_and(|p| p.values().any(|t| t.offsets.contains_key(tp)))
            || self
                .committing
                .get(group)
                .is_some_and(|c| c.contains_key(tp))
    }

    /// Whether `group` has open transactional offsets.
    pub(crate) fn has_group(&self, group: &str) -> bool {
        self.open.contains_key(group)
    }

    /// Drops every open offset of `group` (DeleteGroups, or its slot lost): a later
    /// commit of those transactions writes nothing for the group, as Kafka's
    /// tombstones of a deleted group remove its pending offsets. Returns how many.
    pub(crate) fn drop_group(&mut self, group: &str) -> usize {
        let Some(per_producer) = self.open.remove(group) else {
            return 0;
        };
        let n: usize = per_producer.values().map(|t| t.offsets.len()).sum();
        self.release(&GroupId::new(group), n);
        n
    }

    /// Drops the open offsets of topics `lost` (deleted, or re-created with a new id),
    /// as Kafka's `onPartitionsDeleted` does.
    pub(crate) fn forget_topics(&mut self, lost: &BTreeSet<TopicName>) {
        let mut released = Vec::new();
        for (g, per_producer) in self.open.iter_mut() {
            for txn in per_producer.values_mut() {
                let before = txn.offsets.len();
                txn.offsets.retain(|tp, _| !lost.contains(&tp.topic));
                released.push((g.clone(), before - txn.offsets.len()));
            }
            per_producer.retain(|_, t| !t.offsets.is_empty());
        }
        self.open.retain(|_, p| !p.is_empty());
        for (g, n) in released {
            self.release(&g, n);
        }
        // Their committed offsets queued for the store are dropped with them.
        for c in self.committing.values_mut() {
            c.retain(|tp, _| !lost.contains(&tp.topic));
        }
        self.committing.retain(|_, c| !c.is_empty());
    }

    /// The number of open entries over every group (reservations excluded).
    #[cfg(test)]
    pub(crate) fn open_count(&self) -> usize {
        self.open
            .values()
            .flat_map(|p| p.values())
            .map(|t| t.offsets.len())
            .sum()
    }

    /// Every group id with open offsets.
    pub(crate) fn groups(&self) -> Vec<GroupId> {
        self.open.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(g: &str, t: &str, p: i32, offset: i64) -> OffsetEntry {
        OffsetEntry {
            group: GroupId::new(g),
            tp: TopicPartition::new(t, p),
            offset,
            metadata: None,
        }
    }

    const BOUNDS: PendingBounds = PendingBounds {
        per_group: 3,
        total: 4,
    };

    #[test]
    fn reservations_bound_each_group_and_the_whole() {
        let mut t = TxnOffsets::default();
        let (a, b) = (GroupId::new("a"), GroupId::new("b"));
        let p = TxnProducer { id: 1, epoch: 0 };
        t.reserve(&a, 2, BOUNDS).unwrap();
        t.add(&a, p, vec![entry("a", "t", 0, 1), entry("a", "t", 1, 1)], 2);
        assert_eq!(
            t.reserve(&a, 2, BOUNDS),
            Err(ResponseError::CoordinatorLoadInProgress)
        );
        t.reserve(&b, 2, BOUNDS).unwrap();
        assert_eq!(
            t.reserve(&b, 1, BOUNDS),
            Err(ResponseError::CoordinatorLoadInProgress),
            "the whole is full"
        );
        t.release(&b, 2);
        // A partition staged again replaces its offset and takes no more room.
        t.reserve(&a, 1, BOUNDS).unwrap();
        t.add(&a, p, vec![entry("a", "t", 0, 5)], 1);
        assert_eq!(t.open_count(), 2);
        let taken = t.take_producer(p);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].1.offsets[&TopicPartition::new("t", 0)].offset, 5);
        t.reserve(&a, 3, BOUNDS).unwrap();
    }

    #[test]
    fn another_epoch_replaces_nothing() {
        let mut t = TxnOffsets::default();
        let g = GroupId::new("g");
        t.add(
            &g,
            TxnProducer { id: 7, epoch: 3 },
            vec![entry("g", "t", 0, 1)],
            0,
        );
        assert_eq!(
            t.check_producer("g", TxnProducer { id: 7, epoch: 2 }),
            Err(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            t.check_producer("g", TxnProducer { id: 7, epoch: 4 }),
            Err(ResponseError::ConcurrentTransactions)
        );
        assert_eq!(
            t.check_producer("g", TxnProducer { id: 7, epoch: 3 }),
            Ok(())
        );
        assert_eq!(
            t.check_producer("g", TxnProducer { id: 8, epoch: 0 }),
            Ok(())
        );
        // A stale outcome (an older epoch) leaves them; the right one takes them.
        assert!(t.take_producer(TxnProducer { id: 7, epoch: 2 }).is_empty());
        assert!(t.is_unstable("g", &TopicPartition::new("t", 0)));
        assert_eq!(t.take_producer(TxnProducer { id: 7, epoch: 3 }).len(), 1);
        assert!(!t.is_unstable("g", &TopicPartition::new("t", 0)));
    }

    #[test]
    fn deleted_topics_and_groups_lose_their_open_offsets() {
        let mut t = TxnOffsets::default();
        let g = GroupId::new("g");
        let p = TxnProducer { id: 1, epoch: 0 };
        t.add(
            &g,
            p,
            vec![entry("g", "gone", 0, 1), entry("g", "kept", 0, 1)],
            0,
        );
        t.forget_topics(&[TopicName::new("gone")].into_iter().collect());
        assert_eq!(t.open_count(), 1);
        assert_eq!(t.drop_group("g"), 1);
        assert!(!t.has_group("g"));
        assert_eq!(t.total, 0);
    }
}
