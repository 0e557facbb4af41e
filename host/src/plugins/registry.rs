//! Scanning the plugin directory: every `*.so` file is loaded or refused, in file-name
//! order; refusals are kept with their error so they can be reported, and the rest of
//! the directory still loads.

use std::path::{Path, PathBuf};

use drover_abi::PluginKind;

use super::{
    error::LoadError,
    loader::{LoadedPlugin, Loader},
};

/// The outcome for one file.
pub struct ScanEntry {
    /// The file.
    pub path: PathBuf,
    /// The loaded plugin, or why it was refused.
    pub result: Result<LoadedPlugin, LoadError>,
}

/// Everything found in a plugin directory.
pub struct PluginRegistry {
    dir: PathBuf,
    entries: Vec<ScanEntry>,
}

impl PluginRegistry {
    /// Loads every `*.so` in `dir`. Fails only when the directory cannot be listed.
    pub fn scan(loader: &Loader, dir: &Path) -> Result<PluginRegistry, LoadError> {
        let io = |source| LoadError::Io {
            path: dir.to_owned(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.extension().is_some_and(|e| e == "so") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        let mut registry = PluginRegistry {
            dir: dir.to_owned(),
            entries: Vec::with_capacity(paths.len()),
        };
        for path in paths {
            let result = loader
                .load(&path, None)
                .and_then(|plugin| registry.check_duplicate(plugin));
            if let Err(e) = &result {
                tracing::warn!("{e}");
            }
            registry.entries.push(ScanEntry { path, result });
        }
        Ok(registry)
    }

    /// A registry with no plugins (the plugin directory does not exist).
    pub fn empty(dir: &Path) -> PluginRegistry {
        PluginRegistry {
            dir: dir.to_owned(),
            entries: Vec::new(),
        }
    }

    fn check_duplicate(&self, plugin: LoadedPlugin) -> Result<LoadedPlugin, LoadError> {
        match self.find(plugin.summary.kind, &plugin.summary.name) {
            Some(first) => Err(LoadError::Duplicate {
                path: plugin.path.clone(),
                kind: plugin.summary.kind,
                name: plugin.summary.name.clone(),
                first: first.path.clone(),
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
    /// startup.
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
                refused: self.refused().count(),
            })
    }

    /// Every loaded plugin of `kind`, in file-name order.
    pub fn of_kind(&self, kind: PluginKind) -> impl Iterator<Item = &LoadedPlugin> {
        self.loaded().filter(move |p| p.summary.kind == kind)
    }
}
