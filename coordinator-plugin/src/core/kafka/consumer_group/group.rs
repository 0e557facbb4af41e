//! One KIP-848 group and what it shows: its state (Empty, Assigning, Reconciling,
//! Stable), its members, target and partition owners, member removal, and the
//! descriptions ConsumerGroupDescribe and ListGroups answer with, its operators'
//! snapshot (the one model native groups share: native DescribeGroups v2 and the admin
//! API), and the group-level checks of an offset commit or fetch (Kafka's
//! `ConsumerGroup`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::member::{Member, MemberState};
use super::{ConsumerGroups, Target};
use crate::config::RebalanceMode;
use crate::core::commits::{CommitApi, CommitAuthor};
use crate::core::groups::{GroupKind, Groups};
use crate::core::{GroupSnapshot, MemberSnapshot};
use crate::id_map::IdMap;
use crate::seen_loads::TopicSeenLoads;
use crate::types::{ConsumerId, Generation, GroupId, TopicName, TopicPartition};

/// The state of a group (Kafka's names, as in ConsumerGroupDescribe and ListGroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupState {
    /// No members.
    Empty,
    /// The assignor failed to compute the target of the group epoch; retrying.
    Assigning,
    /// Some member has not reached the target assignment.
    Reconciling,
    /// Every member is at the target assignment.
    Stable,
}

impl GroupState {
    /// Kafka's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// A group, as ConsumerGroupDescribe and the admin API show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupDescription {
    /// The group.
    pub group: GroupId,
    /// Its state, by Kafka's name: Empty, Assigning, Reconciling, Stable.
    pub state: &'static str,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The assignor of the last target assignment (our plugin name).
    pub assignor: String,
    /// The members, by member id.
    pub members: Vec<MemberDescription>,
}

/// One member of a [`GroupDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// The instance id of a static member.
    pub instance_id: Option<String>,
    /// The rack.
    pub rack_id: Option<String>,
    /// The client id of its last heartbeat.
    pub client_id: String,
    /// The client host of its last heartbeat.
    pub client_host: String,
    /// The member epoch (−2 while a static member is away).
    pub member_epoch: i32,
    /// Its reconciliation state.
    pub state: &'static str,
    /// The subscribed topic names, sorted.
    pub subscribed_topic_names: Vec<TopicName>,
    /// The subscription regex.
    pub subscribed_topic_regex: Option<String>,
    /// The server assignor it asked for (resolved to our plugin name).
    pub server_assignor: Option<String>,
    /// The partitions it is assigned now.
    pub assignment: BTreeSet<TopicPartition>,
    /// Partitions it was asked to revoke and still holds.
    pub pending_revocation: BTreeSet<TopicPartition>,
    /// Its target assignment.
    pub target_assignment: BTreeSet<TopicPartition>,
}

/// One KIP-848 group.
#[derive(Debug)]
pub(crate) struct ConsumerGroup {
    pub(super) id: GroupId,
    pub(super) epoch: i32,
    pub(super) assignment_epoch: i32,
    /// The target assignment, by member id (members missing here get nothing).
    pub(super) target: Target,
    pub(super) members: IdMap<String, Member>,
    /// Instance id → member id of the static members.
    pub(super) statics: BTreeMap<String, String>,
    /// Who holds each partition (assigned or pending revocation): at most one member.
    pub(super) owners: BTreeMap<TopicPartition, String>,
    /// Partition counts of the existing subscribed topics, as of the last epoch bump.
    pub(super) metadata: BTreeMap<TopicName, u32>,
    /// The assignor of the last target assignment.
    pub(super) assignor: String,
    /// After an assignor failure: when to try again.
    pub(super) retry_at: Option<u64>,
    /// When the assignor last ran for the group (monotonic ms): the next target waits
    /// for the group's assignment interval after it ([`ConsumerGroup::target_due`]).
    pub(super) assigned_at: Option<u64>,
    /// When the target of the group epoch is due, fixed at the first bump that had to
    /// wait: joins arriving meanwhile do not push it back.
    pub(super) due_at: Option<u64>,
    /// The group's committed offsets as the coordinator saw them written (its OffsetCommit
    /// batches the store accepted since the coordinator started), laid over the
    /// assignor's context as native groups' are. At most one entry per partition of an
    /// existing topic (commits are validated against the topics; a lost topic's are
    /// dropped). Empty after a restart until the group commits again or a member's
    /// OffsetFetch reads them (`note_fetched`).
    pub(super) committed: BTreeMap<TopicPartition, i64>,
    /// Until when (monotonic ms) every member is told the reconciliation interval:
    /// the last new target's time plus `consumer_rebalance_settle_ms`.
    pub(super) settling_until: u64,
    /// What the assignor of the target in force saw of its partitions' load, for
    /// operators (DescribeGroups v2, docs/protocol.md §5.8): replaced with each new
    /// target, kept when a run fails or a drift re-run finds the same target. As a
    /// native group's: one entry per subscribed partition the context had a rate or
    /// lag for; it goes with the group.
    pub(super) last_loads: Vec<TopicSeenLoads>,
    /// The assignor call the group waits for, handed to the host
    /// ([`crate::assignor_job`]); at most one.
    pub(super) assigning: Option<super::target::Assigning>,
    /// Its recent rebalances, for operators ([`super::history`]).
    pub(super) history: crate::core::rebalance_history::RebalanceHistory,
    /// The member the running rebalance was last found waiting for
    /// ([`ConsumerGroup::note_reconciled`]).
    pub(super) waiting_on: Option<String>,
}

impl ConsumerGroup {
    pub(super) fn new(id: GroupId, assignor: String) -> Self {
        ConsumerGroup {
            id,
            epoch: 0,
            assignment_epoch: 0,
            target: BTreeMap::new(),
            members: IdMap::default(),
            statics: BTreeMap::new(),
            owners: BTreeMap::new(),
            metadata: BTreeMap::new(),
            assignor,
            retry_at: None,
            assigned_at: None,
            due_at: None,
            committed: BTreeMap::new(),
            settling_until: 0,
            last_loads: Vec::new(),
            assigning: None,
            history: Default::default(),
            waiting_on: None,
        }
    }

    /// The group's id.
    pub(crate) fn id(&self) -> &GroupId {
        &self.id
    }

    /// The assignor of the group's last target assignment (the one a drift re-run
    /// would run again; `rerun_on_drift_ms` is keyed by it).
    pub(crate) fn assignor_name(&self) -> &str {
        &self.assignor
    }

    /// Notes offsets of this group the store accepted (`offset` ≥ 0: the next record to
    /// consume), for the assignor's context.
    pub(crate) fn note_committed<'a>(
        &mut self,
        offsets: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) {
        for (tp, offset) in offsets {
            if offset >= 0 {
                self.committed.insert(tp.clone(), offset);
            } else {
                self.committed.remove(tp);
            }
        }
    }

    /// Notes offsets of this group read from the store (an OffsetFetch answer) for
    /// partitions it has no committed offset for yet: after a restart or a slot
    /// fail-over the group starts with none, and its members fetch their positions
    /// right after their first assignment, so the next target (a join, a leave, a drift
    /// re-run) sees them. An offset already noted is never replaced: it came from a
    /// commit the store acknowledged, which may be newer than this read.
    pub(crate) fn note_fetched<'a>(
        &mut self,
        offsets: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) {
        for (tp, offset) in offsets {
            if offset >= 0 && !self.committed.contains_key(tp) {
                self.committed.insert(tp.clone(), offset);
            }
        }
    }

    /// Drops the committed offsets of topics that are gone.
    pub(crate) fn forget_committed(&mut self, lost: &std::collections::BTreeSet<TopicName>) {
        self.committed.retain(|tp, _| !lost.contains(&tp.topic));
    }

    pub(super) fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.epoch > self.assignment_epoch
            || self.retry_at.is_some()
            || self.assigning.is_some()
        {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// Partition counts of the existing topics the members subscribe to.
    pub(super) fn compute_metadata(
        &self,
        topics: &BTreeMap<TopicName, u32>,
    ) -> BTreeMap<TopicName, u32> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for t in &m.topics {
                if let Some(&count) = topics.get(t) {
                    out.insert(t.clone(), count);
                }
            }
        }
        out
    }

    /// Removes a member at `now`, releasing its partitions, and bumps the group epoch
    /// for `cause` (a [`drover_protocol::RebalanceRecord`] cause).
    pub(super) fn remove(
        &mut self,
        id: &str,
        topics: &BTreeMap<TopicName, u32>,
        cause: &'static str,
        now: u64,
    ) -> Option<Member> {
        let m = self.members.remove(id)?;
        for tp in m.assigned.iter().chain(&m.pending_revocation) {
            if self.owners.get(tp).is_some_and(|o| *o == m.id) {
                self.owners.remove(tp);
            }
        }
        self.target.remove(id);
        if let Some(instance) = &m.instance_id {
            if self.statics.get(instance).is_some_and(|o| *o == m.id) {
                self.statics.remove(instance);
            }
        }
        self.metadata = self.compute_metadata(topics);
        self.bump_epoch(cause, now);
        Some(m)
    }

    /// The group-level check of an offset commit (Kafka's
    /// `ConsumerGroup.validateOffsetCommit`, OffsetCommit v9+): a member with its
    /// current epoch may commit (STALE_MEMBER_EPOCH for another epoch,
    /// UNKNOWN_MEMBER_ID for an unknown member); a negative epoch only while the group
    /// has no members. By the native CommitOffset only a simple commit (a native client
    /// is never a member of a Kafka group; UNKNOWN_MEMBER_ID).
    pub(crate) fn validate_offset_commit(
        &self,
        author: &CommitAuthor,
    ) -> Result<(), ResponseError> {
        if author.api == CommitApi::Native && !author.is_simple() {
            return Err(ResponseError::UnknownMemberId);
        }
        if author.generation < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(author.member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if m.epoch != author.generation {
            // Kafka answers a TxnOffsetCommit's stale epoch with ILLEGAL_GENERATION.
            return Err(if author.api.is_transactional() {
                ResponseError::IllegalGeneration
            } else {
                ResponseError::StaleMemberEpoch
            });
        }
        Ok(())
    }

    /// The group-level check of an offset fetch by `member_id` at `member_epoch`
    /// (Kafka's `ConsumerGroup.validateOffsetFetch`, OffsetFetch v9+): without a member
    /// id and with a negative epoch always allowed (UNKNOWN_MEMBER_ID without a member id
    /// otherwise); else the member must exist (UNKNOWN_MEMBER_ID) with this epoch
    /// (STALE_MEMBER_EPOCH).
    pub(crate) fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        let Some(member_id) = member_id else {
            return if member_epoch < 0 {
                Ok(())
            } else {
                Err(ResponseError::UnknownMemberId)
            };
        };
        let m = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if m.epoch != member_epoch {
            return Err(ResponseError::StaleMemberEpoch);
        }
        Ok(())
    }
}

impl ConsumerGroup {
    /// The group as operators see it, in the model native groups share
    /// ([`GroupSnapshot`]): Kafka's state name, the group epoch as the generation, the
    /// assignor of the target in force (none without members), incremental mode; each
    /// member with `session_timeout_ms` (every member's: the coordinator's
    /// `consumer_session_timeout_ms`), its member epoch, its regex or topic names as
    /// the subscription, the partitions it holds (assigned or pending revocation), and
    /// its rack (weight 1: the protocol has none); and the loads the target's assignor
    /// saw.
    pub(crate) fn snapshot(&self, session_timeout_ms: u64) -> GroupSnapshot {
        GroupSnapshot {
            group: self.id.clone(),
            group_type: GroupKind::Consumer.name(),
            state: self.state().as_str(),
            generation: Generation(self.epoch),
            assignor: (!self.members.is_empty()).then(|| self.assignor.clone()),
            mode: RebalanceMode::Incremental,
            members: self
                .members
                .values()
                .map(|m| MemberSnapshot {
                    consumer: ConsumerId::new(&m.id),
                    host: m.client_host.clone(),
                    session_timeout_ms,
                    generation: Generation(m.epoch),
                    subscription: match &m.regex {
                        Some((pattern, _)) => pattern.clone(),
                        None => m
                            .names
                            .iter()
                            .map(TopicName::as_str)
                            .collect::<Vec<_>>()
                            .join(","),
                    },
                    topics: m.topics.iter().cloned().collect(),
                    auto_offset_reset: -1,
                    owned: m.assigned.union(&m.pending_revocation).cloned().collect(),
                    data: drover_protocol::MemberData {
                        rack: m.rack_id.clone(),
                        weight: 1,
                        labels: Vec::new(),
                    },
                })
                .collect(),
            held_by_failed: Vec::new(),
            loads: self.last_loads.clone(),
        }
    }
}

impl ConsumerGroups {
    /// A group as ConsumerGroupDescribe shows it; `None` for an unknown group (Dead).
    pub(crate) fn describe(&self, groups: &Groups, group: &str) -> Option<GroupDescription> {
        let g = groups.consumer(group)?;
        let none = BTreeSet::new();
        Some(GroupDescription {
            group: g.id.clone(),
            state: g.state().as_str(),
            group_epoch: g.epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g.assignor.clone(),
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    member_epoch: m.epoch,
                    state: m.state.as_str(),
                    subscribed_topic_names: m.names.iter().cloned().collect(),
                    subscribed_topic_regex: m.regex.as_ref().map(|r| r.0.clone()),
                    server_assignor: m.server_assignor.clone(),
                    assignment: m.assigned.clone(),
                    pending_revocation: m.pending_revocation.clone(),
                    target_assignment: g.target.get(&m.id).unwrap_or(&none).clone(),
                })
                .collect(),
        })
    }
}
