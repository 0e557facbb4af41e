//! The coordinator's configuration.

use std::collections::BTreeMap;

/// How a group's rebalances move partitions (docs/protocol.md §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// The assignor of groups whose consumers name none.
    pub default_assignor: String,
    /// The rebalance mode of groups whose assignor has no entry in `assignor_modes`.
    pub rebalance_mode: RebalanceMode,
    /// Per-assignor rebalance mode (for example eager for a policy that moves most
    /// partitions anyway).
    pub assignor_modes: BTreeMap<String, RebalanceMode>,
    /// Debounce of rebalance triggers: a rebalance starts this long after the latest
    /// trigger (join, leave, failure, subscription or topic change), so a join storm
    /// gives one rebalance.
    pub rebalance_delay_ms: u64,
    /// Upper bound of the debounce: a rebalance starts at most this long after the first
    /// of a series of triggers, however many follow.
    pub rebalance_max_delay_ms: u64,
    /// Smallest accepted `session_timeout_ms` (Kafka's `group.min.session.timeout.ms`).
    pub min_session_timeout_ms: i32,
    /// Largest accepted `session_timeout_ms` (Kafka's `group.max.session.timeout.ms`).
    pub max_session_timeout_ms: i32,
    /// Most consumers in one group (Kafka's `group.max.size`).
    pub max_group_size: usize,
    /// Most topics in one static subscription.
    pub max_subscription_topics: usize,
    /// Most partitions the coordinator hands to an assignor for one group.
    pub max_assigned_partitions: usize,
    /// Longest offset metadata accepted, in bytes (Kafka's `offset.metadata.max.bytes`).
    pub max_metadata_bytes: usize,
    /// How often offsets reported in Heartbeat responses are written to the offset store.
    /// Final offsets (StopFetcher) and explicit commits are written at once.
    pub commit_interval_ms: u64,
    /// Wait before retrying after an assignor failure or a failed offset fetch.
    pub retry_backoff_ms: u64,
    /// Whether wildcard subscriptions skip internal topics (names starting with `__`),
    /// like Kafka's `exclude.internal.topics`.
    pub exclude_internal_topics: bool,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            default_assignor: "range".into(),
            rebalance_mode: RebalanceMode::Incremental,
            assignor_modes: BTreeMap::new(),
            rebalance_delay_ms: 300,
            rebalance_max_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_group_size: 100_000,
            max_subscription_topics: drover_protocol::MAX_TOPICS_PER_REQUEST,
            max_assigned_partitions: 10_000_000,
            max_metadata_bytes: 4096,
            commit_interval_ms: 1_000,
            retry_backoff_ms: 1_000,
            exclude_internal_topics: true,
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid coordinator config: {0}")]
pub struct ConfigError(pub String);

impl CoordinatorConfig {
    /// Checks the values; [`crate::Coordinator::new`] calls it.
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
        if self.rebalance_max_delay_ms < self.rebalance_delay_ms {
            return err("rebalance_max_delay_ms is below rebalance_delay_ms");
        }
        if self.max_group_size == 0 {
            return err("max_group_size must be at least 1");
        }
        if self.max_subscription_topics == 0 {
            return err("max_subscription_topics must be at least 1");
        }
        if self.commit_interval_ms == 0 {
            return err("commit_interval_ms must be at least 1");
        }
        if self.retry_backoff_ms == 0 {
            return err("retry_backoff_ms must be at least 1");
        }
        Ok(())
    }

    /// The rebalance mode of groups using `assignor`.
    pub fn mode_for(&self, assignor: &str) -> RebalanceMode {
        self.assignor_modes
            .get(assignor)
            .copied()
            .unwrap_or(self.rebalance_mode)
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
