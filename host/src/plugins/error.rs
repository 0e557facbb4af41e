//! Errors of the plugin layer. Each load error is one line naming the file, what was
//! expected and what was found, and a hint.

use std::path::PathBuf;

use drover_abi::{ErrorKind, PluginError, PluginKind};

/// Why a plugin file was refused. `Display` is one line for logs and
/// `drover plugins list`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file or directory could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is writable by group or others.
    #[error("{path}: refused: file is writable by group or others (mode {mode:03o}); expected no group/other write permission; hint: chmod go-w {path}")]
    InsecureFile {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The directory holding the file is writable by group or others.
    #[error("{path}: refused: directory {dir} is writable by group or others (mode {mode:03o}); expected no group/other write permission; hint: chmod go-w {dir}")]
    InsecureDir {
        /// The file.
        path: PathBuf,
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is owned by neither the broker's user nor root.
    #[error("{path}: refused: owned by uid {found}; expected uid {expected} (the broker's user) or root; hint: chown {expected} {path}")]
    WrongOwner {
        /// The file.
        path: PathBuf,
        /// The broker's effective uid.
        expected: u32,
        /// The file's owner.
        found: u32,
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
    /// The dynamic loader refused the file.
    #[error("{path}: cannot load library: {reason}")]
    Dlopen {
        /// The file.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The library exports no `abi_stable` root module.
    #[error("{path}: not a Drover plugin: expected the abi_stable root module symbol, found none; hint: export one with drover_abi::export_assignor!, export_offset_store! or export_coordinator!")]
    MissingRootModule {
        /// The file.
        path: PathBuf,
    },
    /// The root module is not one of the three Drover kinds.
    #[error("{path}: unknown plugin kind: expected a root module named drover_coordinator, drover_assignor or drover_offset_store, found `{found}`")]
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
    /// The plugin was built against another ABI major.
    #[error("{path}: ABI major mismatch: expected drover-abi {expected}.x (this host), found drover-abi {found}; hint: rebuild the plugin against drover-abi {expected}.x")]
    AbiMajor {
        /// The file.
        path: PathBuf,
        /// The host's ABI major.
        expected: u32,
        /// The plugin's ABI version.
        found: String,
    },
    /// The types the plugin was compiled with differ from the host's.
    #[error("{path}: ABI layout mismatch: expected the type layout of drover-abi {expected}, found a different one ({detail}); hint: rebuild the plugin against drover-abi {expected}")]
    Layout {
        /// The file.
        path: PathBuf,
        /// The host's ABI version.
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
    /// Two files provide a plugin with the same kind and name.
    #[error("{path}: duplicate {kind} plugin `{name}`: expected one file per name, found it already in {first}; hint: remove one of them")]
    Duplicate {
        /// The later file.
        path: PathBuf,
        /// The kind.
        kind: PluginKind,
        /// The plugin name.
        name: String,
        /// The file that provided it first.
        first: PathBuf,
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
    /// A plugin the config requires is not in the directory.
    #[error("required plugin `{name}` not found in {dir}: expected a file providing it, found none ({refused} file(s) refused, see above); hint: build it and copy its .so into the plugin directory")]
    Missing {
        /// The plugin kind and name.
        name: String,
        /// The plugin directory.
        dir: PathBuf,
        /// How many files of the directory were refused.
        refused: usize,
    },
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
