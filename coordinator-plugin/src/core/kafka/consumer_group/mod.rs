//! KIP-848 consumer groups (the "next generation consumer rebalance protocol") as a
//! pure state machine: the group logic behind ConsumerGroupHeartbeat v0–v1 and
//! ConsumerGroupDescribe, and the member checks of OffsetCommit / OffsetFetch v9+,
//! ListGroups and DeleteGroups for these groups.
//!
//! It reads no clock and does no I/O: every call gets an [`Env`] with the current time
//! (monotonic ms), the topic metadata and the assignors. It knows nothing of the wire:
//! the glue decodes the Kafka requests, converts topic ids to names and back, calls
//! [`ConsumerGroups`], and puts the code of the Kafka error it answers with
//! ([`ResponseError`]) on the wire. What an operation decides besides its answer it
//! records as effects of the one result shape of every group type (`core/result.rs`):
//! each member's deadline in the coordinator's one timer table, under
//! [`TimerKey::ConsumerMember`](crate::core::TimerKey::ConsumerMember), set or cancelled by the operations that move or end
//! it (heartbeat, expiry), and the members it expired (a counter); the coordinator
//! hands the members whose timers fired to [`ConsumerGroups::expire`].
//!
//! The rules, after KIP-848 and Kafka's group coordinator:
//!
//! - **Epochs.** A group has a *group epoch*, bumped whenever what the assignment depends
//!   on changes: a member joins or is removed, a member's subscription (topic names,
//!   regex) or server assignor changes, or the partition count / existence of a
//!   subscribed topic changes. After a bump the group's server-side assignor computes a
//!   new *target assignment*, whose epoch is the *assignment epoch*: at once, or when
//!   the group's assignment interval since its last run has passed (100 µs per member,
//!   at most `consumer_assignment_interval_ms`, after KIP-1263), so bumps that come
//!   faster share one run; meanwhile members reconcile towards the target in force
//!   and are told to come back when the new one is due. When the assignor
//!   fails (or its output is invalid), the old target, without removed members and
//!   vanished partitions, serves at the new epoch, the group shows as Assigning, and
//!   the assignor is retried at most once per heartbeat interval (on heartbeats and
//!   topic changes); a successful retry bumps the group epoch. Each member has a
//!   *member epoch*: the assignment epoch it has reconciled to.
//! - **Assignor.** Each member may name a server assignor; the group uses the one named
//!   by most members (ties: the smallest name), else the default. A name must be a
//!   loaded assignor; `uniform` (when no assignor of that name is loaded) means our
//!   `sticky`, and `range` our `range`. Any other name that is not loaded runs the
//!   default assignor (with a warning) instead of Kafka's UNSUPPORTED_ASSIGNOR, so a
//!   missing or refused plugin does not fail the group's consumers.
//! - **Reconciliation (revoke, then assign).** On each heartbeat a member moves towards
//!   its target: partitions it holds that are not in its target are revoked first (the
//!   member keeps its epoch and is told its assignment without them, state
//!   `unrevoked_partitions`) until it heartbeats with owned partitions that no longer
//!   include them; only then does it move to the target epoch and receive new
//!   partitions, and only those no other member still holds (assigned or pending
//!   revocation). Partitions still held by others are withheld (state
//!   `unreleased_partitions`) and handed over on a later heartbeat once released. So no
//!   partition is ever held by two members.
//! - **Fencing.** A heartbeat with an epoch newer than the member's, or older and not
//!   the member's previous epoch with owned partitions within its assignment (a lost
//!   response), is FENCED_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID. Epoch 0
//!   (re)joins: an existing member id rejoins idempotently.
//! - **Timeouts.** A member that does not heartbeat for the session timeout is removed;
//!   a member asked to revoke partitions that has not done so within its rebalance
//!   timeout is removed. Removal releases its partitions and bumps the group epoch.
//! - **Leaving.** Epoch −1 leaves (the member is removed). A static member (with an
//!   instance id) leaving with epoch −2 keeps its place and its assignment, without a
//!   group epoch bump, until the session timeout; a member joining with the same
//!   instance id and a new member id then takes over that place and assignment without
//!   disturbing the others. While the old member has not left, such a join is
//!   UNRELEASED_INSTANCE_ID; a request naming the instance id with another member id
//!   than its current one is FENCED_INSTANCE_ID.
//! - **Regex subscriptions** use the Rust `regex` syntax, matched against whole topic
//!   names (internal `__` topics excluded), re-resolved on every topic change. An
//!   invalid pattern is INVALID_REGULAR_EXPRESSION.
//! - **Requests** are validated as Kafka does (INVALID_REQUEST): a join (epoch 0) needs
//!   a rebalance timeout, an empty owned-partitions list and a subscription (names or
//!   regex); a member id is required in v1, on heartbeats with an epoch above 0 and on
//!   leaving; epoch −2 needs an instance id; epochs below −2 are invalid; blank group,
//!   instance and rack ids are invalid. Group size is limited (GROUP_MAX_SIZE_REACHED).
//! - **Offsets** of a consumer group may be committed by a member with its current
//!   epoch (else STALE_MEMBER_EPOCH, or UNKNOWN_MEMBER_ID), or with a negative epoch
//!   while the group has no members (a standalone commit).
//!
//! The files, after Kafka's classes: `validate` (the request checks and epoch fencing),
//! `member` (`ConsumerGroupMember`), `group` (`ConsumerGroup`: state, describe, the
//! offset commit and fetch checks),
//! `target` (`TargetAssignmentBuilder`), `reconcile` (`CurrentAssignmentBuilder`) and
//! `heartbeat` (`GroupMetadataManager.consumerGroupHeartbeat`: join, heartbeat,
//! leave). This file keeps the request and answer types, the [`Env`], and what acts on
//! every group: topic changes, deadlines, deletion.

mod group;
mod heartbeat;
mod history;
mod member;
mod reconcile;
mod target;
#[cfg(test)]
mod tests;
pub(super) mod validate;

use std::collections::{BTreeMap, BTreeSet};

use drover_protocol::RebalanceRecord;
use kafka_protocol::ResponseError;

use crate::core::assigning::GroupAssignors;
use crate::core::groups::Groups;
use crate::core::result::Effects;
use crate::io::CoordinatorCounter;
use crate::seen_loads::TopicSeenLoads;
use crate::types::{GroupId, TopicName, TopicPartition};

pub(crate) use group::ConsumerGroup;
use member::{schedule, unschedule};

/// Longest error message in a ConsumerGroupHeartbeat answer, bytes.
const MAX_ERROR_MESSAGE_BYTES: usize = 512;

/// The member epoch of a (re)joining member.
pub(crate) const JOIN_EPOCH: i32 = 0;
/// The member epoch of a member leaving the group.
pub(crate) const LEAVE_EPOCH: i32 = -1;
/// The member epoch of a static member leaving temporarily.
pub(crate) const STATIC_LEAVE_EPOCH: i32 = -2;
/// The first ConsumerGroupHeartbeat version in which the client generates its member id
/// (KIP-1082): the member id is then required on every request.
pub(crate) const CLIENT_MEMBER_ID_VERSION: i16 = 1;

/// An error answer: a Kafka error code and a message.
type Failure = (ResponseError, String);

/// A target assignment: partitions by member id.
type Target = BTreeMap<String, BTreeSet<TopicPartition>>;

/// What running an assignor gave: its name, the checked target and the partition
/// loads its context carried, or its name and what went wrong.
type AssignorRun = Result<Assigned, (String, String)>;

/// A successful assignor run.
#[derive(Debug)]
pub(super) struct Assigned {
    /// The assignor that ran (the default after a fallback).
    pub assignor: String,
    /// Its checked target.
    pub target: Target,
    /// The produce rates and lag its context carried
    /// ([`ContextParts::seen_loads`](crate::assignors::ContextParts::seen_loads)).
    pub loads: Vec<TopicSeenLoads>,
}

fn failure(code: ResponseError, message: impl Into<String>) -> Failure {
    (code, message.into())
}

/// A ConsumerGroupHeartbeat request (v0–v1) in domain form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeartbeatRequest {
    /// The request's API version (v1 requires a client-generated member id).
    pub version: i16,
    /// The group.
    pub group: GroupId,
    /// The member id. v1: generated by the client, never empty. v0: empty on the first
    /// join, when the coordinator generates one.
    pub member_id: String,
    /// The static member's instance id (`group.instance.id`).
    pub instance_id: Option<String>,
    /// The member's rack; `None` = unchanged.
    pub rack_id: Option<String>,
    /// The client id of the request header (for describe).
    pub client_id: String,
    /// The client's host (for describe).
    pub client_host: String,
    /// 0 = join, −1 = leave, −2 = static member leaving temporarily, > 0 = the epoch the
    /// member is at.
    pub member_epoch: i32,
    /// The rebalance timeout; −1 = unchanged (required on a join).
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names; `None` = unchanged.
    pub subscribed_topic_names: Option<Vec<TopicName>>,
    /// Subscription regex; `None` = unchanged, `Some("")` = none.
    pub subscribed_topic_regex: Option<String>,
    /// Server assignor name; `None` = unchanged.
    pub server_assignor: Option<String>,
    /// Partitions the member owns now; `None` = unchanged since the last heartbeat.
    /// Must be `Some` and empty on a join.
    pub owned_partitions: Option<BTreeSet<TopicPartition>>,
}

/// The answer to a [`HeartbeatRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeartbeatResponse {
    /// An error code and message, or `None` for success.
    pub error: Option<(ResponseError, String)>,
    /// The member id (generated for a v0 join); the request's on errors.
    pub member_id: String,
    /// The member's epoch now (−1 / −2 after leaving, 0 on errors).
    pub member_epoch: i32,
    /// How often the member should heartbeat, ms: the short reconciliation interval
    /// while it is reconciling, else the configured one (see `heartbeat::reconciling`).
    pub heartbeat_interval_ms: i32,
    /// The member's assignment: present on a full request (a join, or a request with
    /// rebalance timeout, subscription and owned partitions) and when it changed;
    /// absent otherwise.
    pub assignment: Option<BTreeSet<TopicPartition>>,
}

/// What every operation needs from the outside.
pub(crate) struct Env<'a> {
    /// Now, in ms of a monotonic clock.
    pub now: u64,
    /// The topics and their partition counts.
    pub topics: &'a BTreeMap<TopicName, u32>,
    /// The host's partition table, for assignors' contexts.
    pub partition_stats: &'a crate::PartitionStats,
    /// The loaded assignors, and where calls handed to the host are recorded.
    pub assignors: GroupAssignors<'a>,
    /// The assignor of groups whose members name none (aliases apply).
    pub default_assignor: &'a str,
    /// The session timeout of every member.
    pub session_timeout_ms: u32,
    /// The heartbeat interval told to a member that is reconciled (Kafka's
    /// `group.consumer.heartbeat.interval.ms`), ms.
    pub heartbeat_interval_ms: u32,
    /// The heartbeat interval told to a member still reconciling: with partitions to
    /// revoke or to receive, just given a new assignment, or behind a target that
    /// changed since its last heartbeat (`consumer_reconcile_heartbeat_interval_ms`),
    /// ms. At most `heartbeat_interval_ms`.
    pub reconcile_heartbeat_interval_ms: u32,
    /// How long after a target change every member is told
    /// `reconcile_heartbeat_interval_ms` (`consumer_rebalance_settle_ms`), ms.
    pub rebalance_settle_ms: u32,
    /// The longest assignment interval of a group (`consumer_assignment_interval_ms`),
    /// ms: see [`ConsumerGroup::target_due`]. 0: every epoch bump runs the assignor.
    pub assignment_interval_ms: u32,
    /// The maximum number of members of a group.
    pub max_group_size: usize,
    /// Assignor runs that fell back to the default assignor during this call (the
    /// caller reports them as the `assignor_fallbacks` metric).
    pub fallbacks: std::cell::Cell<u64>,
    /// Assignor runs that failed during this call — an error, a panic, an answer
    /// breaking the contract, or (host side) a call past its budget — whether or not
    /// the default assignor then ran (the caller reports them as the
    /// `assignor_failures` metric, as native groups count theirs).
    pub failures: std::cell::Cell<u64>,
}

/// The KIP-848 engine's operations over the groups of the coordinator's one table
/// ([`Groups`], where each KIP-848 group is a [`ConsumerGroup`]): it keeps only the
/// member ids it generated; every operation takes the table and what else it needs.
#[derive(Debug, Default)]
pub(crate) struct ConsumerGroups {
    /// Member ids generated so far (v0 joins).
    generated: u64,
    /// The members of all KIP-848 groups when last counted, and when (coordinator
    /// clock, ms).
    counted: Option<(usize, u64)>,
}

/// How long a count of KIP-848 members serves ([`ConsumerGroups::member_count`]), ms.
const MEMBER_COUNT_AGE_MS: u64 = 1_000;

impl ConsumerGroups {
    /// The members of all KIP-848 groups in `groups`, counted again at most once per
    /// [`MEMBER_COUNT_AGE_MS`] (a pass over the group table) — what the steady
    /// heartbeat interval is computed from.
    pub(crate) fn member_count(&mut self, groups: &Groups, now: u64) -> usize {
        match self.counted {
            Some((count, at)) if now < at.saturating_add(MEMBER_COUNT_AGE_MS) => count,
            _ => {
                let count = groups
                    .iter()
                    .map(|(_, g)| match g {
                        crate::core::groups::Group::Consumer(c) => c.members.len(),
                        _ => 0,
                    })
                    .sum();
                self.counted = Some((count, now));
                count
            }
        }
    }

    /// The topics or their partition counts changed (creation, deletion, new
    /// partitions): re-resolves regex subscriptions and, in every group whose
    /// subscriptions or subscribed topics changed, bumps the group epoch and computes
    /// a new target. A failed target computation is retried when due.
    pub(crate) fn topics_changed(&mut self, groups: &mut Groups, env: &Env<'_>) {
        let mut cache = BTreeMap::new();
        for g in groups.consumers_mut() {
            let mut changed = false;
            for m in g.members.values_mut_unordered() {
                let topics = m.resolve(env.topics, &mut cache);
                if topics != m.topics {
                    m.topics = topics;
                    changed = true;
                }
            }
            let metadata = g.compute_metadata(env.topics);
            if metadata != g.metadata {
                g.metadata = metadata;
                changed = true;
            }
            if changed {
                g.bump_epoch(RebalanceRecord::TOPIC_CHANGE, env.now);
                tracing::debug!(group = %g.id, epoch = g.epoch, "topic metadata changed");
                g.compute_target_when_due(env);
            } else {
                g.maybe_retry(env);
            }
        }
    }

    /// Re-runs the assignor of groups `ids` because its inputs drifted (issue 16 item
    /// 3, `rerun_on_drift_ms`): as a subscription change would, each group with
    /// members gets a new group epoch and a new target, which its members reconcile
    /// with the usual revoke-then-assign (a partition moves only once its owner has
    /// revoked it), so no partition is owned by two members at once. Unknown or empty
    /// groups are skipped, and so is a group whose assignor, run over the new inputs,
    /// gives the target it already has (or fails: the target in force stays): no new
    /// epoch, nothing for the members to do. Returns the groups given a new target
    /// during this call (a run handed to the host gives its group one later, when its
    /// result arrives).
    pub(crate) fn rerun(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        ids: impl IntoIterator<Item = GroupId>,
    ) -> Vec<GroupId> {
        let mut out = Vec::new();
        for id in ids {
            let Some(g) = groups.consumer_mut(&id) else {
                continue;
            };
            if g.members.is_empty() {
                continue;
            }
            let epoch = g.epoch;
            g.start_assignment(env, target::Purpose::Drift);
            if g.epoch != epoch {
                out.push(id);
            }
        }
        out
    }

    /// The result of assignor call `call` of group `group` arrived from the host
    /// ([`crate::core::assigning`]): the group takes it if it still waits for it.
    pub(crate) fn assignor_done(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        group: &GroupId,
        call: u64,
        result: Result<drover_abi::assignor::Assignment, drover_abi::PluginError>,
    ) -> bool {
        groups
            .consumer_mut(group)
            .is_some_and(|g| g.assignor_done(env, call, result))
    }

    /// Members whose timers ([`TimerKey::ConsumerMember`](crate::core::TimerKey::ConsumerMember)) fired, in the order they
    /// fired: removes each one past its session deadline (no heartbeat, or a static
    /// member that did not come back) or its rebalance deadline (partitions not
    /// revoked in time), then recomputes the target of each group that lost a member,
    /// once. A member not yet past its deadline gets its timer back; an unknown one is
    /// skipped. Returns the removed members and why (each also counted in `fx`,
    /// `consumer_members_expired`).
    pub(crate) fn expire(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        due: impl IntoIterator<Item = (GroupId, String)>,
    ) -> Vec<(GroupId, String, &'static str)> {
        let mut out = Vec::new();
        let mut touched: BTreeSet<GroupId> = BTreeSet::new();
        for (group, id) in due {
            let Some(g) = groups.consumer_mut(&group) else {
                continue;
            };
            let Some(m) = g.members.get(&id) else {
                continue;
            };
            if m.deadline() > env.now {
                schedule(fx, &group, m);
                continue;
            }
            // A member past its rebalance timeout is fenced as one past its session
            // timeout is (Kafka's `ConsumerGroupMember` deadlines): both expire.
            let reason = if m.rebalance_deadline.is_some_and(|r| r <= env.now) {
                "rebalance timeout: partitions not revoked in time"
            } else if m.epoch == STATIC_LEAVE_EPOCH {
                "static member did not rejoin within the session timeout"
            } else {
                "session timeout"
            };
            tracing::info!(group = %group, member = %id, reason, "member fenced");
            g.remove(&id, env.topics, RebalanceRecord::SESSION_EXPIRY, env.now);
            unschedule(fx, &group, &id);
            fx.metric(CoordinatorCounter::ConsumerMembersExpired, 1);
            touched.insert(group.clone());
            out.push((group, id, reason));
        }
        for group in touched {
            if let Some(g) = groups.consumer_mut(&group) {
                g.compute_target_when_due(env);
                g.note_reconciled(env.now);
            }
        }
        out
    }

    /// DeleteGroups: only a group without members (NON_EMPTY_GROUP otherwise);
    /// GROUP_ID_NOT_FOUND for an unknown group. The glue deletes its offsets.
    pub(crate) fn delete(&mut self, groups: &mut Groups, group: &str) -> Result<(), ResponseError> {
        let g = groups
            .consumer(group)
            .ok_or(ResponseError::GroupIdNotFound)?;
        if !g.members.is_empty() {
            return Err(ResponseError::NonEmptyGroup);
        }
        groups.remove(group);
        Ok(())
    }
}

impl ConsumerGroup {
    /// The topics its members subscribe to by name and those of the partitions they
    /// are assigned (a regex subscription's topics are the assigned ones).
    pub(crate) fn subscribed_topics(&self) -> BTreeSet<TopicName> {
        let mut out = BTreeSet::new();
        for m in self.members.values() {
            out.extend(m.names.iter().cloned());
            out.extend(m.assigned.iter().map(|tp| tp.topic.clone()));
        }
        out
    }

    /// Cancels the timers of every member (the group left the table: deleted, or
    /// dropped with its slot).
    pub(crate) fn unschedule_all(&self, fx: &mut Effects<'_>) {
        for id in self.members.keys() {
            unschedule(fx, &self.id, id);
        }
    }
}

impl ConsumerGroup {
    /// Whether the group has no member.
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The group's state as ListGroups and ConsumerGroupDescribe name it.
    pub(crate) fn state_name(&self) -> &'static str {
        self.state().as_str()
    }
}
