//! The live plugin directory: what `drover plugins rescan` (`POST /v1/plugins/rescan`)
//! changes in a running broker.
//!
//! A rescan lists the plugin directory again and, file by file:
//! - a file loaded before with the same SHA-256 is kept as it is (no reload);
//! - a new file, a replaced file (other bytes under the same name) and a file refused
//!   before are loaded with every startup check ([`super::Loader`]);
//! - a file that is refused now changes nothing: a replacement that fails leaves the
//!   version loaded before in place, and the refusal is reported with its reason;
//! - a file that is gone removes its plugin from what can be selected (an assignor from
//!   the set groups choose from, an offset store from the swap targets), except the
//!   default assignor, which stays (groups fall back to it).
//!
//! New and replaced assignors are started with their `[plugins.config.<name>]`; the
//! caller hands the new set to the coordinator (`CoordinatorInput::AssignorsChanged`),
//! whose rebalances that start afterwards use it. New offset stores become swap targets
//! (`POST /v1/offset-store`); the active store keeps running the version it opened. A
//! new or replaced coordinator file takes effect at the next start.
//!
//! Libraries are never unloaded (abi_stable keeps them mapped, and instances may be in
//! use), so every distinct file loaded stays in memory until the broker stops:
//! [`LivePlugins::rescan`] refuses a file that would make more than
//! `plugins.max_loaded_libraries` distinct libraries (docs/plugins.md gives the memory
//! cost per library).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard},
};

use drover_abi::PluginKind;
use serde::Serialize;

use super::{
    checks,
    error::LoadError,
    handle::AssignorHandle,
    loader::{LoadedPlugin, Loader},
    registry::{list_plugin_files, primary_names, PluginRegistry},
    table::Row,
};

/// One file of the live directory.
#[derive(Clone)]
pub struct LiveEntry {
    /// The file.
    pub path: PathBuf,
    /// SHA-256 of the version in use (or of the refused file, when it was read).
    pub sha256: Option<String>,
    /// The plugin in use from this file, or why the file is refused.
    pub outcome: Result<LoadedPlugin, String>,
}

/// A plugin a rescan added, replaced or removed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginChange {
    /// `assignor`, `offset-store` or `coordinator`.
    pub kind: String,
    /// The plugin's name.
    pub name: String,
    /// Its version (the new one for a replacement).
    pub version: String,
    /// The file, by name.
    pub file: String,
    /// What the change means for the running broker, when it is not the obvious.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A file a rescan refused; nothing changed because of it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Refusal {
    /// The file, by name.
    pub file: String,
    /// Why, with a hint.
    pub reason: String,
}

/// What one rescan did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RescanReport {
    /// Plugins whose name was not loaded before.
    pub added: Vec<PluginChange>,
    /// Plugins loaded from a file with other bytes than before.
    pub replaced: Vec<PluginChange>,
    /// Plugins whose file is gone.
    pub removed: Vec<PluginChange>,
    /// Files refused by this rescan.
    pub refused: Vec<Refusal>,
    /// Of [`Self::refused`], the files not refused for the same reason in the same
    /// version by the rescan before (what `drover_plugin_files_refused_total` counts).
    #[serde(skip)]
    pub newly_refused: usize,
    /// Files kept as they were.
    pub unchanged: usize,
    /// Distinct plugin libraries loaded in this process (never unloaded).
    pub libraries_loaded: usize,
    /// `plugins.max_loaded_libraries`.
    pub max_loaded_libraries: usize,
    /// Whether the set of assignors changed (the coordinator must be told).
    #[serde(skip)]
    pub assignors_changed: bool,
}

struct LiveState {
    entries: Vec<LiveEntry>,
    /// The refusals of the last rescan, by file version ([`refusal_key`]): a file
    /// refused again unchanged is not counted again.
    refused: HashSet<RefusalKey>,
    assignors: BTreeMap<String, Arc<AssignorHandle>>,
    /// SHA-256 of every library loaded into this process.
    libraries: HashSet<String>,
}

/// The plugin directory of a running broker and the assignors started from it.
pub struct LivePlugins {
    dir: PathBuf,
    loader: Loader,
    max_libraries: usize,
    state: Mutex<LiveState>,
}

/// How a rescan starts new assignors: `(name) -> instance or why not`.
pub type StartAssignor<'a> = dyn Fn(&LoadedPlugin) -> Result<AssignorHandle, String> + 'a;

/// What a rescan calls, still holding its lock (so two rescans never deliver their sets
/// out of order), when the set of assignors changed: the whole new set.
pub type AssignorsChanged<'a> = dyn Fn(&BTreeMap<String, Arc<AssignorHandle>>) + 'a;

impl LivePlugins {
    /// The directory as the startup scan left it, with the assignors started then.
    pub fn new(
        registry: &PluginRegistry,
        assignors: &BTreeMap<String, Arc<AssignorHandle>>,
        loader: Loader,
        max_libraries: usize,
    ) -> LivePlugins {
        let entries: Vec<LiveEntry> = registry
            .entries()
            .iter()
            .map(|e| LiveEntry {
                path: e.path.clone(),
                sha256: e.sha256.clone(),
                outcome: match &e.result {
                    Ok(p) => Ok(p.clone()),
                    Err(_) => Err(e.reason().unwrap_or_default()),
                },
            })
            .collect();
        let libraries = registry.loaded().map(|p| p.sha256.clone()).collect();
        LivePlugins {
            dir: registry.dir().to_owned(),
            loader,
            max_libraries,
            state: Mutex::new(LiveState {
                // The files refused at startup count as already reported.
                refused: entries
                    .iter()
                    .filter_map(|e| e.outcome.as_ref().err().map(|r| refusal_key(&e.path, r)))
                    .collect(),
                entries,
                assignors: assignors.clone(),
                libraries,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The started assignors, by name.
    pub fn assignors(&self) -> BTreeMap<String, Arc<AssignorHandle>> {
        self.lock().assignors.clone()
    }

    /// The loaded plugin of `kind` named `name`.
    pub fn find(&self, kind: PluginKind, name: &str) -> Option<LoadedPlugin> {
        self.lock()
            .entries
            .iter()
            .filter_map(|e| e.outcome.as_ref().ok())
            .find(|p| p.summary.kind == kind && p.summary.name == name)
            .cloned()
    }

    /// The loaded plugins of `kind`, by name.
    pub fn names(&self, kind: PluginKind) -> Vec<String> {
        self.lock()
            .entries
            .iter()
            .filter_map(|e| e.outcome.as_ref().ok())
            .filter(|p| p.summary.kind == kind)
            .map(|p| p.summary.name.clone())
            .collect()
    }

    /// `GET /v1/plugins` and `drover plugins list` rows for the directory as it is now.
    pub fn rows(&self) -> Vec<Row> {
        let state = self.lock();
        state
            .entries
            .iter()
            .map(|e| super::table::row(&e.path, e.sha256.as_deref(), e.outcome.as_ref()))
            .collect()
    }

    /// Distinct plugin libraries loaded in this process so far.
    pub fn libraries_loaded(&self) -> usize {
        self.lock().libraries.len()
    }

    /// Rescans the directory (module docs). `default_assignor` is never removed;
    /// `start` starts a new or replaced assignor; `changed` gets the new set of
    /// assignors when it changed. Errors only when the directory cannot be listed or the
    /// plugin cache is unusable: then nothing changed.
    pub fn rescan(
        &self,
        default_assignor: &str,
        start: &StartAssignor<'_>,
        changed: &AssignorsChanged<'_>,
    ) -> Result<RescanReport, LoadError> {
        let mut state = self.lock();
        let paths = list_plugin_files(&self.dir)?;
        self.loader.prepare_cache()?;
        let primary = primary_names(&paths);
        let before = loaded_by_name(&state.entries);
        // A name a file still in the directory provides is taken, whatever its place in
        // the file-name order: the plugin already running keeps it.
        let listed: HashSet<&PathBuf> = paths.iter().collect();
        let taken: BTreeMap<String, (PathBuf, PluginKind)> = state
            .entries
            .iter()
            .filter(|e| listed.contains(&e.path))
            .filter_map(|e| e.outcome.as_ref().ok())
            .map(|p| (p.summary.name.clone(), (p.path.clone(), p.summary.kind)))
            .collect();
        let mut old: HashMap<PathBuf, LiveEntry> = std::mem::take(&mut state.entries)
            .into_iter()
            .map(|e| (e.path.clone(), e))
            .collect();
        let mut report = RescanReport {
            max_loaded_libraries: self.max_libraries,
            ..RescanReport::default()
        };
        let mut entries: Vec<LiveEntry> = Vec::with_capacity(paths.len());
        for path in paths {
            let previous = old.remove(&path);
            let unchanged = previous.as_ref().map(|p| p.sha256.clone());
            let (entry, refusal) =
                self.rescan_file(&mut state, &path, previous, &primary, &entries, &taken);
            match refusal {
                Some(reason) => report.refused.push(Refusal {
                    file: file_name(&path),
                    reason,
                }),
                None if unchanged == Some(entry.sha256.clone()) => report.unchanged += 1,
                None => {}
            }
            entries.push(entry);
        }
        state.entries = entries;
        let after = loaded_by_name(&state.entries);
        self.apply(
            &mut state,
            &before,
            &after,
            &mut report,
            default_assignor,
            start,
        );
        let refused: HashSet<RefusalKey> = report
            .refused
            .iter()
            .map(|r| refusal_key(&self.dir.join(&r.file), &r.reason))
            .collect();
        report.newly_refused = refused.difference(&state.refused).count();
        state.refused = refused;
        report.libraries_loaded = state.libraries.len();
        if report.assignors_changed {
            changed(&state.assignors);
        }
        Ok(report)
    }

    /// Starts new and replaced assignors, drops removed ones (not the default), and
    /// fills the report's added/replaced/removed lists.
    fn apply(
        &self,
        state: &mut LiveState,
        before: &BTreeMap<String, LoadedPlugin>,
        after: &BTreeMap<String, LoadedPlugin>,
        report: &mut RescanReport,
        default_assignor: &str,
        start: &StartAssignor<'_>,
    ) {
        for (name, plugin) in after {
            let replaced = match before.get(name) {
                Some(old)
                    if old.sha256 == plugin.sha256 && old.summary.kind == plugin.summary.kind =>
                {
                    continue
                }
                Some(_) => true,
                None => false,
            };
            let note = match plugin.summary.kind {
                PluginKind::Assignor => match start(plugin) {
                    Ok(handle) => {
                        state.assignors.insert(name.clone(), Arc::new(handle));
                        report.assignors_changed = true;
                        if replaced {
                            "rebalances that start from now on use this version"
                        } else {
                            "selectable by name from the next rebalance"
                        }
                    }
                    Err(why) => {
                        let reason =
                            format!("assignor `{name}` did not start with its config: {why}");
                        // Refused like a file that did not load: a replacement leaves the
                        // version before in use (and in the listing); a new file is listed
                        // as refused, and the next rescan tries it again.
                        if let Some(entry) =
                            state.entries.iter_mut().find(|e| e.path == plugin.path)
                        {
                            match before.get(name).filter(|old| old.path == plugin.path) {
                                Some(old) => {
                                    entry.sha256 = Some(old.sha256.clone());
                                    entry.outcome = Ok(old.clone());
                                }
                                None => entry.outcome = Err(reason.clone()),
                            }
                        }
                        report.refused.push(Refusal {
                            file: file_name(&plugin.path),
                            reason,
                        });
                        continue;
                    }
                },
                PluginKind::OffsetStore if replaced => {
                    "the active store keeps the version it opened; swaps and restarts use this one"
                }
                PluginKind::OffsetStore => "a swap target (POST /v1/offset-store)",
                PluginKind::Coordinator => "takes effect when the broker restarts",
                PluginKind::Authorizer => {
                    "decides requests from the next one if it is the configured authorizer ([authorizer] plugin)"
                }
            };
            let change = change(plugin, Some(note.to_owned()));
            if replaced {
                report.replaced.push(change);
            } else {
                report.added.push(change);
            }
        }
        for (name, plugin) in before {
            if after.contains_key(name) {
                continue;
            }
            let mut note = None;
            if plugin.summary.kind == PluginKind::Assignor {
                if name == default_assignor {
                    note = Some(
                        "kept running: it is the default assignor; put its file back, or the \
                         broker will not start again"
                            .to_owned(),
                    );
                } else if state.assignors.remove(name).is_some() {
                    report.assignors_changed = true;
                    note = Some(format!(
                        "groups that name it use the default assignor `{default_assignor}` from their next rebalance"
                    ));
                }
            }
            report.removed.push(change(plugin, note));
        }
    }

    /// One file of a rescan: the entry to keep and, when refused now, why.
    fn rescan_file(
        &self,
        state: &mut LiveState,
        path: &Path,
        previous: Option<LiveEntry>,
        primary: &HashMap<PathBuf, PathBuf>,
        so_far: &[LiveEntry],
        taken: &BTreeMap<String, (PathBuf, PluginKind)>,
    ) -> (LiveEntry, Option<String>) {
        let refused = |reason: String, sha256: Option<String>| {
            // A refused replacement leaves the version loaded before in place.
            match &previous {
                Some(p) if p.outcome.is_ok() => (p.clone(), Some(reason)),
                _ => (
                    LiveEntry {
                        path: path.to_owned(),
                        sha256,
                        outcome: Err(reason.clone()),
                    },
                    Some(reason),
                ),
            }
        };
        if let Ok(real) = std::fs::canonicalize(path) {
            if let Some(first) = primary.get(&real).filter(|first| *first != path) {
                let e = LoadError::SameFile {
                    path: path.to_owned(),
                    first: first.clone(),
                    canonical: real,
                };
                return refused(reason_of(path, &e), None);
            }
        }
        let checked = match checks::check_file(path, &self.loader.options().allowlist) {
            Ok(file) => file,
            Err(e) => return refused(reason_of(path, &e), None),
        };
        let sha = checked.sha256.clone();
        if let Some(p) = &previous {
            if p.outcome.is_ok() && p.sha256.as_deref() == Some(sha.as_str()) {
                return (p.clone(), None);
            }
        }
        if !state.libraries.contains(&sha) && state.libraries.len() >= self.max_libraries {
            let e = LoadError::LibraryLimit {
                path: path.to_owned(),
                loaded: state.libraries.len(),
            };
            return refused(reason_of(path, &e), Some(sha));
        }
        let plugin = match self.loader.load_checked(path, checked, None) {
            Ok(plugin) => plugin,
            Err(e) => return refused(reason_of(path, &e), Some(sha)),
        };
        state.libraries.insert(plugin.sha256.clone());
        // Names are unique across kinds: a file with a name another file provides — a
        // plugin already running, or one loaded earlier in this rescan — is refused; the
        // file it replaces (same path) does not count.
        let running = taken
            .get(&plugin.summary.name)
            .filter(|(other, _)| other != path)
            .cloned();
        let earlier = so_far
            .iter()
            .filter_map(|e| e.outcome.as_ref().ok())
            .find(|p| p.summary.name == plugin.summary.name)
            .map(|p| (p.path.clone(), p.summary.kind));
        if let Some((first, first_kind)) = running.or(earlier) {
            let e = LoadError::Duplicate {
                path: path.to_owned(),
                kind: plugin.summary.kind,
                name: plugin.summary.name.clone(),
                first,
                first_kind,
            };
            return refused(reason_of(path, &e), Some(plugin.sha256));
        }
        (
            LiveEntry {
                path: path.to_owned(),
                sha256: Some(plugin.sha256.clone()),
                outcome: Ok(plugin),
            },
            None,
        )
    }
}

/// The loaded plugins of `entries`, by name.
fn loaded_by_name(entries: &[LiveEntry]) -> BTreeMap<String, LoadedPlugin> {
    entries
        .iter()
        .filter_map(|e| e.outcome.as_ref().ok())
        .map(|p| (p.summary.name.clone(), p.clone()))
        .collect()
}

fn change(plugin: &LoadedPlugin, note: Option<String>) -> PluginChange {
    PluginChange {
        kind: plugin.summary.kind.to_string(),
        name: plugin.summary.name.clone(),
        version: plugin.summary.version.clone(),
        file: file_name(&plugin.path),
        note,
    }
}

/// The file's name, for reports.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A refused file version and why: the path, its length and modification time (a
/// replaced file is another version) and the reason.
type RefusalKey = (PathBuf, Option<(u64, std::time::SystemTime)>, String);

fn refusal_key(path: &Path, reason: &str) -> RefusalKey {
    let version = std::fs::metadata(path)
        .ok()
        .and_then(|m| Some((m.len(), m.modified().ok()?)));
    (path.to_owned(), version, reason.to_owned())
}

/// A load error without its leading path and `refused:` word.
fn reason_of(path: &Path, e: &LoadError) -> String {
    let text = e.to_string();
    let prefix = format!("{}: ", path.display());
    let reason = text.strip_prefix(&prefix).unwrap_or(&text);
    reason
        .strip_prefix("refused: ")
        .unwrap_or(reason)
        .to_owned()
}
