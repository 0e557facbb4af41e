//! Swapping the active offset store on a running broker.
//!
//! Steps (DESIGN.md, "Offset stores and hot swap"): find the plugin (a file added to
//! the plugin directory after startup is loaded from a content-addressed copy), open
//! the new store with its config (and, in cluster mode, the broker's ZooKeeper session,
//! like the stores opened at startup) and health-check it, write new commits to both,
//! copy every existing offset across page by page, switch reads, then drain and close
//! the old store. If any step before the switch fails, the broker stays on the old
//! store and the status says why. Swapping back is just another swap, and so is
//! moving a store (a new instance of the same plugin with another config, e.g. the
//! embedded database on another disk).

use std::sync::Arc;

use drover_abi::{OffsetKey, PluginKind};

use super::{write, NamedStore, OffsetStores, Routing};
use crate::{
    broker::Broker,
    plugins::{LoadedPlugin, Loader, PluginRegistry},
};

/// Offsets copied per page (one store write each).
const PAGE: u32 = 1_000;

/// A swap request: the target plugin and its config (TOML text).
#[derive(Debug, Clone)]
pub struct SwapRequest {
    /// Offset-store plugin name.
    pub plugin: String,
    /// Its configuration, as TOML.
    pub config: String,
}

/// Why a swap could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwapError {
    /// No offset store is active (no coordinator or store configured).
    #[error("no offset store is active")]
    NoActiveStore,
    /// A swap is in progress.
    #[error("a swap to `{0}` is in progress")]
    Busy(String),
}

fn now_ms() -> i64 {
    crate::server::handlers::now_ms()
}

/// Marks the running swap as failed (called when a dual write to the new store
/// fails); the swap then rolls back at its next step.
pub(crate) fn fail(stores: &OffsetStores, why: String) {
    stores.set_status(|s| {
        if s.error.is_none() {
            s.error = Some(why);
        }
    });
}

/// Starts a swap on a thread of its own; follow it with [`OffsetStores::status`].
pub fn start(broker: &Arc<Broker>, request: SwapRequest) -> Result<(), SwapError> {
    let Some(stores) = broker.offsets() else {
        return Err(SwapError::NoActiveStore);
    };
    let active = stores.active_name();
    {
        let mut status = stores.status.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(status.state.as_str(), "idle" | "completed" | "failed") {
            return Err(SwapError::Busy(status.to.clone().unwrap_or_default()));
        }
        *status = super::SwapStatus {
            state: "opening".into(),
            from: Some(active),
            to: Some(request.plugin.clone()),
            started_ms: Some(now_ms()),
            ..Default::default()
        };
    }
    let broker = Arc::clone(broker);
    std::thread::Builder::new()
        .name("drover-offset-swap".into())
        .spawn(move || {
            let Some(stores) = broker.offsets() else { return };
            let result = run(&broker, &stores, &request);
            let finished = now_ms();
            match result {
                Ok(copied) => {
                    tracing::info!(to = %request.plugin, copied, "offset store swapped");
                    stores.set_status(|s| {
                        s.state = "completed".into();
                        s.finished_ms = Some(finished);
                    });
                }
                Err(why) => {
                    tracing::error!(to = %request.plugin, "offset store swap failed: {why}; staying on the old store");
                    stores.set_status(|s| {
                        s.state = "failed".into();
                        s.error.get_or_insert(why);
                        s.finished_ms = Some(finished);
                    });
                }
            }
        })
        .map_err(|_| SwapError::Busy(String::new()))?;
    Ok(())
}

/// Finds the loaded plugin `name`, rescanning the plugin directory for files added
/// since startup.
fn find_plugin(broker: &Broker, name: &str) -> Result<LoadedPlugin, String> {
    if let Some(p) = broker.plugins.registry.find(PluginKind::OffsetStore, name) {
        return Ok(p.clone());
    }
    let loader = Loader::new(crate::startup::loader_options(&broker.config));
    let registry = PluginRegistry::scan(&loader, &broker.config.plugins.dir)
        .map_err(|e| format!("rescanning the plugin directory: {e}"))?;
    registry
        .find(PluginKind::OffsetStore, name)
        .cloned()
        .ok_or_else(|| {
            let found: Vec<String> = registry
                .of_kind(PluginKind::OffsetStore)
                .map(|p| p.summary.name.clone())
                .collect();
            format!(
                "no offset-store plugin `{name}` in {} (offset stores there: {})",
                broker.config.plugins.dir.display(),
                if found.is_empty() {
                    "none".into()
                } else {
                    found.join(", ")
                }
            )
        })
}

/// The swap itself; returns how many offsets were copied.
fn run(broker: &Broker, stores: &OffsetStores, request: &SwapRequest) -> Result<u64, String> {
    let plugin = find_plugin(broker, &request.plugin)?;
    // In cluster mode the new store gets the broker's ZooKeeper session, as the stores
    // opened at startup do.
    let zookeeper = broker.cluster().map(crate::cluster::session::for_plugins);
    let new = plugin
        .open_offset_store_with(&request.config, zookeeper)
        .map_err(|e| format!("opening `{}`: {e}", request.plugin))?;
    let new = NamedStore {
        name: request.plugin.clone(),
        store: Arc::new(new),
    };
    if let Err(e) = new.store.list_groups() {
        let _ = new.store.close();
        return Err(format!("health check of `{}`: {e}", new.name));
    }
    let old = stores.reader();
    // From now on every commit goes to both stores.
    {
        let _gate = write(&stores.gate);
        *write(&stores.routing) = Routing::Dual {
            old: old.clone(),
            new: new.clone(),
            switched: false,
        };
    }
    match copy(stores, &old, &new) {
        Ok(copied) => {
            stores.set_status(|s| s.state = "switching".into());
            {
                let _gate = write(&stores.gate);
                *write(&stores.routing) = Routing::Dual {
                    old: old.clone(),
                    new: new.clone(),
                    switched: true,
                };
            }
            stores.set_status(|s| s.state = "draining".into());
            {
                let _gate = write(&stores.gate);
                *write(&stores.routing) = Routing::Single(new);
            }
            // No commit reaches the old store any more.
            if let Err(e) = old.store.flush().and_then(|()| old.store.close()) {
                tracing::warn!("closing the old offset store `{}`: {e}", old.name);
            }
            Ok(copied)
        }
        Err(why) => {
            {
                let _gate = write(&stores.gate);
                *write(&stores.routing) = Routing::Single(old);
            }
            let _ = new.store.close();
            Err(why)
        }
    }
}

/// Counts, then copies every offset of `old` into `new`, page by page, each page under
/// the exclusive gate so no dual-written commit is overwritten by an older copy.
fn copy(stores: &OffsetStores, old: &NamedStore, new: &NamedStore) -> Result<u64, String> {
    let mut total = 0u64;
    let mut after: Option<OffsetKey> = None;
    loop {
        let page = old
            .store
            .scan(after.take(), PAGE)
            .map_err(|e| format!("reading `{}`: {e}", old.name))?;
        let Some(last) = page.last() else { break };
        total += page.len() as u64;
        after = Some(last.key());
    }
    stores.set_status(|s| {
        s.state = "copying".into();
        s.total = total;
    });
    let mut copied = 0u64;
    let mut after: Option<OffsetKey> = None;
    loop {
        if let Some(why) = stores.status().error {
            return Err(why);
        }
        let _gate = write(&stores.gate);
        let page = old
            .store
            .scan(after.take(), PAGE)
            .map_err(|e| format!("reading `{}`: {e}", old.name))?;
        let Some(last) = page.last() else { break };
        after = Some(last.key());
        new.store
            .commit(&page)
            .map_err(|e| format!("writing to `{}`: {e}", new.name))?;
        drop(_gate);
        copied += page.len() as u64;
        stores.set_status(|s| s.copied = copied);
    }
    // The new store may hold offsets of its own (a store swapped away from earlier,
    // a shared table or chroot): groups the old store does not have — deleted since,
    // or expired by retention — must not come back. Under the gate, so no commit
    // creates a group meanwhile (commits reach both stores).
    {
        let _gate = write(&stores.gate);
        let keep: std::collections::BTreeSet<String> = old
            .store
            .list_groups()
            .map_err(|e| format!("reading `{}`: {e}", old.name))?
            .into_iter()
            .collect();
        for group in new
            .store
            .list_groups()
            .map_err(|e| format!("reading `{}`: {e}", new.name))?
        {
            if !keep.contains(&group) {
                new.store.delete_group(&group).map_err(|e| {
                    format!("removing stale group `{group}` from `{}`: {e}", new.name)
                })?;
                tracing::info!(%group, store = %new.name, "removed a group the old store no longer has");
            }
        }
    }
    new.store
        .flush()
        .map_err(|e| format!("flushing `{}`: {e}", new.name))?;
    // Commits that failed on the new store while the last page was copied.
    if let Some(why) = stores.status().error {
        return Err(why);
    }
    Ok(copied)
}
