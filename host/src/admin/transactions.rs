//! `GET /v1/transactions`: every transactional id the transaction coordinator knows,
//! as JSON: `{"transactions": [{"transactional_id", "producer_id", "producer_epoch",
//! "state", "timeout_ms", "start_ms" (−1 when none is open), "last_update_ms",
//! "partitions": [{"topic", "partition"}], "groups": [{"group", "staged_offsets"}]}]}`,
//! sorted by id (in cluster mode: the ids of the coordinator slots this broker owns). 404
//! when no transaction coordinator runs.

use std::sync::Arc;

use axum::{extract::State, response::IntoResponse, Json};
use serde::Serialize;

use crate::broker::Broker;

#[derive(Serialize)]
struct Partition {
    topic: String,
    partition: i32,
}

#[derive(Serialize)]
struct Group {
    group: String,
    staged_offsets: usize,
}

#[derive(Serialize)]
struct Transaction {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    state: &'static str,
    timeout_ms: i32,
    start_ms: i64,
    last_update_ms: i64,
    partitions: Vec<Partition>,
    groups: Vec<Group>,
}

#[derive(Serialize)]
struct Transactions {
    transactions: Vec<Transaction>,
}

/// `GET /v1/transactions`.
pub async fn list(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    let txn = broker.transactions();
    let transactions = txn
        .snapshot()
        .into_iter()
        .map(|m| Transaction {
            transactional_id: m.id.as_str().to_owned(),
            producer_id: m.producer.id,
            producer_epoch: m.producer.epoch,
            state: m.state.name(),
            timeout_ms: m.timeout_ms,
            start_ms: m.start_ms,
            last_update_ms: m.last_update_ms,
            partitions: m
                .partitions
                .into_iter()
                .map(|p| Partition {
                    topic: p.topic,
                    partition: p.partition,
                })
                .collect(),
            groups: m
                .groups
                .into_iter()
                .map(|(group, offsets)| Group {
                    group,
                    staged_offsets: offsets.len(),
                })
                .collect(),
        })
        .collect();
    Json(Transactions { transactions }).into_response()
}
