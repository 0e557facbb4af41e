//! Transactions through the partition log: the last stable offset with interleaved
//! producers, commit and abort markers, fencing, read_committed reads, and the
//! aborted-transactions index across restarts, crashes, retention and DeleteRecords.

use crate::{
    batch,
    test_util::RawBatch,
    txn_index::{self, AbortedTxn},
    LogConfig, PartitionLog, TxnMarker, TxnResult,
};

fn now() -> i64 {
    crate::clock::now_ms()
}

/// A batch of `records` records from `producer_id` (epoch 0) at sequence `seq`,
/// transactional or not.
fn data(producer_id: i64, seq: i32, records: usize, transactional: bool) -> Vec<u8> {
    let mut raw = RawBatch::from_records(
        &(0..records)
            .map(|i| (now(), vec![b'v'; 20 + i]))
            .collect::<Vec<_>>(),
    );
    raw.producer_id = producer_id;
    raw.producer_epoch = 0;
    raw.base_sequence = seq;
    if transactional {
        raw.attributes |= 1 << 4;
    }
    raw.encode()
}

fn marker(producer_id: i64, epoch: i16, result: TxnResult) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: epoch,
        coordinator_epoch: 5,
        result,
        timestamp_ms: now(),
    }
}

/// Base offsets of the batches in `records`.
fn bases(records: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let header = batch::check_batch(&records[at..], usize::MAX).unwrap();
        out.push(header.base_offset);
        at += header.size();
    }
    out
}

#[test]
fn the_last_stable_offset_follows_the_earliest_ongoing_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    assert_eq!(log.last_stable_offset(), 0);
    log.append(&data(1, 0, 2, true), now()).unwrap(); // 0..=1, txn of 1
    log.append(&data(2, 0, 1, false), now()).unwrap(); // 2, idempotent only
    log.append(&data(3, 0, 1, true), now()).unwrap(); // 3, txn of 3
    log.append(&data(1, 2, 1, true), now()).unwrap(); // 4, txn of 1 goes on
    assert_eq!((log.last_stable_offset(), log.log_end_offset()), (0, 5));
    // read_committed sees nothing yet; read_uncommitted everything.
    let committed = log
        .plan_read_committed(0, 1 << 20)
        .unwrap()
        .execute()
        .unwrap();
    assert!(committed.records.is_empty());
    assert_eq!(committed.last_stable_offset, 0);
    assert_eq!(bases(&log.read(0, 1 << 20).unwrap().records), [0, 2, 3, 4]);

    let commit = log
        .append_txn_marker(&marker(1, 0, TxnResult::Commit), now())
        .unwrap();
    assert_eq!(commit, 5);
    assert_eq!(log.last_stable_offset(), 3);
    let read = log
        .plan_read_committed(0, 1 << 20)
        .unwrap()
        .execute()
        .unwrap();
    assert_eq!(bases(&read.records), [0, 2]);
    assert!(read.aborted.is_empty());

    let abort = log
        .append_txn_marker(&marker(3, 0, TxnResult::Abort), now())
        .unwrap();
    assert_eq!((abort, log.last_stable_offset()), (6, 7));
    let read = log
        .plan_read_committed(0, 1 << 20)
        .unwrap()
        .execute()
        .unwrap();
    assert_eq!(bases(&read.records), [0, 2, 3, 4, 5, 6]);
    let aborted = AbortedTxn {
        producer_id: 3,
        first_offset: 3,
        last_offset: 6,
        last_stable_offset: 7,
    };
    assert_eq!(read.aborted, [aborted]);
    // Only the transactions overlapping the batches read: one batch (0..=1) holds none
    // of producer 3's records; a read from 3 does.
    let first_only = log.plan_read_committed(0, 1).unwrap().execute().unwrap();
    assert_eq!(
        (bases(&first_only.records), first_only.aborted),
        (vec![0], vec![])
    );
    let from_3 = log.plan_read_committed(3, 1).unwrap().execute().unwrap();
    assert_eq!(
        (bases(&from_3.records), from_3.aborted),
        (vec![3], vec![aborted])
    );
    assert_eq!(log.aborted_transactions(7, 7), []);
    assert_eq!(log.aborted_transactions(4, 7), [aborted]);
    // The next transaction of producer 1 starts a new one.
    log.append(&data(1, 3, 1, true), now()).unwrap();
    assert_eq!(log.last_stable_offset(), 7);
}

#[test]
fn an_older_epochs_marker_is_fenced_and_an_unknown_producers_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    let mut raw = RawBatch::from_records(&[(now(), b"x".to_vec())]);
    raw.producer_id = 9;
    raw.producer_epoch = 4;
    raw.base_sequence = 0;
    raw.attributes |= 1 << 4;
    log.append(&raw.encode(), now()).unwrap();
    let fenced = log
        .append_txn_marker(&marker(9, 3, TxnResult::Commit), now())
        .unwrap_err();
    assert_eq!(fenced.error_code(), 47);
    assert_eq!((log.log_end_offset(), log.last_stable_offset()), (1, 0));
    // A marker for a producer without a transaction here: written, harmless.
    assert_eq!(
        log.append_txn_marker(&marker(77, 0, TxnResult::Abort), now())
            .unwrap(),
        1
    );
    assert!(log.aborted_transactions(0, i64::MAX).is_empty());
    // A newer epoch (KIP-890 bumps it at the end of a transaction) ends the transaction.
    log.append_txn_marker(&marker(9, 5, TxnResult::Abort), now())
        .unwrap();
    assert_eq!(log.last_stable_offset(), 3);
    assert_eq!(log.producer_states().get(9, now()).unwrap().epoch, 5);
}

#[test]
fn transactions_and_the_index_survive_a_restart_and_a_crash() {
    for crash in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 250,
            ..LogConfig::default()
        };
        let mut log = PartitionLog::open(dir.path(), &config).unwrap();
        // A transaction that stays ongoing across segment rolls (carried by the
        // snapshots), then one aborted in the newest segment.
        let ongoing = log.append(&data(3, 0, 1, true), now()).unwrap().base_offset;
        for seq in 0..6 {
            log.append(&data(2, seq, 1, false), now()).unwrap();
        }
        assert!(log.segment_count() > 2, "{}", log.segment_count());
        log.append(&data(1, 0, 1, true), now()).unwrap();
        log.append_txn_marker(&marker(1, 0, TxnResult::Abort), now())
            .unwrap();
        let aborted = log.aborted_transactions(0, i64::MAX);
        assert_eq!(aborted.len(), 1);
        let lso = log.last_stable_offset();
        assert_eq!(lso, ongoing);
        let end = log.log_end_offset();
        if crash {
            // `kill -9` before the index reached the disk: it is rebuilt from the
            // marker, which recovery replays (the active segment's batches).
            for (_, path) in index_files(dir.path()) {
                std::fs::remove_file(&path).unwrap();
            }
            drop(log);
        } else {
            log.close().unwrap();
            drop(log);
        }
        let mut log = PartitionLog::open(dir.path(), &config).unwrap();
        assert_eq!(log.log_end_offset(), end, "crash: {crash}");
        assert_eq!(log.last_stable_offset(), lso, "crash: {crash}");
        assert_eq!(
            log.aborted_transactions(0, i64::MAX),
            aborted,
            "crash: {crash}"
        );
        assert!(!index_files(dir.path()).is_empty());
        // The ongoing transaction can still be ended.
        log.append_txn_marker(&marker(3, 0, TxnResult::Commit), now())
            .unwrap();
        assert_eq!(log.last_stable_offset(), log.log_end_offset());
    }
}

#[test]
fn a_cut_index_is_repaired_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    log.append(&data(1, 0, 1, true), now()).unwrap();
    log.append_txn_marker(&marker(1, 0, TxnResult::Abort), now())
        .unwrap();
    log.append(&data(1, 1, 1, true), now()).unwrap();
    log.append_txn_marker(&marker(1, 0, TxnResult::Abort), now())
        .unwrap();
    let aborted = log.aborted_transactions(0, i64::MAX);
    assert_eq!(aborted.len(), 2);
    drop(log);
    let path = txn_index::path(dir.path(), 0);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    assert_eq!(log.aborted_transactions(0, i64::MAX), aborted);
    assert_eq!(txn_index::read(&path, 10).unwrap(), Some((aborted, false)));
}

#[test]
fn retention_and_delete_records_delete_the_index_with_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        retention_bytes: 0,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    for i in 0..4 {
        log.append(&data(1, i, 1, true), now()).unwrap();
        log.append_txn_marker(&marker(1, 0, TxnResult::Abort), now())
            .unwrap();
        log.append(&data(2, 2 * i, 2, false), now()).unwrap();
    }
    let before = index_files(dir.path());
    assert!(before.len() >= 2, "{before:?}");
    let first_segment = before[0].0;
    // DeleteRecords past the first segment.
    let second = before[1].0;
    log.delete_records(second).unwrap();
    assert!(!txn_index::path(dir.path(), first_segment).exists());
    assert!(log
        .aborted_transactions(0, i64::MAX)
        .iter()
        .all(|a| a.last_offset >= second));
    // Retention (0 bytes): every segment but the active one goes, indexes too.
    log.apply_retention(now()).unwrap();
    let active = log.log_end_offset();
    assert!(index_files(dir.path())
        .iter()
        .all(|(base, _)| *base >= log.log_start_offset()));
    assert!(log
        .aborted_transactions(0, active)
        .iter()
        .all(|a| a.last_offset >= log.log_start_offset()));
}

fn index_files(dir: &std::path::Path) -> Vec<(i64, std::path::PathBuf)> {
    let mut out: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            let stem = name.strip_suffix(".txnindex")?;
            Some((stem.parse().ok()?, path))
        })
        .collect();
    out.sort();
    out
}

/// Issue 17 review, item 4: DeleteRecords past an ongoing transaction's first offset
/// leaves the last stable offset at the new log start offset, never below it (Kafka's
/// `UnifiedLog.maybeIncrementFirstUnstableOffset` clamps the first unstable offset to
/// the log start offset).
#[test]
fn the_last_stable_offset_never_falls_below_the_log_start_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    log.append(&data(1, 0, 2, true), now()).unwrap(); // 0..=1, txn of 1
    log.append(&data(2, 0, 3, false), now()).unwrap(); // 2..=4
    log.append(&data(1, 2, 1, true), now()).unwrap(); // 5, txn of 1 goes on
    assert_eq!(log.last_stable_offset(), 0);
    assert_eq!(log.delete_records(4).unwrap(), 4);
    assert_eq!(log.last_stable_offset(), 4);
    // Once the transaction ends, the LSO is the log end again.
    log.append_txn_marker(&marker(1, 0, TxnResult::Commit), now())
        .unwrap();
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
}

/// Issue 28: a plain idempotent batch carrying an open transaction's producer id (at its
/// epoch or one above) is refused INVALID_TXN_STATE, as Kafka's "expected transactional
/// write", so the epoch stays and the transaction's own commit marker ends it; before,
/// the batch bumped the epoch, the marker was refused as fenced and the last stable
/// offset stayed frozen for good. The same holds after a restart and after a crash.
#[test]
fn a_strangers_plain_batch_cannot_freeze_an_open_transaction() {
    for crash in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
        log.append(&data(7, 0, 3, true), now()).unwrap(); // 0..=2, txn of 7 at epoch 0
        for epoch in [0, 1] {
            let mut raw = RawBatch::from_records(&[(now(), b"x".to_vec())]);
            raw.producer_id = 7;
            raw.producer_epoch = epoch;
            raw.base_sequence = if epoch == 0 { 3 } else { 0 };
            let refused = log.append(&raw.encode(), now()).unwrap_err();
            assert_eq!(refused.error_code(), 48, "epoch {epoch}: {refused}");
        }
        assert_eq!(log.log_end_offset(), 3);
        if crash {
            drop(log);
        } else {
            log.close().unwrap();
            drop(log);
        }
        let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
        assert_eq!(log.last_stable_offset(), 0);
        log.append_txn_marker(&marker(7, 0, TxnResult::Commit), now())
            .unwrap();
        assert_eq!((log.last_stable_offset(), log.log_end_offset()), (4, 4));
        let read = log
            .plan_read_committed(0, 1 << 20)
            .unwrap()
            .execute()
            .unwrap();
        assert_eq!(bases(&read.records), [0, 3]);
    }
}

/// A marker as new as the batch that opened the transaction ends it even when a later
/// batch of the producer carried a newer epoch (a state the rule above now prevents,
/// but which a log written before it may hold); only a marker older than the opening
/// batch is a zombie's and refused.
#[test]
fn a_marker_is_fenced_only_by_the_epoch_that_opened_the_transaction() {
    use crate::producer_state::{ProducerEntry, ProducerLimits, ProducerStates};
    let limits = ProducerLimits {
        expiration_ms: i64::MAX,
        max_producer_ids: 10,
        min_idle_for_eviction_ms: 0,
    };
    let mut states = ProducerStates::new(limits);
    let mut raw = RawBatch::from_records(&[(now(), b"x".to_vec())]);
    raw.producer_id = 3;
    raw.producer_epoch = 2;
    raw.base_sequence = 0;
    raw.attributes |= 1 << 4;
    let header = batch::check_batch(&raw.encode(), usize::MAX).unwrap();
    states.record(&header, 0, now());
    let opened: &ProducerEntry = states.get(3, now()).unwrap();
    assert_eq!((opened.txn_first_offset, opened.txn_epoch), (Some(0), 2));
    assert_eq!(states.marker_fenced(3, 1, now()), Some(2));
    assert_eq!(states.marker_fenced(3, 2, now()), None);
    // An entry whose epoch moved past its open transaction's (as an old log may hold).
    let mut moved = states.get(3, now()).unwrap().clone();
    moved.epoch = 3;
    let states = ProducerStates::with_entries(limits, [(3, moved)].into_iter().collect());
    assert_eq!(states.marker_fenced(3, 2, now()), None);
    assert_eq!(states.marker_fenced(3, 1, now()), Some(2));
}
