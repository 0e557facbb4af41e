//! Re-running an assignor when its inputs drift (issue 16 item 3): each partition table
//! the host sends (`Input::PartitionStats`: produce rates, log offsets) may re-run the
//! assignor of native groups that asked for it (`rerun_on_drift_ms`), at most once per
//! configured interval per group, through the group's usual debounced, incremental
//! rebalance — so the no-double-ownership rule of a rebalance holds unchanged.

use std::collections::BTreeMap;

use super::Coordinator;
use crate::types::GroupId;

/// When each native group was last re-run on drift, or first seen by a table (ms, the
/// coordinator's clock).
#[derive(Debug, Default)]
pub(super) struct DriftClock {
    last: BTreeMap<GroupId, u64>,
}

impl Coordinator {
    /// Keeps the host's new partition table, then triggers a rebalance of every native
    /// group whose assignor is in `rerun_on_drift_ms` and whose last re-run (or the
    /// table that first found it) is at least that assignor's interval old.
    pub(super) fn on_partition_stats(&mut self, stats: crate::PartitionStats) {
        self.cx.partition_stats = stats;
        let intervals = &self.cx.config.rerun_on_drift_ms;
        let now = self.cx.now;
        let mut seen = BTreeMap::new();
        let mut due = Vec::new();
        for g in self.groups.natives_mut() {
            let Some(&interval) = g.assignor().and_then(|a| intervals.get(a)) else {
                continue;
            };
            let since = self.drift.last.get(&g.id).copied().unwrap_or(now);
            if now.saturating_sub(since) >= interval {
                due.push(g.id.clone());
                seen.insert(g.id.clone(), now);
            } else {
                seen.insert(g.id.clone(), since);
            }
        }
        // Groups gone, or no longer using such an assignor, are forgotten.
        self.drift.last = seen;
        for id in due {
            if let Some(g) = self.groups.native_mut(&id) {
                self.cx.native(g, |g, env, fx| {
                    g.trigger(env, fx, "assignor inputs drifted (rerun_on_drift_ms)");
                    g.progress(env, fx);
                });
            }
        }
    }
}
