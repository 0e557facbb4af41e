//! Maps redb's errors onto the ABI's [`PluginError`] kinds.
//!
//! - I/O errors (the disk is full, gone, read-only...) are `Unavailable`: the host may
//!   retry. After a failed write redb refuses further work with `PreviousIo` until the
//!   database is reopened; that is reported as `Unavailable` too, with a message saying
//!   so (closing and reopening the store, e.g. by swapping back to it, recovers).
//! - A database file locked by another instance or process is `Unavailable`.
//! - Corruption, type mismatches and redb misuse are `Internal`.
//! - A value larger than redb can hold is `InvalidInput`.
//! - At open, mistakes in the configured `path` are `InvalidConfig` (retrying cannot
//!   help; the operator must fix `path`): a parent that is a file (`EEXIST`, `ENOTDIR`),
//!   a path that is a directory (`EISDIR`), permission denied (`EACCES`, `EPERM`), and a
//!   file that is not a redb database.
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

/// Whether an I/O error at open is the operator's `path` being wrong rather than the
/// backend being unavailable.
fn is_config_mistake(io: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        io.kind(),
        K::AlreadyExists | K::NotADirectory | K::IsADirectory | K::PermissionDenied
    )
}

/// What to tell the operator about `path` for a config mistake `io`.
fn config_mistake(what: &str, path: &Path, io: &std::io::Error) -> PluginError {
    use std::io::ErrorKind as K;
    let why = match io.kind() {
        K::AlreadyExists | K::NotADirectory => "a component of the path is a file, not a directory",
        K::IsADirectory => "it is a directory",
        _ => "permission denied",
    };
    let hint = match io.kind() {
        K::PermissionDenied => format!(
            "make it writable by the broker's user, or set `path` in [plugins.config.embedded] \
             to a file in a directory the broker owns (now {})",
            path.display()
        ),
        _ => format!(
            "set `path` in [plugins.config.embedded] to a database file path whose parent \
             directories are directories (now {})",
            path.display()
        ),
    };
    PluginError::invalid_config(format!(
        "offset store `embedded`: {what}: {why} ({io}); hint: {hint}"
    ))
    .with_code(io.raw_os_error().unwrap_or(0))
}

/// The [`PluginError`] for a failure to create `dir`, the parent directory of the
/// database file `path`: a config mistake (see `is_config_mistake`) is
/// `InvalidConfig`, anything else `Unavailable`.
pub fn from_create_dir(dir: &Path, path: &Path, err: std::io::Error) -> PluginError {
    let what = format!("cannot create directory {}", dir.display());
    if is_config_mistake(&err) {
        return config_mistake(&what, path, &err);
    }
    PluginError::unavailable(format!("offset store `embedded`: {what}: {err}"))
        .with_code(err.raw_os_error().unwrap_or(0))
}

/// The [`PluginError`] for a failure to open the database file at `path`: a file that is
/// not a redb database (redb reports a bad magic number as `InvalidData`), a path that is
/// a directory or has a file as parent, and permission denied are `InvalidConfig` —
/// retrying cannot help, the operator must fix `path` — the rest as [`from_redb`].
pub fn from_open(path: &Path, err: redb::DatabaseError) -> PluginError {
    if let redb::DatabaseError::Storage(redb::StorageError::Io(io)) = &err {
        if io.kind() == std::io::ErrorKind::InvalidData {
            return PluginError::invalid_config(format!(
                "offset store `embedded`: {} is not a redb database file (bad header); hint: \
                 set `path` in [plugins.config.embedded] to a new file or an existing offset \
                 store database",
                path.display()
            ));
        }
        if is_config_mistake(io) {
            return config_mistake(
                &format!("cannot open database {}", path.display()),
                path,
                io,
            );
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

    #[test]
    fn path_mistakes_at_open_are_invalid_config_naming_the_key() {
        let path = Path::new("/srv/o.redb");
        for errno in [13, 17, 20, 21] {
            // EACCES, EEXIST, ENOTDIR, EISDIR
            let io = std::io::Error::from_raw_os_error(errno);
            let e = from_open(
                path,
                redb::DatabaseError::Storage(redb::StorageError::Io(io)),
            );
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{errno}: {e}");
            assert_eq!(e.code, errno);
            assert!(e.message.contains("hint: "), "{e}");
            assert!(e.message.contains("`path`"), "{e}");
            let e = from_create_dir(
                Path::new("/srv"),
                path,
                std::io::Error::from_raw_os_error(errno),
            );
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{errno}: {e}");
            assert!(e.message.contains("`path`"), "{e}");
        }
        // A disk that is full or gone is not the operator's path.
        for errno in [5, 28] {
            // EIO, ENOSPC
            let io = std::io::Error::from_raw_os_error(errno);
            let e = from_open(
                path,
                redb::DatabaseError::Storage(redb::StorageError::Io(io)),
            );
            assert_eq!(e.kind, ErrorKind::Unavailable, "{errno}: {e}");
            let e = from_create_dir(
                Path::new("/srv"),
                path,
                std::io::Error::from_raw_os_error(errno),
            );
            assert_eq!(e.kind, ErrorKind::Unavailable, "{errno}: {e}");
        }
    }
}
