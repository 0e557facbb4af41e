//! The batches of a log read, as [`drover_share::LogBatch`]es with their byte ranges, so
//! a share fetch hands the state machine their headers and the consumer only the
//! batches holding acquired offsets.

use bytes::{Bytes, BytesMut};
use drover_share::{AbortedRange, AcquiredRange, LogBatch};

use crate::log::{batch::BatchHeader, AbortedTxn};

/// One batch of a read and where its bytes are.
#[derive(Debug, Clone, Copy)]
pub struct ReadBatch {
    /// Its header, for the state machine.
    pub batch: LogBatch,
    /// Its bytes in the read: `start..end`.
    pub start: usize,
    /// End of its bytes (exclusive).
    pub end: usize,
}

/// The whole batches in `records` (a log read: concatenated v2 batches, the last
/// possibly cut short, which is left out).
pub fn batches(records: &[u8]) -> Vec<ReadBatch> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Ok(header) = BatchHeader::parse(&records[pos..]) {
        let end = pos.saturating_add(header.size());
        if header.size() == 0 || end > records.len() {
            break;
        }
        out.push(ReadBatch {
            batch: LogBatch {
                first_offset: header.base_offset,
                last_offset: header.last_offset(),
                producer_id: header.producer_id,
                transactional: header.is_transactional(),
                control: header.is_control(),
            },
            start: pos,
            end,
        });
        pos = end;
    }
    out
}

/// The aborted transactions of a read_committed read, as the state machine takes them.
pub fn aborted(txns: &[AbortedTxn]) -> Vec<AbortedRange> {
    txns.iter()
        .map(|t| AbortedRange {
            producer_id: t.producer_id,
            first_offset: t.first_offset,
            marker_offset: t.last_offset,
        })
        .collect()
}

/// The bytes of the batches of `read` that hold an offset of `acquired` (both in offset
/// order): what the consumer gets.
pub fn acquired_bytes(records: &Bytes, read: &[ReadBatch], acquired: &[AcquiredRange]) -> Bytes {
    let keep: Vec<&ReadBatch> = read
        .iter()
        .filter(|b| {
            acquired.iter().any(|r| {
                r.first_offset <= b.batch.last_offset && b.batch.first_offset <= r.last_offset
            })
        })
        .collect();
    // One contiguous slice when the kept batches are adjacent (the usual case).
    if let (Some(first), Some(last)) = (keep.first(), keep.last()) {
        let contiguous = keep.windows(2).all(|w| w[0].end == w[1].start);
        if contiguous {
            return records.slice(first.start..last.end);
        }
    }
    let mut out = BytesMut::with_capacity(keep.iter().map(|b| b.end - b.start).sum());
    for b in keep {
        out.extend_from_slice(&records[b.start..b.end]);
    }
    out.freeze()
}
