//! Share groups (KIP-932, "queues for Kafka"): the membership half, as a pure state
//! machine behind ShareGroupHeartbeat v1 and ShareGroupDescribe v1.
//!
//! Kafka keeps a share group's membership in the group coordinator and the records'
//! delivery state (acquisition locks, delivery counts) with each partition's leader; so
//! does Drover: this engine decides who is a member and which partitions each member
//! fetches from, the host serves ShareFetch / ShareAcknowledge by group id and member
//! id without asking the coordinator (docs/design.md, "Share groups").
//!
//! It reads no clock and does no I/O: every call gets an [`Env`] (time, topics,
//! limits, the share assignors) and records its decisions as effects of the one result
//! shape of every group type (`core/result.rs`): each member's session deadline set or
//! cancelled under [`TimerKey::ShareMember`] of the coordinator's one timer table, and
//! its counters (expired members, assignor fallbacks and failures).
//! The glue (`share_api`) decodes the wire, names topics by id, encodes the answers
//! and hands the result to the one applier (`Ctx::apply`).
//!
//! The rules, after KIP-932 and Kafka's `GroupMetadataManager.shareGroupHeartbeat`:
//! - **Requests** are checked first (INVALID_REQUEST): a member id the client generated
//!   (v1, a UUID: 22 characters of base64, either alphabet, or the 36-character hex
//!   form),
//!   a group id and rack that are not blank, epoch 0 (join) with a non-empty list of
//!   topic names, epoch −1 (leave) or above 0; at most `max_subscription_topics`
//!   names, each a valid topic name length.
//! - **Epochs.** The *group epoch* is bumped when a member joins or leaves, a member's
//!   subscription or rack changes, or a subscribed topic's partition count changes;
//!   the `simple` assignor then computes the *target assignment* at that epoch at once
//!   (the *assignment epoch*). A member heartbeating gets its target and the assignment
//!   epoch as its *member epoch* in the same answer: there is no revoke-then-assign
//!   step, since a partition may be fetched by several members.
//! - **Fencing.** A heartbeat with an epoch newer than the member's, or older and not
//!   its previous epoch (a lost answer), is FENCED_MEMBER_EPOCH; a heartbeat of a
//!   member id the group does not know is UNKNOWN_MEMBER_ID, and so is one of a group
//!   that does not exist here (its coordinator moved or restarted: the member rejoins
//!   and the group is made again, as Kafka's reloaded group would be); a leave of an
//!   unknown group is GROUP_ID_NOT_FOUND. Epoch 0 joins or rejoins (an existing member
//!   id keeps its place).
//! - **Leaving**: epoch −1 removes the member (answered with epoch −1).
//! - **Sessions**: a member silent for `share_session_timeout_ms` is removed; every
//!   answer tells `share_heartbeat_interval_ms`.
//! - **Limits**: at most `share_max_group_size` members per group and
//!   `share_max_groups` share groups (GROUP_MAX_SIZE_REACHED).
//! - **The group id is one type**: a share heartbeat for another type's group is
//!   GROUP_ID_NOT_FOUND, and a share group, even empty, is never taken over by
//!   another type (its share-partition state outlives its members); DeleteGroups
//!   deletes an empty one.
//! - **Offsets**: OffsetCommit, OffsetFetch and OffsetDelete on a share group are
//!   GROUP_ID_NOT_FOUND, as Kafka's `ShareGroup` answers them.

mod assign;
mod group;
pub(crate) mod simple;
mod validate;

use std::collections::{BTreeMap, BTreeSet};

use drover_abi::assignor::Assignment;
use drover_abi::PluginError;
use kafka_protocol::ResponseError;

use crate::config::CoordinatorConfig;
use crate::core::assigning::GroupAssignors;
use crate::core::groups::{Group, Groups};
use crate::core::result::Effects;
#[cfg(doc)]
use crate::core::TimerKey;
use crate::io::CoordinatorCounter;
use crate::partition_stats::PartitionStats;
use crate::types::{GroupId, TopicName, TopicPartition};

use group::timer_key;
pub(crate) use group::{ShareGroup, ShareMember};

/// The member epoch of a joining member.
pub(crate) const JOIN_EPOCH: i32 = 0;
/// The member epoch of a member leaving.
pub(crate) const LEAVE_EPOCH: i32 = -1;

/// An error answer: a Kafka error and a message.
type Failure = (ResponseError, String);

fn failure(code: ResponseError, message: impl Into<String>) -> Failure {
    (code, message.into())
}

/// GROUP_ID_NOT_FOUND for share group `group`.
fn group_not_found(group: &GroupId) -> Failure {
    failure(
        ResponseError::GroupIdNotFound,
        format!("Share group {group} not found."),
    )
}

/// UNKNOWN_MEMBER_ID for `member` of `group`.
fn unknown_member(member: &str, group: &GroupId) -> Failure {
    failure(
        ResponseError::UnknownMemberId,
        format!("Member {member} is not a member of group {group}."),
    )
}

/// UNKNOWN_MEMBER_ID for a heartbeat (epoch above 0) of `member` of a share group
/// this coordinator does not know. Kafka's new coordinator reloads a share group's
/// membership from `__consumer_offsets`; Drover keeps membership in memory only, so
/// after the group's slot moved (cluster mode) or its coordinator restarted, the
/// members' next heartbeats reach a coordinator without the group. UNKNOWN_MEMBER_ID
/// makes clients rejoin with member epoch 0 (librdkafka's share consumer treats
/// GROUP_ID_NOT_FOUND as fatal), and the joins recreate the group; Kafka answers a
/// classic heartbeat for a missing group the same way.
fn group_unknown_here(group: &GroupId, member: &str) -> Failure {
    failure(
        ResponseError::UnknownMemberId,
        format!(
            "Member {member} is not a member of share group {group}: the coordinator \
             does not know the group (its coordinator may have moved); rejoin with \
             member epoch 0."
        ),
    )
}

/// A ShareGroupHeartbeat (v1) in domain form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareHeartbeat {
    /// The group.
    pub group: GroupId,
    /// The member id the client generated.
    pub member_id: String,
    /// 0 = join, −1 = leave, > 0 = the epoch the member is at.
    pub member_epoch: i32,
    /// The rack; `None` = unchanged.
    pub rack_id: Option<String>,
    /// The subscribed topic names; `None` = unchanged (required on a join).
    pub subscribed_topic_names: Option<Vec<TopicName>>,
    /// The client id of the request header.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
}

/// The answer to a [`ShareHeartbeat`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareHeartbeatAnswer {
    /// An error and its message, or `None`.
    pub error: Option<Failure>,
    /// The member id (the request's).
    pub member_id: String,
    /// The member's epoch now (−1 after leaving, 0 on errors).
    pub member_epoch: i32,
    /// How often to heartbeat, ms.
    pub heartbeat_interval_ms: i32,
    /// The member's partitions: on a join and whenever they changed; else `None`.
    pub assignment: Option<BTreeSet<TopicPartition>>,
}

/// What the engine needs from the outside.
pub(crate) struct Env<'a> {
    /// Now, monotonic ms.
    pub now: u64,
    /// The topics and their partition counts.
    pub topics: &'a BTreeMap<TopicName, u32>,
    /// `share_session_timeout_ms`.
    pub session_timeout_ms: u32,
    /// `share_heartbeat_interval_ms`.
    pub heartbeat_interval_ms: u32,
    /// `share_max_group_size`.
    pub max_group_size: usize,
    /// `share_max_groups`.
    pub max_groups: usize,
    /// `max_subscription_topics`.
    pub max_subscription_topics: usize,
    /// The loaded assignors, and where calls handed to the host are recorded.
    pub assignors: GroupAssignors<'a>,
    /// The host's latest partition table, for the share assignor's context.
    pub partition_stats: &'a PartitionStats,
    /// `share_assignor` and `share_group_assignors`: which assignor each group selects.
    pub config: &'a CoordinatorConfig,
}

impl Env<'_> {
    /// The share assignor group `group` selects.
    pub(crate) fn selected_assignor(&self, group: &GroupId) -> &str {
        self.config.share_assignor_for(group.as_str())
    }
}

/// The heartbeat interval, ms, told to members of a group whose assignor call runs on
/// a host thread: its result is a new epoch, which they take on their next heartbeat
/// (Drover's rule; KIP-932 has no in-flight assignment).
pub(crate) const ASSIGNING_HEARTBEAT_INTERVAL_MS: u32 = 500;

/// The share-group engine's operations over the coordinator's group table, where each
/// share group is a [`Group::Share`] (the table counts them, [`Groups::share_count`]).
#[derive(Debug, Default)]
pub(crate) struct ShareGroups;

impl ShareGroups {
    /// Handles a ShareGroupHeartbeat: join, heartbeat or leave. The member's session
    /// deadline is set in `fx`, or cancelled when it leaves.
    pub(crate) fn heartbeat(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        req: ShareHeartbeat,
    ) -> ShareHeartbeatAnswer {
        let interval = i32::try_from(env.heartbeat_interval_ms).unwrap_or(i32::MAX);
        match self.try_heartbeat(groups, env, fx, &req) {
            Ok(answer) => answer,
            Err((code, message)) => {
                tracing::debug!(group = %req.group, member = %req.member_id, error = %code, reason = %message, "share heartbeat refused");
                ShareHeartbeatAnswer {
                    error: Some((code, message)),
                    member_id: req.member_id,
                    member_epoch: 0,
                    heartbeat_interval_ms: interval,
                    assignment: None,
                }
            }
        }
    }

    fn try_heartbeat(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        req: &ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, Failure> {
        validate::validate(req, env.max_subscription_topics)?;
        if req.member_epoch == LEAVE_EPOCH {
            return self.leave(groups, env, fx, req);
        }
        if groups.share(&req.group).is_none() {
            if req.member_epoch != JOIN_EPOCH {
                return Err(group_unknown_here(&req.group, &req.member_id));
            }
            if groups.share_count() >= env.max_groups {
                return Err(failure(
                    ResponseError::GroupMaxSizeReached,
                    format!(
                        "The coordinator has reached its maximum of {} share groups.",
                        env.max_groups
                    ),
                ));
            }
            // The caller made the id free for a share group (`take_group_id`).
            groups.insert(
                req.group.clone(),
                Group::Share(ShareGroup::new(req.group.clone())),
            );
        }
        let g = groups
            .share_mut(&req.group)
            .ok_or_else(|| group_not_found(&req.group))?;
        let mut bump = false;
        match g.members.get(&req.member_id) {
            Some(m) => check_epoch(m, req.member_epoch)?,
            None if req.member_epoch == JOIN_EPOCH => {
                if g.members.len() >= env.max_group_size {
                    return Err(failure(
                        ResponseError::GroupMaxSizeReached,
                        format!(
                            "The share group has reached its maximum capacity of {} members.",
                            env.max_group_size
                        ),
                    ));
                }
                tracing::info!(group = %g.id, member = %req.member_id, "share member joins");
                g.members.insert(
                    req.member_id.clone(),
                    ShareMember::new(req.member_id.clone(), env.now),
                );
                bump = true;
            }
            None => return Err(unknown_member(&req.member_id, &g.id)),
        }
        let m = g.members.get_mut(&req.member_id).expect("present");
        if let Some(rack) = &req.rack_id {
            if m.rack_id.as_ref() != Some(rack) {
                m.rack_id = Some(rack.clone());
                bump = true;
            }
        }
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<TopicName> = names.iter().cloned().collect();
            if names != m.names {
                m.names = names;
                bump = true;
            }
        }
        if m.client_id != req.client_id {
            m.client_id.clone_from(&req.client_id);
        }
        if m.client_host != req.client_host {
            m.client_host.clone_from(&req.client_host);
        }
        if bump {
            g.bump_and_assign(env, fx);
        }
        // The member takes its target at once (no revocation step).
        let target = g.target.get(&req.member_id).cloned().unwrap_or_default();
        let assignment_epoch = g.assignment_epoch;
        let m = g.members.get_mut(&req.member_id).expect("present");
        if m.epoch != assignment_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = assignment_epoch;
        }
        let assignment_changed = m.assigned != target;
        m.assigned = target;
        m.session_deadline = env.now.saturating_add(u64::from(env.session_timeout_ms));
        fx.timer(timer_key(&g.id, &m.id), Some(m.session_deadline));
        let interval = if g.assigning.is_some() {
            env.heartbeat_interval_ms
                .min(ASSIGNING_HEARTBEAT_INTERVAL_MS)
        } else {
            env.heartbeat_interval_ms
        };
        let m = g.members.get(&req.member_id).expect("present");
        Ok(ShareHeartbeatAnswer {
            error: None,
            member_id: m.id.clone(),
            member_epoch: m.epoch,
            heartbeat_interval_ms: i32::try_from(interval).unwrap_or(i32::MAX),
            assignment: (req.member_epoch == JOIN_EPOCH || assignment_changed)
                .then(|| m.assigned.clone()),
        })
    }

    /// Epoch −1: the member leaves; the group's target is recomputed without it.
    fn leave(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        req: &ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, Failure> {
        let Some(g) = groups.share_mut(&req.group) else {
            return Err(group_not_found(&req.group));
        };
        if g.members.remove(&req.member_id).is_none() {
            return Err(unknown_member(&req.member_id, &g.id));
        }
        tracing::info!(group = %g.id, member = %req.member_id, "share member leaves");
        fx.timer(timer_key(&g.id, &req.member_id), None);
        g.bump_and_assign(env, fx);
        Ok(ShareHeartbeatAnswer {
            error: None,
            member_id: req.member_id.clone(),
            member_epoch: LEAVE_EPOCH,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Members whose session timers fired: each one past its deadline is removed, and
    /// each group that lost members gets a new epoch and target once; a member not yet
    /// past its deadline gets its timer back. Returns the removed members (each also
    /// counted in `fx`, `share_members_expired`).
    pub(crate) fn expire(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        due: impl IntoIterator<Item = (GroupId, String)>,
    ) -> Vec<(GroupId, String)> {
        let mut out = Vec::new();
        let mut touched = BTreeSet::new();
        for (group, id) in due {
            let Some(g) = groups.share_mut(&group) else {
                continue;
            };
            let Some(m) = g.members.get(&id) else {
                continue;
            };
            if m.session_deadline > env.now {
                fx.timer(timer_key(&group, &id), Some(m.session_deadline));
                continue;
            }
            g.members.remove(&id);
            tracing::info!(group = %group, member = %id, "share member removed: session timeout");
            fx.metric(CoordinatorCounter::ShareMembersExpired, 1);
            touched.insert(group.clone());
            out.push((group, id));
        }
        for group in touched {
            if let Some(g) = groups.share_mut(&group) {
                g.bump_and_assign(env, fx);
            }
        }
        out
    }

    /// The topics or their partition counts changed: every share group whose
    /// subscribed topics' metadata changed gets a new epoch and target (its assignor
    /// fallbacks and failures counted in `fx`).
    pub(crate) fn topics_changed(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
    ) {
        for g in groups.shares_mut() {
            if g.compute_metadata(env.topics) != g.metadata {
                g.bump_and_assign(env, fx);
            }
        }
    }

    /// The result of assignor call `call` of share group `group` arrived: installed as
    /// its target (or `simple`'s, when it failed), or dropped when the group no longer
    /// waits for it. A fallback to `simple` is counted in `fx`.
    pub(crate) fn assignor_done(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        group: &GroupId,
        call: u64,
        result: Result<Assignment, PluginError>,
    ) {
        let taken = groups
            .share_mut(group)
            .is_some_and(|g| g.assignor_done(env, fx, call, result));
        if !taken {
            tracing::debug!(%group, call, "share assignor result no longer awaited");
        }
    }

    /// DeleteGroups of share group `group`: NON_EMPTY_GROUP while it has members.
    pub(crate) fn delete(&mut self, groups: &mut Groups, group: &str) -> Result<(), ResponseError> {
        let g = groups.share(group).ok_or(ResponseError::GroupIdNotFound)?;
        if !g.is_empty() {
            return Err(ResponseError::NonEmptyGroup);
        }
        groups.remove(group);
        Ok(())
    }
}

/// Kafka's `throwIfShareGroupMemberEpochIsInvalid`: a newer epoch than the member's,
/// or an older one that is not its previous epoch, is FENCED_MEMBER_EPOCH. Epoch 0
/// rejoins.
fn check_epoch(m: &ShareMember, received: i32) -> Result<(), Failure> {
    if received == JOIN_EPOCH {
        return Ok(());
    }
    if received > m.epoch || (received < m.epoch && received != m.previous_epoch) {
        return Err(failure(
            ResponseError::FencedMemberEpoch,
            format!(
                "The share group member has a member epoch ({received}) which is not the coordinator's ({}); it must rejoin.",
                m.epoch
            ),
        ));
    }
    Ok(())
}

impl ShareGroup {
    /// What ShareGroupDescribe shows of the group.
    pub(crate) fn described(&self) -> (&'static str, i32, i32, &str) {
        (
            self.state_name(),
            self.epoch,
            self.assignment_epoch,
            self.assignor(),
        )
    }
}
