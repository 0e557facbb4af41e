//! The broker's side of a plugin directory rescan: load what was added or replaced
//! since startup ([`crate::plugins::LivePlugins::rescan`]), start assignor instances
//! with their config, hand the running coordinator the new set of assignors
//! (`CoordinatorInput::AssignorsChanged`) when it changed, and log and count what it
//! did; when the configured authorizer's file was added or replaced, start the new
//! version and make it the one every later request asks. Called by the admin API (`POST /v1/plugins/rescan`, [`crate::admin`]) and by an
//! offset-store swap naming a store not loaded yet ([`crate::offsets::swap`]).

use std::sync::Arc;

use crate::broker::Broker;

/// Runs one rescan, tells the running coordinator when the assignors changed, and logs
/// and counts what it did. Blocking: runs on a blocking thread (the admin handler, the
/// offset-store swap thread).
pub fn run(broker: &Broker) -> Result<crate::plugins::RescanReport, String> {
    let config = &broker.config;
    let start = |plugin: &crate::plugins::LoadedPlugin| {
        plugin
            .new_assignor(&config.plugin_config(&plugin.summary.name))
            .map_err(|e| match e {
                crate::plugins::LoadError::Instantiate { error, .. } => error.to_string(),
                other => other.to_string(),
            })
    };
    // Told under the rescan's lock, so overlapping rescans reach the coordinator in order.
    let changed =
        |assignors: &std::collections::BTreeMap<String, Arc<crate::plugins::AssignorHandle>>| {
            if let Some(coordinator) = broker.coordinator() {
                let default = &config.coordinator.default_assignor;
                if let Err(e) =
                    coordinator.assignors_changed(broker.plugins.budgets.named(assignors), default)
                {
                    tracing::warn!("telling the coordinator about the new assignors: {e}");
                }
            }
        };
    let result = broker
        .plugins
        .live
        .rescan(&config.coordinator.default_assignor, &start, &changed);
    // Every new or replaced file was read whole (to check and hash it) and copied: give
    // those buffers back rather than keep the high-water mark of the largest rescan.
    crate::server::trim::release_free_memory();
    match result {
        Ok(report) => {
            for refusal in &report.refused {
                tracing::warn!(
                    file = refusal.file,
                    "plugin rescan refused a file: {}",
                    refusal.reason
                );
            }
            for (what, changes) in [
                ("added", &report.added),
                ("replaced", &report.replaced),
                ("removed", &report.removed),
            ] {
                for c in changes {
                    if what == "removed" && c.name == config.coordinator.default_assignor {
                        tracing::warn!(
                            file = c.file,
                            "the default assignor's file was removed: `{}` keeps running, but the broker will not start again until the file is back",
                            c.name
                        );
                        continue;
                    }
                    tracing::info!(
                        kind = c.kind,
                        name = c.name,
                        version = c.version,
                        file = c.file,
                        note = c.note.as_deref().unwrap_or(""),
                        "plugin rescan: {what}"
                    );
                }
            }
            swap_authorizer(broker, &report);
            let changed = !(report.added.is_empty()
                && report.replaced.is_empty()
                && report.removed.is_empty());
            broker.metrics.plugin_rescan(
                if changed { "changed" } else { "unchanged" },
                report.newly_refused,
                report.libraries_loaded,
            );
            Ok(report)
        }
        Err(e) => {
            broker.metrics.plugin_rescan("failed", 0, 0);
            tracing::warn!("plugin rescan failed: {e}");
            Err(e.to_string())
        }
    }
}

/// When the rescan added or replaced the file of the configured authorizer
/// (`[authorizer] plugin`), starts the new version with its config (and the broker's
/// ZooKeeper session in cluster mode) and swaps it in: decisions come from it from the
/// next request. A new version that does not start leaves the running one in place.
fn swap_authorizer(broker: &Broker, report: &crate::plugins::RescanReport) {
    let Some(name) = broker.config.authorizer.plugin.as_deref() else {
        return;
    };
    let kind = drover_abi::PluginKind::Authorizer.to_string();
    let touched = report
        .added
        .iter()
        .chain(&report.replaced)
        .any(|c| c.name == name && c.kind == kind);
    if !touched {
        return;
    }
    let Some(plugin) = broker
        .plugins
        .live
        .find(drover_abi::PluginKind::Authorizer, name)
    else {
        return;
    };
    let zookeeper = broker.cluster().map(crate::cluster::session::for_plugins);
    match plugin.new_authorizer(&broker.config.plugin_config(name), zookeeper) {
        Ok(handle) => {
            broker.identity.authz.replace(Arc::new(handle));
            tracing::info!(
                plugin = name,
                version = %plugin.summary.version,
                "the configured authorizer was replaced: it decides from the next request"
            );
        }
        Err(e) => tracing::warn!(
            plugin = name,
            "the rescanned authorizer did not start, the running one stays: {e}"
        ),
    }
}

/// Cluster mode: starts the configured authorizer once the broker's ZooKeeper session
/// is connected (the ACL authorizer reads its ACLs through it when it starts), and
/// makes it the one every request asks; until then every request is denied. A start
/// that fails is retried every two seconds, logged each time.
pub async fn start_authorizer(broker: std::sync::Arc<Broker>) {
    let Some(name) = broker.config.authorizer.plugin.clone() else {
        return;
    };
    let Some(cluster) = broker.cluster().cloned() else {
        return;
    };
    let mut stopping = broker.stopping();
    loop {
        let b = std::sync::Arc::clone(&broker);
        let (n, c) = (name.clone(), std::sync::Arc::clone(&cluster));
        let started = tokio::task::spawn_blocking(move || {
            let plugin = b
                .plugins
                .live
                .find(drover_abi::PluginKind::Authorizer, &n)
                .ok_or_else(|| format!("authorizer `{n}` is no longer in the plugin directory"))?;
            let handle = plugin
                .new_authorizer(
                    &b.config.plugin_config(&n),
                    Some(crate::cluster::session::for_plugins(&c)),
                )
                .map_err(|e| e.to_string())?;
            b.identity.authz.replace(Arc::new(handle));
            Ok::<_, String>(plugin.summary.version.clone())
        })
        .await;
        match started {
            Ok(Ok(version)) => {
                tracing::info!(
                    plugin = %name,
                    %version,
                    "authorizer started: every request is authorized by it"
                );
                return;
            }
            Ok(Err(e)) => tracing::warn!(
                plugin = %name,
                "the authorizer did not start, every request is denied meanwhile; retrying: {e}"
            ),
            Err(e) => tracing::warn!(plugin = %name, "starting the authorizer: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
            _ = stopping.changed() => return,
        }
    }
}
