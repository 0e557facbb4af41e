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

use std::{
    fs::{self, File},
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use crate::cluster::{Cluster, ClusterError};

/// Ids per block: Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const BLOCK_SIZE: i64 = 1000;

/// The file in the data directory (standalone).
pub const BLOCK_FILE: &str = "producer_id_block";

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
        let source = match cluster {
            Some(c) => Source::Cluster(c),
            None => {
                let path = data_dir.join(BLOCK_FILE);
                read_block_start(&path)?;
                Source::File(path)
            }
        };
        Ok(ProducerIds {
            source,
            block: Mutex::new((0, 0)),
        })
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
