//! [`SharePartition`]: one share group's view of one topic-partition (KIP-932,
//! "Share-partition"; Kafka's `SharePartition`).
//!
//! It keeps the share-partition start offset (SPSO), the in-flight window from there to
//! the end offset (SPEO), and for each offset in it a [`RecordState`], a delivery count
//! and, while acquired, the member holding it and the lock's deadline. The window
//! holds at most `max_record_locks` offsets; the start offset moves forward over
//! offsets that are done with (acknowledged or archived) and never back.
//!
//! Calls, each with `now` in ms where time matters:
//! - [`SharePartition::next_fetch_offset`]: where the caller reads the log from;
//! - [`SharePartition::acquire`]: what a member gets of what the log returned;
//! - [`SharePartition::acknowledge`]: a member's acknowledgements, all or nothing;
//! - [`SharePartition::release_member`]: a member's session closed or it left;
//! - [`SharePartition::expire_locks`] at [`SharePartition::poll_timeout`];
//! - [`SharePartition::advance_to`]: the log start moved (retention, DeleteRecords).
//!
//! Every call that changes state says so by returning the snapshot to make durable.

use std::{
    collections::{BTreeSet, VecDeque},
    sync::Arc,
};

use crate::{
    config::ShareLimits,
    log_input::{AbortedRange, LogBatch},
    record_state::{AckType, RecordState},
    snapshot::{ShareSnapshot, StateRun},
    stats::{ShareCounters, ShareStats, WindowCounts},
};

/// A share-group member's id (the member id of its ShareGroupHeartbeat and share
/// session). Shared: every record a member holds names it.
pub type MemberId = Arc<str>;

/// Why an acknowledgement was refused; nothing of the request's batches was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Malformed or out of range: first offset after last, wrong count of types, an
    /// unknown type, batches out of order or overlapping, offsets at or past the end
    /// offset (Kafka: INVALID_REQUEST).
    #[error("invalid acknowledgement: {0}")]
    InvalidRequest(&'static str),
    /// An offset that is not acquired by this member (Kafka: INVALID_RECORD_STATE).
    #[error("invalid record state: {0}")]
    InvalidRecordState(&'static str),
}

/// One acknowledgement batch of a ShareFetch or ShareAcknowledge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    /// The first offset.
    pub first_offset: i64,
    /// The last offset (inclusive).
    pub last_offset: i64,
    /// One type for the whole batch, or one per offset.
    pub types: Vec<AckType>,
}

impl AckBatch {
    /// A batch from the wire's fields, checked (Kafka's `validateAcknowledgementBatches`):
    /// `first <= last`, one type or one per offset, each a known type.
    pub fn from_wire(first: i64, last: i64, codes: &[i8]) -> Result<AckBatch, AckError> {
        if first < 0 || last < first {
            return Err(AckError::InvalidRequest("first offset after last offset"));
        }
        let len = (last - first).checked_add(1);
        if codes.is_empty() || (codes.len() != 1 && len != i64::try_from(codes.len()).ok()) {
            return Err(AckError::InvalidRequest(
                "acknowledge types must be one, or one per offset",
            ));
        }
        let types = codes
            .iter()
            .map(|&c| AckType::from_code(c))
            .collect::<Option<Vec<_>>>()
            .ok_or(AckError::InvalidRequest("unknown acknowledge type"))?;
        Ok(AckBatch {
            first_offset: first,
            last_offset: last,
            types,
        })
    }

    fn type_at(&self, offset: i64) -> AckType {
        if self.types.len() == 1 {
            self.types[0]
        } else {
            self.types[(offset - self.first_offset) as usize]
        }
    }
}

/// Consecutive offsets acquired with one delivery count (ShareFetch's
/// `AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    /// The first offset.
    pub first_offset: i64,
    /// The last offset (inclusive).
    pub last_offset: i64,
    /// How often these offsets have now been delivered, this time included.
    pub delivery_count: u16,
}

/// What a member got from one fetch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Acquired {
    /// The acquired offsets, in order.
    pub ranges: Vec<AcquiredRange>,
    /// How many offsets that is.
    pub count: usize,
    /// The state to make durable before the records are handed out, when it changed.
    pub persist: Option<ShareSnapshot>,
}

#[derive(Debug, Clone)]
struct Slot {
    state: RecordState,
    delivery_count: u16,
    /// Set while acquired.
    owner: Option<MemberId>,
    /// The lock's deadline while acquired, ms.
    deadline_ms: i64,
}

impl Slot {
    fn fresh(state: RecordState) -> Slot {
        Slot {
            state,
            delivery_count: 0,
            owner: None,
            deadline_ms: 0,
        }
    }
}

/// One share-partition's state (module docs).
#[derive(Debug, Clone)]
pub struct SharePartition {
    limits: ShareLimits,
    start: i64,
    state_epoch: i32,
    /// Offsets `start..start + slots.len()`.
    slots: VecDeque<Slot>,
    /// (lock deadline ms, offset) of every acquired offset.
    locks: BTreeSet<(i64, i64)>,
    /// What happened since it was made or loaded (not persisted).
    counters: ShareCounters,
}

impl SharePartition {
    /// A share-partition with no saved state, starting at `start_offset` (from
    /// [`crate::AutoOffsetReset::start_offset`]), state epoch 0.
    pub fn new(limits: ShareLimits, start_offset: i64) -> SharePartition {
        SharePartition {
            limits,
            start: start_offset.max(0),
            state_epoch: 0,
            slots: VecDeque::new(),
            locks: BTreeSet::new(),
            counters: ShareCounters::default(),
        }
    }

    /// The state saved in `snapshot`, loaded again (after a restart, a store swap or a
    /// leader change): the state epoch goes up by one; acquired offsets become
    /// available with their delivery count kept, or archived at the delivery-count
    /// limit; a window longer than `max_record_locks` is kept whole (it was written
    /// under a larger limit). `None` when the snapshot is not well formed.
    pub fn restore(limits: ShareLimits, snapshot: &ShareSnapshot) -> Option<SharePartition> {
        if !snapshot.is_well_formed() || snapshot.start_offset < 0 {
            return None;
        }
        let mut slots = VecDeque::new();
        let mut counters = ShareCounters::default();
        for run in &snapshot.runs {
            let state = match run.state {
                RecordState::Acquired | RecordState::Available
                    if run.delivery_count >= limits.delivery_count_limit =>
                {
                    RecordState::Archived
                }
                RecordState::Acquired => RecordState::Available,
                other => other,
            };
            // The window is bounded: a snapshot claiming more is refused, not allocated.
            let len = run.last_offset - run.first_offset + 1;
            if slots.len() as i64 + len > i64::from(ShareLimits::MAX_RECORD_LOCKS_CAP) {
                return None;
            }
            for _ in 0..len {
                if state == RecordState::Archived && run.state != RecordState::Archived {
                    counters.finished(state);
                }
                slots.push_back(Slot {
                    state,
                    delivery_count: run.delivery_count,
                    owner: None,
                    deadline_ms: 0,
                });
            }
        }
        let mut partition = SharePartition {
            limits,
            start: snapshot.start_offset,
            state_epoch: snapshot.state_epoch.saturating_add(1),
            slots,
            locks: BTreeSet::new(),
            counters,
        };
        partition.advance_start();
        Some(partition)
    }

    /// The share-partition start offset (SPSO).
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The share-partition end offset (SPEO): one past the last offset fetched.
    pub fn end_offset(&self) -> i64 {
        self.start + self.slots.len() as i64
    }

    /// The state epoch.
    pub fn state_epoch(&self) -> i32 {
        self.state_epoch
    }

    /// The limits in force.
    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// How many offsets are acquired now.
    pub fn acquired_count(&self) -> usize {
        self.locks.len()
    }

    /// What operators see of it (`stats`): the start and end offsets, the window's
    /// records by state (one pass over the window, at most `max_record_locks` offsets)
    /// and the counters since it was made or loaded.
    pub fn stats(&self) -> ShareStats {
        let mut window = WindowCounts::default();
        for slot in &self.slots {
            window.add(slot.state, 1);
        }
        ShareStats {
            start_offset: self.start,
            end_offset: self.end_offset(),
            window,
            counters: self.counters,
        }
    }

    /// The counters since it was made or loaded.
    pub fn counters(&self) -> ShareCounters {
        self.counters
    }

    /// The state and delivery count of `offset`: `None` outside the window (below the
    /// start every offset is done with; from the end on none was fetched yet).
    pub fn record(&self, offset: i64) -> Option<(RecordState, u16)> {
        self.slot(offset).map(|s| (s.state, s.delivery_count))
    }

    /// The member holding `offset`, if it is acquired.
    pub fn owner(&self, offset: i64) -> Option<&MemberId> {
        self.slot(offset).and_then(|s| s.owner.as_ref())
    }

    /// Where to read the log from for the next acquisition: the first available offset
    /// in the window, else the end offset; `None` when nothing can be acquired (the
    /// window is full and nothing in it is available).
    pub fn next_fetch_offset(&self) -> Option<i64> {
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| s.state == RecordState::Available)
        {
            return Some(self.start + i as i64);
        }
        (self.slots.len() < self.limits.max_record_locks as usize).then_some(self.end_offset())
    }

    /// The earliest lock deadline (ms), when any offset is acquired: the caller calls
    /// [`Self::expire_locks`] then.
    pub fn poll_timeout(&self) -> Option<i64> {
        self.locks.first().map(|&(deadline, _)| deadline)
    }

    /// Acquires for `member`, at `now_ms`, up to `max_records` offsets of what the log
    /// returned when read from `fetch_offset` (`batches` in offset order; `aborted`, for
    /// read_committed, the aborted transactions the read listed — their records are
    /// archived, not delivered). Available offsets in the window are acquired again
    /// (their delivery count goes up); offsets past the end offset join the window
    /// while it has room. Offsets between batches (compacted away) and control batches
    /// are acquired like records: the consumer acknowledges them as gaps.
    pub fn acquire(
        &mut self,
        member: &MemberId,
        now_ms: i64,
        fetch_offset: i64,
        batches: &[LogBatch],
        aborted: &[AbortedRange],
        max_records: usize,
    ) -> Acquired {
        let mut out = Acquired::default();
        let Some(last) = batches.last() else {
            return out;
        };
        let deadline = now_ms
            .saturating_add(i64::try_from(self.limits.record_lock_duration_ms).unwrap_or(i64::MAX));
        let mut changed = false;
        let mut batch_index = 0;
        // Offsets between the fetch offset and the first batch were compacted away: they
        // are acquired as gaps too.
        let mut offset = fetch_offset.clamp(self.start, self.end_offset());
        while offset <= last.last_offset && out.count < max_records {
            while batch_index < batches.len() && batches[batch_index].last_offset < offset {
                batch_index += 1;
            }
            let aborted_here = batches
                .get(batch_index)
                .is_some_and(|b| b.first_offset <= offset && b.is_aborted(aborted));
            let index = (offset - self.start) as usize;
            if index == self.slots.len() {
                if self.slots.len() >= self.limits.max_record_locks as usize {
                    break;
                }
                self.slots.push_back(Slot::fresh(RecordState::Available));
                changed = true;
            }
            let slot = &mut self.slots[index];
            if slot.state == RecordState::Available {
                changed = true;
                if aborted_here {
                    slot.state = RecordState::Archived;
                    self.counters.finished(RecordState::Archived);
                } else {
                    slot.state = RecordState::Acquired;
                    slot.delivery_count = slot.delivery_count.saturating_add(1);
                    slot.owner = Some(Arc::clone(member));
                    slot.deadline_ms = deadline;
                    self.locks.insert((deadline, offset));
                    out.count += 1;
                    let count = slot.delivery_count;
                    self.counters.delivered(count);
                    match out.ranges.last_mut() {
                        Some(r) if r.last_offset + 1 == offset && r.delivery_count == count => {
                            r.last_offset = offset;
                        }
                        _ => out.ranges.push(AcquiredRange {
                            first_offset: offset,
                            last_offset: offset,
                            delivery_count: count,
                        }),
                    }
                }
            }
            offset += 1;
        }
        if changed {
            self.advance_start();
            out.persist = Some(self.snapshot());
        }
        out
    }

    /// Applies `member`'s acknowledgements, all of them or none (Kafka rolls a failed
    /// partition's acknowledgements back). Batches must be in offset order without
    /// overlap; offsets below the start offset are skipped (already done with); every
    /// other offset must be in the window (else `InvalidRequest`) and acquired by
    /// `member` (else `InvalidRecordState`). Returns the snapshot to make durable before
    /// answering.
    pub fn acknowledge(
        &mut self,
        member: &MemberId,
        batches: &[AckBatch],
    ) -> Result<ShareSnapshot, AckError> {
        let end = self.end_offset();
        let mut previous_last: Option<i64> = None;
        for batch in batches {
            if previous_last.is_some_and(|p| batch.first_offset <= p) {
                return Err(AckError::InvalidRequest(
                    "acknowledgement batches out of order or overlapping",
                ));
            }
            previous_last = Some(batch.last_offset);
            if batch.last_offset < self.start {
                continue;
            }
            if batch.last_offset >= end {
                return Err(AckError::InvalidRequest(
                    "acknowledged offsets past the share-partition end offset",
                ));
            }
            for offset in batch.first_offset.max(self.start)..=batch.last_offset {
                let slot = &self.slots[(offset - self.start) as usize];
                if slot.state != RecordState::Acquired {
                    return Err(AckError::InvalidRecordState("offset not acquired"));
                }
                if slot.owner.as_deref() != Some(&**member) {
                    return Err(AckError::InvalidRecordState(
                        "offset acquired by another member",
                    ));
                }
            }
        }
        for batch in batches {
            if batch.last_offset < self.start {
                continue;
            }
            for offset in batch.first_offset.max(self.start)..=batch.last_offset {
                let to = match batch.type_at(offset) {
                    AckType::Accept => RecordState::Acknowledged,
                    AckType::Release => RecordState::Available,
                    AckType::Reject | AckType::Gap => RecordState::Archived,
                };
                self.finish_lock(offset, to);
            }
        }
        self.advance_start();
        Ok(self.snapshot())
    }

    /// Gives back every offset `member` holds (its share session closed, or it left the
    /// group): available again, or archived at the delivery-count limit. Returns the
    /// snapshot to make durable when anything changed.
    pub fn release_member(&mut self, member: &str) -> Option<ShareSnapshot> {
        let held: Vec<i64> = self
            .locks
            .iter()
            .map(|&(_, offset)| offset)
            .filter(|&o| self.owner(o).is_some_and(|m| &**m == member))
            .collect();
        if held.is_empty() {
            return None;
        }
        for offset in held {
            self.finish_lock(offset, RecordState::Available);
        }
        self.advance_start();
        Some(self.snapshot())
    }

    /// Ends every lock whose deadline is at or before `now_ms`, as a release. Returns
    /// the snapshot to make durable when anything changed.
    pub fn expire_locks(&mut self, now_ms: i64) -> Option<ShareSnapshot> {
        let mut any = false;
        while let Some(&(deadline, offset)) = self.locks.first() {
            if deadline > now_ms {
                break;
            }
            self.finish_lock(offset, RecordState::Available);
            any = true;
        }
        any.then(|| {
            self.advance_start();
            self.snapshot()
        })
    }

    /// The log's start offset moved to `log_start` (retention, DeleteRecords): every
    /// offset below it is gone and done with. Returns the snapshot to make durable when
    /// the start offset moved.
    pub fn advance_to(&mut self, log_start: i64) -> Option<ShareSnapshot> {
        if log_start <= self.start {
            return None;
        }
        while self.start < log_start {
            match self.slots.pop_front() {
                Some(slot) => {
                    if slot.state == RecordState::Acquired {
                        self.locks.remove(&(slot.deadline_ms, self.start));
                    }
                    self.start += 1;
                }
                None => self.start = log_start,
            }
        }
        self.advance_start();
        Some(self.snapshot())
    }

    /// The state to make durable.
    pub fn snapshot(&self) -> ShareSnapshot {
        let mut runs: Vec<StateRun> = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let offset = self.start + i as i64;
            match runs.last_mut() {
                Some(r) if r.state == slot.state && r.delivery_count == slot.delivery_count => {
                    r.last_offset = offset;
                }
                _ => runs.push(StateRun {
                    first_offset: offset,
                    last_offset: offset,
                    state: slot.state,
                    delivery_count: slot.delivery_count,
                }),
            }
        }
        ShareSnapshot {
            start_offset: self.start,
            state_epoch: self.state_epoch,
            runs,
        }
    }

    fn slot(&self, offset: i64) -> Option<&Slot> {
        let index = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.slots.get(index)
    }

    /// Moves an acquired offset to `to` (Available becomes Archived at the
    /// delivery-count limit) and drops its lock.
    fn finish_lock(&mut self, offset: i64, to: RecordState) {
        let limit = self.limits.delivery_count_limit;
        let index = (offset - self.start) as usize;
        let slot = &mut self.slots[index];
        self.locks.remove(&(slot.deadline_ms, offset));
        slot.owner = None;
        slot.deadline_ms = 0;
        slot.state = if to == RecordState::Available && slot.delivery_count >= limit {
            RecordState::Archived
        } else {
            to
        };
        self.counters.finished(slot.state);
    }

    /// Moves the start offset over the done-with offsets at the window's front.
    fn advance_start(&mut self) {
        while self.slots.front().is_some_and(|s| s.state.is_final()) {
            self.slots.pop_front();
            self.start += 1;
        }
    }
}

#[cfg(test)]
mod tests;
