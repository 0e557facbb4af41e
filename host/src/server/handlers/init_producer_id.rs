//! InitProducerId (API 22) for idempotent producers (KIP-98): a new producer id with
//! epoch 0 from the broker's allocator ([`crate::broker::producer_ids`]).
//!
//! As Kafka 4.x's `TransactionCoordinator.handleInitProducerId` answers a request
//! without a transactional id, every such request gets a fresh id and epoch 0, whatever
//! producer id and epoch it carries (the KIP-360 fields): an idempotent producer bumps
//! its epoch itself after a sequence error, and only a transactional id keeps an id
//! across InitProducerId calls. A request with a transactional id is answered
//! `COORDINATOR_NOT_AVAILABLE` (15), what Kafka answers while no transaction coordinator
//! can serve the id, and what this broker's FindCoordinator answers for transaction
//! keys: the broker serves no transactions, and a transactional client stops at
//! FindCoordinator already. An empty transactional id is `INVALID_REQUEST`, as in Kafka.

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId},
};

use crate::{
    broker::{producer_ids::ProducerIdError, Broker},
    server::dispatch::Reply,
};

/// Handles InitProducerId v0–v5. Blocking (a new id block is written to disk or
/// ZooKeeper once per thousand ids): runs on the blocking pool.
pub fn handle(broker: &Arc<Broker>, request: InitProducerIdRequest) -> Reply {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    response.ongoing_txn_producer_id = ProducerId(-1);
    response.ongoing_txn_producer_epoch = -1;
    let result = match request.transactional_id.as_ref().map(|t| t.0.as_str()) {
        Some("") => Err(ResponseError::InvalidRequest),
        Some(_) => Err(ResponseError::CoordinatorNotAvailable),
        None => broker.producer_ids.next_id().map_err(|e| {
            crate::warn_limited!("init_producer_id.failed", "no producer id: {e}");
            match e {
                // Retriable: the client asks again once ZooKeeper is back.
                ProducerIdError::Cluster(_) => ResponseError::CoordinatorLoadInProgress,
                _ => ResponseError::UnknownServerError,
            }
        }),
    };
    match result {
        Ok(id) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = 0;
        }
        Err(e) => response.error_code = e.code(),
    }
    let error = response.error_code;
    Reply::new(response, error)
}
