//! The idempotence rules and the snapshot codec.

use proptest::prelude::*;

use super::{snapshot, *};
use crate::batch::BatchHeader;

const LIMITS: ProducerLimits = ProducerLimits {
    expiration_ms: 1_000,
    max_producer_ids: 3,
    min_idle_for_eviction_ms: 0,
};

fn header(producer_id: i64, epoch: i16, base_sequence: i32, records: i32) -> BatchHeader {
    BatchHeader {
        base_offset: 0,
        batch_length: 49,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: records - 1,
        base_timestamp: 0,
        max_timestamp: 0,
        producer_id,
        producer_epoch: epoch,
        base_sequence,
        records_count: records,
    }
}

/// Checks and, when accepted, records the batch at `offset`.
fn append(
    states: &mut ProducerStates,
    h: &BatchHeader,
    offset: i64,
    now: i64,
) -> Result<Check, ProducerError> {
    let check = states.check(h, now)?;
    if check == Check::Append {
        states.record(h, offset, now);
    }
    Ok(check)
}

#[test]
fn in_order_batches_are_appended_and_retries_are_duplicates() {
    let mut s = ProducerStates::new(LIMITS);
    assert_eq!(
        append(&mut s, &header(7, 0, 0, 3), 100, 0),
        Ok(Check::Append)
    );
    assert_eq!(
        append(&mut s, &header(7, 0, 3, 2), 103, 0),
        Ok(Check::Append)
    );
    let dup = append(&mut s, &header(7, 0, 0, 3), 999, 0).unwrap();
    assert_eq!(
        dup,
        Check::Duplicate(BatchMeta {
            first_seq: 0,
            last_seq: 2,
            first_offset: 100,
            last_offset: 102
        })
    );
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let mut s = ProducerStates::new(LIMITS);
    for i in 0..6 {
        append(&mut s, &header(1, 0, i, 1), i64::from(i), 0).unwrap();
    }
    // Batch 0 is forgotten: its retry is out of order, batch 1's is a duplicate.
    assert!(matches!(
        s.check(&header(1, 0, 0, 1), 0),
        Err(ProducerError::OutOfOrder { expected: 6, .. })
    ));
    assert!(matches!(
        s.check(&header(1, 0, 1, 1), 0),
        Ok(Check::Duplicate(_))
    ));
}

#[test]
fn a_gap_is_out_of_order() {
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 0, 0, 5), 0, 0).unwrap();
    let e = s.check(&header(1, 0, 6, 1), 0).unwrap_err();
    assert_eq!(
        e.error(),
        kafka_protocol::error::ResponseError::OutOfOrderSequenceNumber
    );
    assert!(matches!(e, ProducerError::OutOfOrder { expected: 5, .. }));
}

#[test]
fn epochs_older_are_fenced_newer_start_at_zero() {
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 3, 0, 2), 0, 0).unwrap();
    let e = s.check(&header(1, 2, 2, 1), 0).unwrap_err();
    assert_eq!(
        e.error(),
        kafka_protocol::error::ResponseError::InvalidProducerEpoch
    );
    assert!(matches!(
        s.check(&header(1, 4, 2, 1), 0),
        Err(ProducerError::OutOfOrder { expected: 0, .. })
    ));
    assert_eq!(append(&mut s, &header(1, 4, 0, 1), 2, 0), Ok(Check::Append));
    // The new epoch forgot the old one's batches.
    assert_eq!(s.get(1, 0).unwrap().batches.len(), 1);
}

#[test]
fn unknown_producers_are_accepted_with_any_sequence() {
    // Kafka 4.x (since KIP-360): no UNKNOWN_PRODUCER_ID from the leader.
    let mut s = ProducerStates::new(LIMITS);
    assert_eq!(
        append(&mut s, &header(9, 0, 42, 1), 0, 0),
        Ok(Check::Append)
    );
    assert_eq!(s.get(9, 0).unwrap().last_seq(), Some(42));
}

#[test]
fn expired_producers_are_unknown() {
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 0, 0, 1), 0, 0).unwrap();
    assert!(s.get(1, 999).is_some());
    assert!(s.get(1, 1_000).is_none());
    // A retry after expiry is appended again, as Kafka does.
    assert_eq!(s.check(&header(1, 0, 0, 1), 1_000), Ok(Check::Append));
}

#[test]
fn active_producers_leave_out_the_expired() {
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 0, 0, 1), 0, 0).unwrap();
    append(&mut s, &header(2, 3, 0, 4), 1, 500).unwrap();
    let mut active: Vec<(i64, i16, Option<i32>)> = s
        .active(999)
        .map(|(id, e)| (id, e.epoch, e.last_seq()))
        .collect();
    active.sort();
    assert_eq!(active, vec![(1, 0, Some(0)), (2, 3, Some(3))]);
    // Producer 1 expired at 1000 (it is still in the table until a sweep).
    let active: Vec<i64> = s.active(1_000).map(|(id, _)| id).collect();
    assert_eq!(active, vec![2]);
    assert_eq!(s.len(), 2);
}

#[test]
fn at_the_cap_the_producer_idle_longest_is_evicted() {
    let mut s = ProducerStates::new(LIMITS);
    for id in 0..3 {
        append(&mut s, &header(id, 0, 0, 1), id, id).unwrap();
    }
    // Producer 0 writes again: producer 1 is now idle longest.
    append(&mut s, &header(0, 0, 1, 1), 3, 5).unwrap();
    assert_eq!(
        append(&mut s, &header(3, 0, 0, 1), 4, 10),
        Ok(Check::Append)
    );
    assert_eq!(s.len(), 3);
    assert_eq!(s.evicted(), 1);
    assert!(s.get(1, 10).is_none());
    // The active producer's retry is still a duplicate.
    assert!(matches!(
        s.check(&header(0, 0, 1, 1), 10),
        Ok(Check::Duplicate(BatchMeta {
            first_offset: 3,
            ..
        }))
    ));
    // The evicted producer's retry is taken as new (its dedupe is lost).
    assert_eq!(s.check(&header(1, 0, 0, 1), 10), Ok(Check::Append));
    // Expired producers go first, without counting as evictions.
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(0, 0, 0, 1), 0, 0).unwrap();
    append(&mut s, &header(1, 0, 0, 1), 1, 900).unwrap();
    append(&mut s, &header(2, 0, 0, 1), 2, 900).unwrap();
    assert_eq!(
        append(&mut s, &header(3, 0, 0, 1), 3, 1_000),
        Ok(Check::Append)
    );
    assert_eq!((s.len(), s.evicted()), (3, 0));
}

#[test]
fn a_table_over_the_cap_is_trimmed_oldest_idle_first() {
    let mut entries = HashMap::new();
    for id in 0..10 {
        let batch = BatchMeta {
            first_seq: 0,
            last_seq: 0,
            first_offset: id,
            last_offset: id,
        };
        entries.insert(id, ProducerEntry::new(0, batch, 100 + id));
    }
    let s = ProducerStates::with_entries(LIMITS, entries);
    assert_eq!((s.len(), s.evicted()), (3, 7));
    let mut kept: Vec<i64> = s.entries().map(|(id, _)| *id).collect();
    kept.sort_unstable();
    assert_eq!(kept, [7, 8, 9]);
}

#[test]
fn a_replay_from_the_log_stays_within_the_cap() {
    let mut s = ProducerStates::new(LIMITS);
    for id in 0..5 {
        s.record(&header(id, 0, 0, 1), id, id);
    }
    assert_eq!((s.len(), s.evicted()), (3, 2));
    assert!(s.get(4, 4).is_some() && s.get(0, 4).is_none());
}

#[test]
fn sequences_wrap_after_i32_max() {
    assert_eq!(last_sequence(i32::MAX, 0), i32::MAX);
    assert_eq!(last_sequence(i32::MAX, 1), 0);
    assert_eq!(last_sequence(i32::MAX - 1, 3), 1);
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 0, i32::MAX - 1, 2), 0, 0).unwrap();
    assert_eq!(append(&mut s, &header(1, 0, 0, 1), 2, 0), Ok(Check::Append));
}

#[test]
fn truncate_head_forgets_producers_whose_batches_are_gone() {
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 0, 0, 1), 10, 0).unwrap();
    append(&mut s, &header(2, 0, 0, 1), 20, 0).unwrap();
    s.truncate_head(15);
    assert!(s.get(1, 0).is_none());
    assert!(s.get(2, 0).is_some());
}

#[test]
fn snapshot_round_trip() {
    let mut s = ProducerStates::new(LIMITS);
    for i in 0..7 {
        append(&mut s, &header(1, 2, i * 2, 2), i64::from(i) * 2, 5).unwrap();
    }
    append(&mut s, &header(8, 0, 0, 1), 40, 6).unwrap();
    let bytes = snapshot::encode(41, s.entries());
    let decoded = snapshot::decode(&bytes, 3).unwrap();
    assert_eq!(decoded.offset, 41);
    assert_eq!(decoded.producers.len(), 2);
    assert_eq!(decoded.producers[&1], *s.get(1, 0).unwrap());
    assert_eq!(decoded.producers[&8], *s.get(8, 0).unwrap());
}

#[test]
fn corrupt_snapshots_are_refused() {
    let mut s = ProducerStates::new(LIMITS);
    append(&mut s, &header(1, 0, 0, 1), 0, 0).unwrap();
    let good = snapshot::encode(1, s.entries());
    // More producers than the cap.
    assert!(matches!(
        snapshot::decode(&good, 0),
        Err(snapshot::SnapshotError::Count { .. })
    ));
    // A flipped byte.
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        snapshot::decode(&bad, 3),
        Err(snapshot::SnapshotError::Crc { .. })
    ));
    // Cut short, or not a snapshot at all.
    assert!(snapshot::decode(&good[..good.len() - 1], 3).is_err());
    assert!(matches!(
        snapshot::decode(b"nope", 3),
        Err(snapshot::SnapshotError::BadHeader)
    ));
}

/// Re-seals `bytes` with a correct CRC, so the structural checks are reached.
fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() >= 10 {
        let crc = crc32c::crc32c(&bytes[10..]);
        bytes[6..10].copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

proptest! {
    /// Whatever a snapshot file holds, decoding never panics and never returns more
    /// producers than the cap.
    #[test]
    fn decoding_arbitrary_bytes_is_bounded(tail in proptest::collection::vec(any::<u8>(), 0..400), cap in 0usize..5) {
        let mut bytes = b"DRPS\x00\x01\x00\x00\x00\x00".to_vec();
        bytes.extend_from_slice(&tail);
        if let Ok(s) = snapshot::decode(&reseal(bytes), cap) {
            prop_assert!(s.producers.len() <= cap);
        }
    }

    /// A producer that sends in order, with retries of any of its last five batches
    /// mixed in, has every retry answered with the original offsets and nothing else
    /// refused.
    #[test]
    fn retries_of_recent_batches_are_always_duplicates(
        sizes in proptest::collection::vec(1i32..20, 1..30),
        retries in proptest::collection::vec(0usize..5, 0..30),
    ) {
        let mut s = ProducerStates::new(ProducerLimits { expiration_ms: i64::MAX, max_producer_ids: 10, min_idle_for_eviction_ms: 0 });
        let mut seq = 0;
        let mut offset = 0;
        let mut sent: Vec<(BatchHeader, i64)> = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            let h = header(5, 0, seq, *size);
            prop_assert_eq!(append(&mut s, &h, offset, 0), Ok(Check::Append));
            sent.push((h, offset));
            seq += size;
            offset += i64::from(*size);
            if let Some(back) = retries.get(i) {
                if let Some((old, old_offset)) = sent.iter().rev().nth(*back) {
                    match s.check(old, 0) {
                        Ok(Check::Duplicate(meta)) => prop_assert_eq!(meta.first_offset, *old_offset),
                        other => prop_assert!(false, "retry answered {:?}", other),
                    }
                }
            }
        }
    }
}

#[test]
fn a_version_1_snapshot_still_loads_and_version_2_keeps_transactions() {
    // Version 1 as written before transactions: no txn_first field.
    let mut v1 = Vec::new();
    v1.extend_from_slice(b"DRPS");
    v1.extend_from_slice(&1i16.to_be_bytes());
    v1.extend_from_slice(&[0; 4]);
    v1.extend_from_slice(&9i64.to_be_bytes());
    v1.extend_from_slice(&1i32.to_be_bytes());
    v1.extend_from_slice(&5i64.to_be_bytes()); // producer id
    v1.extend_from_slice(&2i16.to_be_bytes()); // epoch
    v1.extend_from_slice(&77i64.to_be_bytes()); // last write
    v1.push(1);
    for v in [0i32, 3] {
        v1.extend_from_slice(&v.to_be_bytes());
    }
    for v in [5i64, 8] {
        v1.extend_from_slice(&v.to_be_bytes());
    }
    let crc = crc32c::crc32c(&v1[10..]);
    v1[6..10].copy_from_slice(&crc.to_be_bytes());
    let decoded = snapshot::decode(&v1, 3).unwrap();
    let entry = &decoded.producers[&5];
    assert_eq!(
        (entry.epoch, entry.last_write_ms, entry.txn_first_offset),
        (2, 77, None)
    );
    assert_eq!(entry.last_offset(), Some(8));

    let mut s = ProducerStates::new(LIMITS);
    let mut txn = header(5, 0, 0, 2);
    txn.attributes |= 1 << 4;
    s.record(&txn, 40, 0);
    assert_eq!(s.first_unstable_offset(), Some(40));
    let bytes = snapshot::encode(42, s.entries());
    let loaded =
        ProducerStates::with_entries(LIMITS, snapshot::decode(&bytes, 3).unwrap().producers);
    assert_eq!(loaded.first_unstable_offset(), Some(40));
}

/// At a cap of 1,000 a new producer makes room for ten (1% of the cap): the ten idle
/// longest go at once, so the next nine newcomers find room without another sweep and
/// scan of the table; producers in a transaction are never among them.
#[test]
fn at_a_large_cap_one_newcomer_evicts_a_batch_of_the_idlest() {
    let limits = ProducerLimits {
        expiration_ms: i64::MAX,
        max_producer_ids: 1_000,
        min_idle_for_eviction_ms: 0,
    };
    let mut s = ProducerStates::new(limits);
    for id in 0..1_000 {
        append(&mut s, &header(id, 0, 0, 1), id, id).unwrap();
    }
    assert_eq!((s.len(), s.evicted()), (1_000, 0));
    append(&mut s, &header(1_000, 0, 0, 1), 1_000, 2_000).unwrap();
    assert_eq!((s.len(), s.evicted()), (991, 10));
    assert!((0..10).all(|id| s.get(id, 2_000).is_none()));
    assert!((10..=1_000).all(|id| s.get(id, 2_000).is_some()));
    for id in 1_001..1_010 {
        append(&mut s, &header(id, 0, 0, 1), id, 2_000).unwrap();
    }
    assert_eq!((s.len(), s.evicted()), (1_000, 10));
}

/// Issue 28: at the cap, a producer that wrote within the eviction floor is never
/// evicted for a newcomer: the newcomer is refused (retriable) while every remembered
/// producer is that recent, so a flood of producer ids cannot make an honest producer's
/// retry a duplicate; once the floor has passed, the idlest makes room as before.
#[test]
fn at_the_cap_a_recent_producer_is_never_evicted() {
    let limits = ProducerLimits {
        expiration_ms: i64::MAX,
        max_producer_ids: 3,
        min_idle_for_eviction_ms: 1_000,
    };
    let mut s = ProducerStates::new(limits);
    for id in 0..3 {
        append(&mut s, &header(id, 0, 0, 1), id, 100 + id).unwrap();
    }
    for newcomer in 10..200 {
        let refused = append(&mut s, &header(newcomer, 0, 0, 1), 50, 500).unwrap_err();
        assert!(
            matches!(refused, ProducerError::TableFull { .. }),
            "{refused}"
        );
        assert_eq!(
            refused.error(),
            kafka_protocol::error::ResponseError::NotEnoughReplicas
        );
    }
    assert_eq!((s.len(), s.evicted()), (3, 0));
    // Producer 1's retry is still a duplicate.
    assert!(matches!(
        s.check(&header(1, 0, 0, 1), 600),
        Ok(Check::Duplicate(_))
    ));
    // Past the floor for producer 0 only: it makes room.
    assert_eq!(
        append(&mut s, &header(10, 0, 0, 1), 60, 1_100),
        Ok(Check::Append)
    );
    assert!(s.get(0, 1_100).is_none());
    assert_eq!((s.len(), s.evicted()), (3, 1));
}

/// Issue 28: a batch that is not transactional from a producer whose transaction is
/// ongoing is refused INVALID_TXN_STATE, at its epoch or a newer one, and changes
/// nothing; a retry of one of its transactional batches is still a duplicate.
#[test]
fn a_plain_batch_during_a_transaction_is_refused() {
    let mut s = ProducerStates::new(LIMITS);
    let mut txn = header(4, 1, 0, 2);
    txn.attributes |= 1 << 4;
    assert_eq!(append(&mut s, &txn, 10, 0), Ok(Check::Append));
    for (epoch, seq) in [(1, 2), (2, 0)] {
        let refused = append(&mut s, &header(4, epoch, seq, 1), 12, 0).unwrap_err();
        assert_eq!(
            refused,
            ProducerError::ExpectedTransactional {
                producer_id: 4,
                txn_first_offset: 10
            }
        );
        assert_eq!(
            refused.error(),
            kafka_protocol::error::ResponseError::InvalidTxnState
        );
    }
    let entry = s.get(4, 0).unwrap();
    assert_eq!((entry.epoch, entry.txn_first_offset), (1, Some(10)));
    assert!(matches!(s.check(&txn, 0), Ok(Check::Duplicate(_))));
    // Once the marker ended it, plain batches are the producer's business again.
    s.end_transaction(4, 1, 0);
    assert_eq!(
        append(&mut s, &header(4, 1, 2, 1), 13, 0),
        Ok(Check::Append)
    );
}

#[test]
fn a_version_2_snapshot_takes_the_epoch_as_its_transactions() {
    let mut s = ProducerStates::new(LIMITS);
    let mut txn = header(5, 3, 0, 2);
    txn.attributes |= 1 << 4;
    s.record(&txn, 40, 0);
    let mut bytes = snapshot::encode(42, s.entries());
    // Version 3 round-trips txn_epoch.
    let decoded = snapshot::decode(&bytes, 3).unwrap();
    assert_eq!(decoded.producers[&5].txn_epoch, 3);
    // Version 2: the same without the txn_epoch field (after txn_first).
    bytes[4..6].copy_from_slice(&2i16.to_be_bytes());
    let at = 4 + 2 + 4 + 8 + 4 + 8 + 2 + 8 + 8;
    bytes.drain(at..at + 2);
    let crc = crc32c::crc32c(&bytes[10..]);
    bytes[6..10].copy_from_slice(&crc.to_be_bytes());
    let entry = &snapshot::decode(&bytes, 3).unwrap().producers[&5];
    assert_eq!((entry.txn_first_offset, entry.txn_epoch), (Some(40), 3));
}
