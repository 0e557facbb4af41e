//! Idempotent producers' state in one partition (KIP-98, as Kafka 4.x keeps it in its
//! `ProducerStateManager`): per producer id, its epoch and its last five batches'
//! sequence and offset ranges ([`entry`]), the rules a produced batch is checked
//! against ([`ProducerStates::check`]), and the snapshot files that carry the state
//! across restarts ([`snapshot`]).
//!
//! The rules, as Kafka 4.x's `UnifiedLog.analyzeAndValidateProducerState` and
//! `ProducerAppendInfo` apply them to a client's batch (producer id ≥ 0):
//!
//! - same epoch, same first and last sequence as one of the last five batches: a
//!   **duplicate** — answered with the original batch's offsets, not written again;
//! - an epoch older than the producer's: `INVALID_PRODUCER_EPOCH`;
//! - a newer epoch (the client bumped it after an error, KIP-360) must start at
//!   sequence 0, else `OUT_OF_ORDER_SEQUENCE_NUMBER`;
//! - same epoch, first sequence not the one after the producer's last:
//!   `OUT_OF_ORDER_SEQUENCE_NUMBER`;
//! - a producer id the partition does not know (new, or expired): accepted with any
//!   sequence. Kafka has answered `UNKNOWN_PRODUCER_ID` to this only before 2.5; since
//!   KIP-360 (Kafka 2.5) the leader accepts it, so a producer whose state expired or
//!   whose records retention deleted goes on without an error.
//!
//! - a batch that is not transactional from a producer with a transaction ongoing in
//!   the partition: `INVALID_TXN_STATE` (Kafka's `ProducerAppendInfo` "expected
//!   transactional write"). Without this rule a stranger who read a transaction's
//!   producer id and epoch (DescribeTransactions lists them) could bump the epoch with a
//!   plain idempotent batch, so that the transaction's own marker is refused as fenced
//!   and the partition's last stable offset stays frozen.
//!
//! A transaction ends with a marker ([`ProducerStates::marker_fenced`]): one whose epoch
//! is at least the epoch of the batch that opened the transaction ends it, whatever
//! later epoch a batch may have carried; only an older marker (a zombie coordinator's)
//! is refused, so no marker is dropped in a way that leaves its transaction open.
//!
//! Bounds: at most [`ProducerLimits::max_producer_ids`] producer ids per partition
//! (`[log] max_producer_ids_per_partition`). A batch from one more id is accepted when
//! room can be made: once expired ids are swept, the producers idle longest (oldest
//! last write) are **evicted** (1% of the cap at once, so the sweep and the scan behind
//! an eviction are paid once per hundred newcomers at large caps), but only those idle
//! for at least [`ProducerLimits::min_idle_for_eviction_ms`] (`[log]
//! producer_id_eviction_min_idle_ms`, longer than any client's retry window). An
//! evicted producer is unknown afterwards: a retry of one of its old batches would be
//! accepted as new (written twice), which is why a producer that wrote recently is
//! never evicted — a flood of newcomers, however many ids it holds, cannot make an
//! honest producer's retry a duplicate. When every remembered producer wrote recently
//! the newcomer's batch is refused with a retriable error ([`ProducerError::TableFull`])
//! instead. Ids that were never handed out are refused before they reach the table
//! (the Produce handler, `drover_host::broker::producer_ids`). A producer that has not
//! written for [`ProducerLimits::expiration_ms`] (Kafka's `producer.id.expiration.ms`)
//! is forgotten.

pub mod entry;
pub mod snapshot;

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;

use super::batch::BatchHeader;
pub use entry::{last_sequence, BatchMeta, ProducerEntry, BATCHES_RETAINED};

/// How often, at most, the whole table is swept for expired producers, in ms (Kafka's
/// `producer.id.expiration.check.interval.ms` default). Lookups treat an expired
/// producer as unknown whatever the sweep did.
pub const SWEEP_INTERVAL_MS: i64 = 10 * 60 * 1000;

/// The settings of a partition's producer state, from [`super::LogConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerLimits {
    /// Kafka `producer.id.expiration.ms`: a producer with no append for this long is
    /// forgotten, in ms.
    pub expiration_ms: i64,
    /// Most producer ids remembered per partition.
    pub max_producer_ids: usize,
    /// A producer is evicted at the cap only after this long without a write, in ms
    /// (`[log] producer_id_eviction_min_idle_ms`).
    pub min_idle_for_eviction_ms: i64,
}

/// Why a batch with a producer id was refused. [`ProducerError::error`] is the Kafka
/// error of the Produce response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// The batch's epoch is older than the producer's (`INVALID_PRODUCER_EPOCH`, 47).
    #[error("producer {producer_id} sent epoch {epoch}, older than its epoch {current}")]
    FencedEpoch {
        /// The producer id.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The epoch the partition knows.
        current: i16,
    },
    /// The batch's first sequence does not follow the producer's last one, or a new
    /// epoch does not start at 0 (`OUT_OF_ORDER_SEQUENCE_NUMBER`, 45).
    #[error(
        "out of order sequence for producer {producer_id} epoch {epoch}: batch starts at \
         {first_seq}, expected {expected}"
    )]
    OutOfOrder {
        /// The producer id.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The batch's first sequence.
        first_seq: i32,
        /// The sequence the partition expected (0 for a new epoch).
        expected: i32,
    },
    /// A batch that is not transactional from a producer whose transaction is ongoing in
    /// the partition (`INVALID_TXN_STATE`, 48).
    #[error(
        "expected a transactional write from producer {producer_id}: its transaction from \
         offset {txn_first_offset} is ongoing in this partition"
    )]
    ExpectedTransactional {
        /// The producer id.
        producer_id: i64,
        /// The first offset of its ongoing transaction.
        txn_first_offset: i64,
    },
    /// A new producer id while every remembered one wrote within the eviction floor
    /// (`NOT_ENOUGH_REPLICAS`, 19: retriable, as a client retries a full partition).
    #[error(
        "the partition remembers {max} producers (max_producer_ids_per_partition), each \
         active within {min_idle_ms} ms (producer_id_eviction_min_idle_ms): producer \
         {producer_id} is not taken now; retry later"
    )]
    TableFull {
        /// The new producer id.
        producer_id: i64,
        /// The cap.
        max: usize,
        /// The eviction floor, ms.
        min_idle_ms: i64,
    },
}

impl ProducerError {
    /// The Kafka error for a Produce response.
    pub fn error(&self) -> ResponseError {
        match self {
            ProducerError::FencedEpoch { .. } => ResponseError::InvalidProducerEpoch,
            ProducerError::OutOfOrder { .. } => ResponseError::OutOfOrderSequenceNumber,
            ProducerError::ExpectedTransactional { .. } => ResponseError::InvalidTxnState,
            ProducerError::TableFull { .. } => ResponseError::NotEnoughReplicas,
        }
    }
}

/// What to do with a batch that passed [`ProducerStates::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Append it (then [`ProducerStates::record`] it).
    Append,
    /// A retry of this batch, already in the log: answer with its offsets.
    Duplicate(BatchMeta),
}

/// The producer state of one partition.
#[derive(Debug, Clone)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
    limits: ProducerLimits,
    last_sweep_ms: i64,
    /// Producers evicted at the cap since the table was made.
    evicted: u64,
    /// Ongoing transactions: (first offset, producer id), for the last stable offset.
    ongoing: BTreeSet<(i64, i64)>,
}

impl ProducerStates {
    /// An empty table.
    pub fn new(limits: ProducerLimits) -> ProducerStates {
        ProducerStates {
            producers: HashMap::new(),
            limits,
            last_sweep_ms: i64::MIN,
            evicted: 0,
            ongoing: BTreeSet::new(),
        }
    }

    /// The table holding `producers` (from a snapshot). A snapshot written under a
    /// higher cap may hold more than [`ProducerLimits::max_producer_ids`]: the ones idle
    /// longest are evicted down to the cap (and counted in [`Self::evicted`]).
    pub fn with_entries(
        limits: ProducerLimits,
        producers: HashMap<i64, ProducerEntry>,
    ) -> ProducerStates {
        let mut states = ProducerStates {
            producers,
            ..ProducerStates::new(limits)
        };
        states.rebuild_ongoing();
        states.evict_down_to(limits.max_producer_ids, i64::MAX);
        states
    }

    fn rebuild_ongoing(&mut self) {
        self.ongoing = self
            .producers
            .iter()
            .filter_map(|(id, e)| e.txn_first_offset.map(|f| (f, *id)))
            .collect();
    }

    /// The first offset of the earliest ongoing transaction: the partition's last
    /// stable offset when there is one (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.first().map(|(offset, _)| *offset)
    }

    /// The ongoing transactions, as (first offset, producer id), earliest first.
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().copied()
    }

    /// Whether a marker of `epoch` for `producer_id` is a fenced zombie's at `now_ms`:
    /// `Some(the epoch it is older than)` when the producer has a transaction ongoing
    /// that a batch of a newer epoch opened, or has none and a newer epoch than the
    /// marker's. A marker at least as new as the ongoing transaction's opening batch
    /// ends that transaction even when a later batch carried a newer epoch.
    pub fn marker_fenced(&self, producer_id: i64, epoch: i16, now_ms: i64) -> Option<i16> {
        let entry = self.get(producer_id, now_ms)?;
        let current = if entry.txn_first_offset.is_some() {
            entry.txn_epoch
        } else {
            entry.epoch
        };
        (epoch < current).then_some(current)
    }

    /// Ends `producer_id`'s transaction for a marker of `epoch` written at `offset` at
    /// `now_ms` (Kafka's `ProducerAppendInfo.appendEndTxnMarker`): the producer's
    /// epoch becomes the marker's (a newer one forgets the old epoch's batches), its
    /// ongoing transaction ends. Returns the transaction's first offset, if one was
    /// ongoing. A producer the partition does not know is not added.
    pub fn end_transaction(&mut self, producer_id: i64, epoch: i16, now_ms: i64) -> Option<i64> {
        let entry = self.producers.get_mut(&producer_id)?;
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.retain(|_| false);
        }
        entry.last_write_ms = entry.last_write_ms.max(now_ms);
        let first = entry.txn_first_offset.take()?;
        self.ongoing.remove(&(first, producer_id));
        Some(first)
    }

    /// Producers evicted because the table was full (see the [module docs](self)),
    /// since it was made.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Evicts the producers idle longest until at most `max` remain, in the order of
    /// [`idle_order`]: oldest last write, then oldest last offset, then lowest id. Only
    /// producers with no transaction ongoing whose last write is at or before
    /// `idle_since_ms` go; fewer than needed may. One pass over the table per call, O(n)
    /// however many go (a selection, not a sort).
    fn evict_down_to(&mut self, max: usize, idle_since_ms: i64) {
        let excess = self.producers.len().saturating_sub(max);
        if excess == 0 {
            return;
        }
        if excess == 1 {
            if let Some(id) = self
                .producers
                .iter()
                .filter(|(_, e)| e.txn_first_offset.is_none() && e.last_write_ms <= idle_since_ms)
                .min_by_key(|(id, e)| idle_order(**id, e))
                .map(|(id, _)| *id)
            {
                self.producers.remove(&id);
                self.evicted += 1;
            }
        } else {
            let mut idle: Vec<(i64, i64, i64)> = self
                .producers
                .iter()
                .filter(|(_, e)| e.txn_first_offset.is_none() && e.last_write_ms <= idle_since_ms)
                .map(|(id, e)| idle_order(*id, e))
                .collect();
            let excess = excess.min(idle.len());
            if excess > 0 && excess < idle.len() {
                // The `excess` idlest first, in no particular order: O(n).
                idle.select_nth_unstable(excess - 1);
            }
            for (_, _, id) in &idle[..excess] {
                self.producers.remove(id);
            }
            self.evicted += excess as u64;
        }
    }

    /// The settings.
    pub fn limits(&self) -> ProducerLimits {
        self.limits
    }

    /// Number of producer ids remembered.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is remembered.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The state of `producer_id`, unless it expired by `now_ms`.
    pub fn get(&self, producer_id: i64, now_ms: i64) -> Option<&ProducerEntry> {
        self.producers
            .get(&producer_id)
            .filter(|e| !self.expired(e, now_ms))
    }

    /// Every remembered producer (expired ones included until the next sweep).
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }

    /// The producers not expired by `now_ms` (Kafka's `activeProducers`, which
    /// DescribeProducers lists), in no particular order.
    pub fn active(&self, now_ms: i64) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers
            .iter()
            .filter(move |(_, e)| !self.expired(e, now_ms))
            .map(|(id, e)| (*id, e))
    }

    /// Whether `entry` expired by `now_ms`; a producer in a transaction never does (as
    /// Kafka's `isProducerExpired`: the transaction coordinator's timeout ends it).
    fn expired(&self, entry: &ProducerEntry, now_ms: i64) -> bool {
        entry.txn_first_offset.is_none()
            && now_ms.saturating_sub(entry.last_write_ms) >= self.limits.expiration_ms
    }

    /// Checks a client's batch against the rules of the [module docs](self) at `now_ms`
    /// (ms since the Unix epoch). A batch without a producer id is always appended.
    /// Changes nothing but the removal of expired producers and, for a new producer
    /// when the table is full, the eviction of the one idle longest.
    ///
    /// Errors: [`ProducerError`].
    pub fn check(&mut self, header: &BatchHeader, now_ms: i64) -> Result<Check, ProducerError> {
        let producer_id = header.producer_id;
        if producer_id < 0 {
            return Ok(Check::Append);
        }
        self.maybe_sweep(now_ms);
        let epoch = header.producer_epoch;
        let first_seq = header.base_sequence;
        let last_seq = last_sequence(first_seq, header.last_offset_delta);
        let Some(entry) = self.get(producer_id, now_ms) else {
            self.producers.remove(&producer_id);
            let max = self.limits.max_producer_ids;
            if self.producers.len() >= max {
                // One sweep and one pass over the table make room for a batch of
                // newcomers, not one: at a cap of 10,000 each new producer then costs
                // about 100 entries' worth of work instead of 20,000.
                self.sweep(now_ms);
                let idle_since = now_ms.saturating_sub(self.limits.min_idle_for_eviction_ms);
                self.evict_down_to(max.saturating_sub(eviction_batch(max)), idle_since);
                if self.producers.len() >= max {
                    return Err(ProducerError::TableFull {
                        producer_id,
                        max,
                        min_idle_ms: self.limits.min_idle_for_eviction_ms,
                    });
                }
            }
            return Ok(Check::Append);
        };
        if epoch < entry.epoch {
            return Err(ProducerError::FencedEpoch {
                producer_id,
                epoch,
                current: entry.epoch,
            });
        }
        if epoch > entry.epoch {
            if first_seq != 0 {
                return Err(ProducerError::OutOfOrder {
                    producer_id,
                    epoch,
                    first_seq,
                    expected: 0,
                });
            }
            return expect_transactional(producer_id, entry, header);
        }
        if let Some(original) = entry.find_duplicate(epoch, first_seq, last_seq) {
            return Ok(Check::Duplicate(original));
        }
        let last = entry.last_seq().unwrap_or(-1);
        if !entry::in_sequence(last, first_seq) {
            return Err(ProducerError::OutOfOrder {
                producer_id,
                epoch,
                first_seq,
                expected: last_sequence(last, 1),
            });
        }
        expect_transactional(producer_id, entry, header)
    }

    /// Records a batch appended at offset `first_offset` (its header's base offset may
    /// not be set yet) at `now_ms`. Also used to rebuild the state from the log, where
    /// no rule is applied (the log holds what was accepted).
    ///
    /// A transactional batch starts the producer's transaction when none is ongoing; a
    /// control batch (a marker) ends it ([`Self::end_transaction`]) and is not one of
    /// the producer's sequenced batches.
    pub fn record(&mut self, header: &BatchHeader, first_offset: i64, now_ms: i64) {
        if header.producer_id < 0 {
            return;
        }
        if header.is_control() {
            self.end_transaction(header.producer_id, header.producer_epoch, now_ms);
            return;
        }
        let batch = BatchMeta {
            first_seq: header.base_sequence,
            last_seq: last_sequence(header.base_sequence, header.last_offset_delta),
            first_offset,
            last_offset: first_offset + i64::from(header.last_offset_delta),
        };
        let epoch = header.producer_epoch;
        let max = self.limits.max_producer_ids;
        if self.producers.len() >= max && !self.producers.contains_key(&header.producer_id) {
            // Only on a replay from the log: an append made room in `check`.
            self.evict_down_to(max.saturating_sub(1), i64::MAX);
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .and_modify(|e| e.push(epoch, batch, now_ms))
            .or_insert_with(|| ProducerEntry::new(epoch, batch, now_ms));
        if header.is_transactional() && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(first_offset);
            entry.txn_epoch = epoch;
            self.ongoing.insert((first_offset, header.producer_id));
        }
    }

    /// Forgets producers whose last batch is below `log_start` (retention deleted it),
    /// as Kafka's `truncateHead`.
    pub fn truncate_head(&mut self, log_start: i64) {
        self.producers
            .retain(|_, e| e.last_offset().is_some_and(|o| o >= log_start));
        self.rebuild_ongoing();
    }

    /// Forgets every producer that has not written for
    /// [`ProducerLimits::expiration_ms`] at `now_ms`; returns how many.
    pub fn sweep(&mut self, now_ms: i64) -> usize {
        let before = self.producers.len();
        let expiration = self.limits.expiration_ms;
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_write_ms) < expiration
        });
        self.last_sweep_ms = now_ms;
        before - self.producers.len()
    }

    fn maybe_sweep(&mut self, now_ms: i64) {
        let interval = SWEEP_INTERVAL_MS.min(self.limits.expiration_ms);
        if now_ms.saturating_sub(self.last_sweep_ms) >= interval {
            self.sweep(now_ms);
        }
    }
}

/// [`Check::Append`], unless `header`'s batch is not transactional and `entry` has a
/// transaction ongoing (the rule after epoch and sequence in Kafka's
/// `ProducerAppendInfo.appendDataBatch`).
fn expect_transactional(
    producer_id: i64,
    entry: &ProducerEntry,
    header: &BatchHeader,
) -> Result<Check, ProducerError> {
    match entry.txn_first_offset {
        Some(txn_first_offset) if !header.is_transactional() => {
            Err(ProducerError::ExpectedTransactional {
                producer_id,
                txn_first_offset,
            })
        }
        _ => Ok(Check::Append),
    }
}

/// The order in which producers are evicted at the cap, first first: `(last write in
/// ms, last offset, producer id)`. The last write alone ties whenever many producers
/// share a millisecond, and after a crash every producer rebuilt from the log carries
/// its batch's timestamp, equal for a burst; the last offset then sends the producer
/// that wrote longest ago in the log first. Producer ids rise with age, so the lowest
/// id would be the oldest long-lived producer, often the one that wrote last. A
/// producer without a batch (none is kept) sorts before any with one.
/// How many producers a new one at the cap `max` makes room for at once: 1% of the
/// cap, at least one (so caps below 200 evict one at a time, exactly as needed).
fn eviction_batch(max: usize) -> usize {
    (max / 100).max(1)
}

fn idle_order(producer_id: i64, entry: &ProducerEntry) -> (i64, i64, i64) {
    (
        entry.last_write_ms,
        entry.last_offset().unwrap_or(i64::MIN),
        producer_id,
    )
}

#[cfg(test)]
mod tests;
