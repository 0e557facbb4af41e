//! Loading one plugin file.
//!
//! Not abi_stable's caching `load_from_*` helpers, which keep one library per root-module
//! type for the whole process (`../shared/NOTES.md`). Instead, for each file:
//! 1. [`checks`](super::checks): directory and file permissions, owner, allowlist, ELF;
//! 2. the checked bytes are written to `<cache_dir>/<sha256>.so` and that copy is
//!    `dlopen`ed, so the library loaded is exactly the bytes checked, and a new version
//!    of a plugin (different bytes) is a new library even under the same file name;
//! 3. the `abi_stable` header gives the kind (root-module name) and ABI version before
//!    anything of the plugin runs; a wrong major is refused here;
//! 4. `init_root_module` checks the type layout and runs the plugin's constructor;
//! 5. the manifest is read and checked against the header.
//!
//! Libraries are never unloaded.

use std::{
    collections::HashSet,
    io::Write as _,
    os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use abi_stable::{
    library::{lib_header_from_path, LibraryError, RootModule},
    sabi_types::VersionNumber,
};
use drover_abi::{
    coordinator::CoordinatorModRef, AssignorModRef, Manifest, OffsetStoreModRef, PluginKind,
    ABI_MAJOR, ABI_MINOR,
};

use super::{checks, error::LoadError};

/// How the loader checks and where it keeps verified copies.
#[derive(Debug, Clone)]
pub struct LoaderOptions {
    /// Directory for content-addressed copies; created with mode 0700 if missing and
    /// refused if another user owns it or others can write to it.
    pub cache_dir: PathBuf,
    /// Allowed SHA-256 digests (lowercase hex); empty: every file is allowed.
    pub allowlist: HashSet<String>,
}

impl LoaderOptions {
    /// A per-user cache under the system temp directory (`$TMPDIR/drover-<uid>/plugin-cache`),
    /// for commands that run without a data directory.
    pub fn temp_cache() -> LoaderOptions {
        let dir = std::env::temp_dir().join(format!("drover-{}", checks::current_uid()));
        LoaderOptions {
            cache_dir: dir.join("plugin-cache"),
            allowlist: HashSet::new(),
        }
    }
}

/// What a loaded plugin says about itself, copied into host-owned types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSummary {
    /// The plugin kind.
    pub kind: PluginKind,
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The drover-abi version it was built against, `major.minor`.
    pub abi: String,
    /// Its one-line description.
    pub description: String,
}

impl From<&Manifest> for PluginSummary {
    fn from(m: &Manifest) -> Self {
        PluginSummary {
            kind: m.kind,
            name: m.name.as_str().to_owned(),
            version: m.version.as_str().to_owned(),
            abi: format!("{}.{}", m.abi_major, m.abi_minor),
            description: m.description.as_str().to_owned(),
        }
    }
}

/// The initialised root module of a loaded plugin.
#[derive(Clone, Copy)]
pub enum PluginModule {
    /// A coordinator.
    Coordinator(CoordinatorModRef),
    /// An assignor.
    Assignor(AssignorModRef),
    /// An offset store.
    OffsetStore(OffsetStoreModRef),
}

impl PluginModule {
    fn manifest(&self) -> Manifest {
        match self {
            PluginModule::Coordinator(m) => m.manifest(),
            PluginModule::Assignor(m) => m.manifest(),
            PluginModule::OffsetStore(m) => m.manifest(),
        }
    }
}

/// A plugin file that loaded.
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The file in the plugin directory.
    pub path: PathBuf,
    /// SHA-256 of its contents, lowercase hex.
    pub sha256: String,
    /// Its manifest.
    pub summary: PluginSummary,
    /// Its root module.
    pub module: PluginModule,
}

/// Loads plugin files; see the module docs for the sequence of checks.
#[derive(Debug, Clone)]
pub struct Loader {
    options: LoaderOptions,
}

impl Loader {
    /// A loader with `options`.
    pub fn new(options: LoaderOptions) -> Loader {
        Loader { options }
    }

    /// The loader's options.
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// Loads the plugin at `path`. With `expected`, a plugin of another kind is refused
    /// before its root module is initialised.
    pub fn load(
        &self,
        path: &Path,
        expected: Option<PluginKind>,
    ) -> Result<LoadedPlugin, LoadError> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        checks::check_dir(path, &dir)?;
        let file = checks::check_file(path, &self.options.allowlist)?;
        let cached = self.cache(&file)?;

        let header = lib_header_from_path(&cached).map_err(|e| open_error(path, e))?;
        let consts = header.root_mod_consts();
        let root_name = consts.name().as_str();
        let kind =
            PluginKind::from_root_module_name(root_name).ok_or_else(|| LoadError::UnknownKind {
                path: path.to_owned(),
                found: root_name.to_owned(),
            })?;
        if let Some(expected) = expected.filter(|e| *e != kind) {
            return Err(LoadError::WrongKind {
                path: path.to_owned(),
                expected,
                found: kind,
            });
        }
        let version =
            VersionNumber::new(consts.version_strings()).map_err(|e| LoadError::RootModule {
                path: path.to_owned(),
                detail: format!("unparsable ABI version: {e}"),
            })?;
        if version.major != ABI_MAJOR {
            return Err(LoadError::AbiMajor {
                path: path.to_owned(),
                expected: ABI_MAJOR,
                found: version.to_string(),
            });
        }

        let init_error = |e| init_error(path, e);
        let module = match kind {
            PluginKind::Coordinator => PluginModule::Coordinator(
                header
                    .init_root_module::<CoordinatorModRef>()
                    .map_err(init_error)?,
            ),
            PluginKind::Assignor => PluginModule::Assignor(
                header
                    .init_root_module::<AssignorModRef>()
                    .map_err(init_error)?,
            ),
            PluginKind::OffsetStore => PluginModule::OffsetStore(
                header
                    .init_root_module::<OffsetStoreModRef>()
                    .map_err(init_error)?,
            ),
        };
        let manifest = module.manifest();
        if manifest.kind != kind || manifest.abi_major != ABI_MAJOR {
            return Err(LoadError::Manifest {
                path: path.to_owned(),
                expected: format!("kind {kind}, drover-abi {ABI_MAJOR}.x"),
                found: format!(
                    "kind {}, drover-abi {}.{}",
                    manifest.kind, manifest.abi_major, manifest.abi_minor
                ),
            });
        }
        if manifest.name.is_empty() {
            return Err(LoadError::Manifest {
                path: path.to_owned(),
                expected: "a non-empty plugin name".to_owned(),
                found: "an empty name".to_owned(),
            });
        }
        Ok(LoadedPlugin {
            path: path.to_owned(),
            sha256: file.sha256,
            summary: PluginSummary::from(&manifest),
            module,
        })
    }

    /// Writes the checked bytes to `<cache_dir>/<sha256>.so` (unless an identical copy
    /// is there) and returns that path.
    fn cache(&self, file: &checks::CheckedFile) -> Result<PathBuf, LoadError> {
        let dir = &self.options.cache_dir;
        let io = |source| LoadError::Io {
            path: dir.clone(),
            source,
        };
        ensure_private_dir(dir).map_err(io)?;
        let target = dir.join(format!("{}.so", file.sha256));
        if let Ok(existing) = std::fs::read(&target) {
            if existing == file.bytes {
                return Ok(target);
            }
        }
        let tmp = dir.join(format!(".{}.{}.tmp", file.sha256, std::process::id()));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o500)
            .open(&tmp)
            .map_err(io)?;
        out.write_all(&file.bytes).map_err(io)?;
        out.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &target).map_err(io)?;
        Ok(target)
    }
}

/// Creates `dir` (mode 0700) if missing; refuses one owned by another user or open to
/// others, since anyone who can write there could replace a verified copy.
fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let meta = std::fs::metadata(dir)?;
    if meta.uid() != checks::current_uid() || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "plugin cache must be owned by uid {} with mode 0700, found uid {} mode {:03o}",
                checks::current_uid(),
                meta.uid(),
                meta.mode() & 0o777
            ),
        ));
    }
    Ok(())
}

fn open_error(path: &Path, e: LibraryError) -> LoadError {
    match e {
        LibraryError::GetSymbolError { .. } => LoadError::MissingRootModule {
            path: path.to_owned(),
        },
        LibraryError::OpenError { err, .. } => LoadError::Dlopen {
            path: path.to_owned(),
            reason: err.to_string(),
        },
        other => LoadError::Layout {
            path: path.to_owned(),
            expected: host_abi(),
            detail: summarize(&other.to_string()),
        },
    }
}

fn init_error(path: &Path, e: LibraryError) -> LoadError {
    match e {
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => LoadError::AbiMajor {
            path: path.to_owned(),
            expected: ABI_MAJOR,
            found: actual_version.to_string(),
        },
        LibraryError::RootModule { err, .. } => LoadError::RootModule {
            path: path.to_owned(),
            detail: summarize(&err.to_string()),
        },
        other => LoadError::Layout {
            path: path.to_owned(),
            expected: host_abi(),
            detail: summarize(&other.to_string()),
        },
    }
}

fn host_abi() -> String {
    format!("{ABI_MAJOR}.{ABI_MINOR}")
}

/// abi_stable's layout errors are a long dump; keep the lines after the last `Error:`
/// marker, on one line, capped at 400 bytes.
fn summarize(text: &str) -> String {
    let tail = match text.rfind("Error:") {
        Some(i) => &text[i..],
        None => text,
    };
    let mut one_line = tail.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.len() > 400 {
        let mut cut = 400;
        while !one_line.is_char_boundary(cut) {
            cut -= 1;
        }
        one_line.truncate(cut);
        one_line.push('…');
    }
    one_line
}

// Keep the names used for kind detection tied to the root modules' own constants.
const _: () = {
    assert!(eq(
        AssignorModRef::NAME,
        PluginKind::Assignor.root_module_name()
    ));
    assert!(eq(
        OffsetStoreModRef::NAME,
        PluginKind::OffsetStore.root_module_name()
    ));
    assert!(eq(
        CoordinatorModRef::NAME,
        PluginKind::Coordinator.root_module_name()
    ));
};

const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
