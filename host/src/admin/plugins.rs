//! `GET /v1/plugins` (the plugin directory as it is now) and `POST /v1/plugins/rescan`
//! (load what was added or replaced since startup; `drover plugins rescan`).
//!
//! A rescan answers 200 with what it did ([`crate::plugins::RescanReport`]): plugins
//! added, replaced and removed, each with what it means for the running broker, and the
//! files refused with their reasons (a refused file changes nothing). It answers 500
//! when the directory cannot be listed or the plugin cache is unusable (nothing
//! changed). The rescan itself is [`crate::rescan::run`].

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
    Json(rows(&broker))
}

/// The rows of `GET /v1/plugins` (also in `GET /v1/overview`).
pub fn rows(broker: &Broker) -> Vec<table::Row> {
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
    rows
}

/// `POST /v1/plugins/rescan`.
pub async fn rescan(State(broker): State<Arc<Broker>>) -> Response {
    let result = tokio::task::spawn_blocking({
        let broker = Arc::clone(&broker);
        move || crate::rescan::run(&broker)
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
