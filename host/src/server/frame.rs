//! Kafka framing: every request and response is a 4-byte big-endian size followed by
//! that many bytes (Kafka protocol guide, "Common Request and Response Structure").
//!
//! The size is checked against the configured maximum *before* anything is allocated;
//! a negative or oversized size is an error and the caller closes the connection, as
//! Kafka does (`InvalidReceiveException`).

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The peer closed the connection between frames.
    #[error("connection closed")]
    Closed,
    /// No frame started within the idle timeout.
    #[error("idle for {0} ms")]
    Idle(u64),
    /// The announced size is negative or above the limit.
    #[error("frame of {size} bytes refused: expected 4..={max} bytes")]
    BadSize {
        /// Announced size.
        size: i64,
        /// Configured maximum.
        max: u32,
    },
    /// The peer stopped sending in the middle of a frame.
    #[error("truncated frame: {got} of {size} bytes before {why}")]
    Truncated {
        /// Announced size.
        size: usize,
        /// Bytes received.
        got: usize,
        /// EOF or timeout.
        why: &'static str,
    },
    /// A socket error.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}

impl FrameError {
    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            FrameError::Closed | FrameError::Idle(_) | FrameError::Io(_) => "closed",
            FrameError::BadSize { .. } => "bad_size",
            FrameError::Truncated { .. } => "truncated",
        }
    }
}

/// The smallest frame accepted, bytes: a correlation id.
pub const MIN_FRAME_BYTES: i32 = 4;

/// Limits applied while reading one frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// Largest frame body, bytes.
    pub max_bytes: u32,
    /// How long to wait for a frame to start, ms.
    pub idle_timeout_ms: u64,
    /// How long the rest of a frame may take once its size arrived, ms.
    pub frame_timeout_ms: u64,
}

/// Reads one frame body (without the size prefix).
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limits: FrameLimits,
) -> Result<Bytes, FrameError> {
    let mut size_buf = [0u8; 4];
    let first = tokio::time::timeout(
        Duration::from_millis(limits.idle_timeout_ms),
        reader.read(&mut size_buf),
    )
    .await
    .map_err(|_| FrameError::Idle(limits.idle_timeout_ms))??;
    if first == 0 {
        return Err(FrameError::Closed);
    }
    let deadline = Duration::from_millis(limits.frame_timeout_ms);
    if first < 4 {
        tokio::time::timeout(deadline, reader.read_exact(&mut size_buf[first..]))
            .await
            .map_err(|_| truncated(4, first, "timeout"))?
            .map_err(|_| truncated(4, first, "end of stream"))?;
    }
    let size = i32::from_be_bytes(size_buf);
    // The smallest frame is a response header (correlation id) on a coordinator
    // channel, where the consumer answers: 4 bytes. Requests shorter than their header
    // are refused when decoded.
    if size < MIN_FRAME_BYTES || size as u32 > limits.max_bytes {
        return Err(FrameError::BadSize {
            size: i64::from(size),
            max: limits.max_bytes,
        });
    }
    let size = size as usize;
    // Grow with the bytes that actually arrive: a client that announces a large frame
    // and sends nothing costs at most the initial 64 KiB.
    let mut body = Vec::with_capacity(size.min(64 * 1024));
    let mut limited = (&mut *reader).take(size as u64);
    let read_all = limited.read_to_end(&mut body);
    match tokio::time::timeout(deadline, read_all).await {
        Err(_) => Err(truncated(size, body.len(), "timeout")),
        Ok(Err(e)) => Err(FrameError::Io(e)),
        Ok(Ok(_)) if body.len() < size => Err(truncated(size, body.len(), "end of stream")),
        Ok(Ok(_)) => Ok(Bytes::from(body)),
    }
}

fn truncated(size: usize, got: usize, why: &'static str) -> FrameError {
    FrameError::Truncated { size, got, why }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_bytes: 1024,
        idle_timeout_ms: 1000,
        frame_timeout_ms: 1000,
    };

    #[tokio::test]
    async fn reads_a_frame_and_refuses_bad_sizes() {
        let mut ok: &[u8] = &[0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(
            &read_frame(&mut ok, LIMITS).await.unwrap()[..],
            &[1, 2, 3, 4, 5, 6, 7, 8]
        );
        let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut huge, LIMITS).await,
            Err(FrameError::BadSize { .. })
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut negative, LIMITS).await,
            Err(FrameError::BadSize { .. })
        ));
        let mut tiny: &[u8] = &[0, 0, 0, 3, 1, 2, 3];
        assert!(matches!(
            read_frame(&mut tiny, LIMITS).await,
            Err(FrameError::BadSize { size: 3, .. })
        ));
        let mut short: &[u8] = &[0, 0, 0, 100, 1, 2, 3];
        assert!(matches!(
            read_frame(&mut short, LIMITS).await,
            Err(FrameError::Truncated { got: 3, .. })
        ));
        let mut empty: &[u8] = &[];
        assert!(matches!(
            read_frame(&mut empty, LIMITS).await,
            Err(FrameError::Closed)
        ));
    }
}
