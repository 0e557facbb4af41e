//! Transactions open in this broker's partitions, and an operator's way to end one that
//! hangs without deleting data (Kafka's `kafka-transactions.sh find-hanging` and
//! `abort`).
//!
//! - `GET /v1/transactions/partitions`: every transaction ongoing in a partition this
//!   broker leads, as JSON `{"open": [{"topic", "partition", "producer_id",
//!   "producer_epoch" (the epoch that opened it), "first_offset", "last_write_ms",
//!   "transactional_id" (or null), "coordinator_state" (or null), "hanging"}]}`. A
//!   transaction **hangs** when nothing will ever end it: no transactional id this
//!   broker coordinates has it open with the partition (standalone that is certain; in
//!   cluster mode a transaction coordinated by another broker counts as hanging once its
//!   last write is older than `transactions.max_timeout_ms`, Kafka's rule). A hanging
//!   transaction holds the partition's last stable offset, so read_committed consumers
//!   read nothing past its first offset.
//! - `POST /v1/transactions/abort` with `{"topic", "partition", "producer_id"}`: writes
//!   an abort marker for that transaction in that partition (at the epoch that opened
//!   it), so read_committed consumers skip its records and read on. 200 with
//!   `{"first_offset", "marker_offset"}`; 404 when the producer has no transaction
//!   ongoing there or the partition does not exist; 409 when the transaction is not
//!   hanging by the rule above (this broker's transaction coordinator still has it open
//!   with that partition, or, in cluster mode, it may be open at another broker's
//!   coordinator and is younger than `transactions.max_timeout_ms`: end it with EndTxn,
//!   or let `transaction.timeout.ms` abort it); 421 when another broker leads the
//!   partition.

use std::sync::Arc;

use axum::{extract::State, http::StatusCode, response::IntoResponse, Json};
use serde::{Deserialize, Serialize};

use crate::{broker::Broker, txn::TopicPartition};

#[derive(Serialize)]
struct Open {
    topic: String,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
    first_offset: i64,
    last_write_ms: i64,
    transactional_id: Option<String>,
    coordinator_state: Option<&'static str>,
    hanging: bool,
}

#[derive(Serialize)]
struct OpenList {
    open: Vec<Open>,
}

/// `GET /v1/transactions/partitions`.
pub async fn list(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    let listed = tokio::task::spawn_blocking(move || open_transactions(&broker)).await;
    match listed {
        Ok(open) => Json(OpenList { open }).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "listing failed\n").into_response(),
    }
}

fn open_transactions(broker: &Broker) -> Vec<Open> {
    let now = crate::clock::now_ms();
    let max_timeout_ms = i64::from(broker.transactions().limits().max_timeout_ms);
    let mut out = Vec::new();
    let mut topics = broker.topics.list();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for topic in topics {
        for (index, partition) in topic.partitions.iter().enumerate() {
            let index = index as i32;
            if !broker.serves(&topic.name, index) {
                continue;
            }
            let ongoing: Vec<(i64, i64, i16, i64)> = {
                let log = partition.lock_log();
                let states = log.producer_states();
                states
                    .ongoing_transactions()
                    .filter_map(|(first, pid)| {
                        states
                            .get(pid, now)
                            .map(|e| (first, pid, e.txn_epoch, e.last_write_ms))
                    })
                    .collect()
            };
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition: index,
            };
            for (first_offset, producer_id, producer_epoch, last_write_ms) in ongoing {
                let (known, hanging) =
                    hanging(broker, producer_id, &tp, last_write_ms, now, max_timeout_ms);
                out.push(Open {
                    topic: topic.name.clone(),
                    partition: index,
                    producer_id,
                    producer_epoch,
                    first_offset,
                    last_write_ms,
                    transactional_id: known.as_ref().map(|(id, _, _)| id.as_str().to_owned()),
                    coordinator_state: known.as_ref().map(|(_, state, _)| state.name()),
                    hanging,
                });
            }
        }
    }
    out
}

/// What this broker's transaction coordinator knows of producer `producer_id`'s
/// transaction in `tp` (transactional id, state, open with `tp`), and whether the
/// transaction hangs (see the [module docs](self)): standalone when the coordinator
/// does not have it open with the partition; in cluster mode, coordinated elsewhere,
/// when its last write in the partition is older than `max_timeout_ms`.
fn hanging(
    broker: &Broker,
    producer_id: i64,
    tp: &TopicPartition,
    last_write_ms: i64,
    now_ms: i64,
    max_timeout_ms: i64,
) -> (
    Option<(crate::txn::TransactionalId, crate::txn::TxnState, bool)>,
    bool,
) {
    let known = broker.transactions().open_in(producer_id, tp);
    let hanging = match &known {
        Some((_, _, open)) => !open,
        None if broker.cluster().is_none() => true,
        None => now_ms.saturating_sub(last_write_ms) > max_timeout_ms,
    };
    (known, hanging)
}

/// The body of `POST /v1/transactions/abort`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbortRequest {
    topic: String,
    partition: i32,
    producer_id: i64,
}

#[derive(Serialize)]
struct Aborted {
    first_offset: i64,
    marker_offset: i64,
}

/// `POST /v1/transactions/abort`.
pub async fn abort(
    State(broker): State<Arc<Broker>>,
    Json(request): Json<AbortRequest>,
) -> impl IntoResponse {
    let refuse = |status: StatusCode, text: String| (status, text + "\n").into_response();
    let Some(partition) = broker.topics.get(&request.topic).and_then(|t| {
        usize::try_from(request.partition)
            .ok()
            .and_then(|i| t.partitions.get(i).cloned())
    }) else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("no partition {}-{}", request.topic, request.partition),
        );
    };
    if !broker.serves(&request.topic, request.partition) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "partition {}-{} is led by another broker: ask its admin API",
                request.topic, request.partition
            ),
        );
    }
    let tp = TopicPartition {
        topic: request.topic.clone(),
        partition: request.partition,
    };
    // Only a hanging transaction: one its coordinator still has open (here, or in
    // cluster mode possibly on another broker, until it is older than the longest
    // transaction timeout) would lose an acknowledged commit's records here.
    let now = crate::clock::now_ms();
    let max_timeout_ms = i64::from(broker.transactions().limits().max_timeout_ms);
    let last_write_ms = partition
        .lock_log()
        .producer_states()
        .get(request.producer_id, now)
        .map(|e| e.last_write_ms);
    if let Some(last_write_ms) = last_write_ms {
        let (known, hanging) = hanging(
            &broker,
            request.producer_id,
            &tp,
            last_write_ms,
            now,
            max_timeout_ms,
        );
        if !hanging {
            let why = match known {
                Some((id, state, _)) => format!(
                    "transactional id {} ({}) still has this partition in its open \
                     transaction",
                    id.as_str(),
                    state.name()
                ),
                None => format!(
                    "its transaction coordinator is another broker and its last write is \
                     younger than transactions.max_timeout_ms ({max_timeout_ms} ms)"
                ),
            };
            return refuse(
                StatusCode::CONFLICT,
                format!(
                    "{why}: it is not hanging; end it with EndTxn or let its \
                     transaction.timeout.ms abort it"
                ),
            );
        }
    }
    let producer_id = request.producer_id;
    let p = Arc::clone(&partition);
    let written = tokio::task::spawn_blocking(move || p.abort_open_transaction(producer_id)).await;
    let (first_offset, marker_offset) = match written {
        Ok(Ok(Some(offsets))) => offsets,
        Ok(Ok(None)) => {
            return refuse(
                StatusCode::NOT_FOUND,
                format!(
                    "producer {producer_id} has no transaction ongoing in {}-{}",
                    request.topic, request.partition
                ),
            )
        }
        Ok(Err(e)) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("abort marker not written: {e}"),
            )
        }
        Err(_) => {
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "abort marker not written".into(),
            )
        }
    };
    if let Err(e) = partition.wait_durable(marker_offset + 1).await {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("abort marker written at {marker_offset} but not made durable: {e}"),
        );
    }
    broker.transactions().verified.forget(producer_id, &tp);
    tracing::warn!(
        topic = %request.topic,
        partition = request.partition,
        producer_id,
        first_offset,
        marker_offset,
        "an operator aborted a hanging transaction"
    );
    Json(Aborted {
        first_offset,
        marker_offset,
    })
    .into_response()
}
