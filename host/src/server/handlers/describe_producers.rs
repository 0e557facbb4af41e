//! DescribeProducers (API 61, v0; KIP-664): the active producers of each partition
//! named, from the partition log's producer state
//! ([`crate::log::producer_state::ProducerStates::active`]), as Kafka's `UnifiedLog.activeProducers`:
//! per producer its id, epoch, last sequence (−1 when none is remembered), last
//! timestamp, coordinator epoch and the first offset of its ongoing transaction (−1
//! outside one). `kafka-transactions.sh describe-producers` and `find-hanging` read it.
//!
//! Two values differ from Kafka's: the last timestamp is the broker's clock at the
//! producer's last append (Kafka reports its last batch's max timestamp), and the
//! coordinator epoch is always −1 (Kafka's value before a marker is written: Drover does
//! not keep the epoch of the last marker in the producer state).
//!
//! Errors, as Kafka's `KafkaApis.handleDescribeProducersRequest`: a topic name that
//! breaks the naming rules is `INVALID_TOPIC_EXCEPTION`, an unknown topic or partition
//! `UNKNOWN_TOPIC_OR_PARTITION`, for every partition named under it; in cluster mode a
//! partition another broker leads is `NOT_LEADER_OR_FOLLOWER` (clients ask the leader);
//! an offline log `KAFKA_STORAGE_ERROR`.
//!
//! Bound: at most [`MAX_PARTITIONS`] partitions per request; beyond it every partition
//! is answered `INVALID_REQUEST` without looking at a log.

use crate::authz::{AclOperation, RequestAuthz, ResourceType};
use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_producers_response::{PartitionResponse, ProducerState, TopicResponse},
        DescribeProducersRequest, DescribeProducersResponse, ProducerId,
    },
    protocol::StrBytes,
};

use super::errors::first_error;
use crate::{
    broker::{topics::validate_name, Partitions, Topic},
    server::reply::Reply,
};

/// The most partitions one DescribeProducers request may name (as DeleteRecords).
pub const MAX_PARTITIONS: usize = super::delete_records::MAX_PARTITIONS;

/// Handles DescribeProducers v0 (on the blocking pool: it locks partition logs).
pub fn handle(
    partitions: Partitions<'_>,
    authz: &RequestAuthz,
    request: DescribeProducersRequest,
) -> Reply {
    // Kafka: Read on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions.
    let readable = authz.allowed_names(
        ResourceType::Topic,
        AclOperation::Read,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let total: usize = request
        .topics
        .iter()
        .map(|t| t.partition_indexes.len())
        .sum();
    let too_many = total > MAX_PARTITIONS;
    if too_many {
        crate::info_limited!(
            "describe_producers.too_many",
            partitions = total,
            "DescribeProducers refused: more than {MAX_PARTITIONS} partitions"
        );
    }
    let now = crate::clock::now_ms();
    let topics: Vec<TopicResponse> = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let topic = if too_many {
                Err((ResponseError::InvalidRequest, None))
            } else if !readable.contains(name) {
                Err((ResponseError::TopicAuthorizationFailed, None))
            } else {
                find_topic(partitions, name)
            };
            let mut out = TopicResponse::default();
            out.partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let mut r = PartitionResponse::default();
                    r.partition_index = index;
                    let result = match &topic {
                        Ok(topic) => active_producers(partitions, topic, index, now),
                        Err((e, message)) => Err((*e, message.clone())),
                    };
                    match result {
                        Ok(producers) => r.active_producers = producers,
                        Err((e, message)) => {
                            r.error_code = e.code();
                            r.error_message = message.map(StrBytes::from_string);
                        }
                    }
                    r
                })
                .collect();
            out.name = t.name;
            out
        })
        .collect();
    let error = first_error(
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
    );
    let mut response = DescribeProducersResponse::default();
    response.topics = topics;
    Reply::new(response, error)
}

/// An error and its message, if it has one.
type Refusal = (ResponseError, Option<String>);

/// The topic `name`, or why none of its partitions can be described.
fn find_topic(partitions: Partitions<'_>, name: &str) -> Result<std::sync::Arc<Topic>, Refusal> {
    if let Err(e) = validate_name(name) {
        return Err((ResponseError::InvalidTopicException, Some(e.to_string())));
    }
    partitions
        .topics
        .get(name)
        .ok_or((ResponseError::UnknownTopicOrPartition, None))
}

/// The active producers of `topic`-`index` at `now_ms`.
fn active_producers(
    partitions: Partitions<'_>,
    topic: &Topic,
    index: i32,
    now_ms: i64,
) -> Result<Vec<ProducerState>, Refusal> {
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or((ResponseError::UnknownTopicOrPartition, None))?;
    if !partitions.serves(&topic.name, index) {
        return Err((ResponseError::NotLeaderOrFollower, None));
    }
    let log = partition.lock_log();
    if log.is_offline() {
        return Err((ResponseError::KafkaStorageError, None));
    }
    let mut producers: Vec<ProducerState> = log
        .producer_states()
        .active(now_ms)
        .map(|(id, entry)| {
            let mut p = ProducerState::default();
            p.producer_id = ProducerId(id);
            p.producer_epoch = i32::from(entry.epoch);
            p.last_sequence = entry.last_seq().unwrap_or(-1);
            p.last_timestamp = entry.last_write_ms;
            p.coordinator_epoch = -1;
            p.current_txn_start_offset = entry.txn_first_offset.unwrap_or(-1);
            p
        })
        .collect();
    drop(log);
    producers.sort_by_key(|p| p.producer_id.0);
    Ok(producers)
}
