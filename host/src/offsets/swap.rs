//! Swapping the active offset store on a running broker.
//!
//! Steps (docs/design.md, "Offset stores and hot swap"): find the plugin (a file added to
//! the plugin directory after startup is loaded from a content-addressed copy), open
//! the new store with its config (and, in cluster mode, the broker's ZooKeeper session,
//! like the stores opened at startup) and health-check it, write new commits to both,
//! copy every existing offset across page by page, switch reads, then drain and close
//! the old store. If any step before the switch fails, the broker stays on the old
//! store and the status says why. Swapping back is just another swap, and so is
//! moving a store (a new instance of the same plugin with another config, e.g. the
//! embedded database on another disk).
//!
//! The new store may already hold offsets: from an earlier time it was active, or
//! written by a swap that failed. The copy makes it hold exactly what the old store
//! holds: page by page, every key of the new store in the page's key range that the old
//! store lacks (deleted or expired meanwhile) makes that group's offsets in the new
//! store be replaced by the old store's ([`stale_groups`]). Just before the switch the
//! new store is recorded as the active one in the data directory
//! ([`super::active`]).

use std::sync::Arc;

use std::collections::BTreeSet;

use drover_abi::{OffsetKey, OffsetRecord, PluginKind};

use super::{active, write, NamedStore, OffsetStores, Routing};
use crate::{broker::Broker, clock::now_ms, plugins::LoadedPlugin};

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
    /// The broker is shutting down.
    #[error("the broker is shutting down")]
    ShuttingDown,
    /// The swap thread could not be started.
    #[error("cannot start the swap thread: {0}")]
    Thread(std::io::Error),
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
    if stores.is_stopping() {
        return Err(SwapError::ShuttingDown);
    }
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
    let thread = std::thread::Builder::new()
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
        .map_err(|e| {
            stores.set_status(|s| {
                s.state = "failed".into();
                s.error = Some(format!("cannot start the swap thread: {e}"));
            });
            SwapError::Thread(e)
        })?;
    // The previous swap's thread has ended (its state was final).
    *stores.swap_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
    Ok(())
}

/// Finds the loaded plugin `name`; when it is not loaded, rescans the plugin directory
/// first (the same rescan as `drover plugins rescan`), so a file added since startup
/// is a swap target.
fn find_plugin(broker: &Broker, name: &str) -> Result<LoadedPlugin, String> {
    if let Some(p) = broker.plugins.live.find(PluginKind::OffsetStore, name) {
        return Ok(p);
    }
    crate::rescan::run(broker).map_err(|e| format!("rescanning the plugin directory: {e}"))?;
    broker
        .plugins
        .live
        .find(PluginKind::OffsetStore, name)
        .ok_or_else(|| {
            let found = broker.plugins.live.names(PluginKind::OffsetStore);
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
        config: request.config.clone(),
        store: Arc::new(new),
    };
    if let Err(e) = new.store.list_groups() {
        let _ = new.store.close();
        return Err(format!("health check of `{}`: {e}", new.name));
    }
    let old = stores.reader();
    // From now on every commit goes to both stores — unless shutdown began: it does
    // not wait for a swap that is still opening its store.
    {
        let _shutdown = stores.swap_thread.lock().unwrap_or_else(|e| e.into_inner());
        if stores.is_stopping() {
            let _ = new.store.close();
            return Err("the broker is shutting down".into());
        }
        let _gate = write(&stores.gate);
        *write(&stores.routing) = Routing::Dual {
            old: old.clone(),
            new: new.clone(),
            switched: false,
        };
    }
    let switched = copy(stores, &old, &new).and_then(|copied| {
        // Share-group state (offset-store ABI 3.2) follows with the same promise.
        let shares = super::share_state::copy(stores, &old, &new)?;
        if shares > 0 {
            tracing::info!(to = %new.name, shares, "share-partition states copied");
        }
        stores.set_status(|s| s.state = "switching".into());
        // Under the gate: no commit or deletion runs between the last check for a
        // failed dual write, the record and the switch.
        let _gate = write(&stores.gate);
        if let Some(why) = stores.status().error {
            return Err(why);
        }
        let configured = active::StoreSpec::configured(&broker.config);
        active::set_active(&broker.config.data_dir, &new.spec(), &configured, now_ms())
            .map_err(|e| format!("recording the active offset store: {e}"))?;
        *write(&stores.routing) = Routing::Dual {
            old: old.clone(),
            new: new.clone(),
            switched: true,
        };
        Ok(copied)
    });
    match switched {
        Ok(copied) => {
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
/// the exclusive gate so no dual-written commit is overwritten by an older copy. With
/// each page, groups of `new` holding keys in the page's range that `old` lacks are
/// made equal to `old`'s ([`reconcile`]); after the last page, the rest of `new`.
fn copy(stores: &OffsetStores, old: &NamedStore, new: &NamedStore) -> Result<u64, String> {
    let mut total = 0u64;
    let mut after: Option<OffsetKey> = None;
    loop {
        if stores.is_stopping() {
            return Err("the broker is shutting down".into());
        }
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
        if stores.is_stopping() {
            return Err("the broker is shutting down".into());
        }
        let _gate = write(&stores.gate);
        let page = old
            .store
            .scan(after.clone(), PAGE)
            .map_err(|e| format!("reading `{}`: {e}", old.name))?;
        // The page covers keys after `after` up to its last key; an empty page, the
        // rest of the key space.
        let end = page.last().map(|r| r.key());
        reconcile(old, new, &page, after.as_ref(), end.as_ref())?;
        let Some(end) = end else { break };
        new.store
            .commit(&page)
            .map_err(|e| format!("writing to `{}`: {e}", new.name))?;
        drop(_gate);
        after = Some(end);
        copied += page.len() as u64;
        stores.set_status(|s| s.copied = copied);
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

/// Removes from `new` what `old` does not hold in the key range (`after`, `end`]
/// (`end` `None`: to the end), `page` being `old`'s records in that range: each group
/// of `new` with such a key gets exactly `old`'s offsets of that group. Called under
/// the exclusive gate.
fn reconcile(
    old: &NamedStore,
    new: &NamedStore,
    page: &[OffsetRecord],
    after: Option<&OffsetKey>,
    end: Option<&OffsetKey>,
) -> Result<(), String> {
    let source: BTreeSet<OffsetKey> = page.iter().map(OffsetRecord::key).collect();
    let mut stale = BTreeSet::new();
    let mut cursor = after.cloned();
    loop {
        let theirs = new
            .store
            .scan(cursor.take(), PAGE)
            .map_err(|e| format!("reading `{}`: {e}", new.name))?;
        let Some(last) = theirs.last().map(OffsetRecord::key) else {
            break;
        };
        let in_range: Vec<OffsetKey> = theirs
            .iter()
            .map(OffsetRecord::key)
            .filter(|k| end.is_none_or(|end| k <= end))
            .collect();
        let done = in_range.len() < theirs.len();
        stale.extend(stale_groups(&source, &in_range));
        if done {
            break;
        }
        cursor = Some(last);
    }
    for group in stale {
        let keep = old
            .store
            .fetch_group(&group)
            .map_err(|e| format!("reading `{}`: {e}", old.name))?;
        new.store.delete_group(&group).map_err(|e| {
            format!(
                "removing stale offsets of group `{group}` from `{}`: {e}",
                new.name
            )
        })?;
        if !keep.is_empty() {
            new.store
                .commit(&keep)
                .map_err(|e| format!("writing to `{}`: {e}", new.name))?;
        }
        tracing::info!(%group, store = %new.name, kept = keep.len(),
            "removed offsets the old store no longer has from the new store");
    }
    Ok(())
}

/// The groups of `target` keys that are not in `source`.
pub fn stale_groups(source: &BTreeSet<OffsetKey>, target: &[OffsetKey]) -> BTreeSet<String> {
    target
        .iter()
        .filter(|k| !source.contains(*k))
        .map(|k| k.group.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, topic: &str, partition: i32) -> OffsetKey {
        OffsetKey {
            group: group.into(),
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn groups_with_keys_the_source_lacks_are_stale() {
        let source: BTreeSet<OffsetKey> = [key("a", "t", 1), key("b", "t", 0)].into();
        // `a`-t-0 was deleted from the source (OffsetDelete), `c` entirely
        // (DeleteGroups, retention); `b` is the same on both.
        let target = [
            key("a", "t", 0),
            key("a", "t", 1),
            key("b", "t", 0),
            key("c", "u", 3),
        ];
        assert_eq!(
            stale_groups(&source, &target),
            BTreeSet::from(["a".to_string(), "c".to_string()])
        );
        // Keys only in the source are copied, not stale.
        assert!(stale_groups(&source, &[key("b", "t", 0)]).is_empty());
    }
}
