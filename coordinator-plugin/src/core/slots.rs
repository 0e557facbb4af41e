//! Cluster mode: which coordinator slots this coordinator owns ([`Ownership`]), the
//! NOT_COORDINATOR answer for the groups of other slots, the takeover wait of a gained
//! slot, and dropping a lost slot's groups (docs/protocol.md §6.8).

use std::collections::BTreeSet;

use drover_protocol as proto;
use kafka_protocol::ResponseError;

use super::groups::{Group, GroupKind};
use super::{Coordinator, TimerKey};

use crate::io::{CoordinatorCounter, Event};
use crate::types::GroupId;

/// Which groups the coordinator serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Standalone: every group (the default, [`CoordinatorConfig::slot_count`](crate::config::CoordinatorConfig::slot_count) `None`).
    All,
    /// Cluster mode: the groups whose slot,
    /// [`drover_protocol::coordinator_slot`]`(group, count)`, is in `owned`. Requests
    /// for other groups get NOT_COORDINATOR (docs/protocol.md §6.8).
    Slots {
        /// The number of slots.
        count: u32,
        /// The slots this coordinator owns ([`Input::SlotGained`](crate::io::Input::SlotGained) /
        /// [`Input::SlotLost`](crate::io::Input::SlotLost)).
        owned: BTreeSet<u32>,
    },
}

impl Ownership {
    /// Whether `group` is served.
    pub fn owns(&self, group: &str) -> bool {
        match self {
            Ownership::All => true,
            Ownership::Slots { count, owned } => {
                owned.contains(&proto::coordinator_slot(group, *count))
            }
        }
    }

    /// The slot of `group` in cluster mode; `None` standalone.
    pub fn slot_of(&self, group: &str) -> Option<u32> {
        match self {
            Ownership::All => None,
            Ownership::Slots { count, .. } => Some(proto::coordinator_slot(group, *count)),
        }
    }
}

impl Coordinator {
    /// Which groups the coordinator serves: all (standalone) or those of the slots it
    /// owns (cluster mode).
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    /// Whether the coordinator serves `group` (standalone: always; cluster mode: when
    /// it owns the group's slot).
    pub fn owns(&self, group: &str) -> bool {
        self.ownership.owns(group)
    }

    /// Cluster mode: until when the groups of owned slot `slot` may not rebalance (the
    /// takeover wait after [`Input::SlotGained`](crate::io::Input::SlotGained)); `None` for a slot not owned, and
    /// standalone.
    pub fn takeover_until(&self, slot: u32) -> Option<u64> {
        self.takeover_until.get(&slot).copied()
    }

    /// The NOT_COORDINATOR message of a RegisterConsumer for `group`.
    pub(super) fn not_coordinator_message(&self, group: &str) -> String {
        match &self.ownership {
            Ownership::Slots { count, .. } => format!(
                "this broker does not coordinate group `{group}` (slot {} of {count}); \
                 find its coordinator again",
                proto::coordinator_slot(group, *count)
            ),
            Ownership::All => format!("this broker does not coordinate group `{group}`"),
        }
    }

    /// The takeover wait a group created now inherits from its slot, if still running.
    pub(super) fn hold_for(&self, group: &str) -> Option<u64> {
        let slot = self.ownership.slot_of(group)?;
        self.takeover_until
            .get(&slot)
            .copied()
            .filter(|&until| until > self.cx.now)
    }

    /// Cluster mode: slot `slot` is now ours. Its groups start empty; the first
    /// rebalance of each waits for the end of the takeover wait (§6.8).
    pub(super) fn on_slot_gained(&mut self, slot: u32, stopped_ms: u64) {
        let Ownership::Slots { count, owned } = &mut self.ownership else {
            tracing::warn!(slot, "slot gained by a standalone coordinator: ignored");
            return;
        };
        if slot >= *count {
            tracing::warn!(slot, count = *count, "slot gained out of range: ignored");
            return;
        }
        if !owned.insert(slot) {
            tracing::warn!(slot, "slot gained while already owned: ignored");
            return;
        }
        let count = *count;
        debug_assert!(
            !self
                .groups
                .ids_of(GroupKind::Native)
                .iter()
                .any(|g| proto::coordinator_slot(g.as_str(), count) == slot),
            "a group of a slot not owned"
        );
        // The previous owner's consumers may deliver until their leases end, at most
        // `takeover_wait_ms` after it stopped, which was `stopped_ms` ago.
        let until = self
            .cx
            .now
            .saturating_add(self.cx.config.takeover_wait_ms().saturating_sub(stopped_ms));
        self.takeover_until.insert(slot, until);
        self.cx.event(Event::SlotGained {
            slot,
            takeover_until: until,
        });
        self.cx.metric(CoordinatorCounter::SlotsGained, 1);
    }

    /// Cluster mode: slot `slot` is no longer ours. Every group of the slot is dropped
    /// (§6.8): the channels of its consumers are closed, its timers removed, its
    /// accepted offsets not yet handed to the store discarded (the CommitOffset
    /// requests waiting for them get NOT_COORDINATOR, and so do the Kafka OffsetCommit
    /// requests of the slot's group ids queued behind a batch in flight,
    /// [`Coordinator::drop_queued_commits_of`]); a batch already handed to the
    /// store answers its waiting requests when its result comes, and a rebalance
    /// fetch's result is ignored. No frame is sent for those groups afterwards.
    pub(super) fn on_slot_lost(&mut self, slot: u32) {
        let Ownership::Slots { count, owned } = &mut self.ownership else {
            tracing::warn!(slot, "slot lost by a standalone coordinator: ignored");
            return;
        };
        if !owned.remove(&slot) {
            tracing::warn!(slot, "slot lost while not owned: ignored");
            return;
        }
        let count = *count;
        self.takeover_until.remove(&slot);
        // Every group of the slot, whatever its type: each type decides here what
        // leaving with its slot means (a new type fails to compile until it does).
        let ids: Vec<GroupId> = self
            .groups
            .iter()
            .filter(|(id, _)| proto::coordinator_slot(id.as_str(), count) == slot)
            .map(|(id, _)| id.clone())
            .collect();
        let (mut consumers, mut discarded) = (0, 0);
        let mut natives: BTreeSet<&GroupId> = BTreeSet::new();
        for id in &ids {
            match self.groups.remove(id) {
                Some(Group::Native(g)) => {
                    tracing::info!(group = %id, slot, members = g.members.len(), "group dropped with its slot");
                    let cx = &mut self.cx;
                    for m in g.members.values() {
                        cx.timers
                            .set(TimerKey::Member(g.id.clone(), m.id.clone()), None);
                        cx.close_if_open(m.conn);
                        consumers += 1;
                    }
                    cx.timers.set(TimerKey::Group(g.id.clone()), None);
                    cx.set_pending(&g.id, false);
                    discarded += g.commits.pending.len();
                    for w in g.commits.pending_waiters {
                        cx.answer_waiter(w, Some(ResponseError::NotCoordinator));
                    }
                    natives.insert(id);
                }
                Some(Group::Classic(g)) => self.drop_classic_with_slot(g, slot),
                Some(Group::Consumer(g)) => {
                    tracing::info!(group = %id, slot, empty = g.is_empty(), "KIP-848 group dropped with its slot");
                    let mut fx = self.cx.lender.effects();
                    g.unschedule_all(&mut fx);
                    let result = fx.finish(());
                    self.cx.apply(result);
                }
                // Its members heartbeat the slot's new owner (NOT_COORDINATOR here),
                // which answers UNKNOWN_MEMBER_ID and rebuilds the group from their
                // epoch-0 rejoins; share-partition state is the host's, kept by the
                // partitions' leaders.
                Some(Group::Share(g)) => {
                    tracing::info!(group = %id, slot, members = g.members.len(), "share group dropped with its slot");
                    let mut fx = self.cx.lender.effects();
                    g.unschedule_all(&mut fx);
                    let result = fx.finish(());
                    self.cx.apply(result);
                }
                None => {}
            }
        }
        // A native group's store operations in flight are forgotten; a Kafka group's
        // commits in flight still get the store's answer.
        if !natives.is_empty() {
            self.cx.forget_ops_of(&natives);
        }
        // The tick stays armed only for the groups left with offsets waiting.
        self.cx.rearm_commit_tick();
        self.drop_queued_commits_of(|g| proto::coordinator_slot(g.as_str(), count) == slot);
        // Pending transactional offsets stay in their transactions' durable records;
        // the slot's new owner gets them back (`Input::TxnOffsetsPending`).
        for g in self.groups.txn.groups() {
            if proto::coordinator_slot(g.as_str(), count) == slot {
                self.groups.txn.drop_group(g.as_str());
            }
        }
        let cx = &mut self.cx;
        cx.event(Event::SlotLost {
            slot,
            groups: ids.len(),
            consumers,
            discarded_offsets: discarded,
        });
        cx.metric(CoordinatorCounter::SlotsLost, 1);
    }
}
