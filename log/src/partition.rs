//! [`PartitionLog`]: one partition's log — append, fetch, timestamp lookup, roll,
//! retention, flush and crash recovery over a directory of segments.

use std::{
    fs::{self, File},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use tracing::{debug, info, warn};

use super::{
    batch::{self, BatchHeader},
    file_cache::FileCache,
    producer_state::{Check, ProducerError, ProducerStates},
    recovery,
    segment::{Segment, SegmentRead},
    start_offset,
    validate::ValidatedBatch,
    LogConfig, LogError, LEADER_EPOCH, NO_TIMESTAMP,
};

/// The first wait before a log taken offline by a failed write or fsync tries to come
/// back ([`PartitionLog::try_recover`]); it doubles after each failed attempt, up to
/// [`MAX_RECOVERY_BACKOFF`].
pub const FIRST_RECOVERY_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait between two recovery attempts of an offline log.
pub const MAX_RECOVERY_BACKOFF: Duration = Duration::from_secs(60);

/// Whether the log takes writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteState {
    Online,
    /// A write or fsync failed: writes are refused until a recovery at or after
    /// `retry_at` succeeds; `backoff` is the wait after the next failed attempt.
    Failed {
        retry_at: Instant,
        backoff: Duration,
    },
    /// [`PartitionLog::close`] ran: writes are refused for good.
    Closed,
}

/// Written by [`PartitionLog::close`], removed by [`PartitionLog::open`]: its presence
/// says every segment and index was fsynced, so the last segment need not be rescanned.
const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";

/// The result of [`PartitionLog::append`], for a Produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset assigned to the first record of the append (Produce `base_offset`).
    pub base_offset: i64,
    /// Offset of the last record of the append.
    pub last_offset: i64,
    /// Produce `log_append_time_ms`: always −1, because batches keep their producer
    /// timestamps (Kafka's `message.timestamp.type = CreateTime`).
    pub log_append_time_ms: i64,
    /// The log start offset after the append (Produce `log_start_offset`).
    pub log_start_offset: i64,
    /// The batch was a retry of one already in the log (same producer id, epoch and
    /// sequence range as one of the producer's last five batches): nothing was written,
    /// and the offsets are the original batch's.
    pub duplicate: bool,
    /// Producers the partition forgot to make room for this batch's new producer id
    /// (`[log] max_producer_ids_per_partition` reached; 0 or 1 for a client's batch),
    /// plus, on the first append after the log was opened or its producer state
    /// reloaded, those evicted then (a snapshot written under a higher cap).
    pub producers_evicted: u64,
}

/// The result of [`PartitionLog::read`], for a Fetch response partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole record batches, exactly as stored, starting with the batch that contains
    /// the requested offset (so it may start before it; clients skip earlier records).
    /// Empty when the requested offset is the log end offset.
    pub records: Bytes,
    /// The high watermark: the log end offset (a single replica commits every append).
    pub high_watermark: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The last stable offset ([`PartitionLog::last_stable_offset`]).
    pub last_stable_offset: i64,
    /// For a read_committed read, the aborted transactions overlapping the offsets from
    /// the one asked for up to the last stable offset; empty otherwise.
    pub aborted: Vec<super::AbortedTxn>,
}

/// A batch found by timestamp: for ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Base offset of the batch.
    pub offset: i64,
    /// The batch's max timestamp, in ms.
    pub timestamp: i64,
}

/// A read to run without holding the log: from [`PartitionLog::plan_read`].
#[derive(Debug)]
pub struct PlannedRead {
    read: Option<SegmentRead>,
    high_watermark: i64,
    log_start_offset: i64,
    last_stable_offset: i64,
    aborted: Vec<super::AbortedTxn>,
}

impl PlannedRead {
    /// The watermarks of the planned read, without reading any records (a Fetch that
    /// may not take more bytes answers with offsets only).
    pub fn without_records(self) -> ReadResult {
        ReadResult {
            records: Bytes::new(),
            high_watermark: self.high_watermark,
            log_start_offset: self.log_start_offset,
            last_stable_offset: self.last_stable_offset,
            aborted: self.aborted,
        }
    }

    /// Reads the planned batches (none when the offset was the log end offset).
    ///
    /// Errors: [`LogError::Io`].
    pub fn execute(self) -> Result<ReadResult, LogError> {
        let records = match self.read {
            Some(read) => read.execute()?,
            None => Vec::new(),
        };
        let mut aborted = self.aborted;
        if !aborted.is_empty() {
            // As Kafka's `UnifiedLog.addAbortedTransactions`: only the transactions
            // that overlap the batches read (none when nothing was read).
            let upper = next_offset_after(&records);
            aborted.retain(|a| upper.is_some_and(|u| a.first_offset < u));
        }
        Ok(ReadResult {
            records: Bytes::from(records),
            high_watermark: self.high_watermark,
            log_start_offset: self.log_start_offset,
            last_stable_offset: self.last_stable_offset,
            aborted,
        })
    }
}

/// The offset after the last whole batch in `records` (batches back to back, as a read
/// returns them), `None` if there is none.
fn next_offset_after(records: &[u8]) -> Option<i64> {
    let mut at = 0;
    let mut next = None;
    while let Some(rest) = records.get(at..) {
        let Ok(header) = BatchHeader::parse(rest) else {
            break;
        };
        if header.size() > rest.len() {
            break;
        }
        next = Some(header.next_offset());
        at += header.size();
    }
    next
}

/// A flush to run without holding the log: from [`PartitionLog::flush_ticket`].
#[derive(Debug)]
pub struct FlushTicket {
    /// The active segment's `.log`, to fsync (`File::sync_data`).
    pub file: std::sync::Arc<File>,
    /// Its path, for errors.
    pub path: PathBuf,
    /// The log end offset when the ticket was taken: durable once the fsync returns.
    pub end: i64,
}

/// The log of one partition: a directory of segments (see the [module docs](super)).
///
/// Offsets are assigned here: each appended batch gets base offset = the log end offset,
/// which then advances by `lastOffsetDelta + 1`. The log start offset is the base offset
/// of the oldest segment; the log end offset is also the high watermark.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    /// Ordered by base offset; never empty; the last one is the active segment.
    segments: Vec<Segment>,
    /// Records appended since the last fsync.
    unflushed_messages: u64,
    /// When the oldest unflushed append happened, in ms.
    first_unflushed_ms: Option<i64>,
    /// Whether writes are taken (a failed write or fsync stops them until a recovery).
    state: WriteState,
    /// The broker's cache of open segment files (sealed `.log`s, every index).
    files: Arc<FileCache>,
    /// A [`FlushTicket`] was handed out and not yet settled: its fsync may still be
    /// running, so an inline [`Self::flush`] must not trust the segment's clean flag.
    ticket_in_flight: bool,
    /// Log end offset at the last successful flush (or open).
    flushed_offset: i64,
    /// The start DeleteRecords set (durable in [`start_offset::FILE`]); the log starts
    /// at the larger of this and the oldest segment's base offset. 0 if never set.
    start_offset: i64,
    /// Idempotent producers' state ([`super::producer_state`]).
    producers: ProducerStates,
    /// How many of [`ProducerStates::evicted`] an [`AppendInfo`] has reported: the
    /// producers evicted while loading a snapshot under a lowered cap (or replaying
    /// the log) are reported with the next append, so the Produce handler counts them.
    producers_evicted_reported: u64,
    /// Aborted transactions of every segment, by marker offset (the `.txnindex` files,
    /// [`super::txn_index`]).
    aborted: Vec<super::AbortedTxn>,
}

impl PartitionLog {
    /// Opens the partition log in `dir`, creating the directory and an empty first
    /// segment (base offset 0) if there are none.
    ///
    /// Recovery (Kafka's log loading): every segment but the last is loaded from its
    /// indexes after plausibility checks, or rebuilt by a scan if an index is missing or
    /// fails them. Unless the log was closed with [`PartitionLog::close`], the last
    /// segment is scanned from its start; each batch is validated (length, magic 2,
    /// CRC-32C, counts, consecutive offsets) and the `.log` is cut at the first invalid or
    /// truncated one, with a `tracing` warning naming the file and the bytes cut. The
    /// indexes are rebuilt as the scan goes. The log end offset is then the last valid
    /// batch's base offset + lastOffsetDelta + 1. Index files without a `.log` are
    /// deleted; other unknown files are left alone.
    ///
    /// The log gets a cache of open files of its own; a broker shares one between all
    /// its logs with [`Self::open_in`].
    pub fn open(dir: impl AsRef<Path>, config: &LogConfig) -> Result<PartitionLog, LogError> {
        PartitionLog::open_in(dir, config, &FileCache::with_default_capacity())
    }

    /// [`Self::open`] with the broker-wide cache `files`: only the active segment's
    /// `.log` is held open by the log itself; the `.log` of sealed segments and every
    /// index file are opened on demand through `files`, so the descriptors a log holds
    /// do not grow with its number of segments.
    pub fn open_in(
        dir: impl AsRef<Path>,
        config: &LogConfig,
        files: &Arc<FileCache>,
    ) -> Result<PartitionLog, LogError> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(LogError::io(&dir))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        let bases = list_segments(&dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        let interval = config.index_interval_bytes;
        let mut segments = Vec::with_capacity(bases.len().max(1));
        for (i, &base) in bases.iter().enumerate() {
            let last = i + 1 == bases.len();
            let mut segment = Segment::open(&dir, base, files, last)?;
            match bases.get(i + 1) {
                Some(&next) => recovery::load_sealed(&mut segment, next, interval)?,
                None => recovery::load_last(&mut segment, clean, interval)?,
            }
            segments.push(segment);
        }
        for pair in segments.windows(2) {
            if pair[0].next_offset > pair[1].base_offset {
                return Err(LogError::corrupt(
                    &pair[0].log_path,
                    pair[0].size,
                    format!(
                        "segment ends at offset {}, after the next segment's base offset {}",
                        pair[0].next_offset, pair[1].base_offset
                    ),
                ));
            }
        }
        if segments.is_empty() {
            segments.push(Segment::create(&dir, 0, files)?);
            sync_dir(&dir)?;
        }
        if clean {
            fs::remove_file(&marker).map_err(LogError::io(&marker))?;
            sync_dir(&dir)?;
        }
        let checkpointed = start_offset::read(&dir)?.unwrap_or(0);
        let mut log = PartitionLog {
            dir,
            config: config.clone(),
            segments,
            unflushed_messages: 0,
            first_unflushed_ms: None,
            state: WriteState::Online,
            files: Arc::clone(files),
            ticket_in_flight: false,
            flushed_offset: 0,
            start_offset: 0,
            producers: ProducerStates::new(producers::limits(config)),
            producers_evicted_reported: 0,
            aborted: Vec::new(),
        };
        // A tail cut by recovery may end below the checkpoint: the log then starts at
        // its end.
        log.start_offset = checkpointed.min(log.log_end_offset());
        log.load_aborted()?;
        log.reload_producers()?;
        // What recovery kept is what is on disk.
        log.flushed_offset = log.log_end_offset();
        debug!(
            dir = %log.dir.display(),
            start = log.log_start_offset(),
            end = log.log_end_offset(),
            segments = log.segments.len(),
            "opened partition log"
        );
        Ok(log)
    }

    /// Appends the produced `records` (one or more v2 batches back to back, the Produce
    /// `records` field) at `now_ms` (ms since the Unix epoch).
    ///
    /// The batches are checked with [`batch::parse_batches`] (max size
    /// [`LogConfig::max_batch_bytes`]); on failure nothing is written. Each batch is
    /// stored with base offset = the current log end offset (which advances by
    /// lastOffsetDelta + 1) and partition leader epoch [`LEADER_EPOCH`]; neither field is
    /// under the CRC, and `records` itself is left as it is (the stored fields are
    /// written from the parsed headers). The active segment is rolled first if the append
    /// would make it larger than [`LogConfig::segment_bytes`], if it is older than
    /// [`LogConfig::segment_ms`], or if its 32-bit relative offsets would overflow. All
    /// batches are written with vectored writes at the end of the active segment, and
    /// fsynced before returning once [`LogConfig::flush_messages`] records are unflushed
    /// (by default: always).
    ///
    /// A batch with a producer id is first checked against the partition's producer
    /// state ([`super::producer_state`]): a retry of one of the producer's last five
    /// batches is not written again, and its [`AppendInfo`] carries the original
    /// offsets with `duplicate` set.
    ///
    /// Errors: [`LogError::InvalidBatch`], [`LogError::BatchTooLarge`] (append larger than
    /// a segment), [`LogError::Producer`] (sequence, epoch or producer-count rules; nothing
    /// written), [`LogError::Io`], [`LogError::Offline`] (after an earlier write error,
    /// until [`Self::try_recover`] brings the log back; a failed write or fsync here also
    /// takes the log offline).
    pub fn append(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo, LogError> {
        let info = self.append_deferred(records, now_ms)?;
        if self.unflushed_messages >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(info)
    }

    /// Like [`Self::append`], but never fsyncs: the caller makes the append durable
    /// with [`Self::flush`] before acknowledging it. This lets a broker acknowledge many
    /// appends with one fsync (group commit) while keeping every acknowledged append
    /// durable. [`Self::flushed_offset`] tells how far the log is durable.
    pub fn append_deferred(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        let headers = batch::parse_batches(records, self.config.max_batch_bytes as usize)?;
        self.append_checked(records, headers, now_ms)
    }

    /// Like [`Self::append_deferred`], for a batch the produce path has validated
    /// ([`super::validate::validate_produced`]) before taking the log's lock: the
    /// batch's bytes are not parsed or checked again.
    ///
    /// Errors: as [`Self::append_deferred`], but never [`LogError::InvalidBatch`].
    pub fn append_validated(
        &mut self,
        batch: &ValidatedBatch,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        self.append_checked(batch.bytes(), vec![*batch.header()], now_ms)
    }

    /// Appends `records`, whose batches `headers` describe and have been checked.
    fn append_checked(
        &mut self,
        records: &[u8],
        headers: Vec<BatchHeader>,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        if records.len() as u64 > self.config.segment_bytes {
            return Err(LogError::BatchTooLarge {
                size: records.len(),
                max: self.config.segment_bytes,
            });
        }
        let offsets: i64 = headers.iter().map(BatchHeader::offset_count).sum();
        if offsets > i64::from(u32::MAX) {
            return Err(LogError::TooManyOffsets { offsets });
        }
        if let Some(original) = self.check_producers(&headers, now_ms)? {
            return Ok(AppendInfo {
                base_offset: original.first_offset,
                last_offset: original.last_offset,
                log_append_time_ms: NO_TIMESTAMP,
                log_start_offset: self.log_start_offset(),
                duplicate: true,
                producers_evicted: self.take_producers_evicted(),
            });
        }
        let (base_offset, next) = self.write_checked(records, headers, offsets, now_ms)?;
        Ok(AppendInfo {
            base_offset,
            last_offset: next - 1,
            log_append_time_ms: NO_TIMESTAMP,
            log_start_offset: self.log_start_offset(),
            duplicate: false,
            producers_evicted: self.take_producers_evicted(),
        })
    }

    /// The producers evicted since the last [`AppendInfo`] reported any (at most one
    /// per new producer id in a client's batch, plus those evicted at load).
    fn take_producers_evicted(&mut self) -> u64 {
        let evicted = self.producers.evicted();
        let new = evicted.saturating_sub(self.producers_evicted_reported);
        self.producers_evicted_reported = evicted;
        new
    }

    /// Writes `records` (batches `headers`, checked, `offsets` offsets in all) at the
    /// log end, rolling first if due, and records them in the producer state; returns
    /// the first offset written and the new log end offset.
    fn write_checked(
        &mut self,
        records: &[u8],
        mut headers: Vec<BatchHeader>,
        offsets: i64,
        now_ms: i64,
    ) -> Result<(i64, i64), LogError> {
        self.maybe_roll(records.len() as u64, offsets, now_ms)?;

        let base_offset = self.log_end_offset();
        let mut next = base_offset;
        for header in &mut headers {
            header.base_offset = next;
            header.partition_leader_epoch = LEADER_EPOCH;
            next += header.offset_count();
        }
        let interval = self.config.index_interval_bytes;
        let active = self.active_mut();
        active.first_append_ms.get_or_insert(now_ms);
        if let Err(e) = active.append(records, &headers, interval) {
            self.take_offline();
            return Err(e);
        }
        for header in &headers {
            self.producers.record(header, header.base_offset, now_ms);
        }
        let messages: u64 = headers.iter().map(|h| h.records_count as u64).sum();
        self.unflushed_messages += messages;
        self.first_unflushed_ms.get_or_insert(now_ms);
        Ok((base_offset, next))
    }

    /// Checks the batches' producer ids, epochs and sequences
    /// ([`ProducerStates::check`]): `Some` original batch when the one batch of the
    /// append is a retry of it. Several batches in one append (not a client's produce,
    /// which carries one) are checked in order against a copy of the state, and a
    /// duplicate among them is out of order.
    fn check_producers(
        &mut self,
        headers: &[BatchHeader],
        now_ms: i64,
    ) -> Result<Option<super::producer_state::BatchMeta>, LogError> {
        match headers {
            [header] => match self.producers.check(header, now_ms)? {
                Check::Append => Ok(None),
                Check::Duplicate(original) => Ok(Some(original)),
            },
            _ if headers.iter().all(|h| h.producer_id < 0) => Ok(None),
            _ => {
                let mut staged = self.producers.clone();
                for header in headers {
                    if let Check::Duplicate(_) = staged.check(header, now_ms)? {
                        return Err(ProducerError::OutOfOrder {
                            producer_id: header.producer_id,
                            epoch: header.producer_epoch,
                            first_seq: header.base_sequence,
                            expected: -1,
                        }
                        .into());
                    }
                    staged.record(header, 0, now_ms);
                }
                Ok(None)
            }
        }
    }

    /// Reads whole batches starting with the one that contains `offset`, following
    /// Kafka's fetch rule (KIP-74): batches up to `max_bytes` in total, but at least the
    /// first batch even if it is larger. A read returns batches from one segment only
    /// (as Kafka's); the next fetch continues from there. `max_bytes` also bounds the
    /// buffer allocated, so the caller bounds it (Kafka's broker caps a fetch at
    /// `fetch.max.bytes`, 55 MiB by default).
    ///
    /// `offset == log_end_offset()` gives empty records; an offset below
    /// [`PartitionLog::log_start_offset`] or above the end gives
    /// [`LogError::OffsetOutOfRange`].
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, LogError> {
        self.plan_read(offset, max_bytes)?.execute()
    }

    /// [`Self::read`] in two steps: what to read, found here, and the file read itself,
    /// [`PlannedRead::execute`], which needs no access to the log, so a caller can run
    /// it after releasing the log's lock and let appends go on meanwhile.
    ///
    /// Errors: as [`Self::read`].
    pub fn plan_read(&self, offset: i64, max_bytes: usize) -> Result<PlannedRead, LogError> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset > end {
            return Err(LogError::OffsetOutOfRange {
                requested: offset,
                start,
                end,
            });
        }
        let mut read = None;
        if offset < end {
            let first = self.segments.partition_point(|s| s.base_offset <= offset) - 1;
            for segment in &self.segments[first..] {
                if let Some(planned) = segment.plan_read(offset, max_bytes)? {
                    read = Some(planned);
                    break;
                }
            }
        }
        Ok(PlannedRead {
            read,
            high_watermark: end,
            log_start_offset: start,
            last_stable_offset: self.last_stable_offset(),
            aborted: Vec::new(),
        })
    }

    /// The first offset still readable: the base offset of the oldest segment, or the
    /// offset [`Self::delete_records`] moved the start to, whichever is larger.
    /// ListOffsets `-2` (earliest).
    pub fn log_start_offset(&self) -> i64 {
        // Never past the end, should recovery have cut the tail below the checkpoint.
        let requested = self.start_offset.min(self.log_end_offset());
        self.segments[0].base_offset.max(requested)
    }

    /// DeleteRecords: moves the log start offset up to `offset` (Kafka's
    /// `UnifiedLog.maybeIncrementLogStartOffset`) and deletes the whole segments that
    /// now lie below it (never the active one); returns the new log start offset (the
    /// response's `low_watermark`). An `offset` at or below the current start changes
    /// nothing. The new start is checkpointed durably ([`start_offset`]) before any
    /// segment is deleted, so it survives a restart and a crash.
    ///
    /// Errors: [`LogError::OffsetOutOfRange`] if `offset` is negative or above the log
    /// end offset (the high watermark); [`LogError::Io`].
    pub fn delete_records(&mut self, offset: i64) -> Result<i64, LogError> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < 0 || offset > end {
            return Err(LogError::OffsetOutOfRange {
                requested: offset,
                start,
                end,
            });
        }
        if offset <= start {
            return Ok(start);
        }
        start_offset::write(&self.dir, offset)?;
        self.start_offset = offset;
        let mut doomed = 0;
        while doomed + 1 < self.segments.len() && self.segments[doomed + 1].base_offset <= offset {
            doomed += 1;
        }
        let removed: Vec<Segment> = self.segments.drain(..doomed).collect();
        let first_kept = self.segments[0].base_offset;
        self.aborted.retain(|a| a.last_offset >= first_kept);
        for segment in removed {
            info!(
                file = %segment.log_path.display(),
                bytes = segment.size,
                log_start_offset = offset,
                "deleting a segment below the log start offset"
            );
            segment.delete()?;
        }
        if doomed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(offset)
    }

    /// Replaces the log's settings (a topic's configs altered at run time). Roll and
    /// retention settings apply from the next append and retention pass. The broker-wide
    /// [`LogConfig::open_files_cache`] is kept as it was.
    ///
    /// Errors: [`LogError::InvalidConfig`] (see [`LogConfig::validate`]).
    pub fn set_config(&mut self, config: &LogConfig) -> Result<(), LogError> {
        config.validate()?;
        let open_files_cache = self.config.open_files_cache;
        self.config = LogConfig {
            open_files_cache,
            ..config.clone()
        };
        Ok(())
    }

    /// The log's current settings.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The offset the next append gets; equal to the high watermark (single replica).
    /// ListOffsets `-1` (latest).
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// ListOffsets by timestamp (ms): the first batch whose max timestamp is >=
    /// `timestamp_ms` and that still holds offsets at or above the log start, i.e. the
    /// batch holding the earliest live offset whose timestamp may be >= the target,
    /// found through the time indexes. `None` if every such batch is older or deleted
    /// (Kafka then answers offset −1). The offset is the batch's base offset raised to
    /// the log start and the timestamp its max timestamp: records are not decoded, so
    /// the answer is at batch granularity (Kafka's is the first such record inside the
    /// batch, see [`super::records::first_record_at_or_after`]). The special targets −1,
    /// −2, −3 are the caller's: see [`Self::log_end_offset`], [`Self::log_start_offset`],
    /// [`Self::max_timestamp`].
    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        self.offset_for_timestamp_from(timestamp_ms, self.log_start_offset())
    }

    /// [`Self::offset_for_timestamp`] among the batches whose last offset is at least
    /// `from` (raised to the log start offset); the answered offset is at least that.
    pub fn offset_for_timestamp_from(
        &self,
        timestamp_ms: i64,
        from: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        // Records below a DeleteRecords start are gone (Kafka searches from the log
        // start offset: `UnifiedLog.fetchOffsetByTimestamp`).
        let from = from.max(self.log_start_offset());
        for segment in &self.segments {
            let newest = segment.max_timestamp.map(|m| m.timestamp);
            if newest.is_some_and(|t| t >= timestamp_ms) && segment.next_offset > from {
                if let Some(mut found) = segment.find_by_timestamp(timestamp_ms, from)? {
                    found.offset = found.offset.max(from);
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
    }

    /// ListOffsets `-3` (KIP-734): the batch with the largest max timestamp (the first
    /// one, if several share it). `None` if no batch has a timestamp.
    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        let mut best: Option<TimestampOffset> = None;
        for max in self.segments.iter().filter_map(|s| s.max_timestamp) {
            if best.is_none_or(|b| max.timestamp > b.timestamp) {
                best = Some(max);
            }
        }
        best
    }

    /// Fsyncs the active segment's `.log`, then its indexes. Other segments were fsynced
    /// when they were rolled. A failure takes the log offline.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.check_online()?;
        if self.ticket_in_flight {
            self.active_mut().mark_dirty();
        }
        if let Err(e) = self.active_mut().flush() {
            self.take_offline();
            return Err(e);
        }
        self.unflushed_messages = 0;
        self.first_unflushed_ms = None;
        self.flushed_offset = self.log_end_offset();
        Ok(())
    }

    /// The log end offset as of the last successful [`Self::flush`] (or open): every
    /// offset below it is on disk.
    pub fn flushed_offset(&self) -> i64 {
        self.flushed_offset
    }

    /// Starts a flush that runs without this log: the active segment's `.log` and the
    /// log end offset it will make durable. The caller fsyncs [`FlushTicket::file`]
    /// (off any lock on this log) and reports with [`Self::flush_done`] or
    /// [`Self::flush_failed`]. `None` if the log is already durable to its end.
    ///
    /// Only the `.log` is fsynced: the active segment's indexes are rebuilt by
    /// recovery after an unclean shutdown, and are fsynced when the segment is sealed or
    /// the log closed. Segments rolled before were fsynced when they were sealed.
    ///
    /// Errors: [`LogError::Offline`].
    pub fn flush_ticket(&mut self) -> Result<Option<FlushTicket>, LogError> {
        self.check_online()?;
        let end = self.log_end_offset();
        let ticket = match self.active_mut().flush_ticket() {
            Ok(ticket) => ticket,
            Err(e) => {
                self.take_offline();
                return Err(e);
            }
        };
        match ticket {
            Some((file, path)) => {
                self.ticket_in_flight = true;
                Ok(Some(FlushTicket { file, path, end }))
            }
            None => {
                self.flush_done(end);
                Ok(None)
            }
        }
    }

    /// Records that every offset below `end` is on disk (a [`FlushTicket`]'s fsync
    /// succeeded).
    pub fn flush_done(&mut self, end: i64) {
        self.ticket_in_flight = false;
        if end >= self.log_end_offset() {
            self.unflushed_messages = 0;
            self.first_unflushed_ms = None;
        }
        self.flushed_offset = self.flushed_offset.max(end);
    }

    /// Records that a [`FlushTicket`]'s fsync failed: what it covered may not be on
    /// disk, so the log goes offline, as after any failed fsync.
    pub fn flush_failed(&mut self) {
        self.ticket_in_flight = false;
        self.take_offline();
    }

    /// Whether the log refuses writes: after a failed write or fsync (until
    /// [`Self::try_recover`] succeeds), or after [`Self::close`].
    pub fn is_offline(&self) -> bool {
        self.state != WriteState::Online
    }

    /// Brings a log that a failed write or fsync took offline back, once the wait since
    /// the failure (or the last failed attempt) is over at `now`: 1 s at first,
    /// doubling up to 60 s ([`FIRST_RECOVERY_BACKOFF`], [`MAX_RECOVERY_BACKOFF`]).
    ///
    /// A failed fsync may have lost written pages without a trace (the kernel can drop
    /// them and report later fsyncs as successful), so nothing in memory is trusted: the
    /// active segment is reopened and recovered exactly as after a crash — scanned from
    /// its start, cut after its last valid batch, its indexes rebuilt, everything
    /// fsynced — and the log end offset is what that scan found. Sealed segments were
    /// fsynced when they were rolled and are left as they are. This runs under the
    /// caller's lock on the log and reads the whole active segment; the broker calls it
    /// from its maintenance task, on a blocking thread.
    ///
    /// Returns `Ok(true)` if the log is back online, `Ok(false)` if it was online,
    /// closed, not due yet, or a flush started before the failure is still running.
    ///
    /// Errors: the [`LogError`] of a failed attempt; the log stays offline and the next
    /// attempt waits twice as long.
    pub fn try_recover(&mut self, now: Instant) -> Result<bool, LogError> {
        let WriteState::Failed { retry_at, backoff } = self.state else {
            return Ok(false);
        };
        if now < retry_at || self.ticket_in_flight {
            return Ok(false);
        }
        let attempt = self
            .recover_active()
            .and_then(|()| self.load_aborted())
            .and_then(|()| self.reload_producers());
        match attempt {
            Ok(()) => {
                self.state = WriteState::Online;
                self.unflushed_messages = 0;
                self.first_unflushed_ms = None;
                self.flushed_offset = self.log_end_offset();
                info!(
                    dir = %self.dir.display(),
                    end = self.log_end_offset(),
                    "partition log back online after a storage error"
                );
                Ok(true)
            }
            Err(e) => {
                self.state = WriteState::Failed {
                    retry_at: now + backoff,
                    backoff: (backoff * 2).min(MAX_RECOVERY_BACKOFF),
                };
                Err(e)
            }
        }
    }

    /// Reopens the active segment from disk and runs crash recovery on it.
    fn recover_active(&mut self) -> Result<(), LogError> {
        let base = self.active().base_offset;
        let mut segment = Segment::open(&self.dir, base, &self.files, true)?;
        recovery::rebuild(&mut segment, self.config.index_interval_bytes)?;
        sync_dir(&self.dir)?;
        let last = self.segments.len() - 1;
        self.segments[last] = segment;
        Ok(())
    }

    /// A write or fsync failed: refuse writes until [`Self::try_recover`] succeeds.
    fn take_offline(&mut self) {
        if self.state == WriteState::Online {
            self.state = WriteState::Failed {
                retry_at: Instant::now() + FIRST_RECOVERY_BACKOFF,
                backoff: FIRST_RECOVERY_BACKOFF * 2,
            };
        }
    }

    /// Whether [`LogConfig::flush_messages`] records or more are unflushed: the flush
    /// [`Self::append`] would do inline is due.
    pub fn flush_due(&self) -> bool {
        self.unflushed_messages >= self.config.flush_messages
    }

    /// Whether an append of `bytes` bytes at `now_ms` would roll the active segment by
    /// size or age (a roll fsyncs the old segment): callers that must not block use it
    /// to choose a thread for the append. An overflow of relative offsets, which also
    /// rolls, is not predicted.
    pub fn roll_due(&self, bytes: u64, now_ms: i64) -> bool {
        let active = self.active();
        active.size > 0
            && (active.size + bytes > self.config.segment_bytes
                || active
                    .first_append_ms
                    .is_some_and(|t| now_ms.saturating_sub(t) > self.config.segment_ms))
    }

    /// Whether appended records have waited unflushed for [`LogConfig::flush_ms`] or
    /// longer at `now_ms` (ms). The caller polls this and calls [`Self::flush`]; always
    /// false when `flush_ms` is −1.
    pub fn needs_flush(&self, now_ms: i64) -> bool {
        self.config.flush_ms >= 0
            && self
                .first_unflushed_ms
                .is_some_and(|t| now_ms.saturating_sub(t) >= self.config.flush_ms)
    }

    /// Deletes whole segments from the oldest, never the active one, and advances the log
    /// start offset; returns how many were deleted. As Kafka's `UnifiedLog`
    /// `deleteRetentionMsBreachedSegments` then `deleteRetentionSizeBreachedSegments`:
    /// - time ([`LogConfig::retention_ms`] >= 0): while the oldest segment's newest
    ///   timestamp (its max batch timestamp, or the file modification time if it has none)
    ///   is more than `retention_ms` before `now_ms`;
    /// - size ([`LogConfig::retention_bytes`] >= 0): while the total size minus the
    ///   oldest segment's size is still >= `retention_bytes` (Kafka never cuts below the
    ///   limit, so the log may exceed it by up to one segment).
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        let mut doomed = 0;
        if self.config.retention_ms >= 0 {
            while doomed + 1 < self.segments.len() {
                let newest = self.segments[doomed].largest_timestamp_ms()?;
                if now_ms.saturating_sub(newest) <= self.config.retention_ms {
                    break;
                }
                doomed += 1;
            }
        }
        if self.config.retention_bytes >= 0 {
            let total: u64 = self.segments[doomed..].iter().map(|s| s.size).sum();
            let mut excess = total as i64 - self.config.retention_bytes;
            while doomed + 1 < self.segments.len() {
                let size = self.segments[doomed].size as i64;
                if excess - size < 0 {
                    break;
                }
                excess -= size;
                doomed += 1;
            }
        }
        if doomed > 0 {
            let start = self.segments[doomed].base_offset;
            self.producers.truncate_head(start);
            self.trim_snapshots(start)?;
            self.aborted.retain(|a| a.last_offset >= start);
        }
        for _ in 0..doomed {
            let segment = self.segments.remove(0);
            info!(
                file = %segment.log_path.display(),
                bytes = segment.size,
                "retention deletes segment"
            );
            segment.delete()?;
        }
        if doomed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(doomed)
    }

    /// Flushes everything and marks the directory as cleanly closed, so the next
    /// [`Self::open`] skips rescanning the last segment. Later writes are refused
    /// ([`LogError::Offline`]), so the marker never covers data written after it.
    /// Dropping the log without calling this is safe; the next open then runs full
    /// recovery.
    pub fn close(&mut self) -> Result<(), LogError> {
        self.flush()?;
        self.write_producer_snapshot();
        self.state = WriteState::Closed;
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        File::create(&marker)
            .and_then(|f| f.sync_all())
            .map_err(LogError::io(&marker))?;
        sync_dir(&self.dir)
    }

    /// Deletes the partition: closes its files and removes its directory (DeleteTopics).
    pub fn delete(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).map_err(LogError::io(&dir))
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Total bytes of all segments' `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    /// Number of segments, the active one included.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Rolls the active segment if the append of `bytes` bytes and `offsets` offsets
    /// would overfill it, or if it is too old at `now_ms`.
    fn maybe_roll(&mut self, bytes: u64, offsets: i64, now_ms: i64) -> Result<(), LogError> {
        let active = self.active();
        if active.size == 0 {
            return Ok(());
        }
        let last_relative = active.next_offset - active.base_offset + offsets - 1;
        if self.roll_due(bytes, now_ms) || last_relative > i64::from(u32::MAX) {
            self.roll()?;
        }
        Ok(())
    }

    /// Seals the active segment (final time index entry, fsync) and starts a new one at
    /// the log end offset.
    fn roll(&mut self) -> Result<(), LogError> {
        if let Err(e) = self.active_mut().seal() {
            self.take_offline();
            return Err(e);
        }
        self.unflushed_messages = 0;
        self.first_unflushed_ms = None;
        let base = self.log_end_offset();
        // The sealed segment's `.log` goes to the cache first: if the new segment
        // cannot be created, appends go on in this one (through the cache).
        let files = Arc::clone(&self.files);
        self.active_mut().unpin(&files)?;
        let segment = Segment::create(&self.dir, base, &self.files)?;
        self.segments.push(segment);
        sync_dir(&self.dir)?;
        self.write_producer_snapshot();
        info!(dir = %self.dir.display(), base_offset = base, "rolled a new segment");
        Ok(())
    }

    fn check_online(&self) -> Result<(), LogError> {
        if self.is_offline() {
            return Err(LogError::Offline {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Test hook: the active `.log` is swapped for a read-only handle of the same
    /// file, so writes to it fail (EBADF) as they would on a failing disk.
    #[cfg(test)]
    pub(super) fn break_active_file(&mut self) {
        let active = self.active_mut();
        let path = active.log_path.clone();
        let file = File::open(&path).unwrap();
        active.log = super::file_cache::SegmentFile::Pinned {
            file: Arc::new(file),
            path,
        };
    }

    fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has a segment")
    }
}

/// Base offsets of the segments in `dir`, sorted; deletes index files without a `.log`.
fn list_segments(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name();
        let Some((stem, extension)) = name.to_str().and_then(|n| n.split_once('.')) else {
            continue;
        };
        let base = match stem.parse::<i64>() {
            Ok(base) if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) => base,
            _ => continue,
        };
        match extension {
            "log" => logs.push(base),
            "index" | "timeindex" | super::txn_index::EXTENSION => {
                indexes.push((base, entry.path()))
            }
            _ => {}
        }
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            warn!(file = %path.display(), "deleting an index file without its .log");
            fs::remove_file(&path).map_err(LogError::io(&path))?;
        }
    }
    Ok(logs)
}

/// Fsyncs a directory, so that created, renamed and deleted entries are durable.
fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(LogError::io(dir))
}

mod producers;
#[cfg(test)]
mod tests;
mod txn;
#[cfg(test)]
mod txn_tests;
