//! The sparse time index of a segment (`<base offset>.timeindex`), after Kafka's
//! `TimeIndex`.
//!
//! Entry (12 bytes, big-endian): timestamp i64 (ms), relative offset u32. An entry
//! `(t, r)` says: the largest batch max timestamp up to that point of the segment is `t`,
//! first reached by the batch with base offset `segment base + r`; so every batch before
//! that one has a max timestamp below `t`. Entries are added at offset index points when
//! the max timestamp grew (at most one per index interval), plus one final entry when the
//! segment is rolled or recovered (as Kafka does), so the last entry holds the segment's
//! max timestamp. Timestamps are strictly increasing, relative offsets non-decreasing.

use std::{path::Path, sync::Arc};

use super::{file_cache::FileCache, index::IndexFile, LogError};

const TIME_ENTRY: u64 = 12;

/// The time index of one segment.
#[derive(Debug)]
pub(super) struct TimeIndex {
    file: IndexFile,
    last: Option<(i64, u32)>,
}

impl TimeIndex {
    /// Opens (creating if missing) the time index at `path`, through `cache`.
    pub(super) fn open(path: &Path, cache: &Arc<FileCache>) -> Result<TimeIndex, LogError> {
        let file = IndexFile::open(path, TIME_ENTRY, cache)?;
        let mut index = TimeIndex { file, last: None };
        index.last = index.entry(index.file.len().checked_sub(1))?;
        Ok(index)
    }

    /// The last entry with timestamp <= `timestamp`: `(timestamp, relative offset)`.
    /// Batches before its offset all have max timestamps below `timestamp`.
    pub(super) fn lookup(&self, timestamp: i64) -> Result<Option<(i64, u32)>, LogError> {
        let mut buf = [0; TIME_ENTRY as usize];
        let found = self.file.search(&mut buf, |e| decode(e).0 <= timestamp)?;
        self.entry(found)
    }

    /// Appends `(timestamp, relative_offset)` if `timestamp` is above the last entry's.
    pub(super) fn maybe_append(
        &mut self,
        timestamp: i64,
        relative_offset: u32,
    ) -> Result<(), LogError> {
        if self.last.is_some_and(|(t, _)| t >= timestamp) {
            return Ok(());
        }
        let mut entry = [0; TIME_ENTRY as usize];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative_offset.to_be_bytes());
        self.file.append(&entry)?;
        self.last = Some((timestamp, relative_offset));
        Ok(())
    }

    /// The last entry: the segment's max timestamp once the segment is rolled.
    pub(super) fn last(&self) -> Option<(i64, u32)> {
        self.last
    }

    /// Removes every entry.
    pub(super) fn clear(&mut self) -> Result<(), LogError> {
        self.file.truncate(0)?;
        self.last = None;
        Ok(())
    }

    /// Fsyncs the file if it changed.
    pub(super) fn flush(&mut self) -> Result<(), LogError> {
        self.file.flush()
    }

    /// A cheap plausibility check (Kafka's `sanityCheck`, plus bounds): whole entries,
    /// first and last entries ordered, last relative offset below `offset_span` (the
    /// number of offsets the segment can hold).
    pub(super) fn check(&self, offset_span: u64) -> Result<(), String> {
        if self.file.is_ragged() {
            return Err("length is not a multiple of 12".into());
        }
        let (Some(first), Some(last)) =
            (self.entry(Some(0)).map_err(|e| e.to_string())?, self.last)
        else {
            return Ok(());
        };
        if first.0 > last.0 || first.1 > last.1 || u64::from(last.1) >= offset_span {
            return Err(format!(
                "entries {first:?} .. {last:?} do not fit a segment of {offset_span} offsets"
            ));
        }
        Ok(())
    }

    /// The index file path.
    pub(super) fn path(&self) -> &Path {
        self.file.path()
    }

    fn entry(&self, i: Option<u64>) -> Result<Option<(i64, u32)>, LogError> {
        let Some(i) = i.filter(|&i| i < self.file.len()) else {
            return Ok(None);
        };
        let mut buf = [0; TIME_ENTRY as usize];
        self.file.read(i, &mut buf)?;
        Ok(Some(decode(&buf)))
    }
}

fn decode(e: &[u8]) -> (i64, u32) {
    let mut ts = [0; 8];
    ts.copy_from_slice(&e[..8]);
    let rel = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
    (i64::from_be_bytes(ts), rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_growing_timestamps_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.timeindex");
        let mut index = TimeIndex::open(&path, &FileCache::new(1)).unwrap();
        index.maybe_append(100, 0).unwrap();
        index.maybe_append(100, 5).unwrap();
        index.maybe_append(90, 6).unwrap();
        index.maybe_append(200, 7).unwrap();
        assert_eq!(index.lookup(99).unwrap(), None);
        assert_eq!(index.lookup(150).unwrap(), Some((100, 0)));
        assert_eq!(index.lookup(200).unwrap(), Some((200, 7)));
        index.flush().unwrap();
        drop(index);
        let index = TimeIndex::open(&path, &FileCache::new(1)).unwrap();
        assert_eq!(index.last(), Some((200, 7)));
        index.check(8).unwrap();
        assert!(index.check(7).is_err());
    }
}
