//! SCRAM credentials as the broker keeps them: per user and mechanism the salt, the
//! StoredKey and the ServerKey (RFC 5802 §3) and the iteration count — never the
//! password or the salted password (KIP-554: the client sends the salted password in
//! AlterUserScramCredentials, and the broker derives the keys from it, as Kafka's
//! `ScramControlManager.finishUpsertion` does) — and the decoy secret that makes unknown
//! users look like known ones ([`super::decoy`]).
//!
//! The same document is kept in the data directory (standalone, [`super::file_store`])
//! and in ZooKeeper (cluster mode, [`super::zk_store`]), as JSON:
//!
//! ```text
//! {"version": 1,
//!  "decoy_secret": "<base64, 32 bytes>",
//!  "users": {"alice": {"SCRAM-SHA-512": {"salt": "<base64>", "stored_key": "<base64>",
//!                                        "server_key": "<base64>", "iterations": 8192}}}}
//! ```

use std::{collections::BTreeMap, fmt};

use base64::{engine::general_purpose::STANDARD, Engine};
use serde::{Deserialize, Serialize};

use super::mechanism::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

/// The document format's version.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the decoy secret.
pub const SECRET_LEN: usize = 32;
/// Longest user name accepted, in bytes (this broker's bound; Kafka has none). Names
/// travel in SCRAM's client-first message, which is capped
/// (drover-sasl-messages' `scram::MAX_MESSAGE_BYTES`).
pub const MAX_USER_NAME_BYTES: usize = 512;
/// Longest salt accepted, in bytes (this broker's bound; clients send 16 to 64).
pub const MAX_SALT_BYTES: usize = 256;

/// One user's credential for one SCRAM mechanism. Its `Debug` shows the iteration
/// count only.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt (RFC 5802 `s=`), 1 to [`MAX_SALT_BYTES`] bytes.
    pub salt: Vec<u8>,
    /// `StoredKey := H(ClientKey)`, the hash's length.
    pub stored_key: Vec<u8>,
    /// `ServerKey := HMAC(SaltedPassword, "Server Key")`, the hash's length.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations (RFC 5802 `i=`), [`MIN_ITERATIONS`] to [`MAX_ITERATIONS`].
    pub iterations: i32,
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of a salted password (KIP-554's upsertion): the keys derived from
    /// it ([`super::keys::stored_and_server_key`]); the salted password is not kept.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let (stored_key, server_key) =
            super::keys::stored_and_server_key(mechanism, salted_password);
        ScramCredential {
            salt: salt.to_vec(),
            stored_key,
            server_key,
            iterations,
        }
    }

    /// The credential of `password` with a fresh random salt of 32 bytes (`drover admin
    /// users`). Runs PBKDF2 (see [`super::keys::salted_password`]).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &[u8],
        iterations: i32,
    ) -> Result<ScramCredential, getrandom::Error> {
        let mut salt = [0u8; 32];
        getrandom::getrandom(&mut salt)?;
        let salted =
            super::keys::salted_password(mechanism, password, &salt, iterations.max(1) as u32);
        Ok(ScramCredential::from_salted_password(
            mechanism, &salt, &salted, iterations,
        ))
    }

    fn check(&self, mechanism: ScramMechanism) -> Result<(), String> {
        if self.salt.is_empty() || self.salt.len() > MAX_SALT_BYTES {
            return Err(format!("a salt of {} bytes", self.salt.len()));
        }
        if self.stored_key.len() != mechanism.hash_len()
            || self.server_key.len() != mechanism.hash_len()
        {
            return Err(format!("keys of the wrong length for {mechanism}"));
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err(format!("{} iterations", self.iterations));
        }
        Ok(())
    }
}

/// Every user's SCRAM credentials and the decoy secret: the broker's credential
/// store's contents at one moment.
#[derive(Clone, PartialEq, Eq)]
pub struct CredentialTable {
    /// User name → mechanism → credential; a user with no credential is absent.
    users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    /// The decoy secret ([`super::decoy`]).
    secret: [u8; SECRET_LEN],
}

impl fmt::Debug for CredentialTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialTable")
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

/// Why a stored credential document cannot be read. The message never holds key
/// material: serde's errors are reduced to their position and kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    version: u32,
    decoy_secret: String,
    users: BTreeMap<String, BTreeMap<String, DocCredential>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DocCredential {
    salt: String,
    stored_key: String,
    server_key: String,
    iterations: i32,
}

impl CredentialTable {
    /// An empty table with a fresh random decoy secret.
    pub fn new() -> Result<CredentialTable, getrandom::Error> {
        let mut secret = [0u8; SECRET_LEN];
        getrandom::getrandom(&mut secret)?;
        Ok(CredentialTable::with_secret(secret))
    }

    /// An empty table with this decoy secret (tests).
    pub fn with_secret(secret: [u8; SECRET_LEN]) -> CredentialTable {
        CredentialTable {
            users: BTreeMap::new(),
            secret,
        }
    }

    /// The decoy secret.
    pub fn secret(&self) -> &[u8; SECRET_LEN] {
        &self.secret
    }

    /// `user`'s credential for `mechanism`.
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// `user`'s credentials by mechanism (absent: the user has none).
    pub fn user(&self, user: &str) -> Option<&BTreeMap<ScramMechanism, ScramCredential>> {
        self.users.get(user)
    }

    /// The users with at least one credential, in name order.
    pub fn users(
        &self,
    ) -> impl Iterator<Item = (&String, &BTreeMap<ScramMechanism, ScramCredential>)> {
        self.users.iter()
    }

    /// How many users have at least one credential.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Sets `user`'s credential for `mechanism`.
    pub fn insert(&mut self, user: &str, mechanism: ScramMechanism, credential: ScramCredential) {
        self.users
            .entry(user.to_owned())
            .or_default()
            .insert(mechanism, credential);
    }

    /// Removes `user`'s credential for `mechanism`; whether there was one.
    pub fn remove(&mut self, user: &str, mechanism: ScramMechanism) -> bool {
        let Some(credentials) = self.users.get_mut(user) else {
            return false;
        };
        let removed = credentials.remove(&mechanism).is_some();
        if credentials.is_empty() {
            self.users.remove(user);
        }
        removed
    }

    /// The document (JSON, see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let doc = Doc {
            version: FORMAT_VERSION,
            decoy_secret: STANDARD.encode(self.secret),
            users: self
                .users
                .iter()
                .map(|(name, credentials)| {
                    let credentials = credentials
                        .iter()
                        .map(|(m, c)| {
                            (
                                m.name().to_owned(),
                                DocCredential {
                                    salt: STANDARD.encode(&c.salt),
                                    stored_key: STANDARD.encode(&c.stored_key),
                                    server_key: STANDARD.encode(&c.server_key),
                                    iterations: c.iterations,
                                },
                            )
                        })
                        .collect();
                    (name.clone(), credentials)
                })
                .collect(),
        };
        let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Reads a document written by [`CredentialTable::encode`], checking every field.
    pub fn decode(bytes: &[u8]) -> Result<CredentialTable, DecodeError> {
        let doc: Doc = serde_json::from_slice(bytes).map_err(|e| {
            DecodeError(format!(
                "not a credential document ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        if doc.version != FORMAT_VERSION {
            return Err(DecodeError(format!(
                "format version {} (this broker reads {FORMAT_VERSION})",
                doc.version
            )));
        }
        let secret: [u8; SECRET_LEN] = STANDARD
            .decode(&doc.decoy_secret)
            .ok()
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| DecodeError("decoy_secret is not 32 bytes of base64".into()))?;
        let mut table = CredentialTable::with_secret(secret);
        for (name, credentials) in doc.users {
            if let Some(why) = user_name_problem(&name) {
                return Err(DecodeError(format!("a user name {why}")));
            }
            for (mechanism, c) in credentials {
                let bad = |what: &str| DecodeError(format!("user `{name}`, {mechanism}: {what}"));
                let m = ScramMechanism::from_name(&mechanism)
                    .ok_or_else(|| bad("unknown mechanism"))?;
                let field = |value: &str, what: &str| {
                    STANDARD
                        .decode(value)
                        .map_err(|_| bad(&format!("{what} is not base64")))
                };
                let credential = ScramCredential {
                    salt: field(&c.salt, "salt")?,
                    stored_key: field(&c.stored_key, "stored_key")?,
                    server_key: field(&c.server_key, "server_key")?,
                    iterations: c.iterations,
                };
                credential.check(m).map_err(|e| bad(&e))?;
                table.insert(&name, m, credential);
            }
        }
        Ok(table)
    }
}

/// What is wrong with `name` as a SCRAM user name, if anything: empty (Kafka's
/// "Username must not be empty"), longer than [`MAX_USER_NAME_BYTES`], or holding NUL
/// or another control character (neither PLAIN, which separates fields with NUL, nor a
/// log line could carry it).
pub fn user_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("must not be empty".into())
    } else if name.len() > MAX_USER_NAME_BYTES {
        Some(format!("must be at most {MAX_USER_NAME_BYTES} bytes"))
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters".into())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(m: ScramMechanism) -> ScramCredential {
        ScramCredential::from_salted_password(m, b"salt", &vec![7u8; m.hash_len()], 4096)
    }

    #[test]
    fn documents_round_trip_and_hold_no_salted_password() {
        let mut table = CredentialTable::with_secret([9; SECRET_LEN]);
        table.insert(
            "alice",
            ScramMechanism::Sha256,
            credential(ScramMechanism::Sha256),
        );
        table.insert(
            "b,=ob",
            ScramMechanism::Sha512,
            credential(ScramMechanism::Sha512),
        );
        let bytes = table.encode();
        assert_eq!(CredentialTable::decode(&bytes).unwrap(), table);
        let text = String::from_utf8(bytes).unwrap();
        // The salted password was 7s: its base64 appears nowhere.
        let salted = STANDARD.encode(vec![7u8; 32]);
        assert!(!text.contains(&salted[..20]), "{text}");
        assert!(format!("{table:?}").contains("users: 2"));
        assert!(!format!("{:?}", credential(ScramMechanism::Sha256)).contains("salt"));
    }

    #[test]
    fn damaged_documents_are_refused_without_echoing_values() {
        let mut table = CredentialTable::with_secret([1; SECRET_LEN]);
        table.insert(
            "alice",
            ScramMechanism::Sha256,
            credential(ScramMechanism::Sha256),
        );
        let good = String::from_utf8(table.encode()).unwrap();
        let stored = STANDARD.encode(
            &table
                .get("alice", ScramMechanism::Sha256)
                .unwrap()
                .stored_key,
        );
        for (damage, expect) in [
            (
                good.replace("\"iterations\": 4096", "\"iterations\": 1"),
                "1 iterations",
            ),
            (good.replace(&stored, "AAAA"), "keys of the wrong length"),
            (
                good.replace("\"version\": 1", "\"version\": 2"),
                "format version 2",
            ),
            (
                good.replace("SCRAM-SHA-256", "SCRAM-SHA-1"),
                "unknown mechanism",
            ),
            (
                good[..good.len() / 2].to_owned(),
                "not a credential document",
            ),
            (good.replace(&stored, "!!!!"), "stored_key is not base64"),
        ] {
            let e = CredentialTable::decode(damage.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains(expect), "{e}");
            assert!(!e.contains(&stored[..12]), "{e}");
        }
    }

    #[test]
    fn user_names_are_checked() {
        assert!(user_name_problem("alice").is_none());
        assert!(user_name_problem("").is_some());
        assert!(user_name_problem("a\0b").is_some());
        assert!(user_name_problem(&"x".repeat(MAX_USER_NAME_BYTES + 1)).is_some());
    }
}
