//! Kafka framing: every request and response is a 4-byte big-endian size followed by
//! that many bytes (Kafka protocol guide, "Common Request and Response Structure").
//!
//! The size is checked against the configured maximum *before* anything is allocated;
//! a negative or oversized size is an error and the caller closes the connection, as
//! Kafka does (`InvalidReceiveException`). Buffer space for a frame is reserved up to
//! [`EAGER_FRAME_BYTES`] at once, and beyond that only as its bytes arrive.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::{
    io::{AsyncRead, AsyncReadExt},
    time::Instant,
};

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

/// Bytes of a frame that are reserved as soon as its size is known: frames up to this
/// size are read into buffer space of the right size in one go. Beyond it the buffer
/// grows no faster than the bytes that arrive (doubling), so a client that announces a
/// large frame and sends nothing costs at most this much.
pub const EAGER_FRAME_BYTES: usize = 1024 * 1024;

/// Smallest read, bytes: a read may take in several small pipelined frames at once.
const MIN_READ_BYTES: usize = 16 * 1024;

/// Reads frames from one connection through a buffer that is reused from frame to frame
/// (frames are handed out as [`Bytes`] that share it; the space is reused once they are
/// dropped). One read may take in several pipelined frames.
#[derive(Debug)]
pub struct FrameReader<R> {
    reader: R,
    buf: BytesMut,
    limits: FrameLimits,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader of frames from `reader`, under `limits`.
    pub fn new(reader: R, limits: FrameLimits) -> Self {
        FrameReader {
            reader,
            buf: BytesMut::new(),
            limits,
        }
    }

    /// Replaces the limits (they apply from the next read on).
    pub fn set_limits(&mut self, limits: FrameLimits) {
        self.limits = limits;
    }

    /// Reads one frame body (without the size prefix). Waits at most the idle timeout
    /// for a frame to start, then at most the frame timeout for the rest of it.
    ///
    /// Cancel safe: bytes already read stay buffered for the next call.
    ///
    /// Errors: [`FrameError`]; after one the connection must be closed.
    pub async fn read_frame(&mut self) -> Result<Bytes, FrameError> {
        let mut deadline = None;
        loop {
            if let Some(frame) = self.take_frame()? {
                return Ok(frame);
            }
            let started = !self.buf.is_empty();
            let wait = match deadline {
                Some(d) => d,
                None if started => Instant::now() + ms(self.limits.frame_timeout_ms),
                None => Instant::now() + ms(self.limits.idle_timeout_ms),
            };
            self.reserve_for_frame();
            let read = tokio::time::timeout_at(wait, self.reader.read_buf(&mut self.buf)).await;
            match read {
                Err(_) if started => return Err(self.truncated("timeout")),
                Err(_) => return Err(FrameError::Idle(self.limits.idle_timeout_ms)),
                Ok(Err(e)) => return Err(FrameError::Io(e)),
                Ok(Ok(0)) if self.buf.is_empty() => return Err(FrameError::Closed),
                Ok(Ok(0)) => return Err(self.truncated("end of stream")),
                Ok(Ok(_)) => {}
            }
            if deadline.is_none() {
                // The frame has started: the rest of it gets the frame timeout.
                deadline = Some(if started {
                    wait
                } else {
                    Instant::now() + ms(self.limits.frame_timeout_ms)
                });
            }
        }
    }

    /// The announced size of the frame at the front of the buffer, checked; `None`
    /// before its 4 bytes are in.
    fn announced(&self) -> Result<Option<usize>, FrameError> {
        let Some(size) = self.buf.get(..4) else {
            return Ok(None);
        };
        let size = i32::from_be_bytes([size[0], size[1], size[2], size[3]]);
        // The smallest frame is a response header (correlation id) on a coordinator
        // channel, where the consumer answers: 4 bytes. Requests shorter than their
        // header are refused when decoded.
        if size < MIN_FRAME_BYTES || size as u32 > self.limits.max_bytes {
            return Err(FrameError::BadSize {
                size: i64::from(size),
                max: self.limits.max_bytes,
            });
        }
        Ok(Some(size as usize))
    }

    /// The frame at the front of the buffer, if it is whole.
    fn take_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        match self.announced()? {
            Some(size) if self.buf.len() >= 4 + size => {
                self.buf.advance(4);
                Ok(Some(self.buf.split_to(size).freeze()))
            }
            _ => Ok(None),
        }
    }

    /// Makes room for the rest of the frame at the front, within [`EAGER_FRAME_BYTES`]
    /// plus what has arrived of it. An empty buffer that grew large for a past frame is
    /// let go, so an idle connection keeps at most [`EAGER_FRAME_BYTES`].
    fn reserve_for_frame(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > EAGER_FRAME_BYTES {
            self.buf = BytesMut::new();
        }
        let missing = match self.announced() {
            Ok(Some(size)) => 4 + size - self.buf.len(),
            _ => 4 - self.buf.len().min(4),
        };
        let allowed = EAGER_FRAME_BYTES.max(self.buf.len());
        self.buf.reserve(missing.min(allowed).max(MIN_READ_BYTES));
    }

    fn truncated(&self, why: &'static str) -> FrameError {
        match self.announced() {
            Ok(Some(size)) => truncated(size, self.buf.len() - 4, why),
            _ => truncated(4, self.buf.len(), why),
        }
    }
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
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

    async fn read(bytes: &mut &[u8]) -> Result<Bytes, FrameError> {
        FrameReader::new(bytes, LIMITS).read_frame().await
    }

    #[tokio::test]
    async fn reads_a_frame_and_refuses_bad_sizes() {
        let mut ok: &[u8] = &[0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(&read(&mut ok).await.unwrap()[..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        assert!(matches!(
            read(&mut huge).await,
            Err(FrameError::BadSize { .. })
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read(&mut negative).await,
            Err(FrameError::BadSize { .. })
        ));
        let mut tiny: &[u8] = &[0, 0, 0, 3, 1, 2, 3];
        assert!(matches!(
            read(&mut tiny).await,
            Err(FrameError::BadSize { size: 3, .. })
        ));
        let mut short: &[u8] = &[0, 0, 0, 100, 1, 2, 3];
        assert!(matches!(
            read(&mut short).await,
            Err(FrameError::Truncated { got: 3, .. })
        ));
        let mut empty: &[u8] = &[];
        assert!(matches!(read(&mut empty).await, Err(FrameError::Closed)));
    }

    #[tokio::test]
    async fn pipelined_frames_come_out_one_by_one() {
        let bytes: &[u8] = &[
            0, 0, 0, 4, 1, 1, 1, 1, 0, 0, 0, 5, 2, 2, 2, 2, 2, 0, 0, 0, 4,
        ];
        let mut reader = FrameReader::new(bytes, LIMITS);
        assert_eq!(&reader.read_frame().await.unwrap()[..], &[1; 4]);
        assert_eq!(&reader.read_frame().await.unwrap()[..], &[2; 5]);
        assert!(matches!(
            reader.read_frame().await,
            Err(FrameError::Truncated {
                size: 4,
                got: 0,
                ..
            })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_announced_frame_reserves_only_what_arrives() {
        let limits = FrameLimits {
            max_bytes: 100 << 20,
            ..LIMITS
        };
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let mut reader = FrameReader::new(server, limits);
        // 64 MiB announced, 100 bytes sent, then silence until the frame timeout.
        let mut head = (64i32 << 20).to_be_bytes().to_vec();
        head.extend_from_slice(&[7; 100]);
        tokio::io::AsyncWriteExt::write_all(&mut client, &head)
            .await
            .unwrap();
        let result = reader.read_frame().await;
        assert!(
            matches!(
                result,
                Err(FrameError::Truncated {
                    got: 100,
                    why: "timeout",
                    ..
                })
            ),
            "{result:?}"
        );
        assert!(reader.buf.capacity() <= 2 * EAGER_FRAME_BYTES);
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_in_pieces_is_put_together_and_idle_is_not_truncated() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut reader = FrameReader::new(server, LIMITS);
        let writer = tokio::spawn(async move {
            for piece in [&[0u8, 0][..], &[0, 6, 9], &[9, 9], &[9, 9, 9]] {
                tokio::io::AsyncWriteExt::write_all(&mut client, piece)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            client
        });
        assert_eq!(&reader.read_frame().await.unwrap()[..], &[9; 6]);
        let _client = writer.await.unwrap();
        assert!(matches!(
            reader.read_frame().await,
            Err(FrameError::Idle(1000))
        ));
    }
}
