//! The host's two clocks whose readings leave the process or reach a plugin: Kafka
//! timestamps and coordinator time. (Local deadlines — a frame's read timeout, a long
//! poll, a rate limit — read `Instant::now()` where they are kept.)
//!
//! - [`now_ms`]: the wall clock, milliseconds since the Unix epoch. Kafka timestamps
//!   (log append times, the log's time-based roll, flush and retention, the offset-store
//!   swap record, KIP-211 offset expiry) use it, as Kafka's `Time.milliseconds()` does.
//! - [`Epoch`]: a monotonic clock counting milliseconds from a start instant. The
//!   coordinator is given time on it (`handle(now, input)`, `poll_timeout()` deadlines,
//!   docs/design.md, "The coordinator core is sans-IO"), so a wall-clock step never
//!   fires or delays a session timeout; connection admission uses it for idle times.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch on the wall clock; 0 if the clock reads before
/// 1970.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A monotonic clock in milliseconds since it was started.
#[derive(Debug, Clone, Copy)]
pub struct Epoch {
    start: Instant,
}

impl Epoch {
    /// A clock reading 0 ms now.
    pub fn start() -> Epoch {
        Epoch {
            start: Instant::now(),
        }
    }

    /// Milliseconds elapsed since [`Epoch::start`].
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// The instant at which this clock reads `ms` milliseconds (a deadline such as the
    /// coordinator's `poll_timeout`).
    pub fn instant_at(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_starts_at_zero_and_maps_deadlines_back_to_instants() {
        let epoch = Epoch::start();
        let now = epoch.now_ms();
        assert!(epoch.instant_at(now) <= Instant::now());
        assert_eq!(
            epoch.instant_at(1_500) - epoch.instant_at(500),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn the_wall_clock_is_after_2020() {
        assert!(now_ms() > 1_577_836_800_000);
    }
}
