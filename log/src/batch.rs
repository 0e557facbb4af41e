//! Kafka record batch v2 headers, handled without decoding the records.
//!
//! The broker stores batches exactly as produced (compressed ones stay compressed); it
//! only reads the header, checks it, and rewrites the two fields the CRC does not cover.
//! Layout (Kafka protocol guide, "Record Batch"; all integers big-endian):
//!
//! ```text
//! byte  0  baseOffset            int64   rewritten by the broker (not under the CRC)
//! byte  8  batchLength           int32   bytes after this field: batch size = 12 + batchLength
//! byte 12  partitionLeaderEpoch  int32   rewritten by the broker (not under the CRC)
//! byte 16  magic                 int8    must be 2
//! byte 17  crc                   uint32  CRC-32C of bytes 21 .. end of batch
//! byte 21  attributes            int16   bits 0-2 compression, 3 timestamp type,
//!                                        4 transactional, 5 control, 6 delete horizon
//! byte 23  lastOffsetDelta       int32
//! byte 27  baseTimestamp         int64   ms
//! byte 35  maxTimestamp          int64   ms
//! byte 43  producerId            int64
//! byte 51  producerEpoch         int16
//! byte 53  baseSequence          int32
//! byte 57  recordsCount          int32
//! byte 61  records ...
//! ```
//!
//! [`parse_batches`] checks produced data the way Kafka's `UnifiedLog` and `LogValidator`
//! check a client's batch (structure, CRC, then Kafka's client-origin rules);
//! [`check_batch`] is the structural part alone, which recovery also applies to data read
//! back from disk.

/// Bytes of the v2 batch header, up to and including `recordsCount`.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: `baseOffset` (8) and `batchLength` (4). Kafka's
/// `LOG_OVERHEAD`.
pub const LOG_OVERHEAD: usize = 12;
/// The smallest valid `batchLength`: a header without records, in bytes.
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only record batch format (magic) the broker accepts.
pub const MAGIC_V2: i8 = 2;
/// Where the CRC-covered part of a batch starts (the `attributes` field).
pub const CRC_START: usize = 21;

const MAGIC_AT: usize = 16;
const ATTR_CONTROL: i16 = 1 << 5;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
const ATTR_COMPRESSION: i16 = 0b111;
/// Compression codecs Kafka defines: none, gzip, snappy, lz4, zstd.
const MAX_COMPRESSION_CODEC: u8 = 4;

/// Why a batch was refused. `at` is the byte position of the batch in the data that was
/// parsed. [`BatchError::error_code`] gives the Kafka error code for a Produce response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The records field holds no batch. Kafka: "Produce requests with version >= 3 must
    /// have at least one record batch" (`INVALID_RECORD`).
    #[error("no record batch in the records")]
    NoBatches,
    /// The data ends inside a batch (`CORRUPT_MESSAGE`).
    #[error("batch at byte {at} is truncated: needs {needed} bytes, {available} left")]
    Truncated {
        /// Byte position of the batch.
        at: usize,
        /// Bytes the batch needs (header, or 12 + batchLength).
        needed: usize,
        /// Bytes left from `at`.
        available: usize,
    },
    /// `batchLength` is below 49, the size of a header without records
    /// (`CORRUPT_MESSAGE`).
    #[error("batch at byte {at} has an invalid batchLength {batch_length}")]
    InvalidLength {
        /// Byte position of the batch.
        at: usize,
        /// The `batchLength` field.
        batch_length: i32,
    },
    /// The magic byte is not 2. Kafka 4 refuses other formats in produce v3+ with
    /// `INVALID_RECORD` ("only allowed to contain record batches with magic version 2").
    #[error("batch at byte {at} has magic {magic}, only magic 2 is supported")]
    UnsupportedMagic {
        /// Byte position of the batch.
        at: usize,
        /// The magic byte found.
        magic: i8,
    },
    /// The batch is larger than the configured maximum (Kafka `max.message.bytes`;
    /// `MESSAGE_TOO_LARGE`).
    #[error("batch at byte {at} is {size} bytes, more than the maximum of {max}")]
    TooLarge {
        /// Byte position of the batch.
        at: usize,
        /// Batch size in bytes (12 + batchLength).
        size: usize,
        /// The maximum, in bytes.
        max: usize,
    },
    /// The stored CRC-32C does not match the batch (`CORRUPT_MESSAGE`).
    #[error("batch at byte {at} has CRC {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// Byte position of the batch.
        at: usize,
        /// The `crc` field.
        stored: u32,
        /// CRC-32C of bytes 21 .. end of the batch.
        computed: u32,
    },
    /// `recordsCount` / `lastOffsetDelta` are invalid: negative, or (for produced data,
    /// Kafka's `LogValidator.validateBatch`) not `recordsCount == lastOffsetDelta + 1 > 0`
    /// (`INVALID_RECORD`).
    #[error(
        "batch at byte {at} has recordsCount {records_count} and lastOffsetDelta {last_offset_delta}"
    )]
    InvalidCount {
        /// Byte position of the batch.
        at: usize,
        /// The `recordsCount` field.
        records_count: i32,
        /// The `lastOffsetDelta` field.
        last_offset_delta: i32,
    },
    /// The compression codec (attributes bits 0-2) is not one Kafka defines
    /// (`INVALID_RECORD`).
    #[error("batch at byte {at} uses unknown compression codec {codec}")]
    UnknownCompression {
        /// Byte position of the batch.
        at: usize,
        /// The codec id.
        codec: u8,
    },
    /// A client sent a control batch. Kafka: "Clients are not allowed to write control
    /// records" (`INVALID_RECORD`).
    #[error("batch at byte {at} is a control batch, which clients may not write")]
    ControlBatch {
        /// Byte position of the batch.
        at: usize,
    },
    /// A batch with a producer id has a negative base sequence (Kafka's
    /// `LogValidator.validateBatch`; `INVALID_RECORD`).
    #[error("batch at byte {at} has producerId {producer_id} but baseSequence {base_sequence}")]
    InvalidSequence {
        /// Byte position of the batch.
        at: usize,
        /// The `producerId` field.
        producer_id: i64,
        /// The `baseSequence` field.
        base_sequence: i32,
    },
    /// A record inside the batch is malformed (Kafka's `DefaultRecord.readFrom` and the
    /// batch's record iterator refuse the same with `InvalidRecordException`;
    /// `INVALID_RECORD`). See [`super::walk`] for what is checked.
    #[error("batch at byte {at}, record {index}: {reason}")]
    InvalidRecord {
        /// Byte position of the batch.
        at: usize,
        /// Position of the record in the batch (Kafka's `batch_index`), from 0.
        index: usize,
        /// What is wrong, with the values found.
        reason: String,
    },
    /// The records of a compressed batch cannot be decompressed (`CORRUPT_MESSAGE`).
    #[error("batch at byte {at}: its records do not decompress as codec {codec}: {reason}")]
    CorruptCompression {
        /// Byte position of the batch.
        at: usize,
        /// The codec id (attributes bits 0-2).
        codec: u8,
        /// The decoder's error.
        reason: String,
    },
    /// A compressed batch decompresses to more than the configured maximum
    /// (`[log] max_decompressed_batch_bytes`; `MESSAGE_TOO_LARGE`).
    #[error("batch at byte {at} decompresses to more than {max} bytes")]
    DecompressedTooLarge {
        /// Byte position of the batch.
        at: usize,
        /// The maximum, in bytes.
        max: usize,
    },
    /// A Produce request carried several batches for one partition. Kafka (produce v3+,
    /// magic 2) requires exactly one (`INVALID_RECORD`).
    #[error("{count} record batches for one partition; a produce request carries exactly one")]
    MultipleBatches {
        /// Batches found.
        count: usize,
    },
    /// A record's timestamp is outside `[now − message_timestamp_before_max_ms, now +
    /// message_timestamp_after_max_ms]` (Kafka's `LogValidator.validateTimestamp`,
    /// KIP-937; `INVALID_TIMESTAMP`).
    #[error(
        "batch at byte {at}, record {index}: timestamp {timestamp} ms is outside [{min}, {max}]"
    )]
    InvalidTimestamp {
        /// Byte position of the batch.
        at: usize,
        /// Position of the record in the batch, from 0.
        index: usize,
        /// The record's timestamp, in ms since the Unix epoch.
        timestamp: i64,
        /// The earliest timestamp accepted now, in ms.
        min: i64,
        /// The latest timestamp accepted now, in ms.
        max: i64,
    },
    /// A produced batch has timestamp type LogAppendTime (attributes bit 3), which only
    /// the broker may set. Kafka: "Producer should not set timestamp type to
    /// LogAppendTime" (`INVALID_TIMESTAMP`).
    #[error("batch at byte {at} has timestamp type LogAppendTime, which producers may not set")]
    LogAppendTime {
        /// Byte position of the batch.
        at: usize,
    },
    /// A batch marked transactional (attributes bit 4) has no producer id; read_committed
    /// consumers would take it for committed data (`INVALID_RECORD`).
    #[error("batch at byte {at} is transactional but has no producer id")]
    TransactionalWithoutProducerId {
        /// Byte position of the batch.
        at: usize,
    },
    /// A batch marked transactional names a producer with no open transaction that
    /// includes the partition. Kafka refuses such a write with `INVALID_TXN_STATE` (48;
    /// KIP-890's verification). Validation itself never returns it: the check needs
    /// the transaction coordinator's state, and is made in the Produce handler.
    #[error(
        "batch at byte {at} is transactional (producer id {producer_id}), but the \
         partition is not in an open transaction of that producer"
    )]
    NoOpenTransaction {
        /// Byte position of the batch.
        at: usize,
        /// The `producerId` field.
        producer_id: i64,
    },
}

impl BatchError {
    /// The Kafka error code for a Produce response: `CORRUPT_MESSAGE` (2) for data that
    /// is damaged (truncated, bad length, CRC), `MESSAGE_TOO_LARGE` (10) for
    /// [`BatchError::TooLarge`], `INVALID_RECORD` (87) for well-formed data Kafka refuses.
    pub fn error_code(&self) -> i16 {
        match self {
            BatchError::Truncated { .. }
            | BatchError::InvalidLength { .. }
            | BatchError::CrcMismatch { .. }
            | BatchError::CorruptCompression { .. } => 2,
            BatchError::TooLarge { .. } | BatchError::DecompressedTooLarge { .. } => 10,
            BatchError::InvalidTimestamp { .. } | BatchError::LogAppendTime { .. } => 32,
            BatchError::NoOpenTransaction { .. } => 48,
            BatchError::NoBatches
            | BatchError::UnsupportedMagic { .. }
            | BatchError::InvalidCount { .. }
            | BatchError::UnknownCompression { .. }
            | BatchError::ControlBatch { .. }
            | BatchError::InvalidSequence { .. }
            | BatchError::InvalidRecord { .. }
            | BatchError::MultipleBatches { .. }
            | BatchError::TransactionalWithoutProducerId { .. } => 87,
        }
    }

    /// The position in its batch of the record at fault, for a Produce response's
    /// `record_errors` (`batch_index`), when one record is.
    pub fn record_index(&self) -> Option<usize> {
        match self {
            BatchError::InvalidRecord { index, .. }
            | BatchError::InvalidTimestamp { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// The decoded header of one v2 batch. Field meanings and units as in the layout in the
/// module documentation (timestamps in ms since the Unix epoch, −1 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the `batchLength` field.
    pub batch_length: i32,
    /// Leader epoch stamped by the broker that appended the batch.
    pub partition_leader_epoch: i32,
    /// Format version; always 2 once parsed.
    pub magic: i8,
    /// CRC-32C of bytes 21 .. end of the batch.
    pub crc: u32,
    /// Compression, timestamp type, transactional, control and delete-horizon bits.
    pub attributes: i16,
    /// Offset of the last record minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record, in ms.
    pub base_timestamp: i64,
    /// Largest record timestamp in the batch, in ms.
    pub max_timestamp: i64,
    /// Idempotent/transactional producer id, −1 = none.
    pub producer_id: i64,
    /// Producer epoch, −1 = none.
    pub producer_epoch: i16,
    /// Sequence number of the first record, −1 = none.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

impl BatchHeader {
    /// Reads the header at the start of `bytes` and checks its length field and magic.
    /// `bytes` may be longer than the batch (or hold only the header): it checks neither
    /// that the whole batch is present nor the CRC; [`check_batch`] does.
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        parse_header(bytes, 0)
    }

    /// Size of the whole batch in bytes: 12 + `batchLength`.
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Offset of the last record: `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset after this batch: `last_offset() + 1`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Offsets the batch occupies: `last_offset_delta + 1`.
    pub fn offset_count(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }

    /// The compression codec id (attributes bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4,
    /// 4 zstd.
    pub fn compression(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION) as u8
    }

    /// Whether the batch belongs to a transaction (attributes bit 4).
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Whether the batch's timestamp type is LogAppendTime (attributes bit 3).
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_LOG_APPEND_TIME != 0
    }

    /// Whether the batch holds control records (attributes bit 5).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
}

/// Checks one whole batch at the start of `bytes` (which may continue past it): header
/// ([`BatchHeader::parse`]), that all of its `12 + batchLength` bytes are present, that it
/// is at most `max_batch_bytes`, its CRC-32C, and `recordsCount >= 0`,
/// `lastOffsetDelta >= 0`. These are the structural checks; [`parse_batches`] adds Kafka's
/// rules for client data.
pub fn check_batch(bytes: &[u8], max_batch_bytes: usize) -> Result<BatchHeader, BatchError> {
    check_batch_at(bytes, 0, max_batch_bytes)
}

/// Splits a produced `records` blob (one or more batches back to back) into batches and
/// checks each: [`check_batch`] with `max_batch_bytes`, then Kafka's client-origin rules
/// (`LogValidator.validateBatch`): `recordsCount == lastOffsetDelta + 1 > 0`, a known
/// compression codec, no control batch, and `baseSequence >= 0` when `producerId >= 0`.
///
/// Returns the headers in order; batch `i` starts at the sum of the sizes before it.
/// Nothing is allocated from a length field before it is checked against `records.len()`.
///
/// Kafka (produce v3+) also requires exactly one batch per partition; this function
/// accepts several, so that check, if wanted, is the caller's (`INVALID_RECORD`).
pub fn parse_batches(
    records: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchHeader>, BatchError> {
    if records.is_empty() {
        return Err(BatchError::NoBatches);
    }
    let mut headers = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let header = check_batch_at(&records[at..], at, max_batch_bytes)?;
        check_client_rules(&header, at)?;
        at += header.size();
        headers.push(header);
    }
    Ok(headers)
}

/// Writes `base_offset` into bytes 0..8 of the batch at the start of `batch`. The field
/// is not covered by the CRC, so the batch stays valid.
///
/// # Panics
/// If `batch` is shorter than 8 bytes.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes `epoch` into bytes 12..16 (`partitionLeaderEpoch`) of the batch at the start of
/// `batch`. The field is not covered by the CRC, so the batch stays valid.
///
/// # Panics
/// If `batch` is shorter than 16 bytes.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}

/// CRC-32C of a whole batch as Kafka computes it: over bytes 21 .. end.
///
/// # Panics
/// If `batch` is shorter than 21 bytes.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START..])
}

/// [`check_batch`], reporting `at` as the batch position in errors.
fn check_batch_at(bytes: &[u8], at: usize, max: usize) -> Result<BatchHeader, BatchError> {
    let header = parse_header(bytes, at)?;
    let size = header.size();
    if size > bytes.len() {
        return Err(BatchError::Truncated {
            at,
            needed: size,
            available: bytes.len(),
        });
    }
    if size > max {
        return Err(BatchError::TooLarge { at, size, max });
    }
    let computed = compute_crc(&bytes[..size]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            at,
            stored: header.crc,
            computed,
        });
    }
    check_counts(&header, at)?;
    Ok(header)
}

/// The count checks that hold for any stored batch: `recordsCount >= 0`,
/// `lastOffsetDelta >= 0`. Made after the CRC check, so damage shows as a CRC error.
pub(super) fn check_counts(header: &BatchHeader, at: usize) -> Result<(), BatchError> {
    if header.records_count < 0 || header.last_offset_delta < 0 {
        return Err(invalid_count(header, at));
    }
    Ok(())
}

fn check_client_rules(header: &BatchHeader, at: usize) -> Result<(), BatchError> {
    if header.records_count <= 0 || i64::from(header.records_count) != header.offset_count() {
        return Err(invalid_count(header, at));
    }
    let codec = header.compression();
    if codec > MAX_COMPRESSION_CODEC {
        return Err(BatchError::UnknownCompression { at, codec });
    }
    if header.is_control() {
        return Err(BatchError::ControlBatch { at });
    }
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(BatchError::InvalidSequence {
            at,
            producer_id: header.producer_id,
            base_sequence: header.base_sequence,
        });
    }
    Ok(())
}

fn invalid_count(header: &BatchHeader, at: usize) -> BatchError {
    BatchError::InvalidCount {
        at,
        records_count: header.records_count,
        last_offset_delta: header.last_offset_delta,
    }
}

/// Reads and checks the header fields; see [`BatchHeader::parse`]. The magic byte sits at
/// byte 16 in every message format, so it is checked before the v2-specific length.
/// Errors report `at` as the batch position.
pub(super) fn parse_header(b: &[u8], at: usize) -> Result<BatchHeader, BatchError> {
    let truncated = |needed| BatchError::Truncated {
        at,
        needed,
        available: b.len(),
    };
    if b.len() <= MAGIC_AT {
        return Err(truncated(BATCH_HEADER_LEN));
    }
    let magic = b[MAGIC_AT] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic { at, magic });
    }
    let batch_length = be_i32(b, 8);
    if batch_length < MIN_BATCH_LENGTH {
        return Err(BatchError::InvalidLength { at, batch_length });
    }
    if b.len() < BATCH_HEADER_LEN {
        return Err(truncated(BATCH_HEADER_LEN));
    }
    Ok(BatchHeader {
        base_offset: be_i64(b, 0),
        batch_length,
        partition_leader_epoch: be_i32(b, 12),
        magic,
        crc: be_i32(b, 17) as u32,
        attributes: i16::from_be_bytes([b[21], b[22]]),
        last_offset_delta: be_i32(b, 23),
        base_timestamp: be_i64(b, 27),
        max_timestamp: be_i64(b, 35),
        producer_id: be_i64(b, 43),
        producer_epoch: i16::from_be_bytes([b[51], b[52]]),
        base_sequence: be_i32(b, 53),
        records_count: be_i32(b, 57),
    })
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

#[cfg(test)]
mod tests;
