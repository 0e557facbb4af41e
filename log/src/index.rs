//! The sparse offset index of a segment (`<base offset>.index`), after Kafka's
//! `OffsetIndex`, and the fixed-width entry file it shares with the time index.
//!
//! Entry (8 bytes, big-endian): relative offset u32 (batch base offset − segment base
//! offset), file position u32 (byte position of that batch in the `.log` file). One entry
//! per [`super::LogConfig::index_interval_bytes`] of log; the first batch (position 0) is
//! implied and has none. Entries are strictly increasing in both fields. A lookup finds
//! the last entry at or below a target offset; the batch holding the target starts at or
//! after that position. Files are read with positioned reads, never loaded whole.

use std::{fs::File, os::unix::fs::FileExt, path::Path, sync::Arc};

use super::{
    file_cache::{CachedFile, FileCache},
    LogError,
};

/// A file of fixed-width entries, appended at its end, searched with positioned reads.
/// The file is opened on demand through the broker's [`FileCache`], so an index holds
/// no descriptor while it is not used.
#[derive(Debug)]
pub(super) struct IndexFile {
    file: CachedFile,
    entry_len: u64,
    entries: u64,
    /// The file length was not a multiple of the entry length when opened.
    ragged: bool,
    /// Entries were written since the last fsync.
    dirty: bool,
}

impl IndexFile {
    /// Opens (creating if missing) the index file at `path`, through `cache`.
    pub(super) fn open(
        path: &Path,
        entry_len: u64,
        cache: &Arc<FileCache>,
    ) -> Result<IndexFile, LogError> {
        let file = CachedFile::open(cache, path, true)?;
        let len = file.get()?.metadata().map_err(LogError::io(path))?.len();
        Ok(IndexFile {
            file,
            entry_len,
            entries: len / entry_len,
            ragged: len % entry_len != 0,
            dirty: false,
        })
    }

    /// Number of whole entries.
    pub(super) fn len(&self) -> u64 {
        self.entries
    }

    /// The file path.
    pub(super) fn path(&self) -> &Path {
        self.file.path()
    }

    /// Whether the file length is a whole number of entries.
    pub(super) fn is_ragged(&self) -> bool {
        self.ragged
    }

    /// Reads entry `i` (< `len()`) into `buf` (`entry_len` bytes).
    pub(super) fn read(&self, i: u64, buf: &mut [u8]) -> Result<(), LogError> {
        self.read_from(&*self.file.get()?, i, buf)
    }

    fn read_from(&self, file: &File, i: u64, buf: &mut [u8]) -> Result<(), LogError> {
        file.read_exact_at(buf, i * self.entry_len)
            .map_err(LogError::io(self.path()))
    }

    /// The index of the last entry for which `at_or_below` holds, which must hold for a
    /// prefix of the entries (binary search).
    pub(super) fn search(
        &self,
        buf: &mut [u8],
        at_or_below: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<u64>, LogError> {
        let (mut lo, mut hi) = (0, self.entries);
        if lo == hi {
            return Ok(None);
        }
        let file = self.file.get()?;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            self.read_from(&file, mid, buf)?;
            if at_or_below(buf) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1))
    }

    /// Appends one entry (`entry_len` bytes).
    pub(super) fn append(&mut self, entry: &[u8]) -> Result<(), LogError> {
        self.file
            .get()?
            .write_all_at(entry, self.entries * self.entry_len)
            .map_err(LogError::io(self.path()))?;
        self.entries += 1;
        self.dirty = true;
        Ok(())
    }

    /// Keeps the first `entries` entries and cuts the rest (and any partial entry).
    pub(super) fn truncate(&mut self, entries: u64) -> Result<(), LogError> {
        self.file
            .get()?
            .set_len(entries * self.entry_len)
            .map_err(LogError::io(self.path()))?;
        self.entries = entries;
        self.ragged = false;
        self.dirty = true;
        Ok(())
    }

    /// Fsyncs the file if entries were written since the last flush.
    pub(super) fn flush(&mut self) -> Result<(), LogError> {
        if self.dirty {
            self.file
                .get()?
                .sync_data()
                .map_err(LogError::io(self.path()))?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// The offset index of one segment.
#[derive(Debug)]
pub(super) struct OffsetIndex {
    file: IndexFile,
    last: Option<(u32, u32)>,
}

const OFFSET_ENTRY: u64 = 8;

impl OffsetIndex {
    /// Opens (creating if missing) the offset index at `path`, through `cache`.
    pub(super) fn open(path: &Path, cache: &Arc<FileCache>) -> Result<OffsetIndex, LogError> {
        let file = IndexFile::open(path, OFFSET_ENTRY, cache)?;
        let mut index = OffsetIndex { file, last: None };
        index.last = index.entry(index.file.len().checked_sub(1))?;
        Ok(index)
    }

    /// The last entry with relative offset <= `relative_offset`:
    /// `(relative offset, position)`.
    pub(super) fn lookup(&self, relative_offset: u32) -> Result<Option<(u32, u32)>, LogError> {
        let mut buf = [0; OFFSET_ENTRY as usize];
        let found = self
            .file
            .search(&mut buf, |e| decode(e).0 <= relative_offset)?;
        self.entry(found)
    }

    /// Appends an entry; the caller keeps both fields increasing.
    pub(super) fn append(&mut self, relative_offset: u32, position: u32) -> Result<(), LogError> {
        let mut entry = [0; OFFSET_ENTRY as usize];
        entry[..4].copy_from_slice(&relative_offset.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.append(&entry)?;
        self.last = Some((relative_offset, position));
        Ok(())
    }

    /// The last entry.
    pub(super) fn last(&self) -> Option<(u32, u32)> {
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

    /// A cheap plausibility check against a `.log` of `log_size` bytes (Kafka's
    /// `sanityCheck`, plus bounds): whole entries, no more entries than batches could
    /// fit, first and last entries ordered and inside the log. The caller also checks
    /// that the last entry points at the batch it names.
    pub(super) fn check(&self, log_size: u64) -> Result<(), String> {
        if self.file.is_ragged() {
            return Err("length is not a multiple of 8".into());
        }
        let n = self.file.len();
        if n > log_size / super::batch::BATCH_HEADER_LEN as u64 + 1 {
            return Err(format!("{n} entries for a log of {log_size} bytes"));
        }
        let (Some(first), Some(last)) =
            (self.entry(Some(0)).map_err(|e| e.to_string())?, self.last)
        else {
            return Ok(());
        };
        if first.0 > last.0 || first.1 > last.1 || u64::from(last.1) >= log_size {
            return Err(format!(
                "entries {first:?} .. {last:?} do not fit a log of {log_size} bytes"
            ));
        }
        Ok(())
    }

    /// The index file path.
    pub(super) fn path(&self) -> &Path {
        self.file.path()
    }

    fn entry(&self, i: Option<u64>) -> Result<Option<(u32, u32)>, LogError> {
        let Some(i) = i.filter(|&i| i < self.file.len()) else {
            return Ok(None);
        };
        let mut buf = [0; OFFSET_ENTRY as usize];
        self.file.read(i, &mut buf)?;
        Ok(Some(decode(&buf)))
    }
}

fn decode(e: &[u8]) -> (u32, u32) {
    let rel = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
    let pos = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
    (rel, pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_append_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut index = OffsetIndex::open(&path, &FileCache::new(1)).unwrap();
        assert_eq!(index.lookup(5).unwrap(), None);
        for i in 1..=10u32 {
            index.append(i * 10, i * 1000).unwrap();
        }
        assert_eq!(index.lookup(9).unwrap(), None);
        assert_eq!(index.lookup(10).unwrap(), Some((10, 1000)));
        assert_eq!(index.lookup(55).unwrap(), Some((50, 5000)));
        assert_eq!(index.lookup(u32::MAX).unwrap(), Some((100, 10000)));
        index.flush().unwrap();
        drop(index);

        let mut index = OffsetIndex::open(&path, &FileCache::new(1)).unwrap();
        assert_eq!(index.last(), Some((100, 10000)));
        index.check(20_000).unwrap();
        assert!(index.check(10_000).is_err());
        index.clear().unwrap();
        assert_eq!(index.lookup(100).unwrap(), None);
    }

    #[test]
    fn a_partial_entry_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        std::fs::write(&path, [0u8; 11]).unwrap();
        let index = OffsetIndex::open(&path, &FileCache::new(1)).unwrap();
        assert!(index.check(1 << 20).is_err());
    }
}
