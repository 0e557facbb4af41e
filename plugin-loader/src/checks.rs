//! Checks made on a plugin file before it is loaded, in the spirit of ssh's StrictModes:
//! a file that someone other than the broker's user or root could have replaced is never
//! `dlopen`ed.
//!
//! The file is resolved with `canonicalize` (following symlinks); then the real file and
//! **every directory above it, up to `/`**, must be owned by root or the broker's
//! effective uid and not be writable by group or others. The one exception is a
//! root-owned directory with the sticky bit (like `/tmp`, mode 1777): there only an
//! entry's owner can rename or delete it, so it cannot be swapped underneath us. The
//! directory that holds the name (the plugin directory, which may differ from the real
//! file's directory when the name is a symlink) and its ancestors must pass the same
//! rule, so nobody else can plant names in it. The plugin cache's ancestors are held to
//! the same rule (see `loader`).
//!
//! Then the file is opened (not following symlinks), refused if larger than
//! [`MAX_PLUGIN_BYTES`], its first four bytes must be the ELF magic, and only then is the
//! rest read and hashed (and matched against the optional allowlist).

use std::{
    collections::HashSet,
    fs::Metadata,
    io::Read as _,
    os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use super::{error::LoadError, file_bytes::FileBytes};

const GROUP_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;
const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// The largest plugin file the loader reads (256 MiB). A release build of a plugin with
/// line tables is a few MiB; anything near this is not a plugin, or was built with full
/// debug info.
pub const MAX_PLUGIN_BYTES: u64 = 256 * 1024 * 1024;

/// A plugin file that passed every check, with the bytes that were checked.
pub struct CheckedFile {
    /// The file as found in the plugin directory.
    pub path: PathBuf,
    /// The real file: `path` with every symlink resolved.
    pub canonical: PathBuf,
    /// Its contents (in a mapping of their own, unmapped when dropped).
    pub bytes: FileBytes,
    /// SHA-256 of `bytes`, lowercase hex.
    pub sha256: String,
}

/// The broker's effective uid.
pub fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a path is not trusted under the ownership and mode rule.
#[derive(Debug)]
pub enum Untrusted {
    /// Owned by neither root nor the broker's user.
    Owner {
        /// The offending path.
        path: PathBuf,
        /// Its owner.
        found: u32,
    },
    /// Writable by group or others (and not a root-owned sticky directory).
    Writable {
        /// The offending path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its permission bits.
        mode: u32,
    },
    /// Could not be inspected.
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl Untrusted {
    /// The error for plugin file `file` refused because of this directory.
    fn for_plugin(self, file: &Path) -> LoadError {
        match self {
            Untrusted::Owner { path, found } => LoadError::WrongOwner {
                path: file.to_owned(),
                offending: path,
                expected: current_uid(),
                found,
            },
            Untrusted::Writable { path, owner, mode } => LoadError::InsecureDir {
                path: file.to_owned(),
                dir: path,
                owner,
                mode,
            },
            Untrusted::Io { path, source } => LoadError::Unreadable {
                path: file.to_owned(),
                uid: current_uid(),
                // The I/O error alone does not say which directory could not be inspected.
                source: std::io::Error::new(source.kind(), format!("{}: {source}", path.display())),
            },
        }
    }

    /// What is wrong, for a message about another path (the plugin cache).
    pub fn detail(&self) -> String {
        let uid = current_uid();
        match self {
            Untrusted::Owner { path, found } => format!(
                "{} is owned by uid {found}; expected uid {uid} (the broker's user) or root",
                path.display()
            ),
            Untrusted::Writable { path, owner, mode } => format!(
                "{} is writable by group or others (owner uid {owner}, mode {mode:03o}); expected \
                 no group/other write permission, or a root-owned directory with the sticky bit",
                path.display()
            ),
            Untrusted::Io { path, source } => {
                format!("cannot inspect {}: {source}", path.display())
            }
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> String {
        let uid = current_uid();
        match self {
            Untrusted::Owner { path, .. } => format!(
                "anyone owning {} could replace what is below it; remove it if it was planted, \
                 chown it to uid {uid}, or use a directory in a tree owned by root or uid {uid}",
                path.display()
            ),
            Untrusted::Writable { path, .. } => format!("chmod go-w {}", path.display()),
            Untrusted::Io { path, .. } => format!(
                "make {} accessible to uid {uid}, the broker's user",
                path.display()
            ),
        }
    }
}

/// Checks `dir` and every directory above it up to `/` under the ownership and mode rule.
/// `dir` must be canonical (absolute, no symlinks): every component is inspected with
/// `lstat`.
pub fn check_dir_chain(dir: &Path) -> Result<(), Untrusted> {
    for d in dir.ancestors() {
        let meta = std::fs::symlink_metadata(d).map_err(|source| Untrusted::Io {
            path: d.to_owned(),
            source,
        })?;
        check_dir_meta(d, &meta)?;
    }
    Ok(())
}

fn check_dir_meta(dir: &Path, meta: &Metadata) -> Result<(), Untrusted> {
    let owner = meta.uid();
    if owner != 0 && owner != current_uid() {
        return Err(Untrusted::Owner {
            path: dir.to_owned(),
            found: owner,
        });
    }
    let mode = meta.mode() & 0o7777;
    let sticky_root = owner == 0 && mode & STICKY != 0;
    if mode & GROUP_OTHER_WRITE != 0 && !sticky_root {
        return Err(Untrusted::Writable {
            path: dir.to_owned(),
            owner,
            mode,
        });
    }
    Ok(())
}

/// Resolves `path` to its real file, refusing dangling symlinks and names that are not
/// regular files.
pub fn resolve(path: &Path) -> Result<PathBuf, LoadError> {
    let canonical = std::fs::canonicalize(path).map_err(|source| {
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && source.raw_os_error() == Some(libc::ELOOP) {
            LoadError::NotRegular {
                path: path.to_owned(),
                found: "a symlink loop (too many levels of symbolic links)".to_owned(),
            }
        } else if is_link && source.kind() == std::io::ErrorKind::NotFound {
            LoadError::DanglingSymlink {
                path: path.to_owned(),
                target: std::fs::read_link(path).unwrap_or_default(),
            }
        } else {
            LoadError::Unreadable {
                path: path.to_owned(),
                uid: current_uid(),
                source,
            }
        }
    })?;
    let meta = std::fs::symlink_metadata(&canonical).map_err(|source| LoadError::Unreadable {
        path: path.to_owned(),
        uid: current_uid(),
        source,
    })?;
    if !meta.is_file() {
        return Err(LoadError::NotRegular {
            path: path.to_owned(),
            found: type_name(&meta).to_owned(),
        });
    }
    Ok(canonical)
}

fn type_name(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "something else"
    }
}

/// Checks one plugin file and reads it: resolution, ownership and modes of the file and
/// of every directory above it and above its name, size cap, ELF magic and the optional
/// SHA-256 allowlist (empty set: no allowlist).
pub fn check_file(path: &Path, allowlist: &HashSet<String>) -> Result<CheckedFile, LoadError> {
    let uid = current_uid();
    let unreadable = |source| LoadError::Unreadable {
        path: path.to_owned(),
        uid,
        source,
    };
    let canonical = resolve(path)?;
    let real_dir = canonical.parent().unwrap_or(Path::new("/"));
    check_dir_chain(real_dir).map_err(|u| u.for_plugin(path))?;
    let name_dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name_dir = std::fs::canonicalize(name_dir).map_err(unreadable)?;
    if name_dir != real_dir {
        check_dir_chain(&name_dir).map_err(|u| u.for_plugin(path))?;
    }

    // Open the real file without following a symlink that might have appeared since, and
    // judge the file we actually opened. O_NONBLOCK: never hang on a FIFO swapped in.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&canonical)
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(LoadError::NotRegular {
            path: path.to_owned(),
            found: type_name(&meta).to_owned(),
        });
    }
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(LoadError::WrongOwner {
            path: path.to_owned(),
            offending: canonical,
            expected: uid,
            found: meta.uid(),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & GROUP_OTHER_WRITE != 0 {
        return Err(LoadError::InsecureFile {
            path: path.to_owned(),
            file: canonical,
            mode,
        });
    }
    let too_large = |size| LoadError::TooLarge {
        path: path.to_owned(),
        size,
        max: MAX_PLUGIN_BYTES,
    };
    if meta.len() > MAX_PLUGIN_BYTES {
        return Err(too_large(meta.len()));
    }

    let mut head = Vec::with_capacity(ELF_MAGIC.len());
    (&mut file)
        .take(ELF_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(unreadable)?;
    if head != ELF_MAGIC {
        return Err(LoadError::NotALibrary {
            path: path.to_owned(),
            found: describe(&head, meta.len()),
        });
    }
    // Bounded even if the file grows while we read it; in memory of its own, not the
    // allocator's (file_bytes.rs: issue 28 item 4).
    let bytes =
        FileBytes::read(&head, &mut file, meta.len(), MAX_PLUGIN_BYTES).map_err(unreadable)?;
    if bytes.len() as u64 > MAX_PLUGIN_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    super::elf::check(&bytes).map_err(|detail| LoadError::DamagedElf {
        path: path.to_owned(),
        detail,
    })?;
    let sha256 = hex::encode(Sha256::digest(&bytes[..]));
    if !allowlist.is_empty() && !allowlist.contains(&sha256) {
        return Err(LoadError::NotAllowlisted {
            path: path.to_owned(),
            found: sha256,
        });
    }
    Ok(CheckedFile {
        path: path.to_owned(),
        canonical,
        bytes,
        sha256,
    })
}

/// A short description of what a non-ELF file starts with.
fn describe(head: &[u8], size: u64) -> String {
    if size == 0 {
        return "an empty file".to_owned();
    }
    let head: String = head
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!("{size} bytes starting with {head}")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private temp dir holding a `plugins` directory (0755).
    fn plugin_dir() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("plugins");
        std::fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        (root, dir)
    }

    #[test]
    fn refuses_world_writable_and_garbage_and_unlisted() {
        let (_root, dir) = plugin_dir();
        let p = dir.join("libx.so");
        std::fs::write(&p, b"garbage").unwrap();
        chmod(&p, 0o666);
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        assert!(
            matches!(e, LoadError::InsecureFile { mode: 0o666, .. }),
            "{e}"
        );

        chmod(&p, 0o644);
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        let text = e.to_string();
        assert!(text.contains("expected an ELF shared object"), "{text}");
        assert!(text.contains("7 bytes starting with 67 61 72 62"), "{text}");

        std::fs::write(&p, b"\x7fELF and the rest").unwrap();
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        assert!(matches!(e, LoadError::DamagedElf { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("shorter than the 64-byte ELF header"),
            "{e}"
        );
        std::fs::write(&p, super::super::elf::minimal_library(4096)).unwrap();
        check_file(&p, &HashSet::new()).expect("a whole ELF shared object");
        let allow = HashSet::from(["0".repeat(64)]);
        let e = check_file(&p, &allow).err().unwrap();
        assert!(matches!(e, LoadError::NotAllowlisted { .. }), "{e}");

        chmod(&dir, 0o777);
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        assert!(matches!(e, LoadError::InsecureDir { .. }), "{e}");
    }

    #[test]
    fn every_ancestor_of_the_real_file_is_checked() {
        let (root, dir) = plugin_dir();
        // The real file lives two levels down in another directory, reached by a symlink.
        let deep = root.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        chmod(&root.path().join("a"), 0o755);
        chmod(&deep, 0o755);
        let real = deep.join("libreal.so");
        std::fs::write(&real, super::super::elf::minimal_library(128)).unwrap();
        chmod(&real, 0o644);
        let link = dir.join("liblink.so");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let checked = check_file(&link, &HashSet::new()).unwrap();
        assert_eq!(checked.canonical, std::fs::canonicalize(&real).unwrap());

        // A group-writable grandparent of the real file is refused, naming it.
        chmod(&root.path().join("a"), 0o775);
        let e = check_file(&link, &HashSet::new()).err().unwrap();
        let text = e.to_string();
        let a = std::fs::canonicalize(root.path().join("a")).unwrap();
        assert!(
            matches!(&e, LoadError::InsecureDir { dir, mode: 0o775, .. } if *dir == a),
            "{text}"
        );
        assert!(
            text.contains(&format!("hint: chmod go-w {}", a.display())),
            "{text}"
        );
        assert!(text.contains("expected no group/other write"), "{text}");
        chmod(&root.path().join("a"), 0o755);

        // A world-writable real file is refused even through a symlink.
        chmod(&real, 0o646);
        let e = check_file(&link, &HashSet::new()).err().unwrap();
        assert!(matches!(e, LoadError::InsecureFile { .. }), "{e}");
        chmod(&real, 0o644);

        // The directory holding the name is checked too.
        chmod(&dir, 0o757);
        let e = check_file(&link, &HashSet::new()).err().unwrap();
        assert!(matches!(e, LoadError::InsecureDir { .. }), "{e}");
    }

    #[test]
    fn root_owned_sticky_directory_is_accepted_other_writable_ones_are_not() {
        let (root, _) = plugin_dir();
        let sticky = root.path().join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        chmod(&sticky, 0o1777);
        let meta = std::fs::symlink_metadata(&sticky).unwrap();
        let result = check_dir_meta(&sticky, &meta);
        if meta.uid() == 0 {
            result.expect("root-owned sticky directory");
        } else {
            // Sticky, but owned by a non-root user: not the /tmp case.
            assert!(matches!(result, Err(Untrusted::Writable { .. })));
        }
        chmod(&sticky, 0o777);
        let meta = std::fs::symlink_metadata(&sticky).unwrap();
        assert!(matches!(
            check_dir_meta(&sticky, &meta),
            Err(Untrusted::Writable { mode: 0o777, .. })
        ));
    }

    #[test]
    fn directory_owned_by_another_user_is_refused() {
        if current_uid() != 0 {
            return; // needs chown
        }
        let (root, dir) = plugin_dir();
        let p = dir.join("libx.so");
        std::fs::write(&p, b"\x7fELF").unwrap();
        chmod(&p, 0o644);
        std::os::unix::fs::chown(root.path(), Some(65534), None).unwrap();
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        let text = e.to_string();
        assert!(
            matches!(e, LoadError::WrongOwner { found: 65534, .. }),
            "{text}"
        );
        let owner_dir = std::fs::canonicalize(root.path()).unwrap();
        assert!(
            text.contains(&format!("{} is owned by uid 65534", owner_dir.display())),
            "{text}"
        );
        assert!(text.contains("expected uid 0"), "{text}");
        assert!(text.contains("hint: chown 0"), "{text}");
    }

    #[test]
    fn file_larger_than_the_cap_is_refused_before_reading() {
        let (_root, dir) = plugin_dir();
        let p = dir.join("libhuge.so");
        let f = std::fs::File::create(&p).unwrap();
        std::io::Write::write_all(&mut &f, ELF_MAGIC).unwrap();
        f.set_len(MAX_PLUGIN_BYTES + 1).unwrap(); // sparse
        chmod(&p, 0o644);
        let e = check_file(&p, &HashSet::new()).err().unwrap();
        assert!(matches!(e, LoadError::TooLarge { .. }), "{e}");
        assert!(
            e.to_string().contains("expected at most 268435456 bytes"),
            "{e}"
        );
    }

    #[test]
    fn dangling_symlinks_and_directories_are_refused() {
        let (_root, dir) = plugin_dir();
        let link = dir.join("libgone.so");
        std::os::unix::fs::symlink(dir.join("nowhere.so"), &link).unwrap();
        let e = check_file(&link, &HashSet::new()).err().unwrap();
        assert!(matches!(e, LoadError::DanglingSymlink { .. }), "{e}");
        assert!(e.to_string().contains("dangling symlink"), "{e}");

        let (a, b) = (dir.join("libloop1.so"), dir.join("libloop2.so"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = check_file(&a, &HashSet::new()).err().unwrap();
        assert!(e.to_string().contains("a symlink loop"), "{e}");
        assert!(!e.to_string().contains("readable by uid"), "{e}");

        let sub = dir.join("libdir.so");
        std::fs::create_dir(&sub).unwrap();
        let e = check_file(&sub, &HashSet::new()).err().unwrap();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(e.to_string().contains("found a directory"), "{e}");
    }
}
