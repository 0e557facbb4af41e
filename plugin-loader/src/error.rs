//! Errors of the plugin layer. Each load error is one line naming the file, what was
//! expected and what was found, and a hint.

use std::path::PathBuf;

use drover_abi::{ErrorKind, PluginError, PluginKind};

/// Why a plugin file was refused, or (for [`LoadError::PluginDir`] and
/// [`LoadError::CacheDir`]) why the loader cannot work at all. `Display` is one line for
/// logs and `drover plugins list`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// An I/O error with no more specific variant.
    #[error("{path}: I/O error: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The plugin directory cannot be listed.
    #[error(
        "cannot read the plugin directory {dir}: {source}; hint: {}",
        dir_hint(source)
    )]
    PluginDir {
        /// The plugin directory.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The plugin cache directory is unsafe or unusable: nothing can be loaded.
    #[error("plugin cache {dir}: refused: {detail}; hint: {hint}")]
    CacheDir {
        /// The cache directory.
        dir: PathBuf,
        /// What is wrong, naming the offending path with expected and found owner/mode.
        detail: String,
        /// What to do about it.
        hint: String,
    },
    /// The plugin file cannot be opened or read.
    #[error("{path}: cannot read the plugin file: {source}; hint: make it (and every directory above it) readable by uid {uid}, the broker's user")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The broker's effective uid.
        uid: u32,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The name is a symlink whose target does not exist.
    #[error("{path}: refused: dangling symlink to {target}; expected a symlink to an existing plugin file; hint: fix or remove the link")]
    DanglingSymlink {
        /// The link.
        path: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// The name is not a regular file (a directory, a FIFO, a device...).
    #[error("{path}: refused: not a regular file: expected a plugin library, found {found}; hint: remove it or rename it so it does not end in .so")]
    NotRegular {
        /// The name in the plugin directory.
        path: PathBuf,
        /// What it is instead.
        found: String,
    },
    /// A second name (a symlink) for a file already loaded from the same directory.
    #[error("{path}: refused: same file as {first} (both are {canonical}); expected one name per plugin file; hint: remove one of them")]
    SameFile {
        /// The later name.
        path: PathBuf,
        /// The name the file was loaded under.
        first: PathBuf,
        /// The real path both resolve to.
        canonical: PathBuf,
    },
    /// The file is writable by group or others.
    #[error("{path}: refused: file {file} is writable by group or others (mode {mode:03o}); expected no group/other write permission; hint: chmod go-w {file}")]
    InsecureFile {
        /// The name in the plugin directory.
        path: PathBuf,
        /// The real file (differs from `path` for a symlink).
        file: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A directory above the file (after resolving symlinks), or the plugin directory, is
    /// writable by group or others and not a root-owned sticky directory.
    #[error("{path}: refused: directory {dir} is writable by group or others (owner uid {owner}, mode {mode:03o}); expected no group/other write permission, or a root-owned directory with the sticky bit (like /tmp); hint: chmod go-w {dir}")]
    InsecureDir {
        /// The file.
        path: PathBuf,
        /// The directory.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its permission bits.
        mode: u32,
    },
    /// The file, or a directory above it, is owned by neither the broker's user nor root.
    #[error("{path}: refused: {offending} is owned by uid {found}; expected uid {expected} (the broker's user) or root (uid 0) for the file and every directory above it; hint: chown {expected} {offending}, or keep plugins in a directory tree owned by root or uid {expected}")]
    WrongOwner {
        /// The file.
        path: PathBuf,
        /// The file or directory with the wrong owner.
        offending: PathBuf,
        /// The broker's effective uid.
        expected: u32,
        /// The owner found.
        found: u32,
    },
    /// The file is larger than [`super::checks::MAX_PLUGIN_BYTES`].
    #[error("{path}: refused: file is {size} bytes; expected at most {max} bytes for a plugin library; hint: strip debug info (e.g. [profile.release] debug = \"line-tables-only\" or strip = true)")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The cap.
        max: u64,
    },
    /// Loading the file would exceed `plugins.max_loaded_libraries`: libraries are never
    /// unloaded, so every new version a rescan loads stays mapped until a restart.
    #[error("{path}: refused: {loaded} plugin libraries are loaded in this process, the most `plugins.max_loaded_libraries` allows, and libraries are never unloaded; hint: restart the broker to release replaced versions, or raise plugins.max_loaded_libraries")]
    LibraryLimit {
        /// The file.
        path: PathBuf,
        /// Distinct libraries loaded so far.
        loaded: usize,
    },
    /// `plugins.sha256_allowlist` is set and does not list the file's digest.
    #[error("{path}: refused: SHA-256 {found} is not in plugins.sha256_allowlist; hint: add it to the allowlist if you trust this file")]
    NotAllowlisted {
        /// The file.
        path: PathBuf,
        /// Its SHA-256, lowercase hex.
        found: String,
    },
    /// The file is not an ELF shared object.
    #[error("{path}: not a plugin library: expected an ELF shared object, found {found}; hint: build the plugin as a cdylib")]
    NotALibrary {
        /// The file.
        path: PathBuf,
        /// What the file looks like instead.
        found: String,
    },
    /// The file is an ELF file this host cannot load whole: truncated (a copy cut short),
    /// damaged, 32-bit, big-endian, or not a shared object. Mapping a truncated library
    /// would crash the broker (SIGBUS), so it is refused before `dlopen`.
    #[error("{path}: not a loadable plugin library: expected a whole 64-bit ELF shared object, found {detail}; hint: copy the file again (write it next to the plugin directory, then rename it in), or build the plugin as a cdylib for this platform")]
    DamagedElf {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The verified copy could not be written to the plugin cache.
    #[error("{path}: cannot copy into the plugin cache as {cached}: {source}; hint: check free space and permissions of the cache directory")]
    CacheWrite {
        /// The file.
        path: PathBuf,
        /// The copy being written.
        cached: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The dynamic loader refused the file.
    #[error("{path}: cannot load library: expected a shared object the dynamic loader accepts, found: {reason}; hint: build the plugin for this platform (same target and C library as the broker) and check its dependencies with `ldd {path}`")]
    Dlopen {
        /// The file.
        path: PathBuf,
        /// The loader's message (naming the plugin file, not its cached copy).
        reason: String,
    },
    /// The library exports no `abi_stable` root module.
    #[error("{path}: not a Drover plugin: expected the abi_stable root module symbol, found none; hint: export one with drover_abi::export_assignor!, export_offset_store!, export_coordinator! or export_authorizer!")]
    MissingRootModule {
        /// The file.
        path: PathBuf,
    },
    /// The root module is not one of the kinds this broker knows (a kind added by a
    /// later Drover release, or not a Drover plugin).
    #[error("{path}: unknown plugin kind: expected a root module named drover_coordinator, drover_assignor, drover_offset_store or drover_authorizer, found `{found}`; hint: a plugin of a kind added by a later Drover release needs that release")]
    UnknownKind {
        /// The file.
        path: PathBuf,
        /// The root module's name.
        found: String,
    },
    /// The plugin is of another kind than the one asked for.
    #[error("{path}: wrong plugin kind: expected {expected}, found {found}")]
    WrongKind {
        /// The file.
        path: PathBuf,
        /// The kind asked for.
        expected: PluginKind,
        /// The plugin's kind.
        found: PluginKind,
    },
    /// The plugin was built against another major of its kind's interface.
    #[error("{path}: {kind} ABI major mismatch: expected {kind} ABI {expected_major}.x (this broker serves {expected}), found {kind} ABI {found}; hint: rebuild the plugin against a drover-abi whose {kind} ABI is {expected_major}.0 to {expected}")]
    AbiMajor {
        /// The file.
        path: PathBuf,
        /// The plugin's kind; each kind has its own version.
        kind: PluginKind,
        /// The major of the host's version of that kind.
        expected_major: u32,
        /// The host's version of that kind, `major.minor`.
        expected: String,
        /// The plugin's version of that kind, as its library header gives it.
        found: String,
    },
    /// The plugin was built against a later minor of its kind's interface than the host
    /// serves: it may rely on what the host does not have.
    #[error("{path}: {kind} ABI too new: expected {kind} ABI {expected} or older (this broker), found {kind} ABI {found}; hint: upgrade the broker, or rebuild the plugin against a drover-abi whose {kind} ABI is at most {expected}")]
    AbiNewer {
        /// The file.
        path: PathBuf,
        /// The plugin's kind.
        kind: PluginKind,
        /// The host's version of that kind, `major.minor`.
        expected: String,
        /// The plugin's version of that kind.
        found: String,
    },
    /// The types the plugin was compiled with differ from the host's.
    #[error("{path}: ABI layout mismatch: expected the type layout of the {kind} ABI {expected} or an earlier minor of it, found a different one ({detail}); hint: rebuild the plugin against drover-abi with {kind} ABI {expected}")]
    Layout {
        /// The file.
        path: PathBuf,
        /// The plugin's kind, or the one its header names.
        kind: PluginKind,
        /// The host's version of that kind.
        expected: String,
        /// The last lines of abi_stable's report.
        detail: String,
    },
    /// The library's root-module constructor failed or panicked.
    #[error("{path}: plugin failed to initialise: {detail}")]
    RootModule {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The manifest contradicts the header.
    #[error("{path}: inconsistent manifest: expected {expected}, found {found}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What the header says.
        expected: String,
        /// What the manifest says.
        found: String,
    },
    /// Two files provide a plugin with the same name. Names are unique across all kinds,
    /// because `plugins.required` and `[plugins.config.<name>]` select plugins by name
    /// alone.
    #[error("{path}: duplicate plugin name `{name}`: already used by the {first_kind} plugin in {first}; expected one plugin per name across all kinds, found a second one ({kind}); hint: remove one of them")]
    Duplicate {
        /// The later file.
        path: PathBuf,
        /// The later plugin's kind.
        kind: PluginKind,
        /// The plugin name.
        name: String,
        /// The file that provided it first.
        first: PathBuf,
        /// The kind of the plugin that provided it first.
        first_kind: PluginKind,
    },
    /// The plugin's instance could not be created (bad config, backend down).
    #[error("{path}: plugin `{name}` could not be started: {error}")]
    Instantiate {
        /// The file.
        path: PathBuf,
        /// The plugin name.
        name: String,
        /// The plugin's error.
        error: PluginError,
    },
    /// A plugin the config requires is not in the directory. Lists the refused files
    /// itself, since the warnings logged for them may be filtered out.
    #[error(
        "required plugin `{name}` not found in {dir}: expected a file providing it, found none{}",
        missing_detail(refused)
    )]
    Missing {
        /// The plugin kind and name.
        name: String,
        /// The plugin directory.
        dir: PathBuf,
        /// Each refused file of the directory with its reason, shortened.
        refused: Vec<String>,
    },
    /// The offset store a swap made active before the restart (recorded in the data
    /// directory) has no plugin in the directory any more. The broker does not fall
    /// back to the configured store, which lacks every offset committed since the swap.
    #[error(
        "the active offset store is `{store}` (a swap made it active; recorded in <data_dir>/offset_store.json), \
         but no offset-store plugin `{store}` is in {dir}: put its plugin file back, or start once with \
         `drover serve --use-configured-offset-store` to make `{configured}` (drover.toml) active \
         without copying (offsets committed to `{store}` are then not served)"
    )]
    RecordedStoreMissing {
        /// The recorded store's plugin name.
        store: String,
        /// The plugin directory.
        dir: PathBuf,
        /// The store drover.toml names.
        configured: String,
    },
}

fn dir_hint(source: &std::io::Error) -> &'static str {
    match source.kind() {
        std::io::ErrorKind::NotFound => {
            "create it, or point plugins.dir (or --plugin-dir) at the directory holding the plugin .so files"
        }
        std::io::ErrorKind::PermissionDenied => {
            "make it readable and searchable by the broker's user"
        }
        _ => "point plugins.dir (or --plugin-dir) at a readable directory of plugin .so files",
    }
}

fn missing_detail(refused: &[String]) -> String {
    if refused.is_empty() {
        return "; hint: build it and copy its .so into the plugin directory".to_owned();
    }
    format!(
        "; {} file(s) refused: {}; hint: fix the refused file(s) (`drover plugins list` shows each reason in full), or build the plugin and copy its .so into the plugin directory",
        refused.len(),
        refused.join("; ")
    )
}

/// A failed call into a plugin instance.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The plugin returned an error (including a caught panic, after which the instance
    /// is out of service).
    #[error("plugin `{plugin}`: {error}")]
    Plugin {
        /// The plugin name.
        plugin: String,
        /// The plugin's error.
        error: PluginError,
    },
    /// The instance panicked earlier and was taken out of service.
    #[error("plugin `{plugin}` is out of service after an earlier panic")]
    OutOfService {
        /// The plugin name.
        plugin: String,
    },
}

impl CallError {
    /// Whether the same call may succeed later (a backend that is down).
    pub fn is_retriable(&self) -> bool {
        matches!(self, CallError::Plugin { error, .. } if error.kind == ErrorKind::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_error_has_a_hint() {
        let e = LoadError::Unreadable {
            path: "/p/libx.so".into(),
            uid: 7,
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert!(e.to_string().contains("hint: make it"), "{e}");
        let e = LoadError::PluginDir {
            dir: "/nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let text = e.to_string();
        assert!(text.contains("plugin directory /nope"), "{text}");
        assert!(text.contains("hint: create it"), "{text}");
    }

    #[test]
    fn missing_lists_refusals_or_says_build_it() {
        let e = LoadError::Missing {
            name: "sticky".into(),
            dir: "/p".into(),
            refused: vec![],
        };
        assert!(e.to_string().contains("hint: build it"), "{e}");
        let e = LoadError::Missing {
            name: "sticky".into(),
            dir: "/p".into(),
            refused: vec!["liba.so (not a plugin library)".into()],
        };
        let text = e.to_string();
        assert!(
            text.contains("1 file(s) refused: liba.so (not a plugin library)"),
            "{text}"
        );
        assert!(text.contains("hint: fix the refused file(s)"), "{text}");
    }
}
