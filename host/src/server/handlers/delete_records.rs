//! DeleteRecords (API 21, v0–v2): moves each partition's log start offset up to the
//! requested offset and deletes the whole segments below it
//! ([`crate::log::PartitionLog::delete_records`]), as Kafka's
//! `ReplicaManager.deleteRecords`. Offset −1 means the high watermark; any other
//! negative offset, or one above the high watermark, is `OFFSET_OUT_OF_RANGE`. The
//! answer's `low_watermark` is the log start offset afterwards (unchanged when the
//! request asked for less). An unknown topic or partition is
//! `UNKNOWN_TOPIC_OR_PARTITION`; in cluster mode a partition this broker does not lead
//! is `NOT_LEADER_OR_FOLLOWER`; an offline log `KAFKA_STORAGE_ERROR`. The new start is
//! durable before the answer (it survives a restart and `kill -9`); `timeout_ms` is not
//! needed, as there are no followers to wait for.
//!
//! Bound: at most [`MAX_PARTITIONS`] partitions per request; beyond it every partition
//! is answered `INVALID_REQUEST` without touching a log.

use kafka_protocol::{
    error::ResponseError,
    messages::{
        delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult},
        DeleteRecordsRequest, DeleteRecordsResponse,
    },
};

use super::errors::first_error;
use crate::{broker::Partitions, server::reply::Reply};

/// The most partitions one DeleteRecords request may name.
pub const MAX_PARTITIONS: usize = 10_000;

/// DeleteRecords offset −1: the high watermark.
const HIGH_WATERMARK: i64 = -1;

/// Handles DeleteRecords v0–v2 (on the blocking pool: it fsyncs and deletes files).
///
/// Authorization (Kafka's `KafkaApis.handleDeleteRecordsRequest`): Delete on each
/// topic, else its partitions TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    partitions: Partitions<'_>,
    authz: &crate::authz::RequestAuthz,
    _version: i16,
    request: DeleteRecordsRequest,
) -> Reply {
    let deletable = authz.allowed_names(
        crate::authz::ResourceType::Topic,
        crate::authz::AclOperation::Delete,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let total: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    let too_many = total > MAX_PARTITIONS;
    if too_many {
        crate::info_limited!(
            "delete_records.too_many",
            partitions = total,
            "DeleteRecords refused: more than {MAX_PARTITIONS} partitions"
        );
    }
    let topics: Vec<DeleteRecordsTopicResult> = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = partitions.topics.get(t.name.0.as_str());
            let mut out = DeleteRecordsTopicResult::default();
            out.partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut r = DeleteRecordsPartitionResult::default();
                    r.partition_index = p.partition_index;
                    r.low_watermark = -1;
                    let result = if too_many {
                        Err(ResponseError::InvalidRequest)
                    } else if !deletable.contains(t.name.0.as_str()) {
                        Err(ResponseError::TopicAuthorizationFailed)
                    } else {
                        delete(
                            partitions,
                            topic.as_deref(),
                            &t.name.0,
                            p.partition_index,
                            p.offset,
                        )
                    };
                    match result {
                        Ok(low) => r.low_watermark = low,
                        Err(e) => r.error_code = e.code(),
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
    let mut response = DeleteRecordsResponse::default();
    response.topics = topics;
    Reply::new(response, error)
}

/// Deletes the records of one partition below `offset`; returns the new low watermark.
fn delete(
    partitions: Partitions<'_>,
    topic: Option<&crate::broker::Topic>,
    name: &str,
    index: i32,
    offset: i64,
) -> Result<i64, ResponseError> {
    let partition = topic
        .and_then(|t| {
            usize::try_from(index)
                .ok()
                .and_then(|i| t.partitions.get(i))
        })
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if !partitions.serves(name, index) {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    let mut log = partition.lock_log();
    if log.is_offline() {
        return Err(ResponseError::KafkaStorageError);
    }
    let target = if offset == HIGH_WATERMARK {
        log.log_end_offset()
    } else {
        offset
    };
    log.delete_records(target).map_err(|e| {
        if !matches!(e, crate::log::LogError::OffsetOutOfRange { .. }) {
            crate::warn_limited!(
                "delete_records.failed",
                topic = name,
                partition = index,
                "DeleteRecords failed: {e}"
            );
        }
        super::errors::log_error(&e)
    })
}
