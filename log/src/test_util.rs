//! Test helpers: building valid v2 record batches (with correct CRC) by hand. Built for
//! this crate's tests and, with the `test-util` feature, for other crates' (the host's).

use super::batch::{compute_crc, BATCH_HEADER_LEN, LOG_OVERHEAD};

/// Header fields of a batch to build; `payload` is the records section, used as is
/// (so it can stand for compressed data).
#[derive(Debug, Clone)]
pub struct RawBatch {
    /// Base offset (the log assigns its own on append).
    pub base_offset: i64,
    /// Partition leader epoch.
    pub leader_epoch: i32,
    /// Attributes (compression in bits 0–2, timestamp type bit 3, transactional bit 4,
    /// control bit 5).
    pub attributes: i16,
    /// Offset of the last record, relative to the base offset.
    pub last_offset_delta: i32,
    /// Timestamp of the first record, ms.
    pub base_timestamp: i64,
    /// Largest record timestamp, ms.
    pub max_timestamp: i64,
    /// Producer id (−1: none).
    pub producer_id: i64,
    /// Producer epoch (−1: none).
    pub producer_epoch: i16,
    /// Sequence of the first record (−1: none).
    pub base_sequence: i32,
    /// Number of records.
    pub records_count: i32,
    /// The records section, as is.
    pub payload: Vec<u8>,
}

impl RawBatch {
    /// A batch as a non-idempotent producer sends it, with `records` timestamps (ms) and
    /// values; records are encoded in the v2 record format.
    pub fn from_records(records: &[(i64, Vec<u8>)]) -> RawBatch {
        let base_timestamp = records.first().map_or(-1, |r| r.0);
        let max_timestamp = records.iter().map(|r| r.0).max().unwrap_or(-1);
        let mut payload = Vec::new();
        for (i, (ts, value)) in records.iter().enumerate() {
            let mut body = vec![0u8]; // record attributes
            put_varlong(&mut body, ts - base_timestamp);
            put_varlong(&mut body, i as i64); // offset delta
            put_varlong(&mut body, -1); // null key
            put_varlong(&mut body, value.len() as i64);
            body.extend_from_slice(value);
            put_varlong(&mut body, 0); // no headers
            put_varlong(&mut payload, body.len() as i64);
            payload.extend_from_slice(&body);
        }
        RawBatch {
            base_offset: 0,
            leader_epoch: -1,
            attributes: 0,
            last_offset_delta: records.len() as i32 - 1,
            base_timestamp,
            max_timestamp,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: records.len() as i32,
            payload,
        }
    }

    /// The encoded batch, CRC included.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BATCH_HEADER_LEN + self.payload.len());
        b.extend_from_slice(&self.base_offset.to_be_bytes());
        let length = (BATCH_HEADER_LEN - LOG_OVERHEAD + self.payload.len()) as i32;
        b.extend_from_slice(&length.to_be_bytes());
        b.extend_from_slice(&self.leader_epoch.to_be_bytes());
        b.push(2);
        b.extend_from_slice(&[0; 4]); // crc, filled below
        b.extend_from_slice(&self.attributes.to_be_bytes());
        b.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        b.extend_from_slice(&self.base_timestamp.to_be_bytes());
        b.extend_from_slice(&self.max_timestamp.to_be_bytes());
        b.extend_from_slice(&self.producer_id.to_be_bytes());
        b.extend_from_slice(&self.producer_epoch.to_be_bytes());
        b.extend_from_slice(&self.base_sequence.to_be_bytes());
        b.extend_from_slice(&self.records_count.to_be_bytes());
        b.extend_from_slice(&self.payload);
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }
}

/// A valid batch of `count` records with `value_len`-byte values and timestamps
/// `timestamp`, `timestamp + 1`, ... (ms).
pub fn batch(count: usize, value_len: usize, timestamp: i64) -> Vec<u8> {
    let records: Vec<(i64, Vec<u8>)> = (0..count)
        .map(|i| (timestamp + i as i64, vec![b'a' + (i % 26) as u8; value_len]))
        .collect();
    RawBatch::from_records(&records).encode()
}

/// Zigzag varint, as in the v2 record format.
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
