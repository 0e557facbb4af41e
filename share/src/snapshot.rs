//! A share-partition's state as it is made durable (Kafka's share-group state:
//! `WriteShareGroupState`'s start offset, state epoch and state batches).
//!
//! The snapshot is the whole in-flight window, [start offset, end offset), as runs of
//! offsets with one state and delivery count each. The window is bounded by
//! `group.share.partition.max.record.locks`, so a snapshot is too. Restoring one makes
//! acquired records available again with their delivery count kept (KIP-932: records
//! acquired when the leader fails count as delivered).

use crate::record_state::RecordState;

/// Consecutive offsets in one state with one delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRun {
    /// The first offset.
    pub first_offset: i64,
    /// The last offset (inclusive).
    pub last_offset: i64,
    /// Their state.
    pub state: RecordState,
    /// How often they were delivered (acquired).
    pub delivery_count: u16,
}

/// One share-partition's durable state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareSnapshot {
    /// The share-partition start offset (SPSO): every offset below is done with.
    pub start_offset: i64,
    /// Incremented each time the state is loaded (Kafka's state epoch).
    pub state_epoch: i32,
    /// The in-flight window from `start_offset`, in offset order without gaps; the end
    /// offset (SPEO) is one past the last run's last offset.
    pub runs: Vec<StateRun>,
}

impl ShareSnapshot {
    /// The end offset (SPEO): where the window ends.
    pub fn end_offset(&self) -> i64 {
        self.runs
            .last()
            .map_or(self.start_offset, |r| r.last_offset + 1)
    }

    /// Whether the runs start at the start offset, follow each other without gap or
    /// overlap and are not empty: a snapshot read from a store is checked with this
    /// before it is restored.
    pub fn is_well_formed(&self) -> bool {
        let mut next = self.start_offset;
        for run in &self.runs {
            if run.first_offset != next || run.last_offset < run.first_offset {
                return false;
            }
            next = match run.last_offset.checked_add(1) {
                Some(n) => n,
                None => return false,
            };
        }
        true
    }
}
