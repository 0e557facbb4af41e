//! What the partition log returned to a share fetch, as the state machine needs it:
//! each batch's offset range and kind, and the aborted transactions of a
//! read_committed read (Kafka's `FetchPartitionData`, reduced to headers).

/// One record batch the log returned (its header only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBatch {
    /// The batch's base offset.
    pub first_offset: i64,
    /// The batch's last offset (base offset + last offset delta).
    pub last_offset: i64,
    /// The producer id (−1 for none).
    pub producer_id: i64,
    /// Part of a transaction.
    pub transactional: bool,
    /// A control batch (a transaction marker): no record for the consumer, which
    /// acknowledges its offsets as [`crate::AckType::Gap`].
    pub control: bool,
}

/// An aborted transaction listed by a read_committed read: the producer's records from
/// `first_offset` up to its abort marker at `marker_offset` are not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedRange {
    /// The producer id.
    pub producer_id: i64,
    /// The transaction's first offset in the partition.
    pub first_offset: i64,
    /// The offset of its abort marker.
    pub marker_offset: i64,
}

impl LogBatch {
    /// Whether this batch's records belong to one of `aborted` (read_committed: Kafka
    /// archives them instead of delivering them, `SharePartition`'s
    /// `filterAbortedTransactionalAcquiredRecords`). Control batches are never aborted
    /// records: their offsets are delivered for the consumer to acknowledge as gaps.
    pub fn is_aborted(&self, aborted: &[AbortedRange]) -> bool {
        self.transactional
            && !self.control
            && aborted.iter().any(|a| {
                a.producer_id == self.producer_id
                    && a.first_offset <= self.first_offset
                    && self.first_offset < a.marker_offset
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i64, last: i64, pid: i64, txn: bool, control: bool) -> LogBatch {
        LogBatch {
            first_offset: first,
            last_offset: last,
            producer_id: pid,
            transactional: txn,
            control,
        }
    }

    #[test]
    fn only_the_aborted_producers_transactional_records_are_aborted() {
        let aborted = [AbortedRange {
            producer_id: 7,
            first_offset: 10,
            marker_offset: 20,
        }];
        assert!(batch(10, 12, 7, true, false).is_aborted(&aborted));
        assert!(batch(15, 15, 7, true, false).is_aborted(&aborted));
        // The marker itself, another producer, a plain batch, a later transaction.
        assert!(!batch(20, 20, 7, true, true).is_aborted(&aborted));
        assert!(!batch(12, 12, 8, true, false).is_aborted(&aborted));
        assert!(!batch(12, 12, 7, false, false).is_aborted(&aborted));
        assert!(!batch(21, 22, 7, true, false).is_aborted(&aborted));
        assert!(!batch(12, 12, 7, true, false).is_aborted(&[]));
    }
}
