//! `drover.toml`: the broker's configuration file.
//!
//! Every key has a safe default, so an empty file (or none) is a valid standalone
//! configuration. Keys and defaults are documented in `docs/operations.md`.
//!
//! ```toml
//! data_dir = "data"                      # broker state; default "./drover-data"
//!
//! [plugins]
//! dir = "plugins"                        # where plugin .so files are scanned
//! sha256_allowlist = ["9f86d0…"]         # optional: only these files are loaded
//! required = ["sticky", "embedded"]      # plugins that must load, or startup stops
//!
//! [plugins.config.embedded]              # passed to plugin `embedded` as TOML
//! path = "data/offsets.redb"
//! ```

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use serde::Deserialize;

pub mod listeners;

/// Errors reading or validating the config file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The config path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys or wrong types.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The config path.
        path: PathBuf,
        /// What the TOML parser said (with line and column).
        message: String,
    },
    /// A value is out of range.
    #[error("invalid config {path}: {message}")]
    Invalid {
        /// The config path.
        path: PathBuf,
        /// What is wrong and what is allowed.
        message: String,
    },
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory for broker state (partition logs, the plugin cache, the embedded offset
    /// store). Default `./drover-data`.
    pub data_dir: PathBuf,
    /// The `[plugins]` table.
    pub plugins: PluginsConfig,
    /// The `[server]` table: listeners and connection bounds.
    pub server: ServerConfig,
    /// The `[topics]` table: auto-creation and defaults.
    pub topics: TopicsConfig,
    /// The `[log]` table: partition log segments, retention and flushing.
    pub log: crate::log::LogConfig,
    /// The `[coordinator]` table: which coordinator plugin runs, its default assignor
    /// and offset store.
    pub coordinator: CoordinatorSection,
    /// The `[offsets]` table: committed-offset retention.
    pub offsets: OffsetsSection,
    /// The `[zookeeper]` table: cluster mode.
    pub zookeeper: ZookeeperSection,
    /// The `[transactions]` table: the transaction coordinator.
    pub transactions: TransactionsSection,
    /// The `[sasl]` table: SASL authentication and the SCRAM credential store.
    pub sasl: SaslSection,
    /// The `[admin]` table: who may use the admin HTTP API and how it is reached.
    pub admin: AdminSection,
    /// The `[authorizer]` table: which authorizer plugin decides what clients may do
    /// (none: every client may do everything, as before issue 30).
    pub authorizer: AuthorizerSection,
    /// The `[share]` table: share-group delivery (KIP-932; issue 31).
    pub share: ShareSection,
}

/// The `[share]` table: the share-partition limits (Kafka's `group.share.*` names) and
/// the bounds on share sessions (docs/operations.md, "Share groups").
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShareSection {
    /// How long a member holds the records a ShareFetch acquired for it before they are
    /// available to others, ms. Kafka's `group.share.record.lock.duration.ms`. Default
    /// 30000; 15000–3600000.
    pub record_lock_duration_ms: u64,
    /// Deliveries after which a released or expired record is archived. Kafka's
    /// `group.share.delivery.count.limit`. Default 5; 2–10.
    pub delivery_count_limit: u16,
    /// Most records in flight per share-partition (between its start and end offsets).
    /// Kafka's `group.share.partition.max.record.locks`. Default 2000; 100–10000.
    pub partition_max_record_locks: u32,
    /// Where a share-partition with no saved state starts: `latest`, `earliest` or
    /// `by_duration:<ISO-8601 duration>`. Kafka's group config `share.auto.offset.reset`
    /// (here for every share group). Default `latest`.
    pub auto_offset_reset: String,
    /// `read_uncommitted` or `read_committed` (aborted transactions' records are
    /// archived, never delivered). Kafka's group config `share.isolation.level` (here for
    /// every share group). Default `read_uncommitted`.
    pub isolation_level: String,
    /// Most share sessions on the broker. A new session beyond it evicts one idle for
    /// `session_idle_ms`, else is answered `SHARE_SESSION_LIMIT_REACHED`. Kafka's
    /// `group.share.max.share.sessions`. Default 2000.
    pub max_sessions: usize,
    /// Most share sessions opened from one client address; a new one beyond it evicts
    /// that address's least recently used session if it has been idle for
    /// `session_idle_ms` (its records are released), else is answered
    /// `SHARE_SESSION_LIMIT_REACHED`: sessions in use are never pushed out. This
    /// broker's. Default 100.
    pub max_sessions_per_client: usize,
    /// A session unused this long may be evicted for a new one, ms. Default 120000.
    pub session_idle_ms: u64,
    /// Most share-partitions (share group × topic-partition) kept in memory. Beyond it
    /// one with no record acquired is dropped (its state is durable and is read again
    /// when needed); when every one holds acquired records, the new one is answered
    /// `COORDINATOR_LOAD_IN_PROGRESS` (retriable). This broker's. Default 10000.
    pub max_share_partitions: usize,
    /// Most share-partitions with series of their own (labels group, topic, partition)
    /// in `GET /metrics`, the first in (group, topic, partition) order; the rest count
    /// only in the broker-wide share metrics. Bounds the series a scrape holds. 0: none.
    /// Default 100.
    pub metrics_max_share_partitions: usize,
}

impl Default for ShareSection {
    fn default() -> Self {
        ShareSection {
            record_lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            partition_max_record_locks: 2000,
            auto_offset_reset: "latest".into(),
            isolation_level: "read_uncommitted".into(),
            max_sessions: 2000,
            max_sessions_per_client: 100,
            session_idle_ms: 120_000,
            max_share_partitions: 10_000,
            metrics_max_share_partitions: 100,
        }
    }
}

impl ShareSection {
    /// The share-partition limits.
    pub fn limits(&self) -> drover_share::ShareLimits {
        drover_share::ShareLimits {
            record_lock_duration_ms: self.record_lock_duration_ms,
            delivery_count_limit: self.delivery_count_limit,
            max_record_locks: self.partition_max_record_locks,
        }
    }

    /// `auto_offset_reset`, read (checked at load, so the default on error is unreachable).
    pub fn reset(&self) -> drover_share::AutoOffsetReset {
        drover_share::AutoOffsetReset::parse(&self.auto_offset_reset).unwrap_or_default()
    }

    /// Checks every value's range.
    pub fn check(&self) -> Result<(), String> {
        self.limits().check().map_err(|e| format!("share: {e}"))?;
        drover_share::AutoOffsetReset::parse(&self.auto_offset_reset)
            .map_err(|e| format!("share: {e}"))?;
        if !matches!(
            self.isolation_level.as_str(),
            "read_uncommitted" | "read_committed"
        ) {
            return Err(format!(
                "share.isolation_level = {:?}: expected read_uncommitted or read_committed",
                self.isolation_level
            ));
        }
        if self.max_sessions == 0
            || self.max_sessions_per_client == 0
            || self.max_share_partitions == 0
        {
            return Err("share: max_sessions, max_sessions_per_client and max_share_partitions must be at least 1".into());
        }
        Ok(())
    }
}

/// The `[authorizer]` table (issue 30; docs/security.md, "Authorization"). Without
/// `plugin` nothing is authorized: every request is served as it was before, and the
/// ACL APIs answer SECURITY_DISABLED.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthorizerSection {
    /// The authorizer plugin's name (e.g. `acl`, the built-in ACL authorizer). Its
    /// config is `[plugins.config.<name>]`; in cluster mode it gets the broker's
    /// ZooKeeper session. The broker does not start when it does not load or start.
    pub plugin: Option<String>,
    /// The time budget of one ACL management call (DescribeAcls, CreateAcls,
    /// DeleteAcls), which may write to disk or ZooKeeper, ms. Past it the request is
    /// answered with an error (`REQUEST_TIMED_OUT`); the call may still complete.
    /// Default 10000.
    pub acl_call_timeout_ms: u64,
}

impl Default for AuthorizerSection {
    fn default() -> Self {
        AuthorizerSection {
            plugin: None,
            acl_call_timeout_ms: 10_000,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("drover-data"),
            plugins: PluginsConfig::default(),
            server: ServerConfig::default(),
            topics: TopicsConfig::default(),
            log: crate::log::LogConfig::default(),
            coordinator: CoordinatorSection::default(),
            offsets: OffsetsSection::default(),
            zookeeper: ZookeeperSection::default(),
            transactions: TransactionsSection::default(),
            sasl: SaslSection::default(),
            admin: AdminSection::default(),
            authorizer: AuthorizerSection::default(),
            share: ShareSection::default(),
        }
    }
}

/// The `[admin]` table: who may use the admin HTTP API (`server.admin_listen`) and by
/// which names it is reached (issue 29 item 6; docs/security.md, "The admin API").
///
/// With none of it set, the API keeps its loopback behaviour: no TLS, no credentials,
/// and only the loopback names in the `Host` header. A non-loopback `admin_listen`
/// needs TLS (`ssl.certificate_chain`) and an authentication method (`token_file`, or
/// `ssl.client_auth` with `ssl.client_ca`), or the broker refuses to start.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSection {
    /// A file holding the bearer token (one line, at least 16 characters, no spaces;
    /// mode 0600 or stricter): every request not opened by `public_read` must then
    /// carry `Authorization: Bearer <token>` (or a client certificate, with mTLS).
    /// Enforced on loopback too. Read at startup; never logged.
    pub token_file: Option<PathBuf>,
    /// TLS for the admin listener, as a Kafka listener's `[server.ssl]`: TLS is on
    /// when `certificate_chain` is set; `client_auth` with `client_ca` authenticates
    /// clients by certificate (mTLS), named by `principal_mapping_rules`. Reloaded with
    /// the Kafka listeners' (SIGHUP, `POST /v1/tls/reload`).
    pub ssl: SslSection,
    /// With mTLS: the principals (`User:<name>`, after `ssl.principal_mapping_rules`)
    /// whose certificates authenticate; others are refused (403). Empty (the default):
    /// every certificate `ssl.client_ca` vouches for.
    pub principals: Vec<String>,
    /// Names the API is reached by, besides its own address (and `localhost`,
    /// `127.0.0.1`, `[::1]` on loopback): a request whose `Host` header names anything
    /// else is refused (421), so a web page cannot reach the API by DNS rebinding.
    /// Host names or IP addresses, without the port.
    pub host_names: Vec<String>,
    /// Read-only endpoints open without credentials (`GET`/`HEAD` only, exact paths),
    /// e.g. `["/metrics", "/v1/health"]` for a Prometheus scraper. Default none.
    pub public_read: Vec<String>,
    /// Admin connections served at once (TLS handshakes in progress included); one
    /// more is closed as soon as it is accepted and counted in
    /// `drover_admin_connections_refused_total{reason="limit"}`. Default 64.
    pub max_connections: usize,
    /// How long a connection may take to send a request's head (request line and
    /// headers), measured from when the listener starts waiting for it: a client that
    /// dribbles or never finishes its headers (slowloris), or a keep-alive connection
    /// idle this long, is closed (`reason="header_timeout"`). Default 10 000 ms.
    pub header_timeout_ms: u64,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection {
            token_file: None,
            ssl: SslSection::default(),
            principals: Vec::new(),
            host_names: Vec::new(),
            public_read: Vec::new(),
            max_connections: 64,
            header_timeout_ms: 10_000,
        }
    }
}

impl AdminSection {
    /// Whether the admin listener serves TLS.
    pub fn tls(&self) -> bool {
        self.ssl.certificate_chain.is_some()
    }

    /// Whether requests must authenticate (a token file or client certificates).
    pub fn authenticates(&self) -> bool {
        self.token_file.is_some() || self.ssl.client_auth != ClientAuth::None
    }

    /// Checks the table against the admin listener's address `listen`: what a
    /// non-loopback address needs, and each key's form.
    pub fn check(&self, listen: SocketAddr) -> Result<(), String> {
        let ssl = &self.ssl;
        if ssl.certificate_chain.is_some() != ssl.private_key.is_some() {
            return Err("admin.ssl: certificate_chain and private_key go together".into());
        }
        if ssl.client_auth != ClientAuth::None && ssl.client_ca.is_none() {
            return Err("admin.ssl.client_auth needs admin.ssl.client_ca".into());
        }
        if ssl.client_auth != ClientAuth::None && !self.tls() {
            return Err(
                "admin.ssl.client_auth needs TLS: set admin.ssl.certificate_chain and \
                 private_key"
                    .into(),
            );
        }
        if !self.principals.is_empty() && ssl.client_auth == ClientAuth::None {
            return Err("admin.principals needs admin.ssl.client_auth".into());
        }
        for p in &self.principals {
            if !p.starts_with("User:") || p.len() == "User:".len() {
                return Err(format!(
                    "admin.principals: `{p}` is not a principal (`User:<name>`)"
                ));
            }
        }
        for name in &self.host_names {
            if name.is_empty()
                || name
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'/')
            {
                return Err(format!(
                    "admin.host_names: `{name}` is not a host name or IP address"
                ));
            }
        }
        for path in &self.public_read {
            if !path.starts_with('/') || path.contains(['?', '#']) {
                return Err(format!(
                    "admin.public_read: `{path}` is not a path (`/metrics`, `/v1/health`)"
                ));
            }
        }
        if self.max_connections == 0 {
            return Err("admin.max_connections must be at least 1".into());
        }
        if self.header_timeout_ms == 0 {
            return Err("admin.header_timeout_ms must be at least 1".into());
        }
        let secured = self.tls() && self.authenticates();
        if !(listen.ip().is_loopback() || secured) {
            return Err(format!(
                "server.admin_listen is {listen}, not a loopback address: the admin API \
                 there needs TLS (admin.ssl.certificate_chain and admin.ssl.private_key) and \
                 an authentication method (admin.token_file, or admin.ssl.client_auth with \
                 admin.ssl.client_ca); see docs/security.md, \"The admin API\""
            ));
        }
        Ok(())
    }
}

/// The `[sasl]` table: SASL authentication (issue 29 item 3; the mechanisms of KIP-84
/// and RFC 4616) and the SCRAM credential store (KIP-554). docs/security.md, "SASL/SCRAM".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SaslSection {
    /// The mechanisms SaslHandshake offers, by SASL name: `SCRAM-SHA-512`,
    /// `SCRAM-SHA-256`, `PLAIN` (Kafka's `sasl.enabled.mechanisms`). Default
    /// `["SCRAM-SHA-512", "SCRAM-SHA-256"]`; PLAIN only when listed.
    pub mechanisms: Vec<String>,
    /// Offer PLAIN on listeners without TLS too (the password crosses the network in
    /// the clear). Default false: PLAIN is offered on TLS listeners only.
    pub plain_on_plaintext: bool,
    /// The session lifetime, ms (Kafka's `connections.max.reauth.ms`, KIP-368): a
    /// client is told it in SaslAuthenticate (v1+) and must authenticate again within
    /// it; a connection past it that sends anything but SaslHandshake is closed. 0:
    /// sessions do not expire. Default 0.
    pub connections_max_reauth_ms: u64,
    /// How long a failed authentication's answer is held back before the connection is
    /// closed, ms (Kafka's `connection.failed.authentication.delay.ms`, KIP-306).
    /// Default 100; at most `server.idle_timeout_ms`.
    pub failed_authentication_delay_ms: u64,
    /// Failed authentications one client address may make per minute, as a token
    /// bucket holding a minute's worth; beyond them its authentications are refused
    /// without a credential being looked at. An IPv6 client is its /64. This broker's
    /// (Kafka has none). Default 30, at least 1.
    pub failures_per_minute_per_client: u32,
    /// Most users with SCRAM credentials; an AlterUserScramCredentials upsertion that
    /// would add one more is refused (`POLICY_VIOLATION`). In cluster mode the
    /// credentials are one ZooKeeper node, which must stay under ZooKeeper's
    /// `jute.maxbuffer` (1 MiB: about 1,500 users with both mechanisms). Default 1000,
    /// at least 1.
    pub max_scram_users: usize,
}

impl Default for SaslSection {
    fn default() -> Self {
        SaslSection {
            mechanisms: vec!["SCRAM-SHA-512".into(), "SCRAM-SHA-256".into()],
            plain_on_plaintext: false,
            connections_max_reauth_ms: 0,
            failed_authentication_delay_ms: 100,
            failures_per_minute_per_client: 30,
            max_scram_users: 1000,
        }
    }
}

/// The `[transactions]` table: the transaction coordinator (KIP-98). The first three
/// keys are Kafka's settings of the same name with `_` for `.`; the last four are this
/// broker's bounds on what clients can make it keep.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransactionsSection {
    /// Largest `transaction.timeout.ms` a producer may ask for in InitProducerId, ms;
    /// a larger one is `INVALID_TRANSACTION_TIMEOUT`. Kafka's
    /// `transaction.max.timeout.ms`. Default 900000 (15 minutes).
    pub transaction_max_timeout_ms: i32,
    /// A transactional id with no open transaction is forgotten this long after its
    /// last change, ms. Kafka's `transactional.id.expiration.ms`. Default 604800000
    /// (7 days).
    pub transactional_id_expiration_ms: i64,
    /// How often open transactions past their timeout are aborted (and expired ids
    /// removed), ms. Kafka's
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`. Default 10000.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// A transactional id that never opened a transaction (InitProducerId only, no
    /// AddPartitionsToTxn or AddOffsetsToTxn accepted) is forgotten this long after its
    /// last change, ms, when shorter than `transactional_id_expiration_ms`, so ids made
    /// up in bulk do not stay for days. This broker's (Kafka has none). Default 3600000
    /// (1 hour), at least 1.
    pub unused_id_expiration_ms: i64,
    /// Most transactional ids kept at once. InitProducerId for a new id beyond it
    /// evicts an idle one (no transaction open), one that never opened a transaction
    /// first, then the one idle longest; only when every id has a transaction open is
    /// it `POLICY_VIOLATION`. Default 100000.
    pub max_transactional_ids: usize,
    /// Most new transactional ids one client address may create per second
    /// (InitProducerId naming an id the coordinator does not know), as a token bucket
    /// per address holding one second's worth, the way `topics.auto_create_per_sec`
    /// bounds topic creation. Beyond it the call is answered
    /// `COORDINATOR_LOAD_IN_PROGRESS`, which every client retries (no InitProducerId
    /// version may carry `THROTTLING_QUOTA_EXCEEDED`). Calls for known ids and without a
    /// transactional id are not counted. This broker's (Kafka has none). Default 50, at
    /// least 1.
    pub new_ids_per_sec_per_client: u32,
    /// Most partitions in one transaction; an AddPartitionsToTxn beyond it is
    /// `POLICY_VIOLATION`. Default 10000.
    pub max_partitions_per_transaction: usize,
    /// Most consumer groups in one transaction (AddOffsetsToTxn). Default 100.
    pub max_groups_per_transaction: usize,
    /// Most transactional offsets staged in one transaction (TxnOffsetCommit), over its
    /// groups. Default 100000.
    pub max_offsets_per_transaction: usize,
}

impl Default for TransactionsSection {
    fn default() -> Self {
        TransactionsSection {
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            unused_id_expiration_ms: 3_600_000,
            max_transactional_ids: 100_000,
            new_ids_per_sec_per_client: 50,
            max_partitions_per_transaction: 10_000,
            max_groups_per_transaction: 100,
            max_offsets_per_transaction: 100_000,
        }
    }
}

impl TransactionsSection {
    /// The coordinator's bounds.
    pub fn limits(&self) -> crate::txn::state::Limits {
        crate::txn::state::Limits {
            max_timeout_ms: self.transaction_max_timeout_ms,
            id_expiration_ms: self.transactional_id_expiration_ms,
            unused_id_expiration_ms: self.unused_id_expiration_ms,
            max_transactional_ids: self.max_transactional_ids,
            max_partitions_per_transaction: self.max_partitions_per_transaction,
            max_groups_per_transaction: self.max_groups_per_transaction,
            max_offsets_per_transaction: self.max_offsets_per_transaction,
        }
    }
}

/// The `[zookeeper]` table: cluster mode (docs/design.md, "Cluster mode").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZookeeperSection {
    /// Run in cluster mode. Default false (standalone).
    pub enabled: bool,
    /// ZooKeeper ensemble, `host:port[,host:port...]`. Default `127.0.0.1:2181`.
    pub connect: String,
    /// Every node the cluster uses lives below this path. Default `/drover`.
    pub chroot: String,
    /// ZooKeeper session timeout, ms. Default 6000.
    pub session_timeout_ms: u64,
    /// Number of coordinator slots; a group belongs to slot fnv1a(group) mod this.
    /// Every broker of a cluster must use the same value. Default 16.
    pub slots: u32,
    /// A broker that is not a slot's preferred owner waits this long before claiming
    /// the unowned slot, so slots spread over brokers, ms. Default 2000.
    pub slot_claim_delay_ms: u64,
    /// The slot guard, ms: a broker that has had no answer from ZooKeeper for this
    /// long stops coordinating its slots (it may be cut off, and its session may expire
    /// soon). Because every broker stops this long after its last answer, a slot whose
    /// owner's session expired has not been served for at least `session_timeout_ms −
    /// slot_guard_ms` (less a 100 ms margin) when another broker claims it, and the new
    /// owner's takeover wait is shortened by that much (docs/protocol.md §6.8). Smaller
    /// is faster fail-over but gives slots up on shorter ZooKeeper stalls. Every broker
    /// of a cluster must use the same value. Default: a third of the session timeout,
    /// at most 500; at least 300 and below `session_timeout_ms`.
    pub slot_guard_ms: Option<u64>,
    /// A file holding `user:password` (one line, mode 0600 or stricter): the broker's
    /// sessions authenticate with ZooKeeper's `digest` scheme as that user, and every
    /// node the broker creates may be changed by that identity only (anyone may read
    /// it). Every broker of a cluster uses the same file. Default none: no
    /// authentication, nodes open to anyone. docs/security.md, "ZooKeeper".
    pub auth_digest_file: Option<PathBuf>,
}

impl Default for ZookeeperSection {
    fn default() -> Self {
        ZookeeperSection {
            enabled: false,
            connect: "127.0.0.1:2181".into(),
            chroot: "/drover".into(),
            session_timeout_ms: 6_000,
            slots: 16,
            slot_claim_delay_ms: 2_000,
            slot_guard_ms: None,
            auth_digest_file: None,
        }
    }
}

impl ZookeeperSection {
    /// The slot guard in ms: [`ZookeeperSection::slot_guard_ms`] or its default.
    pub fn slot_guard(&self) -> u64 {
        self.slot_guard_ms
            .unwrap_or_else(|| (self.session_timeout_ms / 3).clamp(300, 500))
    }

    /// Applies `--zookeeper HOST:PORT[,HOST:PORT][/chroot]`: sets `connect` (and
    /// `chroot` when given) and enables cluster mode.
    pub fn apply_flag(&mut self, flag: &str) {
        match flag.find('/') {
            Some(i) => {
                self.connect = flag[..i].to_owned();
                self.chroot = flag[i..].to_owned();
            }
            None => self.connect = flag.to_owned(),
        }
        self.enabled = true;
    }
}

/// The `[offsets]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OffsetsSection {
    /// A group's committed offsets are deleted this long after the group became empty
    /// (Kafka's `offsets.retention.minutes`, KIP-211), ms; −1 keeps them forever.
    /// Default 604800000 (7 days).
    pub retention_ms: i64,
    /// How often retention runs, ms. Default 60000.
    pub retention_check_interval_ms: u64,
}

impl Default for OffsetsSection {
    fn default() -> Self {
        OffsetsSection {
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_check_interval_ms: 60_000,
        }
    }
}

/// The `[coordinator]` table. The coordinator plugin's own settings (rebalance mode,
/// debounce, limits) go in its `[plugins.config.<plugin>]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoordinatorSection {
    /// Name of the coordinator plugin to start. Default `drover-coordinator`. If no
    /// plugin of that name is in the plugin directory, the broker runs without a
    /// coordinator (native group requests are refused) unless the name is also in
    /// `plugins.required`, which makes it mandatory.
    pub plugin: String,
    /// The assignor of groups whose consumers name none. Default `range` (Kafka's
    /// default `partition.assignment.strategy`). Must be a loaded assignor.
    pub default_assignor: String,
    /// The active offset store: the plugin that keeps committed offsets. Default
    /// `embedded`. It is opened at startup even when not in `plugins.required`.
    pub offset_store: String,
    /// Capacity of the queue from connections to the coordinator thread, in messages;
    /// when full, connections wait (backpressure). Default 65536.
    pub queue_capacity: usize,
    /// Most offset-store operations executed as one batch (one store transaction for
    /// all commits in it). Default 4096.
    pub max_store_batch: usize,
    /// The window over which each partition's produce rate (bytes and records per
    /// second, shown to assignors) is measured, in ms. Default 60000; at least 1000.
    pub produce_rate_window_ms: u64,
    /// How often the broker sends the coordinator its partition table (leaders, racks,
    /// log offsets, produce rates; coordinator ABI 3.3), in ms; it is also sent at
    /// startup and after every topic change. Default 10000; at least 100.
    pub partition_stats_interval_ms: u64,
    /// The budget of one assignor call, in ms (issue 28 item 2, after Kafka's KIP-1263):
    /// the call runs on a worker thread of the plugin (and, from coordinator ABI 3.6,
    /// off the coordinator thread altogether); past the budget it is abandoned, the
    /// run uses the default assignor, and the plugin is *slow* (its calls fail at
    /// once) until the abandoned call returns
    /// ([`crate::coordination::assignor_budget`]). Default 5000: above the largest
    /// built-in assignment measured (`load-aware`, 10,000 members × 1,000,000
    /// partitions: 3.65 s on a busy 2-vCPU machine, docs/benchmarks.md), under the
    /// shortest default session timeout (native, 10 s). 0: no budget (a coordinator
    /// older than ABI 3.6 then runs assignors on its own thread).
    pub assignor_timeout_ms: u64,
}

impl Default for CoordinatorSection {
    fn default() -> Self {
        CoordinatorSection {
            plugin: "drover-coordinator".into(),
            default_assignor: "range".into(),
            offset_store: "embedded".into(),
            queue_capacity: 65_536,
            max_store_batch: 4_096,
            produce_rate_window_ms: 60_000,
            partition_stats_interval_ms: 10_000,
            assignor_timeout_ms: 5_000,
        }
    }
}

/// The `[server]` table. Defaults are safe: loopback listeners, bounded frames and
/// connections.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// The Kafka listener, `HOST:PORT`: the shorthand for one PLAINTEXT listener, used
    /// when `listeners` is not set. Default `127.0.0.1:9092`.
    pub listen: SocketAddr,
    /// The host name advertised to clients in Metadata and FindCoordinator for
    /// `listen`; default: the listener's IP address. Not with `listeners`.
    pub advertised_host: Option<String>,
    /// Kafka's `listeners`: every listener, `NAME://HOST:PORT` (an IPv6 host in
    /// brackets, an empty host for every interface, port 0 for any free port). Its
    /// protocol comes from `listener_security_protocol_map`. Empty (the default): the
    /// one PLAINTEXT listener of `listen` ([`crate::config::listeners`]).
    pub listeners: Vec<String>,
    /// Kafka's `advertised.listeners`: the address clients are told for listeners
    /// named here, `NAME://HOST:PORT`; a listener not named is advertised at its own
    /// address. Default empty.
    pub advertised_listeners: Vec<String>,
    /// Kafka's `listener.security.protocol.map`: listener name → `PLAINTEXT`, `SSL`,
    /// `SASL_PLAINTEXT` or `SASL_SSL`. Default: each protocol's name maps to itself; a
    /// map that is set replaces that default, as in Kafka.
    pub listener_security_protocol_map: BTreeMap<String, String>,
    /// TLS settings of the SSL and SASL_SSL listeners: Kafka's `ssl.*`.
    pub ssl: SslSection,
    /// TLS settings of one listener, by listener name, replacing `ssl` for it as a
    /// whole (Kafka's `listener.name.<name>.ssl.*`). Default none.
    pub listener_ssl: BTreeMap<String, SslSection>,
    /// The admin HTTP listener (metrics, plugins, topics). Default `127.0.0.1:9644`.
    pub admin_listen: SocketAddr,
    /// This broker's id, reported in Metadata. Default 0.
    pub broker_id: i32,
    /// This broker's rack (Kafka's `broker.rack`), reported in Metadata and
    /// DescribeCluster; at most 255 bytes. Default none.
    pub rack: Option<String>,
    /// Largest request frame accepted, in bytes (Kafka's `socket.request.max.bytes`);
    /// a larger one closes the connection before anything is allocated. Default
    /// 104857600 (100 MiB).
    pub max_frame_bytes: u32,
    /// Most client connections served at once; more wait in the accept queue.
    /// Default 1024.
    pub max_connections: usize,
    /// A connection with no request for this long is closed, in ms (Kafka's
    /// `connections.max.idle.ms`). Default 600000.
    pub idle_timeout_ms: u64,
    /// Longest time to receive the rest of a frame once its size arrived, in ms.
    /// Default 30000.
    pub frame_timeout_ms: u64,
    /// Upper bound on a Fetch's `max_wait_ms`, in ms. Default 30000.
    pub max_fetch_wait_ms: u64,
    /// Upper bound on the record bytes of one Fetch response, whatever the client asks
    /// (Kafka's `fetch.max.bytes`). Default 57671680 (55 MiB).
    pub fetch_max_bytes: u32,
    /// Responses one connection may have pending: requests waiting for an fsync or for
    /// fetch data while later requests are read. Reading pauses when it is reached.
    /// Memory per connection is bounded by this × the largest response
    /// (`fetch_max_bytes`). Default 8.
    pub max_in_flight: usize,
    /// A connection must send its first request within this long, in ms, or it is
    /// closed: idle sockets must not hold `max_connections` slots for
    /// `idle_timeout_ms`. Default 10000.
    pub first_request_timeout_ms: u64,
    /// A response the client does not read within this long closes the connection, in
    /// ms. Default 30000.
    pub write_timeout_ms: u64,
    /// Most connections from one IP address (Kafka's `max.connections.per.ip`); one
    /// more is closed as soon as it is accepted. Default: no limit (as in Kafka).
    pub max_connections_per_ip: Option<usize>,
    /// Per-address exceptions to `max_connections_per_ip`, IP address → count (Kafka's
    /// `max.connections.per.ip.overrides`; IP addresses only, no host names). Default
    /// empty.
    pub max_connections_per_ip_overrides: BTreeMap<String, usize>,
    /// Bytes of responses the broker holds for all clients that have not read them yet
    /// (server/budget.rs): while it is used up, connections that hold part of it stop
    /// reading requests, and fetches read no more than is left. Modelled on Kafka's
    /// `queued.max.request.bytes`, which bounds queued request bytes. Default 268435456
    /// (256 MiB).
    pub queued_max_response_bytes: usize,
    /// Bytes of responses one connection may have queued: once reached, the connection
    /// reads no further request until some are written, and a fetch reads no more than
    /// is left. At most `queued_max_response_bytes`. Default 67108864 (64 MiB, more
    /// than one `fetch_max_bytes` response).
    pub queued_max_response_bytes_per_connection: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_host: None,
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            listener_security_protocol_map: BTreeMap::new(),
            ssl: SslSection::default(),
            listener_ssl: BTreeMap::new(),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 9644)),
            broker_id: 0,
            rack: None,
            max_frame_bytes: 100 * 1024 * 1024,
            max_connections: 1024,
            idle_timeout_ms: 600_000,
            frame_timeout_ms: 30_000,
            max_fetch_wait_ms: 30_000,
            fetch_max_bytes: 55 * 1024 * 1024,
            max_in_flight: 8,
            first_request_timeout_ms: 10_000,
            write_timeout_ms: 30_000,
            max_connections_per_ip: None,
            max_connections_per_ip_overrides: BTreeMap::new(),
            queued_max_response_bytes: 256 * 1024 * 1024,
            queued_max_response_bytes_per_connection: 64 * 1024 * 1024,
        }
    }
}

/// Kafka's `ssl.client.auth`: whether a TLS listener asks clients for a certificate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// No client certificate is asked for; every client is `User:ANONYMOUS`.
    #[default]
    None,
    /// A certificate is asked for: one that `client_ca` does not vouch for fails the
    /// handshake, none at all is `User:ANONYMOUS`.
    Requested,
    /// A certificate `client_ca` vouches for is required (mTLS).
    Required,
}

/// TLS settings of a listener (`[server.ssl]`, `[server.listener_ssl.<NAME>]`), after
/// Kafka's `ssl.*` broker settings, with PEM files in place of key stores. Files are
/// read when the broker starts and again at each reload (SIGHUP, `POST
/// /v1/tls/reload`); their contents never reach a log line or an error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SslSection {
    /// PEM file with the broker's certificate first, then its intermediates (Kafka's
    /// `ssl.keystore.location` with `ssl.keystore.type=PEM`). Required on a TLS
    /// listener.
    pub certificate_chain: Option<PathBuf>,
    /// PEM file with the certificate's private key, unencrypted: PKCS#8, PKCS#1 (RSA)
    /// or SEC1 (EC). Required on a TLS listener. Keep it readable by the broker's user
    /// only.
    pub private_key: Option<PathBuf>,
    /// Kafka's `ssl.client.auth`: `none` (default), `requested` or `required`.
    pub client_auth: ClientAuth,
    /// PEM file with the CA certificates that vouch for client certificates (Kafka's
    /// `ssl.truststore.location`). Required unless `client_auth` is `none`.
    pub client_ca: Option<PathBuf>,
    /// Kafka's `ssl.principal.mapping.rules`: how a client certificate's subject (RFC
    /// 2253 form, as Java prints it) becomes the principal's name, `RULE:pattern/
    /// replacement/[LU]` entries and `DEFAULT`, comma-separated, first match wins.
    /// Default `DEFAULT` (the whole subject).
    pub principal_mapping_rules: String,
    /// Kafka's `ssl.enabled.protocols`: `TLSv1.3` and/or `TLSv1.2`. Default both.
    pub enabled_protocols: Vec<String>,
}

impl Default for SslSection {
    fn default() -> Self {
        SslSection {
            certificate_chain: None,
            private_key: None,
            client_auth: ClientAuth::None,
            client_ca: None,
            principal_mapping_rules: "DEFAULT".into(),
            enabled_protocols: crate::config::listeners::TLS_VERSIONS
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
        }
    }
}

/// The `[topics]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopicsConfig {
    /// Create a topic on first Metadata (when the client allows it) or Produce.
    /// Default true (Kafka's `auto.create.topics.enable`).
    pub auto_create: bool,
    /// Partitions of an auto-created topic, and of CreateTopics with −1. Default 1
    /// (Kafka's `num.partitions`).
    pub default_partitions: u32,
    /// Most partitions one topic may have. Default 10000. The broker as a whole also
    /// holds no more partitions than its open-file limit leaves room for (one
    /// descriptor each; see `crate::broker::descriptors`).
    pub max_partitions: u32,
    /// Most topics one Metadata request may auto-create; unknown topics beyond it are
    /// answered `UNKNOWN_TOPIC_OR_PARTITION` (retriable: clients ask again). Kafka has no
    /// such bound. Default 100, at least 1.
    pub auto_create_max_per_request: u32,
    /// Most topics auto-created per second by the whole broker (Metadata and Produce
    /// together), as a token bucket that holds one second's worth; beyond it unknown
    /// topics are answered `UNKNOWN_TOPIC_OR_PARTITION`. Default 100, at least 1.
    pub auto_create_per_sec: u32,
}

impl Default for TopicsConfig {
    fn default() -> Self {
        TopicsConfig {
            auto_create: true,
            default_partitions: 1,
            max_partitions: 10_000,
            auto_create_max_per_request: 100,
            auto_create_per_sec: 100,
        }
    }
}

/// The `[plugins]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginsConfig {
    /// The plugin directory: every `*.so` in it is a candidate. Default `./plugins`.
    pub dir: PathBuf,
    /// Where verified copies of plugin files are kept, named by their SHA-256, so a
    /// library is loaded from bytes that were checked and cannot change underneath.
    /// Default `<data_dir>/plugin-cache`.
    pub cache_dir: Option<PathBuf>,
    /// If non-empty, only files whose SHA-256 (lowercase hex) is listed are loaded.
    pub sha256_allowlist: Vec<String>,
    /// Plugin names that must load; if one fails, startup stops with its error. Plugin
    /// names are unique across all kinds in one broker.
    pub required: Vec<String>,
    /// Per-plugin configuration, keyed by plugin name (unique across kinds); each table
    /// is rendered back to TOML and handed to the plugin as its config string. A table
    /// naming no loaded plugin is reported with a warning and otherwise ignored.
    pub config: BTreeMap<String, toml::Table>,
    /// The most distinct plugin libraries (files with different SHA-256) one broker
    /// process loads, counting those loaded at startup and every new or replaced file a
    /// rescan (`drover plugins rescan`) loads. Libraries are never unloaded, so this
    /// bounds the memory replaced versions keep mapped; a file beyond it is refused until
    /// a restart. Default 64; at least 1.
    pub max_loaded_libraries: usize,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            dir: PathBuf::from("plugins"),
            cache_dir: None,
            sha256_allowlist: Vec::new(),
            required: Vec::new(),
            config: BTreeMap::new(),
            max_loaded_libraries: 64,
        }
    }
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates `text`; `path` is only used in error messages.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: parse_message(text, &e),
        })?;
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        };
        if config.server.rack.as_ref().is_some_and(|r| r.len() > 255) {
            return Err(invalid("server.rack: longer than 255 bytes".into()));
        }
        if config.server.max_frame_bytes < 1024 {
            return Err(invalid(format!(
                "server.max_frame_bytes: {} is below the minimum of 1024 bytes",
                config.server.max_frame_bytes
            )));
        }
        config
            .log
            .validate_settings()
            .map_err(|e| invalid(format!("[log]: {e}")))?;
        let server = &config.server;
        for (key, value, min) in [
            (
                "coordinator.queue_capacity",
                config.coordinator.queue_capacity as u64,
                16,
            ),
            (
                "coordinator.max_store_batch",
                config.coordinator.max_store_batch as u64,
                1,
            ),
            (
                "coordinator.produce_rate_window_ms",
                config.coordinator.produce_rate_window_ms,
                1_000,
            ),
            (
                "coordinator.partition_stats_interval_ms",
                config.coordinator.partition_stats_interval_ms,
                100,
            ),
            (
                "transactions.transaction_max_timeout_ms",
                config.transactions.transaction_max_timeout_ms.max(0) as u64,
                1,
            ),
            (
                "transactions.transactional_id_expiration_ms",
                config.transactions.transactional_id_expiration_ms.max(0) as u64,
                1,
            ),
            (
                "transactions.transaction_abort_timed_out_transaction_cleanup_interval_ms",
                config
                    .transactions
                    .transaction_abort_timed_out_transaction_cleanup_interval_ms,
                10,
            ),
            (
                "transactions.unused_id_expiration_ms",
                config.transactions.unused_id_expiration_ms.max(0) as u64,
                1,
            ),
            (
                "transactions.max_transactional_ids",
                config.transactions.max_transactional_ids as u64,
                1,
            ),
            (
                "transactions.new_ids_per_sec_per_client",
                u64::from(config.transactions.new_ids_per_sec_per_client),
                1,
            ),
            (
                "transactions.max_partitions_per_transaction",
                config.transactions.max_partitions_per_transaction as u64,
                1,
            ),
            (
                "transactions.max_groups_per_transaction",
                config.transactions.max_groups_per_transaction as u64,
                1,
            ),
            (
                "transactions.max_offsets_per_transaction",
                config.transactions.max_offsets_per_transaction as u64,
                1,
            ),
            (
                "plugins.max_loaded_libraries",
                config.plugins.max_loaded_libraries as u64,
                1,
            ),
            (
                "offsets.retention_check_interval_ms",
                config.offsets.retention_check_interval_ms,
                100,
            ),
            ("server.max_connections", server.max_connections as u64, 1),
            (
                "topics.auto_create_max_per_request",
                u64::from(config.topics.auto_create_max_per_request),
                1,
            ),
            (
                "topics.auto_create_per_sec",
                u64::from(config.topics.auto_create_per_sec),
                1,
            ),
            ("server.max_in_flight", server.max_in_flight as u64, 1),
            (
                "sasl.failures_per_minute_per_client",
                u64::from(config.sasl.failures_per_minute_per_client),
                1,
            ),
            (
                "sasl.max_scram_users",
                config.sasl.max_scram_users as u64,
                1,
            ),
            ("server.idle_timeout_ms", server.idle_timeout_ms, 1000),
            ("server.frame_timeout_ms", server.frame_timeout_ms, 100),
            (
                "server.first_request_timeout_ms",
                server.first_request_timeout_ms,
                100,
            ),
            ("server.write_timeout_ms", server.write_timeout_ms, 100),
            (
                "server.fetch_max_bytes",
                u64::from(server.fetch_max_bytes),
                1024,
            ),
            (
                "server.max_connections_per_ip",
                server.max_connections_per_ip.map_or(1, |n| n as u64),
                1,
            ),
            (
                "server.queued_max_response_bytes_per_connection",
                server.queued_max_response_bytes_per_connection as u64,
                1024,
            ),
        ] {
            if value < min {
                return Err(invalid(format!(
                    "{key}: {value} is below the minimum of {min}"
                )));
            }
        }
        if server.queued_max_response_bytes < server.queued_max_response_bytes_per_connection {
            return Err(invalid(format!(
                "server.queued_max_response_bytes ({}) must be at least \
                 server.queued_max_response_bytes_per_connection ({})",
                server.queued_max_response_bytes, server.queued_max_response_bytes_per_connection
            )));
        }
        for ip in server.max_connections_per_ip_overrides.keys() {
            if ip.parse::<std::net::IpAddr>().is_err() {
                return Err(invalid(format!(
                    "server.max_connections_per_ip_overrides: `{ip}` is not an IP address"
                )));
            }
        }
        if server.listeners.is_empty()
            && server.listen.ip().is_unspecified()
            && server.advertised_host.is_none()
        {
            return Err(invalid(format!(
                "server.listen is {}, which clients cannot connect to: set server.advertised_host \
                 to the address clients should use",
                server.listen
            )));
        }
        let sasl = &config.sasl;
        if sasl.mechanisms.is_empty() {
            return Err(invalid(
                "sasl.mechanisms: name at least one mechanism".into(),
            ));
        }
        for (i, name) in sasl.mechanisms.iter().enumerate() {
            if crate::auth::mechanism::Mechanism::from_name(name).is_none() {
                return Err(invalid(format!(
                    "sasl.mechanisms: `{name}` is not a mechanism this broker serves \
                     (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN)"
                )));
            }
            if sasl.mechanisms[..i].contains(name) {
                return Err(invalid(format!(
                    "sasl.mechanisms: `{name}` is listed twice"
                )));
            }
        }
        if sasl.failed_authentication_delay_ms > server.idle_timeout_ms {
            return Err(invalid(format!(
                "sasl.failed_authentication_delay_ms ({}) must be at most server.idle_timeout_ms ({})",
                sasl.failed_authentication_delay_ms, server.idle_timeout_ms
            )));
        }
        crate::config::listeners::resolve(server)
            .map(drop)
            .map_err(|e| invalid(e.to_string()))?;
        config
            .admin
            .check(config.server.admin_listen)
            .map_err(invalid)?;
        config.share.check().map_err(invalid)?;
        if config.topics.default_partitions == 0
            || config.topics.default_partitions > config.topics.max_partitions
        {
            return Err(invalid(format!(
                "topics.default_partitions: {} must be between 1 and topics.max_partitions ({})",
                config.topics.default_partitions, config.topics.max_partitions
            )));
        }
        if config.offsets.retention_ms < -1 {
            return Err(invalid(format!(
                "offsets.retention_ms: {} must be -1 (keep forever) or >= 0",
                config.offsets.retention_ms
            )));
        }
        let zk = &config.zookeeper;
        if zk.enabled {
            if zk.slots == 0 {
                return Err(invalid("zookeeper.slots must be at least 1".into()));
            }
            if !zk.chroot.starts_with('/') || (zk.chroot.len() > 1 && zk.chroot.ends_with('/')) {
                return Err(invalid(format!(
                    "zookeeper.chroot `{}` must be an absolute path without a trailing `/`",
                    zk.chroot
                )));
            }
            if zk.session_timeout_ms < 1_000 {
                return Err(invalid(
                    "zookeeper.session_timeout_ms must be at least 1000".into(),
                ));
            }
            let guard = zk.slot_guard();
            if guard < 300 || guard >= zk.session_timeout_ms {
                return Err(invalid(format!(
                    "zookeeper.slot_guard_ms ({guard}) must be at least 300 and below \
                     session_timeout_ms ({})",
                    zk.session_timeout_ms
                )));
            }
        }
        for digest in &config.plugins.sha256_allowlist {
            if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "plugins.sha256_allowlist: `{digest}` is not a SHA-256 digest (64 hex digits)"
                    ),
                });
            }
        }
        Ok(config)
    }

    /// The plugin cache directory (`plugins.cache_dir`, or `<data_dir>/plugin-cache`).
    pub fn plugin_cache_dir(&self) -> PathBuf {
        self.plugins
            .cache_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("plugin-cache"))
    }

    /// The config string for plugin `name`: its `[plugins.config.<name>]` table as TOML,
    /// or an empty string.
    ///
    /// The embedded offset store (`embedded`) gets `path = "<data_dir>/offsets.redb"`
    /// and the ACL authorizer (`acl`) `path = "<data_dir>/acls"` when their table sets no
    /// `path`, so the standalone defaults need no config.
    pub fn plugin_config(&self, name: &str) -> String {
        let mut table = self.plugins.config.get(name).cloned().unwrap_or_default();
        let default_file = match name {
            EMBEDDED_STORE => Some("offsets.redb"),
            ACL_AUTHORIZER => Some("acls"),
            _ => None,
        };
        if let Some(file) = default_file.filter(|_| !table.contains_key("path")) {
            table.insert(
                "path".into(),
                toml::Value::String(self.data_dir.join(file).display().to_string()),
            );
        }
        if table.is_empty() {
            return String::new();
        }
        toml::to_string(&table).unwrap_or_default()
    }
}

/// The name of the embedded offset store plugin, which gets a default `path`.
pub const EMBEDDED_STORE: &str = "embedded";

/// The name of the built-in ACL authorizer plugin, which gets a default `path` (its ACL
/// file, used standalone).
pub const ACL_AUTHORIZER: &str = "acl";

/// The parser's message on one line, prefixed with the line and column it points at
/// (the error's `Display` draws the offending line with a caret under it, which is
/// unreadable once flattened into one log line).
fn parse_message(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_valid() {
        let c = Config::parse(Path::new("x"), "").unwrap();
        assert_eq!(c.plugins.dir, PathBuf::from("plugins"));
        assert_eq!(
            c.plugin_cache_dir(),
            PathBuf::from("drover-data/plugin-cache")
        );
    }

    #[test]
    fn unknown_key_is_refused_with_its_name() {
        let e = Config::parse(Path::new("x"), "[plugins]\ndirr = 'p'\n").unwrap_err();
        assert!(e.to_string().contains("dirr"), "{e}");
    }

    #[test]
    fn parse_errors_are_one_line_with_line_and_column() {
        let e = Config::parse(
            Path::new("x.toml"),
            "[plugins]\ndir = 'p'\nrequired = [1,\n",
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(!e.contains('|') && !e.contains('^'), "no caret art: {e}");
        assert!(e.starts_with("invalid config x.toml: line "), "{e}");
        let e = Config::parse(Path::new("x.toml"), "[plugins]\ndirr = 'p'\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2, column 1: unknown field `dirr`"), "{e}");
    }

    #[test]
    fn out_of_range_log_values_are_refused_at_parse_time() {
        let e = Config::parse(Path::new("x"), "[log]\nflush_messages = 0\n").unwrap_err();
        assert!(e.to_string().contains("flush_messages"), "{e}");
    }

    /// Kafka 4.x's minimum `log.segment.bytes` (1 MiB) holds for `[log] segment_bytes`.
    #[test]
    fn segment_bytes_below_one_mebibyte_is_refused() {
        let e = Config::parse(Path::new("x"), "[log]\nsegment_bytes = 128\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("segment_bytes must be at least 1048576"),
            "{e}"
        );
        let c = Config::parse(Path::new("x"), "[log]\nsegment_bytes = 1048576\n").unwrap();
        assert_eq!(c.log.segment_bytes, 1_048_576);
    }

    #[test]
    fn transaction_id_bounds_have_defaults_and_minimums() {
        let c = Config::parse(Path::new("x"), "").unwrap();
        assert_eq!(c.transactions.unused_id_expiration_ms, 3_600_000);
        assert_eq!(c.transactions.new_ids_per_sec_per_client, 50);
        assert_eq!(c.transactions.limits().unused_id_expiration_ms, 3_600_000);
        for key in ["unused_id_expiration_ms", "new_ids_per_sec_per_client"] {
            let e =
                Config::parse(Path::new("x"), &format!("[transactions]\n{key} = 0\n")).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    #[test]
    fn connection_bounds_are_checked() {
        let c = Config::parse(
            Path::new("x"),
            "[server]\nmax_connections_per_ip = 5\n\
             [server.max_connections_per_ip_overrides]\n\"10.0.0.1\" = 50\n",
        )
        .unwrap();
        assert_eq!(c.server.max_connections_per_ip, Some(5));
        assert_eq!(
            c.server.max_connections_per_ip_overrides.get("10.0.0.1"),
            Some(&50)
        );
        for (text, key) in [
            ("max_connections_per_ip = 0", "max_connections_per_ip"),
            (
                "queued_max_response_bytes = 1048576",
                "queued_max_response_bytes",
            ),
            (
                "queued_max_response_bytes_per_connection = 100",
                "queued_max_response_bytes_per_connection",
            ),
            (
                "max_connections_per_ip_overrides = { \"a-host\" = 3 }",
                "a-host",
            ),
        ] {
            let e = Config::parse(Path::new("x"), &format!("[server]\n{text}\n")).unwrap_err();
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
    }

    /// Listeners (config/listeners.rs has the rules): checked when the file is read,
    /// with the file's path in the error.
    #[test]
    fn listeners_are_checked_when_the_file_is_read() {
        let c = Config::parse(
            Path::new("x"),
            "[server]\nlisteners = ['PLAINTEXT://127.0.0.1:9092', 'SSL://127.0.0.1:9093']\n\
             [server.ssl]\ncertificate_chain = 'c.pem'\nprivate_key = 'k.pem'\n",
        )
        .unwrap();
        assert_eq!(c.server.listeners.len(), 2);
        assert_eq!(c.server.ssl.client_auth, ClientAuth::None);
        assert_eq!(c.server.ssl.principal_mapping_rules, "DEFAULT");
        assert_eq!(c.server.ssl.enabled_protocols, ["TLSv1.3", "TLSv1.2"]);
        for (text, wanted) in [
            (
                "[server]\nlisteners = ['SASL_SSL://127.0.0.1:9092']\n",
                "listener SASL_SSL (SASL_SSL) needs certificate_chain",
            ),
            (
                "[server]\nlisteners = ['SSL://127.0.0.1:9093']\n",
                "needs certificate_chain",
            ),
            (
                "[server.ssl]\nclient_auth = 'sometimes'\n",
                "unknown variant `sometimes`",
            ),
        ] {
            let e = Config::parse(Path::new("drover.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("drover.toml") && e.contains(wanted),
                "{text}: {e}"
            );
        }
        // The default file is still the one PLAINTEXT listener.
        let c = Config::parse(Path::new("x"), "").unwrap();
        let specs = crate::config::listeners::resolve(&c.server).unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].bind, c.server.listen);
    }

    #[test]
    fn sasl_settings_have_defaults_and_are_checked() {
        let c = Config::parse(Path::new("x"), "").unwrap();
        assert_eq!(c.sasl.mechanisms, vec!["SCRAM-SHA-512", "SCRAM-SHA-256"]);
        assert!(!c.sasl.plain_on_plaintext);
        assert_eq!(c.sasl.connections_max_reauth_ms, 0);
        for (text, key) in [
            ("mechanisms = []", "sasl.mechanisms"),
            ("mechanisms = ['GSSAPI']", "GSSAPI"),
            ("mechanisms = ['PLAIN', 'PLAIN']", "twice"),
            (
                "failures_per_minute_per_client = 0",
                "failures_per_minute_per_client",
            ),
            ("max_scram_users = 0", "max_scram_users"),
            (
                "failed_authentication_delay_ms = 99999999",
                "failed_authentication_delay_ms",
            ),
        ] {
            let e = Config::parse(Path::new("x"), &format!("[sasl]\n{text}\n")).unwrap_err();
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
    }

    /// `[admin]`: loopback needs nothing; any other address needs TLS and an
    /// authentication method; each key's form is checked.
    #[test]
    fn admin_settings_are_checked() {
        let c = Config::parse(Path::new("x"), "").unwrap();
        assert_eq!(c.admin, AdminSection::default());
        assert!(!c.admin.tls() && !c.admin.authenticates());
        let tls = "[admin.ssl]\ncertificate_chain = 'c.pem'\nprivate_key = 'k.pem'\n";
        let ok = [
            "[server]\nadmin_listen = '[::1]:9644'\n".to_owned(),
            "[admin]\ntoken_file = 't'\n".to_owned(),
            format!("[server]\nadmin_listen = '0.0.0.0:9644'\n[admin]\ntoken_file = 't'\n{tls}"),
            format!(
                "[server]\nadmin_listen = '10.0.0.1:9644'\n[admin]\n\
                 principals = ['User:ops']\n{tls}client_auth = 'required'\nclient_ca = 'ca.pem'\n"
            ),
        ];
        for text in &ok {
            Config::parse(Path::new("x"), text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        for (text, wanted) in [
            (
                "[server]\nadmin_listen = '0.0.0.0:9644'\n".to_owned(),
                "not a loopback address",
            ),
            (
                "[server]\nadmin_listen = '0.0.0.0:9644'\n[admin]\ntoken_file = 't'\n".into(),
                "needs TLS",
            ),
            (
                format!("[server]\nadmin_listen = '10.1.1.1:9644'\n{tls}"),
                "an authentication method",
            ),
            (
                "[admin.ssl]\ncertificate_chain = 'c.pem'\n".into(),
                "go together",
            ),
            (
                format!("{tls}client_auth = 'required'\n"),
                "needs admin.ssl.client_ca",
            ),
            (
                "[admin]\nprincipals = ['User:ops']\n".into(),
                "needs admin.ssl.client_auth",
            ),
            (
                format!("[admin]\nprincipals = ['ops']\n{tls}client_auth = 'required'\nclient_ca = 'ca.pem'\n"),
                "`ops` is not a principal",
            ),
            ("[admin]\nhost_names = ['a b']\n".into(), "host_names"),
            ("[admin]\npublic_read = ['metrics']\n".into(), "public_read"),
        ] {
            let e = Config::parse(Path::new("drover.toml"), &text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(wanted), "{text}: {e}");
        }
    }

    #[test]
    fn bad_digest_is_refused() {
        let e =
            Config::parse(Path::new("x"), "[plugins]\nsha256_allowlist = ['abc']\n").unwrap_err();
        assert!(e.to_string().contains("abc"), "{e}");
    }

    #[test]
    fn plugin_config_renders_its_table() {
        let c = Config::parse(
            Path::new("x"),
            "[plugins.config.embedded]\npath = 'o.redb'\n",
        )
        .unwrap();
        assert_eq!(c.plugin_config("embedded").trim(), "path = \"o.redb\"");
        assert_eq!(c.plugin_config("other"), "");
        let c = Config::parse(Path::new("x"), "data_dir = 'd'\n").unwrap();
        assert_eq!(
            c.plugin_config("embedded").trim(),
            "path = \"d/offsets.redb\""
        );
        assert_eq!(c.coordinator.offset_store, "embedded");
        assert_eq!(c.plugin_config("acl").trim(), "path = \"d/acls\"");
        let c = Config::parse(
            Path::new("x"),
            "[plugins.config.acl]\npath = '/a'\nsuper_users = ['User:admin']\n",
        )
        .unwrap();
        assert!(c.plugin_config("acl").contains("path = \"/a\""));
    }
}
