//! The log start offset checkpoint: `<partition dir>/log-start-offset`, the offset
//! DeleteRecords moved the log start to (Kafka keeps the same value for all partitions
//! in `log-start-offset-checkpoint`). Without the file the log starts at its oldest
//! segment's base offset; with it, at the larger of the two.
//!
//! The file holds the offset as decimal text and a newline. It is replaced atomically
//! (temporary file, fsync, rename, directory fsync) before the log acts on a new start,
//! so after a crash the start is the old or the new one, and segments are deleted only
//! once the new one is durable.

use std::{
    fs::{self, File},
    io::Write as _,
    path::Path,
};

use super::LogError;

/// The checkpoint's file name inside a partition directory.
pub const FILE: &str = "log-start-offset";

/// The checkpointed start offset in `dir`, if there is a readable one. A missing file
/// is `None`; an unreadable or garbled one is an error naming the file (data below it
/// was deleted on request and must not reappear).
pub fn read(dir: &Path) -> Result<Option<i64>, LogError> {
    let path = dir.join(FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(&path)(e)),
    };
    match text.trim().parse::<i64>() {
        Ok(offset) if offset >= 0 => Ok(Some(offset)),
        _ => Err(LogError::corrupt(
            &path,
            0,
            format!(
                "not a log start offset: {:?}",
                text.chars().take(40).collect::<String>()
            ),
        )),
    }
}

/// Durably records `offset` as the start offset of the log in `dir`.
pub fn write(dir: &Path, offset: i64) -> Result<(), LogError> {
    let path = dir.join(FILE);
    let tmp = dir.join(format!("{FILE}.tmp"));
    File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(format!("{offset}\n").as_bytes())?;
            f.sync_all()
        })
        .map_err(LogError::io(&tmp))?;
    fs::rename(&tmp, &path).map_err(LogError::io(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(LogError::io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        write(dir.path(), 42).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(42));
        write(dir.path(), 43).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(43));
        fs::write(dir.path().join(FILE), "x").unwrap();
        assert!(matches!(read(dir.path()), Err(LogError::Corrupt { .. })));
    }

    /// DeleteRecords through the log: the start moves inside a segment, whole segments
    /// below it go, reads below it are out of range, and the start survives a reopen
    /// without a clean close (as after `kill -9`).
    #[test]
    fn delete_records_moves_the_start_durably() {
        use crate::{test_util::batch, LogConfig, PartitionLog};
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1024,
            ..LogConfig::default()
        };
        let mut log = PartitionLog::open(dir.path(), &config).unwrap();
        for _ in 0..30 {
            log.append(&batch(5, 50, 1_000), 1_000).unwrap();
        }
        let segments = log.segment_count();
        assert!(segments > 3, "{segments}");
        let end = log.log_end_offset();
        assert_eq!(end, 150);
        assert!(matches!(
            log.delete_records(end + 1),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        assert!(matches!(
            log.delete_records(-2),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        assert_eq!(log.delete_records(72).unwrap(), 72);
        assert_eq!(log.log_start_offset(), 72);
        assert!(log.segment_count() < segments);
        // Asking for less changes nothing.
        assert_eq!(log.delete_records(10).unwrap(), 72);
        assert!(matches!(
            log.read(71, 1 << 20),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        let read = log.read(72, 1 << 20).unwrap();
        assert!(!read.records.is_empty());
        assert_eq!(read.log_start_offset, 72);
        drop(log);
        let mut log = PartitionLog::open(dir.path(), &config).unwrap();
        assert_eq!(log.log_start_offset(), 72);
        assert_eq!(log.log_end_offset(), end);
        // Up to the high watermark: the start is the end, the active segment stays.
        assert_eq!(log.delete_records(end).unwrap(), end);
        assert_eq!(log.segment_count(), 1);
        let next = log.append(&batch(1, 10, 2_000), 2_000).unwrap();
        assert_eq!(next.base_offset, end);
        assert_eq!(log.log_start_offset(), end);
    }
}
