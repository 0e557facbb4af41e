//! Loading one plugin file.
//!
//! Not abi_stable's caching `load_from_*` helpers, which keep one library per root-module
//! type for the whole process. Instead, for each file:
//! 1. [`checks`]: the file resolved through symlinks, then owner and mode
//!    of the real file and of every directory above it (and above its name), size cap,
//!    ELF magic, allowlist — all before `dlopen`, because `dlopen` runs the library's
//!    static constructors;
//! 2. the checked bytes are written to `<cache_dir>/<sha256>.so` and that copy is
//!    `dlopen`ed, so the library loaded is exactly the bytes checked, and a new version
//!    of a plugin (different bytes) is a new library even under the same file name;
//! 3. the `abi_stable` header gives the kind (root-module name) and the plugin's version
//!    of that kind's interface before the plugin's root-module constructor runs; another
//!    major, or a later minor than the host serves, is refused here;
//! 4. the type layout is checked with the plugin's types as the older side (see
//!    `load_checked`), then the plugin's root-module constructor runs;
//! 5. the manifest is read and checked against the header.
//!
//! The cache directory must be owned by the broker's user with mode 0700, and every
//! directory above it must pass the same rule as a plugin's directories; otherwise
//! nothing is loaded ([`LoadError::CacheDir`]). After a scan, cached copies the scan did
//! not use and older than [`CACHE_PRUNE_AGE`] are deleted.
//!
//! Libraries are never unloaded.

use std::{
    collections::HashSet,
    io::{Read as _, Write as _},
    os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use abi_stable::{
    abi_stability::abi_checking::{check_layout_compatibility_with_globals, CheckingGlobals},
    library::{lib_header_from_path, LibraryError, RootModule},
    sabi_types::{VersionNumber, VersionStrings},
    StableAbi,
};
use drover_abi::{
    authorizer::AuthorizerModRef, coordinator::CoordinatorModRef, manifest::ManifestView,
    AssignorModRef, KindVersion, OffsetStoreModRef, PluginKind,
};

use super::{checks, error::LoadError};

/// How the loader checks and where it keeps verified copies.
#[derive(Debug, Clone)]
pub struct LoaderOptions {
    /// Directory for content-addressed copies; created with mode 0700 if missing. Refused
    /// (and with it every plugin) if another user owns it, group or others can access it,
    /// or a directory above it is owned by someone other than root or the broker's user
    /// or is writable by group or others (root-owned sticky directories like `/tmp`
    /// excepted).
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
    /// The version of its kind's interface it was built against, `major.minor`
    /// (each kind has its own: `drover_abi::version`).
    pub abi: String,
    /// Its one-line description.
    pub description: String,
}

impl PluginSummary {
    /// The summary of a manifest whose kind the loader already checked (`kind`).
    fn new(kind: PluginKind, m: &ManifestView) -> Self {
        PluginSummary {
            kind,
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
    /// An authorizer.
    Authorizer(AuthorizerModRef),
}

impl PluginModule {
    /// The manifest, of either shape (the three original kinds carry the frozen
    /// `Manifest`, later kinds an `OpenManifest`).
    fn manifest(&self) -> ManifestView {
        match self {
            PluginModule::Coordinator(m) => m.manifest().into(),
            PluginModule::Assignor(m) => m.manifest().into(),
            PluginModule::OffsetStore(m) => m.manifest().into(),
            PluginModule::Authorizer(m) => m.manifest().into(),
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

/// Cached copies older than this that a scan did not use are deleted after the scan.
pub const CACHE_PRUNE_AGE: Duration = Duration::from_secs(60 * 60);

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

    /// Creates the cache directory if missing and checks it (owned by the broker's user,
    /// mode 0700) and every directory above it (owned by root or the broker's user, not
    /// writable by group or others unless root-owned and sticky). Returns its real path.
    /// A failure here concerns every file, so a scan stops with it.
    pub fn prepare_cache(&self) -> Result<PathBuf, LoadError> {
        ensure_private_dir(&self.options.cache_dir)
    }

    /// Loads the plugin at `path`. With `expected`, a plugin of another kind is refused
    /// before its root module is initialised.
    pub fn load(
        &self,
        path: &Path,
        expected: Option<PluginKind>,
    ) -> Result<LoadedPlugin, LoadError> {
        self.load_recording(path, expected).1
    }

    /// [`Loader::load`], also returning the file's SHA-256 when it was read (even if the
    /// file was then refused).
    pub(super) fn load_recording(
        &self,
        path: &Path,
        expected: Option<PluginKind>,
    ) -> (Option<String>, Result<LoadedPlugin, LoadError>) {
        let file = match checks::check_file(path, &self.options.allowlist) {
            Ok(file) => file,
            Err(e) => return (None, Err(e)),
        };
        let sha256 = file.sha256.clone();
        (Some(sha256), self.load_checked(path, file, expected))
    }

    /// Loads a file [`checks::check_file`] already read and checked (a rescan compares
    /// its digest first), without reading it again.
    pub(super) fn load_checked(
        &self,
        path: &Path,
        file: checks::CheckedFile,
        expected: Option<PluginKind>,
    ) -> Result<LoadedPlugin, LoadError> {
        let cached = self.cache(&file)?;

        let header = lib_header_from_path(&cached).map_err(|e| open_error(path, &cached, e))?;
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
        let found = plugin_kind_version(path, consts.version_strings())?;
        let host = kind.abi_version();
        if found.major != host.major {
            return Err(LoadError::AbiMajor {
                path: path.to_owned(),
                kind,
                expected_major: host.major,
                expected: host.to_string(),
                found: found.to_string(),
            });
        }
        if !host.accepts(found) {
            return Err(LoadError::AbiNewer {
                path: path.to_owned(),
                kind,
                expected: host.to_string(),
                found: found.to_string(),
            });
        }
        let layout_error = |detail: String| LoadError::Layout {
            path: path.to_owned(),
            kind,
            expected: host.to_string(),
            detail,
        };
        // abi_stable checks the host's layout as the *interface* and requires every
        // prefix type (root module, trait vtable) of the library to have at least as many
        // fields, which refuses a plugin built against an earlier minor. The host checks
        // with the plugin as the interface instead: the plugin's view of every type must
        // be a prefix of the host's. That is the compatibility promise (older minors load,
        // newer ones were refused above), and sound: fields and methods after
        // `last_prefix_field` are read through accessors that see the library's own
        // field count at run time, and non-exhaustive enums carry unknown variants.
        let plugin_layout = header
            .layout()
            .ok_or_else(|| layout_error("the library carries no layout to check".to_owned()))?;
        let host_layout = match kind {
            PluginKind::Coordinator => <CoordinatorModRef as StableAbi>::LAYOUT,
            PluginKind::Assignor => <AssignorModRef as StableAbi>::LAYOUT,
            PluginKind::OffsetStore => <OffsetStoreModRef as StableAbi>::LAYOUT,
            PluginKind::Authorizer => <AuthorizerModRef as StableAbi>::LAYOUT,
        };
        // A fresh set of checking globals per file: abi_stable's process-wide set merges
        // every prefix type it has seen across checks, so after a coordinator built
        // against assignor ABI 3.0 (its `Assignor` vtable has one method) a current
        // assignor would be compared with that merged, older vtable and refused ("too
        // many fields"). Each library's accessors read its own field count at run
        // time, so nothing relies on the merge.
        check_layout_compatibility_with_globals(
            plugin_layout,
            host_layout,
            &CheckingGlobals::new(),
        )
        .map_err(|e| layout_error(summarize(&e.to_string())))?;

        let init_error = |e| init_error(path, e);
        // SAFETY: the library's root-module layout was checked against the host's just
        // above (in the direction explained there), which is what the unchecked variant
        // leaves to its caller; the version check still runs inside.
        let module = unsafe {
            match kind {
                PluginKind::Coordinator => PluginModule::Coordinator(
                    header
                        .init_root_module_with_unchecked_layout::<CoordinatorModRef>()
                        .map_err(init_error)?,
                ),
                PluginKind::Assignor => PluginModule::Assignor(
                    header
                        .init_root_module_with_unchecked_layout::<AssignorModRef>()
                        .map_err(init_error)?,
                ),
                PluginKind::OffsetStore => PluginModule::OffsetStore(
                    header
                        .init_root_module_with_unchecked_layout::<OffsetStoreModRef>()
                        .map_err(init_error)?,
                ),
                PluginKind::Authorizer => PluginModule::Authorizer(
                    header
                        .init_root_module_with_unchecked_layout::<AuthorizerModRef>()
                        .map_err(init_error)?,
                ),
            }
        };
        let manifest = module.manifest();
        if manifest.kind != Ok(kind)
            || manifest.abi_major != found.major
            || manifest.abi_minor != found.minor
        {
            let manifest_kind = match manifest.kind {
                Ok(kind) => kind.to_string(),
                Err(code) => format!("unknown kind {code}"),
            };
            return Err(LoadError::Manifest {
                path: path.to_owned(),
                expected: format!("kind {kind}, {kind} ABI {found} (from the library header)"),
                found: format!(
                    "kind {manifest_kind}, ABI {}.{}",
                    manifest.abi_major, manifest.abi_minor
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
            summary: PluginSummary::new(kind, &manifest),
            module,
        })
    }

    /// Writes the checked bytes to `<cache_dir>/<sha256>.so` (unless an identical copy
    /// is there) and returns that path.
    fn cache(&self, file: &checks::CheckedFile) -> Result<PathBuf, LoadError> {
        let dir = self.prepare_cache()?;
        let target = dir.join(format!("{}.so", file.sha256));
        let io = |source| LoadError::CacheWrite {
            path: file.path.clone(),
            cached: target.clone(),
            source,
        };
        if same_contents(&target, &file.bytes) {
            return Ok(target);
        }
        let tmp = dir.join(format!(".{}.{}.tmp", file.sha256, std::process::id()));
        // A crash can leave this name behind (mode 0500, so it cannot be reopened for
        // writing): remove it, then create it afresh; never write through an old entry.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
            _ => {}
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o500)
            .open(&tmp)
            .map_err(io)?;
        let written = out
            .write_all(&file.bytes)
            .and_then(|()| out.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &target));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        Ok(target)
    }

    /// Deletes cached copies (`<sha256>.so`) whose digest is not in `keep` and that are
    /// older than `older_than`, and temp files left by crashes older than that. A library
    /// that is loaded keeps its mapping after the file is unlinked, so this is safe even
    /// while another broker uses the same cache. Returns how many files were deleted.
    pub fn prune_cache(&self, keep: &HashSet<String>, older_than: Duration) -> usize {
        let dir = &self.options.cache_dir;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let prunable = match name.strip_suffix(".so") {
                Some(digest) => is_digest(digest) && !keep.contains(digest),
                None => name.starts_with('.') && name.ends_with(".tmp"),
            };
            if !prunable {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > older_than));
            if !old {
                continue;
            }
            match std::fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) => tracing::warn!(
                    "cannot prune the plugin cache: {}: {e}",
                    entry.path().display()
                ),
            }
        }
        if removed > 0 {
            tracing::debug!(removed, cache = %dir.display(), "pruned unused plugin cache files");
        }
        removed
    }
}

/// Whether the file at `path` holds exactly `bytes`, compared 64 KiB at a time (a cached
/// copy is as large as its plugin: reading it whole would be one more file-sized
/// allocation per load; file_bytes.rs says why that matters).
fn same_contents(path: &Path, bytes: &[u8]) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    if file.metadata().map(|m| m.len()).ok() != Some(bytes.len() as u64) {
        return false;
    }
    let mut chunk = vec![0u8; 64 * 1024];
    let mut at = 0;
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return at == bytes.len(),
            Ok(n) => {
                if bytes.get(at..at + n) != Some(&chunk[..n]) {
                    return false;
                }
                at += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Creates `dir` (mode 0700) if missing, after checking the part of the path that
/// exists; then checks it: owned by the broker's user, no access for group or others,
/// and every directory above it trusted (see [`checks::check_dir_chain`]). Anyone who
/// could write there, or rename a directory above it, could replace a verified copy.
fn ensure_private_dir(dir: &Path) -> Result<PathBuf, LoadError> {
    let refuse = |detail: String, hint: String| LoadError::CacheDir {
        dir: dir.to_owned(),
        detail,
        hint,
    };
    let untrusted = |u: checks::Untrusted| refuse(u.detail(), u.hint());
    let uid = checks::current_uid();

    let existing = nearest_existing(dir).map_err(|e| {
        refuse(
            format!("cannot inspect {}: {e}", dir.display()),
            "set plugins.cache_dir to a directory the broker's user can create".to_owned(),
        )
    })?;
    if existing != dir {
        // Never create anything below a directory someone else controls.
        let real = std::fs::canonicalize(&existing).map_err(|e| {
            refuse(
                format!("cannot resolve {}: {e}", existing.display()),
                "fix the path or set plugins.cache_dir".to_owned(),
            )
        })?;
        checks::check_dir_chain(&real).map_err(untrusted)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                refuse(
                    format!("cannot create it: {e}"),
                    format!(
                        "create it with mode 0700, owned by uid {uid}, or set plugins.cache_dir"
                    ),
                )
            })?;
    }
    let real = std::fs::canonicalize(dir).map_err(|e| {
        refuse(
            format!("cannot resolve it: {e}"),
            "fix the path or set plugins.cache_dir".to_owned(),
        )
    })?;
    let meta = std::fs::symlink_metadata(&real).map_err(|e| {
        refuse(
            format!("cannot inspect {}: {e}", real.display()),
            "set plugins.cache_dir to a directory the broker's user owns".to_owned(),
        )
    })?;
    let shown = real.display();
    if !meta.is_dir() {
        return Err(refuse(
            format!("{shown} is not a directory"),
            "set plugins.cache_dir to a directory path".to_owned(),
        ));
    }
    if meta.uid() != uid {
        return Err(refuse(
            format!(
                "{shown} is owned by uid {}; expected uid {uid} (the broker's user)",
                meta.uid()
            ),
            format!(
                "remove it so the broker recreates it, or set plugins.cache_dir to a directory owned by uid {uid}"
            ),
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(refuse(
            format!("{shown} has mode {mode:03o}; expected 700 (no access for group or others)"),
            format!("chmod 700 {shown}"),
        ));
    }
    if let Some(parent) = real.parent() {
        checks::check_dir_chain(parent).map_err(untrusted)?;
    }
    Ok(real)
}

/// `dir` if it exists (as anything, even a dangling symlink), else its nearest existing
/// ancestor (`.` for a relative path none of whose components exist).
fn nearest_existing(dir: &Path) -> std::io::Result<PathBuf> {
    let mut current = dir.to_owned();
    loop {
        match std::fs::symlink_metadata(&current) {
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match current.parent() {
                Some(p) if !p.as_os_str().is_empty() => current = p.to_owned(),
                Some(_) => return Ok(PathBuf::from(".")),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
}

fn open_error(path: &Path, cached: &Path, e: LibraryError) -> LoadError {
    match e {
        LibraryError::GetSymbolError { .. } => LoadError::MissingRootModule {
            path: path.to_owned(),
        },
        LibraryError::OpenError { err, .. } => {
            // The dynamic loader names the file it was given, our cached copy; name the
            // plugin file instead.
            let reason = err
                .to_string()
                .replace(&cached.display().to_string(), &path.display().to_string());
            LoadError::Dlopen {
                path: path.to_owned(),
                reason: summarize(&reason),
            }
        }
        other => LoadError::RootModule {
            path: path.to_owned(),
            detail: summarize(&other.to_string()),
        },
    }
}

fn init_error(path: &Path, e: LibraryError) -> LoadError {
    LoadError::RootModule {
        path: path.to_owned(),
        detail: summarize(&match e {
            LibraryError::RootModule { err, .. } => err.to_string(),
            other => other.to_string(),
        }),
    }
}

/// The plugin's version of its kind's interface, from its library header.
fn plugin_kind_version(path: &Path, strings: VersionStrings) -> Result<KindVersion, LoadError> {
    let number = VersionNumber::new(strings).map_err(|e| LoadError::RootModule {
        path: path.to_owned(),
        detail: format!("unparsable ABI version: {e}"),
    })?;
    Ok(KindVersion {
        major: number.major,
        minor: number.minor,
    })
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
