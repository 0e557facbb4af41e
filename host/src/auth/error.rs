//! The credential store's errors ([`super::store`], [`super::file_store`],
//! [`super::zk_store`]).

use std::path::PathBuf;

/// Errors of the credential store. Messages name files and nodes, never key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("SCRAM credentials: {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The document cannot be read: damaged or from an unknown format.
    #[error(
        "SCRAM credentials: {path} is damaged: {reason}; restore it from a backup, or \
         move it away to start with no credentials"
    )]
    Damaged {
        /// The file, or the ZooKeeper node's path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Another process holds the data directory's credential lock (a running broker).
    #[error(
        "SCRAM credentials: {path} is locked by another process (a broker running on this \
         data directory?); change credentials through the broker instead"
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The operating system's random source failed.
    #[error("SCRAM credentials: no random bytes: {0}")]
    Random(getrandom::Error),
    /// ZooKeeper cannot be reached now (cluster mode); retriable.
    #[error("SCRAM credentials: ZooKeeper is not available: {0}")]
    Unavailable(String),
    /// A ZooKeeper error (cluster mode).
    #[error("SCRAM credentials: ZooKeeper: {0}")]
    Zk(String),
}
