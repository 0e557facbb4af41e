//! AddPartitionsToTxn (API 24): adds partitions to a producer's transaction (v0–v3,
//! what clients send), or, batched (v4–v5, KIP-890 part 1), adds or — with
//! `verify_only` — checks them for several transactional ids at once.
//!
//! As Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`: a partition that does not
//! exist is `UNKNOWN_TOPIC_OR_PARTITION` and the others of that transaction
//! `OPERATION_NOT_ATTEMPTED`; otherwise the coordinator's answer applies to every
//! partition. A verification answers per partition: `INVALID_TXN_STATE` for one not
//! in the open transaction. More partitions in one request than
//! `transactions.max_partitions_per_transaction` are `POLICY_VIOLATION` without being
//! looked at.

use kafka_protocol::{
    error::ResponseError,
    messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTopic,
        add_partitions_to_txn_response::{
            AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult,
            AddPartitionsToTxnTopicResult,
        },
        AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TransactionalId,
    },
};

use super::txn_wire;
use crate::{
    broker::TopicRegistry,
    server::reply::Reply,
    txn::{TopicPartition, TxnCoordinator, TxnError},
};

/// What the handler reads: the transaction coordinator, and the topics a partition
/// must exist in.
#[derive(Clone, Copy)]
pub struct State<'a> {
    /// The transaction coordinator.
    pub txn: &'a TxnCoordinator,
    /// The topics.
    pub topics: &'a TopicRegistry,
    /// The request's authorization checks.
    pub authz: &'a crate::authz::RequestAuthz,
}

/// Handles AddPartitionsToTxn v0–v5. Blocking (an fsync): runs on the blocking pool.
///
/// Authorization (Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`): v4+ (sent by
/// brokers) needs ClusterAction on the cluster (else CLUSTER_AUTHORIZATION_FAILED for
/// the request); each transaction Write on its transactional id (else all its
/// partitions TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Write on each topic (else
/// TOPIC_AUTHORIZATION_FAILED for its partitions, OPERATION_NOT_ATTEMPTED for the
/// others).
pub fn handle(state: State<'_>, version: i16, request: AddPartitionsToTxnRequest) -> Reply {
    let mut response = AddPartitionsToTxnResponse::default();
    if version >= 4
        && !state
            .authz
            .allows_cluster(crate::authz::AclOperation::ClusterAction)
    {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        let error = response.error_code;
        return Reply::new(response, error);
    }
    if version <= 3 {
        let one = One {
            id: &request.v3_and_below_transactional_id,
            producer_id: request.v3_and_below_producer_id,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
            topics: &request.v3_and_below_topics,
        };
        response.results_by_topic_v3_and_below = answer(state, version, &one);
        let error = super::errors::first_error(
            response.results_by_topic_v3_and_below.iter().flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            }),
        );
        return Reply::new(response, error);
    }
    response.results_by_transaction = request
        .transactions
        .iter()
        .map(|t| {
            let one = One {
                id: &t.transactional_id,
                producer_id: t.producer_id,
                producer_epoch: t.producer_epoch,
                verify_only: t.verify_only,
                topics: &t.topics,
            };
            let mut result = AddPartitionsToTxnResult::default();
            result.transactional_id = t.transactional_id.clone();
            result.topic_results = answer(state, version, &one);
            result
        })
        .collect();
    let error = super::errors::first_error(response.results_by_transaction.iter().flat_map(|t| {
        t.topic_results.iter().flat_map(|r| {
            r.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
    }));
    Reply::new(response, error)
}

/// One transaction's part of a request.
struct One<'a> {
    id: &'a TransactionalId,
    producer_id: ProducerId,
    producer_epoch: i16,
    verify_only: bool,
    topics: &'a [AddPartitionsToTxnTopic],
}

/// The per-partition codes for one transaction.
fn answer(state: State<'_>, version: i16, one: &One<'_>) -> Vec<AddPartitionsToTxnTopicResult> {
    let requested: usize = one.topics.iter().map(|t| t.partitions.len()).sum();
    let codes: Vec<Vec<i16>> = match decide(state, version, one, requested) {
        Decided::All(code) => one
            .topics
            .iter()
            .map(|t| vec![code; t.partitions.len()])
            .collect(),
        Decided::Each(codes) => codes,
    };
    one.topics
        .iter()
        .zip(codes)
        .map(|(topic, codes)| {
            let mut result = AddPartitionsToTxnTopicResult::default();
            result.name = topic.name.clone();
            result.results_by_partition = topic
                .partitions
                .iter()
                .zip(codes)
                .map(|(&partition, code)| {
                    let mut p = AddPartitionsToTxnPartitionResult::default();
                    p.partition_index = partition;
                    p.partition_error_code = code;
                    p
                })
                .collect();
            result
        })
        .collect()
}

enum Decided {
    /// One code for every partition.
    All(i16),
    /// A code per partition, per topic, in request order.
    Each(Vec<Vec<i16>>),
}

fn decide(state: State<'_>, version: i16, one: &One<'_>, requested: usize) -> Decided {
    let txn = state.txn;
    if requested > txn.limits().max_partitions_per_transaction {
        return Decided::All(TxnError::TooLarge.code_at(version, 2));
    }
    if let Some(refused) = authorize(state.authz, one) {
        return refused;
    }
    let caller = match txn_wire::caller(one.id, one.producer_id, one.producer_epoch) {
        Ok(caller) => caller,
        Err(e) => return Decided::All(e.code_at(version, 2)),
    };
    // Partitions that exist (in cluster mode every broker has a copy of every topic,
    // and a transaction may add partitions other brokers lead); the others make the
    // whole transaction's part fail.
    let exists = |topic: &str, partition: i32| {
        state
            .topics
            .get(topic)
            .is_some_and(|t| partition >= 0 && (partition as usize) < t.partitions.len())
    };
    let known: Vec<Vec<bool>> = one
        .topics
        .iter()
        .map(|t| {
            t.partitions
                .iter()
                .map(|&p| exists(t.name.0.as_str(), p))
                .collect()
        })
        .collect();
    if known.iter().flatten().any(|k| !k) {
        return Decided::Each(
            known
                .into_iter()
                .map(|t| {
                    t.into_iter()
                        .map(|k| {
                            if k {
                                ResponseError::OperationNotAttempted.code()
                            } else {
                                ResponseError::UnknownTopicOrPartition.code()
                            }
                        })
                        .collect()
                })
                .collect(),
        );
    }
    let partitions: Vec<TopicPartition> = one
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|&partition| TopicPartition {
                topic: t.name.0.to_string(),
                partition,
            })
        })
        .collect();
    if one.verify_only {
        return verify(txn, version, &caller, one, &partitions);
    }
    Decided::All(
        txn.add_partitions(crate::clock::now_ms(), &caller, &partitions)
            .map_or_else(|e| e.code_at(version, 2), |()| 0),
    )
}

/// The transaction's part refused by authorization (see [`handle`]), if it is.
fn authorize(authz: &crate::authz::RequestAuthz, one: &One<'_>) -> Option<Decided> {
    use crate::authz::{AclOperation, ResourceType};
    if !authz.is_enabled() {
        return None;
    }
    if !authz.allows(
        ResourceType::TransactionalId,
        one.id.0.as_str(),
        AclOperation::Write,
    ) {
        return Some(Decided::All(
            ResponseError::TransactionalIdAuthorizationFailed.code(),
        ));
    }
    let writable = authz.allowed_names(
        ResourceType::Topic,
        AclOperation::Write,
        one.topics.iter().map(|t| t.name.0.as_str()),
    );
    if one
        .topics
        .iter()
        .all(|t| writable.contains(t.name.0.as_str()))
    {
        return None;
    }
    Some(Decided::Each(
        one.topics
            .iter()
            .map(|t| {
                let code = if writable.contains(t.name.0.as_str()) {
                    ResponseError::OperationNotAttempted
                } else {
                    ResponseError::TopicAuthorizationFailed
                };
                vec![code.code(); t.partitions.len()]
            })
            .collect(),
    ))
}

/// KIP-890 part 1's verification: `INVALID_TXN_STATE` for each partition not in the
/// caller's open transaction.
fn verify(
    txn: &TxnCoordinator,
    version: i16,
    caller: &crate::txn::Caller,
    one: &One<'_>,
    partitions: &[TopicPartition],
) -> Decided {
    if let Err(e) = txn.check_caller(caller) {
        return Decided::All(e.code_at(version, 2));
    }
    let mut codes = partitions.iter().map(|p| {
        txn.verify_partition(caller.producer, p)
            .map_or_else(|e| e.code_at(version, 2), |()| 0)
    });
    Decided::Each(
        one.topics
            .iter()
            .map(|t| codes.by_ref().take(t.partitions.len()).collect())
            .collect(),
    )
}
