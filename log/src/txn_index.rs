//! The aborted-transactions index of a segment: `<base offset, 20 digits>.txnindex`,
//! Kafka's `TransactionIndex`. One entry per transaction aborted by a marker in the
//! segment, in the order of the markers, in Kafka's layout (`AbortedTxn`, 34 bytes,
//! big-endian):
//!
//! ```text
//! version             int16  0
//! producer_id         int64
//! first_offset        int64  the transaction's first offset in this partition
//! last_offset         int64  the offset of its abort marker
//! last_stable_offset  int64  the partition's last stable offset once it was aborted
//! ```
//!
//! A read_committed Fetch returns the entries that overlap the range it read, so the
//! consumer can drop the aborted records. The file is appended to (and fsynced) when an
//! abort marker is written, deleted with its segment, and rebuilt by the partition's
//! recovery from the markers in the log when it is missing or cut short.

use std::{
    fs::{self, File, OpenOptions},
    io::{Read, Write},
    path::{Path, PathBuf},
};

/// File extension of the index.
pub const EXTENSION: &str = "txnindex";

/// Bytes of one entry.
pub const ENTRY_LEN: usize = 2 + 8 * 4;

/// The only entry version.
const VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer id.
    pub producer_id: i64,
    /// Offset of the transaction's first record in the partition.
    pub first_offset: i64,
    /// Offset of its abort marker.
    pub last_offset: i64,
    /// The partition's last stable offset right after the abort.
    pub last_stable_offset: i64,
}

/// Why an index file's contents were not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TxnIndexError {
    /// An entry has a version other than 0.
    #[error("entry {entry} has version {version}, not 0")]
    Version {
        /// The entry's position in the file.
        entry: usize,
        /// The version read.
        version: i16,
    },
    /// An entry's offsets are out of order (first > last, or negative).
    #[error("entry {entry} has offsets {first}..={last}")]
    Offsets {
        /// The entry's position.
        entry: usize,
        /// Its first offset.
        first: i64,
        /// Its last offset.
        last: i64,
    },
    /// The file holds more entries than the cap.
    #[error("{count} entries, more than {max}")]
    TooMany {
        /// Entries present.
        count: usize,
        /// The cap.
        max: usize,
    },
}

impl AbortedTxn {
    /// The 34-byte entry.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut out = [0; ENTRY_LEN];
        out[..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }
}

/// Decodes an index of at most `max_entries` whole entries. A trailing partial entry (a
/// crash in the middle of an append) is ignored; `.1` says whether there was one.
///
/// Errors: [`TxnIndexError`] for a bad version, impossible offsets or too many entries.
pub fn decode(bytes: &[u8], max_entries: usize) -> Result<(Vec<AbortedTxn>, bool), TxnIndexError> {
    let count = bytes.len() / ENTRY_LEN;
    if count > max_entries {
        return Err(TxnIndexError::TooMany {
            count,
            max: max_entries,
        });
    }
    let mut out = Vec::with_capacity(count);
    for (entry, e) in bytes.chunks_exact(ENTRY_LEN).enumerate() {
        let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().unwrap_or_default());
        let version = i16::from_be_bytes([e[0], e[1]]);
        if version != VERSION {
            return Err(TxnIndexError::Version { entry, version });
        }
        let txn = AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        };
        if txn.first_offset < 0 || txn.first_offset > txn.last_offset {
            return Err(TxnIndexError::Offsets {
                entry,
                first: txn.first_offset,
                last: txn.last_offset,
            });
        }
        out.push(txn);
    }
    Ok((out, bytes.len() % ENTRY_LEN != 0))
}

/// The index path of the segment with base offset `base` in `dir`.
pub fn path(dir: &Path, base: i64) -> PathBuf {
    dir.join(super::segment::file_name(base, EXTENSION))
}

/// Reads the index at `path`: `None` when there is none. At most `max_entries` entries
/// are read (the rest of a larger file is not).
///
/// Errors: I/O, as text; a decoding error, as text.
pub fn read(path: &Path, max_entries: usize) -> Result<Option<(Vec<AbortedTxn>, bool)>, String> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let limit = (max_entries as u64 + 1) * ENTRY_LEN as u64;
    let mut bytes = Vec::new();
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    decode(&bytes, max_entries)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Appends `txn` to the index at `path` (created if missing) and fsyncs it.
pub fn append(path: &Path, txn: &AbortedTxn) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(&txn.encode())?;
    file.sync_data()
}

/// Replaces the index at `path` with `entries` (temporary file, fsync, rename); an empty
/// list removes the file. The caller fsyncs the directory.
pub fn rewrite(path: &Path, entries: &[AbortedTxn]) -> std::io::Result<()> {
    if entries.is_empty() {
        return match fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let tmp = path.with_extension("txnindex.tmp");
    let mut file = File::create(&tmp)?;
    for e in entries {
        file.write_all(&e.encode())?;
    }
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn txn() -> impl Strategy<Value = AbortedTxn> {
        (any::<i64>(), 0..i64::MAX / 2, 0..i64::MAX / 2, any::<i64>()).prop_map(
            |(producer_id, first, len, last_stable_offset)| AbortedTxn {
                producer_id,
                first_offset: first,
                last_offset: first + len,
                last_stable_offset,
            },
        )
    }

    proptest! {
        #[test]
        fn entries_round_trip(entries in proptest::collection::vec(txn(), 0..50)) {
            let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
            prop_assert_eq!(decode(&bytes, 50), Ok((entries.clone(), false)));
        }

        #[test]
        fn a_cut_file_keeps_its_whole_entries(
            entries in proptest::collection::vec(txn(), 1..20),
            cut in 1..ENTRY_LEN,
        ) {
            let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
            let (kept, partial) = decode(&bytes[..bytes.len() - cut], 50).unwrap();
            prop_assert!(partial);
            prop_assert_eq!(&kept[..], &entries[..entries.len() - 1]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok((entries, _)) = decode(&bytes, 5) {
                prop_assert!(entries.len() <= 5);
                prop_assert!(entries.iter().all(|e| 0 <= e.first_offset && e.first_offset <= e.last_offset));
            }
        }
    }

    #[test]
    fn the_file_is_appended_to_rewritten_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), 100);
        assert_eq!(read(&p, 10), Ok(None));
        let a = AbortedTxn {
            producer_id: 1,
            first_offset: 100,
            last_offset: 105,
            last_stable_offset: 106,
        };
        append(&p, &a).unwrap();
        append(&p, &a).unwrap();
        assert_eq!(read(&p, 10), Ok(Some((vec![a, a], false))));
        assert!(read(&p, 1).is_err());
        rewrite(&p, &[a]).unwrap();
        assert_eq!(read(&p, 10), Ok(Some((vec![a], false))));
        rewrite(&p, &[]).unwrap();
        assert!(!p.exists());
    }
}
