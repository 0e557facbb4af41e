//! Topics as operators see them (the console's topics pages, scripts):
//!
//! - `GET /v1/topics`: every topic with its id and, per partition, log start and end
//!   (a JSON array); with `?q=&page=&size=` ([`super::paging`]) a page of topics whose
//!   name contains `q`, each summed up ([`TopicSummary`]: partitions, bytes, end
//!   offsets, produce rate);
//! - `GET /v1/topics/{topic}`: one topic's partitions (log start and end, size, produce
//!   rate; paged with `?page=&size=`) and its configs as DescribeConfigs reports them
//!   (value and source); 404 for an unknown topic;
//! - `POST /v1/topics/{topic}/configs` with `{"configs": [{"name", "op", "value"}],
//!   "validate_only": false}`: IncrementalAlterConfigs (KIP-339) on the topic, through
//!   the same code path as the Kafka API
//!   ([`crate::server::handlers::alter_configs::handle_incremental`]): `op` is `set`,
//!   `delete`, `append` or `subtract`. 200 `{"applied": true}` (or `false` with
//!   `validate_only`); 400 with Kafka's error name and message when the change is
//!   refused (INVALID_CONFIG, INVALID_REQUEST); 404 for an unknown topic.
//!
//! Produce rates are the partitions' own (`coordinator.produce_rate_window_ms`; the
//! rates assignors see), `null` until a partition has been watched for a window.

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    http::{StatusCode, Uri},
    response::{IntoResponse, Response},
    Json,
};
use kafka_protocol::{
    messages::{
        incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
        IncrementalAlterConfigsRequest, ResponseKind,
    },
    protocol::StrBytes,
};
use serde::{Deserialize, Serialize};

use super::paging::{self, PageRequest, Paged};
use crate::broker::{topics::Topic, Broker};

/// A partition of [`TopicView`] (the unpaged list's shape).
#[derive(Serialize)]
pub struct PartitionView {
    /// Partition index.
    pub partition: i32,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Next offset to be written.
    pub log_end_offset: i64,
}

/// A topic of the unpaged `GET /v1/topics`.
#[derive(Serialize)]
pub struct TopicView {
    /// Topic name.
    pub name: String,
    /// Topic id (UUID).
    pub id: String,
    /// Its partitions.
    pub partitions: Vec<PartitionView>,
}

/// A topic of a paged `GET /v1/topics`.
#[derive(Serialize)]
pub struct TopicSummary {
    /// Topic name.
    pub name: String,
    /// Topic id (UUID).
    pub id: String,
    /// Partition count.
    pub partitions: usize,
    /// Bytes of its partitions' segment files.
    pub size_bytes: u64,
    /// Sum of its partitions' log end offsets.
    pub log_end_offsets: i64,
    /// Sum of its partitions' produce rates, bytes per second; `null` while none is
    /// known.
    pub produce_bytes_per_sec: Option<f64>,
    /// The same in records per second.
    pub produce_records_per_sec: Option<f64>,
}

/// A partition of `GET /v1/topics/{topic}`.
#[derive(Serialize)]
pub struct PartitionDetail {
    /// Partition index.
    pub partition: i32,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Next offset to be written.
    pub log_end_offset: i64,
    /// Bytes of its segment files (Kafka's `UnifiedLog.size`).
    pub size_bytes: u64,
    /// Produce rate, bytes per second; `null` while unknown.
    pub produce_bytes_per_sec: Option<f64>,
    /// Produce rate, records per second; `null` while unknown.
    pub produce_records_per_sec: Option<f64>,
}

/// A config of `GET /v1/topics/{topic}`.
#[derive(Serialize)]
pub struct ConfigView {
    /// Kafka's name (`retention.ms`).
    pub name: &'static str,
    /// The value in force.
    pub value: String,
    /// `topic` (an override), `broker` (drover.toml) or `default`.
    pub source: &'static str,
}

/// `GET /v1/topics/{topic}`.
#[derive(Serialize)]
pub struct TopicDetail {
    /// Topic name.
    pub name: String,
    /// Topic id (UUID).
    pub id: String,
    /// Its partitions, paged.
    pub partitions: Paged<PartitionDetail>,
    /// Its configs.
    pub configs: Vec<ConfigView>,
}

/// The body of `POST /v1/topics/{topic}/configs`.
#[derive(Deserialize)]
pub struct AlterBody {
    /// The changes, applied together or not at all.
    pub configs: Vec<ConfigChange>,
    /// Check only.
    #[serde(default)]
    pub validate_only: bool,
}

/// One change of [`AlterBody`].
#[derive(Deserialize)]
pub struct ConfigChange {
    /// Kafka's config name.
    pub name: String,
    /// `set`, `delete`, `append` or `subtract` (KIP-339's operations).
    pub op: String,
    /// The value (`null` for `delete`).
    #[serde(default)]
    pub value: Option<String>,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

fn bad_paging(e: paging::PageError) -> Response {
    error(StatusCode::BAD_REQUEST, e.to_string())
}

/// Wall-clock ms, the produce rates' clock.
fn now_ms() -> i64 {
    crate::clock::now_ms()
}

fn sum_rates(rates: impl Iterator<Item = Option<(f64, f64)>>) -> (Option<f64>, Option<f64>) {
    rates
        .flatten()
        .fold((None, None), |(b, r), (bytes, records)| {
            (
                Some(b.unwrap_or(0.0) + bytes),
                Some(r.unwrap_or(0.0) + records),
            )
        })
}

fn partition_detail(p: &crate::broker::topics::Partition, now: i64) -> PartitionDetail {
    let (start, end, size) = {
        let log = p.lock_log();
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_bytes(),
        )
    };
    let rate = p.produce_rate.rate(now);
    PartitionDetail {
        partition: p.index,
        log_start_offset: start,
        log_end_offset: end,
        size_bytes: size,
        produce_bytes_per_sec: rate.as_ref().map(|r| r.bytes_per_sec),
        produce_records_per_sec: rate.as_ref().map(|r| r.records_per_sec),
    }
}

fn summary(t: &Topic, now: i64) -> TopicSummary {
    let parts: Vec<PartitionDetail> = t
        .partitions
        .iter()
        .map(|p| partition_detail(p, now))
        .collect();
    let (bytes, records) = sum_rates(
        parts
            .iter()
            .map(|p| p.produce_bytes_per_sec.zip(p.produce_records_per_sec)),
    );
    TopicSummary {
        name: t.name.clone(),
        id: t.id.to_string(),
        partitions: parts.len(),
        size_bytes: parts.iter().map(|p| p.size_bytes).sum(),
        log_end_offsets: parts.iter().map(|p| p.log_end_offset).sum(),
        produce_bytes_per_sec: bytes,
        produce_records_per_sec: records,
    }
}

/// `GET /v1/topics` (module docs).
pub async fn list(State(broker): State<Arc<Broker>>, uri: Uri) -> Response {
    let paging = match paging::parse(uri.query()) {
        Ok(p) => p,
        Err(e) => return bad_paging(e),
    };
    let answer = tokio::task::spawn_blocking(move || {
        let mut topics = broker.topics.list();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        match paging {
            Some(page) => {
                let now = now_ms();
                let paged = page.apply(topics, |t| t.name.as_str());
                Json(Paged {
                    total: paged.total,
                    page: paged.page,
                    size: paged.size,
                    items: paged
                        .items
                        .iter()
                        .map(|t| summary(t, now))
                        .collect::<Vec<_>>(),
                })
                .into_response()
            }
            None => Json(topics.iter().map(|t| whole(t)).collect::<Vec<_>>()).into_response(),
        }
    })
    .await;
    answer.unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

fn whole(t: &Topic) -> TopicView {
    TopicView {
        name: t.name.clone(),
        id: t.id.to_string(),
        partitions: t
            .partitions
            .iter()
            .map(|p| {
                let log = p.lock_log();
                PartitionView {
                    partition: p.index,
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                }
            })
            .collect(),
    }
}

/// `GET /v1/topics/{topic}` (module docs).
pub async fn detail(
    State(broker): State<Arc<Broker>>,
    Path(name): Path<String>,
    uri: Uri,
) -> Response {
    let page = match paging::parse(uri.query()) {
        Ok(p) => p.unwrap_or(PageRequest {
            size: paging::MAX_SIZE,
            ..PageRequest::default()
        }),
        Err(e) => return bad_paging(e),
    };
    let answer = tokio::task::spawn_blocking(move || {
        let Some(t) = broker.topics.get(&name) else {
            return error(StatusCode::NOT_FOUND, format!("no topic `{name}`"));
        };
        let now = now_ms();
        let start = page.page.saturating_mul(page.size);
        let items = t
            .partitions
            .iter()
            .skip(start)
            .take(page.size)
            .map(|p| partition_detail(p, now))
            .collect();
        let configs = crate::server::handlers::describe_configs::topic_entries(
            broker.topics.base_log_config(),
            &broker.topics.overrides(&name),
        )
        .into_iter()
        .map(|e| ConfigView {
            name: e.name,
            value: e.value,
            source: match e.source {
                crate::server::handlers::describe_configs::Source::DynamicTopic => "topic",
                crate::server::handlers::describe_configs::Source::StaticBroker => "broker",
                crate::server::handlers::describe_configs::Source::Default => "default",
                crate::server::handlers::describe_configs::Source::Group => "group",
            },
        })
        .collect();
        Json(TopicDetail {
            name: t.name.clone(),
            id: t.id.to_string(),
            partitions: Paged {
                total: t.partitions.len(),
                page: page.page,
                size: page.size,
                items,
            },
            configs,
        })
        .into_response()
    })
    .await;
    answer.unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// KIP-339's operation code of `op`.
fn op_code(op: &str) -> Option<i8> {
    match op {
        "set" => Some(0),
        "delete" => Some(1),
        "append" => Some(2),
        "subtract" => Some(3),
        _ => None,
    }
}

/// `POST /v1/topics/{topic}/configs` (module docs).
pub async fn alter(
    State(broker): State<Arc<Broker>>,
    Path(name): Path<String>,
    body: Result<Json<AlterBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    if broker.topics.get(&name).is_none() {
        return error(StatusCode::NOT_FOUND, format!("no topic `{name}`"));
    }
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = crate::server::handlers::describe_configs::RESOURCE_TOPIC;
    resource.resource_name = StrBytes::from_string(name);
    for change in body.configs {
        let Some(code) = op_code(&change.op) else {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown op `{}` (set, delete, append or subtract)",
                    change.op
                ),
            );
        };
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string(change.name);
        c.config_operation = code;
        c.value = change.value.map(StrBytes::from_string);
        resource.configs.push(c);
    }
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources.push(resource);
    request.validate_only = body.validate_only;
    let validate_only = request.validate_only;
    let reply = tokio::task::spawn_blocking(move || {
        crate::server::handlers::alter_configs::handle_incremental(
            &broker,
            &crate::authz::RequestAuthz::allow_all(),
            1,
            request,
        )
    })
    .await;
    let Ok(reply) = reply else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "config change task failed",
        );
    };
    let Some(ResponseKind::IncrementalAlterConfigs(response)) = reply.response else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "no config change answer");
    };
    match response.responses.first() {
        Some(r) if r.error_code != 0 => {
            let name = kafka_protocol::error::ResponseError::try_from_code(r.error_code)
                .map(|e| format!("{e:?}"))
                .unwrap_or_else(|| r.error_code.to_string());
            let message = r.error_message.as_deref().unwrap_or_default();
            error(StatusCode::BAD_REQUEST, format!("{name}: {message}"))
        }
        _ => Json(serde_json::json!({ "applied": !validate_only })).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_kip_339_codes() {
        assert_eq!(op_code("set"), Some(0));
        assert_eq!(op_code("delete"), Some(1));
        assert_eq!(op_code("append"), Some(2));
        assert_eq!(op_code("subtract"), Some(3));
        assert_eq!(op_code("SET"), None);
    }

    #[test]
    fn rates_sum_only_known_ones() {
        assert_eq!(sum_rates([None, None].into_iter()), (None, None));
        assert_eq!(
            sum_rates([Some((1.0, 2.0)), None, Some((3.0, 4.0))].into_iter()),
            (Some(4.0), Some(6.0))
        );
    }
}
