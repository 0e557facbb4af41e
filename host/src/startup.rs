//! The plugin phase of broker startup: load the plugin directory, insist on every
//! plugin the config names (`plugins.required`), and start instances.
//!
//! A named plugin that fails to load or start stops startup with that plugin's error;
//! other broken files are reported (logged) and skipped (DESIGN.md, "Plugin ABI").

use std::{collections::BTreeMap, sync::Arc};

use drover_abi::PluginKind;

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
    /// The offset stores named in `plugins.required`, opened, by name.
    pub offset_stores: BTreeMap<String, Arc<OffsetStoreHandle>>,
}

impl StartedPlugins {
    /// Closes every opened offset store (flushing it); reports the first error.
    pub fn close(&self) -> Result<(), crate::plugins::CallError> {
        for store in self.offset_stores.values() {
            store.close()?;
        }
        Ok(())
    }

    /// One line per started plugin, for `drover plugins check`.
    pub fn describe(&self) -> String {
        let mut lines = Vec::new();
        for p in self.registry.loaded() {
            let s = &p.summary;
            let state = match s.kind {
                PluginKind::Assignor if self.assignors.contains_key(&s.name) => "started",
                PluginKind::OffsetStore if self.offset_stores.contains_key(&s.name) => "opened",
                _ => "loaded",
            };
            lines.push(format!("{} {} {} ({state})", s.kind, s.name, s.version));
        }
        let refused = self.registry.refused().count();
        lines.push(format!(
            "{} plugin(s) ready, {refused} file(s) refused",
            lines.len()
        ));
        lines.join("\n")
    }
}

/// Loads and starts the plugins `config` asks for.
pub fn load_plugins(config: &Config) -> Result<StartedPlugins, LoadError> {
    let loader = Loader::new(loader_options(config));
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
    let mut assignors = BTreeMap::new();
    for plugin in registry.of_kind(PluginKind::Assignor) {
        let name = &plugin.summary.name;
        match plugin.new_assignor(&config.plugin_config(name)) {
            Ok(handle) => {
                assignors.insert(name.clone(), Arc::new(handle));
            }
            Err(e) if required.contains(name) => return Err(e),
            Err(e) => tracing::warn!("{e}; skipped"),
        }
    }
    let mut offset_stores = BTreeMap::new();
    for plugin in registry.of_kind(PluginKind::OffsetStore) {
        let name = &plugin.summary.name;
        if required.contains(name) {
            let store = plugin.open_offset_store(&config.plugin_config(name))?;
            offset_stores.insert(name.clone(), Arc::new(store));
        }
    }
    Ok(StartedPlugins {
        registry,
        assignors,
        offset_stores,
    })
}
