//! FetchOffsets (20005, consumer → coordinator).

use bytes::{BufMut, Bytes, BytesMut};

use super::common::{TopicPartitions, TOPIC_ENTRY_MIN};
use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::{MAX_PARTITIONS_PER_TOPIC, MAX_TOPICS_PER_REQUEST};
use crate::primitives::{
    atomic, read_array, read_i16, read_i32, read_i64, read_nullable_array, read_nullable_string,
    read_string, write_array, write_nullable_array, write_nullable_string, write_string,
};

/// FetchOffsets request v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FetchOffsetsRequest {
    /// The group.
    pub group_id: String,
    /// The partitions to read; `None` (null) for every committed partition of the group.
    pub topics: Option<Vec<TopicPartitions>>,
}

impl FetchOffsetsRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "FetchOffsetsRequest.group_id")?;
            write_nullable_array(
                buf,
                self.topics.as_deref(),
                "FetchOffsetsRequest.topics",
                MAX_TOPICS_PER_REQUEST,
                |buf, t| t.encode(buf),
            )
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(FetchOffsetsRequest {
            group_id: read_string(buf, "FetchOffsetsRequest.group_id")?,
            topics: read_nullable_array(
                buf,
                "FetchOffsetsRequest.topics",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                TopicPartitions::decode,
            )?,
        })
    }
}

/// The committed offset of one partition:
/// `partition INT32, offset INT64, metadata NULLABLE_STRING, error_code INT16`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FetchedOffset {
    /// Partition index.
    pub partition: i32,
    /// The committed offset, or −1 when nothing is committed.
    pub offset: i64,
    /// The metadata committed with it.
    pub metadata: Option<String>,
    /// NONE, or why this partition could not be read.
    pub error_code: ErrorCode,
}

impl FetchedOffset {
    /// The `offset` value meaning "nothing committed".
    pub const NO_OFFSET: i64 = -1;
}

/// Committed offsets of one topic: `topic STRING, partitions ARRAY{FetchedOffset}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicFetchedOffsets {
    /// Topic name.
    pub topic: String,
    /// Its partitions.
    pub partitions: Vec<FetchedOffset>,
}

/// FetchOffsets response v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FetchOffsetsResponse {
    /// NONE, or an error for the whole request (`topics` is then empty).
    pub error_code: ErrorCode,
    /// The offsets.
    pub topics: Vec<TopicFetchedOffsets>,
}

impl FetchOffsetsResponse {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            buf.put_i16(self.error_code.0);
            write_array(
                buf,
                &self.topics,
                "FetchOffsetsResponse.topics",
                MAX_TOPICS_PER_REQUEST,
                |buf, t| {
                    write_string(buf, &t.topic, "TopicFetchedOffsets.topic")?;
                    write_array(
                        buf,
                        &t.partitions,
                        "TopicFetchedOffsets.partitions",
                        MAX_PARTITIONS_PER_TOPIC,
                        |buf, p| {
                            buf.put_i32(p.partition);
                            buf.put_i64(p.offset);
                            write_nullable_string(
                                buf,
                                p.metadata.as_deref(),
                                "FetchedOffset.metadata",
                            )?;
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
        Ok(FetchOffsetsResponse {
            error_code: ErrorCode(read_i16(buf, "FetchOffsetsResponse.error_code")?),
            topics: read_array(
                buf,
                "FetchOffsetsResponse.topics",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                |buf| {
                    Ok(TopicFetchedOffsets {
                        topic: read_string(buf, "TopicFetchedOffsets.topic")?,
                        partitions: read_array(
                            buf,
                            "TopicFetchedOffsets.partitions",
                            MAX_PARTITIONS_PER_TOPIC,
                            4 + 8 + 2 + 2,
                            |buf| {
                                Ok(FetchedOffset {
                                    partition: read_i32(buf, "FetchedOffset.partition")?,
                                    offset: read_i64(buf, "FetchedOffset.offset")?,
                                    metadata: read_nullable_string(buf, "FetchedOffset.metadata")?,
                                    error_code: ErrorCode(read_i16(
                                        buf,
                                        "FetchedOffset.error_code",
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
