//! What a share-partition holds and has done, for operators (issue 31 item 5: the admin
//! API and the metrics show, per share-partition, the start and end offsets, the
//! records in flight, a delivery-count histogram and the archived count).
//!
//! - [`WindowCounts`]: the records of the in-flight window by state, now; computed from
//!   a live [`crate::SharePartition`] or from a saved [`crate::ShareSnapshot`] alike.
//! - [`ShareCounters`]: what happened since the share-partition was loaded into memory:
//!   deliveries by their delivery count, records acknowledged and archived. They are
//!   not persisted (the snapshot is Kafka's share-group state, which has no such
//!   field): they start at zero each time the state is loaded.

use crate::{record_state::RecordState, snapshot::StateRun};

/// How many buckets [`ShareCounters::deliveries`] has: `group.share.delivery.count.limit`
/// is at most 10 (Kafka's bound), so the last bucket holds only tenth deliveries unless a
/// state restored from a larger limit goes beyond.
pub const DELIVERY_BUCKETS: usize = 10;

/// The records of a share-partition's in-flight window, [start offset, end offset), by
/// state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Available: fetched before and released, or not yet handed out.
    pub available: u64,
    /// Acquired by a member, under a lock: the records in flight.
    pub acquired: u64,
    /// Acknowledged (Accept), above the start offset (an earlier offset is still open).
    pub acknowledged: u64,
    /// Archived (Reject, Gap, aborted, or the delivery-count limit), above the start
    /// offset.
    pub archived: u64,
}

impl WindowCounts {
    /// Counts `n` records in `state`.
    pub(crate) fn add(&mut self, state: RecordState, n: u64) {
        let slot = match state {
            RecordState::Available => &mut self.available,
            RecordState::Acquired => &mut self.acquired,
            RecordState::Acknowledged => &mut self.acknowledged,
            RecordState::Archived => &mut self.archived,
        };
        *slot = slot.saturating_add(n);
    }

    /// The counts of the runs of a snapshot.
    pub fn of_runs(runs: &[StateRun]) -> WindowCounts {
        let mut out = WindowCounts::default();
        for run in runs {
            let len = run
                .last_offset
                .saturating_sub(run.first_offset)
                .saturating_add(1);
            out.add(run.state, u64::try_from(len).unwrap_or(0));
        }
        out
    }
}

/// What a share-partition did since it was loaded (module docs). Adding two (a
/// share-partition dropped from memory into a broker-wide total) keeps each count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareCounters {
    /// Deliveries (acquisitions) by delivery count: `[0]` first deliveries, `[1]`
    /// second ones, …, `[DELIVERY_BUCKETS - 1]` the tenth and later.
    pub deliveries: [u64; DELIVERY_BUCKETS],
    /// Records acknowledged (Accept).
    pub acknowledged: u64,
    /// Records archived: rejected, acknowledged as gaps, aborted (read_committed), or
    /// released or expired at the delivery-count limit (also those found at the limit
    /// when the state was loaded).
    pub archived: u64,
}

impl ShareCounters {
    /// A delivery of a record for the `delivery_count`th time (≥ 1).
    pub(crate) fn delivered(&mut self, delivery_count: u16) {
        let bucket = usize::from(delivery_count.max(1) - 1).min(DELIVERY_BUCKETS - 1);
        self.deliveries[bucket] = self.deliveries[bucket].saturating_add(1);
    }

    /// A record reached `state`: counted when it is final.
    pub(crate) fn finished(&mut self, state: RecordState) {
        match state {
            RecordState::Acknowledged => self.acknowledged = self.acknowledged.saturating_add(1),
            RecordState::Archived => self.archived = self.archived.saturating_add(1),
            RecordState::Available | RecordState::Acquired => {}
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ShareCounters) {
        for (mine, theirs) in self.deliveries.iter_mut().zip(other.deliveries) {
            *mine = mine.saturating_add(theirs);
        }
        self.acknowledged = self.acknowledged.saturating_add(other.acknowledged);
        self.archived = self.archived.saturating_add(other.archived);
    }

    /// Every delivery counted.
    pub fn total_deliveries(&self) -> u64 {
        self.deliveries
            .iter()
            .fold(0u64, |a, d| a.saturating_add(*d))
    }
}

/// One share-partition as operators see it: where its window is, what is in it, and
/// what it did since it was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareStats {
    /// The share-partition start offset (SPSO).
    pub start_offset: i64,
    /// The share-partition end offset (SPEO): one past the last offset fetched.
    pub end_offset: i64,
    /// The window's records by state.
    pub window: WindowCounts,
    /// Since loaded.
    pub counters: ShareCounters,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: i64, last: i64, state: RecordState, delivery_count: u16) -> StateRun {
        StateRun {
            first_offset: first,
            last_offset: last,
            state,
            delivery_count,
        }
    }

    #[test]
    fn window_counts_of_runs_count_each_offset_by_state() {
        let runs = [
            run(10, 12, RecordState::Acquired, 1),
            run(13, 13, RecordState::Archived, 2),
            run(14, 17, RecordState::Available, 0),
            run(18, 18, RecordState::Acknowledged, 1),
        ];
        assert_eq!(
            WindowCounts::of_runs(&runs),
            WindowCounts {
                available: 4,
                acquired: 3,
                acknowledged: 1,
                archived: 1,
            }
        );
        assert_eq!(WindowCounts::of_runs(&[]), WindowCounts::default());
    }

    #[test]
    fn deliveries_go_to_their_bucket_and_later_ones_to_the_last() {
        let mut c = ShareCounters::default();
        c.delivered(1);
        c.delivered(1);
        c.delivered(2);
        c.delivered(10);
        c.delivered(40);
        c.delivered(0); // not a delivery count a record has; counted as a first
        assert_eq!(c.deliveries[0], 3);
        assert_eq!(c.deliveries[1], 1);
        assert_eq!(c.deliveries[DELIVERY_BUCKETS - 1], 2);
        assert_eq!(c.total_deliveries(), 6);
    }

    #[test]
    fn only_final_states_are_counted_and_adding_keeps_every_count() {
        let mut a = ShareCounters::default();
        a.finished(RecordState::Acknowledged);
        a.finished(RecordState::Archived);
        a.finished(RecordState::Archived);
        a.finished(RecordState::Available);
        a.finished(RecordState::Acquired);
        a.delivered(3);
        assert_eq!((a.acknowledged, a.archived), (1, 2));
        let mut total = ShareCounters::default();
        total.add(&a);
        total.add(&a);
        assert_eq!((total.acknowledged, total.archived), (2, 4));
        assert_eq!(total.deliveries[2], 2);
    }
}
