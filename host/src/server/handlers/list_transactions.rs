//! ListTransactions (API 66, KIP-664; v1 KIP-994's duration filter, v2 KIP-1152's
//! transactional id pattern): the transactional ids with their producer id and state,
//! filtered by state names (unknown names are listed back in
//! `unknown_state_filters`), producer ids, a minimum running time in ms (only open
//! transactions have one) and a regular expression the whole id must match (invalid:
//! `INVALID_REGULAR_EXPRESSION`; longer than [`MAX_PATTERN_BYTES`]: refused the same).

use kafka_protocol::{
    error::ResponseError,
    messages::{
        list_transactions_response::TransactionState, ListTransactionsRequest,
        ListTransactionsResponse, ProducerId, TransactionalId,
    },
    protocol::StrBytes,
};

use crate::{
    server::reply::Reply,
    txn::{TxnCoordinator, TxnState},
};

/// Longest `transactional_id_pattern` accepted, bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;

/// Handles ListTransactions v0–v2.
///
/// Authorization (Kafka's `KafkaApis.handleListTransactionsRequest`): only the
/// transactional ids the principal may describe are listed.
pub fn handle(
    txn: &TxnCoordinator,
    authz: &crate::authz::RequestAuthz,
    request: ListTransactionsRequest,
) -> Reply {
    let mut response = ListTransactionsResponse::default();
    let pattern = match request.transactional_id_pattern.as_deref() {
        None | Some("") => None,
        Some(p) => match (p.len() <= MAX_PATTERN_BYTES)
            .then(|| {
                regex::RegexBuilder::new(&format!("^(?:{p})$"))
                    .size_limit(1 << 20)
                    .build()
                    .ok()
            })
            .flatten()
        {
            Some(re) => Some(re),
            None => {
                let code = ResponseError::InvalidRegularExpression.code();
                response.error_code = code;
                return Reply::new(response, code);
            }
        },
    };
    let mut states = Vec::new();
    for name in &request.state_filters {
        match TxnState::from_name(name.as_str()) {
            Some(s) => states.push(s),
            None => response.unknown_state_filters.push(name.clone()),
        }
    }
    let now = crate::clock::now_ms();
    response.transaction_states = txn
        .snapshot()
        .into_iter()
        .filter(|m| states.is_empty() || states.contains(&m.state))
        .filter(|m| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .contains(&ProducerId(m.producer.id))
        })
        .filter(|m| {
            request.duration_filter < 0
                || (m.start_ms >= 0 && now.saturating_sub(m.start_ms) >= request.duration_filter)
        })
        .filter(|m| pattern.as_ref().is_none_or(|re| re.is_match(m.id.as_str())))
        .filter(|m| {
            authz.allows_quietly(
                crate::authz::ResourceType::TransactionalId,
                m.id.as_str(),
                crate::authz::AclOperation::Describe,
            )
        })
        .map(|m| {
            let mut s = TransactionState::default();
            s.transactional_id = TransactionalId(StrBytes::from_string(m.id.as_str().to_owned()));
            s.producer_id = ProducerId(m.producer.id);
            s.transaction_state = StrBytes::from_static_str(m.state.name());
            s
        })
        .collect();
    Reply::new(response, 0)
}
