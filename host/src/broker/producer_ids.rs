//! Producer ids for InitProducerId (KIP-98): handed out from blocks of
//! [`BLOCK_SIZE`] ids, each block made durable before its first id is used, so an id
//! is never handed out twice — not after a restart or a `kill -9`, and in cluster mode
//! not by two brokers.
//!
//! - Standalone: `<data_dir>/producer_id_block` holds, as decimal text, the first id no
//!   block has covered yet. Taking a block writes the next value (temporary file,
//!   fsync, rename, directory fsync) before any id of the block is used. A restart
//!   starts at the next block, leaving the unused rest of the last one unused.
//! - Cluster mode: blocks come from ZooKeeper ([`crate::cluster::Cluster::allocate_producer_id_block`]).
//!
//! Because ids are handed out in order from durable blocks, the broker can tell an id
//! that may have been handed out from one made up by a client
//! ([`ProducerIds::issued`]): the Produce handler refuses a made-up id with
//! `UNKNOWN_PRODUCER_ID` before it reaches any partition's producer state, so a flood
//! of invented ids costs nothing there. Standalone the bound is exact (the next id to
//! hand out; after a restart, the start of the next block). In cluster mode it is the
//! end of the newest block in ZooKeeper, read again when an id above the last reading
//! arrives (at most [`CLUSTER_REREAD_MS`] apart; an id above a reading that could not
//! be renewed yet is [`Issued::Unsure`], which the handler answers with a retriable
//! error).

use std::{
    fs::{self, File},
    io::Write,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc, Mutex,
    },
    time::Instant,
};

use crate::cluster::{Cluster, ClusterError};

/// Ids per block: Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const BLOCK_SIZE: i64 = 1000;

/// The file in the data directory (standalone).
pub const BLOCK_FILE: &str = "producer_id_block";

/// Cluster mode: the least time between two readings of the newest block in ZooKeeper
/// made for [`ProducerIds::issued`], in ms, so that a flood of made-up ids cannot turn
/// into a flood of ZooKeeper reads.
pub const CLUSTER_REREAD_MS: u64 = 100;

/// Whether a producer id may have been handed out ([`ProducerIds::issued`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issued {
    /// It is below every id not handed out yet.
    Yes,
    /// No broker has handed it out: a client made it up.
    No,
    /// Cluster mode: above the last reading of ZooKeeper, which could not be renewed
    /// now (read too recently, or ZooKeeper unreachable); the client retries.
    Unsure,
}

/// Why no producer id could be handed out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerIdError {
    /// The block file could not be read or written (standalone).
    #[error("producer id block file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The block file does not hold a non-negative decimal number.
    #[error("producer id block file {path} holds `{found}`, not a producer id")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What it holds (at most 40 characters).
        found: String,
    },
    /// Every id up to `i64::MAX` was handed out.
    #[error("producer ids exhausted")]
    Exhausted,
    /// ZooKeeper refused or is unreachable (cluster mode).
    #[error("allocating a producer id block: {0}")]
    Cluster(#[from] ClusterError),
}

enum Source {
    File(PathBuf),
    Cluster(Arc<Cluster>),
}

/// The broker's producer id allocator.
pub struct ProducerIds {
    source: Source,
    /// The current block: next id to hand out, and the id after the block's last.
    block: Mutex<(i64, i64)>,
    /// Every id below this may have been handed out (standalone: exact; cluster mode:
    /// the end of the newest block last read or taken).
    issued_below: AtomicI64,
    /// Cluster mode: when ZooKeeper was last read for [`Self::issued`].
    last_read: Mutex<Option<Instant>>,
}

impl ProducerIds {
    /// Ids from the block file in `data_dir`, or from ZooKeeper when `cluster` is set.
    /// Standalone, the block file is read now: a broker whose file is damaged (empty,
    /// not a number, unreadable) must not start and report itself ready while every
    /// InitProducerId would fail, and must not reset the file either (ids handed out
    /// before could be handed out again). A missing file is a first start.
    ///
    /// Errors: [`ProducerIdError::Corrupt`] or [`ProducerIdError::Io`], naming the file.
    pub fn open(
        data_dir: &Path,
        cluster: Option<Arc<Cluster>>,
    ) -> Result<ProducerIds, ProducerIdError> {
        let (source, issued_below) = match cluster {
            Some(c) => (Source::Cluster(c), 0),
            None => {
                let path = data_dir.join(BLOCK_FILE);
                let start = read_block_start(&path)?;
                (Source::File(path), start)
            }
        };
        Ok(ProducerIds {
            source,
            block: Mutex::new((0, 0)),
            issued_below: AtomicI64::new(issued_below),
            last_read: Mutex::new(None),
        })
    }

    /// Whether `id` is known, without reading anything, to be an id that may have been
    /// handed out ([`Self::issued`]'s fast path).
    pub fn known_issued(&self, id: i64) -> bool {
        id < self.issued_below.load(Ordering::Acquire)
    }

    /// Whether `id` may have been handed out by InitProducerId, here or (cluster mode)
    /// by any broker. May read ZooKeeper (blocking) in cluster mode when `id` is above
    /// the last reading: call from a blocking thread or through `block_in_place`.
    pub fn issued(&self, id: i64) -> Issued {
        if self.known_issued(id) {
            return Issued::Yes;
        }
        let Source::Cluster(cluster) = &self.source else {
            return Issued::No;
        };
        {
            let mut last = self.last_read.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if last
                .is_some_and(|t| now.duration_since(t).as_millis() < u128::from(CLUSTER_REREAD_MS))
            {
                return Issued::Unsure;
            }
            *last = Some(now);
        }
        match cluster.producer_ids_handed_out_below() {
            Ok(end) => {
                self.issued_below.fetch_max(end, Ordering::AcqRel);
                if id < end {
                    Issued::Yes
                } else {
                    Issued::No
                }
            }
            Err(_) => Issued::Unsure,
        }
    }

    /// A producer id never handed out before. Blocking (a new block writes a file or
    /// ZooKeeper once per [`BLOCK_SIZE`] ids): call from a blocking thread.
    ///
    /// Errors: [`ProducerIdError`].
    pub fn next_id(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.block.lock().unwrap_or_else(|e| e.into_inner());
        if block.0 >= block.1 {
            *block = match &self.source {
                Source::File(path) => take_file_block(path)?,
                Source::Cluster(c) => c.allocate_producer_id_block(BLOCK_SIZE)?,
            };
        }
        let id = block.0;
        block.0 += 1;
        // Standalone the bound is the next id; in cluster mode the block's end (other
        // brokers' ids are only known by block too).
        let bound = match self.source {
            Source::File(_) => block.0,
            Source::Cluster(_) => block.1,
        };
        self.issued_below.fetch_max(bound, Ordering::AcqRel);
        Ok(id)
    }
}

/// Takes the next block from the file at `path`: reads the first uncovered id (0 when
/// the file does not exist), durably writes the id after the block, returns the block.
fn take_file_block(path: &Path) -> Result<(i64, i64), ProducerIdError> {
    let io = |source| ProducerIdError::Io {
        path: path.to_path_buf(),
        source,
    };
    let start = read_block_start(path)?;
    let end = start
        .checked_add(BLOCK_SIZE)
        .ok_or(ProducerIdError::Exhausted)?;
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).map_err(io)?;
    file.write_all(format!("{end}\n").as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    }
    Ok((start, end))
}

/// The first id no block has covered yet, from the file at `path` (0 when it does not
/// exist). The file is a few bytes; at most 64 are read.
fn read_block_start(path: &Path) -> Result<i64, ProducerIdError> {
    let io = |source| ProducerIdError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = match File::open(path) {
        Ok(file) => {
            let mut bytes = Vec::with_capacity(64);
            std::io::Read::read_to_end(&mut std::io::Read::take(file, 64), &mut bytes)
                .map_err(io)?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(e)),
    };
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|&n| n >= 0)
        .ok_or_else(|| ProducerIdError::Corrupt {
            path: path.to_path_buf(),
            found: text.chars().take(40).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProducerIds::open(dir.path(), None).unwrap();
        let a: Vec<i64> = (0..3).map(|_| first.next_id().unwrap()).collect();
        assert_eq!(a, [0, 1, 2]);
        drop(first);
        // A restart (or a crash) skips the rest of the block it was using.
        let second = ProducerIds::open(dir.path(), None).unwrap();
        assert_eq!(second.next_id().unwrap(), BLOCK_SIZE);
        for _ in 1..BLOCK_SIZE {
            second.next_id().unwrap();
        }
        assert_eq!(second.next_id().unwrap(), 2 * BLOCK_SIZE);
        let text = fs::read_to_string(dir.path().join(BLOCK_FILE)).unwrap();
        assert_eq!(text.trim(), (3 * BLOCK_SIZE).to_string());
    }

    #[test]
    fn only_ids_handed_out_count_as_issued_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProducerIds::open(dir.path(), None).unwrap();
        assert_eq!(first.issued(0), Issued::No);
        let a = first.next_id().unwrap();
        assert_eq!(
            (first.issued(a), first.issued(a + 1)),
            (Issued::Yes, Issued::No)
        );
        assert_eq!(first.issued(BLOCK_SIZE - 1), Issued::No);
        drop(first);
        // After a restart every id of the old block may have been handed out; the new
        // block's ids only once they are.
        let second = ProducerIds::open(dir.path(), None).unwrap();
        assert_eq!(second.issued(BLOCK_SIZE - 1), Issued::Yes);
        assert_eq!(second.issued(BLOCK_SIZE), Issued::No);
        assert_eq!(second.next_id().unwrap(), BLOCK_SIZE);
        assert_eq!(second.issued(BLOCK_SIZE), Issued::Yes);
        assert_eq!(second.issued(i64::MAX), Issued::No);
    }

    #[test]
    fn a_corrupt_or_empty_block_file_is_refused_at_open_not_reset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(BLOCK_FILE);
        for contents in ["garbage", "", "-5\n", "99999999999999999999999"] {
            fs::write(&path, contents).unwrap();
            let e = ProducerIds::open(dir.path(), None).err().unwrap();
            assert!(
                matches!(e, ProducerIdError::Corrupt { .. }),
                "{contents:?}: {e}"
            );
            assert!(e.to_string().contains(&path.display().to_string()));
            assert_eq!(fs::read_to_string(&path).unwrap(), contents);
        }
    }
}
