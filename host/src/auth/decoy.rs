//! Credentials for users that do not exist, so that a failed authentication looks and
//! costs the same whether the user exists or not (issue 29 item 3).
//!
//! An unknown user gets a decoy credential derived from the store's decoy secret and
//! the user name with HMAC-SHA-512: the same salt and keys every time (a real user's
//! salt does not change between attempts either, and the secret is kept with the
//! credentials, so it is the same after a restart and, in cluster mode, on every
//! broker), of the salt length and iteration count most credentials of that mechanism
//! have (4096 iterations and 32 bytes when there are none). The SCRAM exchange and the
//! PLAIN check then run exactly as for a real user and fail at the proof comparison;
//! [`Lookup::known`] is folded into that comparison in constant time.
//!
//! What remains observable: a user whose credential has an unusual salt length or
//! iteration count is told apart from unknown users by its server-first message (as
//! in any SCRAM server). Use the same `--iterations` for every user.

use std::collections::BTreeMap;

use subtle::Choice;

use super::{
    credentials::{CredentialTable, ScramCredential},
    keys,
    mechanism::{ScramMechanism, MIN_ITERATIONS},
};

/// Salt length of decoys when no credential of the mechanism exists, bytes.
pub const DEFAULT_DECOY_SALT_BYTES: usize = 32;

/// The credential store's contents as authentication reads them: the table and the
/// decoys' shape per mechanism.
#[derive(Debug, Clone)]
pub struct Snapshot {
    table: CredentialTable,
    /// Mechanism → (iterations, salt length) most credentials have.
    shape: BTreeMap<ScramMechanism, (i32, usize)>,
    /// The mechanism most users have a credential for (PLAIN's decoys use it).
    plain_mechanism: ScramMechanism,
}

/// A user's credential for one mechanism, real or decoy.
#[derive(Debug, Clone)]
pub struct Lookup {
    /// The credential to run the exchange with.
    pub credential: ScramCredential,
    /// Whether it is the user's real credential (1) or a decoy (0).
    pub known: Choice,
}

impl Snapshot {
    /// The snapshot of `table`.
    pub fn new(table: CredentialTable) -> Snapshot {
        let mut counts: BTreeMap<ScramMechanism, BTreeMap<(i32, usize), usize>> = BTreeMap::new();
        let mut users_per_mechanism: BTreeMap<ScramMechanism, usize> = BTreeMap::new();
        for (_, credentials) in table.users() {
            for (m, c) in credentials {
                *counts
                    .entry(*m)
                    .or_default()
                    .entry((c.iterations, c.salt.len()))
                    .or_default() += 1;
                *users_per_mechanism.entry(*m).or_default() += 1;
            }
        }
        let shape = counts
            .into_iter()
            .filter_map(|(m, shapes)| {
                // Most common; ties go to the smaller shape, deterministically.
                let best = shapes
                    .into_iter()
                    .max_by_key(|(shape, n)| (*n, std::cmp::Reverse(*shape)))?;
                Some((m, best.0))
            })
            .collect();
        let plain_mechanism = users_per_mechanism
            .into_iter()
            .max_by_key(|(m, n)| (*n, *m))
            .map_or(ScramMechanism::Sha512, |(m, _)| m);
        Snapshot {
            table,
            shape,
            plain_mechanism,
        }
    }

    /// The table.
    pub fn table(&self) -> &CredentialTable {
        &self.table
    }

    /// `user`'s credential for `mechanism`, or its decoy. The decoy is computed in
    /// every case, so both paths do the same work.
    pub fn lookup(&self, user: &str, mechanism: ScramMechanism) -> Lookup {
        let decoy = self.decoy(user, mechanism);
        match self.table.get(user, mechanism) {
            Some(real) => Lookup {
                credential: real.clone(),
                known: Choice::from(1),
            },
            None => Lookup {
                credential: decoy,
                known: Choice::from(0),
            },
        }
    }

    /// The credential PLAIN checks `user`'s password against: SCRAM-SHA-512's if the
    /// user has one, else SCRAM-SHA-256's; for an unknown user the decoy of the
    /// mechanism most users have.
    pub fn lookup_for_plain(&self, user: &str) -> (ScramMechanism, Lookup) {
        let mechanism = match self.table.user(user) {
            Some(credentials) if credentials.contains_key(&ScramMechanism::Sha512) => {
                ScramMechanism::Sha512
            }
            Some(credentials) if credentials.contains_key(&ScramMechanism::Sha256) => {
                ScramMechanism::Sha256
            }
            _ => self.plain_mechanism,
        };
        (mechanism, self.lookup(user, mechanism))
    }

    /// The decoy credential of `user` for `mechanism`.
    pub fn decoy(&self, user: &str, mechanism: ScramMechanism) -> ScramCredential {
        let (iterations, salt_len) = self
            .shape
            .get(&mechanism)
            .copied()
            .unwrap_or((MIN_ITERATIONS, DEFAULT_DECOY_SALT_BYTES));
        let derive = |purpose: &str, len: usize| {
            let mut out = Vec::with_capacity(len);
            let mut block = 0u32;
            while out.len() < len {
                let mut input = Vec::with_capacity(purpose.len() + user.len() + 24);
                input.extend_from_slice(b"drover-scram-decoy\0");
                input.extend_from_slice(purpose.as_bytes());
                input.push(0);
                input.extend_from_slice(mechanism.name().as_bytes());
                input.push(0);
                input.extend_from_slice(&block.to_be_bytes());
                input.extend_from_slice(user.as_bytes());
                out.extend(keys::hmac(
                    ScramMechanism::Sha512,
                    self.table.secret(),
                    &input,
                ));
                block += 1;
            }
            out.truncate(len);
            out
        };
        ScramCredential {
            salt: derive("salt", salt_len),
            stored_key: derive("stored", mechanism.hash_len()),
            server_key: derive("server", mechanism.hash_len()),
            iterations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(m: ScramMechanism, iterations: i32, salt: &[u8]) -> ScramCredential {
        ScramCredential::from_salted_password(m, salt, &vec![1u8; m.hash_len()], iterations)
    }

    #[test]
    fn decoys_are_stable_per_user_and_shaped_like_real_credentials() {
        let mut table = CredentialTable::with_secret([5; 32]);
        table.insert(
            "a",
            ScramMechanism::Sha512,
            credential(ScramMechanism::Sha512, 8192, &[0; 24]),
        );
        table.insert(
            "b",
            ScramMechanism::Sha512,
            credential(ScramMechanism::Sha512, 8192, &[1; 24]),
        );
        table.insert(
            "c",
            ScramMechanism::Sha512,
            credential(ScramMechanism::Sha512, 4096, &[2; 64]),
        );
        let snapshot = Snapshot::new(table.clone());
        let one = snapshot.lookup("ghost", ScramMechanism::Sha512);
        assert!(!bool::from(one.known));
        assert_eq!(one.credential.iterations, 8192);
        assert_eq!(one.credential.salt.len(), 24);
        assert_eq!(one.credential.stored_key.len(), 64);
        // Same user, same decoy; another user or another secret, another one.
        let again = Snapshot::new(table.clone()).lookup("ghost", ScramMechanism::Sha512);
        assert_eq!(one.credential, again.credential);
        assert_ne!(
            snapshot.decoy("ghost2", ScramMechanism::Sha512),
            one.credential
        );
        let other = Snapshot::new(CredentialTable::with_secret([6; 32]));
        assert_ne!(
            other.decoy("ghost", ScramMechanism::Sha512).salt,
            one.credential.salt[..]
        );
        // No credential of SHA-256: the defaults.
        let d = snapshot.decoy("ghost", ScramMechanism::Sha256);
        assert_eq!(
            (d.iterations, d.salt.len(), d.stored_key.len()),
            (4096, 32, 32)
        );
        // A real user is found, and PLAIN prefers SHA-512.
        let real = snapshot.lookup("a", ScramMechanism::Sha512);
        assert!(bool::from(real.known));
        assert_eq!(snapshot.lookup_for_plain("a").0, ScramMechanism::Sha512);
        assert_eq!(snapshot.lookup_for_plain("ghost").0, ScramMechanism::Sha512);
    }

    #[test]
    fn long_salts_are_derived_block_by_block() {
        let mut table = CredentialTable::with_secret([5; 32]);
        table.insert(
            "a",
            ScramMechanism::Sha256,
            credential(ScramMechanism::Sha256, 4096, &[0; 200]),
        );
        let d = Snapshot::new(table).decoy("x", ScramMechanism::Sha256);
        assert_eq!(d.salt.len(), 200);
        assert_ne!(d.salt[..64], d.salt[64..128]);
    }
}
