//! `GET /v1/offset-store` and `POST /v1/offset-store`: the active offset store and
//! swapping it ([`crate::offsets::swap`]).
//!
//! `POST` takes `{"plugin": NAME, "config": CONFIG}` where CONFIG is the plugin's TOML
//! config as a string, or a JSON object (converted to TOML). It answers 202 with the
//! status once the swap has started (follow it with `GET`), 409 when a swap is running
//! or NAME is already active, 503 without an active store, 400 for a bad body.

use std::sync::Arc;

use axum::{extract::State, http::StatusCode, response::IntoResponse, Json};
use serde::{Deserialize, Serialize};

use crate::{
    broker::Broker,
    offsets::{
        active::StoreSpec,
        swap::{self, SwapError, SwapRequest},
        SwapStatus,
    },
};

/// `GET /v1/offset-store`.
#[derive(Serialize)]
pub struct StoreView {
    /// The store reads and writes go to now.
    pub active: Option<String>,
    /// The store drover.toml names (`[coordinator] offset_store`).
    pub configured: String,
    /// Whether the active store is another store than the configured one (another
    /// plugin, or the same plugin with another config): a swap made it active, and it
    /// is recorded in `<data_dir>/offset_store.json` so a restart reopens it.
    pub recorded: bool,
    /// The last or current swap.
    pub swap: SwapStatus,
}

/// The `POST` body.
#[derive(Deserialize)]
pub struct SwapBody {
    /// Offset-store plugin name.
    pub plugin: String,
    /// Its config: TOML text or a JSON object.
    #[serde(default)]
    pub config: serde_json::Value,
}

/// The store view of `GET /v1/offset-store` (also in `GET /v1/overview`).
pub fn view(broker: &Broker) -> StoreView {
    let configured = StoreSpec::configured(&broker.config);
    match broker.offsets() {
        Some(stores) => {
            let active = stores.reader();
            StoreView {
                recorded: !active.spec().same_store(&configured),
                active: Some(active.name),
                configured: configured.plugin,
                swap: stores.status(),
            }
        }
        None => StoreView {
            active: None,
            configured: configured.plugin,
            recorded: false,
            swap: SwapStatus::default(),
        },
    }
}

/// `GET /v1/offset-store`.
pub async fn get(State(broker): State<Arc<Broker>>) -> Json<StoreView> {
    Json(view(&broker))
}

/// The plugin config as TOML text.
fn config_text(value: &serde_json::Value) -> Result<String, String> {
    match value {
        serde_json::Value::Null => Ok(String::new()),
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Object(_) => {
            let table: toml::Table = serde_json::from_value(value.clone())
                .map_err(|e| format!("config: not representable as TOML: {e}"))?;
            toml::to_string(&table).map_err(|e| format!("config: {e}"))
        }
        _ => Err("config must be TOML text or a JSON object".into()),
    }
}

/// `POST /v1/offset-store`.
pub async fn post(
    State(broker): State<Arc<Broker>>,
    body: Result<Json<SwapBody>, axum::extract::rejection::JsonRejection>,
) -> impl IntoResponse {
    let error = |status: StatusCode, message: String| {
        (status, Json(serde_json::json!({ "error": message }))).into_response()
    };
    let Json(body) = match body {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let config = match config_text(&body.config) {
        Ok(text) => text,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let request = SwapRequest {
        plugin: body.plugin,
        config,
    };
    match swap::start(&broker, request) {
        Ok(()) => (StatusCode::ACCEPTED, Json(view(&broker))).into_response(),
        Err(e @ (SwapError::NoActiveStore | SwapError::ShuttingDown | SwapError::Thread(_))) => {
            error(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
        Err(e) => error(StatusCode::CONFLICT, e.to_string()),
    }
}
