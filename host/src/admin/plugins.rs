//! `GET /v1/plugins` (the plugin directory as it is now) and `POST /v1/plugins/rescan`
//! (load what was added or replaced since startup; `drover plugins rescan`).
//!
//! A rescan answers 200 with what it did ([`crate::plugins::RescanReport`]): plugins
//! added, replaced and removed, each with what it means for the running broker, and the
//! files refused with their reasons (a refused file changes nothing). It answers 500
//! when the directory cannot be listed or the plugin cache is unusable (nothing
//! changed). When the set of assignors changed, the running coordinator is handed the
//! new set (`CoordinatorInput::AssignorsChanged`) before the answer goes out.

use std::sync::Arc;

use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};

use crate::{broker::Broker, plugins::table};

/// `GET /v1/plugins`: one row per `*.so` file, as `drover plugins list --format json`.
/// An assignor whose call runs past its budget has `slow` set to why
/// ([`crate::coordination::assignor_budget`]).
pub async fn list(State(broker): State<Arc<Broker>>) -> Json<Vec<table::Row>> {
    let mut rows = broker.plugins.live.rows();
    for row in &mut rows {
        if row.kind == "assignor" && row.status == "ok" {
            row.slow = broker
                .plugins
                .budgets
                .slow(&row.name)
                .map(|s| s.to_string());
        }
    }
    Json(rows)
}

/// `POST /v1/plugins/rescan`.
pub async fn rescan(State(broker): State<Arc<Broker>>) -> Response {
    let result = tokio::task::spawn_blocking({
        let broker = Arc::clone(&broker);
        move || rescan_blocking(&broker)
    })
    .await;
    let report = match result {
        Ok(Ok(report)) => report,
        Ok(Err(message)) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(serde_json::json!({ "error": message })),
            )
                .into_response()
        }
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(serde_json::json!({ "error": format!("rescan task: {e}") })),
            )
                .into_response()
        }
    };
    Json(report).into_response()
}

/// Runs one rescan, tells the running coordinator when the assignors changed, and logs
/// and counts what it did. Blocking: runs on a blocking thread (the admin handler, the
/// offset-store swap thread).
pub fn rescan_blocking(broker: &Broker) -> Result<crate::plugins::RescanReport, String> {
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
