//! The bound on new transactional ids per client (issue 28): at most
//! `transactions.new_ids_per_sec_per_client` InitProducerId calls per second from one
//! client address may name a transactional id the coordinator does not know — a token
//! bucket per address holding one second's worth, as `topics.auto_create_per_sec`
//! ([`super::auto_create`]) bounds topic creation for the whole broker. A client is its
//! IP address, as for `server.max_connections_per_ip`: connections and client ids are
//! free to make, addresses are not.
//!
//! A call beyond the bound is answered `COORDINATOR_LOAD_IN_PROGRESS`: Kafka's
//! `THROTTLING_QUOTA_EXCEEDED` exists only in CreateTopics, CreatePartitions and
//! DeleteTopics responses (KIP-599), and the clients retry InitProducerId on
//! COORDINATOR_LOAD_IN_PROGRESS — Java's `TransactionManager` re-enqueues it (as
//! CONCURRENT_TRANSACTIONS; anything else not retriable is fatal in older clients),
//! librdkafka retries every InitProducerId error but the fatal ones (fencing,
//! authorization, an invalid timeout) after 500 ms, kafkajs and kafka-python mark it
//! retriable.
//!
//! Memory: an address whose bucket has refilled is the same as an unknown one, so
//! such entries are dropped whenever the table has grown past [`PRUNE_AT`]; what stays
//! is the addresses that created ids within the last second.

use std::{net::IpAddr, time::Instant};

use crate::address_buckets::{AddressBuckets, BucketShape, Take};

/// Table size past which refilled buckets are dropped (at the next call).
pub const PRUNE_AT: usize = 4096;

/// Per-address token buckets for new transactional ids.
#[derive(Debug)]
pub struct NewTxnIdLimiter {
    buckets: AddressBuckets,
}

impl NewTxnIdLimiter {
    /// At most `per_sec` new ids per second per address (at least 1); every bucket
    /// starts full.
    pub fn new(per_sec: u32) -> NewTxnIdLimiter {
        let per_sec = f64::from(per_sec.max(1));
        NewTxnIdLimiter {
            buckets: AddressBuckets::new(BucketShape {
                capacity: per_sec,
                per_sec,
                prune_at: PRUNE_AT,
                max_tracked: usize::MAX,
            }),
        }
    }

    /// Takes one token from `client`'s bucket at `now` if it has one: whether the
    /// client may create a new transactional id now.
    pub fn try_take_at(&self, client: IpAddr, now: Instant) -> bool {
        self.buckets.take(client, now) != Take::Empty
    }

    /// [`NewTxnIdLimiter::try_take_at`] now.
    pub fn try_take(&self, client: IpAddr) -> bool {
        self.try_take_at(client, Instant::now())
    }

    /// Addresses tracked (for tests and diagnostics).
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
    fn each_address_has_its_own_bucket_of_one_seconds_worth() {
        let limiter = NewTxnIdLimiter::new(5);
        let t0 = Instant::now();
        assert_eq!(
            (0..20).filter(|_| limiter.try_take_at(ip(1), t0)).count(),
            5
        );
        assert!(!limiter.try_take_at(ip(1), t0));
        // Another client is not held up by the first.
        assert_eq!(
            (0..20).filter(|_| limiter.try_take_at(ip(2), t0)).count(),
            5
        );
        // Refill at the rate, never beyond one second's worth.
        let later = t0 + Duration::from_millis(400);
        assert_eq!(
            (0..20)
                .filter(|_| limiter.try_take_at(ip(1), later))
                .count(),
            2
        );
        assert!(!limiter.try_take_at(ip(1), later));
        let much_later = later + Duration::from_secs(3600);
        assert_eq!(
            (0..20)
                .filter(|_| limiter.try_take_at(ip(1), much_later))
                .count(),
            5
        );
    }

    #[test]
    fn the_table_keeps_only_addresses_that_used_tokens_within_a_second() {
        let limiter = NewTxnIdLimiter::new(1);
        let t0 = Instant::now();
        for i in 0..PRUNE_AT {
            let client = IpAddr::from(std::net::Ipv6Addr::from(i as u128));
            assert!(limiter.try_take_at(client, t0));
        }
        assert_eq!(limiter.tracked(), PRUNE_AT);
        // A second later every bucket has refilled: a new address prunes them all.
        let t1 = t0 + Duration::from_secs(1);
        assert!(limiter.try_take_at(ip(9), t1));
        assert_eq!(limiter.tracked(), 1);
        // An emptied bucket is kept (forgetting it would refill it).
        assert!(!limiter.try_take_at(ip(9), t1));
    }
}
