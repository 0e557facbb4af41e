//! # drover-rate-limit — rate-limited log lines
//!
//! Log lines for events a client (or a misbehaving plugin) can repeat at will (refused
//! frames, refused connections, failed appends under a disk-full or descriptor storm,
//! coordinator outputs of an unknown variant): at most one line per kind of event per
//! [`INTERVAL`], and the line that is written says how many were left out since the
//! previous one (`suppressed = N`).
//!
//! A crate of its own so that the broker host (`drover-host`, which re-exports it as
//! `logging::rate_limit` and the macros at its root) and the plugin loader
//! (`drover-plugin-loader`) share one table.
//!
//! Kinds are `&'static str` keys chosen at the call site, so the table holds one entry
//! per call site and cannot grow with what clients send. Use the macros (the calling
//! crate depends on `tracing`):
//!
//! ```
//! drover_rate_limit::warn_limited!("produce.append_failed", topic = "t", "append failed: {}", "EMFILE");
//! drover_rate_limit::info_limited!("conn.refused", "connection refused: over the per-address limit");
//! ```

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
    time::{Duration, Instant},
};

/// The shortest time between two lines of one kind: 1 s.
pub const INTERVAL: Duration = Duration::from_secs(1);

struct Slot {
    last: Instant,
    suppressed: u64,
}

static TABLE: LazyLock<Mutex<HashMap<&'static str, Slot>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Whether a line of kind `key` may be written now. `Some(n)`: write it, and say that
/// `n` lines of this kind were left out since the previous one; `None`: leave it out
/// (it is counted).
pub fn allow(key: &'static str) -> Option<u64> {
    allow_at(key, Instant::now())
}

/// [`allow`] at time `now` (for tests).
pub fn allow_at(key: &'static str, now: Instant) -> Option<u64> {
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    match table.get_mut(key) {
        Some(slot) if now.saturating_duration_since(slot.last) < INTERVAL => {
            slot.suppressed += 1;
            None
        }
        Some(slot) => {
            slot.last = now;
            Some(std::mem::take(&mut slot.suppressed))
        }
        None => {
            table.insert(
                key,
                Slot {
                    last: now,
                    suppressed: 0,
                },
            );
            Some(0)
        }
    }
}

/// `tracing::warn!`, at most once per second per `key` (a `&'static str`), with a
/// `suppressed` field counting the lines left out since the previous one.
#[macro_export]
macro_rules! warn_limited {
    ($key:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $crate::allow($key) {
            ::tracing::warn!(suppressed, $($arg)+);
        }
    };
}

/// `tracing::info!`, at most once per second per `key`; see [`warn_limited!`].
#[macro_export]
macro_rules! info_limited {
    ($key:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $crate::allow($key) {
            ::tracing::info!(suppressed, $($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_count_of_those_left_out() {
        let t0 = Instant::now();
        let key = "test.rate_limit.one_line";
        assert_eq!(allow_at(key, t0), Some(0));
        for i in 1..=5 {
            assert_eq!(allow_at(key, t0 + Duration::from_millis(i * 100)), None);
        }
        assert_eq!(allow_at(key, t0 + INTERVAL), Some(5));
        assert_eq!(
            allow_at(key, t0 + INTERVAL + Duration::from_millis(1)),
            None
        );
        assert_eq!(allow_at(key, t0 + INTERVAL * 3), Some(1));
    }

    #[test]
    fn kinds_are_limited_separately() {
        let t0 = Instant::now();
        assert_eq!(allow_at("test.rate_limit.a", t0), Some(0));
        assert_eq!(allow_at("test.rate_limit.b", t0), Some(0));
        assert_eq!(allow_at("test.rate_limit.a", t0), None);
    }
}
