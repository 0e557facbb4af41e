//! A log rate limit on the coordinator's own clock: at most one line per interval for a
//! kind of message a client can cause at will (a refused request, one per frame), with
//! the number of lines held back since the last one. Time is the `now` the core is
//! handed (`handle(now, input)`), so the limit is as deterministic as the rest of the
//! core; no clock is read.

/// Lets one line through per `interval_ms` and counts the ones it holds back.
#[derive(Debug)]
pub(crate) struct LogLimit {
    interval_ms: u64,
    /// When the next line may be written (ms, the core's clock); `None` before the
    /// first.
    next_at: Option<u64>,
    suppressed: u64,
}

impl LogLimit {
    /// A limit of one line per `interval_ms` ms.
    pub(crate) const fn new(interval_ms: u64) -> Self {
        LogLimit {
            interval_ms,
            next_at: None,
            suppressed: 0,
        }
    }

    /// Whether a line may be written at `now` (ms); if so, how many lines were held
    /// back since the last one written.
    pub(crate) fn allow(&mut self, now: u64) -> Option<u64> {
        if self.next_at.is_some_and(|at| now < at) {
            self.suppressed += 1;
            return None;
        }
        self.next_at = Some(now.saturating_add(self.interval_ms));
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let mut limit = LogLimit::new(1_000);
        assert_eq!(limit.allow(0), Some(0));
        assert_eq!(limit.allow(1), None);
        assert_eq!(limit.allow(999), None);
        assert_eq!(limit.allow(1_000), Some(2));
        assert_eq!(limit.allow(1_500), None);
        assert_eq!(limit.allow(5_000), Some(1));
        assert_eq!(limit.allow(5_001), None);
    }
}
