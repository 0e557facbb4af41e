//! Maps redb's errors onto the ABI's [`PluginError`] kinds.
//!
//! - I/O errors (the disk is full, gone, read-only...) are `Unavailable`: the host may
//!   retry. After a failed write redb refuses further work with `PreviousIo` until the
//!   database is reopened; that is reported as `Unavailable` too, with a message saying
//!   so (closing and reopening the store, e.g. by swapping back to it, recovers).
//! - A database file locked by another instance or process is `Unavailable`.
//! - Corruption, type mismatches and redb misuse are `Internal`.
//! - A value larger than redb can hold is `InvalidInput`.
//!
//! The backend's OS error number, when there is one, goes into [`PluginError::code`].

use std::path::Path;

use drover_abi::{ErrorKind, PluginError};

/// The [`PluginError`] for redb error `err` that happened while doing `context`
/// (for example "commit", "fetch offsets of group `g`").
pub fn from_redb(context: &str, err: impl Into<redb::Error>) -> PluginError {
    let err: redb::Error = err.into();
    let (kind, code) = match &err {
        redb::Error::Io(io) => (ErrorKind::Unavailable, io.raw_os_error().unwrap_or(0)),
        redb::Error::PreviousIo => {
            return PluginError::unavailable(format!(
                "offset store `embedded`: {context}: an earlier I/O error left the database \
                 unusable until it is reopened ({err})"
            ))
        }
        redb::Error::DatabaseAlreadyOpen => (ErrorKind::Unavailable, 0),
        redb::Error::ValueTooLarge(_) => (ErrorKind::InvalidInput, 0),
        _ => (ErrorKind::Internal, 0),
    };
    PluginError::new(kind, format!("offset store `embedded`: {context}: {err}")).with_code(code)
}

/// The [`PluginError`] for a failure to open the database file at `path`: a file that is
/// not a redb database (redb reports a bad magic number as `InvalidData`) is
/// `InvalidConfig` — retrying cannot help, the operator must fix `path` — the rest as
/// [`from_redb`].
pub fn from_open(path: &Path, err: redb::DatabaseError) -> PluginError {
    if let redb::DatabaseError::Storage(redb::StorageError::Io(io)) = &err {
        if io.kind() == std::io::ErrorKind::InvalidData {
            return PluginError::invalid_config(format!(
                "offset store `embedded`: {} is not a redb database file (bad header)",
                path.display()
            ));
        }
    }
    from_redb(&format!("cannot open database {}", path.display()), err)
}

/// The error every call returns after [`crate::store::Store::close`].
pub fn closed() -> PluginError {
    PluginError::new(ErrorKind::Closed, "offset store `embedded` is closed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let io = std::io::Error::from_raw_os_error(28); // ENOSPC
        let e = from_redb("commit", redb::StorageError::Io(io));
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert_eq!(e.code, 28);
        assert!(e.message.contains("commit"), "{e}");

        let e = from_redb("x", redb::StorageError::PreviousIo);
        assert_eq!(e.kind, ErrorKind::Unavailable);

        let e = from_redb("x", redb::StorageError::Corrupted("bad page".into()));
        assert_eq!(e.kind, ErrorKind::Internal);
        assert!(e.message.contains("bad page"), "{e}");

        let e = from_redb("x", redb::DatabaseError::DatabaseAlreadyOpen);
        assert_eq!(e.kind, ErrorKind::Unavailable);

        let e = from_redb("x", redb::StorageError::ValueTooLarge(1 << 33));
        assert_eq!(e.kind, ErrorKind::InvalidInput);
    }
}
