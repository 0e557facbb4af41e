//! The plugin phase of broker startup: load the plugin directory, insist on every
//! plugin the config names (`plugins.required`), and start instances.
//!
//! A named plugin that fails to load or start stops startup with that plugin's error;
//! other broken files are reported (logged) and skipped (docs/design.md, "Plugin ABI").

use std::{collections::BTreeMap, sync::Arc};

use drover_abi::{host::ZkSessionArc, PluginKind};

use crate::{
    config::Config,
    offsets::{active, NamedStore},
    plugins::{
        AssignorHandle, AuthorizerHandle, LoadError, Loader, LoaderOptions, OffsetStoreHandle,
        PluginRegistry,
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
    /// The offset stores named in `plugins.required`, opened with their configs, by
    /// name; each is closed again unless it is the active store.
    pub offset_stores: BTreeMap<String, Arc<OffsetStoreHandle>>,
    /// The store to start as the active one ([`active::choose`]): normally
    /// `coordinator.offset_store`, or the store a swap made active before a restart.
    pub active: active::Choice,
    /// That store, opened (the same instance as in `offset_stores` when it is a
    /// required store with the same config); `None` when it did not open (`failed`
    /// says why).
    pub active_store: Option<NamedStore>,
    /// Loaded plugins that are not required and failed to start, by name, with why.
    pub failed: BTreeMap<String, String>,
    /// The configured authorizer (`[authorizer] plugin`), started; `None` when none is
    /// configured, and in cluster mode, where it starts once the broker's ZooKeeper
    /// session is connected (`crate::rescan::start_authorizer`).
    pub authorizer: Option<Arc<AuthorizerHandle>>,
}

impl StartedPlugins {
    /// Closes every offset store opened at startup (flushing it) that is not closed
    /// yet; reports the first error. The broker closes the store that is active at
    /// shutdown itself ([`crate::offsets::OffsetStores::close`]).
    pub fn close(&self) -> Result<(), crate::plugins::CallError> {
        let active = self.active_store.as_ref().map(|s| &s.store);
        for store in self.offset_stores.values().chain(active) {
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
                PluginKind::Authorizer
                    if self
                        .authorizer
                        .as_ref()
                        .is_some_and(|a| a.summary().name == s.name) =>
                {
                    "started, the configured authorizer".to_owned()
                }
                PluginKind::OffsetStore
                    if self.offset_stores.contains_key(&s.name)
                        || self.active_store.as_ref().is_some_and(|a| a.name == s.name) =>
                {
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
/// connects; `None` standalone. The active store is the configured one. Errors: a
/// plugin named in `plugins.required` that fails to load or start.
pub fn load_plugins_with_session(
    config: &Config,
    options: LoaderOptions,
    zookeeper: Option<ZkSessionArc>,
) -> Result<StartedPlugins, LoadError> {
    let active = active::Choice {
        active: active::StoreSpec::configured(config),
        recorded: false,
        remove_record: false,
    };
    load_plugins_with_active(config, options, zookeeper, active)
}

/// As [`load_plugins_with_session`], with `active` as the store to open as the active
/// one (`drover serve` reads it from the data directory, [`active::choose`]). Errors
/// also: a store recorded as active whose plugin is not in the plugin directory.
pub fn load_plugins_with_active(
    config: &Config,
    options: LoaderOptions,
    zookeeper: Option<ZkSessionArc>,
    active: active::Choice,
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
    let authorizer = start_authorizer(config, &registry, zookeeper.clone())?;
    let mut offset_stores = BTreeMap::new();
    for plugin in registry.of_kind(PluginKind::OffsetStore) {
        let name = &plugin.summary.name;
        if required.contains(name) {
            let store =
                plugin.open_offset_store_with(&config.plugin_config(name), zookeeper.clone())?;
            offset_stores.insert(name.clone(), Arc::new(store));
        }
    }
    let spec = &active.active;
    let shared = offset_stores.get(&spec.plugin).filter(|_| {
        spec.same_store(&active::StoreSpec {
            plugin: spec.plugin.clone(),
            config: config.plugin_config(&spec.plugin),
        })
    });
    // Only the active store stays open: a required store that is not the active one
    // was opened so that a broken one stops startup, and is closed again before the
    // active store opens (an embedded database left open would stay locked, and the
    // active store or a later swap could not open it).
    for (name, store) in &offset_stores {
        if !shared.is_some_and(|active| Arc::ptr_eq(active, store)) {
            if let Err(e) = store.close() {
                tracing::warn!("closing offset store `{name}` (required, not active): {e}");
            }
        }
    }
    let active_store = if let Some(store) = shared {
        Some(Arc::clone(store))
    } else {
        match registry.find(PluginKind::OffsetStore, &spec.plugin) {
            // The active store opens even when not required; if it cannot, the
            // coordinator does not start and says why.
            Some(plugin) => match plugin.open_offset_store_with(&spec.config, zookeeper.clone()) {
                Ok(store) => Some(Arc::new(store)),
                Err(e) => {
                    tracing::warn!("{e}; the coordinator cannot use it");
                    failed.insert(spec.plugin.clone(), e.to_string());
                    None
                }
            },
            None if active.recorded => {
                return Err(LoadError::RecordedStoreMissing {
                    store: spec.plugin.clone(),
                    dir: dir.clone(),
                    configured: config.coordinator.offset_store.clone(),
                })
            }
            None => None,
        }
    };
    if active.recorded && active_store.is_some() {
        tracing::warn!(
            store = %spec.plugin,
            configured = %config.coordinator.offset_store,
            "opened the offset store a swap made active before the restart (recorded in {}), not the one drover.toml names",
            active::path(&config.data_dir).display()
        );
    }
    let active_store = active_store.map(|store| NamedStore {
        name: spec.plugin.clone(),
        config: spec.config.clone(),
        store,
    });
    Ok(StartedPlugins {
        registry,
        assignors,
        offset_stores,
        active,
        active_store,
        failed,
        authorizer,
    })
}

/// Starts the authorizer `[authorizer] plugin` names, with its `[plugins.config.<name>]`
/// and, in cluster mode, the broker's ZooKeeper session. Errors (startup stops): the
/// plugin is not loaded, is not an authorizer, or refuses to start.
fn start_authorizer(
    config: &Config,
    registry: &PluginRegistry,
    zookeeper: Option<ZkSessionArc>,
) -> Result<Option<Arc<AuthorizerHandle>>, LoadError> {
    let Some(name) = &config.authorizer.plugin else {
        return Ok(None);
    };
    let plugin = registry.require(Some(PluginKind::Authorizer), name)?;
    if zookeeper.is_some() {
        // Cluster mode: the broker's ZooKeeper session connects only once the broker
        // runs, and an authorizer reads its ACLs through it when it starts; the broker
        // starts it then (`crate::rescan::start_authorizer`), denying everything until.
        return Ok(None);
    }
    let handle = plugin.new_authorizer(&config.plugin_config(name), zookeeper)?;
    tracing::info!(
        plugin = %name,
        version = %plugin.summary.version,
        "authorizer started: every request is authorized by it"
    );
    Ok(Some(Arc::new(handle)))
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
    if plugins.active_store.is_none() {
        return Err(format!(
            "coordinator.offset_store: offset store `{}` is not available ({})",
            plugins.active.active.plugin,
            plugins
                .failed
                .get(&plugins.active.active.plugin)
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
