//! Whole frames: `size INT32` (bytes that follow), then a header, then the body.
//!
//! Reading the size prefix from a socket, and bounding it, is the transport's job (the
//! broker's `host/src/server/frame.rs`); the decoders here take the bytes after it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::header::{RequestHeader, ResponseHeader};
use crate::messages::{decode_request, decode_response, NativeRequest, NativeResponse};
use crate::ApiKey;

/// Runs `body`, then writes the size prefix reserved before it; on error `buf` is left
/// unchanged.
fn sized(
    buf: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_i32(0);
    if let Err(e) = body(buf) {
        buf.truncate(start);
        return Err(e);
    }
    let size = buf.len() - start - 4;
    let Ok(size32) = i32::try_from(size) else {
        buf.truncate(start);
        return Err(EncodeError::FrameTooLarge(size));
    };
    buf[start..start + 4].copy_from_slice(&size32.to_be_bytes());
    Ok(())
}

/// Appends a complete request frame (size, header v1, body) to `buf`, in the lowest
/// version that carries the request's values ([`NativeRequest::version`]): v0, or
/// RegisterConsumer v1 for a consumer that declares member data.
pub fn encode_request_frame(
    buf: &mut BytesMut,
    correlation_id: i32,
    client_id: Option<&str>,
    request: &NativeRequest,
) -> Result<(), EncodeError> {
    sized(buf, |buf| {
        let header = RequestHeader {
            api_key: request.api_key().code(),
            api_version: request.version(),
            correlation_id,
            client_id: client_id.map(str::to_owned),
        };
        header.encode(buf)?;
        request.encode(buf)
    })
}

/// Appends a complete response frame (size, header v0, body) to `buf`.
pub fn encode_response_frame(
    buf: &mut BytesMut,
    correlation_id: i32,
    response: &NativeResponse,
) -> Result<(), EncodeError> {
    sized(buf, |buf| {
        ResponseHeader { correlation_id }.encode(buf);
        response.encode(buf)
    })
}

/// Decodes a request frame given the bytes after its size prefix.
pub fn decode_request_frame(frame: Bytes) -> Result<(RequestHeader, NativeRequest), DecodeError> {
    let mut frame = frame;
    let header = RequestHeader::decode(&mut frame)?;
    let request = decode_request(header.api_key, header.api_version, frame)?;
    Ok((header, request))
}

/// Decodes a response frame, given the bytes after its size prefix and the API and
/// version of the request it answers (found by its correlation id, which the caller
/// may read first with [`ResponseHeader::decode`] on a clone).
pub fn decode_response_frame(
    frame: Bytes,
    api_key: ApiKey,
    version: i16,
) -> Result<(ResponseHeader, NativeResponse), DecodeError> {
    let mut frame = frame;
    let header = ResponseHeader::decode(&mut frame)?;
    let response = decode_response(api_key, version, frame)?;
    Ok((header, response))
}
