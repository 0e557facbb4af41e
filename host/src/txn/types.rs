//! The transaction coordinator's domain types: a transactional id, a producer id with
//! its epoch, a topic partition, a transaction's state and its metadata. Wire types
//! (`kafka_protocol`) are converted to these in the request handlers, once.

use std::collections::{BTreeMap, BTreeSet};

/// Longest transactional id accepted, in UTF-8 bytes. Kafka sets no limit below the
/// protocol's 32767; Kafka Streams' ids (`<application.id>-<uuid>-<n>`) stay far below.
pub const MAX_TRANSACTIONAL_ID_BYTES: usize = 2048;

/// A client's `transactional.id` (KIP-98): non-empty, at most
/// [`MAX_TRANSACTIONAL_ID_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransactionalId(String);

impl TransactionalId {
    /// `id` if it is a valid transactional id: non-empty and not too long.
    pub fn new(id: &str) -> Option<TransactionalId> {
        (!id.is_empty() && id.len() <= MAX_TRANSACTIONAL_ID_BYTES)
            .then(|| TransactionalId(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TransactionalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A producer id and epoch (KIP-98). `NONE` (−1, −1) stands for "no producer".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdEpoch {
    /// Producer id, from the broker's allocator (`broker/producer_ids.rs`).
    pub id: i64,
    /// Producer epoch: bumped by every InitProducerId of the transactional id, by a
    /// fencing abort and by a timeout abort.
    pub epoch: i16,
}

impl ProducerIdEpoch {
    /// No producer: id −1, epoch −1 (Kafka's `RecordBatch.NO_PRODUCER_ID` / `_EPOCH`).
    pub const NONE: ProducerIdEpoch = ProducerIdEpoch { id: -1, epoch: -1 };

    /// Whether this is [`ProducerIdEpoch::NONE`].
    pub fn is_none(self) -> bool {
        self.id < 0
    }
}

/// A topic partition a transaction wrote to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

/// A transaction's state, Kafka's `TransactionState` without `Dead` (an expired id is
/// removed) and `PrepareEpochFence` (a fencing abort goes straight to `PrepareAbort`
/// with the bumped epoch recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction since the producer id was handed out.
    Empty,
    /// Partitions or a group were added; not ended yet.
    Ongoing,
    /// EndTxn(commit) accepted: markers and group offsets are being completed.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId: being completed.
    PrepareAbort,
    /// The last transaction committed; every marker is written.
    CompleteCommit,
    /// The last transaction aborted; every marker is written.
    CompleteAbort,
}

impl TxnState {
    /// Every state, in order.
    pub const ALL: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];

    /// Kafka's name, as DescribeTransactions and ListTransactions report it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// The state named `name` (Kafka's names; ListTransactions' state filters).
    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the transaction's outcome is decided and being completed.
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Whether no transaction is open (a new one may begin).
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// One transactional offset staged for a group (TxnOffsetCommit, KIP-447): committed
/// if the transaction commits, dropped if it aborts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedOffset {
    /// The offset: the next record the group will consume.
    pub offset: i64,
    /// The client's metadata string.
    pub metadata: String,
    /// When the coordinator accepted it, ms since the Unix epoch.
    pub commit_time_ms: i64,
}

/// A transactional id's durable record: Kafka's `TransactionMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The transactional id.
    pub id: TransactionalId,
    /// The current producer id and epoch; markers are written with them.
    pub producer: ProducerIdEpoch,
    /// The producer id and epoch handed out before the last InitProducerId, so a
    /// retried InitProducerId (KIP-360) is recognised; [`ProducerIdEpoch::NONE`] if none.
    pub last_producer: ProducerIdEpoch,
    /// `transaction.timeout.ms` of the last InitProducerId, ms.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// Partitions added to the open (or completing) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// Groups added by AddOffsetsToTxn, with the offsets staged for each
    /// (TxnOffsetCommit): group → partition → offset.
    pub groups: BTreeMap<String, BTreeMap<TopicPartition, StagedOffset>>,
    /// When the open transaction began (its first AddPartitions/AddOffsets), ms since
    /// the Unix epoch; −1 when none is open.
    pub start_ms: i64,
    /// The last state change, ms since the Unix epoch.
    pub last_update_ms: i64,
    /// Whether the transaction being aborted was aborted by its timeout.
    pub timed_out: bool,
    /// Whether this id has ever opened a transaction (AddPartitionsToTxn or
    /// AddOffsetsToTxn accepted) since InitProducerId created it. An id that never did
    /// is forgotten after `transactions.unused_id_expiration_ms` instead of
    /// `transactional_id_expiration_ms`, and is the first evicted to make room at
    /// `max_transactional_ids` ([`crate::txn::state::Transactions::init_producer_id`]).
    pub ever_opened: bool,
}

impl TxnMetadata {
    /// Number of staged offsets over all groups.
    pub fn staged_offset_count(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }
}
