//! A KIP-848 group's rebalances for operators (issue 32's timeline, DescribeRebalances
//! and `GET /v1/groups/{group}/rebalances`), in the history native and classic groups
//! keep ([`RebalanceHistory`]): each group epoch bump notes its cause and time
//! ([`ConsumerGroup::bump_epoch`]); a new target that differs from the one in force is
//! a rebalance, with the partitions that changed owner between the two
//! ([`ConsumerGroup::record_target`]); it ends when every member has reconciled to it
//! ([`ConsumerGroup::note_reconciled`]), or when the next one supersedes it. A removed
//! member's entry leaves the target with it, so its partitions count as moved when the
//! new target gives them an owner; the last member leaving changes no owner and is not
//! recorded. Sans-IO: the times are the [`Env`](super::Env)'s.

use std::collections::BTreeMap;

use super::group::ConsumerGroup;
use super::member::MemberState;
use crate::core::rebalance_history::RebalanceHistory;
use crate::types::{ConsumerId, TopicPartition};

/// Owners of the partitions by a target assignment.
pub(super) type TargetOwners = BTreeMap<TopicPartition, ConsumerId>;

impl ConsumerGroup {
    /// Bumps the group epoch at `now` for `cause` (a
    /// [`RebalanceRecord`](drover_protocol::RebalanceRecord) cause).
    pub(super) fn bump_epoch(&mut self, cause: &'static str, now: u64) {
        self.epoch = self.epoch.saturating_add(1);
        self.history.triggered_at(cause, now);
    }

    /// Who owns each partition by the target in force.
    pub(super) fn target_owners(&self) -> TargetOwners {
        self.target
            .iter()
            .flat_map(|(id, set)| set.iter().map(move |tp| (tp.clone(), ConsumerId::new(id))))
            .collect()
    }

    /// The target in force was just installed at `now` over `before` (the owners by
    /// the previous one): a rebalance when it differs. `settled` says the pending
    /// series is over (a successful run): when it changed nothing, its cause is
    /// dropped; otherwise (a failed run, or one handed to the host) it waits for the
    /// target that comes next.
    pub(super) fn record_target(&mut self, before: TargetOwners, now: u64, settled: bool) {
        let after = self.target_owners();
        if after != before {
            self.history.target_changed(
                now,
                self.assignment_epoch,
                self.members.len(),
                &self.assignor,
                before,
                &after,
            );
            self.waiting_on = None;
        } else if settled {
            self.history.discard_pending();
        }
        self.note_reconciled(now);
    }

    /// Ends the running rebalance at `now` if every member has reconciled to the target
    /// of the group epoch (or none is left). Cheap on every heartbeat: the member found
    /// behind last time is checked first, and only once it has caught up are the
    /// others looked at.
    pub(super) fn note_reconciled(&mut self, now: u64) {
        if !self.history.is_running() || self.epoch != self.assignment_epoch {
            return;
        }
        let epoch = self.assignment_epoch;
        let behind = |m: &super::member::Member| m.epoch != epoch || m.state != MemberState::Stable;
        if let Some(m) = self.waiting_on.as_ref().and_then(|id| self.members.get(id)) {
            if behind(m) {
                return;
            }
        }
        self.waiting_on = self
            .members
            .values()
            .find(|m| behind(m))
            .map(|m| m.id.clone());
        if self.waiting_on.is_none() && self.retry_at.is_none() && self.assigning.is_none() {
            self.history.ended(now);
        }
    }

    /// The group's recent rebalances.
    pub(crate) fn history(&self) -> &RebalanceHistory {
        &self.history
    }
}
