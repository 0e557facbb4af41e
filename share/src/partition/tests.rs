//! The state machine's rules, one test each, and proptest over arbitrary operation
//! sequences for the invariants (no offset held by two members, nothing delivered
//! after Accept or Reject, the start offset only moves forward, delivery counts never
//! go down).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

const LOCK: i64 = 30_000;

fn limits() -> ShareLimits {
    ShareLimits {
        record_lock_duration_ms: LOCK as u64,
        delivery_count_limit: 5,
        max_record_locks: 100,
    }
}

fn member(name: &str) -> MemberId {
    Arc::from(name)
}

/// One plain batch per offset range.
fn batch(first: i64, last: i64) -> LogBatch {
    LogBatch {
        first_offset: first,
        last_offset: last,
        producer_id: -1,
        transactional: false,
        control: false,
    }
}

/// Acquires from where the partition says, out of a log holding `0..log_end` in
/// one-record batches.
fn fetch(p: &mut SharePartition, m: &MemberId, now: i64, log_end: i64, max: usize) -> Acquired {
    let Some(from) = p.next_fetch_offset() else {
        return Acquired::default();
    };
    let batches: Vec<LogBatch> = (from..log_end).map(|o| batch(o, o)).collect();
    p.acquire(m, now, from, &batches, &[], max)
}

fn ack(first: i64, last: i64, t: AckType) -> AckBatch {
    AckBatch {
        first_offset: first,
        last_offset: last,
        types: vec![t],
    }
}

fn range(first: i64, last: i64, count: u16) -> AcquiredRange {
    AcquiredRange {
        first_offset: first,
        last_offset: last,
        delivery_count: count,
    }
}

#[test]
fn two_members_get_different_records() {
    let mut p = SharePartition::new(limits(), 0);
    let (a, b) = (member("a"), member("b"));
    let got_a = fetch(&mut p, &a, 0, 10, 4);
    assert_eq!(got_a.ranges, [range(0, 3, 1)]);
    assert!(got_a.persist.is_some());
    let got_b = fetch(&mut p, &b, 0, 10, 100);
    assert_eq!(got_b.ranges, [range(4, 9, 1)]);
    assert_eq!(p.owner(2).map(|m| &**m), Some("a"));
    assert_eq!(p.owner(5).map(|m| &**m), Some("b"));
    assert_eq!(p.acquired_count(), 10);
    // Nothing left to acquire until more is produced.
    assert!(fetch(&mut p, &a, 0, 10, 100).ranges.is_empty());
}

#[test]
fn release_makes_records_available_with_the_next_delivery_counted() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    fetch(&mut p, &a, 0, 3, 10);
    p.acknowledge(&a, &[ack(1, 1, AckType::Release)]).unwrap();
    assert_eq!(p.record(1), Some((RecordState::Available, 1)));
    assert_eq!(p.next_fetch_offset(), Some(1));
    let again = fetch(&mut p, &member("b"), 10, 3, 10);
    assert_eq!(again.ranges, [range(1, 1, 2)]);
}

#[test]
fn accept_and_reject_are_final_and_move_the_start_offset() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    fetch(&mut p, &a, 0, 4, 10);
    let snap = p
        .acknowledge(&a, &[AckBatch::from_wire(0, 2, &[1, 3, 1]).unwrap()])
        .unwrap();
    assert_eq!(p.start_offset(), 3);
    assert_eq!(snap.start_offset, 3);
    assert_eq!(p.record(1), None, "below the start offset");
    // Offset 3 still acquired; nothing else to deliver.
    assert!(fetch(&mut p, &member("b"), 0, 4, 10).ranges.is_empty());
    // Acknowledging again what is below the start offset is skipped, not an error.
    assert!(p.acknowledge(&a, &[ack(0, 0, AckType::Accept)]).is_ok());
}

#[test]
fn the_fifth_delivery_released_is_archived() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    for n in 1..=5u16 {
        let got = fetch(&mut p, &a, 0, 1, 10);
        assert_eq!(got.ranges, [range(0, 0, n)]);
        p.acknowledge(&a, &[ack(0, 0, AckType::Release)]).unwrap();
    }
    assert_eq!(p.start_offset(), 1, "archived and passed");
    assert!(fetch(&mut p, &a, 0, 1, 10).ranges.is_empty());
}

#[test]
fn an_expired_lock_makes_records_available_again() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    fetch(&mut p, &a, 1000, 2, 10);
    assert_eq!(p.poll_timeout(), Some(1000 + LOCK));
    assert!(p.expire_locks(1000 + LOCK - 1).is_none());
    assert!(p.expire_locks(1000 + LOCK).is_some());
    assert_eq!(p.poll_timeout(), None);
    assert_eq!(p.record(0), Some((RecordState::Available, 1)));
    // The old holder may no longer acknowledge them.
    assert_eq!(
        p.acknowledge(&a, &[ack(0, 1, AckType::Accept)]),
        Err(AckError::InvalidRecordState("offset not acquired"))
    );
    let got = fetch(&mut p, &member("b"), 2000 + LOCK, 2, 10);
    assert_eq!(got.ranges, [range(0, 1, 2)]);
}

#[test]
fn acknowledgements_are_checked_and_all_or_nothing() {
    let mut p = SharePartition::new(limits(), 0);
    let (a, b) = (member("a"), member("b"));
    fetch(&mut p, &a, 0, 4, 2);
    fetch(&mut p, &b, 0, 4, 2);
    let before = p.snapshot();
    // b's records, a record past the end, malformed batches.
    assert!(matches!(
        p.acknowledge(
            &a,
            &[ack(0, 0, AckType::Accept), ack(2, 2, AckType::Accept)]
        ),
        Err(AckError::InvalidRecordState(_))
    ));
    assert!(matches!(
        p.acknowledge(&a, &[ack(0, 4, AckType::Accept)]),
        Err(AckError::InvalidRequest(_))
    ));
    assert!(matches!(
        p.acknowledge(
            &a,
            &[ack(1, 1, AckType::Accept), ack(0, 0, AckType::Accept)]
        ),
        Err(AckError::InvalidRequest(_))
    ));
    assert_eq!(p.snapshot(), before, "nothing applied");
    assert!(AckBatch::from_wire(3, 2, &[1]).is_err());
    assert!(AckBatch::from_wire(0, 2, &[1, 1]).is_err());
    assert!(AckBatch::from_wire(0, 0, &[]).is_err());
    assert!(AckBatch::from_wire(0, 0, &[9]).is_err());
    assert!(AckBatch::from_wire(0, i64::MAX, &[1]).is_ok());
    assert!(matches!(
        p.acknowledge(&a, &[ack(0, i64::MAX, AckType::Accept)]),
        Err(AckError::InvalidRequest(_))
    ));
}

#[test]
fn the_window_holds_at_most_max_record_locks() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    let got = fetch(&mut p, &a, 0, 1000, 1000);
    assert_eq!(got.count, 100);
    assert_eq!(p.end_offset(), 100);
    assert_eq!(p.next_fetch_offset(), None);
    p.acknowledge(&a, &[ack(0, 9, AckType::Accept)]).unwrap();
    assert_eq!(p.next_fetch_offset(), Some(100));
    assert_eq!(fetch(&mut p, &a, 0, 1000, 1000).count, 10);
}

#[test]
fn read_committed_archives_aborted_records_and_delivers_markers_as_gaps() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    let txn = |first, last, control| LogBatch {
        first_offset: first,
        last_offset: last,
        producer_id: 9,
        transactional: true,
        control,
    };
    // 0–1 plain, 2–3 aborted records, 4 the abort marker, 6 a record after a hole at 5.
    let batches = [batch(0, 1), txn(2, 3, false), txn(4, 4, true), batch(6, 6)];
    let aborted = [AbortedRange {
        producer_id: 9,
        first_offset: 2,
        marker_offset: 4,
    }];
    let got = p.acquire(&a, 0, 0, &batches, &aborted, 100);
    assert_eq!(got.ranges, [range(0, 1, 1), range(4, 6, 1)]);
    assert_eq!(p.record(2), Some((RecordState::Archived, 0)));
    p.acknowledge(
        &a,
        &[
            ack(0, 1, AckType::Accept),
            AckBatch::from_wire(4, 6, &[0, 0, 1]).unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(p.start_offset(), 7);
}

#[test]
fn a_closed_session_releases_its_members_records() {
    let mut p = SharePartition::new(limits(), 0);
    let (a, b) = (member("a"), member("b"));
    fetch(&mut p, &a, 0, 2, 1);
    fetch(&mut p, &b, 0, 2, 1);
    assert!(p.release_member("a").is_some());
    assert!(p.release_member("a").is_none());
    assert_eq!(p.record(0), Some((RecordState::Available, 1)));
    assert_eq!(p.owner(1).map(|m| &**m), Some("b"));
}

#[test]
fn restoring_keeps_final_states_and_counts_acquired_records_as_delivered() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    fetch(&mut p, &a, 0, 6, 10);
    let snap = p
        .acknowledge(
            &a,
            &[ack(1, 1, AckType::Accept), ack(3, 3, AckType::Reject)],
        )
        .unwrap();
    let mut q = SharePartition::restore(limits(), &snap).unwrap();
    assert_eq!(q.state_epoch(), snap.state_epoch + 1);
    assert_eq!(q.start_offset(), 0);
    assert_eq!(q.record(1), Some((RecordState::Acknowledged, 1)));
    assert_eq!(q.record(3), Some((RecordState::Archived, 1)));
    let got = fetch(&mut q, &member("b"), 0, 6, 10);
    assert_eq!(got.ranges, [range(0, 0, 2), range(2, 2, 2), range(4, 5, 2)]);
    // A malformed snapshot is refused.
    let mut bad = snap.clone();
    bad.runs[0].first_offset = 5;
    assert!(SharePartition::restore(limits(), &bad).is_none());
}

#[test]
fn the_log_start_moving_past_the_start_offset_drops_what_is_gone() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    fetch(&mut p, &a, 0, 5, 10);
    assert!(p.advance_to(3).is_some());
    assert_eq!((p.start_offset(), p.acquired_count()), (3, 2));
    assert!(p.advance_to(2).is_none(), "never back");
    p.advance_to(50);
    assert_eq!((p.start_offset(), p.end_offset()), (50, 50));
    assert_eq!(p.poll_timeout(), None);
}

#[derive(Debug, Clone)]
enum Op {
    Produce(u8),
    Fetch {
        member: u8,
        max: u8,
    },
    Ack {
        member: u8,
        first: u8,
        len: u8,
        kind: u8,
    },
    Release(u8),
    Tick(u16),
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..20).prop_map(Op::Produce),
        (0u8..3, 1u8..30).prop_map(|(member, max)| Op::Fetch { member, max }),
        (0u8..3, 0u8..60, 0u8..8, 0u8..4).prop_map(|(member, first, len, kind)| Op::Ack {
            member,
            first,
            len,
            kind
        }),
        (0u8..3).prop_map(Op::Release),
        (1u16..40_000).prop_map(Op::Tick),
        Just(Op::Restore),
    ]
}

proptest! {
    #[test]
    fn invariants_hold_for_any_sequence(ops in proptest::collection::vec(op(), 1..80)) {
        let members = [member("m0"), member("m1"), member("m2")];
        let mut p = SharePartition::new(limits(), 0);
        let mut log_end = 0i64;
        let mut now = 0i64;
        // The test's own record of who holds what until when, and what is done.
        let mut held: BTreeMap<i64, (usize, i64)> = BTreeMap::new();
        let mut done: BTreeSet<i64> = BTreeSet::new();
        let mut counts: BTreeMap<i64, u16> = BTreeMap::new();
        let mut start = p.start_offset();
        for op in ops {
            match op {
                Op::Produce(n) => log_end += i64::from(n),
                Op::Fetch { member, max } => {
                    let m = usize::from(member);
                    let got = fetch(&mut p, &members[m], now, log_end, usize::from(max));
                    prop_assert!(got.count <= usize::from(max));
                    for r in &got.ranges {
                        for o in r.first_offset..=r.last_offset {
                            prop_assert!(!held.contains_key(&o), "offset {} held twice", o);
                            prop_assert!(!done.contains(&o), "offset {} delivered after Accept/Reject", o);
                            let before = counts.insert(o, r.delivery_count).unwrap_or(0);
                            prop_assert!(r.delivery_count > before, "delivery count of {} went down", o);
                            prop_assert!(r.delivery_count <= 5);
                            held.insert(o, (m, now + LOCK));
                        }
                    }
                }
                Op::Ack { member, first, len, kind } => {
                    let m = usize::from(member);
                    let (first, last) = (i64::from(first), i64::from(first) + i64::from(len));
                    let t = AckType::from_code(kind as i8).unwrap();
                    let result = p.acknowledge(&members[m], &[ack(first, last, t)]);
                    let all_mine = (first.max(start)..=last).all(|o| held.get(&o).is_some_and(|h| h.0 == m));
                    prop_assert_eq!(result.is_ok(), all_mine || last < start, "{:?}", result);
                    if result.is_ok() {
                        for o in first..=last {
                            if held.remove(&o).is_some() && matches!(t, AckType::Accept | AckType::Reject) {
                                done.insert(o);
                            }
                        }
                    }
                }
                Op::Release(member) => {
                    let m = usize::from(member);
                    p.release_member(&members[m]);
                    held.retain(|_, h| h.0 != m);
                }
                Op::Tick(ms) => {
                    now += i64::from(ms);
                    p.expire_locks(now);
                    held.retain(|_, h| h.1 > now);
                }
                Op::Restore => {
                    let snap = p.snapshot();
                    p = SharePartition::restore(limits(), &snap).unwrap();
                    held.clear();
                    prop_assert_eq!(p.acquired_count(), 0);
                }
            }
            prop_assert!(p.start_offset() >= start, "start offset went back");
            start = p.start_offset();
            prop_assert!(p.end_offset() - p.start_offset() <= 100);
            prop_assert_eq!(p.acquired_count(), held.len());
            prop_assert!(p.snapshot().is_well_formed());
        }
    }
}

#[test]
fn stats_count_the_window_by_state_and_what_happened_since_loaded() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    assert_eq!(fetch(&mut p, &a, 0, 10, 10).count, 10);
    // 0..=1 rejected, 2..=4 accepted, 5 released, 6..=9 still held.
    p.acknowledge(
        &a,
        &[
            ack(0, 1, AckType::Reject),
            ack(2, 4, AckType::Accept),
            ack(5, 5, AckType::Release),
        ],
    )
    .unwrap();
    let s = p.stats();
    assert_eq!((s.start_offset, s.end_offset), (5, 10));
    assert_eq!(
        s.window,
        WindowCounts {
            available: 1,
            acquired: 4,
            acknowledged: 0,
            archived: 0,
        }
    );
    assert_eq!((s.counters.acknowledged, s.counters.archived), (3, 2));
    assert_eq!(s.counters.deliveries[0], 10);
    // Offset 5 delivered again: a second delivery.
    assert_eq!(fetch(&mut p, &a, 1, 10, 1).count, 1);
    assert_eq!(p.stats().counters.deliveries[1], 1);
    assert_eq!(p.stats().window.acquired, 5);
}

#[test]
fn stats_count_archiving_at_the_limit_and_on_restore() {
    let mut p = SharePartition::new(limits(), 0);
    let a = member("a");
    for round in 0..5 {
        assert_eq!(fetch(&mut p, &a, round, 1, 1).count, 1);
        p.acknowledge(&a, &[ack(0, 0, AckType::Release)]).unwrap();
    }
    // The fifth release reached the limit: archived, and the window moved past it.
    assert_eq!(p.counters().archived, 1);
    assert_eq!(p.counters().deliveries[..5], [1, 1, 1, 1, 1]);
    assert_eq!(p.stats().start_offset, 1);
    // A saved window with an acquired record at the limit is archived when loaded.
    let saved = ShareSnapshot {
        start_offset: 0,
        state_epoch: 3,
        runs: vec![StateRun {
            first_offset: 0,
            last_offset: 1,
            state: RecordState::Acquired,
            delivery_count: 5,
        }],
    };
    let restored = SharePartition::restore(limits(), &saved).unwrap();
    assert_eq!(restored.counters().archived, 2);
    assert_eq!(restored.counters().total_deliveries(), 0);
}
