//! Token buckets per client address: the one mechanism behind the host's per-client
//! rate bounds (new transactional ids per second, [`crate::broker::new_txn_ids`];
//! failed authentications per minute, [`crate::auth::rate_limit`]).
//!
//! A bucket holds up to `capacity` tokens and refills at `per_sec` tokens a second;
//! an address starts with a full bucket. A full bucket is the same as none, so full
//! buckets are dropped when the table has grown past `prune_at` and a new address
//! arrives; at most `max_tracked` addresses are held, and an address beyond that is
//! not tracked (the caller decides what that means).

use std::{collections::HashMap, net::IpAddr, sync::Mutex, time::Instant};

/// The shape of the buckets.
#[derive(Debug, Clone, Copy)]
pub struct BucketShape {
    /// Most tokens a bucket holds (the burst), at least 1.
    pub capacity: f64,
    /// Tokens added per second.
    pub per_sec: f64,
    /// Table size past which full buckets are dropped (at the next new address).
    pub prune_at: usize,
    /// Most addresses held at once.
    pub max_tracked: usize,
}

/// What [`AddressBuckets::take`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// A token was taken.
    Took,
    /// The bucket held less than one token; nothing was taken.
    Empty,
    /// The address is not tracked (the table is full of buckets in use).
    Untracked,
}

/// Per-address token buckets.
#[derive(Debug)]
pub struct AddressBuckets {
    shape: BucketShape,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens now (fractional while refilling).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl Bucket {
    fn at(self, now: Instant, shape: &BucketShape) -> Bucket {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        Bucket {
            tokens: (self.tokens + elapsed * shape.per_sec).min(shape.capacity),
            at: self.at.max(now),
        }
    }
}

impl AddressBuckets {
    /// An empty table of buckets of `shape` (capacity raised to at least 1).
    pub fn new(shape: BucketShape) -> AddressBuckets {
        AddressBuckets {
            shape: BucketShape {
                capacity: shape.capacity.max(1.0),
                ..shape
            },
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `address`'s bucket holds a token at `now`. Takes nothing.
    pub fn has_token(&self, address: IpAddr, now: Instant) -> bool {
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets
            .get(&address)
            .is_none_or(|b| b.at(now, &self.shape).tokens >= 1.0)
    }

    /// Takes one token from `address`'s bucket at `now` if it holds one.
    pub fn take(&self, address: IpAddr, now: Instant) -> Take {
        let shape = &self.shape;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.contains_key(&address) {
            if buckets.len() >= shape.prune_at {
                buckets.retain(|_, b| b.at(now, shape).tokens < shape.capacity);
            }
            if buckets.len() >= shape.max_tracked {
                return Take::Untracked;
            }
        }
        let bucket = buckets.entry(address).or_insert(Bucket {
            tokens: shape.capacity,
            at: now,
        });
        *bucket = bucket.at(now, shape);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Take::Took
        } else {
            Take::Empty
        }
    }

    /// Gives one token back to `address`'s bucket at `now` (up to its capacity), for a
    /// take that turned out not to count; nothing for an address not tracked.
    pub fn give_back(&self, address: IpAddr, now: Instant) {
        let shape = &self.shape;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bucket) = buckets.get_mut(&address) {
            *bucket = bucket.at(now, shape);
            bucket.tokens = (bucket.tokens + 1.0).min(shape.capacity);
        }
    }

    /// Addresses tracked (for tests and diagnostics).
    pub fn tracked(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
