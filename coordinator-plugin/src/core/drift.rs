//! Re-running an assignor when its inputs drift (issue 16 item 3): each partition table
//! the host sends (`Input::PartitionStats`: produce rates, log offsets) may re-run the
//! assignor of groups that asked for it (`rerun_on_drift_ms`), at most once per
//! configured interval per group: a native group through its usual debounced,
//! incremental rebalance, a KIP-848 group with a new group epoch and target that its
//! members reconcile by revoke-then-assign — so the no-double-ownership rule of either
//! protocol holds unchanged. A re-run whose assignor gives the assignment in force
//! changes nothing (no generation, no epoch), and a group whose assignor is not loaded
//! (removed by a plugin rescan) is not re-run at all: the assignment in force stays
//! until membership changes. Classic groups assign on the client: nothing to re-run.

use std::collections::BTreeMap;

use super::Coordinator;
use crate::types::GroupId;

/// When each native or KIP-848 group was last re-run on drift, or first seen by a
/// table (ms, the coordinator's clock).
#[derive(Debug, Default)]
pub(super) struct DriftClock {
    last: BTreeMap<GroupId, u64>,
}

impl Coordinator {
    /// Keeps the host's new partition table, then re-runs the assignor of every native
    /// and KIP-848 group whose assignor is in `rerun_on_drift_ms` and whose last re-run
    /// (or the table that first found it) is at least that assignor's interval old.
    pub(super) fn on_partition_stats(&mut self, stats: crate::PartitionStats) {
        self.cx.partition_stats = stats.received_at(self.cx.now);
        let intervals = &self.cx.config.rerun_on_drift_ms;
        let assignors = &self.cx.assignors;
        let now = self.cx.now;
        let mut seen = BTreeMap::new();
        let mut due = Vec::new();
        let mut due_consumer = Vec::new();
        let mut visit = |id: &GroupId, assignor: Option<&str>, due: &mut Vec<GroupId>| {
            let Some(&interval) = assignor.and_then(|a| intervals.get(a)) else {
                return;
            };
            // An assignor that is not loaded (removed by a rescan) is not re-run: the
            // default assignor would stand in for it and reshuffle the group, twice
            // counting its return. Its clock starts again when it is back.
            if !assignor.is_some_and(|a| assignors.contains(a)) {
                return;
            }
            let since = self.drift.last.get(id).copied().unwrap_or(now);
            if now.saturating_sub(since) >= interval {
                due.push(id.clone());
                seen.insert(id.clone(), now);
            } else {
                seen.insert(id.clone(), since);
            }
        };
        for g in self.groups.natives_mut() {
            visit(&g.id, g.assignor(), &mut due);
        }
        for g in self.groups.consumers_mut() {
            let id = g.id().clone();
            visit(&id, Some(g.assignor_name()), &mut due_consumer);
        }
        // Groups gone, or no longer using such an assignor, are forgotten.
        self.drift.last = seen;
        for id in due {
            if let Some(g) = self.groups.native_mut(&id) {
                self.cx.native(g, |g, env, fx| {
                    if g.rerun_on_drift(env, fx) {
                        g.progress(env, fx);
                    }
                });
            }
        }
        if !due_consumer.is_empty() {
            self.consumer_rerun(due_consumer);
        }
    }
}
