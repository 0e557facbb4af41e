//! Fetch: read record batches, long-polling until `min_bytes` are available or
//! `max_wait_ms` passes (Kafka protocol guide, Fetch; KIP-74 for the byte limits).
//!
//! - Batches are returned whole, as stored. Each partition gets at most
//!   `partition_max_bytes`, the response at most `max_bytes`, except that the first
//!   non-empty partition always gets at least its first batch, so a consumer can make
//!   progress past a batch larger than its limits.
//! - The bytes read count against the connection's and the broker's budgets of queued
//!   response bytes (server/budget.rs): a response takes no more than is left of them.
//! - Fetch sessions (KIP-227) are not kept: every response carries session id 0, which
//!   tells clients to send full fetch requests; an incremental request (a non-zero
//!   session id) is answered with `FETCH_SESSION_ID_NOT_FOUND`.
//! - Topics are named by name (v4–v12) or id (v13+).
//! - Isolation level 1 (read_committed): only batches below the partition's last stable
//!   offset, with the aborted transactions from the fetch offset up to it, as Kafka's
//!   `UnifiedLog.read` with `FetchIsolation.TXN_COMMITTED`; every response carries the
//!   last stable offset.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use kafka_protocol::{
    error::ResponseError,
    messages::{
        fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData},
        FetchRequest, FetchResponse, ProducerId,
    },
};
use tokio::time::Instant;

use super::errors::first_error;
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::{Broker, Topic},
    log::LogError,
    server::{
        budget::{Charge, ConnBudget},
        reply::Reply,
    },
};

/// One partition to read, resolved against the topic registry.
struct Target {
    topic_index: usize,
    topic: Option<Arc<Topic>>,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    /// Cluster mode: another broker leads it.
    not_leader: bool,
    /// Isolation level 1 (read_committed): records below the last stable offset only.
    committed: bool,
    /// Read on its topic is not allowed: TOPIC_AUTHORIZATION_FAILED.
    denied: bool,
}

/// Handles Fetch v4–v18. The records read are charged to `budget` (the connection's
/// and the broker's budgets of queued response bytes, server/budget.rs): a response
/// holds at most what is left of them, plus one batch (KIP-74); with nothing left the
/// fetch waits like one without data, and at its deadline answers with watermarks
/// only.
///
/// Authorization (Kafka's `KafkaApis.handleFetchRequest`, a consumer's fetch): Read on
/// each topic, asked once per topic; a partition of a topic the principal may not read
/// is answered TOPIC_AUTHORIZATION_FAILED and not read (an unknown topic id stays
/// UNKNOWN_TOPIC_ID).
pub async fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    budget: &Arc<ConnBudget>,
    version: i16,
    request: FetchRequest,
) -> Reply {
    let mut response = FetchResponse::default();
    if request.session_id != 0 {
        let error = ResponseError::FetchSessionIdNotFound.code();
        response.error_code = error;
        return Reply::new(response, error);
    }
    let by_id = version >= 13;
    let resolved: Vec<Option<Arc<Topic>>> = request
        .topics
        .iter()
        .map(|t| {
            if by_id {
                broker.topics.get_by_id(t.topic_id)
            } else {
                broker.topics.get(t.topic.0.as_str())
            }
        })
        .collect();
    let readable = authz.allowed_names(
        ResourceType::Topic,
        AclOperation::Read,
        request
            .topics
            .iter()
            .zip(&resolved)
            .filter_map(|(t, r)| match r {
                Some(topic) => Some(topic.name.as_str()),
                None if !by_id => Some(t.topic.0.as_str()),
                None => None,
            }),
    );
    let mut skeleton = Vec::with_capacity(request.topics.len());
    let mut targets = Vec::new();
    for (topic_index, (t, topic)) in request.topics.into_iter().zip(resolved).enumerate() {
        let denied = match &topic {
            Some(topic) => !readable.contains(&topic.name),
            None => !by_id && !readable.contains(t.topic.0.as_str()),
        };
        let topic = if denied { None } else { topic };
        let mut out = FetchableTopicResponse::default();
        out.topic = t.topic;
        out.topic_id = t.topic_id;
        skeleton.push(out);
        for p in t.partitions {
            let not_leader = topic
                .as_ref()
                .is_some_and(|t| !broker.serves(&t.name, p.partition));
            targets.push(Target {
                denied,
                not_leader,
                committed: request.isolation_level == 1,
                topic_index,
                topic: topic.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
            });
        }
    }
    // Kafka's fetch.max.bytes: whatever the client asks, one response holds at most this.
    let cap = broker.config.server.fetch_max_bytes as usize;
    let max_bytes = if request.max_bytes <= 0 {
        cap
    } else {
        (request.max_bytes as usize).min(cap)
    };
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_wait = Duration::from_millis(
        (request.max_wait_ms.max(0) as u64).min(broker.config.server.max_fetch_wait_ms),
    );
    let deadline = Instant::now() + max_wait;
    let targets = Arc::new(targets);
    // Wake on appends to the partitions of this fetch only.
    let mut appended: Vec<_> = {
        let mut seen = std::collections::HashSet::new();
        targets
            .iter()
            .filter_map(|t| {
                let topic = t.topic.as_ref()?;
                let partition = topic.partitions.get(usize::try_from(t.partition).ok()?)?;
                seen.insert(Arc::as_ptr(partition) as usize)
                    .then(|| partition.subscribe_appends())
            })
            .collect()
    };
    let mut stopping = broker.stopping();
    let unknown = unknown_topic(by_id);
    let (partitions, charge) = loop {
        for rx in appended.iter_mut() {
            rx.borrow_and_update();
        }
        let read = read_granted(budget, &targets, max_bytes, unknown).await;
        let starved = read.charge.is_none();
        if read.total >= min_bytes || read.any_error || Instant::now() >= deadline {
            break (read.partitions, read.charge);
        }
        // Not enough yet: give the grant back while waiting.
        drop(read);
        // Wait for the next append to one of these partitions, for room in the budget
        // when there was none, for the deadline or for shutdown; then read again.
        let any_append = async {
            if appended.is_empty() {
                std::future::pending::<()>().await;
            }
            let waits = appended.iter_mut().map(|rx| Box::pin(rx.changed()));
            let _ = futures_util::future::select_all(waits).await;
        };
        let woke = tokio::select! {
            changed = tokio::time::timeout_at(deadline, any_append) => changed.is_ok(),
            _ = budget.wait_available(), if starved => true,
            _ = stopping.wait_for(|stop| *stop) => false,
        };
        if !woke {
            let read = read_granted(budget, &targets, max_bytes, unknown).await;
            break (read.partitions, read.charge);
        }
    };
    for (target, data) in targets.iter().zip(partitions) {
        skeleton[target.topic_index].partitions.push(data);
    }
    let error = first_error(
        skeleton
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
    );
    response.responses = skeleton;
    let mut reply = Reply::new(response, error);
    reply.charge = charge;
    reply
}

/// A log's aborted transaction as a Fetch response lists it (producer id, first offset).
fn aborted_transaction(txn: &crate::log::AbortedTxn) -> AbortedTransaction {
    let mut out = AbortedTransaction::default();
    out.producer_id = ProducerId(txn.producer_id);
    out.first_offset = txn.first_offset;
    out
}

fn unknown_topic(by_id: bool) -> ResponseError {
    if by_id {
        ResponseError::UnknownTopicId
    } else {
        ResponseError::UnknownTopicOrPartition
    }
}

/// One read of every target.
struct Read {
    /// Partition data in target order.
    partitions: Vec<PartitionData>,
    /// Record bytes read.
    total: usize,
    /// Whether any partition failed.
    any_error: bool,
    /// The bytes of the connection's response budget the records hold; `None` when
    /// the budget had no room and no records were read.
    charge: Option<Charge>,
}

/// Reads every target once, taking at most `max_bytes` and what is left of the
/// connection's and the broker's response budgets (server/budget.rs). With no room
/// left, answers with watermarks only.
async fn read_granted(
    budget: &Arc<ConnBudget>,
    targets: &Arc<Vec<Target>>,
    max_bytes: usize,
    unknown: ResponseError,
) -> Read {
    let charge = budget.try_reserve(max_bytes);
    let grant = charge.as_ref().map_or(0, Charge::bytes);
    let (partitions, total, any_error) = read_all(targets, grant, unknown).await;
    let charge = charge.map(|mut c| {
        // What was read: less than the grant, or one batch more (KIP-74).
        c.resize(total);
        c
    });
    Read {
        partitions,
        total,
        any_error,
        charge,
    }
}

/// Reads every target once on the blocking pool: (partition data in target order,
/// total record bytes, whether any partition failed). `max_bytes` 0 reads no records,
/// only the watermarks.
async fn read_all(
    targets: &Arc<Vec<Target>>,
    max_bytes: usize,
    unknown: ResponseError,
) -> (Vec<PartitionData>, usize, bool) {
    let targets = Arc::clone(targets);
    tokio::task::spawn_blocking(move || {
        let mut left = max_bytes;
        let mut total = 0usize;
        let mut any_error = false;
        let mut first_non_empty = true;
        let out = targets
            .iter()
            .map(|t| {
                let mut data = PartitionData::default();
                data.partition_index = t.partition;
                data.high_watermark = -1;
                data.last_stable_offset = -1;
                data.log_start_offset = -1;
                data.aborted_transactions = Some(Vec::new());
                let partition = t.topic.as_ref().and_then(|topic| {
                    usize::try_from(t.partition)
                        .ok()
                        .and_then(|i| topic.partitions.get(i))
                });
                if t.denied {
                    data.error_code = ResponseError::TopicAuthorizationFailed.code();
                    any_error = true;
                    return data;
                }
                let Some(partition) = partition else {
                    data.error_code = unknown.code();
                    any_error = true;
                    return data;
                };
                if t.not_leader {
                    data.error_code = ResponseError::NotLeaderOrFollower.code();
                    any_error = true;
                    return data;
                }
                let limit = t.max_bytes.min(left);
                // KIP-74: the first non-empty partition may exceed the limits by one
                // batch (unless no records may be read at all).
                let limit_here = if first_non_empty && max_bytes > 0 {
                    limit.max(1)
                } else {
                    limit
                };
                // The file read runs after the lock is released: appends go on meanwhile.
                let planned = {
                    let log = partition.lock_log();
                    if t.committed {
                        log.plan_read_committed(t.offset, limit_here)
                    } else {
                        log.plan_read(t.offset, limit_here)
                    }
                };
                let read = planned.and_then(|p| {
                    if limit_here == 0 {
                        Ok(p.without_records())
                    } else {
                        p.execute()
                    }
                });
                match read {
                    Ok(read) => {
                        data.high_watermark = read.high_watermark;
                        data.last_stable_offset = read.last_stable_offset;
                        data.log_start_offset = read.log_start_offset;
                        if t.committed {
                            data.aborted_transactions =
                                Some(read.aborted.iter().map(aborted_transaction).collect());
                        }
                        let len = read.records.len();
                        if len > 0 {
                            if !first_non_empty && len > limit {
                                data.records = Some(Bytes::new());
                            } else {
                                first_non_empty = false;
                                left = left.saturating_sub(len);
                                total += len;
                                data.records = Some(read.records);
                            }
                        } else {
                            data.records = Some(Bytes::new());
                        }
                    }
                    Err(e) => {
                        data.error_code = super::errors::log_error(&e).code();
                        if let LogError::OffsetOutOfRange { start, end, .. } = e {
                            data.log_start_offset = start;
                            data.high_watermark = end;
                            data.last_stable_offset = end;
                        }
                        any_error = true;
                    }
                }
                data
            })
            .collect();
        (out, total, any_error)
    })
    .await
    .unwrap_or_default()
}
