//! What the transaction coordinator needs from the rest of the broker to complete a
//! transaction, as two small traits: writing the transaction markers
//! ([`MarkerWriter`], over the partition logs' control batches) and completing the
//! transaction's group offsets ([`GroupOffsetsCompleter`], over the group coordinator
//! plugin). The completion driver ([`super::completion`]) retries both with a bounded
//! backoff until they succeed, so each must be idempotent.

use futures_util::future::BoxFuture;

use super::types::{ProducerIdEpoch, TopicPartition, TransactionalId};

/// The transaction markers to write for one completed transaction (KIP-98's
/// `WriteTxnMarkers`, done in-process).
#[derive(Debug, Clone)]
pub struct MarkerRequest {
    /// The transaction's id (its slot decides, in cluster mode, which coordinator
    /// epoch a leader compares the markers' against).
    pub transactional_id: TransactionalId,
    /// The producer id and epoch the markers carry (the transaction's, bumped if it was
    /// aborted by a fencing InitProducerId or a timeout).
    pub producer: ProducerIdEpoch,
    /// Commit (true) or abort markers.
    pub committed: bool,
    /// The coordinator's epoch (0 standalone: one coordinator forever; in cluster mode
    /// the epoch of the transactional id's slot, `super::zk_store`).
    pub coordinator_epoch: i32,
    /// The markers' timestamp, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// Every partition to write the marker to.
    pub partitions: Vec<TopicPartition>,
}

/// Writes transaction markers.
pub trait MarkerWriter: Send + Sync {
    /// Writes the marker to every partition of `request`, resolving to the partitions
    /// where it could not be written yet (empty: all written). A partition whose topic
    /// no longer exists counts as written (Kafka skips it too). Writing a marker twice
    /// is harmless (the data plane accepts a marker for a producer with no open
    /// transaction).
    fn write_markers(&self, request: MarkerRequest) -> BoxFuture<'static, Vec<TopicPartition>>;
}

/// Why the group offsets of a transaction could not be completed now (retried).
#[derive(Debug, Clone, thiserror::Error)]
#[error("completing transactional offsets: {0}")]
pub struct CompleteError(pub String);

/// One transaction's outcome for the groups it staged offsets with.
#[derive(Debug, Clone)]
pub struct OffsetsCompletion {
    /// The transaction's id.
    pub transactional_id: TransactionalId,
    /// The producer id and epoch (the transaction's, bumped if a fencing
    /// InitProducerId or a timeout aborted it).
    pub producer: ProducerIdEpoch,
    /// Commit (true) or abort.
    pub committed: bool,
    /// The coordinator's epoch (0 standalone; in cluster mode the epoch of the
    /// transactional id's slot, `super::zk_store`).
    pub coordinator_epoch: i32,
    /// The groups added by AddOffsetsToTxn.
    pub groups: Vec<String>,
}

/// Completes a producer's transactional offsets in the group coordinator: committed
/// if the transaction committed, dropped if it aborted (KIP-447).
pub trait GroupOffsetsCompleter: Send + Sync {
    /// Resolves once every group's coordinator applied the outcome (its offset store
    /// acknowledged the commit, or there was nothing to do). Idempotent.
    ///
    /// Errors: [`CompleteError`] when a group's coordinator is unavailable.
    fn complete(
        &self,
        completion: OffsetsCompletion,
    ) -> BoxFuture<'static, Result<(), CompleteError>>;
}

/// The ports the completion driver uses.
#[derive(Clone)]
pub struct Ports {
    /// Writes the markers.
    pub markers: std::sync::Arc<dyn MarkerWriter>,
    /// Completes the group offsets.
    pub offsets: std::sync::Arc<dyn GroupOffsetsCompleter>,
}
