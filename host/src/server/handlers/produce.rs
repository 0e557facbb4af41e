//! Produce: append record batches to partition logs.
//!
//! Each partition's batch is validated as Kafka's LogValidator does
//! ([`crate::log::validate`]: one batch, header and CRC, every record walked, compressed
//! ones decompressed, timestamps in range) under the topic's effective config (its
//! overrides of `max.message.bytes` and `message.timestamp.*.max.ms` included) before
//! the partition's lock is taken, and
//! refused per partition with CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP or
//! MESSAGE_TOO_LARGE, the reason in the response's error message and, for one record at
//! fault, in `record_errors`. Batches are stored as produced (compressed ones untouched);
//! the log assigns offsets. A batch with a producer id (idempotent producers, KIP-98) is
//! checked under the partition's lock against its producer state
//! ([`crate::log::producer_state`]): a retry is answered with its original base offset
//! (and waits, like an append, until that offset is durable), a sequence gap with
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch with INVALID_PRODUCER_EPOCH. A
//! transactional batch is appended only if the transaction coordinator has its
//! partition in the producer's open transaction (KIP-890 part 1,
//! `verify_in_transaction`); otherwise INVALID_TXN_STATE. A partition
//! named twice in one request is appended and answered once, from its last entry, as
//! Kafka does (`superseded_entries`). At most [`MAX_CONCURRENT_DECOMPRESSIONS`] compressed batches
//! are validated at once, broker-wide, each under its own permit, which bounds the
//! memory decoders take and lets producers take turns.
//! `acks` = 0 gets no response at all; 1 and −1 (all in-sync replicas, which on a
//! single replica is this one) are answered after the append, which is durable under
//! the log's flush policy.
//! Topics are named by name (v3–v12) or id (v13). An unknown topic is auto-created
//! when enabled.
//!
//! Appends run on the connection's own task: an append is a write into the page cache,
//! cheaper than a hop to the blocking pool (measured in docs/benchmarks.md). What can
//! block for longer runs through `off_the_runtime`: creating a topic, and an append
//! that rolls a segment (the old segment is fsynced). Fsyncs of acknowledged appends
//! run on the blocking pool ([`Partition::wait_durable`],
//! [`Partition::flush_in_background`]).
//!
//! **Authorization** (Kafka's `KafkaApis.handleProduceRequest`, `authorize`): with a
//! transactional id, Write on it, else every partition is answered
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is appended; Write on each topic,
//! else its partitions are answered TOPIC_AUTHORIZATION_FAILED (nothing appended, no
//! topic auto-created); an unknown topic is auto-created only with Create on the
//! cluster or the topic (else UNKNOWN_TOPIC_OR_PARTITION, as if auto-creation were off).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        produce_response::{
            BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
        },
        ProduceRequest, ProduceResponse,
    },
    protocol::StrBytes,
};
use tokio::sync::Semaphore;

use super::errors::first_error;
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::{auto_create::AutoCreateBudget, topics::validate_name, Broker, Partition, Topic},
    clock::now_ms,
    log::{
        batch::BatchError,
        validate::{validate_produced, ValidatedBatch, ValidationRules},
        AppendInfo, LogError,
    },
    server::reply::{Handled, Reply},
};

/// How many compressed batches the broker validates at once, broker-wide: each holds a decoder (up to 128 MiB for a zstd window, or a snappy
/// block of up to `max_decompressed_batch_bytes`), so this bounds that memory to
/// 2 × 128 MiB; other batches wait their turn, first come, first served.
pub const MAX_CONCURRENT_DECOMPRESSIONS: usize = 2;

static DECOMPRESSIONS: Semaphore = Semaphore::const_new(MAX_CONCURRENT_DECOMPRESSIONS);

/// Why one partition's data was not appended: the Kafka error, a message for the
/// response's `error_message`, and the record at fault when there is one.
struct Refusal {
    error: ResponseError,
    message: String,
    record: Option<usize>,
}

impl From<ResponseError> for Refusal {
    fn from(error: ResponseError) -> Self {
        let message = match error {
            ResponseError::InvalidRequiredAcks => "acks must be -1, 0 or 1",
            ResponseError::UnknownTopicOrPartition => "no such topic or partition on this broker",
            ResponseError::UnknownTopicId => "no topic with this topic id",
            ResponseError::NotLeaderOrFollower => "another broker leads this partition",
            ResponseError::InvalidTopicException => {
                "the topic name is not a valid Kafka topic name"
            }
            _ => "",
        };
        Refusal {
            error,
            message: if message.is_empty() {
                error.to_string()
            } else {
                format!("{error}: {message}")
            },
            record: None,
        }
    }
}

impl From<&LogError> for Refusal {
    fn from(e: &LogError) -> Self {
        Refusal {
            error: super::errors::log_error(e),
            message: e.to_string(),
            record: match e {
                LogError::InvalidBatch(b) => b.record_index(),
                _ => None,
            },
        }
    }
}

/// Handles Produce v3–v13. The appends happen now, in request order; on a partition
/// with durable acks (its topic's `flush.messages`, else `[log] flush_messages`, is 1 —
/// the default) the response waits for an fsync covering them, shared with every other
/// append waiting on the same partition (group commit). Where it is > 1 (or acks = 0),
/// a flush that falls due starts in the background and the response does not wait for
/// it. The setting is per partition: one request can wait on some and not others.
pub async fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    version: i16,
    mut request: ProduceRequest,
) -> Handled {
    let acks = request.acks;
    // Partitions refused by authorization are answered without being looked at.
    let denied = authorize(broker, authz, version, &mut request);
    let rules = topic_rules(broker, version, &request, now_ms());
    let mut compressed = validate_compressed(&request, &rules).await;
    let work = Arc::clone(broker);
    let mut budget = work.topics.auto_create_budget();
    let superseded = superseded_entries(version, &request);
    let transactional_id = request.transactional_id.as_ref().map(|t| t.0.to_string());
    let (responses, waits) = {
        let mut waits: Vec<(usize, usize, Arc<Partition>, i64)> = Vec::new();
        let responses = request
            .topic_data
            .into_iter()
            .enumerate()
            .map(|(ti, data)| {
                let topic = if let Some(e) = denied[ti] {
                    Err(e)
                } else if version >= 13 {
                    work.topics
                        .get_by_id(data.topic_id)
                        .ok_or(ResponseError::UnknownTopicId)
                } else {
                    let name = data.name.0.as_str();
                    match work.topics.get(name) {
                        Some(topic) => Ok(topic),
                        None if work.auto_create() && !may_create(authz, name) => {
                            Err(ResponseError::UnknownTopicOrPartition)
                        }
                        None => find_or_create(&work, name, &mut budget),
                    }
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
                    .filter(|(pi, _)| !superseded.contains(&(ti, *pi)))
                    .enumerate()
                    .map(|(ri, (pi, p))| {
                        let mut r = PartitionProduceResponse::default();
                        r.index = p.index;
                        r.base_offset = -1;
                        r.log_append_time_ms = -1;
                        r.log_start_offset = -1;
                        let result = match (&topic, acks) {
                            (_, a) if !matches!(a, -1..=1) => {
                                Err(ResponseError::InvalidRequiredAcks.into())
                            }
                            (Err(e), _) => Err((*e).into()),
                            (Ok(topic), _) if !work.serves(&topic.name, p.index) => {
                                Err(ResponseError::NotLeaderOrFollower.into())
                            }
                            (Ok(topic), _) => {
                                let checked = compressed[ti][pi].take();
                                let target = Target {
                                    topic,
                                    index: p.index,
                                    producer_ids: &work.producers.ids,
                                    transactions: Some(&**work.transactions()),
                                    transactional_id: transactional_id.as_deref(),
                                };
                                append(&target, p.records, checked, &rules[ti], acks)
                            }
                        };
                        match result {
                            Ok((partition, info, deferred)) => {
                                if info.producers_evicted > 0 {
                                    work.metrics.producer_ids_evicted(info.producers_evicted);
                                }
                                r.base_offset = info.base_offset;
                                r.log_start_offset = info.log_start_offset;
                                if deferred {
                                    waits.push((ti, ri, partition, info.last_offset + 1));
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
    // The flushes run in a task of their own: when the client disconnects, the
    // connection drops (aborts) this wait, and a flush holding the partition's flush
    // gate must still run to its end.
    let waited: Vec<(usize, usize)> = waits.iter().map(|(ti, ri, _, _)| (*ti, *ri)).collect();
    let flushes = tokio::spawn(async move {
        let mut failed = Vec::new();
        for (ti, ri, partition, end) in waits {
            if let Err(e) = partition.wait_durable(end).await {
                crate::warn_limited!(
                    "produce.flush_failed",
                    partition = partition.index,
                    "flush failed, produce not acknowledged: {e}"
                );
                failed.push((ti, ri, Refusal::from(&e)));
            }
        }
        failed
    });
    Handled::Deferred(Box::pin(async move {
        let mut responses = responses;
        // A flush task that panicked made nothing durable: none of its partitions is
        // acknowledged.
        let failed = flushes.await.unwrap_or_else(|_| {
            waited
                .into_iter()
                .map(|(ti, ri)| (ti, ri, Refusal::from(ResponseError::KafkaStorageError)))
                .collect()
        });
        for (ti, ri, refusal) in failed {
            let r = &mut responses[ti].partition_responses[ri];
            r.base_offset = -1;
            set_error(r, refusal);
        }
        reply(responses)
    }))
}

/// The refusal of each topic entry of `request` by authorization, if any (module
/// docs). A refused entry's batches are dropped here, so nothing of them is validated.
fn authorize(
    broker: &Broker,
    authz: &RequestAuthz,
    version: i16,
    request: &mut ProduceRequest,
) -> Vec<Option<ResponseError>> {
    let n = request.topic_data.len();
    if !authz.is_enabled() {
        return vec![None; n];
    }
    let refuse = |request: &mut ProduceRequest, e: ResponseError, which: &[bool]| {
        for (data, refused) in request.topic_data.iter_mut().zip(which) {
            if *refused {
                for p in &mut data.partition_data {
                    p.records = None;
                }
            }
        }
        which.iter().map(|r| r.then_some(e)).collect::<Vec<_>>()
    };
    if let Some(id) = &request.transactional_id {
        if !authz.allows(
            ResourceType::TransactionalId,
            id.0.as_str(),
            AclOperation::Write,
        ) {
            return refuse(
                request,
                ResponseError::TransactionalIdAuthorizationFailed,
                &vec![true; n],
            );
        }
    }
    // By id (v13): the name of the topic the id names; an unknown id stays unknown.
    let names: Vec<Option<String>> = request
        .topic_data
        .iter()
        .map(|d| {
            if version >= 13 {
                broker.topics.get_by_id(d.topic_id).map(|t| t.name.clone())
            } else {
                Some(d.name.0.to_string())
            }
        })
        .collect();
    let writable = authz.allowed_names(
        ResourceType::Topic,
        AclOperation::Write,
        names.iter().flatten().map(String::as_str),
    );
    let which: Vec<bool> = names
        .iter()
        .map(|n| n.as_ref().is_some_and(|n| !writable.contains(n)))
        .collect();
    refuse(request, ResponseError::TopicAuthorizationFailed, &which)
}

/// Whether the principal may create topic `name` (Create on the cluster or the topic).
fn may_create(authz: &RequestAuthz, name: &str) -> bool {
    authz.allows_quietly(
        ResourceType::Cluster,
        crate::authz::CLUSTER_RESOURCE_NAME,
        AclOperation::Create,
    ) || authz.allows(ResourceType::Topic, name, AclOperation::Create)
}

/// The entries of `request`, as (topic entry, partition entry) indexes, that name a
/// partition some later entry names again: as Kafka's `KafkaApis.handleProduceRequest`,
/// which collects the request into a map by topic-partition, the last entry of a
/// partition is the one appended and answered, and earlier ones are dropped without
/// an answer. Topics are compared by name (v3–v12) or id (v13).
fn superseded_entries(version: i16, request: &ProduceRequest) -> HashSet<(usize, usize)> {
    let mut last: HashMap<(String, i32), (usize, usize)> = HashMap::new();
    let mut superseded = HashSet::new();
    for (ti, data) in request.topic_data.iter().enumerate() {
        let topic = if version >= 13 {
            data.topic_id.to_string()
        } else {
            data.name.0.to_string()
        };
        for (pi, p) in data.partition_data.iter().enumerate() {
            if let Some(earlier) = last.insert((topic.clone(), p.index), (ti, pi)) {
                superseded.insert(earlier);
            }
        }
    }
    superseded
}

fn set_error(r: &mut PartitionProduceResponse, refusal: Refusal) {
    r.error_code = refusal.error.code();
    if let Some(index) = refusal.record {
        let mut e = BatchIndexAndErrorMessage::default();
        e.batch_index = i32::try_from(index).unwrap_or(i32::MAX);
        e.batch_index_error_message = Some(StrBytes::from_string(refusal.message.clone()));
        r.record_errors.push(e);
    }
    r.error_message = Some(StrBytes::from_string(refusal.message));
}

/// The validation rules of each topic entry of `request` (indexed like
/// `request.topic_data`) at `now_ms`: the topic's effective config, i.e. the broker's
/// `[log]` settings with the topic's overrides applied, so per-topic
/// `max.message.bytes` and `message.timestamp.before/after.max.ms` decide, as in
/// Kafka's `LogValidator` (it validates against the partition log's own `LogConfig`).
/// A topic not known yet (about to be auto-created) has no overrides: the broker's
/// settings. Each distinct topic's config is built once per request, not per
/// partition (one read of its overrides and one [`crate::log::LogConfig`] clone).
fn topic_rules(
    broker: &Broker,
    version: i16,
    request: &ProduceRequest,
    now_ms: i64,
) -> Vec<ValidationRules> {
    let mut by_name: std::collections::HashMap<String, ValidationRules> =
        std::collections::HashMap::new();
    request
        .topic_data
        .iter()
        .map(|data| {
            let name = if version >= 13 {
                broker
                    .topics
                    .get_by_id(data.topic_id)
                    .map(|t| t.name.clone())
            } else {
                Some(data.name.0.to_string())
            };
            let Some(name) = name else {
                // An unknown topic id: refused later, the broker's rules will do.
                return ValidationRules::new(broker.topics.base_log_config(), now_ms);
            };
            *by_name.entry(name).or_insert_with_key(|name| {
                ValidationRules::new(&broker.topics.topic_log_config(name), now_ms)
            })
        })
        .collect()
}

/// Validates, ahead of the appends, every partition's data that starts with a batch
/// whose codec bits (byte 22, bits 0-2) are set, each under its own
/// [`DECOMPRESSIONS`] permit (first come, first served) and off the runtime's worker:
/// a request of many large compressed batches then delays another producer's batch by
/// about one batch's decompression, not by the whole request. Indexed like the
/// request's topics and partitions; `None` where the data is not compressed.
async fn validate_compressed(
    request: &ProduceRequest,
    rules: &[ValidationRules],
) -> Vec<Vec<Option<Result<ValidatedBatch, BatchError>>>> {
    let mut out = Vec::with_capacity(request.topic_data.len());
    for (topic, rules) in request.topic_data.iter().zip(rules) {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for p in &topic.partition_data {
            let records = p
                .records
                .as_ref()
                .filter(|r| r.get(22).is_some_and(|attributes| attributes & 0b111 != 0));
            partitions.push(match records {
                Some(records) => {
                    let _permit = DECOMPRESSIONS.acquire().await.ok();
                    Some(off_the_runtime(|| {
                        validate_produced(records.clone(), rules)
                    }))
                }
                None => None,
            });
        }
        out.push(partitions);
    }
    out
}

/// The topic `name`, auto-created if it is unknown, auto-creation is enabled and the
/// broker-wide rate (`topics.auto_create_per_sec`) and partition limit allow it;
/// otherwise `UNKNOWN_TOPIC_OR_PARTITION` (retriable), as Kafka answers a topic it does
/// not create.
/// The topic `name`, auto-created (when enabled) within this request's `budget`:
/// `topics.auto_create_max_per_request` per request and `topics.auto_create_per_sec`
/// broker-wide, beyond which the name is answered UNKNOWN_TOPIC_OR_PARTITION.
fn find_or_create(
    broker: &Broker,
    name: &str,
    budget: &mut AutoCreateBudget<'_>,
) -> Result<Arc<Topic>, ResponseError> {
    if let Some(topic) = broker.topics.get(name) {
        return Ok(topic);
    }
    if validate_name(name).is_err() {
        return Err(ResponseError::InvalidTopicException);
    }
    let config = &broker.config.topics;
    if !broker.auto_create() || crate::broker::topics::is_internal(name) {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    if !budget.try_take() {
        crate::info_limited!(
            "produce.auto_create_limited",
            "auto-creation bound reached (topics.auto_create_max_per_request or \
             auto_create_per_sec): `{name}` answered UNKNOWN_TOPIC_OR_PARTITION"
        );
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
        Err(e) => broker.topics.get(name).ok_or_else(|| {
            crate::warn_limited!(
                "produce.auto_create_failed",
                "auto-creating topic `{name}`: {e}"
            );
            match e {
                crate::broker::TopicError::PartitionLimit { .. } => {
                    ResponseError::UnknownTopicOrPartition
                }
                _ => ResponseError::KafkaStorageError,
            }
        }),
    }
}

/// Where a partition's batch goes: the partition, the transaction coordinator that
/// verifies transactional batches, and the request's transactional id (which names,
/// in cluster mode, the transaction to check at its coordinator's record).
struct Target<'a> {
    topic: &'a Topic,
    index: i32,
    producer_ids: &'a crate::broker::producer_ids::ProducerIds,
    transactions: Option<&'a crate::txn::TxnCoordinator>,
    transactional_id: Option<&'a str>,
}

/// KIP-890 part 1: a transactional batch is appended only if its partition was added
/// to the producer's open transaction (AddPartitionsToTxn), as Kafka 4.x verifies
/// before appending. An older epoch than the transaction's is
/// `INVALID_PRODUCER_EPOCH`; a partition not added, no open transaction, or a producer
/// id no transactional id has is `INVALID_TXN_STATE` (Kafka's answer to clients of
/// transaction version 1). In cluster mode a transaction coordinated by another broker
/// is checked against its record in ZooKeeper ([`crate::txn::remote_verify`]; a batch
/// without a transactional id in its request is `INVALID_TXN_STATE`, ZooKeeper
/// unavailable `NOT_ENOUGH_REPLICAS`, retriable, as Kafka answers a verification that
/// could not reach the coordinator).
fn verify_in_transaction(
    target: &Target<'_>,
    header: &crate::log::batch::BatchHeader,
) -> Result<(), Refusal> {
    use crate::txn::{ProducerIdEpoch, TopicPartition, TxnError};
    let refused = |error, message: String| Refusal {
        error,
        message,
        record: None,
    };
    let Some(txn) = target.transactions else {
        return Err(refused(
            ResponseError::InvalidTxnState,
            "transactional batch refused: no transaction coordinator runs in cluster mode".into(),
        ));
    };
    let producer = ProducerIdEpoch {
        id: header.producer_id,
        epoch: header.producer_epoch,
    };
    let partition = TopicPartition {
        topic: target.topic.name.clone(),
        partition: target.index,
    };
    let verified = match txn.zk_store() {
        None => txn.verify_partition(producer, &partition),
        Some(_) => match target
            .transactional_id
            .and_then(crate::txn::TransactionalId::new)
        {
            None => Err(TxnError::InvalidState),
            // Coordinated here: the coordinator's state; elsewhere (or this broker's
            // slot still loading): the record in ZooKeeper.
            // Off the runtime both ways: the coordinator's lock is held across its
            // ZooKeeper writes, whose I/O the runtime's workers drive, so a worker
            // blocked on the lock could stall the write it waits for.
            Some(id) => {
                off_the_runtime(
                    || match txn.verify_partition_of(&id, producer, &partition) {
                        Err(TxnError::NotCoordinator | TxnError::LoadInProgress) => {
                            crate::txn::remote_verify::verify(txn, &id, producer, &partition)
                        }
                        local => local,
                    },
                )
            }
        },
    };
    verified.map_err(|e| match e {
        TxnError::Storage => refused(
            ResponseError::NotEnoughReplicas,
            format!(
                "transactional batch of producer {}: its transaction could not be read \
                     from ZooKeeper; retry",
                producer.id
            ),
        ),
        TxnError::Fenced => refused(
            ResponseError::InvalidProducerEpoch,
            format!(
                "transactional batch of producer {} refused: epoch {} is fenced",
                producer.id, producer.epoch
            ),
        ),
        _ => refused(
            ResponseError::InvalidTxnState,
            format!(
                "transactional batch of producer {} refused: the partition is not in its open \
                 transaction (AddPartitionsToTxn, KIP-890)",
                producer.id
            ),
        ),
    })
}

/// A batch with a producer id that no InitProducerId handed out is refused
/// `UNKNOWN_PRODUCER_ID` before it reaches the partition's producer state
/// ([`crate::broker::producer_ids`]): a client that makes ids up cannot fill the table
/// and push honest producers out. In cluster mode an id above the broker's last reading
/// of ZooKeeper that cannot be read again now is `NOT_ENOUGH_REPLICAS` (retriable).
/// Transactional batches are checked by their transaction instead.
fn check_issued(
    target: &Target<'_>,
    header: &crate::log::batch::BatchHeader,
) -> Result<(), Refusal> {
    use crate::broker::producer_ids::Issued;
    let id = header.producer_id;
    if id < 0 || target.producer_ids.known_issued(id) {
        return Ok(());
    }
    let (error, message) = match off_the_runtime(|| target.producer_ids.issued(id)) {
        Issued::Yes => return Ok(()),
        Issued::No => (
            ResponseError::UnknownProducerId,
            format!("producer id {id} was never handed out by InitProducerId"),
        ),
        Issued::Unsure => (
            ResponseError::NotEnoughReplicas,
            format!("producer id {id} could not be checked against ZooKeeper now; retry"),
        ),
    };
    crate::info_limited!(
        "produce.unknown_producer_id",
        topic = %target.topic.name,
        partition = target.index,
        "produce refused: {message}"
    );
    Err(Refusal {
        error,
        message,
        record: None,
    })
}

/// Validates `records` under `rules` (unless `checked` holds the outcome already) and
/// appends them to partition `index` of `topic`.
/// The returned flag (deferred) is set when the acknowledgement must wait for an
/// fsync: `acks` ≠ 0 and the partition's own `flush_messages` (the topic's
/// `flush.messages`, else the broker's `[log] flush_messages`) is 1, read under the
/// partition's lock so an alter that just landed decides. The caller then makes the
/// append durable with [`Partition::wait_durable`] before acknowledging it; otherwise
/// a flush due under the partition's `flush_messages` starts in the background.
fn append(
    target: &Target<'_>,
    records: Option<bytes::Bytes>,
    checked: Option<Result<ValidatedBatch, BatchError>>,
    rules: &ValidationRules,
    acks: i16,
) -> Result<(Arc<Partition>, AppendInfo, bool), Refusal> {
    let (topic, index) = (target.topic, target.index);
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let records = records.ok_or_else(|| Refusal {
        error: ResponseError::InvalidRecord,
        message: BatchError::NoBatches.to_string(),
        record: None,
    })?;
    let checked = checked.unwrap_or_else(|| validate_produced(records, rules));
    let batch = checked.map_err(|e| {
        let e = LogError::InvalidBatch(e);
        crate::info_limited!(
            "produce.refused",
            topic = %topic.name,
            partition = index,
            "produce refused: {e}"
        );
        Refusal::from(&e)
    })?;
    if batch.header().is_transactional() {
        verify_in_transaction(target, batch.header())?;
    } else {
        check_issued(target, batch.header())?;
    }
    let mut log = partition.lock_log();
    let now = rules.now_ms;
    let size = batch.bytes().len() as u64;
    let result = if log.roll_due(size, now) {
        off_the_runtime(|| log.append_validated(&batch, now))
    } else {
        log.append_validated(&batch, now)
    };
    match result {
        Ok(info) => {
            let deferred = acks != 0 && log.config().flush_messages == 1;
            let flush = !deferred && log.flush_due();
            drop(log);
            partition
                .produce_rate
                .record(now, size, info.last_offset - info.base_offset + 1);
            if flush {
                partition.flush_in_background();
            }
            partition.notify_appended();
            Ok((Arc::clone(partition), info, deferred))
        }
        Err(e) => {
            match &e {
                // The client's data was refused: its problem, not the broker's.
                LogError::InvalidBatch(_)
                | LogError::BatchTooLarge { .. }
                | LogError::TooManyOffsets { .. }
                | LogError::Producer(_) => {
                    tracing::debug!(topic = %topic.name, partition = index, "produce refused: {e}")
                }
                _ => crate::warn_limited!(
                    "produce.append_failed",
                    topic = %topic.name,
                    partition = index,
                    "append failed: {e}"
                ),
            }
            Err(Refusal::from(&e))
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
