//! Produce: append record batches to partition logs.
//!
//! Batches are stored exactly as produced (compressed ones untouched); the partition
//! log validates each batch (magic, CRC) and assigns offsets. `acks` = 0 gets no
//! response at all; 1 and −1 (all in-sync replicas, which on a single replica is this
//! one) are answered after the append, which is durable under the log's flush policy.
//! Topics are named by name (v3–v12) or id (v13). An unknown topic is auto-created
//! when enabled.
//!
//! Appends run on the connection's own task: an append is a write into the page cache,
//! cheaper than a hop to the blocking pool (measured in docs/benchmarks.md). What can
//! block for longer runs through [`off_the_runtime`]: creating a topic, and an append
//! that rolls a segment (the old segment is fsynced). Fsyncs of acknowledged appends
//! run on the blocking pool ([`Partition::wait_durable`],
//! [`Partition::flush_in_background`]).

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        produce_response::{PartitionProduceResponse, TopicProduceResponse},
        ProduceRequest, ProduceResponse,
    },
    protocol::StrBytes,
};

use super::{first_error, now_ms};
use crate::{
    broker::{topics::validate_name, Broker, Partition, Topic},
    log::{AppendInfo, LogError},
    server::dispatch::{Handled, Reply},
};

/// Handles Produce v3–v13. The appends happen now, in request order; with durable acks
/// (`log.flush_messages = 1`, the default) the response waits for an fsync covering
/// them, shared with every other append waiting on the same partition (group commit).
/// With `flush_messages` > 1 (or acks = 0), a flush that falls due starts in the
/// background and the response does not wait for it.
pub async fn handle(broker: &Arc<Broker>, version: i16, request: ProduceRequest) -> Handled {
    let acks = request.acks;
    let deferred = broker.config.log.flush_messages == 1 && acks != 0;
    let work = Arc::clone(broker);
    let (responses, waits) = {
        let mut waits: Vec<(usize, usize, Arc<Partition>, i64)> = Vec::new();
        let responses = request
            .topic_data
            .into_iter()
            .enumerate()
            .map(|(ti, data)| {
                let topic = if version >= 13 {
                    work.topics
                        .get_by_id(data.topic_id)
                        .ok_or(ResponseError::UnknownTopicId)
                } else {
                    find_or_create(&work, data.name.0.as_str())
                };
                let mut out = TopicProduceResponse::default();
                out.name = data.name.clone();
                if version >= 13 {
                    out.topic_id = data.topic_id;
                }
                out.partition_responses = data
                    .partition_data
                    .into_iter()
                    .enumerate()
                    .map(|(pi, p)| {
                        let mut r = PartitionProduceResponse::default();
                        r.index = p.index;
                        r.base_offset = -1;
                        r.log_append_time_ms = -1;
                        r.log_start_offset = -1;
                        let result = match (&topic, acks) {
                            (_, a) if !matches!(a, -1..=1) => {
                                Err(ResponseError::InvalidRequiredAcks)
                            }
                            (Err(e), _) => Err(*e),
                            (Ok(topic), _) if !work.serves(&topic.name, p.index) => {
                                Err(ResponseError::NotLeaderOrFollower)
                            }
                            (Ok(topic), _) => append(topic, p.index, p.records, deferred),
                        };
                        match result {
                            Ok((partition, info)) => {
                                r.base_offset = info.base_offset;
                                r.log_start_offset = info.log_start_offset;
                                if deferred {
                                    waits.push((ti, pi, partition, info.last_offset + 1));
                                }
                            }
                            Err(e) => set_error(&mut r, e),
                        }
                        r
                    })
                    .collect();
                out
            })
            .collect::<Vec<_>>();
        (responses, waits)
    };
    let reply = move |responses: Vec<TopicProduceResponse>| -> Reply {
        let error = first_error(
            responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code)),
        );
        if acks == 0 {
            return Reply::silent(error);
        }
        let mut response = ProduceResponse::default();
        response.responses = responses;
        Reply::new(response, error)
    };
    if waits.is_empty() {
        return reply(responses).into();
    }
    Handled::Deferred(Box::pin(async move {
        let mut responses = responses;
        for (ti, pi, partition, end) in waits {
            if let Err(e) = partition.wait_durable(end).await {
                tracing::error!(
                    partition = partition.index,
                    "flush failed, produce not acknowledged: {e}"
                );
                let r = &mut responses[ti].partition_responses[pi];
                r.base_offset = -1;
                set_error(r, super::log_error(&e));
            }
        }
        reply(responses)
    }))
}

fn set_error(r: &mut PartitionProduceResponse, e: ResponseError) {
    r.error_code = e.code();
    r.error_message = Some(StrBytes::from_string(format!("{e:?}")));
}

fn find_or_create(broker: &Broker, name: &str) -> Result<Arc<Topic>, ResponseError> {
    if let Some(topic) = broker.topics.get(name) {
        return Ok(topic);
    }
    if validate_name(name).is_err() {
        return Err(ResponseError::InvalidTopicException);
    }
    let config = &broker.config.topics;
    if !broker.auto_create() {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let created = off_the_runtime(|| {
        broker.topics.create(
            name,
            i64::from(config.default_partitions),
            config.max_partitions,
        )
    });
    match created {
        Ok(topic) => Ok(topic),
        Err(_) => broker
            .topics
            .get(name)
            .ok_or(ResponseError::KafkaStorageError),
    }
}

/// Appends `records` to partition `index` of `topic`. With `deferred`, the caller makes
/// the append durable with [`Partition::wait_durable`] before acknowledging it;
/// otherwise a flush due under `log.flush_messages` starts in the background.
fn append(
    topic: &Topic,
    index: i32,
    records: Option<bytes::Bytes>,
    deferred: bool,
) -> Result<(Arc<Partition>, AppendInfo), ResponseError> {
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let records = records.ok_or(ResponseError::InvalidRecord)?;
    let mut log = partition.lock_log();
    let now = now_ms();
    let result = if log.roll_due(records.len() as u64, now) {
        off_the_runtime(|| log.append_deferred(&records, now))
    } else {
        log.append_deferred(&records, now)
    };
    match result {
        Ok(info) => {
            let flush = !deferred && log.flush_due();
            drop(log);
            if flush {
                partition.flush_in_background();
            }
            partition.notify_appended();
            Ok((Arc::clone(partition), info))
        }
        Err(e) => {
            match &e {
                // The client's data was refused: its problem, not the broker's.
                LogError::InvalidBatch(_)
                | LogError::BatchTooLarge { .. }
                | LogError::TooManyOffsets { .. } => {
                    tracing::debug!(topic = %topic.name, partition = index, "produce refused: {e}")
                }
                _ => tracing::warn!(topic = %topic.name, partition = index, "append failed: {e}"),
            }
            Err(super::log_error(&e))
        }
    }
}

/// Runs `f`, which may block on disk for a while (fsync, file creation), without
/// stalling the other tasks of this runtime worker: through `block_in_place` on a
/// multi-threaded runtime, directly elsewhere (tests on a current-thread runtime).
fn off_the_runtime<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
