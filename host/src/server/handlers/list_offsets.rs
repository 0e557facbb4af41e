//! ListOffsets: log start, log end, or the first offset at or after a timestamp
//! (Kafka protocol guide, ListOffsets). Special timestamps: −1 latest (log end), −2
//! earliest (log start), −3 the batch with the largest timestamp (v7+), −4 earliest
//! local (v8+; equals earliest here: there is no tiered storage), −5 latest tiered
//! (v9+; −1, nothing is tiered).

use kafka_protocol::{
    error::ResponseError,
    messages::{
        list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
        ListOffsetsRequest, ListOffsetsResponse,
    },
};

use super::errors::first_error;
use crate::{
    broker::Partitions,
    log::{
        records::{first_record_at_or_after, RecordSearch},
        PartitionLog, TimestampOffset,
    },
    server::reply::Reply,
};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Handles ListOffsets v1–v10. Blocking (it reads the logs' time indexes): runs on the
/// blocking pool.
///
/// Authorization (Kafka's `KafkaApis.handleListOffsetRequest`): Describe on each topic,
/// else its partitions are answered TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    partitions: Partitions<'_>,
    authz: &crate::authz::RequestAuthz,
    version: i16,
    request: ListOffsetsRequest,
) -> Reply {
    let describable = authz.allowed_names(
        crate::authz::ResourceType::Topic,
        crate::authz::AclOperation::Describe,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    // Kafka's `ReplicaManager.fetchOffsetForTimestamp`: read_committed (isolation
    // level 1) sees the log up to its last stable offset.
    let committed = request.isolation_level == 1;
    let topics = {
        request
            .topics
            .into_iter()
            .map(|t| {
                let allowed = describable.contains(t.name.0.as_str());
                let topic = allowed
                    .then(|| partitions.topics.get(t.name.0.as_str()))
                    .flatten();
                let name = t.name.0.to_string();
                let mut out = ListOffsetsTopicResponse::default();
                out.name = t.name;
                out.partitions = t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let mut r = ListOffsetsPartitionResponse::default();
                        r.partition_index = p.partition_index;
                        r.timestamp = -1;
                        r.offset = -1;
                        r.leader_epoch = -1;
                        let partition = topic.as_ref().and_then(|topic| {
                            usize::try_from(p.partition_index)
                                .ok()
                                .and_then(|i| topic.partitions.get(i))
                        });
                        if !allowed {
                            r.error_code = ResponseError::TopicAuthorizationFailed.code();
                            return r;
                        }
                        let Some(partition) = partition else {
                            r.error_code = ResponseError::UnknownTopicOrPartition.code();
                            return r;
                        };
                        if !partitions.serves(&name, p.partition_index) {
                            r.error_code = ResponseError::NotLeaderOrFollower.code();
                            return r;
                        }
                        let log = partition.lock_log();
                        if version >= 4 {
                            r.leader_epoch = crate::log::LEADER_EPOCH;
                        }
                        let fetchable = if committed {
                            log.last_stable_offset()
                        } else {
                            log.log_end_offset()
                        };
                        match p.timestamp {
                            LATEST => r.offset = fetchable,
                            EARLIEST | EARLIEST_LOCAL => r.offset = log.log_start_offset(),
                            LATEST_TIERED => {}
                            MAX_TIMESTAMP => {
                                if let Some(found) = log.max_timestamp() {
                                    r.offset = found.offset;
                                    r.timestamp = found.timestamp;
                                }
                            }
                            ts if ts >= 0 => match record_for_timestamp(&log, ts) {
                                Ok(Some(found)) if found.offset < fetchable => {
                                    r.offset = found.offset;
                                    r.timestamp = found.timestamp;
                                }
                                Ok(_) => {}
                                Err(e) => r.error_code = super::errors::log_error(&e).code(),
                            },
                            _ => r.error_code = ResponseError::InvalidRequest.code(),
                        }
                        r
                    })
                    .collect();
                out
            })
            .collect::<Vec<_>>()
    };
    let error = first_error(
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
    );
    let mut response = ListOffsetsResponse::default();
    response.topics = topics;
    Reply::new(response, error)
}

/// ListOffsets by timestamp `ts` (ms), as Kafka answers it: the first record at or
/// above the log start offset whose timestamp is >= `ts` (`None`: offset −1). The time
/// index finds the batch ([`PartitionLog::offset_for_timestamp_from`]); the record
/// inside it is found by decoding it. Only the batch holding the log start can have
/// its matching records all deleted (below the start); the search then goes on after
/// it, so this takes at most two rounds in practice (each round starts past the last).
/// An undecodable batch is answered at batch granularity.
pub(crate) fn record_for_timestamp(
    log: &PartitionLog,
    ts: i64,
) -> Result<Option<TimestampOffset>, crate::log::LogError> {
    let mut from = log.log_start_offset();
    loop {
        let Some(batch) = log.offset_for_timestamp_from(ts, from)? else {
            return Ok(None);
        };
        let search = log
            .read(batch.offset, 1)
            .map(|read| first_record_at_or_after(read.records, ts, from));
        match search {
            Ok(RecordSearch::Found(found)) => return Ok(Some(found)),
            Ok(RecordSearch::NotInBatch { next_offset }) if next_offset > from => {
                from = next_offset;
            }
            _ => return Ok(Some(batch)),
        }
    }
}
