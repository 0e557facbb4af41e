//! `GET /v1/overview`: what the console's first page shows, in one call — this broker
//! and, in cluster mode, the live brokers with the coordinator slots each owns; the
//! plugins (kind, version, ABI); the active offset store and the last or current swap
//! with its progress; topic, partition and group counts; the produce rate (the sum of
//! the partitions' own rates) and counters a caller turns into rates by reading twice
//! (requests, bytes, the sum of log end offsets).
//!
//! Errors: none of its own; a group count the coordinator cannot give is `null`.

use std::{collections::BTreeMap, sync::Arc};

use axum::{extract::State, Json};
use serde::Serialize;

use crate::{broker::Broker, plugins::table};

/// A broker of [`ClusterOverview`].
#[derive(Serialize)]
pub struct BrokerView {
    /// Broker id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// Coordinator slots it owns.
    pub slots: Vec<u32>,
}

/// Cluster mode's part of [`Overview`].
#[derive(Serialize)]
pub struct ClusterOverview {
    /// This broker's id.
    pub broker: i32,
    /// Whether the ZooKeeper session is connected.
    pub connected: bool,
    /// Coordinator slots in all.
    pub slot_count: u32,
    /// Live brokers.
    pub brokers: Vec<BrokerView>,
}

/// Counters of Kafka requests answered without an error.
#[derive(Serialize)]
pub struct RequestCounts {
    /// Produce requests.
    pub produce: u64,
    /// Fetch requests.
    pub fetch: u64,
}

/// `GET /v1/overview`.
#[derive(Serialize)]
pub struct Overview {
    /// Wall-clock ms of this answer (for rates between two answers).
    pub now_ms: i64,
    /// This broker's node id.
    pub node_id: i32,
    /// The cluster id clients see.
    pub cluster_id: String,
    /// Cluster mode; `null` standalone.
    pub cluster: Option<ClusterOverview>,
    /// The plugin directory ([`super::plugins::list`]'s rows).
    pub plugins: Vec<table::Row>,
    /// The offset store ([`super::offset_store`]'s view).
    pub offset_store: super::offset_store::StoreView,
    /// Topics.
    pub topics: usize,
    /// Partitions of all topics.
    pub partitions: usize,
    /// Groups the coordinator serves (every type; `null` when it cannot say).
    pub groups: Option<usize>,
    /// Sum of the partitions' produce rates, bytes per second.
    pub produce_bytes_per_sec: f64,
    /// The same in records per second.
    pub produce_records_per_sec: f64,
    /// Sum of every partition's log end offset (records appended, less deleted
    /// partitions).
    pub log_end_offsets_total: i64,
    /// Requests answered without an error so far.
    pub requests: RequestCounts,
    /// Request bytes so far.
    pub bytes_in_total: u64,
    /// Response bytes so far.
    pub bytes_out_total: u64,
}

/// `GET /v1/overview` (module docs).
pub async fn get(State(broker): State<Arc<Broker>>) -> Json<Overview> {
    let groups = match broker.coordinator() {
        Some(c) if c.serves(kafka_protocol::messages::ApiKey::ListGroups as i16) => {
            c.list_groups().await.ok().map(|g| g.len())
        }
        Some(c) => c.describe_groups(None).await.ok().map(|g| g.len()),
        None => None,
    };
    let b = Arc::clone(&broker);
    let (topics, partitions, produce, ends) = tokio::task::spawn_blocking(move || {
        let now = crate::clock::now_ms();
        let topics = b.topics.list();
        let (mut partitions, mut bytes, mut records, mut ends) = (0, 0.0, 0.0, 0i64);
        for t in &topics {
            for p in &t.partitions {
                partitions += 1;
                if let Some(rate) = p.produce_rate.rate(now) {
                    bytes += rate.bytes_per_sec;
                    records += rate.records_per_sec;
                }
                ends = ends.saturating_add(p.lock_log().log_end_offset());
            }
        }
        (topics.len(), partitions, (bytes, records), ends)
    })
    .await
    .unwrap_or_default();
    let (bytes_in_total, bytes_out_total) = broker.metrics.bytes_totals();
    Json(Overview {
        now_ms: crate::clock::now_ms(),
        node_id: broker.identity.node.id,
        cluster_id: broker.identity.reported_cluster_id(),
        cluster: cluster(&broker),
        plugins: super::plugins::rows(&broker),
        offset_store: super::offset_store::view(&broker),
        topics,
        partitions,
        groups,
        produce_bytes_per_sec: produce.0,
        produce_records_per_sec: produce.1,
        log_end_offsets_total: ends,
        requests: RequestCounts {
            produce: broker.metrics.requests_ok("Produce"),
            fetch: broker.metrics.requests_ok("Fetch"),
        },
        bytes_in_total,
        bytes_out_total,
    })
}

fn cluster(broker: &Broker) -> Option<ClusterOverview> {
    let c = broker.cluster()?;
    let view = c.view();
    let mut slots: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for (slot, owner) in &view.slots {
        slots.entry(*owner).or_default().push(*slot);
    }
    Some(ClusterOverview {
        broker: c.me,
        connected: view.connected,
        slot_count: c.settings.slots,
        brokers: view
            .brokers
            .iter()
            .map(|(id, addr)| BrokerView {
                id: *id,
                host: addr.host.clone(),
                port: addr.port,
                slots: slots.remove(id).unwrap_or_default(),
            })
            .collect(),
    })
}
