//! StopFetcher (20002, coordinator → consumer).

use bytes::{BufMut, Bytes, BytesMut};

use super::common::{
    read_topic_offsets, write_topic_offsets, TopicOffsets, TopicPartitions, TOPIC_ENTRY_MIN,
};
use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::MAX_TOPICS_PER_REQUEST;
use crate::primitives::{
    atomic, read_array, read_bool, read_i16, read_i32, read_string, write_array, write_bool,
    write_string,
};

/// StopFetcher request v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StopFetcherRequest {
    /// The consumer's group.
    pub group_id: String,
    /// The generation being ended (the consumer's current one).
    pub generation: i32,
    /// Eager mode: stop every partition (`partitions` is then empty).
    pub stop_all: bool,
    /// Incremental mode: stop only these.
    pub partitions: Vec<TopicPartitions>,
}

impl StopFetcherRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "StopFetcherRequest.group_id")?;
            buf.put_i32(self.generation);
            write_bool(buf, self.stop_all);
            write_array(
                buf,
                &self.partitions,
                "StopFetcherRequest.partitions",
                MAX_TOPICS_PER_REQUEST,
                |buf, t| t.encode(buf),
            )
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(StopFetcherRequest {
            group_id: read_string(buf, "StopFetcherRequest.group_id")?,
            generation: read_i32(buf, "StopFetcherRequest.generation")?,
            stop_all: read_bool(buf, "StopFetcherRequest.stop_all")?,
            partitions: read_array(
                buf,
                "StopFetcherRequest.partitions",
                MAX_TOPICS_PER_REQUEST,
                TOPIC_ENTRY_MIN,
                TopicPartitions::decode,
            )?,
        })
    }
}

/// StopFetcher response v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StopFetcherResponse {
    /// NONE once fetching and delivery of the partitions stopped.
    pub error_code: ErrorCode,
    /// Final consumed offsets of the stopped partitions.
    pub offsets: Vec<TopicOffsets>,
}

impl StopFetcherResponse {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            buf.put_i16(self.error_code.0);
            write_topic_offsets(buf, &self.offsets, "StopFetcherResponse.offsets")
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(StopFetcherResponse {
            error_code: ErrorCode(read_i16(buf, "StopFetcherResponse.error_code")?),
            offsets: read_topic_offsets(buf, "StopFetcherResponse.offsets")?,
        })
    }
}
