//! Where the coordinator's transactional offsets are recorded durably: the transaction
//! coordinator's side of TxnOffsetCommit (coordinator ABI 3.4).
//!
//! When the coordinator plugin has validated a TxnOffsetCommit it outputs
//! `StageTxnOffsets`; the driver hands the offsets to the broker's [`TxnOffsetLedger`],
//! which records them with the producer's open transaction (so they survive a restart
//! or a slot fail-over until the transaction ends) and answers a Kafka error code. The
//! driver feeds the code back as `TxnOffsetsStaged`, which answers the client. Without
//! a ledger (no transaction coordinator in the broker) the driver answers
//! COORDINATOR_NOT_AVAILABLE itself ([`NO_LEDGER`]).

use std::future::Future;
use std::pin::Pin;

use drover_abi::coordinator::PendingTxnOffsets;

/// A boxed future that may be sent to the runtime.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The code the driver answers a staging with when the broker has no ledger:
/// COORDINATOR_NOT_AVAILABLE (15, retriable).
pub const NO_LEDGER: i16 = 15;

/// Records a transaction's pending offsets durably (the transaction coordinator).
pub trait TxnOffsetLedger: Send + Sync + 'static {
    /// Records `pending` (one group's offsets of producer `producer_id` at
    /// `producer_epoch`) with that producer's open transaction. Resolves to a Kafka
    /// error code: 0 once durable; otherwise the code the TxnOffsetCommit is answered
    /// with for every accepted partition (INVALID_PRODUCER_EPOCH or PRODUCER_FENCED for
    /// a fenced producer, INVALID_TXN_STATE when the transaction did not add the
    /// group's offsets, COORDINATOR_NOT_AVAILABLE while it cannot write, ...).
    fn stage(&self, pending: PendingTxnOffsets) -> BoxFuture<'static, i16>;
}
