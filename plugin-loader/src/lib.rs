//! # drover-plugin-loader — plugins on the host side
//!
//! Finding, checking, loading and calling Drover plugins (the coordinator, assignors,
//! offset stores: `cdylib`s exporting one `drover-abi` root module). The broker host
//! (`drover-host`) uses it as `drover_host::plugins`; it depends on the ABI and no
//! part of the host, so it and its unit tests build without the broker (docs/design.md,
//! "Layout" and "Plugin ABI").
//!
//! - [`checks`]: what is verified about a file before it is ever `dlopen`ed (symlinks
//!   resolved; owner and mode of the real file and of every directory above it; size
//!   cap; ELF magic and a whole-file ELF layout check (`elf`); SHA-256 allowlist),
//!   on the file's bytes read into a mapping of their own ([`file_bytes`]);
//! - [`loader`]: loading one file — a content-addressed copy in a checked private cache,
//!   the `abi_stable` header, kind and ABI version from the header, layout check,
//!   manifest; pruning the cache;
//! - [`registry`]: scanning a directory into the set of loaded plugins by name (unique
//!   across kinds), with every refused file reported;
//! - [`live`]: the plugin directory of a running broker — `drover plugins rescan` loads
//!   files added or replaced since startup;
//! - [`handle`]: instances (an assignor, an offset store) behind handles that take an
//!   instance out of service when it panics;
//! - [`log_sink`]: the host end of the plugin log bridge;
//! - [`table`]: `drover plugins list` output (an aligned table or JSON lines).

pub mod checks;
mod elf;
pub mod error;
pub mod file_bytes;
pub mod handle;
mod instance;
pub mod live;
pub mod loader;
pub mod log_sink;
pub mod registry;
pub mod table;

pub use error::{CallError, LoadError};
pub use handle::{
    AssignorHandle, AuthorizerHandle, CoordinatorHandle, OffsetStoreHandle, PluginHandle,
};
pub use live::{LivePlugins, RescanReport};
pub use loader::{LoadedPlugin, Loader, LoaderOptions, PluginModule, PluginSummary};
pub use registry::{PluginRegistry, ScanEntry};
