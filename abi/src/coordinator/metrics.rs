//! The coordinator's metrics: what a [`CoordinatorOutput::Metric`] means, and the one
//! list of the counters Drover reports about its coordinator.
//!
//! This module is the single description the ABI doc, Drover's coordinator plugin and
//! the host's exporter refer to.
//!
//! ## What a `Metric` output is
//! `Metric { name, value }` adds `value` to the **counter** `name`. There are no gauges:
//! a value is always an increment. Zero adds nothing; a negative value is ignored (the
//! host logs the first one it sees). The host exports every counter as one sample of a
//! single OpenMetrics counter family on the admin API's `GET /metrics`,
//! [`FAMILY`] with the counter's name as the `name` label:
//! `drover_coordinator_events_total{name="commit_batches"} 12`. The family's `# HELP`
//! line lists every name of [`CoordinatorCounter`] with what it counts, and
//! docs/operations.md ("Admin HTTP API") has the same list as a table.
//!
//! One family rather than one per counter keeps the family Drover has always exported,
//! and any name a third-party coordinator sends is a valid label value, where not every
//! name would be a valid metric name. A third-party coordinator may
//! report names that are not in [`CoordinatorCounter`]: the host counts them under their
//! name, like any other (use `snake_case`).
//!
//! ## Compatibility
//! Nothing here crosses the plugin boundary: the output still carries the name as an
//! `RString` and the value as an `i64`. Adding a counter to [`CoordinatorCounter`]
//! therefore changes no layout and no kind's interface version (docs/plugins.md,
//! "Compatibility": it is neither a boundary type nor a variant of one). A host and a
//! coordinator built from different releases may know different names; a name the host
//! does not know is still counted.
//!
//! [`CoordinatorOutput::Metric`]: super::CoordinatorOutput::Metric

/// The OpenMetrics family every coordinator counter is a sample of, as it appears on
/// `GET /metrics` (a counter family: its samples are named `drover_coordinator_events_total`).
pub const FAMILY: &str = "drover_coordinator_events";

/// Declares [`CoordinatorCounter`] and its table from one list, so a counter cannot
/// exist without its name, unit and help text, nor be missing from
/// [`CoordinatorCounter::ALL`].
macro_rules! counters {
    ($($variant:ident => $name:literal, $unit:literal, $help:literal;)+) => {
        /// A counter Drover reports about its coordinator: those Drover's coordinator
        /// plugin sends as [`CoordinatorOutput::Metric`](super::CoordinatorOutput::Metric),
        /// and two the host counts about any coordinator ([`PluginErrors`](Self::PluginErrors),
        /// [`ContractViolations`](Self::ContractViolations)). Each variant's doc is its
        /// help text; the module docs say how the host exports them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum CoordinatorCounter {
            $(
                #[doc = $help]
                $variant,
            )+
        }

        impl CoordinatorCounter {
            /// Every counter, in the order the docs list them.
            pub const ALL: &'static [CoordinatorCounter] = &[$(CoordinatorCounter::$variant),+];

            /// The counter's name: the `name` label value in [`FAMILY`] and the string a
            /// [`CoordinatorOutput::Metric`](super::CoordinatorOutput::Metric) carries
            /// (`snake_case`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(CoordinatorCounter::$variant => $name,)+
                }
            }

            /// What one increment counts (`rebalances`, `batches`, `members`, ...), plural.
            pub const fn unit(self) -> &'static str {
                match self {
                    $(CoordinatorCounter::$variant => $unit,)+
                }
            }

            /// One line saying what the counter counts: the `# HELP` text and the docs'.
            pub const fn help(self) -> &'static str {
                match self {
                    $(CoordinatorCounter::$variant => $help,)+
                }
            }
        }
    };
}

counters! {
    RebalancesStarted => "rebalances_started", "rebalances",
        "Rebalances of native groups begun (the group stops its members' fetchers).";
    Generations => "generations", "generations",
        "Generations of native groups started (an assignment computed and sent to the members).";
    MembersFailed => "members_failed", "members",
        "Native group members failed and removed (session timeout, channel closed, protocol violation, error answer, unhealthy fetchers, replaced).";
    CommitBatches => "commit_batches", "batches",
        "Batches of native groups' committed offsets sent to the offset store.";
    CommitFailures => "commit_failures", "batches",
        "Commit batches of native groups the offset store failed.";
    AssignorFailures => "assignor_failures", "assignor runs",
        "Assignor runs that failed: the plugin panicked, returned an error or an answer breaking the contract, or (host) ran past `coordinator.assignor_timeout_ms` (native, KIP-848 and share groups).";
    AssignorFallbacks => "assignor_fallbacks", "assignor runs",
        "Assignor runs that used the default assignor because the named one is not loaded or failed (every group protocol; share groups fall back to `simple`, also when the selected plugin does not serve share groups).";
    SlotsGained => "slots_gained", "slots",
        "Coordinator slots this broker took over (cluster mode).";
    SlotsLost => "slots_lost", "slots",
        "Coordinator slots this broker gave up (cluster mode).";
    ClassicRebalances => "classic_rebalances", "rebalances",
        "Rebalances of classic (JoinGroup/SyncGroup) groups begun.";
    ClassicGenerations => "classic_generations", "generations",
        "Generations of classic groups started (the join phase completed).";
    ClassicMembersExpired => "classic_members_expired", "members",
        "Classic group members removed at the end of their session timeout.";
    ConsumerMembersExpired => "consumer_members_expired", "members",
        "KIP-848 (ConsumerGroupHeartbeat) group members fenced at their session or rebalance timeout.";
    ShareMembersExpired => "share_members_expired", "members",
        "Share group (KIP-932, ShareGroupHeartbeat) members removed at the end of their session timeout.";
    PluginErrors => "plugin_errors", "calls",
        "Coordinator calls that returned an error (counted by the host, for any coordinator).";
    ContractViolations => "contract_violations", "outputs",
        "Coordinator outputs that broke the coordinator contract; the connection was closed (counted by the host, for any coordinator).";
}

impl CoordinatorCounter {
    /// The counter called `name`, if it is one of [`CoordinatorCounter::ALL`].
    pub fn from_name(name: &str) -> Option<CoordinatorCounter> {
        Self::ALL.iter().copied().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for CoordinatorCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_found_by_name() {
        let names: BTreeSet<&str> = CoordinatorCounter::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), CoordinatorCounter::ALL.len());
        for &c in CoordinatorCounter::ALL {
            assert!(
                c.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{c:?}: {}",
                c.name()
            );
            assert_eq!(CoordinatorCounter::from_name(c.name()), Some(c));
        }
        assert_eq!(CoordinatorCounter::from_name("unknown_inputs"), None);
    }

    /// Help and unit go into one `# HELP` line: no line breaks, no characters that
    /// OpenMetrics escapes (`\`, `"`), nothing empty.
    #[test]
    fn help_and_unit_fit_on_one_metrics_line() {
        for &c in CoordinatorCounter::ALL {
            for text in [c.help(), c.unit()] {
                assert!(!text.is_empty(), "{c:?}");
                assert!(
                    !text.contains(['\n', '\r', '\\', '"']),
                    "{c:?}: {text:?} would need escaping"
                );
            }
        }
    }
}
