//! InitProducerId (API 22): a producer id and epoch for an idempotent producer (KIP-98)
//! or for a transactional id (the transaction coordinator, [`crate::txn`]).
//!
//! Without a transactional id, as Kafka 4.x's `TransactionCoordinator.handleInitProducerId`
//! answers it, every request gets a fresh id and epoch 0 from the broker's allocator
//! ([`crate::broker::producer_ids`]), whatever producer id and epoch it carries (the
//! KIP-360 fields): an idempotent producer bumps its epoch itself after a sequence
//! error, and only a transactional id keeps an id across InitProducerId calls.
//!
//! With one, the transaction coordinator answers: a new id at epoch 0, the epoch bumped
//! for a known id (fencing the previous producer), `CONCURRENT_TRANSACTIONS` while the
//! id's open transaction is being aborted, a new producer id when the epoch is
//! exhausted, the KIP-360 retry and fencing rules
//! ([`crate::txn::state::Transactions::init_producer_id`]). `PRODUCER_FENCED` becomes
//! `INVALID_PRODUCER_EPOCH` before v4, as in Kafka. An empty transactional id is
//! `INVALID_REQUEST`; in cluster mode, where no transaction coordinator runs, a
//! transactional id is answered `COORDINATOR_NOT_AVAILABLE`.
//!
//! A call naming a transactional id the coordinator does not know creates one, and a
//! call without one creates a producer id: together at most
//! `transactions.new_ids_per_sec_per_client` per second per client address
//! ([`crate::broker::new_txn_ids`]); beyond it `COORDINATOR_LOAD_IN_PROGRESS`, which
//! clients retry. At `transactions.max_transactional_ids` the new id evicts an idle one.

use kafka_protocol::{
    error::ResponseError,
    messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId},
};

use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::{producer_ids::ProducerIdError, Producers},
    server::reply::Reply,
    txn::{InitRequest, ProducerIdEpoch, TransactionalId, TxnError},
};

/// Handles InitProducerId v0–v5 from the client at address `peer`. Blocking (a new id
/// block is written to disk or ZooKeeper once per thousand ids; a transactional id's
/// change is fsynced): runs on the blocking pool.
pub fn handle(
    producers: &Producers,
    authz: &RequestAuthz,
    version: i16,
    request: InitProducerIdRequest,
    peer: std::net::IpAddr,
) -> Reply {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    response.ongoing_txn_producer_id = ProducerId(-1);
    response.ongoing_txn_producer_epoch = -1;
    let fresh = || {
        producers.ids.next_id().map_err(|e| {
            crate::warn_limited!("init_producer_id.failed", "no producer id: {e}");
            match e {
                // Retriable: the client asks again once ZooKeeper is back.
                ProducerIdError::Cluster(_) => ResponseError::CoordinatorLoadInProgress,
                _ => ResponseError::UnknownServerError,
            }
        })
    };
    let result = match request.transactional_id.as_ref().map(|t| t.0.as_str()) {
        Some(id) if !authorized(authz, Some(id)) => {
            Err(ResponseError::TransactionalIdAuthorizationFailed.code())
        }
        None if !authorized(authz, None) => Err(ResponseError::ClusterAuthorizationFailed.code()),
        Some(id) => transactional(producers, version, &request, id, peer),
        // Every call without a transactional id hands out a new producer id: the same
        // per-client bound (a client holding many real ids could otherwise keep
        // partitions' producer tables full of recent producers).
        None if !producers.new_txn_ids.try_take(peer) => {
            producers
                .transactions
                .counters
                .throttled
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            crate::info_limited!(
                "init_producer_id.throttled",
                %peer,
                "InitProducerId refused: {peer} asked for more new producer ids than \
                 transactions.new_ids_per_sec_per_client allows; the client retries"
            );
            Err(ResponseError::CoordinatorLoadInProgress.code())
        }
        None => fresh()
            .map(|id| ProducerIdEpoch { id, epoch: 0 })
            .map_err(|e| e.code()),
    };
    match result {
        Ok(producer) => {
            response.producer_id = ProducerId(producer.id);
            response.producer_epoch = producer.epoch;
        }
        Err(code) => response.error_code = code,
    }
    let error = response.error_code;
    Reply::new(response, error)
}

/// Authorization (Kafka's `KafkaApis.handleInitProducerIdRequest`): with a
/// transactional id, Write on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without
/// (an idempotent producer), IdempotentWrite on the cluster or Write on some topic
/// (KIP-679, `authorize_any`; else CLUSTER_AUTHORIZATION_FAILED).
fn authorized(authz: &RequestAuthz, transactional_id: Option<&str>) -> bool {
    match transactional_id {
        Some(id) => authz.allows(ResourceType::TransactionalId, id, AclOperation::Write),
        None => {
            authz.allows_cluster(AclOperation::IdempotentWrite)
                || authz.allows_any(ResourceType::Topic, AclOperation::Write)
        }
    }
}

/// The transaction coordinator's answer for transactional id `id`, or a Kafka code.
fn transactional(
    producers: &Producers,
    version: i16,
    request: &InitProducerIdRequest,
    id: &str,
    peer: std::net::IpAddr,
) -> Result<ProducerIdEpoch, i16> {
    let txn = &producers.transactions;
    let id = TransactionalId::new(id).ok_or(ResponseError::InvalidRequest.code())?;
    let request = InitRequest {
        id,
        timeout_ms: request.transaction_timeout_ms,
        expected: ProducerIdEpoch {
            id: request.producer_id.0,
            epoch: request.producer_epoch,
        },
    };
    let fresh = || {
        producers.ids.next_id().map_err(|e| {
            crate::warn_limited!("init_producer_id.failed", "no producer id: {e}");
            TxnError::Storage
        })
    };
    let admit_new = || producers.new_txn_ids.try_take(peer);
    txn.init_producer_id(crate::clock::now_ms(), &request, &fresh, &admit_new)
        .map_err(|e| e.code_at(version, 4))
}
