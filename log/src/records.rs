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

/// What [`first_record_at_or_after`] found in one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordSearch {
    /// The first record at or after the target time, at or above the lower offset bound.
    Found(TimestampOffset),
    /// No such record in this batch; the search goes on at `next_offset` (the batch's
    /// last offset + 1).
    NotInBatch {
        /// The offset after the batch.
        next_offset: i64,
    },
    /// The batch could not be decoded within the bounds: the caller falls back to the
    /// batch-level answer.
    Undecodable,
}

/// The first record of `batch` (one whole stored batch, possibly followed by others)
/// whose timestamp is at or after `target_ms` and whose offset is at least
/// `min_offset` (the log start offset: records below it were deleted by DeleteRecords,
/// and Kafka's `FileRecords.searchForTimestamp` skips them the same way).
pub fn first_record_at_or_after(batch: Bytes, target_ms: i64, min_offset: i64) -> RecordSearch {
    let Ok(header) = check_batch(&batch, usize::MAX) else {
        return RecordSearch::Undecodable;
    };
    let mut found = None;
    let walked = walk_records(&batch, &header, 0, MAX_DECOMPRESSED_BYTES, |record| {
        let offset = header.base_offset + i64::from(record.offset_delta);
        if record.timestamp >= target_ms && offset >= min_offset {
            found = Some(TimestampOffset {
                offset,
                timestamp: record.timestamp,
            });
            return Ok(ControlFlow::Break(()));
        }
        Ok::<_, BatchError>(ControlFlow::Continue(()))
    });
    match (walked, found) {
        (Err(_), _) => RecordSearch::Undecodable,
        (Ok(_), Some(found)) => RecordSearch::Found(found),
        (Ok(_), None) => RecordSearch::NotInBatch {
            next_offset: header.last_offset() + 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::batch;

    #[test]
    fn the_search_skips_records_below_the_lower_bound() {
        // Offsets 0..10, timestamps 100..110.
        let stored = Bytes::from(batch(10, 5, 100));
        let at = |target, min| first_record_at_or_after(stored.clone(), target, min);
        let found = |offset, timestamp| RecordSearch::Found(TimestampOffset { offset, timestamp });
        assert_eq!(at(0, 0), found(0, 100));
        assert_eq!(at(0, 5), found(5, 105));
        assert_eq!(at(107, 5), found(7, 107));
        assert_eq!(at(103, 10), RecordSearch::NotInBatch { next_offset: 10 });
        assert_eq!(at(200, 0), RecordSearch::NotInBatch { next_offset: 10 });
        assert_eq!(
            first_record_at_or_after(Bytes::from_static(b"junk"), 0, 0),
            RecordSearch::Undecodable
        );
    }
}
