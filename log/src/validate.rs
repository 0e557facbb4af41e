//! Validation of a produced batch before it is appended, as Kafka's `LogValidator` does
//! for v2 batches from clients: the batch header ([`batch::parse_batches`]: structure,
//! CRC, counts, codec, no control batch), exactly one batch per partition, a
//! transactional batch only with a producer id, no LogAppendTime from a producer, then
//! every record walked ([`walk::walk_records`], decompressing compressed batches) with
//! each timestamp checked against `[log] message_timestamp_before_max_ms` /
//! `message_timestamp_after_max_ms` (Kafka's `log.message.timestamp.*.max.ms`,
//! KIP-937). The batch's maxTimestamp is recomputed from its records; when the producer's
//! differs, the stored copy carries the recomputed one (and a new CRC), as Kafka's
//! `setMaxTimestamp` does. Compressed batches are otherwise stored as produced.
//!
//! Validation needs no partition state, so the produce path runs it before taking the
//! partition's lock; [`super::PartitionLog::append_validated`] takes the result.

use std::ops::ControlFlow;

use bytes::{Bytes, BytesMut};

use super::{
    batch::{self, BatchError, BatchHeader, CRC_START},
    walk, LogConfig, NO_TIMESTAMP,
};

/// Byte position of `maxTimestamp` in the batch header (see [`batch`]).
const MAX_TIMESTAMP_AT: usize = 35;
/// Byte position of `crc` in the batch header.
const CRC_AT: usize = 17;

/// The limits a produced batch is checked against, taken from the partition's
/// [`LogConfig`] at time `now_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationRules {
    /// The broker's clock, in ms since the Unix epoch.
    pub now_ms: i64,
    /// Largest batch, in bytes ([`LogConfig::max_batch_bytes`]).
    pub max_batch_bytes: usize,
    /// How far before `now_ms` a record timestamp may be, in ms
    /// ([`LogConfig::message_timestamp_before_max_ms`]).
    pub timestamp_before_max_ms: i64,
    /// How far after `now_ms` a record timestamp may be, in ms
    /// ([`LogConfig::message_timestamp_after_max_ms`]).
    pub timestamp_after_max_ms: i64,
    /// Most bytes a compressed batch may decompress to
    /// ([`LogConfig::max_decompressed_batch_bytes`]).
    pub max_decompressed_bytes: usize,
}

impl ValidationRules {
    /// The rules of `config` at `now_ms`.
    pub fn new(config: &LogConfig, now_ms: i64) -> Self {
        ValidationRules {
            now_ms,
            max_batch_bytes: usize::try_from(config.max_batch_bytes).unwrap_or(usize::MAX),
            timestamp_before_max_ms: config.message_timestamp_before_max_ms,
            timestamp_after_max_ms: config.message_timestamp_after_max_ms,
            max_decompressed_bytes: usize::try_from(config.max_decompressed_batch_bytes)
                .unwrap_or(usize::MAX),
        }
    }

    /// The accepted timestamp range `[min, max]`, in ms (saturating).
    fn timestamp_range(&self) -> (i64, i64) {
        (
            self.now_ms.saturating_sub(self.timestamp_before_max_ms),
            self.now_ms.saturating_add(self.timestamp_after_max_ms),
        )
    }
}

/// One produced batch that passed [`validate_produced`]: its header (maxTimestamp as
/// recomputed) and the bytes to store. Only this module makes one, so
/// [`super::PartitionLog::append_validated`] can trust it.
#[derive(Debug, Clone)]
pub struct ValidatedBatch {
    header: BatchHeader,
    bytes: Bytes,
    rewritten: bool,
}

impl ValidatedBatch {
    /// The batch header, with the recomputed maxTimestamp and the CRC of [`Self::bytes`].
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The batch to store: the produced bytes, or a copy whose maxTimestamp (and CRC)
    /// was corrected.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Whether the producer's maxTimestamp was wrong and the stored copy corrects it.
    pub fn rewritten(&self) -> bool {
        self.rewritten
    }
}

/// Validates the `records` of one partition of a Produce request (see the module
/// documentation for the rules). Memory: the walk holds one decoder (bounded by
/// [`ValidationRules::max_decompressed_bytes`] and the codec's window, see
/// [`super::compression`]); a copy of the batch is made only when its maxTimestamp must
/// be corrected.
///
/// Errors: every [`BatchError`]; [`BatchError::error_code`] gives the Kafka code
/// (CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE) and
/// [`BatchError::record_index`] the record at fault, when there is one.
pub fn validate_produced(
    records: Bytes,
    rules: &ValidationRules,
) -> Result<ValidatedBatch, BatchError> {
    let headers = batch::parse_batches(&records, rules.max_batch_bytes)?;
    let [mut header] = headers[..] else {
        return Err(BatchError::MultipleBatches {
            count: headers.len(),
        });
    };
    // A transactional batch opens or continues its producer's transaction in the
    // partition (the producer state tracks it). Whether the partition was added to the
    // transaction (KIP-890's verification) is the transaction coordinator's check.
    if header.is_transactional() && header.producer_id < 0 {
        return Err(BatchError::TransactionalWithoutProducerId { at: 0 });
    }
    if header.is_log_append_time() {
        return Err(BatchError::LogAppendTime { at: 0 });
    }
    let (min, max) = rules.timestamp_range();
    let mut max_timestamp = NO_TIMESTAMP;
    walk::walk_records(
        &records,
        &header,
        0,
        rules.max_decompressed_bytes,
        |record| {
            let t = record.timestamp;
            if t != NO_TIMESTAMP && (t < min || t > max) {
                return Err(BatchError::InvalidTimestamp {
                    at: 0,
                    index: record.index,
                    timestamp: t,
                    min,
                    max,
                });
            }
            max_timestamp = max_timestamp.max(t);
            Ok(ControlFlow::Continue(()))
        },
    )?;
    if max_timestamp == header.max_timestamp {
        return Ok(ValidatedBatch {
            header,
            bytes: records,
            rewritten: false,
        });
    }
    let mut copy = BytesMut::from(&records[..header.size()]);
    copy[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = batch::compute_crc(&copy);
    copy[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
    header.max_timestamp = max_timestamp;
    header.crc = crc;
    Ok(ValidatedBatch {
        header,
        bytes: copy.freeze(),
        rewritten: true,
    })
}

#[cfg(test)]
mod tests;
