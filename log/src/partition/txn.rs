//! Transactions in the partition log (KIP-98, as Kafka 4.x's `UnifiedLog` keeps them):
//! writing a marker ([`PartitionLog::append_txn_marker`]), the last stable offset, the
//! aborted transactions a read_committed fetch returns, and loading the `.txnindex`
//! files ([`crate::txn_index`]) on open.

use tracing::warn;

use super::{sync_dir, PartitionLog, PlannedRead};
use crate::{
    batch::{self, BATCH_HEADER_LEN},
    producer_state::ProducerError,
    txn_index::{self, AbortedTxn},
    txn_marker::{TxnMarker, TxnResult},
    LogError,
};

impl PartitionLog {
    /// Writes `marker` as one control batch at the log end at `now_ms` (ms since the
    /// Unix epoch) and returns its offset: the producer's ongoing transaction in this
    /// partition ends (committed or aborted); an aborted one is added to the active
    /// segment's `.txnindex` (fsynced) with the last stable offset after it. A marker
    /// for a producer with no ongoing transaction here is written all the same (the
    /// coordinator may retry). The marker is fsynced like an append
    /// ([`crate::LogConfig::flush_messages`]).
    ///
    /// Errors: [`LogError::Producer`] with [`ProducerError::FencedEpoch`] when the
    /// marker's epoch is older than the epoch that opened the producer's ongoing
    /// transaction here, or than the producer's epoch when none is ongoing (Kafka's
    /// fencing of a zombie coordinator's marker; nothing written,
    /// [`crate::producer_state::ProducerStates::marker_fenced`]); [`LogError::Io`],
    /// [`LogError::Offline`].
    pub fn append_txn_marker(&mut self, marker: &TxnMarker, now_ms: i64) -> Result<i64, LogError> {
        self.check_online()?;
        if let Some(current) =
            self.producers
                .marker_fenced(marker.producer_id, marker.producer_epoch, now_ms)
        {
            return Err(ProducerError::FencedEpoch {
                producer_id: marker.producer_id,
                epoch: marker.producer_epoch,
                current,
            }
            .into());
        }
        let first = self
            .producers
            .get(marker.producer_id, now_ms)
            .and_then(|e| e.txn_first_offset);
        let bytes = marker.encode();
        let header = batch::check_batch(&bytes, bytes.len()).map_err(LogError::InvalidBatch)?;
        let (offset, _) = self.write_checked(&bytes, vec![header], 1, now_ms)?;
        if let (TxnResult::Abort, Some(first_offset)) = (marker.result, first) {
            let aborted = AbortedTxn {
                producer_id: marker.producer_id,
                first_offset,
                last_offset: offset,
                last_stable_offset: self.last_stable_offset(),
            };
            let path = txn_index::path(&self.dir, self.active().base_offset);
            if let Err(e) = txn_index::append(&path, &aborted) {
                self.take_offline();
                return Err(LogError::io(&path)(e));
            }
            self.aborted.push(aborted);
        }
        if self.unflushed_messages >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(offset)
    }

    /// An operator's abort of `producer_id`'s transaction ongoing in this partition
    /// (Kafka's `kafka-transactions.sh abort`): an abort marker at the epoch that opened
    /// it, written as [`Self::append_txn_marker`] writes one, under one hold of the lock
    /// so that no other marker can end the transaction in between. No data is deleted:
    /// read_committed consumers skip the transaction's records as aborted and read on.
    /// Returns the transaction's first offset and the marker's offset, or `None` when the
    /// producer has no transaction ongoing here (nothing written).
    ///
    /// Errors: as [`Self::append_txn_marker`].
    pub fn abort_open_transaction(
        &mut self,
        producer_id: i64,
        now_ms: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let Some((first, epoch)) = self
            .producers
            .get(producer_id, now_ms)
            .and_then(|e| e.txn_first_offset.map(|f| (f, e.txn_epoch)))
        else {
            return Ok(None);
        };
        let marker = TxnMarker {
            producer_id,
            producer_epoch: epoch,
            coordinator_epoch: 0,
            result: TxnResult::Abort,
            timestamp_ms: now_ms,
        };
        let offset = self.append_txn_marker(&marker, now_ms)?;
        Ok(Some((first, offset)))
    }

    /// The last stable offset (Kafka's `lastStableOffset`): the first offset of the
    /// earliest transaction still ongoing in this partition, else the log end offset.
    /// read_committed consumers read below it. Never below the log start offset: after
    /// DeleteRecords past an ongoing transaction's first offset, the offsets below the
    /// start are gone, and Kafka's `UnifiedLog.maybeIncrementFirstUnstableOffset`
    /// clamps the first unstable offset to the log start offset.
    pub fn last_stable_offset(&self) -> i64 {
        self.producers.first_unstable_offset().map_or_else(
            || self.log_end_offset(),
            |first| first.max(self.log_start_offset()),
        )
    }

    /// The aborted transactions that overlap offsets `from .. to` (Kafka's
    /// `collectAbortedTransactions`): marker at or after `from`, first offset before
    /// `to`, in marker order.
    pub fn aborted_transactions(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    /// [`Self::plan_read`] for a read_committed fetch (isolation level 1): only batches
    /// below the last stable offset, and the aborted transactions that overlap the
    /// batches read (from `offset` to the end of the last one; none if none was read).
    ///
    /// Errors: as [`Self::plan_read`].
    pub fn plan_read_committed(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<PlannedRead, LogError> {
        let mut planned = self.plan_read(offset, max_bytes)?;
        let lso = self.last_stable_offset();
        if offset >= lso {
            planned.read = None;
        } else if let Some(read) = planned.read.take() {
            // Batches end at the last stable offset (a batch's first offset, or the log
            // end), so capping the bytes at its position keeps whole batches.
            let segment =
                &self.segments[self.segments.partition_point(|s| s.base_offset <= lso) - 1];
            planned.read = Some(match segment.position_of(lso)? {
                Some(end) if read.path() == segment.log_path => read.cap_at(end),
                _ => read,
            });
        }
        planned.aborted = self.aborted_transactions(offset, lso);
        Ok(planned)
    }

    /// Loads every segment's `.txnindex` ([`txn_index`]). An index that does not decode
    /// or holds entries past its segment's end (a tail recovery cut) is rewritten with
    /// the entries that can be used; the replay of the producer state then adds the
    /// aborts it finds in the log.
    pub(super) fn load_aborted(&mut self) -> Result<(), LogError> {
        self.aborted.clear();
        let mut rewritten = false;
        for segment in &self.segments {
            let path = txn_index::path(&self.dir, segment.base_offset);
            // Each entry stands for a marker batch of at least a header in the segment.
            let cap = (segment.size / BATCH_HEADER_LEN as u64) as usize + 1;
            let (mut entries, mut damaged) = match txn_index::read(&path, cap) {
                Ok(Some(read)) => read,
                Ok(None) => continue,
                Err(e) => {
                    warn!(file = %path.display(), "transaction index refused: {e}; rebuilt from the log");
                    (Vec::new(), true)
                }
            };
            let before = entries.len();
            entries.retain(|a| {
                a.last_offset >= segment.base_offset && a.last_offset < segment.next_offset
            });
            damaged |= entries.len() != before;
            if damaged {
                txn_index::rewrite(&path, &entries).map_err(LogError::io(&path))?;
                rewritten = true;
            }
            self.aborted.extend(entries);
        }
        if rewritten {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Adds aborted transactions found by replaying the log (`found`, by marker offset)
    /// that the indexes miss, and writes them to their segments' `.txnindex`.
    pub(super) fn merge_aborted(&mut self, found: Vec<AbortedTxn>) -> Result<(), LogError> {
        let mut touched = Vec::new();
        for txn in found {
            let at = self
                .aborted
                .partition_point(|a| a.last_offset < txn.last_offset);
            if self
                .aborted
                .get(at)
                .is_some_and(|a| a.last_offset == txn.last_offset)
            {
                continue;
            }
            self.aborted.insert(at, txn);
            let segment = self
                .segments
                .partition_point(|s| s.base_offset <= txn.last_offset)
                - 1;
            touched.push(self.segments[segment].base_offset);
        }
        touched.dedup();
        for base in &touched {
            let next = self
                .segments
                .iter()
                .find(|s| s.base_offset == *base)
                .map_or(i64::MAX, |s| s.next_offset);
            let entries: Vec<AbortedTxn> = self
                .aborted
                .iter()
                .filter(|a| a.last_offset >= *base && a.last_offset < next)
                .copied()
                .collect();
            let path = txn_index::path(&self.dir, *base);
            txn_index::rewrite(&path, &entries).map_err(LogError::io(&path))?;
        }
        if !touched.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}
