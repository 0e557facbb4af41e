//! One segment: a `.log` file of batches back to back plus its two sparse indexes
//! (Kafka's `LogSegment`). Appends, positioned reads, index upkeep, flush and deletion;
//! loading and repair on open live in [`super::recovery`].

use std::{
    fs::{self, File, OpenOptions},
    io::{self, IoSlice, Seek, SeekFrom, Write},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::Arc,
    time::UNIX_EPOCH,
};

use super::{
    batch::{BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD, MIN_BATCH_LENGTH},
    file_cache::{CachedFile, FileCache, SegmentFile},
    index::OffsetIndex,
    time_index::TimeIndex,
    LogError, TimestampOffset, NO_TIMESTAMP,
};

/// File name of a segment's `.log`, `.index` or `.timeindex`: the base offset padded to
/// 20 digits, as in Kafka.
pub(super) fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// Bytes at the start of a batch that an append rewrites: base offset (8), batch length
/// (4, unchanged), partition leader epoch (4). The CRC starts after them.
const PATCHED_PREFIX: usize = 16;

/// The first [`PATCHED_PREFIX`] bytes of the batch `header` describes, as stored.
fn patched_prefix(header: &BatchHeader) -> [u8; PATCHED_PREFIX] {
    let mut prefix = [0; PATCHED_PREFIX];
    prefix[0..8].copy_from_slice(&header.base_offset.to_be_bytes());
    prefix[8..12].copy_from_slice(&header.batch_length.to_be_bytes());
    prefix[12..16].copy_from_slice(&header.partition_leader_epoch.to_be_bytes());
    prefix
}

/// A segment and what is known about its contents.
#[derive(Debug)]
pub(super) struct Segment {
    /// Offset of the first batch; the file names carry it.
    pub(super) base_offset: i64,
    pub(super) log_path: PathBuf,
    /// The `.log`: held open while the segment is active, through the broker's
    /// [`FileCache`] once sealed. Handles are `Arc<File>`, so a flush can fsync it
    /// without holding the partition's lock ([`Segment::flush_ticket`]).
    pub(super) log: SegmentFile,
    /// Bytes of valid batches in the `.log`.
    pub(super) size: u64,
    pub(super) offset_index: OffsetIndex,
    pub(super) time_index: TimeIndex,
    /// An index file did not exist when the segment was opened.
    pub(super) indexes_missing: bool,
    /// The offset after the last batch (the base offset when empty). Exact for the
    /// active segment and for scanned segments; for other segments the next segment's
    /// base offset.
    pub(super) next_offset: i64,
    /// Largest batch max timestamp and the base offset of the first batch that has it.
    pub(super) max_timestamp: Option<TimestampOffset>,
    /// Log bytes appended since the last offset index entry.
    pub(super) bytes_since_index: u64,
    /// When the segment got its first append (ms), for rolling by age.
    pub(super) first_append_ms: Option<i64>,
    /// Data was written to the `.log` since the last fsync.
    log_dirty: bool,
}

impl Segment {
    /// Creates an empty segment with base offset `base_offset` in `dir` (replacing empty
    /// leftovers of an earlier failed attempt), to be the active one: its `.log` stays
    /// open, its indexes go through `cache`. The caller fsyncs the directory. If a
    /// file cannot be created or opened (no descriptors left, say), the files of this
    /// base offset are removed again (best effort) and the error returned.
    pub(super) fn create(
        dir: &Path,
        base_offset: i64,
        cache: &Arc<FileCache>,
    ) -> Result<Segment, LogError> {
        let created = Segment::create_files(dir, base_offset, cache);
        if created.is_err() {
            // Leave nothing behind: an empty segment file whose base offset the log end
            // then passes (appends go on in the previous segment) would make the log
            // inconsistent on the next start.
            for extension in ["log", "index", "timeindex"] {
                let _ = fs::remove_file(dir.join(file_name(base_offset, extension)));
            }
        }
        created
    }

    fn create_files(
        dir: &Path,
        base_offset: i64,
        cache: &Arc<FileCache>,
    ) -> Result<Segment, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)
            .map_err(LogError::io(&log_path))?;
        let mut segment = Segment::open(dir, base_offset, cache, true)?;
        segment.offset_index.clear()?;
        segment.time_index.clear()?;
        segment.indexes_missing = false;
        Ok(segment)
    }

    /// Opens the existing segment `base_offset` in `dir`, creating missing index files
    /// (and noting that they were missing). Nothing is checked yet: `size` is the file
    /// length and the segment looks empty until [`super::recovery`] loads it. The
    /// `.log` of the active segment (`pinned`) stays open; every other file is opened
    /// on demand through `cache`.
    pub(super) fn open(
        dir: &Path,
        base_offset: i64,
        cache: &Arc<FileCache>,
        pinned: bool,
    ) -> Result<Segment, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let index_path = dir.join(file_name(base_offset, "index"));
        let time_path = dir.join(file_name(base_offset, "timeindex"));
        let indexes_missing = !index_path.exists() || !time_path.exists();
        let log = if pinned {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&log_path)
                .map_err(LogError::io(&log_path))?;
            SegmentFile::Pinned {
                file: Arc::new(file),
                path: log_path.clone(),
            }
        } else {
            SegmentFile::Cached(CachedFile::open(cache, &log_path, false)?)
        };
        let size = log
            .get()?
            .metadata()
            .map_err(LogError::io(&log_path))?
            .len();
        Ok(Segment {
            base_offset,
            log,
            size,
            offset_index: OffsetIndex::open(&index_path, cache)?,
            time_index: TimeIndex::open(&time_path, cache)?,
            log_path,
            indexes_missing,
            next_offset: base_offset,
            max_timestamp: None,
            bytes_since_index: 0,
            first_append_ms: None,
            log_dirty: false,
        })
    }

    /// Writes the batches of `records` (described by `headers`, whose base offsets and
    /// leader epochs are the ones to store) at the end of the `.log`, then indexes them.
    /// `records` itself is not modified: each batch's first 16 bytes (base offset,
    /// length, leader epoch; outside the CRC) are written from `headers`, the rest from
    /// `records`, with vectored writes, so a produced batch is never copied in memory.
    /// If the write fails, the file is cut back to its previous length (best effort) and
    /// nothing is indexed.
    pub(super) fn append(
        &mut self,
        records: &[u8],
        headers: &[BatchHeader],
        index_interval: u64,
    ) -> Result<(), LogError> {
        let file = self.log.get()?;
        if let Err(e) = write_batches(&file, self.size, records, headers) {
            let _ = file.set_len(self.size);
            return Err(LogError::io(&self.log_path)(e));
        }
        self.log_dirty = true;
        let mut position = self.size;
        self.size += records.len() as u64;
        for header in headers {
            self.track(position, header, index_interval)?;
            position += header.size() as u64;
        }
        Ok(())
    }

    /// Marks the `.log` as written since the last fsync, so the next [`Self::flush`]
    /// syncs it.
    pub(super) fn mark_dirty(&mut self) {
        self.log_dirty = true;
    }

    /// What a caller needs to make the `.log` durable up to its current end
    /// without this segment: `None` when nothing was written since the last flush. The
    /// segment counts as flushed from now on; the caller fsyncs the file and takes the
    /// log offline if that fails.
    ///
    /// Errors: [`LogError::Io`] if the `.log` cannot be opened (only a sealed segment's
    /// can fail so).
    pub(super) fn flush_ticket(&mut self) -> Result<Option<(Arc<File>, PathBuf)>, LogError> {
        if !self.log_dirty {
            return Ok(None);
        }
        let file = self.log.get()?;
        self.log_dirty = false;
        Ok(Some((file, self.log_path.clone())))
    }

    /// From now on the `.log` is reached through `cache` and closed when unused (the
    /// segment was sealed and is no longer written).
    pub(super) fn unpin(&mut self, cache: &Arc<FileCache>) -> Result<(), LogError> {
        if let SegmentFile::Pinned { file, path } = &self.log {
            self.log = SegmentFile::Cached(CachedFile::adopt(cache, path, Arc::clone(file))?);
        }
        Ok(())
    }

    /// Accounts for the batch `header` at byte `position` (appended or found by a
    /// recovery scan): max timestamp, next offset, and an offset index entry (plus a time
    /// index entry if the max timestamp grew) once more than `index_interval` bytes were
    /// written since the last entry — Kafka's `LogSegment.append` rule. The caller
    /// guarantees the batch fits the segment's u32 relative offsets and positions.
    pub(super) fn track(
        &mut self,
        position: u64,
        header: &BatchHeader,
        index_interval: u64,
    ) -> Result<(), LogError> {
        let max_so_far = self.max_timestamp.map_or(NO_TIMESTAMP, |m| m.timestamp);
        if header.max_timestamp > max_so_far {
            self.max_timestamp = Some(TimestampOffset {
                offset: header.base_offset,
                timestamp: header.max_timestamp,
            });
        }
        if self.bytes_since_index > index_interval {
            let relative = self.relative(header.base_offset);
            self.offset_index.append(relative, position as u32)?;
            if let Some(max) = self.max_timestamp {
                let relative = self.relative(max.offset);
                self.time_index.maybe_append(max.timestamp, relative)?;
            }
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += header.size() as u64;
        self.next_offset = header.next_offset();
        Ok(())
    }

    /// Where to read whole batches starting with the one that holds `offset` (or, in a
    /// gap, the first after it): at most `max_bytes`, but at least that first batch
    /// (KIP-74). `None` if no batch of this segment ends at or after `offset`. The read
    /// itself ([`SegmentRead::execute`]) needs no access to the segment.
    pub(super) fn plan_read(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Option<SegmentRead>, LogError> {
        let Some((position, first)) = self.locate(offset)? else {
            return Ok(None);
        };
        let available = self.size - position;
        // Bounded by the segment size (checked by `header_at`) or by `max_bytes`.
        let len = (max_bytes as u64).min(available).max(first.size() as u64) as usize;
        Ok(Some(SegmentRead {
            file: self.log.get()?,
            path: self.log_path.clone(),
            position,
            len,
            first: first.size(),
        }))
    }

    /// The first batch whose max timestamp is >= `timestamp` (ms) and whose last offset
    /// is >= `min_offset`, as Kafka's `LogSegment.findOffsetByTimestamp` (its
    /// `startingOffset`) at batch granularity. The offset answered is the batch's base
    /// offset, not raised to `min_offset` (the caller's).
    pub(super) fn find_by_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let relative = self.time_index.lookup(timestamp)?.map_or(0, |(_, r)| r);
        let mut position = self.index_position(relative)?;
        let file = self.log.get()?;
        while position < self.size {
            let header = self.header_in(&file, position)?;
            if header.max_timestamp >= timestamp && header.last_offset() >= min_offset {
                return Ok(Some(TimestampOffset {
                    offset: header.base_offset,
                    timestamp: header.max_timestamp,
                }));
            }
            position += header.size() as u64;
        }
        Ok(None)
    }

    /// Position and header of the first batch whose last offset is >= `offset`.
    fn locate(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let relative = u32::try_from(offset.saturating_sub(self.base_offset).max(0));
        let mut position = self.index_position(relative.unwrap_or(u32::MAX))?;
        let file = self.log.get()?;
        while position < self.size {
            let header = self.header_in(&file, position)?;
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.size() as u64;
        }
        Ok(None)
    }

    /// Where to start scanning for the batch holding `base_offset + relative`.
    fn index_position(&self, relative: u32) -> Result<u64, LogError> {
        Ok(self
            .offset_index
            .lookup(relative)?
            .map_or(0, |(_, p)| u64::from(p)))
    }

    /// The byte position of the batch holding `offset` (or the first after it), `None`
    /// past the segment's last batch.
    pub(super) fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
        Ok(self.locate(offset)?.map(|(position, _)| position))
    }

    /// The `len` bytes at `position` of the `.log` (a batch whose header was read).
    pub(super) fn bytes_at(&self, position: u64, len: usize) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0; len];
        self.log
            .get()?
            .read_exact_at(&mut buf, position)
            .map_err(LogError::io(&self.log_path))?;
        Ok(buf)
    }

    /// Reads and parses the batch header at `position`, checking that the whole batch
    /// lies inside the segment.
    pub(super) fn header_at(&self, position: u64) -> Result<BatchHeader, LogError> {
        self.header_in(&*self.log.get()?, position)
    }

    /// [`Self::header_at`], reading from `file` (this segment's `.log`, taken once for
    /// a scan over several batches).
    fn header_in(&self, file: &File, position: u64) -> Result<BatchHeader, LogError> {
        let corrupt = |reason: String| LogError::corrupt(&self.log_path, position, reason);
        if position + BATCH_HEADER_LEN as u64 > self.size {
            return Err(corrupt(format!(
                "batch header past the end of the segment ({} bytes)",
                self.size
            )));
        }
        let mut buf = [0; BATCH_HEADER_LEN];
        file.read_exact_at(&mut buf, position)
            .map_err(LogError::io(&self.log_path))?;
        let header = BatchHeader::parse(&buf).map_err(|e| corrupt(e.to_string()))?;
        if position + header.size() as u64 > self.size {
            return Err(corrupt(format!(
                "batch of {} bytes runs past the end of the segment ({} bytes)",
                header.size(),
                self.size
            )));
        }
        Ok(header)
    }

    /// Adds the final time index entry (the segment's max timestamp, as Kafka does when a
    /// segment becomes inactive or is recovered) and fsyncs everything.
    pub(super) fn seal(&mut self) -> Result<(), LogError> {
        if let Some(max) = self.max_timestamp {
            let relative = self.relative(max.offset);
            self.time_index.maybe_append(max.timestamp, relative)?;
        }
        self.flush()
    }

    /// Fsyncs the `.log` (if written since the last flush), then the indexes (if
    /// changed).
    pub(super) fn flush(&mut self) -> Result<(), LogError> {
        if self.log_dirty {
            self.log
                .get()?
                .sync_data()
                .map_err(LogError::io(&self.log_path))?;
            self.log_dirty = false;
        }
        self.offset_index.flush()?;
        self.time_index.flush()
    }

    /// Cuts the `.log` to `size` bytes and fsyncs it.
    pub(super) fn truncate_log(&mut self, size: u64) -> Result<(), LogError> {
        let file = self.log.get()?;
        file.set_len(size).map_err(LogError::io(&self.log_path))?;
        file.sync_all().map_err(LogError::io(&self.log_path))?;
        self.size = size;
        Ok(())
    }

    /// The timestamp retention goes by (ms): the segment's max timestamp, or the `.log`
    /// modification time if no batch has a timestamp (Kafka's `largestTimestamp`).
    pub(super) fn largest_timestamp_ms(&self) -> Result<i64, LogError> {
        if let Some(max) = self.max_timestamp.filter(|m| m.timestamp >= 0) {
            return Ok(max.timestamp);
        }
        let modified = self
            .log
            .get()?
            .metadata()
            .and_then(|m| m.modified())
            .map_err(LogError::io(&self.log_path))?;
        Ok(modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64))
    }

    /// Deletes the segment's files: the `.log` first, so a crash in between leaves only
    /// orphan indexes, which opening removes.
    pub(super) fn delete(self) -> Result<(), LogError> {
        let index_path = self.offset_index.path().to_path_buf();
        let time_path = self.time_index.path().to_path_buf();
        let log_path = self.log_path.clone();
        let base_offset = self.base_offset;
        // Closes the cached descriptors (a read in progress keeps its own handle).
        drop(self);
        fs::remove_file(&log_path).map_err(LogError::io(&log_path))?;
        let txn_path =
            super::txn_index::path(log_path.parent().unwrap_or(Path::new(".")), base_offset);
        for path in [index_path, time_path, txn_path] {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(LogError::io(&path)(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `offset − base_offset` as stored in the indexes.
    fn relative(&self, offset: i64) -> u32 {
        (offset - self.base_offset) as u32
    }
}

/// A read of whole batches from a segment's `.log`, planned under the partition's lock
/// and run without it: the bytes it covers were written before it was planned and are
/// never rewritten (a segment deleted meanwhile stays readable through the open file).
#[derive(Debug)]
pub(super) struct SegmentRead {
    file: Arc<File>,
    path: PathBuf,
    position: u64,
    /// Bytes to read.
    len: usize,
    /// Size of the first batch, known to be whole.
    first: usize,
}

impl SegmentRead {
    /// Reads the planned bytes and cuts them after the last whole batch.
    ///
    /// Errors: [`LogError::Io`].
    pub(super) fn execute(self) -> Result<Vec<u8>, LogError> {
        self.execute_inner()
    }

    /// The read stopped before byte `end` of the `.log` (never shorter than the first
    /// batch): for read_committed, `end` is the position of the last stable offset.
    pub(super) fn cap_at(mut self, end: u64) -> SegmentRead {
        let max = end.saturating_sub(self.position);
        self.len = self
            .len
            .min(usize::try_from(max).unwrap_or(usize::MAX))
            .max(self.first);
        self
    }

    /// The `.log` read.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    fn execute_inner(self) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0; self.len];
        self.file
            .read_exact_at(&mut buf, self.position)
            .map_err(LogError::io(&self.path))?;
        let end = whole_batches(&buf, self.first);
        buf.truncate(end);
        Ok(buf)
    }
}

/// Writes the batches of `records` at byte `at` of `file`: each batch's first 16 bytes
/// from its header in `headers`, the rest from `records`, with vectored writes.
fn write_batches(
    mut file: &File,
    at: u64,
    records: &[u8],
    headers: &[BatchHeader],
) -> io::Result<()> {
    let prefixes: Vec<[u8; PATCHED_PREFIX]> = headers.iter().map(patched_prefix).collect();
    let mut slices = Vec::with_capacity(headers.len() * 2);
    let mut start = 0;
    for (header, prefix) in headers.iter().zip(&prefixes) {
        slices.push(IoSlice::new(prefix));
        slices.push(IoSlice::new(
            &records[start + PATCHED_PREFIX..start + header.size()],
        ));
        start += header.size();
    }
    file.seek(SeekFrom::Start(at))?;
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The length of the longest run of whole batches at the start of `buf`, whose first
/// batch is `first` bytes (known to be whole).
fn whole_batches(buf: &[u8], first: usize) -> usize {
    let mut end = first;
    while let Some(length) = buf.get(end + 8..end + LOG_OVERHEAD) {
        let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
        if length < MIN_BATCH_LENGTH {
            break;
        }
        let size = LOG_OVERHEAD + length as usize;
        if end + size > buf.len() {
            break;
        }
        end += size;
    }
    end
}
