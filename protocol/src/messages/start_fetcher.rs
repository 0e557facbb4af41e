//! StartFetcher (20003, coordinator → consumer).

use bytes::{BufMut, Bytes, BytesMut};

use super::common::TOPIC_ENTRY_MIN;
use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::{MAX_PARTITIONS_PER_TOPIC, MAX_TOPICS_PER_REQUEST};
use crate::primitives::{
    atomic, read_array, read_i16, read_i32, read_i64, read_string, write_array, write_string,
};

/// A partition of an assignment and where to start it:
/// `partition INT32, start_offset INT64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionStart {
    /// Partition index.
    pub partition: i32,
    /// The next offset to fetch, ≥ 0; or [`PartitionStart::KEEP_POSITION`] or
    /// [`PartitionStart::NO_COMMITTED_OFFSET`].
    pub start_offset: i64,
}

impl PartitionStart {
    /// −1: the consumer keeps fetching from its current position (a partition it
    /// keeps across an incremental rebalance).
    pub const KEEP_POSITION: i64 = -1;
    /// −2: nothing is committed; the consumer applies its `auto_offset_reset`.
    pub const NO_COMMITTED_OFFSET: i64 = -2;
}

/// The assigned partitions of one topic: `topic STRING, partitions ARRAY{PartitionStart}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicAssignment {
    /// Topic name.
    pub topic: String,
    /// The assigned partitions with their start offsets.
    pub partitions: Vec<PartitionStart>,
}

impl TopicAssignment {
    fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        write_string(buf, &self.topic, "TopicAssignment.topic")?;
        write_array(
            buf,
            &self.partitions,
            "TopicAssignment.partitions",
            MAX_PARTITIONS_PER_TOPIC,
            |buf, p| {
                buf.put_i32(p.partition);
                buf.put_i64(p.start_offset);
                Ok(())
            },
        )
    }

    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(TopicAssignment {
            topic: read_string(buf, "TopicAssignment.topic")?,
            partitions: read_array(
                buf,
                "TopicAssignment.partitions",
                MAX_PARTITIONS_PER_TOPIC,
                4 + 8,
                |buf| {
                    Ok(PartitionStart {
                        partition: read_i32(buf, "PartitionStart.partition")?,
                        start_offset: read_i64(buf, "PartitionStart.start_offset")?,
                    })
                },
            )?,
        })
    }
}

/// StartFetcher request v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StartFetcherRequest {
    /// The consumer's group.
    pub group_id: String,
    /// The new generation.
    pub generation: i32,
    /// The complete set of partitions the consumer owns in this generation.
    pub assignment: Vec<TopicAssignment>,
}

impl StartFetcherRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "StartFetcherRequest.group_id")?;
            buf.put_i32(self.generation);
            write_array(
                buf,
                &self.assignment,
                "StartFetcherRequest.assignment",
                MAX_TOPICS_PER_REQUEST,
                |buf, t| t.encode(buf),
            )
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(StartFetcherRequest {
            group_id: read_string(buf, "StartFetcherRequest.group_id")?,
            generation: read_i32(buf, "StartFetcherRequest.generation")?,
            assignment: read_array(
                buf,
                "StartFetcherRequest.assignment",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                TopicAssignment::decode,
            )?,
        })
    }
}

/// StartFetcher response v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StartFetcherResponse {
    /// NONE once the assignment is in place.
    pub error_code: ErrorCode,
}

impl StartFetcherResponse {
    /// Appends the body (v0) to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        buf.put_i16(self.error_code.0);
        Ok(())
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(StartFetcherResponse {
            error_code: ErrorCode(read_i16(buf, "StartFetcherResponse.error_code")?),
        })
    }
}
