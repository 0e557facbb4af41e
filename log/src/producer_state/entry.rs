//! One producer's state in one partition: its epoch, the sequence and offset ranges of
//! its last [`BATCHES_RETAINED`] batches, and when it last wrote (Kafka's
//! `ProducerStateEntry`), with the sequence arithmetic of Kafka's `DefaultRecordBatch`.

use std::collections::VecDeque;

/// How many batches per producer are remembered for duplicate detection: Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, which matches the client's
/// `max.in.flight.requests.per.connection` limit of 5 for idempotent producers.
pub const BATCHES_RETAINED: usize = 5;

/// The sequence and offset range of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    /// The batch's `baseSequence`.
    pub first_seq: i32,
    /// Its last record's sequence ([`last_sequence`]).
    pub last_seq: i32,
    /// Offset the log gave its first record.
    pub first_offset: i64,
    /// Offset of its last record.
    pub last_offset: i64,
}

/// What a partition remembers of one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The producer epoch of its latest batch.
    pub epoch: i16,
    /// Its latest batches of that epoch, oldest first; never empty, at most
    /// [`BATCHES_RETAINED`].
    pub batches: VecDeque<BatchMeta>,
    /// When it last appended, in ms since the Unix epoch (the broker's clock; for state
    /// rebuilt from the log after a crash, the time of the rebuild). Expiry counts from
    /// here.
    pub last_write_ms: i64,
    /// The first offset of the producer's ongoing transaction in this partition (its
    /// first transactional batch since its last marker), Kafka's
    /// `currentTxnFirstOffset`; `None` outside a transaction.
    pub txn_first_offset: Option<i64>,
    /// The producer epoch of the batch that opened that transaction. Meaningful only
    /// while [`Self::txn_first_offset`] is set: a marker of this epoch or newer ends the
    /// transaction, an older one is a zombie's and is refused
    /// ([`crate::PartitionLog::append_txn_marker`]).
    pub txn_epoch: i16,
}

impl ProducerEntry {
    /// A producer whose first remembered batch is `batch`.
    pub fn new(epoch: i16, batch: BatchMeta, now_ms: i64) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::from([batch]),
            last_write_ms: now_ms,
            txn_first_offset: None,
            txn_epoch: epoch,
        }
    }

    /// The last sequence appended in the current epoch.
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    /// The last offset appended by this producer.
    pub fn last_offset(&self) -> Option<i64> {
        self.batches.back().map(|b| b.last_offset)
    }

    /// The remembered batch of `epoch` with exactly this sequence range: a retry of a
    /// batch already in the log (Kafka's `findDuplicateBatch`).
    pub fn find_duplicate(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<BatchMeta> {
        if epoch != self.epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
            .copied()
    }

    /// Records an appended batch of `epoch`: a new epoch forgets the old epoch's
    /// batches; beyond [`BATCHES_RETAINED`] the oldest is forgotten.
    pub fn push(&mut self, epoch: i16, batch: BatchMeta, now_ms: i64) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
        if self.batches.len() == BATCHES_RETAINED {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_write_ms = now_ms;
    }
}

/// The sequence of a batch's last record: `base_sequence + last_offset_delta`, wrapping
/// past `i32::MAX` to 0 as Kafka's `DefaultRecordBatch.incrementSequence` does.
pub fn last_sequence(base_sequence: i32, last_offset_delta: i32) -> i32 {
    let sum = i64::from(base_sequence) + i64::from(last_offset_delta);
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

/// Whether `next` directly follows `last` (Kafka's `ProducerAppendInfo.inSequence`:
/// one more, or 0 after `i32::MAX`).
pub fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}
