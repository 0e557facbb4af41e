//! Loading segments on open, and crash recovery (Kafka's `LogLoader` /
//! `LogSegment.recover`).
//!
//! - A segment that is not the last one was fsynced, final time index entry included,
//!   when it was rolled. Its indexes are trusted after cheap checks; if one is missing or
//!   fails them, the segment is rebuilt.
//! - The last segment is rebuilt (scanned from its start) unless the log was closed
//!   cleanly; then its indexes are checked and only the batches after the last offset
//!   index entry are scanned, falling back to a rebuild on any doubt.
//! - A rebuild validates every batch (length, magic, CRC-32C, counts, consecutive offsets)
//!   and cuts the `.log` at the first invalid or truncated one, which is what a crash
//!   leaves behind: data fsynced before the crash is whole, only the torn tail goes.

use std::io::{BufReader, Read, Seek, SeekFrom};

use tracing::warn;

use super::{
    batch::{check_counts, parse_header, BATCH_HEADER_LEN, CRC_START},
    segment::Segment,
    LogError, TimestampOffset,
};

/// Read buffer of a scan, in bytes.
const SCAN_BUFFER: usize = 256 * 1024;

/// Loads a segment followed by another whose base offset is `next_base`.
pub(super) fn load_sealed(
    segment: &mut Segment,
    next_base: i64,
    index_interval: u64,
) -> Result<(), LogError> {
    let span = u64::try_from(next_base - segment.base_offset).unwrap_or(0);
    match check_indexes(segment, span) {
        Ok(()) => {
            segment.next_offset = next_base;
            segment.max_timestamp = last_time_entry(segment);
            Ok(())
        }
        Err(reason) => {
            warn!(file = %segment.log_path.display(), "{reason}; rebuilding the indexes");
            rebuild(segment, index_interval)
        }
    }
}

/// Loads the last (active) segment; `clean` says the log was closed cleanly.
pub(super) fn load_last(
    segment: &mut Segment,
    clean: bool,
    index_interval: u64,
) -> Result<(), LogError> {
    if !clean {
        return rebuild(segment, index_interval);
    }
    match resume(segment, index_interval)? {
        None => {
            set_first_append(segment)?;
            Ok(())
        }
        Some(reason) => {
            warn!(file = %segment.log_path.display(), "{reason} after a clean shutdown; rescanning the segment");
            rebuild(segment, index_interval)
        }
    }
}

/// Rebuilds a segment's indexes from a full scan, cutting the `.log` at the first invalid
/// batch (with a warning naming the file and the bytes cut), then fsyncs it all.
pub(super) fn rebuild(segment: &mut Segment, index_interval: u64) -> Result<(), LogError> {
    segment.offset_index.clear()?;
    segment.time_index.clear()?;
    segment.max_timestamp = None;
    segment.bytes_since_index = 0;
    segment.next_offset = segment.base_offset;
    let file_len = file_len(segment)?;
    let base = segment.base_offset;
    let scan = scan(segment, 0, base, index_interval)?;
    if let Some(reason) = scan.problem {
        warn!(
            file = %segment.log_path.display(),
            bytes_cut = file_len - scan.end,
            valid_bytes = scan.end,
            "{reason}; truncating the segment after its last valid batch"
        );
    }
    if scan.end != file_len {
        segment.truncate_log(scan.end)?;
    }
    segment.size = scan.end;
    segment.indexes_missing = false;
    segment.seal()?;
    set_first_append(segment)
}

/// The clean-shutdown path: checks the indexes, restores the state they record, and
/// scans from the last offset index entry. `Some(reason)` means "rebuild instead".
fn resume(segment: &mut Segment, index_interval: u64) -> Result<Option<String>, LogError> {
    if let Err(reason) = check_indexes(segment, u64::from(u32::MAX) + 1) {
        return Ok(Some(reason));
    }
    let (relative, position) = segment.offset_index.last().unwrap_or((0, 0));
    segment.max_timestamp = last_time_entry(segment);
    segment.bytes_since_index = 0;
    let expected = segment.base_offset + i64::from(relative);
    let scan = scan(segment, u64::from(position), expected, index_interval)?;
    segment.size = scan.end;
    Ok(scan.problem)
}

/// Kafka's index `sanityCheck`, plus: the last offset index entry points at a batch with
/// the offset it names. `offset_span` bounds the time index's relative offsets.
fn check_indexes(segment: &Segment, offset_span: u64) -> Result<(), String> {
    if segment.indexes_missing {
        return Err("index file missing".into());
    }
    let index = |e: String| format!("{}: {e}", segment.offset_index.path().display());
    let time = |e: String| format!("{}: {e}", segment.time_index.path().display());
    segment.offset_index.check(segment.size).map_err(index)?;
    segment.time_index.check(offset_span).map_err(time)?;
    if let Some((relative, position)) = segment.offset_index.last() {
        let header = segment
            .header_at(u64::from(position))
            .map_err(|e| index(e.to_string()))?;
        let expected = segment.base_offset + i64::from(relative);
        if header.base_offset != expected {
            return Err(index(format!(
                "last entry names offset {expected}, the batch there has {}",
                header.base_offset
            )));
        }
    }
    Ok(())
}

fn last_time_entry(segment: &Segment) -> Option<TimestampOffset> {
    segment
        .time_index
        .last()
        .map(|(timestamp, relative)| TimestampOffset {
            offset: segment.base_offset + i64::from(relative),
            timestamp,
        })
}

/// After a restart the age of a segment counts from its first batch's max timestamp
/// (Kafka's rolling base timestamp); without one, from its next append.
fn set_first_append(segment: &mut Segment) -> Result<(), LogError> {
    segment.first_append_ms = None;
    if segment.size > 0 {
        let first = segment.header_at(0)?;
        segment.first_append_ms = Some(first.max_timestamp).filter(|&t| t >= 0);
    }
    Ok(())
}

fn file_len(segment: &Segment) -> Result<u64, LogError> {
    Ok(segment
        .log
        .get()?
        .metadata()
        .map_err(LogError::io(&segment.log_path))?
        .len())
}

/// Where a scan stopped: `end` is the byte after the last valid batch; `problem` says
/// why the scan stopped before the end of the file.
struct Scan {
    end: u64,
    problem: Option<String>,
}

/// Validates the batches from byte `start` (whose first batch must have base offset
/// `expected`) to the end of the `.log`, tracking each valid one in the segment (indexes,
/// max timestamp, next offset). Streams each batch through a fixed buffer to compute its
/// CRC, so no allocation depends on a length read from disk.
fn scan(
    segment: &mut Segment,
    start: u64,
    mut expected: i64,
    index_interval: u64,
) -> Result<Scan, LogError> {
    let path = segment.log_path.clone();
    let io = |source| LogError::Io {
        path: path.clone(),
        source,
    };
    let file_len = file_len(segment)?;
    let file = segment.log.get()?.try_clone().map_err(io)?;
    let mut reader = BufReader::with_capacity(SCAN_BUFFER, file);
    reader.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut header_buf = [0; BATCH_HEADER_LEN];
    let mut body = vec![0; SCAN_BUFFER];
    let mut position = start;
    let stop = |position, problem: String| Scan {
        end: position,
        problem: Some(problem),
    };
    // Batch errors carry the position themselves.
    let at = |position: u64| usize::try_from(position).unwrap_or(usize::MAX);
    while position < file_len {
        let remaining = file_len - position;
        if remaining < BATCH_HEADER_LEN as u64 {
            return Ok(stop(
                position,
                format!("truncated batch header at byte {position} ({remaining} bytes)"),
            ));
        }
        reader.read_exact(&mut header_buf).map_err(io)?;
        let header = match parse_header(&header_buf, at(position)) {
            Ok(header) => header,
            Err(e) => return Ok(stop(position, e.to_string())),
        };
        let size = header.size() as u64;
        if size > remaining {
            return Ok(stop(
                position,
                format!("truncated batch at byte {position} ({size} bytes, {remaining} left)"),
            ));
        }
        let mut crc = crc32c::crc32c(&header_buf[CRC_START..]);
        let mut left = header.size() - BATCH_HEADER_LEN;
        while left > 0 {
            let chunk = &mut body[..left.min(SCAN_BUFFER)];
            reader.read_exact(chunk).map_err(io)?;
            crc = crc32c::crc32c_append(crc, chunk);
            left -= chunk.len();
        }
        if crc != header.crc {
            return Ok(stop(
                position,
                format!(
                    "CRC mismatch at byte {position} ({:#010x} stored, {crc:#010x} computed)",
                    header.crc
                ),
            ));
        }
        if let Err(e) = check_counts(&header, at(position)) {
            return Ok(stop(position, e.to_string()));
        }
        if header.base_offset != expected {
            return Ok(stop(
                position,
                format!(
                    "batch at byte {position} has base offset {}, expected {expected}",
                    header.base_offset
                ),
            ));
        }
        let last_relative = header.last_offset() - segment.base_offset;
        if last_relative > i64::from(u32::MAX) || position > u64::from(u32::MAX) {
            return Ok(stop(
                position,
                format!("batch at byte {position} is beyond the segment's 32-bit index range"),
            ));
        }
        segment.track(position, &header, index_interval)?;
        expected = header.next_offset();
        position += size;
    }
    Ok(Scan {
        end: position,
        problem: None,
    })
}
