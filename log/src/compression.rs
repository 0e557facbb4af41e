//! Streaming decompression of a compressed record batch's records, with bounded memory.
//!
//! Kafka's v2 batches compress everything after the 61-byte header as one stream in the
//! codec named by attributes bits 0-2 (Kafka protocol guide, "Record Batch"): gzip (1),
//! snappy (2, xerial framing or one raw block, as the Java client and librdkafka write
//! it), lz4 (3, the LZ4 frame format) and zstd (4). [`decoder`] gives a reader of the
//! decompressed bytes; the record walker ([`super::validate`]) and the timestamp search
//! ([`super::records`]) read records from it without holding the whole batch.
//!
//! Memory per decoder: the codec's own window (gzip 32 KiB; lz4 at most 4 MiB per block;
//! zstd at most 2^[`ZSTD_WINDOW_LOG_MAX`] bytes = 128 MiB, larger windows are refused),
//! and for
//! snappy one block, whose decompressed length is checked against the caller's cap before
//! anything is allocated.

use std::io::{self, Read};

/// Largest zstd window accepted, as a power of two: 2^27 = 128 MiB, the limit Kafka's
/// own decoder (zstd-jni) keeps by default. Levels 20–22 and long-distance matching
/// declare windows of 32–128 MiB when the input size is not known up front (as the Java
/// producer compresses), so a smaller limit would refuse honest batches; a frame that
/// declares more is refused instead of allocating it.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The xerial snappy stream header: magic, then version and compatible-version words.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// A reader of the records of a batch compressed with `codec` (0 none … 4 zstd), whose
/// compressed bytes are `data`. `max_block` bounds the one allocation that depends on
/// the data (a snappy block's decompressed length), in bytes.
///
/// Errors: `InvalidInput` for an unknown codec, `InvalidData` for a zstd frame whose
/// window is larger than 2^[`ZSTD_WINDOW_LOG_MAX`]; damage in the stream shows as an
/// error of the returned reader (an unexpected end included).
pub fn decoder<'a>(codec: u8, data: &'a [u8], max_block: usize) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match codec {
        0 => Box::new(data),
        1 => Box::new(Whole::new(
            flate2::bufread::GzDecoder::new(data),
            "one gzip member",
            |d| Ok(d.into_inner()),
        )),
        2 => Box::new(SnappyReader::new(data, max_block)),
        3 => Box::new(Whole::new(lz4::Decoder::new(data)?, "one LZ4 frame", |d| {
            let (rest, finished) = d.finish();
            finished.map_err(|_| invalid_data("lz4: the frame is cut short".into()))?;
            Ok(rest)
        })),
        4 => {
            let mut d = zstd::stream::read::Decoder::with_buffer(data)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(d)
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown compression codec {codec}"),
            ))
        }
    })
}

/// A decoder of one compressed stream that must end where the data ends. The Java
/// client and librdkafka write one gzip member or one LZ4 frame per batch, and
/// consumers fail on anything else: librdkafka reads only the first gzip member (and
/// then refetches the batch forever) and refuses bytes after an LZ4 frame, kafka-python
/// refuses an LZ4 frame without its end mark. The decoders themselves report the end of
/// their input as a clean end and never look past their stream, so at the end `finish`
/// takes the decoder and gives back the input it left, or an error when the stream was
/// cut short; any input left is an error too.
struct Whole<'a, D> {
    decoder: Option<D>,
    finish: fn(D) -> io::Result<&'a [u8]>,
    /// What the data must be, for the error: "one gzip member", "one LZ4 frame".
    stream: &'static str,
}

impl<'a, D: Read> Whole<'a, D> {
    fn new(decoder: D, stream: &'static str, finish: fn(D) -> io::Result<&'a [u8]>) -> Self {
        Whole {
            decoder: Some(decoder),
            finish,
            stream,
        }
    }
}

impl<D: Read> Read for Whole<'_, D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(decoder) = self.decoder.as_mut() else {
            return Ok(0);
        };
        let n = decoder.read(buf)?;
        if n > 0 || buf.is_empty() {
            return Ok(n);
        }
        let Some(decoder) = self.decoder.take() else {
            return Ok(0);
        };
        let rest = (self.finish)(decoder)?;
        if !rest.is_empty() {
            return Err(invalid_data(format!(
                "{} bytes after the end of the stream; a batch is {}",
                rest.len(),
                self.stream
            )));
        }
        Ok(0)
    }
}

fn invalid_data(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Kafka's snappy: xerial framing (header, then blocks each prefixed with its
/// compressed length as a big-endian u32) or, without the magic, one raw block.
/// Decompresses one block at a time.
struct SnappyReader<'a> {
    rest: &'a [u8],
    framed: bool,
    started: bool,
    block: Vec<u8>,
    pos: usize,
    max_block: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(data: &'a [u8], max_block: usize) -> Self {
        SnappyReader {
            rest: data,
            framed: data.starts_with(XERIAL_MAGIC),
            started: false,
            block: Vec::new(),
            pos: 0,
            max_block,
        }
    }

    /// Decompresses the next block into `self.block`; `false` at the end of the stream.
    fn next_block(&mut self) -> io::Result<bool> {
        let invalid = invalid_data;
        let compressed = if !self.framed {
            if self.started {
                return Ok(false);
            }
            std::mem::take(&mut self.rest)
        } else {
            if !self.started {
                self.rest = self
                    .rest
                    .get(XERIAL_HEADER_LEN..)
                    .ok_or_else(|| invalid("snappy: short xerial header".into()))?;
            }
            if self.rest.is_empty() {
                self.started = true;
                return Ok(false);
            }
            let (len, tail) = self
                .rest
                .split_at_checked(4)
                .ok_or_else(|| invalid("snappy: short block length".into()))?;
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let (block, tail) = tail
                .split_at_checked(len)
                .ok_or_else(|| invalid(format!("snappy: block of {len} bytes is cut short")))?;
            self.rest = tail;
            block
        };
        self.started = true;
        let len =
            snap::raw::decompress_len(compressed).map_err(|e| invalid(format!("snappy: {e}")))?;
        if len > self.max_block {
            return Err(invalid(format!(
                "snappy: block decompresses to {len} bytes, more than {}",
                self.max_block
            )));
        }
        self.block.clear();
        self.block.resize(len, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(|e| invalid(format!("snappy: {e}")))?;
        self.pos = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn read_all(codec: u8, data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(codec, data, 1 << 20)?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn xerial(blocks: &[&[u8]]) -> Vec<u8> {
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&1u32.to_be_bytes());
        out.extend_from_slice(&1u32.to_be_bytes());
        for b in blocks {
            let c = snap::raw::Encoder::new().compress_vec(b).unwrap();
            out.extend_from_slice(&(c.len() as u32).to_be_bytes());
            out.extend_from_slice(&c);
        }
        out
    }

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        let lz4 = {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
            e.write_all(&data).unwrap();
            e.finish().0
        };
        let raw_snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let cases: [(u8, Vec<u8>); 6] = [
            (0, data.clone()),
            (1, gzip(&data)),
            (2, raw_snappy),
            (2, xerial(&[&data[..70_000], &data[70_000..]])),
            (3, lz4),
            (4, zstd::encode_all(&data[..], 3).unwrap()),
        ];
        for (codec, compressed) in cases {
            assert_eq!(read_all(codec, &compressed).unwrap(), data, "codec {codec}");
        }
    }

    #[test]
    fn truncated_and_garbage_streams_are_errors() {
        let data = vec![7u8; 10_000];
        let gz = gzip(&data);
        assert!(read_all(1, &gz[..gz.len() / 2]).is_err());
        let zs = zstd::encode_all(&data[..], 3).unwrap();
        assert!(read_all(4, &zs[..zs.len() - 3]).is_err());
        let x = xerial(&[&data]);
        assert!(read_all(2, &x[..x.len() - 1]).is_err());
        let lz = {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
            e.write_all(&data).unwrap();
            e.finish().0
        };
        // Cut before the end mark, or followed by bytes that are not part of it.
        assert!(read_all(3, &lz[..lz.len() - 4]).is_err());
        let mut two = gz.clone();
        two.extend_from_slice(&gz);
        let err = read_all(1, &two).unwrap_err();
        assert!(err.to_string().contains("one gzip member"), "{err}");
        let mut junk = lz.clone();
        junk.extend_from_slice(b"12345678");
        let err = read_all(3, &junk).unwrap_err();
        assert!(err.to_string().contains("after the end"), "{err}");
        assert_eq!(read_all(3, &lz).unwrap(), data);
        for codec in 1..=4 {
            assert!(
                read_all(codec, b"definitely not compressed data").is_err(),
                "{codec}"
            );
        }
        assert!(read_all(5, b"").is_err());
    }

    #[test]
    fn zstd_at_level_22_without_a_known_size_is_read() {
        // As the Java producer writes it: a stream whose size is not known up front, so
        // the frame declares the level's whole window (2^27 at level 22).
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 97) as u8).collect();
        let mut e = zstd::stream::Encoder::new(Vec::new(), 22).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(&data).unwrap();
        let compressed = e.finish().unwrap();
        let mut out = Vec::new();
        decoder(4, &compressed, 1 << 20)
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn a_snappy_block_larger_than_the_cap_is_refused_before_allocating() {
        let data = vec![0u8; 2 << 20];
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let err = read_all(2, &raw).unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
    }
}
