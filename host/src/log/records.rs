//! Looking inside one stored record batch, for ListOffsets by timestamp: Kafka answers
//! with the first *record* whose timestamp is at or after the target
//! (`FileRecords.searchForTimestamp`), which means decoding (and, for compressed
//! batches, decompressing) the batch the time index pointed at.
//!
//! Decompression is bounded: a batch is at most `max_batch_bytes` compressed, but could
//! expand a thousandfold; past [`MAX_DECOMPRESSED_BYTES`] the search gives up and the
//! caller falls back to the batch-level answer. (`anyhow` appears only because
//! kafka-protocol's custom-decompressor hook is typed with it; nothing here exports it.)

use std::io::Read;

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::TimestampOffset;

/// Most bytes one batch may decompress to during a timestamp search: 64 MiB.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";

/// The first record of `batch` (one whole stored batch) whose timestamp is at or after
/// `target_ms`, or `None` when it has none or cannot be decoded within the bounds.
pub fn first_record_at_or_after(batch: Bytes, target_ms: i64) -> Option<TimestampOffset> {
    let mut buf = batch;
    let decompress = |data: &mut Bytes, compression: Compression| -> anyhow::Result<Bytes> {
        decompress_bounded(data, compression, MAX_DECOMPRESSED_BYTES)
    };
    let set =
        RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(decompress)).ok()?;
    set.records
        .iter()
        .find(|r| r.timestamp >= target_ms)
        .map(|r| TimestampOffset {
            offset: r.offset,
            timestamp: r.timestamp,
        })
}

/// Decompresses `data` as `compression`, failing past `limit` bytes.
fn decompress_bounded(
    data: &mut Bytes,
    compression: Compression,
    limit: usize,
) -> anyhow::Result<Bytes> {
    let input = std::mem::take(data);
    let bounded = |reader: &mut dyn Read| -> anyhow::Result<Bytes> {
        let mut out = Vec::new();
        reader.take(limit as u64 + 1).read_to_end(&mut out)?;
        if out.len() > limit {
            return Err(anyhow::Error::msg(
                "batch decompresses beyond the search limit",
            ));
        }
        Ok(Bytes::from(out))
    };
    match compression {
        Compression::None => Ok(input),
        Compression::Gzip => bounded(&mut flate2::read::GzDecoder::new(&input[..])),
        Compression::Zstd => bounded(&mut zstd::stream::read::Decoder::new(&input[..])?),
        Compression::Lz4 => bounded(&mut lz4::Decoder::new(&input[..])?),
        Compression::Snappy => snappy(&input, limit),
    }
}

/// Kafka's snappy: xerial framing (magic, version words, then length-prefixed raw
/// blocks) or, without the magic, one raw snappy block.
fn snappy(input: &[u8], limit: usize) -> anyhow::Result<Bytes> {
    let too_big = || anyhow::Error::msg("batch decompresses beyond the search limit");
    let raw = |block: &[u8], out: &mut Vec<u8>| -> anyhow::Result<()> {
        let len = snap::raw::decompress_len(block)?;
        if out.len() + len > limit {
            return Err(too_big());
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new().decompress(block, &mut out[start..])?;
        Ok(())
    };
    let mut out = Vec::new();
    if !input.starts_with(XERIAL_MAGIC) {
        raw(input, &mut out)?;
        return Ok(Bytes::from(out));
    }
    let mut rest = input
        .get(16..)
        .ok_or_else(|| anyhow::Error::msg("short snappy header"))?;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_at_checked(4)
            .ok_or_else(|| anyhow::Error::msg("short block length"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (block, tail) = tail
            .split_at_checked(len)
            .ok_or_else(|| anyhow::Error::msg("short snappy block"))?;
        raw(block, &mut out)?;
        rest = tail;
    }
    Ok(Bytes::from(out))
}
