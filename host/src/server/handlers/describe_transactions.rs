//! DescribeTransactions (API 65, KIP-664): each transactional id's state, timeout,
//! start time, producer id and epoch and partitions; `TRANSACTIONAL_ID_NOT_FOUND` for
//! an unknown id. Kafka lists the group's `__consumer_offsets` partition among the
//! topics of a transaction with offsets; this broker has none to list.

use std::collections::BTreeMap;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_transactions_response::{TopicData, TransactionState},
        DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
    },
    protocol::StrBytes,
};

use crate::{
    server::reply::Reply,
    txn::{TransactionalId, TxnCoordinator},
};

/// Handles DescribeTransactions v0.
///
/// Authorization (Kafka's `KafkaApis.handleDescribeTransactionsRequest`): Describe on
/// each transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it; the
/// partitions listed are only those of topics the principal may describe.
pub fn handle(
    txn: &TxnCoordinator,
    authz: &crate::authz::RequestAuthz,
    request: DescribeTransactionsRequest,
) -> Reply {
    use crate::authz::{AclOperation, ResourceType};
    let mut response = DescribeTransactionsResponse::default();
    response.transaction_states = request
        .transactional_ids
        .into_iter()
        .map(|wire_id| {
            let mut state = TransactionState::default();
            let found = match TransactionalId::new(wire_id.0.as_str()) {
                _ if !authz.allows(
                    ResourceType::TransactionalId,
                    wire_id.0.as_str(),
                    AclOperation::Describe,
                ) =>
                {
                    Err(ResponseError::TransactionalIdAuthorizationFailed)
                }
                None => Err(ResponseError::TransactionalIdNotFound),
                // Cluster mode: another broker's id is NOT_COORDINATOR.
                Some(id) => match txn.check_owner(&id) {
                    Err(e) => Err(e.kafka()),
                    Ok(()) => txn.get(&id).ok_or(ResponseError::TransactionalIdNotFound),
                },
            };
            state.transactional_id = wire_id;
            match found {
                Err(e) => state.error_code = e.code(),
                Ok(meta) => {
                    state.transaction_state = StrBytes::from_static_str(meta.state.name());
                    state.transaction_timeout_ms = meta.timeout_ms;
                    state.transaction_start_time_ms = meta.start_ms;
                    state.producer_id = ProducerId(meta.producer.id);
                    state.producer_epoch = meta.producer.epoch;
                    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    let describable = authz.allowed_names_quietly(
                        ResourceType::Topic,
                        AclOperation::Describe,
                        meta.partitions.iter().map(|p| p.topic.as_str()),
                    );
                    for p in &meta.partitions {
                        if describable.contains(&p.topic) {
                            topics.entry(&p.topic).or_default().push(p.partition);
                        }
                    }
                    state.topics = topics
                        .into_iter()
                        .map(|(topic, partitions)| {
                            let mut t = TopicData::default();
                            t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
                            t.partitions = partitions;
                            t
                        })
                        .collect();
                }
            }
            state
        })
        .collect();
    let error =
        super::errors::first_error(response.transaction_states.iter().map(|s| s.error_code));
    Reply::new(response, error)
}
