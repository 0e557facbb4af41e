//! The bound on failed authentications per client address (issue 29 item 3): a token
//! bucket per client holding `sasl.failures_per_minute_per_client` tokens and refilled
//! at that rate. An authentication takes a token at its first message
//! ([`FailureLimiter::reserve`]) and gives it back when it succeeds
//! ([`FailureLimiter::refund`]), so a failed (or abandoned) one keeps it; while a
//! client's bucket is empty its authentications are refused at their first token,
//! before any credential is looked at, with the same answer as a wrong password.
//! Taking the token up front, not at the failure, bounds a client that runs many
//! exchanges at once: a bucket with one token left admits one exchange, not one per
//! connection. Successful authentications cost nothing in the end, so an honest client
//! that fails a few times and then succeeds is never held up, and clients at other
//! addresses are not affected by one that guesses.
//!
//! A client is an IPv4 address, or an IPv6 address's /64 (one host usually has a whole
//! /64 to pick addresses from); an IPv4-mapped IPv6 address counts as its IPv4 address.
//!
//! Memory: a full bucket is the same as none, so full buckets are dropped whenever the
//! table has grown past [`PRUNE_AT`]; at most [`MAX_TRACKED`] clients are tracked, and
//! failures of clients beyond that are not limited (their count is in the metrics).

use std::{
    net::{IpAddr, Ipv6Addr},
    time::Instant,
};

use crate::address_buckets::{AddressBuckets, BucketShape, Take};

/// Table size past which full buckets are dropped (at the next new client).
pub const PRUNE_AT: usize = 4096;
/// Most clients tracked at once.
pub const MAX_TRACKED: usize = 65_536;

/// Per-client token buckets of failed authentications.
#[derive(Debug)]
pub struct FailureLimiter {
    buckets: AddressBuckets,
}

/// The client an address belongs to (see the module docs).
pub fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl FailureLimiter {
    /// At most `per_minute` failures per minute per client (at least 1), in bursts of
    /// up to `per_minute`.
    pub fn new(per_minute: u32) -> FailureLimiter {
        let per_minute = f64::from(per_minute.max(1));
        FailureLimiter {
            buckets: AddressBuckets::new(BucketShape {
                capacity: per_minute,
                per_sec: per_minute / 60.0,
                prune_at: PRUNE_AT,
                max_tracked: MAX_TRACKED,
            }),
        }
    }

    /// Whether `ip`'s client may try to authenticate at `now` (its bucket holds a
    /// token). Takes nothing.
    pub fn allows(&self, ip: IpAddr, now: Instant) -> bool {
        self.buckets.has_token(client_of(ip), now)
    }

    /// Takes a token from `ip`'s client for a failure at `now` (none when its bucket
    /// is empty already). Returns false when the client is not tracked (the table is
    /// full).
    pub fn record_failure(&self, ip: IpAddr, now: Instant) -> bool {
        self.buckets.take(client_of(ip), now) != Take::Untracked
    }

    /// Takes a token from `ip`'s client for an authentication starting at `now`, if its
    /// bucket holds one; false (refuse the authentication unchecked) when it is empty.
    /// A client that is not tracked (the table is full) is let through without one.
    /// Give the token back with [`FailureLimiter::refund`] when the authentication
    /// succeeds.
    pub fn reserve(&self, ip: IpAddr, now: Instant) -> bool {
        self.buckets.take(client_of(ip), now) != Take::Empty
    }

    /// Gives back the token [`FailureLimiter::reserve`] took, for an authentication of
    /// `ip`'s client that succeeded at `now`.
    pub fn refund(&self, ip: IpAddr, now: Instant) {
        self.buckets.give_back(client_of(ip), now);
    }

    /// Clients tracked (for tests and diagnostics).
    pub fn tracked(&self) -> usize {
        self.buckets.tracked()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_guessing_client_is_held_back_and_others_are_not() {
        let limiter = FailureLimiter::new(6);
        let t0 = Instant::now();
        for _ in 0..6 {
            assert!(limiter.allows(ip(1), t0));
            limiter.record_failure(ip(1), t0);
        }
        assert!(!limiter.allows(ip(1), t0));
        // 1,000 more failures change nothing for anybody else.
        for _ in 0..1000 {
            limiter.record_failure(ip(1), t0);
        }
        assert!(limiter.allows(ip(2), t0));
        assert!(!limiter.allows(ip(1), t0 + Duration::from_secs(9)));
        // Six per minute: one token every ten seconds.
        assert!(limiter.allows(ip(1), t0 + Duration::from_secs(10)));
        assert!(limiter.allows(ip(1), t0 + Duration::from_secs(3600)));
    }

    #[test]
    fn a_reserved_token_is_kept_by_a_failure_and_given_back_by_a_success() {
        let limiter = FailureLimiter::new(3);
        let t0 = Instant::now();
        // Three exchanges at once take the three tokens; a fourth is refused.
        for _ in 0..3 {
            assert!(limiter.reserve(ip(1), t0));
        }
        assert!(!limiter.reserve(ip(1), t0));
        // One succeeds: its token comes back, and one more exchange may start.
        limiter.refund(ip(1), t0);
        assert!(limiter.reserve(ip(1), t0));
        assert!(!limiter.reserve(ip(1), t0));
        // Never more than the bucket holds.
        for _ in 0..10 {
            limiter.refund(ip(1), t0);
        }
        assert!(limiter.allows(ip(1), t0));
        for _ in 0..3 {
            assert!(limiter.reserve(ip(1), t0));
        }
        assert!(!limiter.reserve(ip(1), t0));
        assert!(limiter.reserve(ip(2), t0));
    }

    #[test]
    fn ipv6_clients_are_their_slash_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_of(a), client_of(b));
        assert_ne!(client_of(a), client_of(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(client_of(mapped), ip(1));
        let limiter = FailureLimiter::new(1);
        let t0 = Instant::now();
        limiter.record_failure(a, t0);
        assert!(!limiter.allows(b, t0));
        assert!(limiter.allows(c, t0));
    }

    #[test]
    fn the_table_is_bounded() {
        let limiter = FailureLimiter::new(1);
        let t0 = Instant::now();
        for i in 0..PRUNE_AT {
            let client = IpAddr::from([10, 1, (i / 256) as u8, (i % 256) as u8]);
            assert!(limiter.record_failure(client, t0));
        }
        assert_eq!(limiter.tracked(), PRUNE_AT);
        // A minute later every bucket is full again: a new client prunes them.
        limiter.record_failure(ip(9), t0 + Duration::from_secs(60));
        assert_eq!(limiter.tracked(), 1);
    }
}
