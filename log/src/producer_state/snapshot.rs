//! Producer state snapshots: `<partition dir>/<offset, 20 digits>.snapshot`, as Kafka's
//! `.snapshot` files, written at a segment roll (offset = the new segment's base offset)
//! and at a clean shutdown (offset = the log end offset). The state at offset `o` is
//! that of every batch below `o`; a partition loads its newest readable snapshot and
//! replays the batch headers from its offset on.
//!
//! Format (all integers big-endian; Drover's own, not Kafka's):
//!
//! ```text
//! magic          4 bytes  "DRPS"
//! version        int16    3 (versions 1, written before transactions, and 2, before
//!                         `txn_epoch`, still load)
//! crc            uint32   CRC-32C of every byte after this field
//! offset         int64    the log end offset the state is as of
//! count          int32    producers, 0 ..= the decoder's cap
//! count × producer:
//!   producer_id    int64
//!   epoch          int16
//!   last_write_ms  int64
//!   txn_first      int64  first offset of its ongoing transaction, −1 for none
//!                         (versions 2 and 3)
//!   txn_epoch      int16  epoch of the batch that opened it (version 3 only; a
//!                         version 2 file's ongoing transaction takes `epoch`)
//!   batches        int8   1 ..= 5, oldest first (0 ..= 5 from version 2: a marker
//!                         that bumped the epoch leaves none)
//!   batches × (first_seq int32, last_seq int32, first_offset int64, last_offset int64)
//! ```
//!
//! [`decode`] checks everything before it allocates by a count: the CRC, the count
//! against its cap and the bytes present, each batch count, and that nothing follows.

use std::{
    collections::{HashMap, VecDeque},
    fs::{self, File},
    io::Write,
    path::{Path, PathBuf},
};

use super::{BatchMeta, ProducerEntry, BATCHES_RETAINED};

/// File extension of snapshots.
pub const EXTENSION: &str = "snapshot";
const MAGIC: &[u8; 4] = b"DRPS";
const VERSION: i16 = 3;
/// The version before transactions: no `txn_first` field.
const VERSION_1: i16 = 1;
/// The version before `txn_epoch`.
const VERSION_2: i16 = 2;
const HEADER_LEN: usize = 4 + 2 + 4 + 8 + 4;
/// Bytes of one producer without its batches (version 1; version 2 adds 8, version 3
/// 10), and of one batch.
const PRODUCER_LEN: usize = 8 + 2 + 8 + 1;
const BATCH_LEN: usize = 4 + 4 + 8 + 8;

/// Why a snapshot was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The file does not start with the magic and version 1, 2 or 3.
    #[error("not a producer state snapshot (magic or version)")]
    BadHeader,
    /// The CRC does not match the contents.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// The stored CRC.
        stored: u32,
        /// The CRC of the contents.
        computed: u32,
    },
    /// The file is shorter than its counts say, or longer.
    #[error("length {len} does not match its contents ({reason})")]
    Length {
        /// The file's length in bytes.
        len: usize,
        /// Where it went wrong.
        reason: &'static str,
    },
    /// A count is out of its range.
    #[error("{what} count {count} is outside 0..={max}")]
    Count {
        /// Which count.
        what: &'static str,
        /// The count read.
        count: i64,
        /// Its cap.
        max: usize,
    },
}

/// A decoded snapshot: the offset it is as of and the producers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The log end offset the state is as of.
    pub offset: i64,
    /// The producers by id.
    pub producers: HashMap<i64, ProducerEntry>,
}

/// Encodes the state as of `offset`.
pub fn encode<'a>(
    offset: i64,
    producers: impl ExactSizeIterator<Item = (&'a i64, &'a ProducerEntry)>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + producers.len() * 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(producers.len() as i32).to_be_bytes());
    for (id, entry) in producers {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&entry.epoch.to_be_bytes());
        out.extend_from_slice(&entry.last_write_ms.to_be_bytes());
        out.extend_from_slice(&entry.txn_first_offset.unwrap_or(-1).to_be_bytes());
        out.extend_from_slice(&entry.txn_epoch.to_be_bytes());
        out.push(entry.batches.len() as u8);
        for b in &entry.batches {
            out.extend_from_slice(&b.first_seq.to_be_bytes());
            out.extend_from_slice(&b.last_seq.to_be_bytes());
            out.extend_from_slice(&b.first_offset.to_be_bytes());
            out.extend_from_slice(&b.last_offset.to_be_bytes());
        }
    }
    let crc = crc32c::crc32c(&out[10..]);
    out[6..10].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A cursor over the snapshot bytes; the caller has checked the lengths.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let out = self.buf[self.pos..self.pos + N]
            .try_into()
            .unwrap_or([0; N]);
        self.pos += N;
        out
    }
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// Decodes a snapshot of at most `max_producers` producers.
///
/// Errors: [`SnapshotError`] for anything but a well-formed snapshot within the caps.
pub fn decode(bytes: &[u8], max_producers: usize) -> Result<Snapshot, SnapshotError> {
    let len = bytes.len();
    if len < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(SnapshotError::BadHeader);
    }
    let version = i16::from_be_bytes([bytes[4], bytes[5]]);
    if !(VERSION_1..=VERSION).contains(&version) {
        return Err(SnapshotError::BadHeader);
    }
    let producer_len = PRODUCER_LEN
        + match version {
            VERSION_1 => 0,
            VERSION_2 => 8,
            _ => 10,
        };
    let min_batches = usize::from(version == VERSION_1);
    let stored = u32::from_be_bytes(bytes[6..10].try_into().unwrap_or_default());
    let computed = crc32c::crc32c(&bytes[10..]);
    if stored != computed {
        return Err(SnapshotError::Crc { stored, computed });
    }
    let mut r = Reader {
        buf: bytes,
        pos: 10,
    };
    let offset = i64::from_be_bytes(r.take());
    let count = i32::from_be_bytes(r.take());
    let count = usize::try_from(count)
        .ok()
        .filter(|&c| c <= max_producers)
        .ok_or(SnapshotError::Count {
            what: "producer",
            count: i64::from(count),
            max: max_producers,
        })?;
    if count > r.left() / (producer_len + min_batches * BATCH_LEN) {
        return Err(SnapshotError::Length {
            len,
            reason: "fewer bytes than the producer count needs",
        });
    }
    let mut producers = HashMap::with_capacity(count);
    for _ in 0..count {
        if r.left() < producer_len {
            return Err(SnapshotError::Length {
                len,
                reason: "a producer is cut short",
            });
        }
        let id = i64::from_be_bytes(r.take());
        let epoch = i16::from_be_bytes(r.take());
        let last_write_ms = i64::from_be_bytes(r.take());
        let txn_first_offset = if version >= VERSION_2 {
            Some(i64::from_be_bytes(r.take())).filter(|&o| o >= 0)
        } else {
            None
        };
        let txn_epoch = if version >= VERSION {
            i16::from_be_bytes(r.take())
        } else {
            epoch
        };
        let [n] = r.take::<1>();
        let n = usize::from(n);
        if !(min_batches..=BATCHES_RETAINED).contains(&n) {
            return Err(SnapshotError::Count {
                what: "batch",
                count: n as i64,
                max: BATCHES_RETAINED,
            });
        }
        if r.left() < n * BATCH_LEN {
            return Err(SnapshotError::Length {
                len,
                reason: "a batch is cut short",
            });
        }
        let mut batches = VecDeque::with_capacity(n);
        for _ in 0..n {
            batches.push_back(BatchMeta {
                first_seq: i32::from_be_bytes(r.take()),
                last_seq: i32::from_be_bytes(r.take()),
                first_offset: i64::from_be_bytes(r.take()),
                last_offset: i64::from_be_bytes(r.take()),
            });
        }
        producers.insert(
            id,
            ProducerEntry {
                epoch,
                batches,
                last_write_ms,
                txn_first_offset,
                txn_epoch,
            },
        );
    }
    if r.left() != 0 {
        return Err(SnapshotError::Length {
            len,
            reason: "bytes after the last producer",
        });
    }
    Ok(Snapshot { offset, producers })
}

/// The path of the snapshot as of `offset` in `dir`.
pub fn path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}.{EXTENSION}"))
}

/// The snapshots in `dir` by offset, oldest first.
pub fn list(dir: &Path) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some((stem, ext)) = name.to_str().and_then(|n| n.split_once('.')) else {
            continue;
        };
        if ext != EXTENSION || stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(offset) = stem.parse::<i64>() {
            out.push((offset, entry.path()));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Deletes the temporary files a crash during [`write()`] left in `dir`.
pub fn remove_temporaries(dir: &Path) -> std::io::Result<()> {
    let suffix = format!(".{EXTENSION}.tmp");
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.ends_with(&suffix))
        {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Writes `bytes` as the snapshot as of `offset` in `dir`: to a temporary file, fsynced,
/// renamed into place; the caller fsyncs the directory.
pub fn write(dir: &Path, offset: i64, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let target = path(dir, offset);
    let tmp = dir.join(format!("{offset:020}.{EXTENSION}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &target)?;
    Ok(target)
}
