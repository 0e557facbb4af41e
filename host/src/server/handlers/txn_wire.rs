//! What the transaction handlers share: the conversion of a request's transactional
//! id, producer id and epoch into the coordinator's domain types — the one boundary
//! between wire and domain types for transactions.

use kafka_protocol::messages;

use crate::txn::{Caller, ProducerIdEpoch, TransactionalId, TxnError};

/// The caller of a transaction request.
///
/// Errors: [`TxnError::InvalidId`] for an empty or too long transactional id.
pub fn caller(
    id: &messages::TransactionalId,
    producer_id: messages::ProducerId,
    producer_epoch: i16,
) -> Result<Caller, TxnError> {
    Ok(Caller {
        id: TransactionalId::new(id.0.as_str()).ok_or(TxnError::InvalidId)?,
        producer: ProducerIdEpoch {
            id: producer_id.0,
            epoch: producer_epoch,
        },
    })
}
