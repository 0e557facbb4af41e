//! Codec errors. Protocol-level error *codes* (the INT16 values carried in responses)
//! are in [`crate::error_code`].

/// Why bytes could not be decoded. Every variant is a property of the input: the
/// receiver of such a frame closes the connection (docs/protocol.md, "Malformed
/// frames"). `what` names the field, e.g. `"RegisterConsumerRequest.group_id"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before a field (or before the elements an array count
    /// announced, at their minimum encoded size).
    #[error("{what}: needs {needed} bytes, {remaining} remain")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes the field needs (at least).
        needed: usize,
        /// Bytes left in the input.
        remaining: usize,
    },
    /// A length or count of -1 (null) where the field is not nullable.
    #[error("{what}: null where a value is required")]
    UnexpectedNull {
        /// The field being read.
        what: &'static str,
    },
    /// A negative length or count other than -1.
    #[error("{what}: invalid length {len}")]
    InvalidLength {
        /// The field being read.
        what: &'static str,
        /// The length read.
        len: i32,
    },
    /// An array count above the protocol's cap for that array (see [`crate::limits`]).
    #[error("{what}: {count} elements exceed the limit of {max}")]
    TooManyElements {
        /// The field being read.
        what: &'static str,
        /// The count read.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// A string that is not valid UTF-8.
    #[error("{what}: not valid UTF-8")]
    InvalidUtf8 {
        /// The field being read.
        what: &'static str,
    },
    /// Bytes left over after the last field of the message.
    #[error("{0} unexpected bytes after the end of the message")]
    TrailingBytes(usize),
    /// An API key that is not a native API this codec knows (20000–20007).
    #[error("unknown native API key {0}")]
    UnknownApiKey(i16),
    /// A version of a native API this codec does not implement.
    #[error("unsupported version {version} of native API {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version requested.
        version: i16,
    },
}

/// Why a value could not be encoded: it would break a limit that a conforming decoder
/// enforces, so the peer would refuse the frame. Anything that encodes successfully
/// decodes back to an equal value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A string longer than 32767 bytes (an INT16 length).
    #[error("{what}: string of {len} bytes exceeds 32767")]
    StringTooLong {
        /// The field being written.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// An array above the protocol's cap for that array (see [`crate::limits`]).
    #[error("{what}: {count} elements exceed the limit of {max}")]
    TooManyElements {
        /// The field being written.
        what: &'static str,
        /// Number of elements.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// A frame larger than an INT32 size can announce.
    #[error("frame of {0} bytes exceeds the INT32 size field")]
    FrameTooLarge(usize),
    /// Values that version `version` of the message cannot carry (for example member
    /// data in a RegisterConsumer v0).
    #[error("{what}: needs version {needed}, asked to encode version {version}")]
    VersionTooLow {
        /// The message or field that needs the newer version.
        what: &'static str,
        /// The lowest version that carries the values.
        needed: i16,
        /// The version asked for.
        version: i16,
    },
    /// A version of a native API this codec does not implement.
    #[error("unsupported version {version} of native API {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
}
