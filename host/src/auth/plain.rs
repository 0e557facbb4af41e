//! SASL PLAIN (RFC 4616): the message (parsed by drover-sasl-messages' `plain`),
//! checked against the user's SCRAM credential — the password is salted with the
//! credential's salt and iterations and its StoredKey compared with the stored one in
//! constant time — so one credential store serves every mechanism and no password is
//! kept anywhere. A user needs a SCRAM credential to use PLAIN (SCRAM-SHA-512's if it
//! has both).
//!
//! Checking costs a PBKDF2 run (up to 16384 iterations), for unknown users too (a
//! decoy credential, [`super::decoy`]): run it on a blocking thread.

pub use drover_sasl_messages::plain::{PlainError, PlainMessage};

use super::{decoy::Snapshot, keys, mechanism::ScramMechanism};

/// Whether `message`'s password is the user's, by its SCRAM credential in `snapshot`
/// (see the module docs); the same work for unknown users. Returns the mechanism
/// whose credential was used.
pub fn verify(message: &PlainMessage, snapshot: &Snapshot) -> (bool, ScramMechanism) {
    let (mechanism, lookup) = snapshot.lookup_for_plain(&message.username);
    let c = &lookup.credential;
    let salted = keys::salted_password(
        mechanism,
        message.password(),
        &c.salt,
        c.iterations.max(1) as u32,
    );
    let (stored, _) = keys::stored_and_server_key(mechanism, &salted);
    let same = subtle::ConstantTimeEq::ct_eq(&stored[..], &c.stored_key[..]);
    (bool::from(same & lookup.known), mechanism)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::credentials::{CredentialTable, ScramCredential};

    #[test]
    fn verifies_against_the_scram_credential() {
        let m = ScramMechanism::Sha256;
        let salted = keys::salted_password(m, b"pencil", b"salt", 4096);
        let mut table = CredentialTable::with_secret([0; 32]);
        table.insert(
            "user",
            m,
            ScramCredential::from_salted_password(m, b"salt", &salted, 4096),
        );
        let snapshot = Snapshot::new(table);
        let check = |message: &[u8]| verify(&PlainMessage::parse(message).unwrap(), &snapshot).0;
        assert_eq!(
            verify(&PlainMessage::parse(b"\0user\0pencil").unwrap(), &snapshot),
            (true, m)
        );
        assert!(check(b"user\0user\0pencil"));
        assert!(!check(b"\0user\0pencil2"));
        assert!(!check(b"\0ghost\0pencil"));
    }
}
