//! Looking inside one stored record batch, for ListOffsets by timestamp: Kafka answers
//! with the first *record* whose timestamp is at or after the target
//! (`FileRecords.searchForTimestamp`), which means walking (and, for compressed
//! batches, decompressing) the batch the time index pointed at.
//!
//! The walk is [`super::walk::walk_records`]: streaming, so memory stays bounded, and
//! it stops at the first match. Past [`MAX_DECOMPRESSED_BYTES`] the search gives up and
//! the caller falls back to the batch-level answer.

use std::ops::ControlFlow;

use bytes::Bytes;

use super::{
    batch::{check_batch, BatchError},
    walk::walk_records,
    TimestampOffset,
};

/// Most bytes one batch may decompress to during a timestamp search: 64 MiB.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// The first record of `batch` (one whole stored batch, possibly followed by others)
/// whose timestamp is at or after `target_ms`, or `None` when it has none or cannot be
/// decoded within the bounds.
pub fn first_record_at_or_after(batch: Bytes, target_ms: i64) -> Option<TimestampOffset> {
    let header = check_batch(&batch, usize::MAX).ok()?;
    let mut found = None;
    let walked = walk_records(&batch, &header, 0, MAX_DECOMPRESSED_BYTES, |record| {
        if record.timestamp >= target_ms {
            found = Some(TimestampOffset {
                offset: header.base_offset + i64::from(record.offset_delta),
                timestamp: record.timestamp,
            });
            return Ok(ControlFlow::Break(()));
        }
        Ok::<_, BatchError>(ControlFlow::Continue(()))
    });
    walked.ok().and(found)
}
