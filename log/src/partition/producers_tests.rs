//! Producer state through the partition log: duplicates, snapshots at roll and close,
//! the rebuild after a crash, and a corrupt snapshot.

use super::*;
use crate::{
    test_util::{batch, RawBatch},
    AppendInfo, LogConfig, LogError, PartitionLog,
};

fn idempotent(producer_id: i64, epoch: i16, seq: i32, records: usize) -> Vec<u8> {
    let now = crate::clock::now_ms();
    let mut raw = RawBatch::from_records(
        &(0..records)
            .map(|i| (now, vec![b'x'; 10 + i]))
            .collect::<Vec<_>>(),
    );
    raw.producer_id = producer_id;
    raw.producer_epoch = epoch;
    raw.base_sequence = seq;
    raw.encode()
}

fn append(log: &mut PartitionLog, data: &[u8]) -> Result<AppendInfo, LogError> {
    log.append(data, crate::clock::now_ms())
}

#[test]
fn a_duplicate_gets_its_original_offsets_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    append(&mut log, &batch(2, 5, crate::clock::now_ms())).unwrap();
    let first = append(&mut log, &idempotent(1, 0, 0, 3)).unwrap();
    assert_eq!((first.base_offset, first.duplicate), (2, false));
    let size = log.size_bytes();
    let again = append(&mut log, &idempotent(1, 0, 0, 3)).unwrap();
    assert_eq!(
        (again.base_offset, again.last_offset, again.duplicate),
        (2, 4, true)
    );
    assert_eq!((log.size_bytes(), log.log_end_offset()), (size, 5));
    let gap = append(&mut log, &idempotent(1, 0, 4, 1)).unwrap_err();
    assert_eq!(gap.error_code(), 45);
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn state_survives_a_clean_close_and_a_crash() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 200,
            ..LogConfig::default()
        };
        let mut log = PartitionLog::open(dir.path(), &config).unwrap();
        let mut seq = 0;
        let mut offsets = Vec::new();
        // Enough batches to roll a few segments (snapshots at each roll).
        for _ in 0..8 {
            offsets.push(
                append(&mut log, &idempotent(7, 0, seq, 2))
                    .unwrap()
                    .base_offset,
            );
            seq += 2;
        }
        assert!(log.segment_count() > 2, "{}", log.segment_count());
        if clean {
            log.close().unwrap();
        }
        drop(log);
        let mut log = PartitionLog::open(dir.path(), &config).unwrap();
        let end = log.log_end_offset();
        let dup = append(&mut log, &idempotent(7, 0, seq - 2, 2)).unwrap();
        assert_eq!(
            (dup.base_offset, dup.duplicate),
            (offsets[7], true),
            "clean: {clean}"
        );
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(
            append(&mut log, &idempotent(7, 0, seq + 1, 1))
                .unwrap_err()
                .error_code(),
            45
        );
        append(&mut log, &idempotent(7, 0, seq, 1)).unwrap();
    }
}

#[test]
fn a_corrupt_snapshot_falls_back_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    let first = append(&mut log, &idempotent(3, 1, 0, 4)).unwrap();
    log.close().unwrap();
    drop(log);
    let files = snapshot::list(dir.path()).unwrap();
    let (_, path) = files.last().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
    // A crash in the middle of writing a snapshot leaves its temporary file.
    let tmp = dir.path().join("00000000000000000009.snapshot.tmp");
    std::fs::write(&tmp, b"half").unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    assert!(!tmp.exists());
    let dup = append(&mut log, &idempotent(3, 1, 0, 4)).unwrap();
    assert_eq!((dup.base_offset, dup.duplicate), (first.base_offset, true));
    assert_eq!(
        append(&mut log, &idempotent(3, 0, 4, 1))
            .unwrap_err()
            .error_code(),
        47
    );
}

#[test]
fn a_snapshot_over_a_lowered_cap_is_loaded_and_trimmed_oldest_idle_first() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let now = crate::clock::now_ms();
    let mut offsets = Vec::new();
    for id in 0..10 {
        let info = log.append(&idempotent(id, 0, 0, 2), now + id).unwrap();
        offsets.push(info.base_offset);
    }
    log.close().unwrap();
    drop(log);
    let lowered = LogConfig {
        max_producer_ids_per_partition: 3,
        producer_id_eviction_min_idle_ms: 0,
        ..config
    };
    let mut log = PartitionLog::open(dir.path(), &lowered).unwrap();
    let mut kept: Vec<i64> = log.producer_states().entries().map(|(id, _)| *id).collect();
    kept.sort_unstable();
    assert_eq!(kept, [7, 8, 9]);
    let end = log.log_end_offset();
    // A kept producer's retry is still a duplicate; nothing is written.
    let dup = log.append(&idempotent(7, 0, 0, 2), now + 20).unwrap();
    assert_eq!((dup.base_offset, dup.duplicate), (offsets[7], true));
    assert_eq!(log.log_end_offset(), end);
    // A new producer evicts the one idle longest (7: a duplicate is no write), within
    // the cap.
    let new = log.append(&idempotent(42, 0, 0, 1), now + 21).unwrap();
    assert_eq!((new.duplicate, new.producers_evicted), (false, 1));
    assert_eq!(log.producer_states().len(), 3);
    assert!(log.producer_states().get(7, now + 21).is_none());
}

/// Issue 17 review, item 1: after a crash, the producers rebuilt from the log keep the
/// order in which they wrote, so eviction at the cap still forgets the one that wrote
/// longest ago, not the lowest producer id (the oldest long-lived producer, which
/// wrote last here).
#[test]
fn after_a_crash_eviction_forgets_the_producer_that_wrote_longest_ago() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_producer_ids_per_partition: 4,
        producer_id_eviction_min_idle_ms: 0,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    // Long-lived producer 0, then 4 newer ones (0 is evicted by the last of them).
    append(&mut log, &idempotent(0, 0, 0, 1)).unwrap();
    for id in 1..=4 {
        append(&mut log, &idempotent(id, 0, 0, 1)).unwrap();
    }
    let retried = append(&mut log, &idempotent(0, 0, 1, 1)).unwrap();
    assert_eq!((retried.base_offset, retried.duplicate), (5, false));
    append(&mut log, &idempotent(5, 0, 0, 1)).unwrap();
    drop(log); // kill -9: no snapshot past the start
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let end = log.log_end_offset();
    let mut kept: Vec<i64> = log.producer_states().entries().map(|(id, _)| *id).collect();
    kept.sort_unstable();
    assert_eq!(kept, [0, 3, 4, 5]);
    let dup = append(&mut log, &idempotent(0, 0, 1, 1)).unwrap();
    assert_eq!((dup.base_offset, dup.duplicate), (5, true));
    assert_eq!(log.log_end_offset(), end);
}

/// Issue 17 review, item 3: the producers evicted while loading a snapshot under a
/// lowered cap are reported with the partition's next append, so the Produce handler
/// counts them in `drover_producer_ids_evicted_total` like any other eviction.
#[test]
fn evictions_at_load_are_reported_with_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    let now = crate::clock::now_ms();
    for id in 0..10 {
        log.append(&idempotent(id, 0, 0, 1), now + id).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let lowered = LogConfig {
        max_producer_ids_per_partition: 3,
        producer_id_eviction_min_idle_ms: 0,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &lowered).unwrap();
    assert_eq!(log.producer_states().len(), 3);
    // Seven forgotten at load, one more for the new producer.
    let new = log.append(&idempotent(42, 0, 0, 1), now + 20).unwrap();
    assert_eq!(new.producers_evicted, 8);
    let next = log.append(&idempotent(43, 0, 0, 1), now + 21).unwrap();
    assert_eq!(next.producers_evicted, 1);
}
