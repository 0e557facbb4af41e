//! What an assignor promises beyond the contract, as the caller states it
//! (`--claims balanced,sticky` on `drover plugins test`).

use std::{collections::BTreeSet, fmt, str::FromStr};

/// A guarantee beyond the contract that a policy may make; the suite checks it only
/// when the caller claims it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Claim {
    /// With identical subscriptions (and equal weights), every member's partition
    /// count is within one of every other's. Kafka's `RoundRobinAssignor` and the
    /// KIP-848 uniform assignor promise it; `RangeAssignor` does not (it balances per
    /// topic only).
    Balanced,
    /// Owned partitions are kept where balance allows: feeding an assignment back as
    /// the members' owned partitions changes nothing, and when one member of a group
    /// with identical subscriptions leaves, only its partitions move (Kafka's
    /// `StickyAssignor`, KIP-848's uniform assignor).
    Sticky,
}

impl Claim {
    /// Every claim, in a stable order.
    pub const ALL: [Claim; 2] = [Claim::Balanced, Claim::Sticky];

    /// The claim's name on the command line and in reports: `balanced`, `sticky`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Claim::Balanced => "balanced",
            Claim::Sticky => "sticky",
        }
    }
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A claim name that is not one of [`Claim::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// The name given.
    #[error("unknown claim `{0}`: expected balanced or sticky")]
    Unknown(String),
}

impl FromStr for Claim {
    type Err = ClaimError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Claim::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| ClaimError::Unknown(s.to_owned()))
    }
}

/// The set of claims an assignor makes; empty by default (only the contract and
/// determinism are checked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims(BTreeSet<Claim>);

impl Claims {
    /// No claim.
    pub fn none() -> Claims {
        Claims::default()
    }

    /// These claims plus `claim`.
    pub fn with(mut self, claim: Claim) -> Claims {
        self.0.insert(claim);
        self
    }

    /// Whether `claim` is made.
    pub fn contains(&self, claim: Claim) -> bool {
        self.0.contains(&claim)
    }
}

impl FromStr for Claims {
    type Err = ClaimError;

    /// A comma-separated list (`balanced,sticky`); empty means none.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .try_fold(Claims::none(), |claims, c| Ok(claims.with(c.parse()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_comma_list() {
        let claims: Claims = "balanced, sticky".parse().unwrap();
        assert!(claims.contains(Claim::Balanced) && claims.contains(Claim::Sticky));
        assert_eq!("".parse::<Claims>().unwrap(), Claims::none());
        assert_eq!(
            "balanced,fast".parse::<Claims>(),
            Err(ClaimError::Unknown("fast".into()))
        );
    }
}
