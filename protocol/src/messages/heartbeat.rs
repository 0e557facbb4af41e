//! Heartbeat (20001, coordinator → consumer): the coordinator's "ping".

use bytes::{BufMut, Bytes, BytesMut};

use super::common::{read_topic_offsets, write_topic_offsets, TopicOffsets};
use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::primitives::{
    atomic, read_bool, read_i16, read_i32, read_string, write_bool, write_string,
};

/// Heartbeat request v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeartbeatRequest {
    /// The consumer's group.
    pub group_id: String,
    /// The generation the coordinator believes the consumer is in.
    pub generation: i32,
}

impl HeartbeatRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "HeartbeatRequest.group_id")?;
            buf.put_i32(self.generation);
            Ok(())
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(HeartbeatRequest {
            group_id: read_string(buf, "HeartbeatRequest.group_id")?,
            generation: read_i32(buf, "HeartbeatRequest.generation")?,
        })
    }
}

/// Heartbeat response v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeartbeatResponse {
    /// NONE, or why the consumer refuses the request (it then leaves the channel).
    pub error_code: ErrorCode,
    /// False when a fetcher died; the consumer has then stopped all fetching and
    /// delivery and leaves the channel.
    pub fetchers_healthy: bool,
    /// Consumed offsets of owned partitions, which the coordinator commits.
    pub offsets: Vec<TopicOffsets>,
}

impl HeartbeatResponse {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            buf.put_i16(self.error_code.0);
            write_bool(buf, self.fetchers_healthy);
            write_topic_offsets(buf, &self.offsets, "HeartbeatResponse.offsets")
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(HeartbeatResponse {
            error_code: ErrorCode(read_i16(buf, "HeartbeatResponse.error_code")?),
            fetchers_healthy: read_bool(buf, "HeartbeatResponse.fetchers_healthy")?,
            offsets: read_topic_offsets(buf, "HeartbeatResponse.offsets")?,
        })
    }
}
