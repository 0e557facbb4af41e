use std::{fs, os::unix::fs::FileExt, path::Path, time::Instant};

use proptest::prelude::*;

use super::*;
use crate::{
    batch::{parse_batches, BatchHeader},
    test_util::{batch, RawBatch},
};

/// No fsync per append: tests that do not test durability run faster.
fn fast() -> LogConfig {
    LogConfig {
        flush_messages: u64::MAX,
        ..LogConfig::default()
    }
}

fn headers(bytes: &[u8]) -> Vec<BatchHeader> {
    parse_batches(bytes, usize::MAX).unwrap()
}

/// Appends `data` and returns it as stored (offsets and epoch stamped).
fn append(log: &mut PartitionLog, mut data: Vec<u8>, now_ms: i64) -> Vec<u8> {
    let info = log.append(&data, now_ms).unwrap();
    stamp(&mut data, info.base_offset);
    data
}

/// Turns appended `data` into what the log stores: consecutive base offsets from
/// `base_offset` and the leader epoch (the log writes these fields, not the caller's
/// buffer).
fn stamp(data: &mut [u8], base_offset: i64) {
    let mut next = base_offset;
    let mut at = 0;
    for h in headers(data) {
        crate::batch::set_base_offset(&mut data[at..], next);
        crate::batch::set_partition_leader_epoch(&mut data[at..], crate::LEADER_EPOCH);
        next += h.offset_count();
        at += h.size();
    }
}

/// Everything readable from `from`, fetch after fetch.
fn read_all(log: &PartitionLog, from: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < log.log_end_offset() {
        let result = log.read(offset, 1 << 20).unwrap();
        assert!(!result.records.is_empty(), "no data at {offset}");
        offset = headers(&result.records).last().unwrap().next_offset();
        out.extend_from_slice(&result.records);
    }
    out
}

fn segment_files(dir: &Path, extension: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(&format!(".{extension}")))
        .collect();
    names.sort();
    names
}

fn last_log_file(dir: &Path) -> std::path::PathBuf {
    dir.join(segment_files(dir, "log").pop().unwrap())
}

#[test]
fn the_log_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<PartitionLog>();
}

#[test]
fn append_read_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));

    let mut stored = Vec::new();
    let mut data = batch(3, 10, 1000);
    let info = log.append(&data, 5).unwrap();
    stamp(&mut data, info.base_offset);
    assert_eq!(
        info,
        AppendInfo {
            base_offset: 0,
            last_offset: 2,
            log_append_time_ms: -1,
            log_start_offset: 0,
            duplicate: false,
            producers_evicted: 0,
        }
    );
    stored.extend_from_slice(&data);
    // Two batches in one append.
    let mut data = [batch(2, 5, 2000), batch(4, 5, 3000)].concat();
    let info = log.append(&data, 6).unwrap();
    stamp(&mut data, info.base_offset);
    assert_eq!((info.base_offset, info.last_offset), (3, 8));
    stored.extend_from_slice(&data);

    let result = log.read(0, 1 << 20).unwrap();
    assert_eq!(result.records, stored);
    assert_eq!((result.high_watermark, result.log_start_offset), (9, 0));
    let h = headers(&result.records);
    assert_eq!(
        h.iter()
            .map(|h| (h.base_offset, h.last_offset()))
            .collect::<Vec<_>>(),
        vec![(0, 2), (3, 4), (5, 8)]
    );
    assert!(h.iter().all(|h| h.partition_leader_epoch == LEADER_EPOCH));
    // The appended batches are what a real decoder reads back.
    let decoded =
        kafka_protocol::records::RecordBatchDecoder::decode_all(&mut result.records.clone())
            .unwrap();
    let offsets: Vec<i64> = decoded
        .iter()
        .flat_map(|set| set.records.iter().map(|r| r.offset))
        .collect();
    assert_eq!(offsets, (0..9).collect::<Vec<_>>());
}

#[test]
fn read_from_the_middle_of_a_batch_returns_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &fast()).unwrap();
    let first = append(&mut log, batch(5, 8, 1), 0);
    let second = append(&mut log, batch(5, 8, 1), 0);
    assert_eq!(
        log.read(3, 1 << 20).unwrap().records,
        [first, second.clone()].concat()
    );
    assert_eq!(log.read(7, 1 << 20).unwrap().records, second);
    assert_eq!(log.read(9, 1 << 20).unwrap().records, second);
}

#[test]
fn max_bytes_returns_whole_batches_but_at_least_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &fast()).unwrap();
    let stored: Vec<Vec<u8>> = (0..4)
        .map(|_| append(&mut log, batch(2, 50, 1), 0))
        .collect();
    let size = stored[0].len();
    let read = |max| log.read(0, max).unwrap().records;
    assert_eq!(read(2 * size), [&stored[0][..], &stored[1]].concat());
    assert_eq!(
        read(2 * size + size / 2),
        [&stored[0][..], &stored[1]].concat()
    );
    assert_eq!(read(size - 1), stored[0]);
    assert_eq!(read(1), stored[0]);
    assert_eq!(read(0), stored[0]);
    assert_eq!(read(usize::MAX), stored.concat());
}

#[test]
fn offsets_out_of_range_and_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &fast()).unwrap();
    append(&mut log, batch(3, 1, 1), 0);
    let err = log.read(4, 100).unwrap_err();
    assert!(matches!(
        err,
        LogError::OffsetOutOfRange {
            requested: 4,
            start: 0,
            end: 3
        }
    ));
    assert_eq!(err.error_code(), 1);
    assert!(matches!(
        log.read(-1, 100),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    let at_end = log.read(3, 100).unwrap();
    assert!(at_end.records.is_empty());
    assert_eq!(at_end.high_watermark, 3);
}

#[test]
fn invalid_batches_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &fast()).unwrap();
    append(&mut log, batch(1, 1, 1), 0);
    let mut corrupt = [batch(1, 1, 1), batch(2, 2, 2)].concat();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let err = log.append(&corrupt, 0).unwrap_err();
    assert!(matches!(
        err,
        LogError::InvalidBatch(batch::BatchError::CrcMismatch { .. })
    ));
    assert_eq!(err.error_code(), 2);
    let config = LogConfig {
        max_batch_bytes: 100,
        ..fast()
    };
    let mut small = PartitionLog::open(dir.path().join("small"), &config).unwrap();
    let err = small.append(&batch(1, 100, 1), 0).unwrap_err();
    assert_eq!(err.error_code(), 10);
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.size_bytes(), batch(1, 1, 1).len() as u64);
}

#[test]
fn offsets_continue_across_reopen_clean_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 100,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let mut stored = Vec::new();
    for i in 0..20 {
        stored.extend(append(&mut log, batch(3, 40, i), i));
    }
    drop(log); // crash-like: no close
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    assert_eq!(log.log_end_offset(), 60);
    stored.extend(append(&mut log, batch(2, 40, 100), 100));
    assert_eq!(log.log_end_offset(), 62);
    log.close().unwrap();
    assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());

    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    assert_eq!(log.log_end_offset(), 62);
    stored.extend(append(&mut log, batch(1, 40, 200), 200));
    assert_eq!(read_all(&log, 0), stored);
    assert_eq!(log.read(31, 10).unwrap().records, headers_at(&stored, 30));
}

/// The single batch of `stored` that starts at offset `base`.
fn headers_at(stored: &[u8], base: i64) -> Vec<u8> {
    let mut at = 0;
    for h in headers(stored) {
        if h.base_offset == base {
            return stored[at..at + h.size()].to_vec();
        }
        at += h.size();
    }
    panic!("no batch at {base}");
}

#[test]
fn rolls_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(2, 30, 1).len() as u64;
    let config = LogConfig {
        segment_bytes: 3 * one,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let mut stored = Vec::new();
    for _ in 0..7 {
        stored.extend(append(&mut log, batch(2, 30, 1), 0));
    }
    assert_eq!(log.segment_count(), 3);
    assert_eq!(
        segment_files(dir.path(), "log"),
        vec![
            "00000000000000000000.log",
            "00000000000000000006.log",
            "00000000000000000012.log"
        ]
    );
    assert_eq!(segment_files(dir.path(), "index").len(), 3);
    assert_eq!(segment_files(dir.path(), "timeindex").len(), 3);
    // A fetch stops at the end of a segment.
    assert_eq!(log.read(0, 1 << 20).unwrap().records.len() as u64, 3 * one);
    assert_eq!(
        log.read(6, 1 << 20).unwrap().records,
        stored[3 * one as usize..6 * one as usize]
    );
    assert_eq!(read_all(&log, 0), stored);

    let err = log
        .append(&vec![batch(2, 30, 1); 4].concat(), 0)
        .unwrap_err();
    assert!(matches!(err, LogError::BatchTooLarge { .. }));
    assert_eq!(err.error_code(), 18);

    drop(log);
    let log = PartitionLog::open(dir.path(), &config).unwrap();
    assert_eq!((log.segment_count(), log.log_end_offset()), (3, 14));
    assert_eq!(read_all(&log, 0), stored);
}

#[test]
fn rolls_by_age_of_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    append(&mut log, batch(1, 1, 0), 10_000);
    append(&mut log, batch(1, 1, 0), 11_000);
    assert_eq!(log.segment_count(), 1);
    append(&mut log, batch(1, 1, 0), 11_001);
    assert_eq!(log.segment_count(), 2);
    append(&mut log, batch(1, 1, 0), 11_500);
    append(&mut log, batch(1, 1, 0), 12_001);
    assert_eq!(log.segment_count(), 2);
    append(&mut log, batch(1, 1, 0), 12_002);
    assert_eq!(log.segment_count(), 3);
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn retention_by_size_keeps_at_least_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(1, 40, 1).len() as u64;
    let config = LogConfig {
        segment_bytes: 2 * one,
        retention_bytes: 3 * one as i64,
        retention_ms: -1,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let mut stored = Vec::new();
    for _ in 0..9 {
        stored.extend(append(&mut log, batch(1, 40, 1), 0));
    }
    // Segments [0,1] [2,3] [4,5] [6,7] [8]: 9 batches, keep >= 3.
    assert_eq!(log.segment_count(), 5);
    assert_eq!(log.apply_retention(0).unwrap(), 3);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.log_start_offset(), 6);
    assert_eq!(log.size_bytes(), 3 * one);
    assert!(matches!(
        log.read(5, 100),
        Err(LogError::OffsetOutOfRange { start: 6, .. })
    ));
    assert_eq!(read_all(&log, 6), stored[6 * one as usize..]);
    assert_eq!(log.apply_retention(0).unwrap(), 0);
    assert_eq!(segment_files(dir.path(), "log").len(), 2);
    assert_eq!(segment_files(dir.path(), "index").len(), 2);

    let mut info_log = PartitionLog::open(dir.path(), &config).unwrap();
    assert_eq!(info_log.log_start_offset(), 6);
    let info = info_log.append(&batch(1, 40, 1), 0).unwrap();
    assert_eq!((info.base_offset, info.log_start_offset), (9, 6));
}

#[test]
fn retention_by_time_never_deletes_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(1, 10, 1).len() as u64;
    let config = LogConfig {
        segment_bytes: one,
        retention_ms: 1000,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    for ts in [100, 200, 5000, 300] {
        append(&mut log, batch(1, 10, ts), 0);
    }
    assert_eq!(log.segment_count(), 4);
    // Segment newest timestamps: 100, 200, 5000, 300 (active).
    assert_eq!(log.apply_retention(1150).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 1);
    // Stops at the first segment still within retention (Kafka deletes a prefix).
    assert_eq!(log.apply_retention(5500).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 2);
    assert_eq!(log.apply_retention(100_000).unwrap(), 1);
    assert_eq!((log.segment_count(), log.log_start_offset()), (1, 3));
    assert_eq!(log.apply_retention(1_000_000).unwrap(), 0);
    assert_eq!(log.log_end_offset(), 4);
}

#[test]
fn retention_by_time_uses_the_file_time_without_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let no_ts = || {
        let mut raw = RawBatch::from_records(&[(0, vec![1])]);
        raw.base_timestamp = -1;
        raw.max_timestamp = -1;
        raw.encode()
    };
    let config = LogConfig {
        segment_bytes: no_ts().len() as u64,
        retention_ms: 60_000,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    append(&mut log, no_ts(), 0);
    append(&mut log, no_ts(), 0);
    assert_eq!(log.max_timestamp(), None);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert_eq!(log.apply_retention(now).unwrap(), 0);
    assert_eq!(log.apply_retention(now + 120_000).unwrap(), 1);
}

#[test]
fn offset_for_timestamp_matches_a_linear_search() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 150,
        segment_bytes: 2000,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    // Timestamps that mostly grow, with some going back.
    let mut seed = 7u64;
    let mut all = Vec::new();
    for i in 0..120i64 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let jitter = (seed >> 33) as i64 % 300;
        let ts = 300 + i * 100 - jitter;
        let count = 1 + (seed >> 40) as usize % 3;
        all.extend(headers(&append(&mut log, batch(count, 20, ts), 0)));
    }
    assert!(log.segment_count() > 3);
    let expected = |target: i64| {
        all.iter()
            .find(|h| h.max_timestamp >= target)
            .map(|h| TimestampOffset {
                offset: h.base_offset,
                timestamp: h.max_timestamp,
            })
    };
    for target in (-500..12_500).step_by(37) {
        assert_eq!(
            log.offset_for_timestamp(target).unwrap(),
            expected(target),
            "{target}"
        );
    }
    let best = all.iter().max_by_key(|h| h.max_timestamp).unwrap();
    let first_best = all
        .iter()
        .find(|h| h.max_timestamp == best.max_timestamp)
        .unwrap();
    assert_eq!(
        log.max_timestamp(),
        Some(TimestampOffset {
            offset: first_best.base_offset,
            timestamp: first_best.max_timestamp
        })
    );
    // The same answers after a restart (time indexes rebuilt or reloaded).
    drop(log);
    let log = PartitionLog::open(dir.path(), &config).unwrap();
    for target in (-500..12_500).step_by(53) {
        assert_eq!(
            log.offset_for_timestamp(target).unwrap(),
            expected(target),
            "{target}"
        );
    }
}

/// A log of `n` batches fsynced one by one; returns the batches as stored.
fn durable_log(dir: &Path, n: usize) -> Vec<Vec<u8>> {
    let mut log = PartitionLog::open(dir, &LogConfig::default()).unwrap();
    (0..n)
        .map(|i| append(&mut log, batch(1 + i % 3, 30, i as i64), 0))
        .collect()
}

/// Reopens after damage: the tail is cut, the first `intact` batches remain, and appends
/// continue after them.
fn assert_recovered(dir: &Path, stored: &[Vec<u8>], intact: usize) {
    let mut log = PartitionLog::open(dir, &LogConfig::default()).unwrap();
    let expected = stored[..intact].concat();
    let end = headers(&expected).last().map_or(0, |h| h.next_offset());
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&log, 0), expected);
    assert_eq!(
        fs::metadata(last_log_file(dir)).unwrap().len(),
        expected.len() as u64
    );
    let info = log.append(&batch(2, 5, 1), 0).unwrap();
    assert_eq!(info.base_offset, end);
    drop(log);
    let log = PartitionLog::open(dir, &LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), end + 2);
}

#[test]
fn recovery_cuts_a_truncated_last_batch() {
    for cut in [1, 11, 12, 60, 61, 70] {
        let dir = tempfile::tempdir().unwrap();
        let stored = durable_log(dir.path(), 5);
        let path = last_log_file(dir.path());
        let len = fs::metadata(&path).unwrap().len();
        let last = stored[4].len() as u64;
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - last + cut.min(last - 1))
            .unwrap();
        assert_recovered(dir.path(), &stored, 4);
    }
}

#[test]
fn recovery_cuts_appended_garbage() {
    for garbage in [&[0u8; 3][..], &[0; 100], &[0xff; 64], &batch(1, 1, 1)[..40]] {
        let dir = tempfile::tempdir().unwrap();
        let stored = durable_log(dir.path(), 4);
        let path = last_log_file(dir.path());
        let file = fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all_at(garbage, fs::metadata(&path).unwrap().len())
            .unwrap();
        assert_recovered(dir.path(), &stored, 4);
    }
}

#[test]
fn recovery_cuts_a_damaged_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let stored = durable_log(dir.path(), 4);
    let path = last_log_file(dir.path());
    let len = fs::metadata(&path).unwrap().len();
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut byte = [0];
    file.read_exact_at(&mut byte, len - 3).unwrap();
    file.write_all_at(&[byte[0] ^ 0x10], len - 3).unwrap();
    assert_recovered(dir.path(), &stored, 3);
}

#[test]
fn recovery_cuts_a_wrong_base_offset() {
    let dir = tempfile::tempdir().unwrap();
    let stored = durable_log(dir.path(), 4);
    let path = last_log_file(dir.path());
    let at = stored[..3].concat().len() as u64;
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&1234i64.to_be_bytes(), at).unwrap();
    assert_recovered(dir.path(), &stored, 3);
}

#[test]
fn recovery_warns_with_the_file_and_the_bytes_cut() {
    use std::sync::{Arc, Mutex};

    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let stored = durable_log(dir.path(), 2);
    let path = last_log_file(dir.path());
    let file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all_at(&[7; 5], fs::metadata(&path).unwrap().len())
        .unwrap();
    let captured = Arc::new(Mutex::new(Vec::new()));
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || Capture(sink.clone()))
        .with_ansi(false)
        .finish();
    let log = tracing::subscriber::with_default(subscriber, || {
        PartitionLog::open(dir.path(), &LogConfig::default()).unwrap()
    });
    assert_eq!(read_all(&log, 0), stored.concat());
    let text = String::from_utf8(captured.lock().unwrap().clone()).unwrap();
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("00000000000000000000.log"), "{text}");
    assert!(text.contains("bytes_cut=5"), "{text}");
}

#[test]
fn damage_after_a_clean_close_is_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let stored = durable_log(dir.path(), 4);
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    log.close().unwrap();
    let path = last_log_file(dir.path());
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    assert_recovered(dir.path(), &stored, 3);
}

#[test]
fn missing_or_corrupt_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(1, 30, 1).len() as u64;
    let config = LogConfig {
        segment_bytes: 20 * one,
        index_interval_bytes: 0,
        ..fast()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let mut stored = Vec::new();
    for i in 0..50 {
        stored.extend(append(&mut log, batch(1, 30, i), 0));
    }
    log.close().unwrap();
    let first_index = dir.path().join("00000000000000000000.index");
    let first_time = dir.path().join("00000000000000000000.timeindex");
    let second_index = dir.path().join("00000000000000000020.index");
    let index_bytes = fs::read(&first_index).unwrap();
    let time_bytes = fs::read(&first_time).unwrap();
    let second_bytes = fs::read(&second_index).unwrap();
    assert_eq!(index_bytes.len(), 19 * 8);

    fs::remove_file(&first_index).unwrap();
    fs::remove_file(&first_time).unwrap();
    fs::write(&second_index, [1, 2, 3]).unwrap();
    let log = PartitionLog::open(dir.path(), &config).unwrap();
    assert_eq!(fs::read(&first_index).unwrap(), index_bytes);
    assert_eq!(fs::read(&first_time).unwrap(), time_bytes);
    assert_eq!(fs::read(&second_index).unwrap(), second_bytes);
    assert_eq!(read_all(&log, 0), stored);
    assert_eq!(log.read(25, 1).unwrap().records, headers_at(&stored, 25));
    assert_eq!(log.offset_for_timestamp(33).unwrap().unwrap().offset, 33);

    // An index entry pointing at the wrong batch is caught too.
    drop(log);
    let mut wrong = index_bytes.clone();
    wrong[index_bytes.len() - 8..index_bytes.len() - 4].copy_from_slice(&7u32.to_be_bytes());
    fs::write(&first_index, &wrong).unwrap();
    let log = PartitionLog::open(dir.path(), &config).unwrap();
    assert_eq!(fs::read(&first_index).unwrap(), index_bytes);
    assert_eq!(read_all(&log, 0), stored);
}

#[test]
fn orphan_indexes_are_deleted_and_unknown_files_kept() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("00000000000000000042.index"), [0; 8]).unwrap();
    fs::write(dir.path().join("notes.txt"), "hi").unwrap();
    let log = PartitionLog::open(dir.path(), &fast()).unwrap();
    assert!(!dir.path().join("00000000000000000042.index").exists());
    assert!(dir.path().join("notes.txt").exists());
    assert!(dir.path().join("00000000000000000000.log").exists());
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn flush_policy() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 5,
        flush_ms: 100,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    assert!(!log.needs_flush(1_000_000));
    append(&mut log, batch(2, 1, 1), 1000);
    assert!(!log.needs_flush(1099));
    assert!(log.needs_flush(1100));
    append(&mut log, batch(3, 1, 1), 1050); // 5 records: flushed by the append
    assert!(!log.needs_flush(5000));
    append(&mut log, batch(1, 1, 1), 6000);
    assert!(log.needs_flush(6100));
    log.flush().unwrap();
    assert!(!log.needs_flush(10_000));

    let never = LogConfig {
        flush_messages: u64::MAX,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path().join("b"), &never).unwrap();
    append(&mut log, batch(2, 1, 1), 0);
    assert!(!log.needs_flush(i64::MAX));
}

#[test]
fn delete_removes_the_directory() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("topic-0");
    let mut log = PartitionLog::open(&dir, &fast()).unwrap();
    append(&mut log, batch(2, 1, 1), 0);
    assert_eq!(log.dir(), dir);
    log.delete().unwrap();
    assert!(!dir.exists());
}

#[test]
fn invalid_config_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 0,
        ..LogConfig::default()
    };
    assert!(matches!(
        PartitionLog::open(dir.path(), &config),
        Err(LogError::InvalidConfig(_))
    ));
}

#[derive(Debug, Clone)]
enum Op {
    /// Batches of (record count, value length) in one append.
    Append(Vec<(usize, usize)>),
    /// Drop without closing (like a crash after acknowledged appends).
    Reopen,
    Close,
    /// Cut a few bytes off the last segment, then reopen: only whole batches survive.
    TearTail(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((1usize..5, 0usize..120), 1..4).prop_map(Op::Append),
        1 => Just(Op::Reopen),
        1 => Just(Op::Close),
        1 => (1usize..40).prop_map(Op::TearTail),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_appends_and_reopens_match_a_model(
        ops in prop::collection::vec(op(), 1..30),
        segment_bytes in 300u64..1500,
        index_interval in 0u64..300,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes,
            index_interval_bytes: index_interval,
            ..fast()
        };
        let mut log = Some(PartitionLog::open(dir.path(), &config).unwrap());
        // Batches as stored, in order.
        let mut model: Vec<Vec<u8>> = Vec::new();
        for (step, op) in ops.into_iter().enumerate() {
            let current = log.as_mut().unwrap();
            match op {
                Op::Append(spec) => {
                    let mut data: Vec<u8> = spec
                        .iter()
                        .map(|&(n, len)| batch(n, len, step as i64))
                        .collect::<Vec<_>>()
                        .concat();
                    let end = current.log_end_offset();
                    match current.append(&data, step as i64) {
                        Ok(info) => {
                            prop_assert_eq!(info.base_offset, end);
                            stamp(&mut data, info.base_offset);
                            let mut at = 0;
                            for h in headers(&data) {
                                model.push(data[at..at + h.size()].to_vec());
                                at += h.size();
                            }
                            prop_assert_eq!(current.log_end_offset(), info.last_offset + 1);
                        }
                        Err(LogError::BatchTooLarge { .. }) => {
                            prop_assert!(data.len() as u64 > segment_bytes);
                        }
                        Err(e) => prop_assert!(false, "append failed: {}", e),
                    }
                }
                Op::Reopen => {
                    drop(log.take());
                    log = Some(PartitionLog::open(dir.path(), &config).unwrap());
                }
                Op::Close => {
                    log.take().unwrap().close().unwrap();
                    log = Some(PartitionLog::open(dir.path(), &config).unwrap());
                }
                Op::TearTail(bytes) => {
                    drop(log.take());
                    let path = last_log_file(dir.path());
                    let len = fs::metadata(&path).unwrap().len();
                    let keep = len.saturating_sub(bytes as u64);
                    fs::OpenOptions::new().write(true).open(&path).unwrap()
                        .set_len(keep).unwrap();
                    // Whole batches of the last segment that end within `keep` survive.
                    let segment_base: i64 = path.file_stem().unwrap().to_str().unwrap()
                        .parse().unwrap();
                    let mut in_segment = 0u64;
                    let mut kept = Vec::new();
                    for b in model.drain(..) {
                        let h = headers(&b)[0];
                        if h.base_offset < segment_base {
                            kept.push(b);
                        } else if in_segment + b.len() as u64 <= keep {
                            in_segment += b.len() as u64;
                            kept.push(b);
                        }
                    }
                    model = kept;
                    log = Some(PartitionLog::open(dir.path(), &config).unwrap());
                }
            }
            let current = log.as_ref().unwrap();
            let end = model.last().map_or(0, |b| headers(b)[0].next_offset());
            prop_assert_eq!(current.log_end_offset(), end);
            prop_assert_eq!(read_all(current, 0), model.concat());
            for b in &model {
                let h = headers(b)[0];
                for offset in [h.base_offset, h.last_offset()] {
                    let read = current.read(offset, 1).unwrap();
                    prop_assert_eq!(&read.records[..], &b[..]);
                }
            }
        }
    }
}

#[test]
fn a_flush_ticket_makes_its_end_durable_and_appends_after_it_wait_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    assert!(
        log.flush_ticket().unwrap().is_none(),
        "nothing to flush yet"
    );
    log.append_deferred(&batch(3, 10, 1), 1).unwrap();
    assert_eq!(log.flushed_offset(), 0);
    assert!(log.flush_due());
    let ticket = log.flush_ticket().unwrap().expect("a ticket");
    assert_eq!(ticket.end, 3);
    // An append while the fsync runs is not covered by it.
    log.append_deferred(&batch(2, 10, 2), 2).unwrap();
    ticket.file.sync_data().unwrap();
    log.flush_done(ticket.end);
    assert_eq!(log.flushed_offset(), 3);
    assert!(log.flush_due(), "the later append is still unflushed");
    let next = log.flush_ticket().unwrap().expect("a second ticket");
    assert_eq!(next.end, 5);
    next.file.sync_data().unwrap();
    log.flush_done(next.end);
    assert_eq!(log.flushed_offset(), 5);
    assert!(!log.flush_due());
    assert!(log.flush_ticket().unwrap().is_none());
    // A failed fsync takes the log offline.
    log.append_deferred(&batch(1, 10, 3), 3).unwrap();
    let _ = log.flush_ticket().unwrap().expect("a third ticket");
    log.flush_failed();
    assert!(matches!(
        log.append(&batch(1, 10, 4), 4),
        Err(LogError::Offline { .. })
    ));
}

#[test]
fn an_append_leaves_the_produced_bytes_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    log.append(&batch(2, 10, 1), 1).unwrap();
    let produced = [batch(3, 10, 2), batch(1, 10, 2)].concat();
    let info = log.append(&produced, 2).unwrap();
    assert_eq!(produced, [batch(3, 10, 2), batch(1, 10, 2)].concat());
    let mut expected = produced.clone();
    stamp(&mut expected, info.base_offset);
    assert_eq!(log.read(2, 1 << 20).unwrap().records, expected);
}

#[test]
fn a_planned_read_returns_what_was_there_when_it_was_planned() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        retention_bytes: 0,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let first = append(&mut log, batch(2, 100, 1), 1);
    let planned = log.plan_read(0, 1 << 20).unwrap();
    // More appends (which roll the segment) and retention that deletes the segment the
    // read was planned on: the read still returns exactly the batches planned.
    append(&mut log, batch(2, 100, 2), 2);
    append(&mut log, batch(2, 100, 3), 3);
    assert!(log.apply_retention(4).unwrap() > 0);
    assert!(log.log_start_offset() > 0);
    let result = planned.execute().unwrap();
    assert_eq!(result.records, first);
    assert_eq!((result.high_watermark, result.log_start_offset), (2, 0));
}

#[test]
fn a_roll_that_cannot_create_the_new_segment_leaves_a_log_that_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), &config).unwrap();
    let mut stored = append(&mut log, batch(1, 100, 1), 1);
    // The next append rolls to base offset 1; its time index cannot be created (a
    // directory is in the way, as a file that cannot be opened would be).
    let blocker = dir.path().join("00000000000000000001.timeindex");
    fs::create_dir(&blocker).unwrap();
    assert!(log.append(&batch(2, 100, 2), 2).is_err());
    for leftover in ["00000000000000000001.log", "00000000000000000001.index"] {
        assert!(
            !dir.path().join(leftover).exists(),
            "{leftover} left behind"
        );
    }
    // A small append still fits the old segment and goes there.
    stored.extend(append(&mut log, batch(1, 1, 3), 3));
    fs::remove_dir(&blocker).unwrap();
    // Now the roll works (its base offset is the new log end offset, 2).
    stored.extend(append(&mut log, batch(2, 100, 4), 4));
    assert!(dir.path().join("00000000000000000002.log").exists());
    log.close().unwrap();
    let log = PartitionLog::open(dir.path(), &config).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(read_all(&log, 0), stored);
}

#[test]
fn many_segments_hold_no_more_files_than_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = FileCache::new(8);
    let config = LogConfig {
        segment_bytes: 200,
        ..fast()
    };
    let mut log = PartitionLog::open_in(dir.path(), &config, &cache).unwrap();
    let mut stored = Vec::new();
    for i in 0..500 {
        stored.extend(append(&mut log, batch(1, 100, i), i));
        assert!(cache.len() <= 8, "{} files cached", cache.len());
    }
    assert_eq!(log.segment_count(), 500);
    assert_eq!(read_all(&log, 0), stored);
    assert!(cache.len() <= 8);
    // Timestamp lookups go through the sealed segments' indexes too.
    let found = log.offset_for_timestamp(300).unwrap().unwrap();
    assert_eq!(found.offset, 300);
    log.close().unwrap();
    drop(log);
    assert!(cache.is_empty(), "closing the log closes its cached files");

    // Reopened after the clean close, then (not closed) after a crash.
    for _ in 0..2 {
        let log = PartitionLog::open_in(dir.path(), &config, &cache).unwrap();
        assert!(cache.len() <= 8);
        assert_eq!(log.log_end_offset(), 500);
        assert_eq!(read_all(&log, 0), stored);
    }
}

#[test]
fn a_deleted_segment_stays_readable_by_a_planned_read_and_leaves_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = FileCache::new(100);
    let config = LogConfig {
        segment_bytes: 200,
        retention_bytes: 0,
        ..fast()
    };
    let mut log = PartitionLog::open_in(dir.path(), &config, &cache).unwrap();
    let first = append(&mut log, batch(1, 100, 1), 1);
    append(&mut log, batch(1, 100, 2), 2);
    append(&mut log, batch(1, 100, 3), 3);
    let cached = cache.len();
    let planned = log.plan_read(0, 1 << 20).unwrap();
    assert_eq!(log.apply_retention(4).unwrap(), 2);
    assert!(
        cache.len() < cached,
        "deleted segments' files left the cache"
    );
    assert_eq!(planned.execute().unwrap().records, first);
}

#[test]
fn a_log_taken_offline_by_a_write_error_comes_back_after_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    let mut stored = append(&mut log, batch(2, 10, 1), 1);
    stored.extend(append(&mut log, batch(1, 10, 2), 2));

    log.break_active_file();
    let err = log.append(&batch(1, 10, 3), 3).unwrap_err();
    assert!(matches!(err, LogError::Io { .. }), "{err}");
    assert!(log.is_offline());
    // Half a batch reached the file before the error (what a failing disk may leave).
    let path = last_log_file(dir.path());
    let torn = &batch(1, 10, 3)[..30];
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all_at(torn, stored.len() as u64)
        .unwrap();
    assert!(matches!(
        log.append(&batch(1, 10, 3), 3),
        Err(LogError::Offline { .. })
    ));
    assert!(matches!(log.flush(), Err(LogError::Offline { .. })));

    // Not before the backoff.
    let now = Instant::now();
    assert!(!log.try_recover(now).unwrap());
    assert!(log.is_offline());
    assert!(log.try_recover(now + FIRST_RECOVERY_BACKOFF).unwrap());
    assert!(!log.is_offline());
    // The torn tail was cut, as a restart would; offsets go on from the last valid batch.
    assert_eq!(fs::metadata(&path).unwrap().len(), stored.len() as u64);
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.flushed_offset(), 3);
    stored.extend(append(&mut log, batch(2, 10, 4), 4));
    assert_eq!(read_all(&log, 0), stored);
    drop(log);
    let log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    assert_eq!(read_all(&log, 0), stored);
}

#[test]
fn a_failed_recovery_keeps_the_log_offline_and_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    let stored = append(&mut log, batch(1, 10, 1), 1);
    log.break_active_file();
    assert!(log.append(&batch(1, 10, 2), 2).is_err());
    // The active segment cannot be reopened: its file is gone (a directory is in the way).
    let path = last_log_file(dir.path());
    let aside = dir.path().join("aside");
    fs::rename(&path, &aside).unwrap();
    fs::create_dir(&path).unwrap();
    let t0 = Instant::now() + FIRST_RECOVERY_BACKOFF;
    assert!(log.try_recover(t0).is_err());
    assert!(log.is_offline());
    // The next attempt waits twice as long.
    assert!(!log.try_recover(t0 + FIRST_RECOVERY_BACKOFF).unwrap());
    fs::remove_dir(&path).unwrap();
    fs::rename(&aside, &path).unwrap();
    assert!(log.try_recover(t0 + FIRST_RECOVERY_BACKOFF * 2).unwrap());
    assert_eq!(read_all(&log, 0), stored);
}

#[test]
fn a_closed_log_does_not_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &LogConfig::default()).unwrap();
    log.close().unwrap();
    assert!(!log
        .try_recover(Instant::now() + MAX_RECOVERY_BACKOFF)
        .unwrap());
    assert!(log.is_offline());
}

/// ListOffsets by timestamp skips what DeleteRecords removed (Kafka searches from the
/// log start offset): never an offset below the start, and nothing once every record
/// is deleted.
#[test]
fn timestamp_lookup_starts_at_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), &fast()).unwrap();
    // Offsets 0..10 with timestamps 100..110, then 10..20 with 200..210.
    append(&mut log, batch(10, 5, 100), 0);
    append(&mut log, batch(10, 5, 200), 0);
    log.delete_records(5).unwrap();
    assert_eq!(log.offset_for_timestamp(0).unwrap().unwrap().offset, 5);
    // The first batch's matching records are below the start: the search goes on.
    let found = log.offset_for_timestamp_from(0, 10).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (10, 209));
    log.delete_records(20).unwrap();
    assert_eq!(log.offset_for_timestamp(0).unwrap(), None);
    assert_eq!(log.offset_for_timestamp(205).unwrap(), None);
}
