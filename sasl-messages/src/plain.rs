//! SASL PLAIN's message (RFC 4616): `[authzid] NUL authcid NUL passwd`.
//!
//! As Kafka's `PlainSaslServer`: exactly three fields; an authzid, if given, must be
//! the user name; the user name and password must not be empty. The broker checks the
//! password against the user's SCRAM credential (drover-host's `auth::plain`).

use std::fmt;

use crate::scram::MAX_MESSAGE_BYTES;

/// A parsed PLAIN message. Its `Debug` does not show the password.
pub struct PlainMessage {
    /// The user name (authcid).
    pub username: String,
    password: Vec<u8>,
}

impl fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainMessage")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Why a PLAIN message is refused (its `Display` holds no input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlainError {
    /// Longer than the bound, not UTF-8 where text is expected, or not three fields.
    #[error("malformed PLAIN message")]
    Malformed,
    /// An empty user name or password.
    #[error("empty user name or password")]
    Empty,
    /// An authorization id other than the user name.
    #[error("authorization id differs from the user name")]
    Authzid,
}

impl PlainMessage {
    /// Parses a PLAIN message of at most [`MAX_MESSAGE_BYTES`] bytes.
    pub fn parse(bytes: &[u8]) -> Result<PlainMessage, PlainError> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(PlainError::Malformed);
        }
        let mut fields = bytes.split(|b| *b == 0);
        let (Some(authzid), Some(authcid), Some(password), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(PlainError::Malformed);
        };
        let authzid = std::str::from_utf8(authzid).map_err(|_| PlainError::Malformed)?;
        let username = std::str::from_utf8(authcid).map_err(|_| PlainError::Malformed)?;
        if username.is_empty() || password.is_empty() {
            return Err(PlainError::Empty);
        }
        if !authzid.is_empty() && authzid != username {
            return Err(PlainError::Authzid);
        }
        Ok(PlainMessage {
            username: username.to_owned(),
            password: password.to_vec(),
        })
    }

    /// The password, for the check against the stored credential only: never log,
    /// count or return it.
    pub fn password(&self) -> &[u8] {
        &self.password
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_kafkas_three_fields() {
        let ok = PlainMessage::parse(b"\0user\0pencil").unwrap();
        assert_eq!(
            (ok.username.as_str(), ok.password()),
            ("user", &b"pencil"[..])
        );
        assert!(!format!("{ok:?}").contains("pencil"));
        assert_eq!(
            PlainMessage::parse(b"user\0user\0pencil").unwrap().username,
            "user"
        );
        assert_eq!(
            PlainMessage::parse(b"other\0user\0pencil").unwrap_err(),
            PlainError::Authzid
        );
        assert_eq!(
            PlainMessage::parse(b"\0\0pencil").unwrap_err(),
            PlainError::Empty
        );
        assert_eq!(
            PlainMessage::parse(b"\0user\0").unwrap_err(),
            PlainError::Empty
        );
        assert_eq!(
            PlainMessage::parse(b"\0user").unwrap_err(),
            PlainError::Malformed
        );
        assert_eq!(
            PlainMessage::parse(b"\0a\0b\0c").unwrap_err(),
            PlainError::Malformed
        );
        let long = [b'a'; MAX_MESSAGE_BYTES + 1];
        assert_eq!(
            PlainMessage::parse(&long).unwrap_err(),
            PlainError::Malformed
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(data in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = PlainMessage::parse(&data);
        }
    }
}
