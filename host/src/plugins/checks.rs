//! Checks made on a plugin file before it is loaded, in the spirit of ssh's StrictModes:
//! a file that someone else could have replaced is never `dlopen`ed.

use std::{
    collections::HashSet,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use super::error::LoadError;

const GROUP_OTHER_WRITE: u32 = 0o022;
const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// A plugin file that passed every check, with the bytes that were checked.
pub struct CheckedFile {
    /// The file as found in the plugin directory.
    pub path: PathBuf,
    /// Its contents.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`, lowercase hex.
    pub sha256: String,
}

/// The broker's effective uid.
pub fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Refuses `dir` if it is writable by group or others (a sticky bit does not help: the
/// owner of a planted file could still change it).
pub fn check_dir(path: &Path, dir: &Path) -> Result<(), LoadError> {
    let meta = std::fs::metadata(dir).map_err(|source| LoadError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mode = meta.mode() & 0o7777;
    if mode & GROUP_OTHER_WRITE != 0 {
        return Err(LoadError::InsecureDir {
            path: path.to_owned(),
            dir: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Reads and checks one plugin file: owner, permissions, ELF magic and the optional
/// SHA-256 allowlist (empty set: no allowlist). The directory is checked separately.
pub fn check_file(path: &Path, allowlist: &HashSet<String>) -> Result<CheckedFile, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    let mode = meta.mode() & 0o7777;
    if mode & GROUP_OTHER_WRITE != 0 {
        return Err(LoadError::InsecureFile {
            path: path.to_owned(),
            mode,
        });
    }
    let uid = current_uid();
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(LoadError::WrongOwner {
            path: path.to_owned(),
            expected: uid,
            found: meta.uid(),
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let sha256 = hex::encode(Sha256::digest(&bytes));
    if !allowlist.is_empty() && !allowlist.contains(&sha256) {
        return Err(LoadError::NotAllowlisted {
            path: path.to_owned(),
            found: sha256,
        });
    }
    if !bytes.starts_with(ELF_MAGIC) {
        return Err(LoadError::NotALibrary {
            path: path.to_owned(),
            found: describe(&bytes),
        });
    }
    Ok(CheckedFile {
        path: path.to_owned(),
        bytes,
        sha256,
    })
}

/// A short description of what a non-ELF file starts with.
fn describe(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "an empty file".to_owned();
    }
    let head: String = bytes
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!("{} bytes starting with {head}", bytes.len())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn refuses_world_writable_and_garbage_and_unlisted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("libx.so");
        std::fs::write(&p, b"garbage").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        assert!(
            matches!(e, LoadError::InsecureFile { mode: 0o666, .. }),
            "{e}"
        );

        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        assert!(
            e.to_string().contains("expected an ELF shared object"),
            "{e}"
        );

        let allow = HashSet::from(["0".repeat(64)]);
        let e = check_file(&p, &allow).err().unwrap();
        assert!(matches!(e, LoadError::NotAllowlisted { .. }), "{e}");

        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_dir(&p, dir.path()).err().unwrap();
        assert!(matches!(e, LoadError::InsecureDir { .. }), "{e}");
    }
}
