//! [`LogError`]: what the partition log reports, and the Kafka error code for each.

use std::{io, path::PathBuf};

use super::{batch::BatchError, producer_state::ProducerError};

/// Errors of the partition log. [`LogError::error_code`] gives the Kafka error code a
/// Produce, Fetch or ListOffsets response carries for each.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A file operation failed. Kafka error `KAFKA_STORAGE_ERROR` (56).
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A produced batch was refused; nothing of the append was written. The error code is
    /// [`BatchError::error_code`] (`CORRUPT_MESSAGE`, `INVALID_RECORD`, `MESSAGE_TOO_LARGE`).
    #[error(transparent)]
    InvalidBatch(#[from] BatchError),
    /// The batches of one append are together larger than a segment may be
    /// ([`super::LogConfig::segment_bytes`]), so they cannot be written with one write
    /// into one segment. Kafka error `RECORD_LIST_TOO_LARGE` (18), as Kafka's
    /// `RecordBatchTooLargeException`.
    #[error("append of {size} bytes exceeds the segment size of {max} bytes")]
    BatchTooLarge {
        /// Bytes of the append.
        size: usize,
        /// The configured segment size, in bytes.
        max: u64,
    },
    /// The batches of one append claim more offsets (sum of lastOffsetDelta + 1) than a
    /// segment's 32-bit relative offsets can hold. Only a client that lies about its
    /// record counts gets here. Kafka error `INVALID_RECORD` (87).
    #[error("append claims {offsets} offsets, more than a segment can hold")]
    TooManyOffsets {
        /// Offsets the append would take.
        offsets: i64,
    },
    /// The requested offset is below the log start offset or above the log end offset.
    /// Kafka error `OFFSET_OUT_OF_RANGE` (1).
    #[error("offset {requested} is out of range [{start}, {end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: i64,
        /// The log start offset (first offset still stored).
        start: i64,
        /// The log end offset (next offset to be assigned; reading it gives no data).
        end: i64,
    },
    /// Stored data is inconsistent where the log cannot repair it (e.g. an index entry or
    /// a batch header read for a fetch does not parse, or segments overlap). Kafka error
    /// `CORRUPT_MESSAGE` (2).
    #[error("corrupt log data in {path} at byte {position}: {reason}")]
    Corrupt {
        /// The segment or index file.
        path: PathBuf,
        /// Byte position in that file.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// A write or fsync failed earlier; the log refuses further writes until it is
    /// recovered (reopened, or brought back by [`super::PartitionLog::try_recover`],
    /// which rescans the active segment as a restart would), because after a failed
    /// fsync the kernel may have dropped the data while reporting later fsyncs as
    /// successful. Kafka takes the log directory offline likewise. Also returned after
    /// [`super::PartitionLog::close`]. Kafka error `KAFKA_STORAGE_ERROR` (56).
    #[error("partition log {path} is offline after an earlier write error")]
    Offline {
        /// The partition directory.
        path: PathBuf,
    },
    /// A batch's producer id, epoch or sequence broke the idempotence rules
    /// ([`super::producer_state`]); nothing was written. Kafka error
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER` (45), `INVALID_PRODUCER_EPOCH` (47) or
    /// `POLICY_VIOLATION` (44), per [`ProducerError::error`].
    #[error(transparent)]
    Producer(#[from] ProducerError),
    /// A [`super::LogConfig`] value is out of range. Kafka error `UNKNOWN_SERVER_ERROR`
    /// (−1); this only happens when opening a log.
    #[error("invalid log config: {0}")]
    InvalidConfig(String),
}

impl LogError {
    /// The Kafka error code for this error (Kafka protocol guide, "Error Codes").
    pub fn error_code(&self) -> i16 {
        match self {
            LogError::Io { .. } | LogError::Offline { .. } => 56,
            LogError::InvalidBatch(e) => e.error_code(),
            LogError::BatchTooLarge { .. } => 18,
            LogError::TooManyOffsets { .. } => 87,
            LogError::OffsetOutOfRange { .. } => 1,
            LogError::Corrupt { .. } => 2,
            LogError::Producer(e) => e.error().code(),
            LogError::InvalidConfig(_) => -1,
        }
    }

    /// Wraps an I/O error with the path it happened on.
    pub(super) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }

    /// A [`LogError::Corrupt`].
    pub(super) fn corrupt(
        path: impl Into<PathBuf>,
        position: u64,
        reason: impl Into<String>,
    ) -> LogError {
        LogError::Corrupt {
            path: path.into(),
            position,
            reason: reason.into(),
        }
    }
}
