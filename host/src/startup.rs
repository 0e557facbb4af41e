//! The plugin phase of broker startup: load the plugin directory, insist on every
//! plugin the config names (`plugins.required`), and start instances.
//!
//! A named plugin that fails to load or start stops startup with that plugin's error;
//! other broken files are reported (logged) and skipped (DESIGN.md, "Plugin ABI").

use std::{collections::BTreeMap, sync::Arc};

use drover_abi::{host::ZkSessionArc, PluginKind};

use crate::{
    config::Config,
    plugins::{
        AssignorHandle, LoadError, Loader, LoaderOptions, OffsetStoreHandle, PluginRegistry,
    },
};

/// Loader options from the config: cache directory and allowlist.
pub fn loader_options(config: &Config) -> LoaderOptions {
    LoaderOptions {
        cache_dir: config.plugin_cache_dir(),
        allowlist: config
            .plugins
            .sha256_allowlist
            .iter()
            .map(|d| d.to_ascii_lowercase())
            .collect(),
    }
}

/// The plugins a broker runs with.
pub struct StartedPlugins {
    /// Everything found in the plugin directory.
    pub registry: PluginRegistry,
    /// Every assignor that started, by name (groups select them by name).
    pub assignors: BTreeMap<String, Arc<AssignorHandle>>,
    /// The offset stores named in `plugins.required`, and the active one
    /// (`coordinator.offset_store`), opened, by name.
    pub offset_stores: BTreeMap<String, Arc<OffsetStoreHandle>>,
    /// Loaded plugins that are not required and failed to start, by name, with why.
    pub failed: BTreeMap<String, String>,
}

impl StartedPlugins {
    /// Closes every opened offset store (flushing it); reports the first error.
    pub fn close(&self) -> Result<(), crate::plugins::CallError> {
        for store in self.offset_stores.values() {
            store.close()?;
        }
        Ok(())
    }

    /// One line per loaded plugin and a summary, for `drover plugins check`. A plugin
    /// that failed to start is not counted as ready.
    pub fn describe(&self) -> String {
        let mut lines = Vec::new();
        let mut ready = 0;
        for p in self.registry.loaded() {
            let s = &p.summary;
            let state = match s.kind {
                PluginKind::Assignor if self.assignors.contains_key(&s.name) => {
                    "started".to_owned()
                }
                PluginKind::OffsetStore if self.offset_stores.contains_key(&s.name) => {
                    "opened".to_owned()
                }
                _ => match self.failed.get(&s.name) {
                    Some(why) => format!("failed to start: {why}"),
                    None => "loaded".to_owned(),
                },
            };
            if !self.failed.contains_key(&s.name) {
                ready += 1;
            }
            lines.push(format!("{} {} {} ({state})", s.kind, s.name, s.version));
        }
        let refused = self.registry.refused().count();
        lines.push(format!(
            "{ready} plugin(s) ready, {} failed to start, {refused} file(s) refused",
            self.failed.len()
        ));
        lines.join("\n")
    }
}

/// Loads and starts the plugins `config` asks for, with the config's plugin cache.
pub fn load_plugins(config: &Config) -> Result<StartedPlugins, LoadError> {
    load_plugins_with(config, loader_options(config))
}

/// Loads and starts the plugins `config` asks for, with loader `options` (for commands
/// that run without the config's data directory).
pub fn load_plugins_with(
    config: &Config,
    options: LoaderOptions,
) -> Result<StartedPlugins, LoadError> {
    load_plugins_with_session(config, options, None)
}

/// Loads and starts the plugins `config` asks for, with loader `options`; offset stores
/// get `zookeeper` in their `HostServices` — in cluster mode the broker's lendable
/// session ([`crate::cluster::session::for_plugins`]), made before the cluster task
/// connects; `None` standalone. Errors: a plugin named in `plugins.required` that fails
/// to load or start.
pub fn load_plugins_with_session(
    config: &Config,
    options: LoaderOptions,
    zookeeper: Option<ZkSessionArc>,
) -> Result<StartedPlugins, LoadError> {
    let loader = Loader::new(options);
    let required = &config.plugins.required;
    let dir = &config.plugins.dir;
    let registry = if !dir.exists() && required.is_empty() {
        tracing::warn!(
            "plugin directory {} does not exist; running without plugins",
            dir.display()
        );
        PluginRegistry::empty(dir)
    } else {
        PluginRegistry::scan(&loader, dir)?
    };
    for name in required {
        registry.require(None, name)?;
    }
    for name in config.plugins.config.keys() {
        if !registry.loaded().any(|p| &p.summary.name == name) {
            let loaded: Vec<&str> = registry.loaded().map(|p| p.summary.name.as_str()).collect();
            tracing::warn!(
                "[plugins.config.{name}] names no loaded plugin and is ignored; loaded plugins: {}",
                if loaded.is_empty() {
                    "none".to_owned()
                } else {
                    loaded.join(", ")
                }
            );
        }
    }
    let mut assignors = BTreeMap::new();
    let mut failed = BTreeMap::new();
    for plugin in registry.of_kind(PluginKind::Assignor) {
        let name = &plugin.summary.name;
        match plugin.new_assignor(&config.plugin_config(name)) {
            Ok(handle) => {
                assignors.insert(name.clone(), Arc::new(handle));
            }
            Err(e) if required.contains(name) => return Err(e),
            Err(e) => {
                tracing::warn!("{e}; skipped");
                let why = match &e {
                    LoadError::Instantiate { error, .. } => error.to_string(),
                    other => other.to_string(),
                };
                failed.insert(name.clone(), why);
            }
        }
    }
    let mut offset_stores = BTreeMap::new();
    for plugin in registry.of_kind(PluginKind::OffsetStore) {
        let name = &plugin.summary.name;
        let open = || plugin.open_offset_store_with(&config.plugin_config(name), zookeeper.clone());
        if required.contains(name) {
            let store = open()?;
            offset_stores.insert(name.clone(), Arc::new(store));
        } else if *name == config.coordinator.offset_store {
            // The active store opens even when not required; if it cannot, the
            // coordinator does not start and says why.
            match open() {
                Ok(store) => {
                    offset_stores.insert(name.clone(), Arc::new(store));
                }
                Err(e) => {
                    tracing::warn!("{e}; the coordinator cannot use it");
                    failed.insert(name.clone(), e.to_string());
                }
            }
        }
    }
    Ok(StartedPlugins {
        registry,
        assignors,
        offset_stores,
        failed,
    })
}

/// The checks `drover serve` makes when it starts the coordinator, for `drover plugins
/// check`: if the coordinator plugin is loaded, its default assignor must have started,
/// its offset store must be open, and the plugin must accept its config (it is started
/// once, with no topics, and dropped).
pub fn check_coordinator(config: &Config, plugins: &StartedPlugins) -> Result<(), String> {
    let section = &config.coordinator;
    let Some(plugin) = plugins
        .registry
        .of_kind(PluginKind::Coordinator)
        .find(|p| p.summary.name == section.plugin)
    else {
        return Ok(());
    };
    if !plugins.offset_stores.contains_key(&section.offset_store) {
        return Err(format!(
            "coordinator.offset_store: offset store `{}` is not available ({})",
            section.offset_store,
            plugins
                .failed
                .get(&section.offset_store)
                .cloned()
                .unwrap_or_else(|| "not loaded".into())
        ));
    }
    if !plugins.assignors.contains_key(&section.default_assignor) {
        return Err(format!(
            "coordinator.default_assignor: assignor `{}` is not loaded (loaded: {})",
            section.default_assignor,
            plugins
                .assignors
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let startup = drover_abi::coordinator::CoordinatorStartup {
        broker_id: config.server.broker_id,
        assignors: plugins
            .assignors
            .iter()
            .map(|(name, handle)| drover_abi::coordinator::NamedAssignor {
                name: name.as_str().into(),
                assignor: handle.instance(),
            })
            .collect(),
        default_assignor: section.default_assignor.as_str().into(),
        topics: Default::default(),
    };
    plugin
        .start_coordinator(&config.plugin_config(&section.plugin), startup)
        .map(drop)
        .map_err(|e| e.to_string())
}
