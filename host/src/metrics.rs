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
//! - `drover_coordinator_events_total{name}`: the coordinator's counters, one sample per
//!   name: what the coordinator plugin reports with `CoordinatorOutput::Metric` (an
//!   increment; there are no gauges) and what the host counts about it. The names, their
//!   help (this family's `# HELP` line) and the rules are
//!   [`drover_abi::coordinator::metrics`]; the known names start at 0, and a
//!   third-party coordinator's own names are counted too;
//! - `drover_plugin_rescans_total{outcome}`: rescans of the plugin directory (`changed`,
//!   `unchanged`, `failed`), and `drover_plugin_files_refused_total`: files a rescan
//!   refused, each file version and reason once (a file refused again unchanged by the
//!   next rescan is not counted again); `drover_plugin_libraries_loaded` (gauge): distinct plugin libraries in the
//!   process (never unloaded; capped by `plugins.max_loaded_libraries`);
//! - `drover_producer_ids` (gauge, summed over partitions at scrape time) and
//!   `drover_producer_ids_evicted_total`: idempotent producer ids remembered, and
//!   forgotten to make room at `[log] max_producer_ids_per_partition`;
//! - `drover_log_end_offset{topic,partition}` and `drover_log_flushed_offset{topic,partition}`
//!   (every offset below it is fsynced: with the topic's `flush.messages` = 1 it is the
//!   log end offset whenever no acknowledged append is pending): rendered at scrape time;
//! - `drover_coordinator_txn_pending_offsets` (gauge): transactional offsets
//!   (TxnOffsetCommit partitions) staged or restored and not yet resolved by their
//!   transaction's outcome, as the coordinator driver counts them;
//!   `drover_coordinator_txn_offset_stages_total{outcome}` (`recorded`, `refused`) and
//!   `drover_coordinator_txn_completions_total{outcome}` (`committed`, `aborted`);
//! - `drover_assignor_timeouts_total{assignor}`: assignor calls abandoned past their
//!   budget (`coordinator.assignor_timeout_ms`), `drover_assignor_calls_overdue{assignor}`
//!   (gauge): abandoned calls still running now (the plugin is *slow* while it is above
//!   0), and `drover_assignor_calls_refused_total{assignor}`: calls refused at once
//!   while the plugin was slow ([`crate::coordination::assignor_budget`]);
//! - `drover_tls_handshakes_total{listener}`: TLS handshakes completed, and
//!   `drover_tls_handshake_failures_total{listener,reason}`: connections closed before
//!   their handshake finished (`timeout`: not within `server.first_request_timeout_ms`;
//!   `not_tls`: plaintext to a TLS listener; `closed`: the client left;
//!   `client_certificate`: none, or not from `client_ca`; `alert`: the client refused
//!   the handshake, e.g. it does not trust the broker's certificate; `incompatible`: no
//!   TLS version or cipher suite in common; `no_principal`: no mapping rule applies to
//!   the certificate's subject; `protocol`: any other TLS error) (server/tls.rs);
//! - `drover_tls_reloads_total{outcome}` (`reloaded`, `failed`: one per listener per
//!   SIGHUP or `POST /v1/tls/reload`) and
//!   `drover_tls_certificate_expiry_timestamp_seconds{listener}` (gauge): when each TLS
//!   listener's certificate in use expires;
//! - `drover_sasl_authentications_total{mechanism,outcome}`: SASL authentications
//!   ended, by mechanism (`plain`, `scram-sha-256`, `scram-sha-512`) and outcome
//!   (`success`, `failure`, `rate_limited`: refused unchecked while the client address
//!   was over `sasl.failures_per_minute_per_client`; `channel_renewed`: a coordinator
//!   channel's expired session renewed because its credential is unchanged)
//!   ([`crate::auth`]);
//! - `drover_admin_requests_refused_total{reason}`: admin API requests refused before
//!   their endpoint (`host`: a `Host` header that does not name the listener;
//!   `unauthenticated`; `forbidden`: a client certificate not in `admin.principals`;
//!   `content_type`: a mutation without `Content-Type: application/json`)
//!   ([`crate::admin::guard`]);
//! - `drover_admin_connections_refused_total{reason}`: admin connections closed by the
//!   listener's bounds (`limit`: accepted at `admin.max_connections`; `header_timeout`:
//!   a request head not complete within `admin.header_timeout_ms`, or a keep-alive
//!   connection idle that long) ([`crate::admin::listener`]);
//! - `drover_authorizer_decisions_total{api,decision}`: the configured authorizer's
//!   decisions (`allowed`, `denied`), one per action asked about, by the Kafka API (or
//!   native API) of the request, and `drover_authorizer_errors_total{reason}`: calls
//!   that failed and so denied (`error`, `panicked`, `out_of_service`) or ACL
//!   management calls past their budget (`timeout`) ([`crate::authz`]).

use std::sync::atomic::{AtomicBool, Ordering};

use drover_abi::coordinator::metrics::CoordinatorCounter;
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
struct AssignorLabels {
    assignor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SaslLabels {
    mechanism: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    api: &'static str,
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerReasonLabels {
    listener: String,
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
    /// Whether a negative coordinator counter increment was logged already.
    negative_increment_logged: AtomicBool,
    zookeeper_connected: Gauge,
    plugin_rescans: Family<OutcomeLabels, Counter>,
    plugin_files_refused: Counter,
    plugin_libraries: Gauge,
    txn_pending_offsets: Gauge,
    txn_offset_stages: Family<OutcomeLabels, Counter>,
    txn_completions: Family<OutcomeLabels, Counter>,
    producer_ids: Gauge,
    producer_ids_evicted: Counter,
    assignor_timeouts: Family<AssignorLabels, Counter>,
    assignor_overdue: Family<AssignorLabels, Gauge>,
    assignor_refused: Family<AssignorLabels, Counter>,
    tls_handshakes: Family<ListenerLabels, Counter>,
    tls_handshake_failures: Family<ListenerReasonLabels, Counter>,
    tls_reloads: Family<OutcomeLabels, Counter>,
    tls_certificate_expiry: Family<ListenerLabels, Gauge>,
    sasl_authentications: Family<SaslLabels, Counter>,
    admin_refused: Family<ReasonLabels, Counter>,
    admin_connections_refused: Family<ReasonLabels, Counter>,
    authorizer_decisions: Family<DecisionLabels, Counter>,
    authorizer_errors: Family<ReasonLabels, Counter>,
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
             coordinator_out_of_service, and SASL's: sasl_unauthenticated_request, \
             sasl_session_expired, sasl_reauthentication_interrupted, \
             sasl_authentication_failed, sasl_unsupported_mechanism, sasl_illegal_state, \
             sasl_credentials_not_loaded, sasl_failed)",
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
            coordinator_events_help(),
            coordinator_events.clone(),
        );
        for counter in CoordinatorCounter::ALL {
            // Known counters exist from the start, so a scraper sees their first increment.
            let _series = coordinator_events.get_or_create(&NameLabels {
                name: counter.name().to_owned(),
            });
        }
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
        let txn_pending_offsets = Gauge::default();
        registry.register(
            "coordinator_txn_pending_offsets",
            "Transactional offsets (partitions) staged or restored and not yet resolved by their transaction",
            txn_pending_offsets.clone(),
        );
        let txn_offset_stages = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "coordinator_txn_offset_stages",
            "TxnOffsetCommits the coordinator asked the host to record, by outcome (recorded, refused)",
            txn_offset_stages.clone(),
        );
        let txn_completions = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "coordinator_txn_completions",
            "Transaction outcomes applied by the coordinator, by outcome (committed, aborted)",
            txn_completions.clone(),
        );
        let producer_ids = Gauge::default();
        registry.register(
            "producer_ids",
            "Idempotent producer ids remembered by this broker's partitions together \
             (each partition at most [log] max_producer_ids_per_partition), as of the scrape",
            producer_ids.clone(),
        );
        let producer_ids_evicted = Counter::default();
        registry.register(
            "producer_ids_evicted",
            "Producer ids a partition forgot to make room for a new one at \
             [log] max_producer_ids_per_partition (the producer idle longest goes)",
            producer_ids_evicted.clone(),
        );
        let assignor_timeouts = Family::<AssignorLabels, Counter>::default();
        registry.register(
            "assignor_timeouts",
            "Assignor calls abandoned past their budget (coordinator.assignor_timeout_ms), \
             by assignor; each rebalance ran the default assignor instead",
            assignor_timeouts.clone(),
        );
        let assignor_overdue = Family::<AssignorLabels, Gauge>::default();
        registry.register(
            "assignor_calls_overdue",
            "Abandoned assignor calls still running past their budget, by assignor (the \
             plugin is slow while above 0)",
            assignor_overdue.clone(),
        );
        let assignor_refused = Family::<AssignorLabels, Counter>::default();
        registry.register(
            "assignor_calls_refused",
            "Assignor calls refused at once because a call of the plugin was running past \
             its budget (or all its worker threads were busy), by assignor",
            assignor_refused.clone(),
        );
        let tls_handshakes = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "tls_handshakes",
            "TLS handshakes completed, by listener",
            tls_handshakes.clone(),
        );
        let tls_handshake_failures = Family::<ListenerReasonLabels, Counter>::default();
        registry.register(
            "tls_handshake_failures",
            "Connections closed before their TLS handshake finished, by listener and reason \
             (timeout, not_tls, closed, client_certificate, alert, incompatible, no_principal, \
             protocol)",
            tls_handshake_failures.clone(),
        );
        let tls_reloads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "tls_reloads",
            "Reloads of a TLS listener's certificate files (SIGHUP, POST /v1/tls/reload), by \
             outcome (reloaded, failed)",
            tls_reloads.clone(),
        );
        let tls_certificate_expiry = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the certificate a TLS listener serves expires, seconds since the Unix epoch",
            tls_certificate_expiry.clone(),
        );
        let sasl_authentications = Family::<SaslLabels, Counter>::default();
        registry.register(
            "sasl_authentications",
            "SASL authentications ended, by mechanism (plain, scram-sha-256, scram-sha-512) \
             and outcome (success, failure, rate_limited, channel_renewed)",
            sasl_authentications.clone(),
        );
        let admin_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "admin_requests_refused",
            "Admin API requests refused before their endpoint, by reason (host, \
             unauthenticated, forbidden, content_type)",
            admin_refused.clone(),
        );
        let admin_connections_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "admin_connections_refused",
            "Admin API connections closed by the listener's bounds, by reason (limit: \
             admin.max_connections reached; header_timeout: no complete request head \
             within admin.header_timeout_ms)",
            admin_connections_refused.clone(),
        );
        let authorizer_decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "authorizer_decisions",
            "Decisions of the configured authorizer, one per action asked about, by API and \
             decision (allowed, denied; a failed call counts as denied)",
            authorizer_decisions.clone(),
        );
        let authorizer_errors = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "authorizer_errors",
            "Authorizer calls that failed, by reason (error, panicked, out_of_service: the \
             request's actions were denied; timeout: an ACL management call past \
             authorizer.acl_call_timeout_ms)",
            authorizer_errors.clone(),
        );
        Metrics {
            authorizer_decisions,
            authorizer_errors,
            admin_refused,
            admin_connections_refused,
            sasl_authentications,
            tls_handshakes,
            tls_handshake_failures,
            tls_reloads,
            tls_certificate_expiry,
            assignor_timeouts,
            assignor_overdue,
            assignor_refused,
            txn_pending_offsets,
            txn_offset_stages,
            txn_completions,
            registry,
            producer_ids,
            producer_ids_evicted,
            plugin_rescans,
            plugin_files_refused,
            plugin_libraries,
            zookeeper_connected,
            native_requests,
            coordinator_events,
            negative_increment_logged: AtomicBool::new(false),
            requests,
            bytes_in,
            bytes_out,
            connections,
            connections_total,
            frames_rejected,
            connections_closed,
        }
    }

    /// Counts `allowed` and `denied` decisions of the authorizer for a request of `api`.
    pub fn authorizer_decisions(&self, api: &'static str, allowed: u64, denied: u64) {
        for (decision, n) in [("allowed", allowed), ("denied", denied)] {
            if n > 0 {
                self.authorizer_decisions
                    .get_or_create(&DecisionLabels { api, decision })
                    .inc_by(n);
            }
        }
    }

    /// Counts an authorizer call that failed, for `reason` (module docs).
    pub fn authorizer_error(&self, reason: &'static str) {
        self.authorizer_errors
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The broker refused or closed a connection, for `reason` (module docs).
    pub fn connection_closed_by_broker(&self, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts one SASL authentication that ended with `outcome` (`success`, `failure`,
    /// `rate_limited`) for `mechanism` (its metrics label).
    pub fn sasl_authentication(&self, mechanism: &str, outcome: &'static str) {
        self.sasl_authentications
            .get_or_create(&SaslLabels {
                mechanism: mechanism.to_owned(),
                outcome: outcome.to_owned(),
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

    /// Requests of `api` (Kafka's name, `Produce`) answered without an error so far
    /// (the console's request rates, from the difference between two reads).
    pub fn requests_ok(&self, api: &str) -> u64 {
        self.requests
            .get_or_create(&RequestLabels {
                api: api.to_owned(),
                error: error_name(0),
            })
            .get()
    }

    /// Request bytes so far, and response bytes so far.
    pub fn bytes_totals(&self) -> (u64, u64) {
        (self.bytes_in.get(), self.bytes_out.get())
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

    /// Adds `value` to the coordinator's counter `name`
    /// ([`drover_abi::coordinator::metrics`]: a [`CoordinatorCounter`] name, or a
    /// third-party coordinator's own). Zero adds nothing; a negative value is not an
    /// increment and is ignored (the first one is logged).
    pub fn coordinator_event(&self, name: &str, value: i64) {
        match u64::try_from(value) {
            Ok(0) => {}
            Ok(increment) => {
                self.coordinator_events
                    .get_or_create(&NameLabels {
                        name: name.to_owned(),
                    })
                    .inc_by(increment);
            }
            Err(_) => {
                if !self.negative_increment_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        name,
                        value,
                        "the coordinator reported a negative increment of counter `{name}`; \
                         ignored (coordinator metrics are counters; later ones are not logged)"
                    );
                }
            }
        }
    }

    /// Counts an assignor call of `assignor` abandoned past its budget.
    pub fn assignor_timeout(&self, assignor: &str) {
        self.assignor_timeouts
            .get_or_create(&AssignorLabels {
                assignor: assignor.to_owned(),
            })
            .inc();
    }

    /// Sets how many abandoned calls of `assignor` are still running (0 also creates the
    /// series, so a scraper sees the plugin before its first timeout).
    pub fn assignor_overdue(&self, assignor: &str, calls: usize) {
        self.assignor_overdue
            .get_or_create(&AssignorLabels {
                assignor: assignor.to_owned(),
            })
            .set(i64::try_from(calls).unwrap_or(i64::MAX));
    }

    /// Counts a call of `assignor` refused at once while it was slow.
    pub fn assignor_refused(&self, assignor: &str) {
        self.assignor_refused
            .get_or_create(&AssignorLabels {
                assignor: assignor.to_owned(),
            })
            .inc();
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

    /// Sets `drover_coordinator_txn_pending_offsets` to `n` partitions.
    pub fn txn_pending_offsets(&self, n: usize) {
        self.txn_pending_offsets
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts a staging of transactional offsets: `recorded` or not.
    pub fn txn_offset_stage(&self, recorded: bool) {
        let outcome = if recorded { "recorded" } else { "refused" };
        self.txn_offset_stages
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts a transaction outcome applied by the coordinator.
    pub fn txn_completion(&self, committed: bool) {
        let outcome = if committed { "committed" } else { "aborted" };
        self.txn_completions
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Sets the number of distinct plugin libraries loaded in the process.
    pub fn plugin_libraries(&self, libraries: usize) {
        self.plugin_libraries.set(libraries as i64);
    }

    /// Sets the number of producer ids all partitions remember (at scrape time).
    pub fn producer_ids(&self, count: usize) {
        self.producer_ids
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts producer ids evicted from a full partition table.
    pub fn producer_ids_evicted(&self, count: u64) {
        self.producer_ids_evicted.inc_by(count);
    }

    /// Records whether the ZooKeeper session is connected.
    pub fn zookeeper_connected(&self, connected: bool) {
        self.zookeeper_connected.set(i64::from(connected));
    }

    /// A TLS handshake on `listener` finished.
    pub fn tls_handshake(&self, listener: &str) {
        self.tls_handshakes
            .get_or_create(&ListenerLabels {
                listener: listener.to_owned(),
            })
            .inc();
    }

    /// A connection on `listener` closed before its TLS handshake finished, for
    /// `reason` (server/tls.rs, `HandshakeFailure::reason`).
    pub fn tls_handshake_failed(&self, listener: &str, reason: &'static str) {
        self.tls_handshake_failures
            .get_or_create(&ListenerReasonLabels {
                listener: listener.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// One TLS listener's files were reloaded, or failed to.
    pub fn tls_reload(&self, reloaded: bool) {
        self.tls_reloads
            .get_or_create(&OutcomeLabels {
                outcome: if reloaded { "reloaded" } else { "failed" }.to_owned(),
            })
            .inc();
    }

    /// TLS listener `listener` serves a certificate that expires at `not_after_unix_s`
    /// (seconds since the Unix epoch).
    pub fn tls_certificate(&self, listener: &str, not_after_unix_s: i64) {
        self.tls_certificate_expiry
            .get_or_create(&ListenerLabels {
                listener: listener.to_owned(),
            })
            .set(not_after_unix_s);
    }

    /// An admin API request was refused for `reason` (admin/guard.rs).
    pub fn admin_request_refused(&self, reason: &'static str) {
        self.admin_refused
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// An admin API connection was closed by the listener's bounds, for `reason`
    /// (admin/listener.rs).
    pub fn admin_connection_refused(&self, reason: &'static str) {
        self.admin_connections_refused
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A frame was refused before decoding, for `reason`.
    pub fn frame_rejected(&self, reason: &'static str) {
        self.frames_rejected
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The metrics in the Prometheus text format, with `log_offsets` ((topic, partition,
    /// log end offset, flushed offset)) as two gauges.
    pub fn render(&self, log_offsets: &[(String, i32, i64, i64)]) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            return String::new();
        }
        let body = out.strip_suffix("# EOF\n").unwrap_or(&out).to_owned();
        let mut text = body;
        text.push_str("# HELP drover_log_end_offset Next offset to be written, per partition.\n");
        text.push_str("# TYPE drover_log_end_offset gauge\n");
        for (topic, partition, offset, _) in log_offsets {
            // Topic names are [a-zA-Z0-9._-]: nothing to escape.
            text.push_str(&format!(
                "drover_log_end_offset{{topic=\"{topic}\",partition=\"{partition}\"}} {offset}\n"
            ));
        }
        text.push_str(
            "# HELP drover_log_flushed_offset Log end offset as of the last fsync, per \
             partition: every offset below it is on disk.\n",
        );
        text.push_str("# TYPE drover_log_flushed_offset gauge\n");
        for (topic, partition, _, flushed) in log_offsets {
            text.push_str(&format!(
                "drover_log_flushed_offset{{topic=\"{topic}\",partition=\"{partition}\"}} {flushed}\n"
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

/// The `# HELP` text of `drover_coordinator_events`: every known counter's name, unit and
/// help, from [`CoordinatorCounter`] (OpenMetrics has one help line per family, and the
/// counters share one family: see [`drover_abi::coordinator::metrics`]).
fn coordinator_events_help() -> String {
    let mut help = String::from("Counters of the coordinator, by name.");
    for counter in CoordinatorCounter::ALL {
        help.push_str(&format!(
            " {} ({}): {}",
            counter.name(),
            counter.unit(),
            counter.help()
        ));
    }
    help.push_str(" Other names are a third-party coordinator's own.");
    help
}

#[cfg(test)]
mod tests {
    use drover_abi::coordinator::metrics::FAMILY;

    use super::*;

    /// The `# HELP` line of `family` in `text`.
    fn help_line<'a>(text: &'a str, family: &str) -> &'a str {
        let prefix = format!("# HELP {family} ");
        text.lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in\n{text}"))
    }

    /// The value of the sample `line_start` (a name with its labels) in `text`.
    fn sample(text: &str, line_start: &str) -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
            .map(str::to_owned)
    }

    #[test]
    fn a_known_coordinator_counter_is_exported_with_its_help() {
        let metrics = Metrics::new();
        metrics.coordinator_event(CoordinatorCounter::CommitBatches.name(), 2);
        let text = metrics.render(&[]);
        assert_eq!(
            sample(
                &text,
                r#"drover_coordinator_events_total{name="commit_batches"}"#
            )
            .as_deref(),
            Some("2"),
            "{text}"
        );
        let help = help_line(&text, FAMILY);
        for counter in CoordinatorCounter::ALL {
            let described = format!(
                " {} ({}): {}",
                counter.name(),
                counter.unit(),
                counter.help()
            );
            assert!(help.contains(&described), "{described:?} not in {help:?}");
        }
    }

    #[test]
    fn known_coordinator_counters_start_at_zero() {
        let text = Metrics::new().render(&[]);
        for counter in CoordinatorCounter::ALL {
            let series = format!("{FAMILY}_total{{name=\"{}\"}}", counter.name());
            assert_eq!(sample(&text, &series).as_deref(), Some("0"), "{text}");
        }
    }

    #[test]
    fn coordinator_counters_only_go_up_and_unknown_names_count() {
        let metrics = Metrics::new();
        metrics.coordinator_event("generations", 3);
        metrics.coordinator_event("generations", -1);
        metrics.coordinator_event("generations", 0);
        // A third-party coordinator's own counter (tests/compat's coordinator reports it).
        metrics.coordinator_event("unknown_inputs", 1);
        let text = metrics.render(&[]);
        assert_eq!(
            sample(
                &text,
                r#"drover_coordinator_events_total{name="generations"}"#
            )
            .as_deref(),
            Some("3")
        );
        assert_eq!(
            sample(
                &text,
                r#"drover_coordinator_events_total{name="unknown_inputs"}"#
            )
            .as_deref(),
            Some("1")
        );
    }

    /// docs/operations.md lists every counter as a table row with the same unit and
    /// help, so the doc cannot drift from the set.
    #[test]
    fn operations_doc_lists_every_coordinator_counter() {
        let doc = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/operations.md"
        ));
        for counter in CoordinatorCounter::ALL {
            let row = format!(
                "| `{}` | {} | {} |",
                counter.name(),
                counter.unit(),
                counter.help()
            );
            assert!(
                doc.lines().any(|l| l == row),
                "docs/operations.md lacks the row\n{row}"
            );
        }
    }
}
