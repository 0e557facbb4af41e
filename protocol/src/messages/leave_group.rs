//! LeaveGroup (20006, consumer → coordinator).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::primitives::{atomic, read_i16, read_string, write_string};

/// LeaveGroup request v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaveGroupRequest {
    /// The group.
    pub group_id: String,
    /// The leaving consumer.
    pub consumer_id: String,
}

impl LeaveGroupRequest {
    /// Appends the body (v0) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "LeaveGroupRequest.group_id")?;
            write_string(buf, &self.consumer_id, "LeaveGroupRequest.consumer_id")
        })
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(LeaveGroupRequest {
            group_id: read_string(buf, "LeaveGroupRequest.group_id")?,
            consumer_id: read_string(buf, "LeaveGroupRequest.consumer_id")?,
        })
    }
}

/// LeaveGroup response v0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaveGroupResponse {
    /// NONE when the consumer is no longer registered.
    pub error_code: ErrorCode,
}

impl LeaveGroupResponse {
    /// Appends the body (v0) to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        buf.put_i16(self.error_code.0);
        Ok(())
    }

    /// Reads a body (v0) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(LeaveGroupResponse {
            error_code: ErrorCode(read_i16(buf, "LeaveGroupResponse.error_code")?),
        })
    }
}
