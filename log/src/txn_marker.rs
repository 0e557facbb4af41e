//! Transaction markers (KIP-98): the control batch the transaction coordinator writes
//! into every partition of a transaction when it commits or aborts, as Kafka's
//! `EndTransactionMarker` and `ControlRecordType`.
//!
//! A marker is a record batch v2 with attributes bits 4 (transactional) and 5 (control)
//! set, the producer's id and epoch, base sequence −1, and one record:
//!
//! ```text
//! key    version int16 (0), type int16 (0 = abort, 1 = commit)
//! value  version int16 (0), coordinator_epoch int32
//! ```
//!
//! Clients never write control batches (Produce refuses them); only
//! [`crate::PartitionLog::append_txn_marker`] does.

use super::batch::{self, BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};

/// Attributes of a marker batch: transactional (bit 4) and control (bit 5).
pub const MARKER_ATTRIBUTES: i16 = 0x10 | 0x20;

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnResult {
    /// Committed: read_committed consumers see its records.
    Commit,
    /// Aborted: read_committed consumers skip its records.
    Abort,
}

impl TxnResult {
    /// Kafka's `ControlRecordType` id: 0 = abort, 1 = commit.
    pub fn control_type(self) -> i16 {
        match self {
            TxnResult::Abort => 0,
            TxnResult::Commit => 1,
        }
    }

    /// The result of control type `id`, `None` for other control records.
    pub fn from_control_type(id: i16) -> Option<TxnResult> {
        match id {
            0 => Some(TxnResult::Abort),
            1 => Some(TxnResult::Commit),
            _ => None,
        }
    }
}

/// One transaction marker to write into a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    /// The transactional producer's id.
    pub producer_id: i64,
    /// Its epoch; a marker older than the partition's epoch for the producer is fenced.
    pub producer_epoch: i16,
    /// The transaction coordinator's epoch (Kafka's `coordinatorEpoch`), stored in the
    /// record's value.
    pub coordinator_epoch: i32,
    /// Commit or abort.
    pub result: TxnResult,
    /// The batch timestamp, ms since the Unix epoch.
    pub timestamp_ms: i64,
}

impl TxnMarker {
    /// The marker as a control batch (base offset 0, to be assigned by the log).
    pub fn encode(&self) -> Vec<u8> {
        let mut key = Vec::with_capacity(4);
        key.extend_from_slice(&0i16.to_be_bytes());
        key.extend_from_slice(&self.result.control_type().to_be_bytes());
        let mut value = Vec::with_capacity(6);
        value.extend_from_slice(&0i16.to_be_bytes());
        value.extend_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut body = vec![0u8]; // record attributes
        put_varint(&mut body, 0); // timestamp delta
        put_varint(&mut body, 0); // offset delta
        put_varint(&mut body, key.len() as i64);
        body.extend_from_slice(&key);
        put_varint(&mut body, value.len() as i64);
        body.extend_from_slice(&value);
        put_varint(&mut body, 0); // headers
        let mut record = Vec::with_capacity(body.len() + 1);
        put_varint(&mut record, body.len() as i64);
        record.extend_from_slice(&body);

        let mut out = Vec::with_capacity(BATCH_HEADER_LEN + record.len());
        out.extend_from_slice(&0i64.to_be_bytes());
        let length = (BATCH_HEADER_LEN - LOG_OVERHEAD + record.len()) as i32;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&super::LEADER_EPOCH.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // CRC, below
        out.extend_from_slice(&MARKER_ATTRIBUTES.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
        out.extend_from_slice(&1i32.to_be_bytes()); // records
        out.extend_from_slice(&record);
        let crc = batch::compute_crc(&out);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

/// The result a stored control batch records: `Some` for a commit or abort marker whose
/// first record's key parses, `None` for anything else (not a control batch, an unknown
/// control type, a compressed or damaged record). `bytes` is the whole batch.
pub fn decode_result(header: &BatchHeader, bytes: &[u8]) -> Option<TxnResult> {
    if !header.is_control() || header.compression() != 0 {
        return None;
    }
    let mut r = bytes.get(BATCH_HEADER_LEN..)?;
    let _length = get_varint(&mut r)?;
    let (_attributes, rest) = r.split_first()?;
    r = rest;
    let _timestamp_delta = get_varint(&mut r)?;
    let _offset_delta = get_varint(&mut r)?;
    let key_len = get_varint(&mut r)?;
    if key_len < 4 {
        return None;
    }
    let key = r.get(..4)?;
    let control_type = i16::from_be_bytes([key[2], key[3]]);
    TxnResult::from_control_type(control_type)
}

/// Appends `v` as a zig-zag varint (Kafka's `ByteUtils.writeVarlong`).
fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Reads a zig-zag varint of at most 10 bytes from the front of `r`.
fn get_varint(r: &mut &[u8]) -> Option<i64> {
    let mut z: u64 = 0;
    for i in 0..10 {
        let (&b, rest) = r.split_first()?;
        *r = rest;
        z |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((z >> 1) as i64 ^ -((z & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_a_valid_control_batch_that_decodes_back() {
        for result in [TxnResult::Commit, TxnResult::Abort] {
            let marker = TxnMarker {
                producer_id: 42,
                producer_epoch: 3,
                coordinator_epoch: 7,
                result,
                timestamp_ms: 1_700_000_000_000,
            };
            let bytes = marker.encode();
            let header = batch::check_batch(&bytes, 1 << 20).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(
                (
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence
                ),
                (42, 3, -1)
            );
            assert_eq!(header.records_count, 1);
            assert_eq!(decode_result(&header, &bytes), Some(result));
        }
    }
}
