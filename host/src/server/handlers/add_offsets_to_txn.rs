//! AddOffsetsToTxn (API 25): adds a consumer group to the caller's transaction, so
//! the group's TxnOffsetCommits may stage offsets with it (KIP-98, KIP-447). Kafka
//! adds the group's `__consumer_offsets` partition; this broker keeps the group id.
//! In cluster mode the group's coordinator may be another broker: the offsets are
//! staged there (`crate::txn::group_offsets`).

use kafka_protocol::{
    error::ResponseError,
    messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse},
};

use super::txn_wire;
use crate::{server::reply::Reply, txn::TxnCoordinator};

/// Longest group id accepted, bytes (Kafka sets none below the protocol's 32767).
const MAX_GROUP_ID_BYTES: usize = 2048;

/// Handles AddOffsetsToTxn v0–v4. Blocking (an fsync): runs on the blocking pool.
///
/// Authorization (Kafka's `KafkaApis.handleAddOffsetsToTxnRequest`): Write on the
/// transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Read on the
/// group (else GROUP_AUTHORIZATION_FAILED).
pub fn handle(
    txn: &TxnCoordinator,
    authz: &crate::authz::RequestAuthz,
    version: i16,
    request: AddOffsetsToTxnRequest,
) -> Reply {
    use crate::authz::{AclOperation, ResourceType};
    let mut response = AddOffsetsToTxnResponse::default();
    let group = request.group_id.0.as_str();
    response.error_code = if !authz.allows(
        ResourceType::TransactionalId,
        request.transactional_id.0.as_str(),
        AclOperation::Write,
    ) {
        ResponseError::TransactionalIdAuthorizationFailed.code()
    } else if !authz.allows(ResourceType::Group, group, AclOperation::Read) {
        ResponseError::GroupAuthorizationFailed.code()
    } else if group.is_empty() || group.len() > MAX_GROUP_ID_BYTES {
        ResponseError::InvalidGroupId.code()
    } else {
        txn_wire::caller(
            &request.transactional_id,
            request.producer_id,
            request.producer_epoch,
        )
        .and_then(|caller| txn.add_offsets(crate::clock::now_ms(), &caller, group))
        .map_or_else(|e| e.code_at(version, 2), |()| 0)
    };
    let error = response.error_code;
    Reply::new(response, error)
}
