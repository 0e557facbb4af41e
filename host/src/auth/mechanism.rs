//! The SASL mechanisms this broker knows, under the names and type ids Kafka uses.
//!
//! SCRAM mechanisms carry KIP-554's type ids (`ScramMechanism` in Kafka's admin API:
//! 0 unknown, 1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and its iteration bounds: at least
//! 4096 (Kafka's `ScramMechanism.minIterations`, RFC 7677 §4's recommendation) and at
//! most 16384 (Kafka's `ScramControlManager.MAX_ITERATIONS`).

use std::fmt;

/// Fewest PBKDF2 iterations a SCRAM credential may have (KIP-554; RFC 7677 §4).
pub const MIN_ITERATIONS: i32 = 4096;
/// Most PBKDF2 iterations a SCRAM credential may have (KIP-554, Kafka's
/// `ScramControlManager.MAX_ITERATIONS`).
pub const MAX_ITERATIONS: i32 = 16384;

/// A SCRAM mechanism (RFC 5802 with the hash of RFC 7677 or RFC 5802's family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (RFC 7677), KIP-554 type 1.
    Sha256,
    /// `SCRAM-SHA-512`, KIP-554 type 2.
    Sha512,
}

impl ScramMechanism {
    /// Both mechanisms, in type-id order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// KIP-554's type id (`mechanism` in AlterUserScramCredentials and
    /// DescribeUserScramCredentials): 1 or 2.
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of KIP-554 type id `id`; `None` for 0 (unknown) and any other.
    pub fn from_type_id(id: i8) -> Option<ScramMechanism> {
        match id {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The SASL name (`SCRAM-SHA-256`, `SCRAM-SHA-512`), as clients' `sasl.mechanism`
    /// spells it.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exact, upper case as SASL names are).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Bytes of the hash's output: the length of a salted password, a StoredKey, a
    /// ServerKey and a proof (32 or 64).
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A SASL mechanism the broker may offer in SaslHandshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616): the password in the clear, checked against the user's SCRAM
    /// credential (docs/security.md, "SASL/SCRAM").
    Plain,
    /// A SCRAM mechanism.
    Scram(ScramMechanism),
}

impl Mechanism {
    /// Every mechanism, in the order SaslHandshake lists them.
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Scram(ScramMechanism::Sha512),
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Plain,
    ];

    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism named `name` (exact).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The label of this mechanism in metrics (`plain`, `scram-sha-256`,
    /// `scram-sha-512`).
    pub fn label(self) -> &'static str {
        match self {
            Mechanism::Plain => "plain",
            Mechanism::Scram(ScramMechanism::Sha256) => "scram-sha-256",
            Mechanism::Scram(ScramMechanism::Sha512) => "scram-sha-512",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_type_ids_round_trip() {
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_type_id(m.type_id()), Some(m));
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(ScramMechanism::from_type_id(0), None);
        assert_eq!(ScramMechanism::from_type_id(3), None);
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(Mechanism::from_name("scram-sha-256"), None);
        assert_eq!(Mechanism::from_name("GSSAPI"), None);
    }
}
