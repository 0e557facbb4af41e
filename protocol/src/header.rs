//! Kafka's request header v1 and response header v0, as the native APIs use them.
//!
//! A frame is a 4-byte big-endian size followed by that many bytes: a header, then the
//! message body. See [`crate::frame`] for whole frames.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{read_i16, read_i32, read_nullable_string, write_nullable_string};

/// Request header v1: `api_key INT16, api_version INT16, correlation_id INT32,
/// client_id NULLABLE_STRING`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// The API key (native keys are 20000–20007).
    pub api_key: i16,
    /// The version of the request body (and of the expected response).
    pub api_version: i16,
    /// Chosen by the sender; echoed in the response.
    pub correlation_id: i32,
    /// Free-form client name, for logs and metrics.
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        10 + self.client_id.as_ref().map_or(0, String::len)
    }

    /// Appends the header to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        crate::primitives::atomic(buf, |buf| {
            buf.put_i16(self.api_key);
            buf.put_i16(self.api_version);
            buf.put_i32(self.correlation_id);
            write_nullable_string(buf, self.client_id.as_deref(), "RequestHeader.client_id")
        })
    }

    /// Reads the header from the start of a frame body.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(RequestHeader {
            api_key: read_i16(buf, "RequestHeader.api_key")?,
            api_version: read_i16(buf, "RequestHeader.api_version")?,
            correlation_id: read_i32(buf, "RequestHeader.correlation_id")?,
            client_id: read_nullable_string(buf, "RequestHeader.client_id")?,
        })
    }
}

/// Response header v0: `correlation_id INT32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseHeader {
    /// The correlation id of the request this answers.
    pub correlation_id: i32,
}

impl ResponseHeader {
    /// Encoded size in bytes.
    pub const ENCODED_LEN: usize = 4;

    /// Appends the header to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) {
        buf.put_i32(self.correlation_id);
    }

    /// Reads the header from the start of a frame body.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(ResponseHeader {
            correlation_id: read_i32(buf, "ResponseHeader.correlation_id")?,
        })
    }
}
