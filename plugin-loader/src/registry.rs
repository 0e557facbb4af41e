//! Scanning the plugin directory: every `*.so` entry is loaded or refused, in file-name
//! order; refusals are kept with their error so they can be reported, and the rest of
//! the directory still loads.
//!
//! Plugin names are unique across all kinds in one broker: `plugins.required` and
//! `[plugins.config.<name>]` select plugins by name alone, so an assignor named like an
//! offset store would otherwise receive the store's config. A second name for the same
//! real file (a symlink) is refused as "same file as" the first, before it is loaded.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
};

use drover_abi::PluginKind;

use super::{
    error::LoadError,
    loader::{LoadedPlugin, Loader, CACHE_PRUNE_AGE},
};

/// How long one refusal may be in a [`LoadError::Missing`] message.
const MAX_REFUSAL_CHARS: usize = 160;

/// The outcome for one file.
pub struct ScanEntry {
    /// The file.
    pub path: PathBuf,
    /// SHA-256 of the file, when it was read (also for most refused files).
    pub sha256: Option<String>,
    /// The loaded plugin, or why it was refused.
    pub result: Result<LoadedPlugin, LoadError>,
}

impl ScanEntry {
    /// Why the file was refused, without the leading file path and `refused:` word
    /// (`None` when it loaded).
    pub fn reason(&self) -> Option<String> {
        let error = self.result.as_ref().err()?;
        let text = error.to_string();
        let prefix = format!("{}: ", self.path.display());
        let reason = text.strip_prefix(&prefix).unwrap_or(&text);
        let reason = reason.strip_prefix("refused: ").unwrap_or(reason);
        Some(reason.to_owned())
    }

    /// `file (reason)`, the reason without its hint and capped in length.
    fn short_refusal(&self) -> Option<String> {
        let reason = self.reason()?;
        let reason = reason.split("; hint:").next().unwrap_or(&reason);
        let mut short: String = reason.chars().take(MAX_REFUSAL_CHARS).collect();
        if short.len() < reason.len() {
            short.push('…');
        }
        let file = self
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string());
        Some(format!("{file} ({short})"))
    }
}

/// Everything found in a plugin directory.
pub struct PluginRegistry {
    dir: PathBuf,
    entries: Vec<ScanEntry>,
}

impl PluginRegistry {
    /// Loads every `*.so` in `dir`. Fails only when the directory cannot be listed or
    /// the plugin cache is unusable (both concern every file); then prunes the cache.
    pub fn scan(loader: &Loader, dir: &Path) -> Result<PluginRegistry, LoadError> {
        let paths = list_plugin_files(dir)?;
        loader.prepare_cache()?;

        let primary = primary_names(&paths);
        let mut registry = PluginRegistry {
            dir: dir.to_owned(),
            entries: Vec::with_capacity(paths.len()),
        };
        for path in paths {
            let first = std::fs::canonicalize(&path)
                .ok()
                .and_then(|real| primary.get(&real).map(|first| (real, first)))
                .filter(|(_, first)| **first != path);
            let (sha256, result) = match first {
                Some((canonical, first)) => (
                    None,
                    Err(LoadError::SameFile {
                        path: path.clone(),
                        first: first.clone(),
                        canonical,
                    }),
                ),
                None => {
                    let (sha256, result) = loader.load_recording(&path, None);
                    (sha256, result.and_then(|p| registry.check_duplicate(p)))
                }
            };
            if let Err(e) = &result {
                tracing::warn!("{e}");
            }
            registry.entries.push(ScanEntry {
                path,
                sha256,
                result,
            });
        }
        let used: HashSet<String> = registry
            .entries
            .iter()
            .filter_map(|e| e.sha256.clone())
            .collect();
        loader.prune_cache(&used, CACHE_PRUNE_AGE);
        Ok(registry)
    }

    /// A registry with no plugins (the plugin directory does not exist).
    pub fn empty(dir: &Path) -> PluginRegistry {
        PluginRegistry {
            dir: dir.to_owned(),
            entries: Vec::new(),
        }
    }

    /// Refuses `plugin` if a loaded plugin of any kind already has its name.
    fn check_duplicate(&self, plugin: LoadedPlugin) -> Result<LoadedPlugin, LoadError> {
        match self
            .loaded()
            .find(|p| p.summary.name == plugin.summary.name)
        {
            Some(first) => Err(LoadError::Duplicate {
                path: plugin.path.clone(),
                kind: plugin.summary.kind,
                name: plugin.summary.name.clone(),
                first: first.path.clone(),
                first_kind: first.summary.kind,
            }),
            None => Ok(plugin),
        }
    }

    /// The scanned directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every file, loaded or refused, in file-name order.
    pub fn entries(&self) -> &[ScanEntry] {
        &self.entries
    }

    /// The plugins that loaded.
    pub fn loaded(&self) -> impl Iterator<Item = &LoadedPlugin> {
        self.entries.iter().filter_map(|e| e.result.as_ref().ok())
    }

    /// The files that were refused, with their errors.
    pub fn refused(&self) -> impl Iterator<Item = &LoadError> {
        self.entries.iter().filter_map(|e| e.result.as_ref().err())
    }

    /// The loaded plugin of `kind` named `name`.
    pub fn find(&self, kind: PluginKind, name: &str) -> Option<&LoadedPlugin> {
        self.loaded()
            .find(|p| p.summary.kind == kind && p.summary.name == name)
    }

    /// The loaded plugin named `name` (of `kind`, when given), or the error that stops
    /// startup. That error lists the refused files itself: it is often the only line an
    /// operator sees (`RUST_LOG=error`).
    pub fn require(
        &self,
        kind: Option<PluginKind>,
        name: &str,
    ) -> Result<&LoadedPlugin, LoadError> {
        self.loaded()
            .find(|p| p.summary.name == name && kind.is_none_or(|k| k == p.summary.kind))
            .ok_or_else(|| LoadError::Missing {
                name: match kind {
                    Some(kind) => format!("{kind} {name}"),
                    None => name.to_owned(),
                },
                dir: self.dir.clone(),
                refused: self
                    .entries
                    .iter()
                    .filter_map(ScanEntry::short_refusal)
                    .collect(),
            })
    }

    /// Every loaded plugin of `kind`, in file-name order.
    pub fn of_kind(&self, kind: PluginKind) -> impl Iterator<Item = &LoadedPlugin> {
        self.loaded().filter(move |p| p.summary.kind == kind)
    }
}

/// Every `*.so` entry of `dir`, sorted: every type of entry (directories, FIFOs and
/// dangling symlinks named `*.so` are reported as refused rather than skipped).
pub(super) fn list_plugin_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |source| LoadError::PluginDir {
        dir: dir.to_owned(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "so") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// For each real file behind `paths` (sorted), the name it is loaded under: the first
/// name that is not a symlink, else the first name. Every other name for it is refused.
pub(super) fn primary_names(paths: &[PathBuf]) -> HashMap<PathBuf, PathBuf> {
    let mut primary: HashMap<PathBuf, (PathBuf, bool)> = HashMap::new();
    for path in paths {
        let Ok(real) = std::fs::canonicalize(path) else {
            continue;
        };
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let slot = primary
            .entry(real)
            .or_insert_with(|| (path.clone(), is_link));
        if slot.1 && !is_link {
            *slot = (path.clone(), false);
        }
    }
    primary
        .into_iter()
        .map(|(real, (path, _))| (real, path))
        .collect()
}
