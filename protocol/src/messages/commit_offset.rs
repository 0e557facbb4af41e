//! CommitOffset (20004, consumer → coordinator).

use bytes::{BufMut, Bytes, BytesMut};

use super::common::{read_topic_offsets, write_topic_offsets, TopicOffsets, TOPIC_ENTRY_MIN};
use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::{MAX_PARTITIONS_PER_TOPIC, MAX_TOPICS_PER_REQUEST};
use crate::primitives::{
    atomic, read_array, read_i16, read_i32, read_string, write_array, write_string,
};

/// CommitOffset request v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitOffsetRequest {
    /// The group.
    pub group_id: String,
    /// The committing consumer; empty (with generation −1) for a commit by a client
    /// outside the group, accepted only while the group has no consumers.
    pub consumer_id: String,
    /// The consumer's current generation; −1 with an empty consumer id.
    pub generation: i32,
    /// The offsets to commit.
    pub topics: Vec<TopicOffsets>,
}

impl CommitOffsetRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "CommitOffsetRequest.group_id")?;
            write_string(buf, &self.consumer_id, "CommitOffsetRequest.consumer_id")?;
            buf.put_i32(self.generation);
            write_topic_offsets(buf, &self.topics, "CommitOffsetRequest.topics")
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(CommitOffsetRequest {
            group_id: read_string(buf, "CommitOffsetRequest.group_id")?,
            consumer_id: read_string(buf, "CommitOffsetRequest.consumer_id")?,
            generation: read_i32(buf, "CommitOffsetRequest.generation")?,
            topics: read_topic_offsets(buf, "CommitOffsetRequest.topics")?,
        })
    }
}

/// The outcome for one partition: `partition INT32, error_code INT16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionError {
    /// Partition index.
    pub partition: i32,
    /// NONE when the offset is durably committed.
    pub error_code: ErrorCode,
}

/// Outcomes for the partitions of one topic:
/// `topic STRING, partitions ARRAY{PartitionError}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicErrors {
    /// Topic name.
    pub topic: String,
    /// One entry per partition of the request.
    pub partitions: Vec<PartitionError>,
}

/// CommitOffset response v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitOffsetResponse {
    /// One entry per topic of the request, in the request's order.
    pub topics: Vec<TopicErrors>,
}

impl CommitOffsetResponse {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_array(
                buf,
                &self.topics,
                "CommitOffsetResponse.topics",
                MAX_TOPICS_PER_REQUEST,
                |buf, t| {
                    write_string(buf, &t.topic, "TopicErrors.topic")?;
                    write_array(
                        buf,
                        &t.partitions,
                        "TopicErrors.partitions",
                        MAX_PARTITIONS_PER_TOPIC,
                        |buf, p| {
                            buf.put_i32(p.partition);
                            buf.put_i16(p.error_code.0);
                            Ok(())
                        },
                    )
                },
            )
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(CommitOffsetResponse {
            topics: read_array(
                buf,
                "CommitOffsetResponse.topics",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                |buf| {
                    Ok(TopicErrors {
                        topic: read_string(buf, "TopicErrors.topic")?,
                        partitions: read_array(
                            buf,
                            "TopicErrors.partitions",
                            MAX_PARTITIONS_PER_TOPIC,
                            4 + 2,
                            |buf| {
                                Ok(PartitionError {
                                    partition: read_i32(buf, "PartitionError.partition")?,
                                    error_code: ErrorCode(read_i16(
                                        buf,
                                        "PartitionError.error_code",
                                    )?),
                                })
                            },
                        )?,
                    })
                },
            )?,
        })
    }
}
