//! The frames of a partly refused group request: the request encoded again with only
//! its allowed items (at the client's API version and header), and the coordinator's
//! answer decoded, edited (the refused items merged in, KIP-430 operations) and encoded
//! again. The one place the host re-encodes a group API frame.

use bytes::{Bytes, BytesMut};
use kafka_protocol::{
    messages::{ApiKey, ResponseHeader, ResponseKind},
    protocol::{Decodable, Encodable},
};

use super::{AnswerEdit, Decoded};

/// A request body that `kafka-protocol` could not encode at its version.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode request: {0}")]
pub struct EncodeError(String);

impl Decoded {
    /// The request as a frame (request header then body, no length prefix) at its own
    /// version and header version: what the coordinator is handed instead of the
    /// client's frame. Fails only if a field does not exist at the version, which a
    /// body decoded at that version cannot have.
    pub fn encode(&self) -> Result<Bytes, EncodeError> {
        let mut out = BytesMut::new();
        self.header
            .encode(&mut out, self.key.request_header_version(self.version))
            .map_err(|e| EncodeError(e.to_string()))?;
        self.body
            .encode(&mut out, self.version)
            .map_err(|e| EncodeError(e.to_string()))?;
        Ok(out.freeze())
    }
}

/// The coordinator's answer `frame` (response header and body of `key` at `version`)
/// passed through `edit`; an answer that does not decode (or, edited, does not encode)
/// is passed on as is.
pub fn edit_answer(key: ApiKey, version: i16, frame: Bytes, edit: AnswerEdit) -> Bytes {
    let mut buf = frame.clone();
    let Ok(header) = ResponseHeader::decode(&mut buf, key.response_header_version(version)) else {
        return frame;
    };
    let Ok(mut response) = ResponseKind::decode(key, &mut buf, version) else {
        return frame;
    };
    edit(&mut response);
    crate::server::dispatch::encode_response(key, version, header.correlation_id, &response)
        .unwrap_or(frame)
}
