//! Test kit for Drover's workspace-level tests: finds the plugin `.so` files that
//! `cargo test` built for this run, lays out private plugin directories, and loads
//! plugins through the host's real loader (never the rlibs).

pub mod cluster_broker;
pub mod native;
pub mod proc_stat;
pub mod served;
pub mod services;

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use drover_abi::PluginKind;
use drover_host::plugins::{
    AssignorHandle, LoadedPlugin, Loader, LoaderOptions, OffsetStoreHandle,
};

/// The library names (`lib<name>.so`) of every assignor under conformance test, with the
/// plugin name each must report.
pub const ASSIGNORS: &[(&str, &str)] = &[
    ("drover_assignor_range", "range"),
    ("drover_assignor_round_robin", "round-robin"),
    ("drover_assignor_sticky", "sticky"),
    ("drover_assignor_load_aware", "load-aware"),
];

/// The library names of every offset store under conformance test, with plugin names.
pub const OFFSET_STORES: &[(&str, &str)] = &[
    ("drover_offsets_embedded", "embedded"),
    ("drover_offsets_zookeeper", "zookeeper"),
    ("drover_offsets_postgres", "postgres"),
];

/// The library names of every authorizer under conformance test, with plugin names.
pub const AUTHORIZERS: &[(&str, &str)] = &[("drover_authorizer_acl", "acl")];

/// The built `lib<lib_name>.so`. Looks next to the running test binary
/// (`<target dir>/<profile>/deps`, where cargo puts the cdylibs of dependencies, so this
/// follows `CARGO_TARGET_DIR`) and one level up. When `DROVER_PLUGIN_BUILD_DIR` is set,
/// that directory is searched first (to run the suites against plugin files built
/// elsewhere, e.g. a release build); every plugin of this workspace, the example
/// included, is found without it.
pub fn built_library(lib_name: &str) -> PathBuf {
    let file = format!("lib{lib_name}.so");
    let mut candidates = Vec::new();
    if let Ok(dir) = std::env::var("DROVER_PLUGIN_BUILD_DIR") {
        candidates.push(PathBuf::from(dir).join(&file));
    }
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("exe dir").to_owned();
    candidates.push(deps.join(&file));
    if let Some(profile) = deps.parent() {
        candidates.push(profile.join(&file));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{file} not built; `cargo test -p drover-tests` builds it (looked next to {exe:?})"
            )
        })
}

/// The target dir that every plugin workspace built apart from the main one shares
/// (`target/plugin-fixtures`): the frozen compat trees and the plugin template's
/// copies. They pin the same third-party crates (abi_stable and its dependencies), so
/// sharing one dir, with one profile ([`FIXTURE_DEBUG`]), builds those once instead
/// of once per tree: about 45 CPU-seconds less per tree from cold. Cargo's lock on
/// the dir makes concurrent builds wait for each other.
pub fn fixtures_target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/plugin-fixtures")
}

/// `CARGO_PROFILE_DEV_DEBUG` for every build in [`fixtures_target_dir`]: line tables
/// only, as the workspace builds (full debug info triples the dir's size), and the
/// same for all of them, since the profile is part of what makes a built crate
/// reusable.
pub const FIXTURE_DEBUG: &str = "line-tables-only";

/// The compatibility fixture `lib_name` (tests/compat: plugins built against the frozen
/// drover-abi 3.0). The first call builds the fixtures' own workspace (`cargo build
/// --locked` into [`fixtures_target_dir`]; fast once built), so a plain `cargo test -p
/// drover-tests` needs nothing else.
pub fn compat_library(lib_name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    compat_library_in(&BUILT, "compat", lib_name)
}

/// [`compat_library`] of the frozen tree `tests/compat-3.4` (drover-abi 3.4: assignor
/// ABI 3.1), built into the same [`fixtures_target_dir`].
pub fn compat_library_3_4(lib_name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    compat_library_in(&BUILT, "compat-3.4", lib_name)
}

fn compat_library_in(
    built: &std::sync::OnceLock<Result<PathBuf, String>>,
    tree: &str,
    lib_name: &str,
) -> PathBuf {
    let dir = built.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let target = fixtures_target_dir();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = std::process::Command::new(cargo)
            .args(["build", "--locked", "--manifest-path"])
            .arg(repo.join("tests").join(tree).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .env("CARGO_PROFILE_DEV_DEBUG", FIXTURE_DEBUG)
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() {
            return Err(format!("building tests/{tree} failed: {status}"));
        }
        Ok(target.join("debug"))
    });
    let dir = dir.as_ref().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(format!("lib{lib_name}.so"));
    assert!(path.is_file(), "{} missing after the build", path.display());
    path
}

/// A private plugin directory (mode 0755 inside a 0700 temp dir) with its own
/// plugin cache, removed on drop.
pub struct PluginDir {
    root: tempfile::TempDir,
}

impl Default for PluginDir {
    fn default() -> Self {
        Self::new()
    }
}

impl PluginDir {
    /// An empty plugin directory.
    pub fn new() -> PluginDir {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(root.path().join("plugins")).expect("mkdir plugins");
        set_mode(&root.path().join("plugins"), 0o755);
        PluginDir { root }
    }

    /// The directory plugins go in.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("plugins")
    }

    /// Copies the built `lib<lib_name>.so` in (mode 0644); returns its path.
    pub fn add_built(&self, lib_name: &str) -> PathBuf {
        self.add_file(&built_library(lib_name))
    }

    /// Copies the library at `source` into the directory (mode 0644) under its own file
    /// name; returns its path.
    pub fn add_file(&self, source: &Path) -> PathBuf {
        let target = self.path().join(source.file_name().expect("a file name"));
        std::fs::copy(source, &target).expect("copy plugin");
        set_mode(&target, 0o644);
        target
    }

    /// Writes `bytes` as `file_name` (mode 0644); returns its path.
    pub fn add_bytes(&self, file_name: &str, bytes: &[u8]) -> PathBuf {
        let target = self.path().join(file_name);
        std::fs::write(&target, bytes).expect("write file");
        set_mode(&target, 0o644);
        target
    }

    /// Creates a symlink `file_name` in the plugin directory pointing at `target`;
    /// returns its path.
    pub fn add_symlink(&self, file_name: &str, target: &Path) -> PathBuf {
        let link = self.path().join(file_name);
        std::os::unix::fs::symlink(target, &link).expect("symlink");
        link
    }

    /// The plugin cache of [`PluginDir::loader`].
    pub fn cache_dir(&self) -> PathBuf {
        self.root.path().join("cache")
    }

    /// A loader whose cache lives inside this directory's temp root.
    pub fn loader(&self) -> Loader {
        self.loader_with_cache(self.cache_dir())
    }

    /// A loader with cache directory `cache_dir` and no allowlist.
    pub fn loader_with_cache(&self, cache_dir: PathBuf) -> Loader {
        Loader::new(LoaderOptions {
            cache_dir,
            allowlist: Default::default(),
        })
    }

    /// The temp root holding the plugin directory (private, mode 0700).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// A scratch path inside the temp root (for store files).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }
}

/// The config string that opens a fresh instance of store `name` inside `dir`.
pub fn store_config(name: &str, dir: &PluginDir) -> String {
    match name {
        "embedded" => format!(
            "path = {:?}\n",
            dir.scratch("offsets.redb").display().to_string()
        ),
        "zookeeper" => services::zookeeper::ZkServer::shared().store_config(),
        "postgres" => services::postgres::PgServer::shared().store_config(),
        other => panic!("no test config for offset store `{other}`"),
    }
}

/// Sets a file's permission bits.
pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Loads the built assignor `lib_name` through the host loader and starts an instance
/// with an empty config. The temporary directory is removed on return: a loaded library
/// stays mapped after its file is unlinked (and is never unloaded).
pub fn load_assignor(lib_name: &str) -> (LoadedPlugin, AssignorHandle) {
    let dir = PluginDir::new();
    let path = dir.add_built(lib_name);
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Assignor))
        .unwrap_or_else(|e| panic!("{e}"));
    let handle = plugin.new_assignor("").unwrap_or_else(|e| panic!("{e}"));
    (plugin, handle)
}

/// Loads the built offset store `lib_name` through the host loader and opens it with
/// `config`.
pub fn open_store(dir: &PluginDir, lib_name: &str, config: &str) -> OffsetStoreHandle {
    let path = dir.add_built(lib_name);
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::OffsetStore))
        .unwrap_or_else(|e| panic!("{e}"));
    plugin
        .open_offset_store(config)
        .unwrap_or_else(|e| panic!("{e}"))
}
