//! The limits of a share-partition and where a new one starts.
//!
//! Kafka's names and defaults (KIP-932, "Configuration"):
//! `group.share.record.lock.duration.ms` (30 s; Kafka's minimum
//! `group.share.min.record.lock.duration.ms` is 15 s), `group.share.delivery.count.limit`
//! (5; 2–10), `group.share.partition.max.record.locks` (2000; 100–10,000), and the group
//! config `share.auto.offset.reset` (`latest`, `earliest`, or `by_duration:<ISO-8601
//! duration>`, KIP-1106).

/// A value out of its range, or an unreadable `share.auto.offset.reset`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A limit outside Kafka's range.
    #[error("{name} = {value} is out of range ({min}..={max})")]
    OutOfRange {
        /// The config's Kafka name.
        name: &'static str,
        /// The value given.
        value: u64,
        /// The smallest allowed.
        min: u64,
        /// The largest allowed.
        max: u64,
    },
    /// Not `latest`, `earliest` or `by_duration:<ISO-8601 duration>`.
    #[error("share.auto.offset.reset = {0:?}: expected latest, earliest or by_duration:<ISO-8601 duration such as PT1H>")]
    BadReset(String),
}

/// The limits one share-partition keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    /// How long an acquired record stays with its member before it is available again,
    /// in ms (`group.share.record.lock.duration.ms`).
    pub record_lock_duration_ms: u64,
    /// Deliveries after which a released or expired record is archived instead of made
    /// available again (`group.share.delivery.count.limit`).
    pub delivery_count_limit: u16,
    /// At most this many records between the start and end offsets (in flight), which
    /// bounds the state kept and persisted per share-partition
    /// (`group.share.partition.max.record.locks`).
    pub max_record_locks: u32,
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits {
            record_lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_record_locks: 2000,
        }
    }
}

impl ShareLimits {
    /// The smallest lock duration, ms (Kafka's `group.share.min.record.lock.duration.ms`).
    pub const MIN_LOCK_DURATION_MS: u64 = 15_000;
    /// The largest lock duration, ms (Kafka's `group.share.max.record.lock.duration.ms`).
    pub const MAX_LOCK_DURATION_MS: u64 = 3_600_000;
    /// The largest `max_record_locks` (Kafka's upper bound): no window, restored or
    /// not, holds more offsets.
    pub const MAX_RECORD_LOCKS_CAP: u32 = 10_000;

    /// Checks every limit against Kafka's range.
    pub fn check(&self) -> Result<(), ConfigError> {
        range(
            "group.share.record.lock.duration.ms",
            self.record_lock_duration_ms,
            Self::MIN_LOCK_DURATION_MS,
            Self::MAX_LOCK_DURATION_MS,
        )?;
        range(
            "group.share.delivery.count.limit",
            self.delivery_count_limit.into(),
            2,
            10,
        )?;
        range(
            "group.share.partition.max.record.locks",
            self.max_record_locks.into(),
            100,
            Self::MAX_RECORD_LOCKS_CAP.into(),
        )
    }
}

fn range(name: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            name,
            value,
            min,
            max,
        })
    }
}

/// Where a share-partition with no saved state starts (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// At the log end: only records produced from now on (Kafka's default).
    #[default]
    Latest,
    /// At the log start.
    Earliest,
    /// At the first record no older than this many ms (KIP-1106); at the log end when
    /// there is none.
    ByDuration(u64),
}

impl AutoOffsetReset {
    /// Reads `latest`, `earliest` or `by_duration:<ISO-8601 duration>` (Java's
    /// `Duration.parse` form, `PnDTnHnMn.nS`, not negative).
    pub fn parse(text: &str) -> Result<AutoOffsetReset, ConfigError> {
        let bad = || ConfigError::BadReset(text.to_owned());
        match text {
            "latest" => Ok(AutoOffsetReset::Latest),
            "earliest" => Ok(AutoOffsetReset::Earliest),
            _ => {
                let iso = text.strip_prefix("by_duration:").ok_or_else(bad)?;
                parse_iso_duration_ms(iso)
                    .map(AutoOffsetReset::ByDuration)
                    .ok_or_else(bad)
            }
        }
    }

    /// The start offset of a new share-partition whose log holds `log_start..log_end`,
    /// at `now_ms`; `offset_at` answers the first offset whose timestamp is at or after
    /// a time in ms (ListOffsets by timestamp), `None` when no record is that new.
    pub fn start_offset(
        self,
        log_start: i64,
        log_end: i64,
        now_ms: i64,
        offset_at: impl FnOnce(i64) -> Option<i64>,
    ) -> i64 {
        match self {
            AutoOffsetReset::Latest => log_end,
            AutoOffsetReset::Earliest => log_start,
            AutoOffsetReset::ByDuration(ms) => {
                let since = now_ms.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX));
                offset_at(since).map_or(log_end, |o| o.clamp(log_start, log_end))
            }
        }
    }
}

impl std::fmt::Display for AutoOffsetReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AutoOffsetReset::Latest => f.write_str("latest"),
            AutoOffsetReset::Earliest => f.write_str("earliest"),
            AutoOffsetReset::ByDuration(ms) => {
                write!(f, "by_duration:PT{}.{:03}S", ms / 1000, ms % 1000)
            }
        }
    }
}

/// Parses an ISO-8601 duration in Java's `Duration.parse` form — `P`, then days `nD`,
/// then after `T` hours `nH`, minutes `nM`, seconds `n[.fff]S`, each optional but at
/// least one — into ms. Case-insensitive like Java's; no sign, no years or months.
pub fn parse_iso_duration_ms(text: &str) -> Option<u64> {
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total: u64 = 0;
    let mut any = false;
    if !days.is_empty() {
        let n: u64 = days.strip_suffix('D')?.parse().ok()?;
        total = total.checked_add(n.checked_mul(86_400_000)?)?;
        any = true;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return None;
        }
        for (unit, ms) in [('H', 3_600_000u64), ('M', 60_000)] {
            if let Some((n, after)) = time.split_once(unit) {
                let n: u64 = n.parse().ok()?;
                total = total.checked_add(n.checked_mul(ms)?)?;
                time = after;
                any = true;
            }
        }
        if !time.is_empty() {
            let secs = time.strip_suffix('S')?;
            let (whole, frac) = secs.split_once('.').unwrap_or((secs, ""));
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let whole: u64 = whole.parse().ok()?;
            let frac_ms: u64 = format!("{frac:0<3}")[..3].parse().ok()?;
            total = total.checked_add(whole.checked_mul(1000)?.checked_add(frac_ms)?)?;
            any = true;
        }
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafkas_reset_values() {
        assert_eq!(
            AutoOffsetReset::parse("latest"),
            Ok(AutoOffsetReset::Latest)
        );
        assert_eq!(
            AutoOffsetReset::parse("earliest"),
            Ok(AutoOffsetReset::Earliest)
        );
        assert_eq!(
            AutoOffsetReset::parse("by_duration:PT1H"),
            Ok(AutoOffsetReset::ByDuration(3_600_000))
        );
        assert_eq!(
            AutoOffsetReset::parse("by_duration:P1DT2M3.5S"),
            Ok(AutoOffsetReset::ByDuration(86_400_000 + 120_000 + 3_500))
        );
        for bad in [
            "",
            "none",
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:1H",
            "by_duration:-PT1S",
            "by_duration:PT1X",
        ] {
            assert!(AutoOffsetReset::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn start_offsets() {
        let none = |_| None;
        assert_eq!(AutoOffsetReset::Latest.start_offset(3, 10, 0, none), 10);
        assert_eq!(AutoOffsetReset::Earliest.start_offset(3, 10, 0, none), 3);
        let by = AutoOffsetReset::ByDuration(1000);
        assert_eq!(
            by.start_offset(3, 10, 5000, |t| (t == 4000).then_some(6)),
            6
        );
        assert_eq!(by.start_offset(3, 10, 5000, none), 10);
    }

    #[test]
    fn limits_follow_kafkas_ranges() {
        assert_eq!(ShareLimits::default().check(), Ok(()));
        let short = ShareLimits {
            record_lock_duration_ms: 14_999,
            ..ShareLimits::default()
        };
        assert!(short.check().is_err());
        let many = ShareLimits {
            delivery_count_limit: 11,
            ..ShareLimits::default()
        };
        assert!(many.check().is_err());
    }
}
