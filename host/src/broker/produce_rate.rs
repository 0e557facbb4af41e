//! A partition's recent produce rate (bytes and records per second), measured over a
//! sliding window (`coordinator.produce_rate_window_ms`) for assignors (docs/plugins.md,
//! "What an assignor sees").
//!
//! The window is cut into [`BUCKETS`] time buckets of `window / BUCKETS` ms, kept in a
//! ring: an append adds its bytes and records to the bucket of its time (two atomic
//! adds; the first append of a bucket's new turn also resets it), a reader sums the
//! buckets still inside the window and divides by the time they cover. No lock, no
//! allocation, 12 × 24 bytes per partition. Times are the broker's wall clock in ms,
//! passed in by the caller (tests use virtual time).
//!
//! The figures are approximate by design: an add racing with the reset of a bucket's
//! new turn may be lost, and a reader may miss adds in flight.
//!
//! A rate is a measurement or nothing: before a partition's first append since the
//! broker started, its rate is unknown (`None`) until a whole window has passed with
//! none (then it is a measured 0), so that right after a restart an assignor does not
//! read every partition as idle and balance by partition count (issue 28 item 3); after
//! the first append it covers the time since that append (the measured window).

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets per window.
pub const BUCKETS: u64 = 12;

/// A produce rate, per second, over the window (or less: see [`ProduceRate::rate`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Bytes of record batches appended per second (batch sizes as stored).
    pub bytes_per_sec: f64,
    /// Records appended per second.
    pub records_per_sec: f64,
}

#[derive(Default)]
struct Bucket {
    /// Which turn of the ring the counts belong to: bucket number (time / width) + 1;
    /// 0 when never used.
    turn: AtomicU64,
    bytes: AtomicU64,
    records: AtomicU64,
}

/// One partition's produce counters. [`ProduceRate::record`] is called once per
/// appended batch, [`ProduceRate::rate`] when the broker reports its partitions.
pub struct ProduceRate {
    /// Width of a bucket, ms (≥ 1).
    bucket_ms: u64,
    buckets: [Bucket; BUCKETS as usize],
    /// Time of the first append since the broker started, ms + 1; 0 before it. A rate
    /// covers no time before it (a partition that started receiving 2 s ago has a rate
    /// over 2 s, not over the whole window).
    first: AtomicU64,
    /// When counting started (the partition was opened), ms since the epoch.
    started_ms: i64,
    /// The window, ms.
    window_ms: u64,
}

impl std::fmt::Debug for ProduceRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProduceRate")
            .field("bucket_ms", &self.bucket_ms)
            .finish_non_exhaustive()
    }
}

impl ProduceRate {
    /// Counters over a window of `window_ms` ms (config `coordinator.produce_rate_window_ms`,
    /// at least 1000 there; any value ≥ 1 works here), counting from `started_ms` (wall
    /// clock, ms since the epoch: when the partition was opened).
    pub fn new(window_ms: u64, started_ms: i64) -> Self {
        ProduceRate {
            bucket_ms: (window_ms / BUCKETS).max(1),
            buckets: Default::default(),
            first: AtomicU64::new(0),
            started_ms,
            window_ms: window_ms.max(1),
        }
    }

    /// Counts an appended batch of `bytes` bytes and `records` records at `now_ms`
    /// (wall clock, ms since the epoch; a negative time or count counts as 0).
    pub fn record(&self, now_ms: i64, bytes: u64, records: i64) {
        let now = u64::try_from(now_ms).unwrap_or(0);
        let records = u64::try_from(records).unwrap_or(0);
        let turn = now / self.bucket_ms + 1;
        let bucket = &self.buckets[(turn % BUCKETS) as usize];
        let seen = bucket.turn.load(Ordering::Acquire);
        // A bucket from an older turn starts over; one from a newer turn (the clock
        // went back) takes the counts as they are.
        if seen < turn
            && bucket
                .turn
                .compare_exchange(seen, turn, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            bucket.bytes.store(0, Ordering::Relaxed);
            bucket.records.store(0, Ordering::Relaxed);
        }
        bucket.bytes.fetch_add(bytes, Ordering::Relaxed);
        bucket.records.fetch_add(records, Ordering::Relaxed);
        if self.first.load(Ordering::Relaxed) == 0 {
            let _ = self
                .first
                .compare_exchange(0, now + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// The rate at `now_ms`: what the buckets of the last [`BUCKETS`] turns (the
    /// current, partial one included) hold, divided by the time from the start of the
    /// oldest of them, or of the bucket of the first append if that is later, to
    /// `now_ms` — and at least one bucket's width, so a rate read right after the
    /// first append is not inflated. Before any append: zero once a whole window has
    /// passed since counting started, `None` (not measured yet) before.
    pub fn rate(&self, now_ms: i64) -> Option<Rate> {
        let now = u64::try_from(now_ms).unwrap_or(0);
        let first = self.first.load(Ordering::Relaxed);
        if first == 0 {
            let watched = now_ms.saturating_sub(self.started_ms);
            return (watched >= 0 && watched as u64 >= self.window_ms).then_some(Rate {
                bytes_per_sec: 0.0,
                records_per_sec: 0.0,
            });
        }
        let current = now / self.bucket_ms + 1;
        let oldest = current.saturating_sub(BUCKETS - 1).max(1);
        let (mut bytes, mut records) = (0u64, 0u64);
        for bucket in &self.buckets {
            let turn = bucket.turn.load(Ordering::Acquire);
            if (oldest..=current).contains(&turn) {
                bytes = bytes.saturating_add(bucket.bytes.load(Ordering::Relaxed));
                records = records.saturating_add(bucket.records.load(Ordering::Relaxed));
            }
        }
        let first_bucket_start = (first - 1) / self.bucket_ms * self.bucket_ms;
        let start = ((oldest - 1) * self.bucket_ms).max(first_bucket_start);
        let elapsed_ms = now.saturating_sub(start).max(self.bucket_ms);
        let secs = elapsed_ms as f64 / 1000.0;
        Some(Rate {
            bytes_per_sec: bytes as f64 / secs,
            records_per_sec: records as f64 / secs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 12 s window: 1 s buckets.
    const WINDOW: u64 = 12_000;
    const T0: i64 = 1_700_000_000_000;

    /// Issue 28 item 3: before a whole window has passed with no append, the rate is
    /// not measured yet (after a restart every partition would otherwise read as idle);
    /// after one, no appends is a measured rate of zero.
    #[test]
    fn no_appends_is_unknown_until_a_window_passed_then_zero() {
        let r = ProduceRate::new(WINDOW, T0);
        assert_eq!(r.rate(T0), None);
        assert_eq!(r.rate(T0 + WINDOW as i64 - 1), None);
        let rate = r.rate(T0 + WINDOW as i64).unwrap();
        assert_eq!((rate.bytes_per_sec, rate.records_per_sec), (0.0, 0.0));
    }

    #[test]
    fn a_steady_stream_is_measured_over_the_window() {
        let r = ProduceRate::new(WINDOW, T0);
        // 1,000 bytes and 10 records every 100 ms for 30 s: 10 kB/s, 100 records/s.
        for i in 0..300 {
            r.record(T0 + i * 100, 1_000, 10);
        }
        let rate = r.rate(T0 + 30_000).unwrap();
        assert!((rate.bytes_per_sec - 10_000.0).abs() < 1_000.0, "{rate:?}");
        assert!((rate.records_per_sec - 100.0).abs() < 10.0, "{rate:?}");
    }

    #[test]
    fn a_young_partition_is_not_diluted_by_the_whole_window() {
        let r = ProduceRate::new(WINDOW, T0);
        // 3 s at 1 kB/s, read at once: about 1 kB/s, not 3 kB / 12 s.
        for i in 0..30 {
            r.record(T0 + i * 100, 100, 1);
        }
        let rate = r.rate(T0 + 3_000).unwrap();
        assert!((rate.bytes_per_sec - 1_000.0).abs() < 100.0, "{rate:?}");
    }

    #[test]
    fn a_single_append_read_at_once_counts_over_one_bucket() {
        let r = ProduceRate::new(WINDOW, T0);
        r.record(T0, 500, 5);
        let rate = r.rate(T0).unwrap();
        assert_eq!(rate.bytes_per_sec, 500.0);
        assert_eq!(rate.records_per_sec, 5.0);
    }

    #[test]
    fn old_traffic_leaves_the_window() {
        let r = ProduceRate::new(WINDOW, T0);
        for i in 0..100 {
            r.record(T0 + i * 10, 1_000, 1);
        }
        assert!(r.rate(T0 + 5_000).unwrap().bytes_per_sec > 0.0);
        // A full window later nothing is left.
        assert_eq!(r.rate(T0 + 1_000 + 13_000).unwrap().bytes_per_sec, 0.0);
        // A bucket reused in a later turn starts over.
        r.record(T0 + 24_000, 7, 1);
        let rate = r.rate(T0 + 24_000).unwrap();
        assert!(rate.bytes_per_sec < 10.0, "{rate:?}");
    }

    #[test]
    fn a_clock_going_back_keeps_counting() {
        let r = ProduceRate::new(WINDOW, T0);
        r.record(T0 + 5_000, 100, 1);
        r.record(T0 + 4_000, 100, 1);
        assert!(r.rate(T0 + 5_000).unwrap().records_per_sec > 0.0);
    }
}
