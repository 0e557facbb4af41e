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
    /// Nothing is read until the first id is asked for.
    pub fn new(data_dir: &Path, cluster: Option<Arc<Cluster>>) -> ProducerIds {
        ProducerIds {
            source: match cluster {
                Some(c) => Source::Cluster(c),
                None => Source::File(data_dir.join(BLOCK_FILE)),
            },
            block: Mutex::new((0, 0)),
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
    let start = match fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|&n| n >= 0)
            .ok_or_else(|| ProducerIdError::Corrupt {
                path: path.to_path_buf(),
                found: text.chars().take(40).collect(),
            })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io(e)),
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProducerIds::new(dir.path(), None);
        let a: Vec<i64> = (0..3).map(|_| first.next_id().unwrap()).collect();
        assert_eq!(a, [0, 1, 2]);
        drop(first);
        // A restart (or a crash) skips the rest of the block it was using.
        let second = ProducerIds::new(dir.path(), None);
        assert_eq!(second.next_id().unwrap(), BLOCK_SIZE);
        for _ in 1..BLOCK_SIZE {
            second.next_id().unwrap();
        }
        assert_eq!(second.next_id().unwrap(), 2 * BLOCK_SIZE);
        let text = fs::read_to_string(dir.path().join(BLOCK_FILE)).unwrap();
        assert_eq!(text.trim(), (3 * BLOCK_SIZE).to_string());
    }

    #[test]
    fn a_corrupt_block_file_is_refused_not_reset() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(BLOCK_FILE), "garbage").unwrap();
        let ids = ProducerIds::new(dir.path(), None);
        assert!(matches!(
            ids.next_id(),
            Err(ProducerIdError::Corrupt { .. })
        ));
    }
}
