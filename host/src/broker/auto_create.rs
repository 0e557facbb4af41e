//! Bounds on topic auto-creation (Metadata and Produce naming unknown topics): at most
//! `topics.auto_create_max_per_request` per Metadata or Produce request, and at most
//! `topics.auto_create_per_sec` per second for the whole broker (a token bucket holding
//! one second's worth). A name beyond either bound is answered
//! `UNKNOWN_TOPIC_OR_PARTITION`, which clients treat as retriable, as Kafka answers
//! names it does not (yet) create.

use std::{sync::Mutex, time::Instant};

/// The broker-wide token bucket, plus the per-request bound handed to each
/// [`AutoCreateBudget`].
#[derive(Debug)]
pub struct AutoCreateLimiter {
    per_request: u32,
    per_sec: u32,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Topics that may be created now (fractional while refilling).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl AutoCreateLimiter {
    /// At most `per_request` creations per request and `per_sec` per second (both at
    /// least 1); the bucket starts full.
    pub fn new(per_request: u32, per_sec: u32) -> AutoCreateLimiter {
        let per_sec = per_sec.max(1);
        AutoCreateLimiter {
            per_request: per_request.max(1),
            per_sec,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(per_sec),
                at: Instant::now(),
            }),
        }
    }

    /// The budget of one request.
    pub fn request(&self) -> AutoCreateBudget<'_> {
        AutoCreateBudget {
            limiter: self,
            left: self.per_request,
        }
    }

    /// Takes one token at `now` if the bucket has one.
    pub fn take_at(&self, now: Instant) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(bucket.at);
        bucket.at = bucket.at.max(now);
        let capacity = f64::from(self.per_sec);
        bucket.tokens = (bucket.tokens + elapsed.as_secs_f64() * capacity).min(capacity);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What one request may still auto-create: from [`AutoCreateLimiter::request`].
#[derive(Debug)]
pub struct AutoCreateBudget<'a> {
    limiter: &'a AutoCreateLimiter,
    left: u32,
}

impl AutoCreateBudget<'_> {
    /// Whether one more topic may be created by this request now; takes it from both
    /// bounds if so.
    pub fn try_take(&mut self) -> bool {
        if self.left == 0 || !self.limiter.take_at(Instant::now()) {
            return false;
        }
        self.left -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn per_request_and_per_second_bounds() {
        let limiter = AutoCreateLimiter::new(3, 5);
        let mut first = limiter.request();
        assert_eq!((0..10).filter(|_| first.try_take()).count(), 3);
        let mut second = limiter.request();
        assert_eq!(
            (0..10).filter(|_| second.try_take()).count(),
            2,
            "bucket of 5"
        );
        assert!(!limiter.request().try_take());
    }

    #[test]
    fn the_bucket_refills_at_the_rate_and_holds_one_second() {
        let limiter = AutoCreateLimiter::new(100, 10);
        let t0 = Instant::now();
        assert_eq!((0..20).filter(|_| limiter.take_at(t0)).count(), 10);
        assert!(!limiter.take_at(t0));
        let later = t0 + Duration::from_millis(300);
        assert_eq!((0..20).filter(|_| limiter.take_at(later)).count(), 3);
        let much_later = later + Duration::from_secs(60);
        assert_eq!((0..20).filter(|_| limiter.take_at(much_later)).count(), 10);
    }
}
