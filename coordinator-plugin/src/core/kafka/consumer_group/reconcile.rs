//! Reconciliation: moving one member's current assignment towards its target, revoking
//! first and assigning only what no other member still holds, while keeping the
//! group's partition owners exact (Kafka's `CurrentAssignmentBuilder`).

use std::collections::BTreeSet;

use super::group::ConsumerGroup;
use super::member::{Member, MemberState};
use crate::types::TopicPartition;

/// A member's next reconciliation step.
pub(super) struct Step {
    pub(super) epoch: i32,
    pub(super) state: MemberState,
    pub(super) assigned: BTreeSet<TopicPartition>,
    pub(super) pending_revocation: BTreeSet<TopicPartition>,
}

impl ConsumerGroup {
    /// The next step of member `m` towards its target (Kafka's
    /// `CurrentAssignmentBuilder.computeNextAssignment`): revoke first, keeping
    /// `revoking_epoch`; else take what is released and move to the assignment epoch.
    pub(super) fn next_step(&self, m: &Member, revoking_epoch: i32) -> Step {
        let none = BTreeSet::new();
        let target = self.target.get(&m.id).unwrap_or(&none);
        let kept: BTreeSet<TopicPartition> = m.assigned.intersection(target).cloned().collect();
        let revoke: BTreeSet<TopicPartition> = m.assigned.difference(&kept).cloned().collect();
        let mut unreleased = false;
        let mut take = BTreeSet::new();
        for tp in target.difference(&kept) {
            if self.owners.get(tp).is_none_or(|o| *o == m.id) {
                take.insert(tp.clone());
            } else {
                unreleased = true;
            }
        }
        if !revoke.is_empty() {
            Step {
                epoch: revoking_epoch,
                state: MemberState::UnrevokedPartitions,
                assigned: kept,
                pending_revocation: revoke,
            }
        } else {
            let mut assigned = kept;
            assigned.extend(take);
            Step {
                epoch: self.assignment_epoch,
                state: if unreleased {
                    MemberState::UnreleasedPartitions
                } else {
                    MemberState::Stable
                },
                assigned,
                pending_revocation: BTreeSet::new(),
            }
        }
    }

    /// Moves member `id` towards its target given the partitions it reports owning
    /// (Kafka's `CurrentAssignmentBuilder.build`). Returns whether its assigned
    /// partitions changed (so a steady heartbeat copies no assignment to find out).
    pub(super) fn reconcile(
        &mut self,
        id: &str,
        owned: Option<&BTreeSet<TopicPartition>>,
        now: u64,
    ) -> bool {
        let Some(m) = self.members.get(id) else {
            return false;
        };
        let step = match m.state {
            MemberState::Stable => {
                (m.epoch != self.assignment_epoch).then(|| self.next_step(m, m.epoch))
            }
            MemberState::UnrevokedPartitions => {
                let still_owns =
                    owned.is_none_or(|o| m.pending_revocation.iter().any(|tp| o.contains(tp)));
                (!still_owns).then(|| self.next_step(m, m.epoch))
            }
            MemberState::UnreleasedPartitions => Some(self.next_step(m, m.epoch)),
        };
        step.is_some_and(|step| self.apply(id, step, now))
    }

    /// Applies a reconciliation step to member `id`, keeping [`ConsumerGroup::owners`]
    /// exact. Returns whether its assigned partitions changed.
    pub(super) fn apply(&mut self, id: &str, step: Step, now: u64) -> bool {
        let Some(m) = self.members.get_mut(id) else {
            return false;
        };
        let assigned_changed = m.assigned != step.assigned;
        if m.epoch == step.epoch
            && m.state == step.state
            && !assigned_changed
            && m.pending_revocation == step.pending_revocation
        {
            return false;
        }
        for tp in m.assigned.iter().chain(&m.pending_revocation) {
            if self.owners.get(tp).is_some_and(|o| o == id) {
                self.owners.remove(tp);
            }
        }
        for tp in step.assigned.iter().chain(&step.pending_revocation) {
            let previous = self.owners.insert(tp.clone(), id.to_owned());
            debug_assert!(
                previous.is_none(),
                "{tp} given to {id} while held by {previous:?}"
            );
        }
        if step.epoch != m.epoch {
            m.previous_epoch = m.epoch;
            m.epoch = step.epoch;
        }
        m.state = step.state;
        m.assigned = step.assigned;
        m.pending_revocation = step.pending_revocation;
        m.rebalance_deadline = (m.state == MemberState::UnrevokedPartitions)
            .then(|| now.saturating_add(m.rebalance_timeout_ms));
        assigned_changed
    }
}
