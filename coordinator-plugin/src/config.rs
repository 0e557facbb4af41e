//! The coordinator's configuration, and its TOML form: the table the operator writes
//! under `[plugins.config.drover-coordinator]` in the broker's config, which the host
//! hands to the plugin as a TOML string. Every key is optional; a missing key keeps
//! the [`Default`] value, and an unknown key is an error naming it.
//!
//! ```toml
//! [plugins.config.drover-coordinator]
//! default_assignor = "sticky"          # overridden by the host's own setting, if any
//! rebalance_mode = "incremental"       # or "eager"
//! assignor_modes = { range = "eager" } # per assignor
//! rebalance_quiet_ms = 50
//! rebalance_delay_ms = 300
//! rebalance_max_delay_ms = 3000
//! rerun_on_drift_ms = { "load-aware" = 60000 }  # per assignor; {} turns it off
//! min_session_timeout_ms = 6000
//! max_session_timeout_ms = 1800000
//! max_group_size = 100000
//! max_subscription_topics = 10000
//! max_assigned_partitions = 10000000
//! max_metadata_bytes = 4096
//! max_pending_txn_offsets_per_group = 100000
//! max_pending_txn_offsets = 1000000
//! commit_interval_ms = 1000
//! retry_backoff_ms = 1000
//! exclude_internal_topics = true
//! regex_refresh_interval_ms = 60000    # wildcard subscriptions' topic scope (authorizer)
//! slot_takeover_wait_ms = 1800000      # cluster mode; default max_session_timeout_ms
//! share_session_timeout_ms = 45000
//! share_heartbeat_interval_ms = 5000
//! share_max_group_size = 200
//! share_max_groups = 1000
//! share_assignor = "simple"            # share groups' assignor (`group.share.assignors`)
//! share_group_assignors = { orders = "my-share-assignor" }  # per share group
//! ```
//!
//! The number of coordinator slots (cluster mode) is not a key of this table: the host
//! passes it at startup (`startup_zookeeper`), from the broker's own ZooKeeper settings,
//! so that the broker's FindCoordinator and the coordinator agree on it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The longest native debounce setting accepted (`rebalance_delay_ms`,
/// `rebalance_max_delay_ms`, `rebalance_quiet_ms`), ms: 10 minutes.
pub const MAX_DEBOUNCE_MS: u64 = 600_000;

/// The in-tree share assignor (KIP-932's default, Kafka's `SimpleAssignor`): share
/// groups' default, and what runs when the selected plugin is not loaded, does not
/// serve share groups, fails or runs past its budget.
pub const SIMPLE_SHARE_ASSIGNOR: &str = "simple";

/// The largest `share_max_group_size` accepted (Kafka's `group.share.max.size` range
/// ends at 1000).
pub const MAX_SHARE_GROUP_SIZE: usize = 1_000;

/// How a group's rebalances move partitions (docs/protocol.md §6.4). In TOML:
/// `"incremental"` or `"eager"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RebalanceMode {
    /// Compute the target first; stop only the partitions that move. Consumers that keep
    /// or only gain partitions keep fetching. The default.
    #[default]
    Incremental,
    /// Stop every consumer's partitions, then compute and start (the original design).
    Eager,
}

impl RebalanceMode {
    /// `"incremental"` or `"eager"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RebalanceMode::Incremental => "incremental",
            RebalanceMode::Eager => "eager",
        }
    }
}

/// Configuration of a [`crate::Coordinator`]. [`Default`] gives Kafka-like values.
///
/// Each field is also a key of the plugin's TOML config ([`CoordinatorConfig::from_toml`])
/// with the same name; the default of each is given below. Durations are in
/// milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoordinatorConfig {
    /// The assignor of groups whose consumers name none: the name of a loaded assignor
    /// plugin, not empty. Default `"range"`. In the plugin, the host's own
    /// `default_assignor` setting (passed at startup), when not empty, replaces this
    /// value.
    pub default_assignor: String,
    /// The rebalance mode of groups whose assignor has no entry in `assignor_modes`:
    /// `"incremental"` (default) or `"eager"`.
    pub rebalance_mode: RebalanceMode,
    /// Per-assignor rebalance mode, by assignor name (for example eager for a policy
    /// that moves most partitions anyway). In TOML a table such as
    /// `assignor_modes = { sticky = "eager" }`. Default: empty.
    pub assignor_modes: BTreeMap<String, RebalanceMode>,
    /// Native groups: the quiet time of the rebalance debounce, in ms. A trigger
    /// (join, leave, failure, subscription or topic change) with no other trigger
    /// before it within `rebalance_delay_ms` starts a rebalance this long after it,
    /// so a burst of triggers within this time gives one rebalance. Triggers that come
    /// in a stream wait twice their spacing instead, up to `rebalance_delay_ms`
    /// (docs/protocol.md §6.4). Kafka has no such setting. Default 50: a leave or a
    /// failure is acted on within about 50 ms, and consumers started together
    /// register within a few ms of each other. At or above `rebalance_delay_ms`: the
    /// fixed debounce of `rebalance_delay_ms`.
    pub rebalance_quiet_ms: u64,
    /// Native groups: the longest debounce of one trigger, in ms: the cap of the
    /// adaptive debounce (`rebalance_quiet_ms`), reached while triggers keep coming
    /// at a steady pace, so that a rolling start gives few rebalances. Default 300;
    /// 0 starts at once.
    pub rebalance_delay_ms: u64,
    /// Setting this table replaces the default one, entry for entry: `{ sticky = 5000 }`
    /// re-runs `sticky` only, not `load-aware` (list both to keep it). A name that is
    /// not a loaded assignor (a typo such as `load_aware`) re-runs nothing until a
    /// rescan of the plugin directory loads it; the coordinator logs a warning naming
    /// it at startup ([`CoordinatorConfig::rerun_assignors_not_loaded`]), and a line
    /// whenever a rescan loads (info) or removes (warning) a listed assignor, so that
    /// re-runs never start or stop silently.
    ///
    /// Assignors that want to be re-run when their inputs drift, each with the least
    /// time between two such re-runs of one group, in ms (issue 16 item 3). Every
    /// partition table the broker sends (`coordinator.partition_stats_interval_ms`)
    /// re-runs, through the usual debounced, incremental rebalance (StopFetcher for the
    /// partitions that move, StartFetcher for their new owners), each native group
    /// whose assignor is listed and whose last re-run — or, the first time, the table
    /// that found it — is at least that old. The assignor decides what moves: a sticky
    /// one (as `load-aware`, within its tolerance) moves nothing while the drift is
    /// small. Each interval at least 1000. Default `{ "load-aware" = 60000 }`; `{}`
    /// turns it off. KIP-848 groups whose last target's assignor is listed are re-run
    /// the same way, with a new group epoch and target their members reconcile
    /// (revoke, then assign).
    pub rerun_on_drift_ms: BTreeMap<String, u64>,
    /// Upper bound of the debounce, in ms: a rebalance starts at most this long after
    /// the first of a series of triggers, however many follow. At least
    /// `rebalance_delay_ms`. Default 3000.
    pub rebalance_max_delay_ms: u64,
    /// Smallest accepted `session_timeout_ms` of a registration, in ms (Kafka's
    /// `group.min.session.timeout.ms`). At least 3 and at most
    /// `max_session_timeout_ms`. Default 6000.
    pub min_session_timeout_ms: i32,
    /// Largest accepted `session_timeout_ms` of a registration, in ms (Kafka's
    /// `group.max.session.timeout.ms`). Default 1800000 (30 min).
    pub max_session_timeout_ms: i32,
    /// Most consumers in one group (Kafka's `group.max.size`): from 1 to 100000 (the
    /// protocol's member-array cap, [`drover_protocol::MAX_MEMBERS_PER_GROUP`]).
    /// Default 100000.
    pub max_group_size: usize,
    /// Most topics in one static subscription; at least 1. Default 10000 (the
    /// protocol's topic-array cap, which also bounds it).
    pub max_subscription_topics: usize,
    /// Most partitions the coordinator hands to an assignor for one group. Default
    /// 10000000.
    pub max_assigned_partitions: usize,
    /// Longest offset metadata accepted in a commit, in bytes (Kafka's
    /// `offset.metadata.max.bytes`). Default 4096.
    pub max_metadata_bytes: usize,
    /// Most pending transactional offsets (TxnOffsetCommit partitions of transactions
    /// not yet ended, counted per producer and partition) one group may hold; a
    /// TxnOffsetCommit that would go over is refused with COORDINATOR_LOAD_IN_PROGRESS
    /// (retriable). Kafka has no such bound. At least 1. Default 100000.
    pub max_pending_txn_offsets_per_group: usize,
    /// Most pending transactional offsets the coordinator holds over every group; over
    /// it, as `max_pending_txn_offsets_per_group`. At least 1. Default 1000000.
    pub max_pending_txn_offsets: usize,
    /// How often offsets reported in Heartbeat responses are written to the offset
    /// store, in ms; at least 1. Final offsets (StopFetcher) and explicit commits are
    /// written at once. Default 1000.
    pub commit_interval_ms: u64,
    /// Wait before retrying after an assignor failure or a failed offset fetch, in ms;
    /// at least 1. Default 1000.
    pub retry_backoff_ms: u64,
    /// Whether wildcard subscriptions skip internal topics (names starting with `__`),
    /// like Kafka's `exclude.internal.topics`. Default true.
    pub exclude_internal_topics: bool,
    /// Classic Kafka groups: how long the first rebalance of an empty group waits for
    /// more members to join, in ms (Kafka's `group.initial.rebalance.delay.ms`).
    /// Default 3000; 0 starts at once.
    pub initial_rebalance_delay_ms: u64,
    /// Classic Kafka groups: the initial rebalance delay ends once no JoinGroup came
    /// for a quiet window, in ms: from the second new member on, twice the spacing of
    /// the latest two new members, at least this and at most
    /// `initial_rebalance_delay_ms` (the native debounce's stream rule; a lone first
    /// member waits the whole delay). Kafka's rule stays otherwise: the delay runs
    /// `initial_rebalance_delay_ms`, again while new members keep joining, up to the
    /// members' largest rebalance timeout in all; this quiet time only ends it earlier.
    /// Kafka has no such setting (set it to `initial_rebalance_delay_ms` or above for
    /// Kafka's timing). Default 300: clients started together send their JoinGroups
    /// (two each with KIP-394 member ids) within a few ms of each other, so 300 ms
    /// without one means the joiners have stopped coming; 0 ends the delay at its
    /// first look.
    pub initial_rebalance_quiet_ms: u64,
    /// Classic Kafka groups: the most protocol metadata (names and metadata bytes of
    /// every protocol) one JoinGroup may carry, in bytes; a larger one is refused with
    /// INVALID_REQUEST. Default 1048576 (1 MiB).
    pub max_join_metadata_bytes: usize,
    /// KIP-848 groups: the longest heartbeat interval given to a reconciled member, in
    /// ms (Kafka's `group.consumer.heartbeat.interval.ms`, which Kafka always gives).
    /// Below it, see `consumer_heartbeat_budget_per_s`. At least 1. Default 5000.
    pub consumer_heartbeat_interval_ms: u32,
    /// KIP-848 groups: heartbeats per second the coordinator is willing to answer from
    /// reconciled members of all its KIP-848 groups together. While the members are
    /// few, a reconciled member is told `members × 1000 / budget` ms (at least
    /// `consumer_min_heartbeat_interval_ms`) instead of
    /// `consumer_heartbeat_interval_ms`: a survivor of a leave, or a holder whose
    /// partitions a joiner waits for, learns of the new target that much sooner (the
    /// protocol has no push; recovery takes about half the steady interval). Once the
    /// members are many (`budget × consumer_heartbeat_interval_ms / 1000`, 5,000 by
    /// default) every member gets `consumer_heartbeat_interval_ms`, as from Kafka.
    /// The member count is taken at most once a second. No Kafka equivalent; KIP-848
    /// clients follow each answer's interval. 0 turns it off. Default 1000.
    pub consumer_heartbeat_budget_per_s: u32,
    /// KIP-848 groups: the shortest steady heartbeat interval the budget may give, in
    /// ms. At least 1; when above `consumer_heartbeat_interval_ms`, that one applies.
    /// Default 1000.
    pub consumer_min_heartbeat_interval_ms: u32,
    /// KIP-848 groups: the heartbeat interval given to a member while it reconciles, in
    /// ms: while it has partitions to revoke or to receive, when an answer gives it a
    /// new assignment, or when the group's target assignment changed since its last
    /// heartbeat; once reconciled it gets `consumer_heartbeat_interval_ms` again.
    /// Kafka has no such setting (it always answers with
    /// `group.consumer.heartbeat.interval.ms`); KIP-848 clients take the interval of
    /// each answer. At least 1; when above `consumer_heartbeat_interval_ms`, that one
    /// applies. Default 200: each step of a rebalance (revoke, then receive) then
    /// takes about 0.2 s instead of a full interval, so a rebalance completes well
    /// within 1 s, at a cost of at most 5 heartbeats per second per reconciling
    /// member (25 times the steady 0.2/s of the 5 s interval) for the one or two
    /// steps a member goes through.
    pub consumer_reconcile_heartbeat_interval_ms: u32,
    /// KIP-848 groups: for this long after the group's target assignment changes, in
    /// ms, every member's answer carries `consumer_reconcile_heartbeat_interval_ms`,
    /// reconciled ones included. Members of a rollout join over hundreds of ms; a
    /// member that reconciled with the first of them and went back to the 5 s interval
    /// would learn of the later ones' target only at its next heartbeat, holding the
    /// group unbalanced for up to 5 s. Kafka has no such setting. Default 1000: at
    /// most about five more heartbeats per member after each target change. 0 turns
    /// it off. At most 60000.
    pub consumer_rebalance_settle_ms: u32,
    /// KIP-848 groups: the longest time a group's assignor waits after its last run
    /// before it runs for a new group epoch, in ms. A group's interval is 100 µs per
    /// member up to this (10 ms at 100 members, 1 s at 10,000), so joins that come
    /// faster share one run: forming a large group is not an assignor run over the
    /// whole group per join, quadratic in its size. Meanwhile members reconcile towards
    /// the target in force and are told to come back when the new one is due (after
    /// KIP-1263's `group.consumer.assignment.interval.ms`, here scaled to the group).
    /// 0: every epoch bump runs the assignor at once. At most 60000. Default 1000.
    pub consumer_assignment_interval_ms: u32,
    /// KIP-848 groups: a member that sends no ConsumerGroupHeartbeat for this long is
    /// removed, in ms (Kafka's `group.consumer.session.timeout.ms`). Above
    /// `consumer_heartbeat_interval_ms`. Default 45000.
    pub consumer_session_timeout_ms: u32,
    /// With an authorizer: how often the topics a connection's principal may Describe
    /// are fetched again from the host while a member with a regex or pattern
    /// subscription uses the connection, in ms (after Kafka's
    /// `group.consumer.regex.refresh.interval.ms`, KAFKA-18961; coordinator ABI 3.9's
    /// `TopicScope`). A revoked Describe ACL takes its topic away from such members
    /// within this interval; each refresh is one batched authorize call over every
    /// topic. At least 1000. Default 60000.
    pub regex_refresh_interval_ms: u32,
    /// Share groups (KIP-932): a member that sends no ShareGroupHeartbeat for this
    /// long is removed, in ms (Kafka's `group.share.session.timeout.ms`). Above
    /// `share_heartbeat_interval_ms`. Default 45000.
    pub share_session_timeout_ms: u32,
    /// Share groups: the heartbeat interval told to every member, in ms (Kafka's
    /// `group.share.heartbeat.interval.ms`). At least 1. Default 5000.
    pub share_heartbeat_interval_ms: u32,
    /// Share groups: most members of one share group (Kafka's
    /// `group.share.max.size`); a join beyond it is GROUP_MAX_SIZE_REACHED. From 1 to
    /// 1000 (Kafka's range). Default 200.
    pub share_max_group_size: usize,
    /// Share groups: most share groups the coordinator keeps (Drover's bound; Kafka's
    /// `group.share.max.groups` had the same role); a join that would create one more
    /// is GROUP_MAX_SIZE_REACHED. An empty share group counts until DeleteGroups
    /// deletes it (its share-partition state outlives its members, KIP-932). At
    /// least 1. Default 1000.
    pub share_max_groups: usize,
    /// Share groups: the assignor of every share group without an entry in
    /// `share_group_assignors` (Kafka's `group.share.assignors`, whose one entry serves
    /// every group; KIP-932's heartbeat names none). `simple` is the in-tree one; any
    /// other name is a loaded assignor plugin that serves share groups (assignor ABI
    /// 3.3), else `simple` runs (counted as a fallback). Default `simple`.
    pub share_assignor: String,
    /// Share groups: the assignor of each named share group (group id → assignor
    /// name), over `share_assignor`. No Kafka equivalent: Drover selects assignors per
    /// group for every group type. Default: empty.
    pub share_group_assignors: BTreeMap<String, String>,
    /// Cluster mode: how long after gaining a coordinator slot the coordinator waits
    /// before the first rebalance of any group of that slot, in ms (docs/protocol.md
    /// §6.8). Consumers of the slot's previous owner may go on delivering until their
    /// lease ends, up to their session timeout after the previous owner stopped, and no
    /// consumer's session timeout exceeds `max_session_timeout_ms`; so this wait may
    /// not be below `max_session_timeout_ms` (an error otherwise). Unset (the default):
    /// equal to `max_session_timeout_ms`. To shorten fail-over, lower
    /// `max_session_timeout_ms`, which lowers this wait with it. Set it above when some
    /// broker of the cluster has had a larger `max_session_timeout_ms` since its
    /// consumers registered (a rolling change of that setting). Unused standalone.
    pub slot_takeover_wait_ms: Option<u64>,
    /// Cluster mode: the number of coordinator slots; a group belongs to slot
    /// [`drover_protocol::coordinator_slot`]`(group, slot_count)` and the coordinator
    /// serves only the groups of the slots it owns ([`crate::Input::SlotGained`]).
    /// `None` (the default): standalone, every group is served. At least 1.
    ///
    /// Not a TOML key (an error if given): in the plugin it comes from the host's
    /// `ZkCoordinatorStartup::slot_count`.
    #[serde(skip)]
    pub slot_count: Option<u32>,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            default_assignor: "range".into(),
            rebalance_mode: RebalanceMode::Incremental,
            assignor_modes: BTreeMap::new(),
            rebalance_quiet_ms: 50,
            rebalance_delay_ms: 300,
            rebalance_max_delay_ms: 3_000,
            rerun_on_drift_ms: [("load-aware".to_owned(), 60_000)].into_iter().collect(),
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_group_size: 100_000,
            max_subscription_topics: drover_protocol::MAX_TOPICS_PER_REQUEST,
            max_assigned_partitions: 10_000_000,
            max_metadata_bytes: 4096,
            max_pending_txn_offsets_per_group: 100_000,
            max_pending_txn_offsets: 1_000_000,
            commit_interval_ms: 1_000,
            retry_backoff_ms: 1_000,
            exclude_internal_topics: true,
            initial_rebalance_delay_ms: 3_000,
            initial_rebalance_quiet_ms: 300,
            max_join_metadata_bytes: 1 << 20,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_heartbeat_budget_per_s: 1_000,
            consumer_min_heartbeat_interval_ms: 1_000,
            consumer_reconcile_heartbeat_interval_ms: 200,
            consumer_rebalance_settle_ms: 1_000,
            consumer_assignment_interval_ms: 1_000,
            consumer_session_timeout_ms: 45_000,
            regex_refresh_interval_ms: 60_000,
            share_session_timeout_ms: 45_000,
            share_heartbeat_interval_ms: 5_000,
            share_max_group_size: 200,
            share_max_groups: 1_000,
            share_assignor: SIMPLE_SHARE_ASSIGNOR.into(),
            share_group_assignors: BTreeMap::new(),
            slot_takeover_wait_ms: None,
            slot_count: None,
        }
    }
}

/// A configuration that cannot be used: TOML that does not parse, an unknown key, a
/// value of the wrong type, or a value out of range. The message says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid coordinator config: {0}")]
pub struct ConfigError(pub String);

impl CoordinatorConfig {
    /// The heartbeat interval, ms, told to a reconciled KIP-848 member while the
    /// coordinator's KIP-848 groups have `members` members in all:
    /// `members × 1000 / consumer_heartbeat_budget_per_s` (rounded up), at least
    /// `consumer_min_heartbeat_interval_ms`, at most `consumer_heartbeat_interval_ms`;
    /// the latter when the budget is 0.
    pub fn steady_heartbeat_interval_ms(&self, members: usize) -> u32 {
        let max = self.consumer_heartbeat_interval_ms;
        if self.consumer_heartbeat_budget_per_s == 0 {
            return max;
        }
        let budget = u64::from(self.consumer_heartbeat_budget_per_s);
        let wanted = (members as u64).saturating_mul(1_000).div_ceil(budget);
        let min = u64::from(self.consumer_min_heartbeat_interval_ms.min(max));
        u32::try_from(wanted.clamp(min, u64::from(max))).unwrap_or(max)
    }

    /// Parses the plugin's TOML config (the `[plugins.config.drover-coordinator]`
    /// table, as a TOML document) and [validates](Self::validate) it. Every key is
    /// optional, with the [`Default`] value; an empty (or blank) string gives the
    /// default configuration.
    ///
    /// Errors, with the line of the offending key where the parser gives one: TOML
    /// syntax, an unknown key (named, with the accepted ones), a value of the wrong
    /// type or a negative count, a rebalance mode other than `"incremental"` or
    /// `"eager"`, and every error of [`CoordinatorConfig::validate`].
    pub fn from_toml(text: &str) -> Result<CoordinatorConfig, ConfigError> {
        let config: CoordinatorConfig =
            toml::from_str(text).map_err(|e| ConfigError(toml_error(text, &e)))?;
        config.validate()?;
        Ok(config)
    }

    /// The names in `rerun_on_drift_ms` for which `loaded` says no assignor is loaded,
    /// in name order: entries that re-run nothing (a typo, or an assignor not in the
    /// plugin directory). Not an error, since a plugin may be added by a later rescan;
    /// the coordinator warns about them at startup and on every change of the loaded
    /// assignors.
    pub fn rerun_assignors_not_loaded(&self, loaded: impl Fn(&str) -> bool) -> Vec<&str> {
        self.rerun_on_drift_ms
            .keys()
            .map(String::as_str)
            .filter(|name| !loaded(name))
            .collect()
    }

    /// Checks the values; [`crate::Coordinator::new`] and
    /// [`CoordinatorConfig::from_toml`] call it. Errors name the key: an empty
    /// `default_assignor`, `min_session_timeout_ms` below 3 or above
    /// `max_session_timeout_ms`, `rebalance_max_delay_ms` below `rebalance_delay_ms`,
    /// `max_group_size` of 0 or above [`drover_protocol::MAX_MEMBERS_PER_GROUP`], a
    /// `max_subscription_topics`, `commit_interval_ms`, `retry_backoff_ms`,
    /// `consumer_heartbeat_interval_ms`, `consumer_min_heartbeat_interval_ms` or
    /// `consumer_reconcile_heartbeat_interval_ms` of 0, a `consumer_session_timeout_ms` not above the heartbeat interval,
    /// a `regex_refresh_interval_ms` below 1000,
    /// a `share_heartbeat_interval_ms` of 0 or a `share_session_timeout_ms` not above
    /// it, a `share_max_group_size` outside 1..=1000, a `share_max_groups` of 0, a
    /// `slot_takeover_wait_ms` below `max_session_timeout_ms`, a `slot_count` of 0.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: &str| Err(ConfigError(m.to_owned()));
        if self.default_assignor.is_empty() {
            return err("default_assignor is empty");
        }
        if self.min_session_timeout_ms < 3 {
            return err("min_session_timeout_ms must be at least 3");
        }
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return err("min_session_timeout_ms exceeds max_session_timeout_ms");
        }
        if self.regex_refresh_interval_ms < 1_000 {
            return err("regex_refresh_interval_ms must be at least 1000");
        }
        if self.rerun_on_drift_ms.values().any(|&ms| ms < 1_000) {
            return err("rerun_on_drift_ms: every interval must be at least 1000");
        }
        // A debounce longer than this is a mistake, not a policy: a group would get no
        // assignment for that long, with no sign of why.
        for (key, ms) in [
            ("rebalance_delay_ms", self.rebalance_delay_ms),
            ("rebalance_max_delay_ms", self.rebalance_max_delay_ms),
            ("rebalance_quiet_ms", self.rebalance_quiet_ms),
        ] {
            if ms > MAX_DEBOUNCE_MS {
                return Err(ConfigError(format!(
                    "{key} must be at most {MAX_DEBOUNCE_MS} (10 minutes)"
                )));
            }
        }
        if self.rebalance_max_delay_ms < self.rebalance_delay_ms {
            return err("rebalance_max_delay_ms is below rebalance_delay_ms");
        }
        if self.max_group_size == 0 {
            return err("max_group_size must be at least 1");
        }
        if self.max_group_size > drover_protocol::MAX_MEMBERS_PER_GROUP {
            return Err(ConfigError(format!(
                "max_group_size must be at most {} (the protocol's member-array cap)",
                drover_protocol::MAX_MEMBERS_PER_GROUP
            )));
        }
        if self.max_subscription_topics == 0 {
            return err("max_subscription_topics must be at least 1");
        }
        if self.max_pending_txn_offsets_per_group == 0 || self.max_pending_txn_offsets == 0 {
            return err(
                "max_pending_txn_offsets_per_group and max_pending_txn_offsets must be at least 1",
            );
        }
        if self.commit_interval_ms == 0 {
            return err("commit_interval_ms must be at least 1");
        }
        if self.retry_backoff_ms == 0 {
            return err("retry_backoff_ms must be at least 1");
        }
        if self.consumer_heartbeat_interval_ms == 0 {
            return err("consumer_heartbeat_interval_ms must be at least 1");
        }
        if self.consumer_min_heartbeat_interval_ms == 0 {
            return err("consumer_min_heartbeat_interval_ms must be at least 1");
        }
        if self.consumer_reconcile_heartbeat_interval_ms == 0 {
            return err("consumer_reconcile_heartbeat_interval_ms must be at least 1");
        }
        if self.consumer_assignment_interval_ms > 60_000 {
            return err("consumer_assignment_interval_ms must be at most 60000");
        }
        if self.consumer_rebalance_settle_ms > 60_000 {
            return err("consumer_rebalance_settle_ms must be at most 60000");
        }
        if self.consumer_session_timeout_ms <= self.consumer_heartbeat_interval_ms {
            return err("consumer_session_timeout_ms must exceed consumer_heartbeat_interval_ms");
        }
        if self.share_heartbeat_interval_ms == 0 {
            return err("share_heartbeat_interval_ms must be at least 1");
        }
        if self.share_session_timeout_ms <= self.share_heartbeat_interval_ms {
            return err("share_session_timeout_ms must exceed share_heartbeat_interval_ms");
        }
        if !(1..=MAX_SHARE_GROUP_SIZE).contains(&self.share_max_group_size) {
            return Err(ConfigError(format!(
                "share_max_group_size must be from 1 to {MAX_SHARE_GROUP_SIZE}"
            )));
        }
        if self.share_max_groups == 0 {
            return err("share_max_groups must be at least 1");
        }
        if self.share_assignor.is_empty()
            || self.share_group_assignors.values().any(String::is_empty)
        {
            return err("share_assignor and share_group_assignors must name assignors");
        }
        if let Some(wait) = self.slot_takeover_wait_ms {
            if wait < self.max_session_timeout_ms.max(0) as u64 {
                return Err(ConfigError(format!(
                    "slot_takeover_wait_ms ({wait}) is below max_session_timeout_ms ({}): \
                     a consumer of a slot's previous coordinator may deliver for up to its \
                     session timeout after the slot moves; lower max_session_timeout_ms to \
                     shorten the wait",
                    self.max_session_timeout_ms
                )));
            }
        }
        if self.slot_count == Some(0) {
            return err("slot_count must be at least 1");
        }
        Ok(())
    }

    /// Cluster mode: the wait after gaining a slot before the first rebalance of its
    /// groups, in ms: `slot_takeover_wait_ms`, or `max_session_timeout_ms` when unset.
    pub fn takeover_wait_ms(&self) -> u64 {
        self.slot_takeover_wait_ms
            .unwrap_or(self.max_session_timeout_ms.max(0) as u64)
    }

    /// The assignor share group `group` selects: its entry in `share_group_assignors`,
    /// else `share_assignor`.
    pub fn share_assignor_for(&self, group: &str) -> &str {
        self.share_group_assignors
            .get(group)
            .unwrap_or(&self.share_assignor)
    }

    /// The rebalance mode of groups using `assignor`.
    pub fn mode_for(&self, assignor: &str) -> RebalanceMode {
        self.assignor_modes
            .get(assignor)
            .copied()
            .unwrap_or(self.rebalance_mode)
    }
}

/// A TOML error on one line: `line L, column C: message` when the parser points at a
/// place (its `Display` draws the offending line over several lines instead), with
/// the key of that line when the place is in its value (`key = value`), so that a bad
/// value names its key too.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end();
    let Some(span) = e.span() else {
        return message.to_owned();
    };
    let start = span.start.min(text.len());
    // Spans are at character boundaries of `text`; fall back to no position otherwise.
    let Some(before) = text.get(..start) else {
        return message.to_owned();
    };
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    let key = before[line_start..]
        .split_once('=')
        .map(|(key, _)| key.trim())
        .filter(|key| !key.is_empty() && !key.starts_with('['));
    match key {
        Some(key) => format!("line {line}, column {column} (key `{key}`): {message}"),
        None => format!("line {line}, column {column}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_bounds_are_checked() {
        assert_eq!(CoordinatorConfig::default().validate(), Ok(()));
        let bad = CoordinatorConfig {
            min_session_timeout_ms: 10,
            max_session_timeout_ms: 5,
            ..CoordinatorConfig::default()
        };
        assert!(bad.validate().is_err());
        let mut modes = CoordinatorConfig::default();
        modes
            .assignor_modes
            .insert("range".into(), RebalanceMode::Eager);
        assert_eq!(modes.mode_for("range"), RebalanceMode::Eager);
        assert_eq!(modes.mode_for("sticky"), RebalanceMode::Incremental);
    }
}

#[cfg(test)]
mod toml_tests {
    use super::*;

    #[test]
    fn empty_text_gives_the_defaults() {
        for text in ["", "  \n", "# nothing set\n"] {
            assert_eq!(
                CoordinatorConfig::from_toml(text),
                Ok(CoordinatorConfig::default()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn every_key_is_read() {
        let text = r#"
            default_assignor = "sticky"
            rebalance_mode = "eager"
            assignor_modes = { sticky = "incremental", range = "eager" }
            rebalance_delay_ms = 10
            rebalance_max_delay_ms = 20
            min_session_timeout_ms = 100
            max_session_timeout_ms = 200
            max_group_size = 7
            max_subscription_topics = 8
            max_assigned_partitions = 9
            max_metadata_bytes = 11
            max_pending_txn_offsets_per_group = 21
            max_pending_txn_offsets = 22
            commit_interval_ms = 12
            retry_backoff_ms = 13
            exclude_internal_topics = false
            initial_rebalance_delay_ms = 14
            initial_rebalance_quiet_ms = 18
            rebalance_quiet_ms = 21
            max_join_metadata_bytes = 15
            consumer_heartbeat_interval_ms = 16
            consumer_heartbeat_budget_per_s = 24
            consumer_min_heartbeat_interval_ms = 25
            consumer_reconcile_heartbeat_interval_ms = 19
            consumer_rebalance_settle_ms = 23
            consumer_assignment_interval_ms = 26
            consumer_session_timeout_ms = 170
            regex_refresh_interval_ms = 1001
            share_session_timeout_ms = 171
            share_heartbeat_interval_ms = 17
            share_max_group_size = 27
            share_max_groups = 28
            share_assignor = "spread"
            share_group_assignors = { orders = "fan-out" }
            slot_takeover_wait_ms = 250
        "#;
        let expected = CoordinatorConfig {
            default_assignor: "sticky".into(),
            rebalance_mode: RebalanceMode::Eager,
            assignor_modes: [
                ("sticky".to_owned(), RebalanceMode::Incremental),
                ("range".to_owned(), RebalanceMode::Eager),
            ]
            .into_iter()
            .collect(),
            rebalance_delay_ms: 10,
            rebalance_max_delay_ms: 20,
            rerun_on_drift_ms: CoordinatorConfig::default().rerun_on_drift_ms,
            min_session_timeout_ms: 100,
            max_session_timeout_ms: 200,
            max_group_size: 7,
            max_subscription_topics: 8,
            max_assigned_partitions: 9,
            max_metadata_bytes: 11,
            max_pending_txn_offsets_per_group: 21,
            max_pending_txn_offsets: 22,
            commit_interval_ms: 12,
            retry_backoff_ms: 13,
            exclude_internal_topics: false,
            initial_rebalance_delay_ms: 14,
            initial_rebalance_quiet_ms: 18,
            rebalance_quiet_ms: 21,
            max_join_metadata_bytes: 15,
            consumer_heartbeat_interval_ms: 16,
            consumer_heartbeat_budget_per_s: 24,
            consumer_min_heartbeat_interval_ms: 25,
            consumer_reconcile_heartbeat_interval_ms: 19,
            consumer_rebalance_settle_ms: 23,
            consumer_assignment_interval_ms: 26,
            consumer_session_timeout_ms: 170,
            regex_refresh_interval_ms: 1001,
            share_session_timeout_ms: 171,
            share_heartbeat_interval_ms: 17,
            share_max_group_size: 27,
            share_max_groups: 28,
            share_assignor: "spread".into(),
            share_group_assignors: [("orders".to_owned(), "fan-out".to_owned())]
                .into_iter()
                .collect(),
            slot_takeover_wait_ms: Some(250),
            slot_count: None,
        };
        assert_eq!(CoordinatorConfig::from_toml(text), Ok(expected));
    }

    #[test]
    fn the_steady_heartbeat_interval_spends_the_budget() {
        let c = CoordinatorConfig::default();
        // 1000 heartbeats/s: 1 s up to 1,000 members, then longer, 5 s from 5,000.
        assert_eq!(c.steady_heartbeat_interval_ms(0), 1_000);
        assert_eq!(c.steady_heartbeat_interval_ms(1_000), 1_000);
        assert_eq!(c.steady_heartbeat_interval_ms(2_001), 2_001);
        assert_eq!(c.steady_heartbeat_interval_ms(5_000), 5_000);
        assert_eq!(c.steady_heartbeat_interval_ms(100_000), 5_000);
        let off = CoordinatorConfig {
            consumer_heartbeat_budget_per_s: 0,
            ..CoordinatorConfig::default()
        };
        assert_eq!(off.steady_heartbeat_interval_ms(1), 5_000);
        let short_max = CoordinatorConfig {
            consumer_heartbeat_interval_ms: 300,
            ..CoordinatorConfig::default()
        };
        assert_eq!(short_max.steady_heartbeat_interval_ms(1), 300);
    }

    #[test]
    fn missing_keys_keep_their_defaults() {
        let c = CoordinatorConfig::from_toml("rebalance_delay_ms = 0\n").unwrap();
        assert_eq!(
            c,
            CoordinatorConfig {
                rebalance_delay_ms: 0,
                ..CoordinatorConfig::default()
            }
        );
        // The table form the host's TOML serialiser may write.
        let c = CoordinatorConfig::from_toml("[assignor_modes]\nsticky = \"eager\"\n").unwrap();
        assert_eq!(c.mode_for("sticky"), RebalanceMode::Eager);
        assert_eq!(c.mode_for("range"), RebalanceMode::Incremental);
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let e = CoordinatorConfig::from_toml("rebalance_delay_ms = 5\nsession_timeout = 3\n")
            .unwrap_err();
        assert!(e.0.contains("`session_timeout`"), "{e}");
        assert!(e.0.contains("line 2"), "{e}");
        let e = CoordinatorConfig::from_toml("[extra]\nx = 1\n").unwrap_err();
        assert!(e.0.contains("`extra`"), "{e}");
        // The slot count comes from the host, not from the plugin's table.
        let e = CoordinatorConfig::from_toml("slot_count = 4\n").unwrap_err();
        assert!(e.0.contains("`slot_count`"), "{e}");
    }

    #[test]
    fn the_takeover_wait_defaults_to_the_largest_session_timeout() {
        let c = CoordinatorConfig::from_toml("max_session_timeout_ms = 45000").unwrap();
        assert_eq!(c.slot_takeover_wait_ms, None);
        assert_eq!(c.takeover_wait_ms(), 45_000);
        let c = CoordinatorConfig::from_toml(
            "max_session_timeout_ms = 45000\nslot_takeover_wait_ms = 60000",
        )
        .unwrap();
        assert_eq!(c.takeover_wait_ms(), 60_000);
        let zero_slots = CoordinatorConfig {
            slot_count: Some(0),
            ..CoordinatorConfig::default()
        };
        assert!(zero_slots.validate().unwrap_err().0.contains("slot_count"));
    }

    #[test]
    fn a_bad_mode_is_refused() {
        for text in [
            "rebalance_mode = \"lazy\"",
            "rebalance_mode = \"Eager\"",
            "rebalance_mode = 1",
            "assignor_modes = { sticky = \"cooperative\" }",
            "assignor_modes = \"eager\"",
        ] {
            let e = CoordinatorConfig::from_toml(text).unwrap_err();
            assert!(
                e.to_string().starts_with("invalid coordinator config: "),
                "{e}"
            );
            assert!(e.0.contains("line 1"), "{text:?}: {e}");
        }
        let e = CoordinatorConfig::from_toml("rebalance_mode = \"lazy\"").unwrap_err();
        assert!(
            e.0.contains("`lazy`") && e.0.contains("`incremental`"),
            "{e}"
        );
        assert!(e.0.contains("key `rebalance_mode`"), "{e}");
        let e = CoordinatorConfig::from_toml("[assignor_modes]\nsticky = \"x\"").unwrap_err();
        assert!(
            e.0.contains("line 2") && e.0.contains("key `sticky`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_and_syntax_are_refused() {
        for text in [
            "max_group_size = -1",
            "rebalance_delay_ms = \"300\"",
            "exclude_internal_topics = \"yes\"",
            "min_session_timeout_ms = 3000000000",
            "default_assignor = [\"range\"]",
            "not toml [",
        ] {
            assert!(CoordinatorConfig::from_toml(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn debounce_settings_above_ten_minutes_are_refused_by_name() {
        for (key, text) in [
            (
                "rebalance_delay_ms",
                "rebalance_delay_ms = 600001\nrebalance_max_delay_ms = 600001\n",
            ),
            (
                "rebalance_max_delay_ms",
                "rebalance_max_delay_ms = 600001\n",
            ),
            ("rebalance_quiet_ms", "rebalance_quiet_ms = 600001\n"),
        ] {
            let e = CoordinatorConfig::from_toml(text).expect_err(key);
            assert!(e.0.contains(key) && e.0.contains("at most 600000"), "{e:?}");
        }
        let ok = "rebalance_delay_ms = 600000\nrebalance_max_delay_ms = 600000\nrebalance_quiet_ms = 600000\n";
        assert!(CoordinatorConfig::from_toml(ok).is_ok());
        let e = CoordinatorConfig::from_toml("consumer_rebalance_settle_ms = 60001\n")
            .expect_err("settle");
        assert!(e.0.contains("consumer_rebalance_settle_ms"), "{e:?}");
    }

    #[test]
    fn rerun_on_drift_defaults_to_load_aware_and_can_be_turned_off() {
        let default = CoordinatorConfig::default().rerun_on_drift_ms;
        assert_eq!(default.get("load-aware"), Some(&60_000));
        let off = CoordinatorConfig::from_toml("rerun_on_drift_ms = {}\n").unwrap();
        assert!(off.rerun_on_drift_ms.is_empty());
        let set = CoordinatorConfig::from_toml("rerun_on_drift_ms = { sticky = 5000 }\n").unwrap();
        assert_eq!(set.rerun_on_drift_ms.len(), 1);
        assert_eq!(set.rerun_on_drift_ms.get("sticky"), Some(&5_000));
    }

    /// `rerun_on_drift_ms` names that are not loaded assignors are found (and warned
    /// about by the coordinator): a typo such as `load_aware` would re-run nothing.
    #[test]
    fn rerun_on_drift_names_not_loaded_are_found() {
        let config = CoordinatorConfig::from_toml(
            "rerun_on_drift_ms = { nosuch = 5000, load_aware = 60000, sticky = 5000 }\n",
        )
        .unwrap();
        let loaded = |name: &str| ["load-aware", "sticky", "range"].contains(&name);
        assert_eq!(
            config.rerun_assignors_not_loaded(loaded),
            ["load_aware", "nosuch"]
        );
        assert!(CoordinatorConfig::default()
            .rerun_assignors_not_loaded(loaded)
            .is_empty());
    }

    #[test]
    fn validation_errors_are_surfaced() {
        let cases = [
            ("default_assignor = \"\"", "default_assignor"),
            (
                "min_session_timeout_ms = 10\nmax_session_timeout_ms = 5",
                "min_session_timeout_ms",
            ),
            ("rebalance_max_delay_ms = 100", "rebalance_max_delay_ms"),
            (
                "rerun_on_drift_ms = { load-aware = 999 }",
                "rerun_on_drift_ms",
            ),
            ("max_group_size = 0", "max_group_size"),
            ("max_group_size = 100001", "max_group_size"),
            ("max_subscription_topics = 0", "max_subscription_topics"),
            ("commit_interval_ms = 0", "commit_interval_ms"),
            ("retry_backoff_ms = 0", "retry_backoff_ms"),
            (
                "max_session_timeout_ms = 10000\nslot_takeover_wait_ms = 9999",
                "slot_takeover_wait_ms",
            ),
        ];
        for (text, key) in cases {
            let e = CoordinatorConfig::from_toml(text).unwrap_err();
            assert!(e.0.contains(key), "{text:?}: {e}");
        }
    }
}
