//! Prometheus metrics of the broker, served as text on the admin API's `GET /metrics`.
//!
//! - `drover_requests_total{api,error}`: requests handled, by Kafka API name and the
//!   response's error (`NONE`, or the first non-zero error code's name); the group APIs
//!   the coordinator answers count every error code their answer carries, as Kafka's
//!   `AbstractResponse.errorCounts()` does (one per group, member or partition
//!   reported on, `NONE` included; [`crate::coordination::answer_errors`]);
//! - `drover_bytes_in_total`, `drover_bytes_out_total`: request and response bytes,
//!   frames included;
//! - `drover_connections_open` (gauge), `drover_connections_accepted_total`;
//! - `drover_frames_rejected_total{reason}`: frames refused before decoding;
//! - `drover_connections_closed_by_broker_total{reason}`: connections the broker
//!   refused or closed: to protect the others (`per_ip`, `evicted`,
//!   `first_request_timeout`, `write_timeout`), or by the coordinator
//!   (`coordinator_closed`: its CloseConnection, e.g. an unsupported version;
//!   `coordinator_contract_violation`, `coordinator_channel_overflow`: a consumer that
//!   does not read its channel, `coordinator_out_of_service`);
//! - `drover_native_requests_total{api,error}`: native coordinator requests answered,
//!   with the error codes of the answer counted as for the group APIs above;
//! - `drover_coordinator_events_total{name}`: counters the coordinator plugin reports
//!   (rebalances, generations, failed members, commit batches, ...);
//! - `drover_plugin_rescans_total{outcome}`: rescans of the plugin directory (`changed`,
//!   `unchanged`, `failed`), and `drover_plugin_files_refused_total`: files a rescan
//!   refused; `drover_plugin_libraries_loaded` (gauge): distinct plugin libraries in the
//!   process (never unloaded; capped by `plugins.max_loaded_libraries`);
//! - `drover_log_end_offset{topic,partition}`: rendered at scrape time.

use kafka_protocol::error::ParseResponseErrorCode;
use prometheus_client::{
    encoding::{text::encode, EncodeLabelSet},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    api: String,
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// The broker's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    bytes_in: Counter,
    bytes_out: Counter,
    connections: Gauge,
    connections_total: Counter,
    frames_rejected: Family<ReasonLabels, Counter>,
    connections_closed: Family<ReasonLabels, Counter>,
    native_requests: Family<RequestLabels, Counter>,
    coordinator_events: Family<NameLabels, Counter>,
    zookeeper_connected: Gauge,
    plugin_rescans: Family<OutcomeLabels, Counter>,
    plugin_files_refused: Counter,
    plugin_libraries: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("drover");
        let requests = Family::<RequestLabels, Counter>::default();
        let bytes_in = Counter::default();
        let bytes_out = Counter::default();
        let connections = Gauge::default();
        let connections_total = Counter::default();
        let frames_rejected = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "requests",
            "Kafka requests handled, by API and error",
            requests.clone(),
        );
        registry.register(
            "bytes_in",
            "Bytes received in request frames",
            bytes_in.clone(),
        );
        registry.register(
            "bytes_out",
            "Bytes sent in response frames",
            bytes_out.clone(),
        );
        registry.register(
            "connections_open",
            "Client connections open now",
            connections.clone(),
        );
        registry.register(
            "connections_accepted",
            "Client connections accepted",
            connections_total.clone(),
        );
        registry.register(
            "frames_rejected",
            "Frames refused before decoding (oversized, malformed, unknown API, unsupported version)",
            frames_rejected.clone(),
        );
        let connections_closed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_closed_by_broker",
            "Connections refused or closed by the broker, by reason (per_ip, evicted, \
             first_request_timeout, write_timeout, coordinator_closed, \
             coordinator_contract_violation, coordinator_channel_overflow, \
             coordinator_out_of_service)",
            connections_closed.clone(),
        );
        let native_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "native_requests",
            "Native coordinator requests answered, by API and the error codes of the answer",
            native_requests.clone(),
        );
        let coordinator_events = Family::<NameLabels, Counter>::default();
        registry.register(
            "coordinator_events",
            "Counters reported by the coordinator plugin, by name",
            coordinator_events.clone(),
        );
        let zookeeper_connected = Gauge::default();
        registry.register(
            "zookeeper_connected",
            "1 while the ZooKeeper session is connected (cluster mode), else 0",
            zookeeper_connected.clone(),
        );
        let plugin_rescans = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "plugin_rescans",
            "Rescans of the plugin directory, by outcome (changed, unchanged, failed)",
            plugin_rescans.clone(),
        );
        let plugin_files_refused = Counter::default();
        registry.register(
            "plugin_files_refused",
            "Files a rescan of the plugin directory refused",
            plugin_files_refused.clone(),
        );
        let plugin_libraries = Gauge::default();
        registry.register(
            "plugin_libraries_loaded",
            "Distinct plugin libraries loaded in this process (never unloaded)",
            plugin_libraries.clone(),
        );
        Metrics {
            registry,
            plugin_rescans,
            plugin_files_refused,
            plugin_libraries,
            zookeeper_connected,
            native_requests,
            coordinator_events,
            requests,
            bytes_in,
            bytes_out,
            connections,
            connections_total,
            frames_rejected,
            connections_closed,
        }
    }

    /// The broker refused or closed a connection, for `reason` (module docs).
    pub fn connection_closed_by_broker(&self, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts one handled request of `api` whose response carried `error`.
    pub fn request(&self, api: &str, error: i16) {
        self.requests
            .get_or_create(&RequestLabels {
                api: api.to_owned(),
                error: error_name(error),
            })
            .inc();
    }

    /// Counts an answer to a group API `api` by its error codes: `counts` maps each
    /// code to how often the answer carries it (Kafka's `errorCounts()`).
    pub fn request_errors(&self, api: &str, counts: &std::collections::BTreeMap<i16, u64>) {
        for (code, n) in counts {
            self.requests
                .get_or_create(&RequestLabels {
                    api: api.to_owned(),
                    error: error_name(*code),
                })
                .inc_by(*n);
        }
    }

    /// Counts request bytes.
    pub fn bytes_in(&self, n: usize) {
        self.bytes_in.inc_by(n as u64);
    }

    /// Counts response bytes.
    pub fn bytes_out(&self, n: usize) {
        self.bytes_out.inc_by(n as u64);
    }

    /// A connection was accepted.
    pub fn connection_opened(&self) {
        self.connections.inc();
        self.connections_total.inc();
    }

    /// A connection closed.
    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    /// Counts a native request answered by the coordinator (API key 20000–20099) by
    /// the error codes of its answer (`counts`: code → occurrences; the native codes
    /// are Kafka's, docs/protocol.md).
    pub fn native_request(&self, api_key: i16, counts: &std::collections::BTreeMap<i16, u64>) {
        let api = match drover_protocol::ApiKey::from_code(api_key) {
            Some(key) => format!("{key:?}"),
            None => api_key.to_string(),
        };
        for (code, n) in counts {
            self.native_requests
                .get_or_create(&RequestLabels {
                    api: api.clone(),
                    error: error_name(*code),
                })
                .inc_by(*n);
        }
    }

    /// Adds `value` to the coordinator's counter `name` (negative values are ignored).
    pub fn coordinator_event(&self, name: &str, value: i64) {
        if value > 0 {
            self.coordinator_events
                .get_or_create(&NameLabels {
                    name: name.to_owned(),
                })
                .inc_by(value as u64);
        }
    }

    /// Records one rescan of the plugin directory: `outcome` is `changed`, `unchanged`
    /// or `failed`; `refused` files; `libraries` loaded in the process afterwards.
    pub fn plugin_rescan(&self, outcome: &str, refused: usize, libraries: usize) {
        self.plugin_rescans
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
        self.plugin_files_refused.inc_by(refused as u64);
        if libraries > 0 {
            self.plugin_libraries(libraries);
        }
    }

    /// Sets the number of distinct plugin libraries loaded in the process.
    pub fn plugin_libraries(&self, libraries: usize) {
        self.plugin_libraries.set(libraries as i64);
    }

    /// Records whether the ZooKeeper session is connected.
    pub fn zookeeper_connected(&self, connected: bool) {
        self.zookeeper_connected.set(i64::from(connected));
    }

    /// A frame was refused before decoding, for `reason`.
    pub fn frame_rejected(&self, reason: &'static str) {
        self.frames_rejected
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The metrics in the Prometheus text format, with `log_end_offsets`
    /// ((topic, partition, offset)) as a gauge.
    pub fn render(&self, log_end_offsets: &[(String, i32, i64)]) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            return String::new();
        }
        let body = out.strip_suffix("# EOF\n").unwrap_or(&out).to_owned();
        let mut text = body;
        text.push_str("# HELP drover_log_end_offset Next offset to be written, per partition.\n");
        text.push_str("# TYPE drover_log_end_offset gauge\n");
        for (topic, partition, offset) in log_end_offsets {
            // Topic names are [a-zA-Z0-9._-]: nothing to escape.
            text.push_str(&format!(
                "drover_log_end_offset{{topic=\"{topic}\",partition=\"{partition}\"}} {offset}\n"
            ));
        }
        text.push_str("# EOF\n");
        text
    }
}

/// The `error` label of Kafka error code `code`: `NONE`, or Kafka's name for it.
fn error_name(code: i16) -> String {
    match code.err() {
        None => "NONE".to_owned(),
        Some(e) => format!("{e:?}"),
    }
}
