//! [`Level`]: an `f64` load ordered totally, for heaps and tie-breaking keys.

use std::cmp::Ordering;

/// A load (or load per unit of weight) with a total order (`f64::total_cmp`); loads
/// are finite and non-negative, so this is the numeric order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Level(pub f64);

impl PartialEq for Level {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Level {}

impl PartialOrd for Level {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Level {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}
