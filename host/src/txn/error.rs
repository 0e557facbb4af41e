//! Why the transaction coordinator refused a request, as a small enum that maps to
//! Kafka's error codes at the response boundary ([`TxnError::kafka`]).

use kafka_protocol::error::ResponseError;

/// A refused transaction request. Each variant is one of Kafka's answers
/// (`TransactionCoordinator` in Kafka 4.x), except the two bounds this broker adds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TxnError {
    /// The transaction is being completed (Prepare*), or an open one is being aborted
    /// for a fencing InitProducerId: retry later (`CONCURRENT_TRANSACTIONS`, 51).
    #[error("a transaction of this id is being completed")]
    Concurrent,
    /// The request's epoch is older than the id's current one
    /// (`PRODUCER_FENCED`, 90; `INVALID_PRODUCER_EPOCH`, 47, to versions before it).
    #[error("producer fenced by a newer epoch")]
    Fenced,
    /// The transactional id is unknown or belongs to another producer id
    /// (`INVALID_PRODUCER_ID_MAPPING`, 49).
    #[error("unknown transactional id or producer id")]
    UnknownMapping,
    /// The request does not fit the transaction's state, e.g. EndTxn with none open
    /// (`INVALID_TXN_STATE`, 48).
    #[error("invalid transaction state")]
    InvalidState,
    /// `transaction.timeout.ms` is not in 1..=`transaction.max.timeout.ms`
    /// (`INVALID_TRANSACTION_TIMEOUT`, 50).
    #[error("transaction timeout out of range")]
    InvalidTimeout,
    /// The transactional id is empty or too long (`INVALID_REQUEST`, 42).
    #[error("invalid transactional id")]
    InvalidId,
    /// `transactions.max_transactional_ids` ids are known already
    /// (`POLICY_VIOLATION`, 44; this broker's bound).
    #[error("too many transactional ids")]
    TooManyIds,
    /// The transaction would exceed `transactions.max_partitions_per_transaction`
    /// partitions, or the group and staged-offset bounds (`POLICY_VIOLATION`, 44).
    #[error("transaction too large")]
    TooLarge,
    /// The durable state could not be written (`COORDINATOR_NOT_AVAILABLE`, 15:
    /// retriable, as Kafka answers a failed log append).
    #[error("transaction state could not be written")]
    Storage,
    /// Cluster mode: another broker coordinates this transactional id's slot, or this
    /// one just lost it (`NOT_COORDINATOR`, 16: the client looks its coordinator up
    /// again).
    #[error("not the coordinator of this transactional id")]
    NotCoordinator,
    /// Cluster mode: this broker owns the id's slot and is still loading its
    /// transactions from ZooKeeper (`COORDINATOR_LOAD_IN_PROGRESS`, 14: retriable).
    #[error("the transactions of this slot are being loaded")]
    LoadInProgress,
    /// InitProducerId for a new transactional id beyond
    /// `transactions.new_ids_per_sec_per_client` (`COORDINATOR_LOAD_IN_PROGRESS`, 14:
    /// retriable, and retried by every client for InitProducerId; no InitProducerId
    /// version may answer `THROTTLING_QUOTA_EXCEEDED`; see
    /// [`crate::broker::new_txn_ids`]).
    #[error("too many new transactional ids from this client: retry later")]
    Throttled,
}

impl TxnError {
    /// Kafka's error for this refusal.
    pub fn kafka(&self) -> ResponseError {
        match self {
            TxnError::Concurrent => ResponseError::ConcurrentTransactions,
            TxnError::Fenced => ResponseError::ProducerFenced,
            TxnError::UnknownMapping => ResponseError::InvalidProducerIdMapping,
            TxnError::InvalidState => ResponseError::InvalidTxnState,
            TxnError::InvalidTimeout => ResponseError::InvalidTransactionTimeout,
            TxnError::InvalidId => ResponseError::InvalidRequest,
            TxnError::TooManyIds | TxnError::TooLarge => ResponseError::PolicyViolation,
            TxnError::Storage => ResponseError::CoordinatorNotAvailable,
            TxnError::NotCoordinator => ResponseError::NotCoordinator,
            TxnError::LoadInProgress | TxnError::Throttled => {
                ResponseError::CoordinatorLoadInProgress
            }
        }
    }

    /// Kafka's code for this refusal at an API version: versions older than
    /// `fenced_since` get `INVALID_PRODUCER_EPOCH` instead of `PRODUCER_FENCED`
    /// (Kafka's `KafkaApis` does the same per API: InitProducerId < 4,
    /// AddPartitionsToTxn / AddOffsetsToTxn / EndTxn < 2).
    pub fn code_at(&self, version: i16, fenced_since: i16) -> i16 {
        if *self == TxnError::Fenced && version < fenced_since {
            ResponseError::InvalidProducerEpoch.code()
        } else {
            self.kafka().code()
        }
    }
}
