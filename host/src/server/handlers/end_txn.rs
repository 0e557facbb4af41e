//! EndTxn (API 26): commits or aborts the caller's open transaction. The outcome is
//! written durably (PrepareCommit / PrepareAbort) before the answer; the markers and
//! group offsets are completed afterwards ([`crate::txn::completion`]), as Kafka's
//! `TransactionCoordinator.endTransaction` does.
//!
//! Served v0–v4: v5 is KIP-890 part 2 (transaction version 2: the epoch is bumped at
//! every commit and returned in the response), which this coordinator does not do
//! (docs/operations.md, "Transactions").

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::txn_wire;
use crate::{server::reply::Reply, txn::TxnCoordinator};

/// Handles EndTxn v0–v4. Blocking (an fsync): runs on the blocking pool.
///
/// Authorization (Kafka's `KafkaApis.handleEndTxnRequest`): Write on the transactional
/// id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
pub fn handle(
    txn: &TxnCoordinator,
    authz: &crate::authz::RequestAuthz,
    version: i16,
    request: EndTxnRequest,
) -> Reply {
    let mut response = EndTxnResponse::default();
    if !authz.allows(
        crate::authz::ResourceType::TransactionalId,
        request.transactional_id.0.as_str(),
        crate::authz::AclOperation::Write,
    ) {
        response.error_code =
            kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed.code();
        let error = response.error_code;
        return Reply::new(response, error);
    }
    response.error_code = txn_wire::caller(
        &request.transactional_id,
        request.producer_id,
        request.producer_epoch,
    )
    .and_then(|caller| txn.end_txn(crate::clock::now_ms(), &caller, request.committed))
    .map_or_else(|e| e.code_at(version, 2), |()| 0);
    let error = response.error_code;
    Reply::new(response, error)
}
