//! What ShareFetch and ShareAcknowledge share: checking the group and member ids,
//! finding a share-partition's log, and applying one partition's acknowledgements
//! durably (KIP-932; the state machine is `drover_share`, its place in memory
//! `crate::share::partitions`).

use std::sync::Arc;

use drover_share::{AckBatch, AckError, MemberId};
use kafka_protocol::error::ResponseError;

use crate::{
    broker::{Broker, Partition, Topic},
    clock::now_ms,
    share::{
        partitions::{LogBounds, ShareError},
        ShareDelivery, ShareKey,
    },
};

/// One partition's acknowledgement batches as the wire carries them: (first offset,
/// last offset, acknowledge types).
pub type WireAcks = Vec<(i64, i64, Vec<i8>)>;

/// The longest group or member id accepted, in bytes (Kafka's member ids are UUIDs; a
/// longer id is INVALID_REQUEST rather than memory held per session).
pub const MAX_ID_BYTES: usize = 255;

/// The group and member ids of a share request: both present, not empty, at most
/// [`MAX_ID_BYTES`]. Errors: INVALID_GROUP_ID for the group, INVALID_REQUEST for the
/// member (Kafka's `KafkaApis` answers an empty member id so).
pub fn ids(
    group: Option<&str>,
    member: Option<&str>,
) -> Result<(Arc<str>, MemberId), ResponseError> {
    let group = group
        .filter(|g| !g.is_empty() && g.len() <= MAX_ID_BYTES)
        .ok_or(ResponseError::InvalidGroupId)?;
    let member = member
        .filter(|m| !m.is_empty() && m.len() <= MAX_ID_BYTES)
        .ok_or(ResponseError::InvalidRequest)?;
    Ok((Arc::from(group), Arc::from(member)))
}

/// The partition log of `partition` of `topic`, if this broker serves it. Errors:
/// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
pub fn partition_log(
    broker: &Broker,
    topic: &Topic,
    partition: i32,
) -> Result<Arc<Partition>, ResponseError> {
    let log = usize::try_from(partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if !broker.serves(&topic.name, partition) {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    Ok(Arc::clone(log))
}

/// Where `log` is now, and ListOffsets by timestamp on it, for loading a share-partition.
pub fn bounds(log: &Partition) -> (LogBounds, impl FnOnce(i64) -> Option<i64> + '_) {
    let (start, end) = {
        let l = log.lock_log();
        (l.log_start_offset(), l.log_end_offset())
    };
    let offset_at = move |ms: i64| {
        log.lock_log()
            .offset_for_timestamp(ms)
            .ok()
            .flatten()
            .map(|t| t.offset)
    };
    (LogBounds { start, end }, offset_at)
}

/// The Kafka error for a share-partition that cannot be served now.
pub fn share_error(e: &ShareError) -> ResponseError {
    crate::warn_limited!(
        "share.partition_unavailable",
        "share-partition not served: {e}"
    );
    match e {
        ShareError::Full(_) => ResponseError::CoordinatorLoadInProgress,
        ShareError::Store(_) | ShareError::Damaged(..) => ResponseError::UnknownServerError,
    }
}

/// Applies `member`'s acknowledgements of one share-partition (the wire's batches:
/// first offset, last offset, types) and makes them durable; runs on the blocking
/// pool. Returns the partition's acknowledgement error (`Ok`, NONE, only once durable):
/// INVALID_REQUEST for malformed batches or offsets past the end offset,
/// INVALID_RECORD_STATE for offsets not acquired by `member`.
pub fn apply(
    delivery: &ShareDelivery,
    key: &ShareKey,
    topic_id: uuid::Uuid,
    log: &Partition,
    member: &MemberId,
    wire: &[(i64, i64, Vec<i8>)],
) -> Result<(), ResponseError> {
    let batches = match wire
        .iter()
        .map(|(first, last, types)| AckBatch::from_wire(*first, *last, types))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(b) => b,
        Err(e) => return Err(ack_error(&e)),
    };
    let slot = delivery.partitions.slot(key).map_err(|e| share_error(&e))?;
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    let now = now_ms();
    let (bounds, offset_at) = bounds(log);
    let partition = delivery
        .partitions
        .load(key, &mut slot, *topic_id.as_bytes(), bounds, now, offset_at)
        .map_err(|e| share_error(&e))?;
    let snapshot = partition
        .acknowledge(member, &batches)
        .map_err(|e| ack_error(&e))?;
    delivery
        .partitions
        .persist(key, &mut slot, &snapshot, now)
        .map_err(|e| share_error(&e))?;
    if batches
        .iter()
        .any(|b| b.types.contains(&drover_share::AckType::Release))
    {
        delivery.partitions.notify_available();
    }
    Ok(())
}

fn ack_error(e: &AckError) -> ResponseError {
    match e {
        AckError::InvalidRequest(_) => ResponseError::InvalidRequest,
        AckError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
    }
}
