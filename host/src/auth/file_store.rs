//! The credential document in the data directory (standalone): `scram_credentials.json`,
//! owner-only (0600: the StoredKeys and ServerKeys are secrets — with a ServerKey one
//! can pose as the broker, with a StoredKey and an overheard exchange as the user),
//! replaced atomically (a temporary file in the same directory, fsync, rename, fsync of
//! the directory), so a crash leaves the old document or the new one.
//!
//! Whoever writes it holds an exclusive `flock` on `scram_credentials.lock` beside it
//! for as long as it may write: the broker for its lifetime, `drover admin users
//! --data-dir` for one change. So the offline tool refuses to edit the document under a
//! running broker, whose copy in memory would otherwise overwrite the edit.

use std::{
    fs::{self, File, OpenOptions},
    io::Write,
    os::unix::{fs::OpenOptionsExt, io::AsRawFd},
    path::{Path, PathBuf},
};

use super::{credentials::CredentialTable, error::StoreError};

/// The document's file name in the data directory.
pub const FILE_NAME: &str = "scram_credentials.json";
/// The writer's lock file name in the data directory.
pub const LOCK_NAME: &str = "scram_credentials.lock";

/// The document in a data directory, with the writer's lock held.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    /// Held (flock) until dropped.
    _lock: File,
}

impl FileStore {
    /// Takes the writer's lock of `data_dir` (creating the directory if needed) and
    /// reads the document; a directory without one gets an empty document with a new
    /// decoy secret, written at once so that the secret is stable. Errors:
    /// [`StoreError::Locked`] when another process holds the lock,
    /// [`StoreError::Damaged`] naming the file when it cannot be read as a document,
    /// [`StoreError::Io`] naming the path.
    pub fn open(data_dir: &Path) -> Result<(FileStore, CredentialTable), StoreError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        fs::create_dir_all(data_dir).map_err(io(data_dir))?;
        let lock_path = data_dir.join(LOCK_NAME);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let source = std::io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::EWOULDBLOCK) => StoreError::Locked { path: lock_path },
                _ => StoreError::Io {
                    path: lock_path,
                    source,
                },
            });
        }
        let store = FileStore {
            path: data_dir.join(FILE_NAME),
            _lock: lock,
        };
        let table = match fs::read(&store.path) {
            Ok(bytes) => CredentialTable::decode(&bytes).map_err(|reason| StoreError::Damaged {
                path: store.path.clone(),
                reason: reason.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let table = CredentialTable::new().map_err(StoreError::Random)?;
                store.write(&table)?;
                table
            }
            Err(source) => {
                return Err(StoreError::Io {
                    path: store.path.clone(),
                    source,
                })
            }
        };
        Ok((store, table))
    }

    /// The document's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the document with `table`, durably (see the module docs). Blocking.
    pub fn write(&self, table: &CredentialTable) -> Result<(), StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".{FILE_NAME}.tmp"));
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        let _ = fs::remove_file(&tmp);
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io(&tmp))?;
        file.write_all(&table.encode()).map_err(io(&tmp))?;
        file.sync_all().map_err(io(&tmp))?;
        drop(file);
        fs::rename(&tmp, &self.path).map_err(io(&self.path))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::auth::{credentials::ScramCredential, mechanism::ScramMechanism};

    #[test]
    fn creates_keeps_and_locks_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let (store, table) = FileStore::open(dir.path()).unwrap();
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A second writer is refused while the first holds the lock.
        assert!(matches!(
            FileStore::open(dir.path()),
            Err(StoreError::Locked { .. })
        ));
        let mut changed = table.clone();
        changed.insert(
            "alice",
            ScramMechanism::Sha256,
            ScramCredential::from_salted_password(ScramMechanism::Sha256, b"s", &[1; 32], 4096),
        );
        store.write(&changed).unwrap();
        drop(store);
        let (_store, reopened) = FileStore::open(dir.path()).unwrap();
        assert_eq!(reopened, changed);
        assert_eq!(reopened.secret(), table.secret());
    }

    #[test]
    fn a_damaged_document_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), b"{\"version\": 1, \"users\"").unwrap();
        let e = FileStore::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains(FILE_NAME), "{e}");
        assert!(e.contains("damaged"), "{e}");
    }
}
