//! SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`, checked against the
//! user's SCRAM credential — the password is salted with the credential's salt and
//! iterations and its StoredKey compared with the stored one in constant time — so one
//! credential store serves every mechanism and no password is kept anywhere. A user
//! needs a SCRAM credential to use PLAIN (SCRAM-SHA-512's if it has both).
//!
//! As Kafka's `PlainSaslServer`: exactly three fields; an authzid, if given, must be
//! the user name; the user name and password must not be empty.
//!
//! Checking costs a PBKDF2 run (up to 16384 iterations), for unknown users too (a
//! decoy credential, [`super::decoy`]): run it on a blocking thread.

use std::fmt;

use super::{decoy::Snapshot, keys, mechanism::ScramMechanism, scram_messages::MAX_MESSAGE_BYTES};

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
    /// An authzid other than the user name.
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

    /// Whether the password is the user's, by its SCRAM credential in `snapshot`
    /// (see the module docs); the same work for unknown users. Returns the mechanism
    /// whose credential was used.
    pub fn verify(&self, snapshot: &Snapshot) -> (bool, ScramMechanism) {
        let (mechanism, lookup) = snapshot.lookup_for_plain(&self.username);
        let c = &lookup.credential;
        let salted = keys::salted_password(
            mechanism,
            &self.password,
            &c.salt,
            c.iterations.max(1) as u32,
        );
        let (stored, _) = keys::stored_and_server_key(mechanism, &salted);
        let same = subtle::ConstantTimeEq::ct_eq(&stored[..], &c.stored_key[..]);
        (bool::from(same & lookup.known), mechanism)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::auth::credentials::{CredentialTable, ScramCredential};

    #[test]
    fn parses_and_verifies_against_the_scram_credential() {
        let m = ScramMechanism::Sha256;
        let salted = keys::salted_password(m, b"pencil", b"salt", 4096);
        let mut table = CredentialTable::with_secret([0; 32]);
        table.insert(
            "user",
            m,
            ScramCredential::from_salted_password(m, b"salt", &salted, 4096),
        );
        let snapshot = Snapshot::new(table);
        let ok = PlainMessage::parse(b"\0user\0pencil").unwrap();
        assert_eq!(ok.verify(&snapshot), (true, m));
        assert!(!format!("{ok:?}").contains("pencil"));
        assert!(
            PlainMessage::parse(b"user\0user\0pencil")
                .unwrap()
                .verify(&snapshot)
                .0
        );
        assert!(
            !PlainMessage::parse(b"\0user\0pencil2")
                .unwrap()
                .verify(&snapshot)
                .0
        );
        assert!(
            !PlainMessage::parse(b"\0ghost\0pencil")
                .unwrap()
                .verify(&snapshot)
                .0
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
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(data in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = PlainMessage::parse(&data);
        }
    }
}
