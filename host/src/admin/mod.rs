//! The admin HTTP API, on its own listener (loopback by default; TLS, credentials and
//! the `Host` and content-type rules of [`guard`], over the connections of
//! [`listener`]):
//! - `GET /metrics`: Prometheus text (see [`crate::metrics`]);
//! - `GET /v1/health`: `{"status": "ok"}` while the broker serves;
//! - `GET /v1/plugins`: the plugin directory as it is now, as JSON (one object per
//!   file); `POST /v1/plugins/rescan`: load files added or replaced since startup
//!   ([`plugins`]);
//! - `GET /console/`: the web console ([`console`]: embedded pages that call the
//!   endpoints below);
//! - `GET /v1/overview`: what the console's first page shows ([`overview`]);
//! - `GET /v1/topics`, `GET /v1/topics/{topic}`, `POST /v1/topics/{topic}/configs`:
//!   topics, their partitions and configs ([`topics`]);
//! - `GET /v1/groups`, `GET /v1/groups/{group}`: consumer groups ([`groups`]; a share
//!   group's share-partitions: [`share_partitions`]);
//!   `DELETE /v1/groups/{group}` ([`group_delete`]); `POST
//!   /v1/groups/{group}/offsets/reset` ([`offset_reset`]); `GET
//!   /v1/groups/{group}/rebalances` ([`rebalances`]);
//!
//! Lists take `?q=&page=&size=` ([`paging`]).
//! - `GET /v1/offset-store`, `POST /v1/offset-store`: the active offset store and
//!   swapping it ([`offset_store`]);
//! - `GET /v1/transactions`: the transaction coordinator's transactional ids
//!   ([`transactions`]); `GET /v1/transactions/partitions`: transactions open in this
//!   broker's partitions, hanging ones marked, and `POST /v1/transactions/abort` to end
//!   a hanging one ([`open_transactions`]);
//! - `GET /v1/cluster`: cluster mode — this broker, live brokers, slot owners, topic
//!   placement (404 when standalone);
//! - `GET /v1/tls`: what each TLS listener serves (subject, expiry); `POST
//!   /v1/tls/reload`: read every TLS listener's certificate files again, as SIGHUP does
//!   (200 when every listener reloaded, 500 with each listener's error otherwise; a
//!   listener that failed keeps its previous certificate) (server/tls.rs).

pub mod console;
pub mod group_delete;
pub mod groups;
pub mod guard;
pub mod listener;
pub mod offset_reset;
pub mod offset_store;
pub mod open_transactions;
pub mod overview;
pub mod paging;
pub mod plugins;
pub mod rebalances;
pub mod share_partitions;
pub mod topics;
pub mod transactions;

use std::sync::Arc;

use axum::{
    extract::{ConnectInfo, Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use tokio::{net::TcpListener, sync::watch};

use crate::{broker::Broker, metrics::Metrics, server::tls::TlsListener};

use guard::{AdminPeer, Guard};

/// How the admin listener is reached and who may use it, made at startup.
pub struct Access {
    /// The access rules (`[admin]`), shared with the SIGHUP handler that reloads the
    /// token.
    pub guard: Arc<Guard>,
    /// TLS, when `admin.ssl.certificate_chain` is set (also in the broker's
    /// `TlsListeners`, so it reloads with them).
    pub tls: Option<Arc<TlsListener>>,
}

/// Serves the admin API on `listener` until `shutdown` becomes true; `tls` is what
/// `POST /v1/tls/reload` reloads; `access` decides who may use it.
pub async fn serve(
    broker: Arc<Broker>,
    listener: TcpListener,
    tls: crate::server::tls::TlsListeners,
    access: Access,
    shutdown: watch::Receiver<bool>,
) {
    let tls_reload = tls.clone();
    let guard_reload = Arc::clone(&access.guard);
    let guarded = Arc::new((access.guard, Arc::clone(&broker.metrics)));
    let handshake_timeout =
        std::time::Duration::from_millis(broker.config.server.first_request_timeout_ms);
    let tls_metrics = Arc::clone(&broker.metrics);
    let bounds = listener::Bounds {
        max_connections: broker.config.admin.max_connections,
        header_timeout: std::time::Duration::from_millis(broker.config.admin.header_timeout_ms),
        handshake_timeout,
    };
    let app = Router::new()
        .route(
            "/v1/tls",
            get(move || {
                let infos = tls.infos();
                async move { Json(serde_json::json!({ "listeners": infos })) }
            }),
        )
        .route(
            "/v1/tls/reload",
            post(move |State(broker): State<Arc<Broker>>| {
                let (tls, guard) = (tls_reload.clone(), Arc::clone(&guard_reload));
                async move { reload_tls(broker, tls, guard).await }
            }),
        )
        .route("/metrics", get(metrics))
        .route(
            "/v1/health",
            get(|| async { Json(serde_json::json!({ "status": "ok" })) }),
        )
        .route("/v1/plugins", get(plugins::list))
        .route("/v1/plugins/rescan", post(plugins::rescan))
        .route("/console", get(console::redirect))
        .route("/console/", get(console::index))
        .route("/console/{*file}", get(console::file))
        .route("/v1/overview", get(overview::get))
        .route("/v1/topics", get(topics::list))
        .route("/v1/topics/{topic}", get(topics::detail))
        .route("/v1/topics/{topic}/configs", post(topics::alter))
        .route("/v1/groups", get(groups::list))
        .route(
            "/v1/groups/{group}",
            get(groups::detail).delete(group_delete::delete),
        )
        .route(
            "/v1/groups/{group}/offsets/reset",
            post(offset_reset::reset),
        )
        .route("/v1/groups/{group}/rebalances", get(rebalances::get))
        .route("/v1/cluster", get(cluster))
        .route("/v1/transactions", get(transactions::list))
        .route("/v1/transactions/partitions", get(open_transactions::list))
        .route("/v1/transactions/abort", post(open_transactions::abort))
        .route(
            "/v1/offset-store",
            get(offset_store::get).post(offset_store::post),
        )
        .fallback(|| async {
            (
                axum::http::StatusCode::NOT_FOUND,
                Json(serde_json::json!({ "error": "no such endpoint" })),
            )
        })
        .with_state(broker)
        .layer(axum::middleware::from_fn_with_state(guarded, check));
    listener::serve(listener, app, access.tls, tls_metrics, bounds, shutdown).await;
}

/// The [`guard`] in front of every endpoint: refused requests are answered here,
/// counted and logged (rate-limited; the method and path, never a header's value).
async fn check(
    State(guarded): State<Arc<(Arc<Guard>, Arc<Metrics>)>>,
    ConnectInfo(peer): ConnectInfo<AdminPeer>,
    request: Request,
    next: Next,
) -> Response {
    let (guard, metrics) = &*guarded;
    match guard.check(
        request.method(),
        request.uri().path(),
        request.headers(),
        &peer,
    ) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            metrics.admin_request_refused(refusal.reason());
            crate::warn_limited!(
                refusal.log_key(),
                remote = %peer.remote,
                method = %request.method(),
                path = request.uri().path(),
                reason = refusal.reason(),
                "admin API: request refused: {}",
                refusal.message()
            );
            let mut response = (
                refusal.status(),
                Json(serde_json::json!({ "error": refusal.message() })),
            )
                .into_response();
            if refusal == guard::Refusal::Unauthenticated {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer realm=\"drover-admin\""),
                );
            }
            response
        }
    }
}

/// `POST /v1/tls/reload`: the TLS listeners' certificate files and the admin token
/// file (when configured), as SIGHUP.
async fn reload_tls(
    broker: Arc<Broker>,
    tls: crate::server::tls::TlsListeners,
    guard: Arc<Guard>,
) -> axum::response::Response {
    let (outcomes, token) = tokio::task::spawn_blocking(move || {
        (tls.reload(&broker.metrics), reload_admin_token(&guard))
    })
    .await
    .unwrap_or_default();
    let status = if outcomes.iter().all(|o| o.reloaded) && token.as_ref().is_none_or(Result::is_ok)
    {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::INTERNAL_SERVER_ERROR
    };
    let mut body = serde_json::json!({ "listeners": outcomes });
    if let Some(token) = token {
        body["admin_token"] = match token {
            Ok(()) => serde_json::json!({ "reloaded": true }),
            Err(e) => serde_json::json!({ "reloaded": false, "error": e }),
        };
    }
    (status, Json(body)).into_response()
}

/// Reads the admin token file again (SIGHUP, `POST /v1/tls/reload`) and logs the
/// outcome; `None` without a token file. A failure keeps the previous token; its
/// message names the file, never a token. Blocking.
pub fn reload_admin_token(guard: &Guard) -> Option<Result<(), String>> {
    let outcome = guard.reload_token()?;
    match &outcome {
        Ok(()) => tracing::info!("admin token file read again"),
        Err(e) => tracing::warn!("admin token not reloaded, the previous one stays: {e}"),
    }
    Some(outcome)
}

/// `text` with the transaction coordinator's samples and `share` (share groups' samples)
/// before its `# EOF`.
fn with_transactions(broker: &Broker, text: String, share: &str) -> String {
    let txn = broker.transactions();
    let mut body = text.strip_suffix("# EOF\n").unwrap_or(&text).to_owned();
    body.push_str(&crate::txn::metrics::render(txn));
    body.push_str(share);
    body.push_str("# EOF\n");
    body
}

async fn metrics(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    let (offsets, producer_ids) = tokio::task::spawn_blocking({
        let broker = Arc::clone(&broker);
        move || {
            let mut producer_ids = 0;
            let mut offsets = Vec::new();
            for t in broker.topics.list() {
                for p in &t.partitions {
                    let log = p.lock_log();
                    producer_ids += log.producer_states().len();
                    offsets.push((
                        t.name.clone(),
                        p.index,
                        log.log_end_offset(),
                        log.flushed_offset(),
                    ));
                }
            }
            (offsets, producer_ids)
        }
    })
    .await
    .unwrap_or_default();
    broker.metrics.producer_ids(producer_ids);
    let share = {
        let broker = Arc::clone(&broker);
        tokio::task::spawn_blocking(move || {
            let partitions = &broker.share.partitions;
            crate::share::metrics::render(
                &partitions.stats(None),
                &partitions.retired_counters(),
                broker.config.share.metrics_max_share_partitions,
            )
        })
        .await
        .unwrap_or_default()
    };
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        with_transactions(&broker, broker.metrics.render(&offsets), &share),
    )
}

async fn cluster(State(broker): State<Arc<Broker>>) -> axum::response::Response {
    match broker.cluster() {
        None => (
            axum::http::StatusCode::NOT_FOUND,
            Json(serde_json::json!({"error": "standalone broker (zookeeper.enabled is false)"})),
        )
            .into_response(),
        Some(c) => {
            let owned: Vec<u32> = c
                .owned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .copied()
                .collect();
            Json(serde_json::json!({
                "broker": c.me,
                "slot_count": c.settings.slots,
                "owned_slots": owned,
                "view": c.view(),
            }))
            .into_response()
        }
    }
}
