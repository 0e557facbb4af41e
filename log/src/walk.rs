//! Walking the records of one v2 batch without keeping them: each record's framing is
//! checked and its offset delta and timestamp handed to a visitor. Compressed batches are
//! read through a streaming decoder ([`super::compression`]), so memory stays bounded
//! whatever the batch claims.
//!
//! Record layout (Kafka protocol guide, "Record"; varints are zigzag LEB128, at most 5
//! bytes for `varint` and 10 for `varlong`):
//!
//! ```text
//! length          varint   bytes of the record after this field
//! attributes      int8     unused
//! timestampDelta  varlong  ms after the batch's baseTimestamp
//! offsetDelta     varint   position after the batch's baseOffset
//! keyLength       varint   −1 = null key
//! key             bytes
//! valueLength     varint   −1 = null value
//! value           bytes
//! headers count   varint
//!   headerKeyLength   varint (≥ 0)   headerKey   bytes (UTF-8)
//!   headerValueLength varint (−1 = null)   headerValue bytes
//! ```
//!
//! What is refused, as Kafka's `DefaultRecord.readFrom` and `DefaultRecordBatch`'s
//! iterators refuse it: a record that ends before its fields do or whose fields do not
//! fill its length exactly, negative lengths other than −1 where null is allowed, a
//! negative header count or key length, fewer records than `recordsCount` or bytes left
//! after them. Stricter than Kafka, because the broker stores batches as produced: a
//! record whose offset delta is not its position in the batch (Kafka rewrites such
//! compressed batches and stores uncompressed ones as they are; either way consumers
//! would compute offsets from the delta).

use std::{io::Read, ops::ControlFlow};

use super::{
    batch::{BatchError, BatchHeader, BATCH_HEADER_LEN},
    compression,
};

/// What the walker reports of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordInfo {
    /// Position in the batch (Kafka's `batch_index`), from 0.
    pub index: usize,
    /// Offset delta as stored; the walker has checked it equals `index`.
    pub offset_delta: i32,
    /// baseTimestamp + timestampDelta, in ms since the Unix epoch (−1 = none).
    pub timestamp: i64,
}

/// Walks the records of `batch` (one whole batch, header included, whose header
/// `header` has passed [`super::batch::check_batch`]), calling `visit` for each until it
/// returns `Break`. `at` is the batch's position, for errors. `max_decompressed` bounds
/// the bytes a compressed batch may decompress to (and a snappy block's allocation).
///
/// Errors: [`BatchError::InvalidRecord`] for a malformed record,
/// [`BatchError::CorruptCompression`] when the compressed stream cannot be decoded,
/// [`BatchError::DecompressedTooLarge`] past `max_decompressed`, and whatever `visit`
/// returns.
pub fn walk_records(
    batch: &[u8],
    header: &BatchHeader,
    at: usize,
    max_decompressed: usize,
    visit: impl FnMut(RecordInfo) -> Result<ControlFlow<()>, BatchError>,
) -> Result<(), BatchError> {
    let body = &batch[BATCH_HEADER_LEN.min(batch.len())..header.size().min(batch.len())];
    let codec = header.compression();
    if codec == 0 {
        return Walker {
            input: SliceInput { buf: body, pos: 0 },
            header,
            at,
        }
        .run(visit);
    }
    let corrupt = |e: std::io::Error| BatchError::CorruptCompression {
        at,
        codec,
        reason: e.to_string(),
    };
    let reader = compression::decoder(codec, body, max_decompressed).map_err(corrupt)?;
    Walker {
        input: StreamInput::new(reader, max_decompressed as u64),
        header,
        at,
    }
    .run(visit)
}

/// Why the input could not give what was asked.
enum Short {
    /// The input ended.
    End,
    /// The decoder failed, or the decompressed size passed its cap.
    Failed(BatchError),
}

/// Bytes of the records section, from a slice or a decoder.
trait Input {
    fn byte(&mut self) -> Result<u8, Short>;
    fn skip(&mut self, n: usize) -> Result<(), Short>;
    /// Bytes consumed so far.
    fn pos(&self) -> u64;
    fn at_end(&mut self) -> Result<bool, Short>;
}

struct SliceInput<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Input for SliceInput<'_> {
    #[inline]
    fn byte(&mut self) -> Result<u8, Short> {
        let b = *self.buf.get(self.pos).ok_or(Short::End)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn skip(&mut self, n: usize) -> Result<(), Short> {
        if self.buf.len() - self.pos < n {
            return Err(Short::End);
        }
        self.pos += n;
        Ok(())
    }

    fn pos(&self) -> u64 {
        self.pos as u64
    }

    fn at_end(&mut self) -> Result<bool, Short> {
        Ok(self.pos == self.buf.len())
    }
}

/// A decoder read through an 8 KiB buffer, failing once more than `cap` bytes came out.
struct StreamInput<'a> {
    reader: Box<dyn Read + 'a>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    consumed_before: u64,
    cap: u64,
    failure: Option<BatchError>,
}

impl<'a> StreamInput<'a> {
    fn new(reader: Box<dyn Read + 'a>, cap: u64) -> Self {
        StreamInput {
            reader,
            buf: vec![0; 8192].into_boxed_slice(),
            start: 0,
            end: 0,
            consumed_before: 0,
            cap,
            failure: None,
        }
    }

    /// Refills the buffer; `Err(End)` at the end of the stream.
    fn fill(&mut self) -> Result<(), Short> {
        if let Some(e) = self.failure.take() {
            return Err(Short::Failed(e));
        }
        self.consumed_before += self.end as u64;
        self.start = 0;
        self.end = 0;
        let n = loop {
            match self.reader.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Short::Failed(BatchError::CorruptCompression {
                        at: 0,
                        codec: 0,
                        reason: e.to_string(),
                    }))
                }
            }
        };
        if n == 0 {
            return Err(Short::End);
        }
        if self.consumed_before + n as u64 > self.cap {
            return Err(Short::Failed(BatchError::DecompressedTooLarge {
                at: 0,
                max: self.cap as usize,
            }));
        }
        self.end = n;
        Ok(())
    }
}

impl Input for StreamInput<'_> {
    fn byte(&mut self) -> Result<u8, Short> {
        if self.start == self.end {
            self.fill()?;
        }
        let b = self.buf[self.start];
        self.start += 1;
        Ok(b)
    }

    fn skip(&mut self, mut n: usize) -> Result<(), Short> {
        loop {
            let here = (self.end - self.start).min(n);
            self.start += here;
            n -= here;
            if n == 0 {
                return Ok(());
            }
            self.fill()?;
        }
    }

    fn pos(&self) -> u64 {
        self.consumed_before + self.start as u64
    }

    fn at_end(&mut self) -> Result<bool, Short> {
        if self.start < self.end {
            return Ok(false);
        }
        match self.fill() {
            Ok(()) => Ok(false),
            Err(Short::End) => Ok(true),
            Err(e) => Err(e),
        }
    }
}

struct Walker<'h, I> {
    input: I,
    header: &'h BatchHeader,
    at: usize,
}

impl<I: Input> Walker<'_, I> {
    fn run(
        mut self,
        mut visit: impl FnMut(RecordInfo) -> Result<ControlFlow<()>, BatchError>,
    ) -> Result<(), BatchError> {
        let count = self.header.records_count.max(0) as usize;
        for index in 0..count {
            let info = self.record(index)?;
            if visit(info)?.is_break() {
                return Ok(());
            }
        }
        match self.input.at_end() {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.invalid(
                count,
                format!("bytes remain after the {count} records the batch declares"),
            )),
            Err(short) => Err(self.short(count, short)),
        }
    }

    fn invalid(&self, index: usize, reason: String) -> BatchError {
        BatchError::InvalidRecord {
            at: self.at,
            index,
            reason,
        }
    }

    /// The error for input that stopped inside record `index`.
    fn short(&self, index: usize, short: Short) -> BatchError {
        match short {
            Short::End => self.invalid(
                index,
                format!(
                    "the records end inside record {index} of the {} the batch declares",
                    self.header.records_count
                ),
            ),
            Short::Failed(e) => self.locate(e),
        }
    }

    /// Fills in the batch position and codec of an input failure.
    fn locate(&self, e: BatchError) -> BatchError {
        match e {
            BatchError::CorruptCompression { reason, .. } => BatchError::CorruptCompression {
                at: self.at,
                codec: self.header.compression(),
                reason,
            },
            BatchError::DecompressedTooLarge { max, .. } => {
                BatchError::DecompressedTooLarge { at: self.at, max }
            }
            e => e,
        }
    }

    fn record(&mut self, index: usize) -> Result<RecordInfo, BatchError> {
        self.parse_record(index).map_err(|e| match e {
            Bad::Short(s) => self.short(index, s),
            Bad::Field(reason) => self.invalid(index, reason),
        })
    }

    fn parse_record(&mut self, index: usize) -> Result<RecordInfo, Bad> {
        let length = self.varint()?;
        if length <= 0 {
            return Err(Bad::Field(format!("record length {length}")));
        }
        let start = self.input.pos();
        let end = start + length as u64;
        self.input.byte()?; // attributes
        let timestamp_delta = self.varlong()?;
        let offset_delta = self.varint()?;
        if offset_delta as i64 != index as i64 {
            return Err(Bad::Field(format!(
                "offset delta {offset_delta}, expected {index} (its position in the batch)"
            )));
        }
        let key = self.varint()?;
        self.bytes(key, true, "key", end)?;
        let value = self.varint()?;
        self.bytes(value, true, "value", end)?;
        let headers = self.varint()?;
        let left = end.saturating_sub(self.input.pos());
        if headers < 0 || headers as u64 > left / 2 {
            return Err(Bad::Field(format!(
                "header count {headers} with {left} bytes of the record left"
            )));
        }
        for _ in 0..headers {
            let key = self.varint()?;
            self.bytes(key, false, "header key", end)?;
            let value = self.varint()?;
            self.bytes(value, true, "header value", end)?;
        }
        let read = self.input.pos() - start;
        if read != length as u64 {
            return Err(Bad::Field(format!(
                "record length {length}, but its fields take {read} bytes"
            )));
        }
        let timestamp = self
            .header
            .base_timestamp
            .checked_add(timestamp_delta)
            .ok_or_else(|| Bad::Field(format!("timestamp delta {timestamp_delta} overflows")))?;
        Ok(RecordInfo {
            index,
            offset_delta,
            timestamp,
        })
    }

    /// Skips a length-prefixed field of `len` bytes that must end by `end`.
    fn bytes(&mut self, len: i32, nullable: bool, what: &str, end: u64) -> Result<(), Bad> {
        if len == -1 && nullable {
            return Ok(());
        }
        if len < 0 {
            return Err(Bad::Field(format!("{what} length {len}")));
        }
        let left = end.saturating_sub(self.input.pos());
        if len as u64 > left {
            return Err(Bad::Field(format!(
                "{what} length {len} with {left} bytes of the record left"
            )));
        }
        self.input.skip(len as usize)?;
        Ok(())
    }

    fn varint(&mut self) -> Result<i32, Bad> {
        let raw = self.unsigned(5)?;
        if raw > u64::from(u32::MAX) {
            return Err(Bad::Field("varint longer than 32 bits".into()));
        }
        let raw = raw as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, Bad> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn unsigned(&mut self, max_bytes: u32) -> Result<u64, Bad> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let b = self.input.byte()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Bad::Field(format!("varint longer than {max_bytes} bytes")))
    }
}

enum Bad {
    Short(Short),
    Field(String),
}

impl From<Short> for Bad {
    fn from(s: Short) -> Self {
        Bad::Short(s)
    }
}
