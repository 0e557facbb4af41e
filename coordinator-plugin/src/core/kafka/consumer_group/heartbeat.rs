//! ConsumerGroupHeartbeat: a join, heartbeat or leave of one member, from the request's
//! checks to the answer: finding (or creating, or replacing) the member, bumping the
//! group epoch when what the assignment depends on changed, and reconciling the
//! member, and keeping the member's entry in the coordinator's timer table at its
//! deadline (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_protocol::RebalanceRecord;
use kafka_protocol::ResponseError;

use super::group::ConsumerGroup;
use super::member::{schedule, unschedule, Member, MemberState};
use super::target::resolve_assignor;
use super::validate::validate;
use super::{
    failure, ConsumerGroups, Env, Failure, HeartbeatRequest, HeartbeatResponse, JOIN_EPOCH,
    LEAVE_EPOCH, MAX_ERROR_MESSAGE_BYTES, STATIC_LEAVE_EPOCH,
};
use crate::core::groups::{Group, Groups};
use crate::core::result::Effects;
use crate::subscription::compile_pattern;
use crate::types::TopicName;
use regex::Regex;

/// How a heartbeat found its member.
enum Found {
    /// An existing member with this id.
    Existing(String),
    /// A new member with this id.
    New(String),
    /// A static member joining with a new member id takes over from the one that left
    /// with epoch −2.
    Replace { old: String, new: String },
}

impl ConsumerGroups {
    /// Handles a ConsumerGroupHeartbeat: join, heartbeat, leave. The member's entry
    /// in the timer table ([`TimerKey::ConsumerMember`](crate::core::TimerKey::ConsumerMember)) is set to its new deadline,
    /// or cancelled when it left, as effects in `fx`.
    pub(crate) fn heartbeat(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        req: HeartbeatRequest,
    ) -> HeartbeatResponse {
        let existed = groups.consumer(&req.group).is_some();
        let interval = i32::try_from(env.heartbeat_interval_ms).unwrap_or(i32::MAX);
        match self.try_heartbeat(groups, env, fx, &req) {
            Ok(mut response) => {
                if response.heartbeat_interval_ms == 0 {
                    response.heartbeat_interval_ms = interval;
                }
                response
            }
            Err((code, message)) => {
                if !existed && groups.consumer(&req.group).is_some_and(|g| g.is_empty()) {
                    groups.remove(&req.group);
                }
                tracing::debug!(group = %req.group, member = %req.member_id, error = %code, reason = %message, "heartbeat refused");
                HeartbeatResponse {
                    error: Some((code, message)),
                    member_id: req.member_id,
                    member_epoch: 0,
                    heartbeat_interval_ms: interval,
                    assignment: None,
                }
            }
        }
    }

    /// A heartbeat's steps: parse the request, find (or make) the group and the member,
    /// create or update the member (bumping the group epoch when needed), reconcile it
    /// and answer.
    fn try_heartbeat(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        fx: &mut Effects<'_>,
        req: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, Failure> {
        validate(req)?;
        let regex = parse_regex(req)?;
        // A name that is not loaded is kept, not refused (Kafka answers
        // UNSUPPORTED_ASSIGNOR, a fatal error in librdkafka): the group runs the default
        // assignor until a rescan loads it (`run_assignor`).
        let assignor = req
            .server_assignor
            .as_ref()
            .map(|name| resolve_assignor(env, name).unwrap_or_else(|| name.clone()));
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return leave(groups, env, fx, req);
        }
        let member_id = self.group_and_member_id(groups, env, req)?;
        let g = groups.consumer_mut(&req.group).expect("inserted above");
        let found = find_member(g, env, req, member_id)?;
        let (id, bump) = place_member(g, env, fx, req, found);
        update_member(g, env, req, &id, assignor, regex, bump);
        Ok(reconcile_and_answer(g, env, fx, req, id))
    }

    /// The group of a join, heartbeat (UNKNOWN_MEMBER_ID when there is none and the
    /// request is not a join; a join creates it) and the member id: the request's, or
    /// for a v0 join without one a new one the coordinator names.
    ///
    /// A heartbeat above epoch 0 for a group this coordinator does not have is what
    /// its members send after a fail-over: Kafka's new coordinator reloads the group's
    /// membership from `__consumer_offsets`, Drover keeps membership in memory only, so
    /// after the group's slot moved (cluster mode) or its coordinator restarted the
    /// group is gone. UNKNOWN_MEMBER_ID makes the members rejoin at epoch 0, which
    /// recreates the group; GROUP_ID_NOT_FOUND is fatal to a librdkafka consumer (as
    /// for share groups, `share_group::group_unknown_here`).
    fn group_and_member_id(
        &mut self,
        groups: &mut Groups,
        env: &Env<'_>,
        req: &HeartbeatRequest,
    ) -> Result<String, Failure> {
        if groups.consumer(&req.group).is_none() {
            if req.member_epoch != JOIN_EPOCH {
                return Err(failure(
                    ResponseError::UnknownMemberId,
                    format!(
                        "Consumer group {} not found: member {} must rejoin.",
                        req.group, req.member_id
                    ),
                ));
            }
            let default = resolve_assignor(env, env.default_assignor)
                .unwrap_or_else(|| env.default_assignor.to_owned());
            // The caller made the id free for a KIP-848 group
            // (`Coordinator::take_group_id`).
            groups.insert(
                req.group.clone(),
                Group::Consumer(ConsumerGroup::new(req.group.clone(), default)),
            );
        }
        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            // A v0 join (validated above): the coordinator names the member.
            let g = groups.consumer(&req.group).expect("inserted above");
            loop {
                self.generated += 1;
                let candidate = format!("drover-member-{}", self.generated);
                if !g.members.contains_key(&candidate) {
                    member_id = candidate;
                    break;
                }
            }
        }
        Ok(member_id)
    }
}

/// `SubscribedTopicRegex`, parsed: `None` when not sent, `Some(None)` when sent empty
/// (the member drops its regex), else the pattern and its compiled form
/// (INVALID_REGULAR_EXPRESSION when it does not compile).
fn parse_regex(req: &HeartbeatRequest) -> Result<Option<Option<(String, Regex)>>, Failure> {
    Ok(match req.subscribed_topic_regex.as_deref() {
        None => None,
        Some("") => Some(None),
        Some(pattern) => match compile_pattern(pattern) {
            Ok(r) => Some(Some((pattern.to_owned(), r))),
            Err(e) => {
                // The pattern and the parser's report both quote the input: bound the
                // answer (a client may send a pattern of any length).
                let mut message = format!(
                    "SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}"
                );
                if message.len() > MAX_ERROR_MESSAGE_BYTES {
                    let mut cut = MAX_ERROR_MESSAGE_BYTES;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    message.truncate(cut);
                    message.push('…');
                }
                return Err(failure(ResponseError::InvalidRegularExpression, message));
            }
        },
    })
}

/// The member a join or heartbeat is for, checked against the group's members and
/// static instances (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
/// FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED for a new member of a full group).
fn find_member(
    g: &ConsumerGroup,
    env: &Env<'_>,
    req: &HeartbeatRequest,
    member_id: String,
) -> Result<Found, Failure> {
    let owned = req.owned_partitions.as_ref();
    let found = match &req.instance_id {
        None => match g.members.get(&member_id) {
            Some(m) => {
                ConsumerGroup::check_epoch(m, req.member_epoch, owned)?;
                Found::Existing(member_id)
            }
            None if req.member_epoch == JOIN_EPOCH => Found::New(member_id),
            None => {
                return Err(failure(
                    ResponseError::UnknownMemberId,
                    format!("Member {member_id} is not a member of group {}.", g.id),
                ))
            }
        },
        Some(instance) => match g.statics.get(instance).and_then(|id| g.members.get(id)) {
            None if req.member_epoch == JOIN_EPOCH => {
                if g.members.contains_key(&member_id) {
                    Found::Existing(member_id)
                } else {
                    Found::New(member_id)
                }
            }
            None => {
                return Err(failure(
                    ResponseError::UnknownMemberId,
                    format!("Instance id {instance} is unknown."),
                ))
            }
            Some(old) if req.member_epoch == JOIN_EPOCH => {
                if old.epoch == STATIC_LEAVE_EPOCH {
                    if old.id != member_id && g.members.contains_key(&member_id) {
                        return Err(failure(
                            ResponseError::InvalidRequest,
                            format!("Member id {member_id} is used by another member."),
                        ));
                    }
                    Found::Replace {
                        old: old.id.clone(),
                        new: member_id,
                    }
                } else if old.id == member_id {
                    Found::Existing(member_id)
                } else {
                    return Err(failure(
                        ResponseError::UnreleasedInstanceId,
                        format!(
                            "Static member {member_id} with instance id {instance} cannot join the group because the instance id is owned by member {}.",
                            old.id
                        ),
                    ));
                }
            }
            Some(old) => {
                if old.id != member_id {
                    return Err(failure(
                        ResponseError::FencedInstanceId,
                        format!(
                            "Static member {member_id} with instance id {instance} was fenced by member {}.",
                            old.id
                        ),
                    ));
                }
                ConsumerGroup::check_epoch(old, req.member_epoch, owned)?;
                Found::Existing(member_id)
            }
        },
    };
    if let Found::New(_) = &found {
        if g.members.len() >= env.max_group_size {
            return Err(failure(
                ResponseError::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    env.max_group_size
                ),
            ));
        }
    }
    Ok(found)
}

/// Creates, replaces (a static member's new incarnation) or keeps the member found;
/// returns its id and whether the group epoch must be bumped (a new member, or a group
/// at epoch 0).
fn place_member(
    g: &mut ConsumerGroup,
    env: &Env<'_>,
    fx: &mut Effects<'_>,
    req: &HeartbeatRequest,
    found: Found,
) -> (String, bool) {
    let mut bump = g.epoch == 0;
    let id = match found {
        Found::Existing(id) => id,
        Found::New(id) => {
            tracing::info!(group = %g.id, member = %id, instance = ?req.instance_id, "member joins");
            g.members
                .insert(id.clone(), Member::new(id.clone(), env.now));
            bump = true;
            id
        }
        Found::Replace { old, new } => {
            let mut m = g.members.remove(&old).expect("found above");
            unschedule(fx, &g.id, &old);
            tracing::info!(group = %g.id, old = %old, new = %new, instance = ?req.instance_id, "static member rejoins and replaces its previous incarnation");
            for tp in m.assigned.iter().chain(&m.pending_revocation) {
                g.owners.insert(tp.clone(), new.clone());
            }
            if let Some(target) = g.target.remove(&old) {
                g.target.insert(new.clone(), target);
            }
            if let Some(instance) = &m.instance_id {
                g.statics.insert(instance.clone(), new.clone());
            }
            // The new incarnation resumes at the epoch the old one left at (never
            // 0: told epoch 0 while revoking, a client would "rejoin" owning
            // nothing and have the partitions it still consumes released).
            m.id = new.clone();
            m.epoch = m.previous_epoch.max(1);
            m.previous_epoch = m.epoch;
            g.members.insert(new.clone(), m);
            new
        }
    };
    (id, bump)
}

/// Updates member `id` from the request (instance id, rack, client, rebalance timeout,
/// assignor, subscription) and bumps the group epoch if what the assignment depends on
/// changed (`bump` already asks for it); then computes the target at a new epoch, or
/// retries a failed assignor.
fn update_member(
    g: &mut ConsumerGroup,
    env: &Env<'_>,
    req: &HeartbeatRequest,
    id: &str,
    assignor: Option<String>,
    regex: Option<Option<(String, Regex)>>,
    mut bump: bool,
) {
    // A join (or the group's first member) is what `bump` asks for on entry; anything
    // else bumping below is the member's subscription (topics, regex, assignor, rack).
    let cause = if bump {
        RebalanceRecord::JOIN
    } else {
        RebalanceRecord::SUBSCRIPTION_CHANGE
    };
    let m = g.members.get_mut(id).expect("present");
    if let Some(instance) = &req.instance_id {
        if m.instance_id.as_ref() != Some(instance) {
            if let Some(previous) = m.instance_id.take() {
                g.statics.remove(&previous);
            }
            m.instance_id = Some(instance.clone());
            g.statics.insert(instance.clone(), id.to_owned());
        }
    }
    if req.rack_id.is_some() && m.rack_id != req.rack_id {
        // Assignors see racks: a changed rack is a new group epoch (Kafka's
        // `hasMemberSubscriptionChanged` compares the rack too).
        bump = true;
        m.rack_id = req.rack_id.clone();
    }
    // Kept only when they change: a steady heartbeat copies no string.
    if m.client_id != req.client_id {
        m.client_id.clone_from(&req.client_id);
    }
    if m.client_host != req.client_host {
        m.client_host.clone_from(&req.client_host);
    }
    if req.rebalance_timeout_ms >= 0 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms as u64;
    }
    if let Some(a) = assignor {
        if m.server_assignor.as_ref() != Some(&a) {
            m.server_assignor = Some(a);
            bump = true;
        }
    }
    let mut subscription_changed = false;
    if let Some(names) = &req.subscribed_topic_names {
        let names: BTreeSet<TopicName> = names.iter().cloned().collect();
        if names != m.names {
            m.names = names;
            subscription_changed = true;
        }
    }
    if let Some(regex) = regex {
        if regex.as_ref().map(|r| &r.0) != m.regex.as_ref().map(|r| &r.0) {
            m.regex = regex;
            subscription_changed = true;
        }
    }
    // The topic scope of the connection it heartbeats on (`core::topic_scope`): a
    // new one re-resolves its regex, and is a subscription change if its topics move.
    if env.conn.is_some() {
        m.conn = env.conn;
    }
    let mut rescoped = false;
    if let Some(scope) = &env.scope {
        if !m.scope.as_ref().is_some_and(|s| Arc::ptr_eq(s, scope)) {
            m.scope = Some(Arc::clone(scope));
            rescoped = m.regex.is_some();
        }
    }
    // Whether the member's topics only grew (a join, a wider subscription): the
    // group's metadata then only gains its new topics, without a pass over every
    // member (which made forming a group quadratic in its size).
    let mut grew_only = true;
    if subscription_changed || rescoped {
        let topics = m.resolve(env.topics, &mut BTreeMap::new());
        grew_only = m.topics.is_subset(&topics);
        subscription_changed |= topics != m.topics;
        m.topics = topics;
    }
    if bump || subscription_changed {
        if grew_only {
            for t in &m.topics {
                if let Some(&count) = env.topics.get(t) {
                    g.metadata.insert(t.clone(), count);
                }
            }
        } else {
            g.metadata = g.compute_metadata(env.topics);
        }
        bump = true;
    }
    if bump {
        g.bump_epoch(cause, env.now);
        tracing::debug!(group = %g.id, epoch = g.epoch, "group epoch bumped");
    }
    if g.epoch > g.assignment_epoch {
        g.compute_target_when_due(env);
    } else {
        g.maybe_retry(env);
    }
}

/// Reconciles member `id` towards its target, moves its session deadline (in `fx`)
/// and answers: the assignment when it changed, and on a join or a full heartbeat.
fn reconcile_and_answer(
    g: &mut ConsumerGroup,
    env: &Env<'_>,
    fx: &mut Effects<'_>,
    req: &HeartbeatRequest,
    id: String,
) -> HeartbeatResponse {
    let owned = req.owned_partitions.as_ref();
    // Reconcile and answer.
    let changed = g.reconcile(&id, owned, env.now);
    g.note_reconciled(env.now);
    let m = g.members.get_mut(&id).expect("present");
    m.session_deadline = env.now.saturating_add(u64::from(env.session_timeout_ms));
    schedule(fx, &g.id, m);
    let full = req.member_epoch == JOIN_EPOCH
        || (req.rebalance_timeout_ms != -1
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
            && owned.is_some());
    // What the member must still do: take what it was just given, or catch up with
    // an assignment it reports not to hold (a rejoin, a lost answer).
    let behind = changed || owned.is_some_and(|o| *o != m.assigned);
    let interval = if !reconciling(m, behind) && env.now >= g.settling_until {
        u64::from(env.heartbeat_interval_ms)
    } else if !reconciling(m, behind) {
        // Reconciled, but the target changed moments ago: more members may be joining
        // (a rollout), and a member told the normal interval now would learn of their
        // target only that much later (`consumer_rebalance_settle_ms`).
        u64::from(env.reconcile_heartbeat_interval_ms)
    } else if m.state == MemberState::UnreleasedPartitions && !behind {
        waiting_interval(g, env, &id)
    } else {
        u64::from(env.reconcile_heartbeat_interval_ms)
    };
    // A target not computed yet (the assignment interval): back when it is due.
    let interval = match g.target_due(env) {
        Some(due) => interval.min(due.saturating_sub(env.now).max(1)),
        // The assignor runs on a host thread: a member that holds nothing yet comes
        // back soon for its share (the others learn of the new target at their usual
        // interval, as of any target change, so the heartbeat budget holds).
        None if g.assigning.is_some()
            && g.members.get(&id).is_some_and(|m| m.assigned.is_empty()) =>
        {
            interval.min(u64::from(env.reconcile_heartbeat_interval_ms).max(1))
        }
        None => interval,
    };
    let m = g.members.get_mut(&id).expect("present");
    m.next_heartbeat = env.now.saturating_add(interval);
    HeartbeatResponse {
        error: None,
        member_id: id,
        member_epoch: m.epoch,
        heartbeat_interval_ms: i32::try_from(interval).unwrap_or(i32::MAX),
        assignment: (full || changed).then(|| m.assigned.clone()),
    }
}

/// The interval (ms) for member `id`, which only waits for partitions other members
/// still hold (`unreleased_partitions`, nothing new in this answer): until the
/// earliest of those holders' next expected heartbeat — when it learns to revoke, or
/// acknowledges a revocation —, plus a quarter of the reconciliation interval for it
/// to acknowledge (clients acknowledge a revocation as soon as their callback
/// returns, so a whole interval there made every scale-out one interval slower; a
/// waiter that comes too early is told the same rule again), at least that quarter
/// and at most [`WAITING_INTERVALS`] reconciliation intervals (and never above
/// `consumer_heartbeat_interval_ms`). A
/// stable holder was told the normal interval, so a member joining a stable group
/// comes back about when the partitions can be released, not every reconciliation
/// interval with nothing to take; the cap is there because a holder may come earlier
/// than expected (clients heartbeat at once to acknowledge an assignment, or after a
/// callback), and a waiter asleep for a whole normal interval would then hold up the
/// rebalance by that much. Drover's rule: KIP-848 lets the coordinator pick the
/// interval per answer; Kafka always answers with the normal one.
/// The longest a member waiting for partitions others hold is told to stay away, in
/// reconciliation intervals (5 × 200 ms by default: one heartbeat a second while it
/// waits, against five at the reconciliation interval).
const WAITING_INTERVALS: u64 = 5;

fn waiting_interval(g: &ConsumerGroup, env: &Env<'_>, id: &str) -> u64 {
    let short = u64::from(env.reconcile_heartbeat_interval_ms);
    let margin = (short / 4).max(1);
    let normal = u64::from(env.heartbeat_interval_ms)
        .min(short.saturating_mul(WAITING_INTERVALS))
        .max(short);
    let Some(target) = g.target.get(id) else {
        return short;
    };
    let earliest = target
        .iter()
        .filter_map(|tp| g.owners.get(tp))
        .filter(|holder| holder.as_str() != id)
        .filter_map(|holder| g.members.get(holder))
        .map(|holder| holder.next_heartbeat)
        .min();
    match earliest {
        Some(at) => at
            .saturating_sub(env.now)
            .saturating_add(margin)
            .clamp(margin, normal),
        None => short,
    }
}

/// Whether member `m`, just reconciled, is still on its way to its target, so that
/// its answer carries the short reconciliation interval
/// (`consumer_reconcile_heartbeat_interval_ms`) instead of
/// `consumer_heartbeat_interval_ms`: it has partitions to revoke
/// (`unrevoked_partitions`) or waits for partitions others still hold
/// (`unreleased_partitions`), or it is `behind`: this answer changes its assignment
/// (the group's target changed since its last heartbeat and this is its first step
/// towards it: its next heartbeat acknowledges it and may find the next step), or the
/// partitions it reports owning are not its assignment (a rejoin). A member stable
/// at the target and holding it goes back to the normal interval, also when the
/// target changed for others only (its epoch moves, nothing else). Kafka always
/// answers with `group.consumer.heartbeat.interval.ms`; KIP-848 lets the coordinator
/// pick the interval per answer, and clients follow it (librdkafka adopts every
/// positive `HeartbeatIntervalMs` it receives).
///
/// A member that only waits for partitions others hold gets an interval matching the
/// holders' next expected heartbeat instead ([`waiting_interval`]).
fn reconciling(m: &Member, behind: bool) -> bool {
    m.state != MemberState::Stable || behind
}

/// Epoch −1 (leave) and −2 (static member leaving temporarily).
fn leave(
    groups: &mut Groups,
    env: &Env<'_>,
    fx: &mut Effects<'_>,
    req: &HeartbeatRequest,
) -> Result<HeartbeatResponse, Failure> {
    let Some(g) = groups.consumer_mut(&req.group) else {
        return Err(failure(
            ResponseError::GroupIdNotFound,
            format!("Consumer group {} not found.", req.group),
        ));
    };
    let id = match &req.instance_id {
        None => {
            if !g.members.contains_key(&req.member_id) {
                return Err(failure(
                    ResponseError::UnknownMemberId,
                    format!(
                        "Member {} is not a member of group {}.",
                        req.member_id, g.id
                    ),
                ));
            }
            req.member_id.clone()
        }
        Some(instance) => {
            let Some(current) = g.statics.get(instance) else {
                return Err(failure(
                    ResponseError::UnknownMemberId,
                    format!("Instance id {instance} is unknown."),
                ));
            };
            if *current != req.member_id {
                return Err(failure(
                    ResponseError::FencedInstanceId,
                    format!(
                        "Static member {} with instance id {instance} was fenced by member {current}.",
                        req.member_id
                    ),
                ));
            }
            current.clone()
        }
    };
    if req.member_epoch == STATIC_LEAVE_EPOCH {
        // The member keeps its place and assignment (no epoch bump) until its
        // session expires; what it was revoking is released (it stopped).
        let m = g.members.get_mut(&id).expect("checked");
        tracing::info!(group = %g.id, member = %id, instance = ?m.instance_id, "static member leaves temporarily");
        for tp in std::mem::take(&mut m.pending_revocation) {
            if g.owners.get(&tp).is_some_and(|o| *o == id) {
                g.owners.remove(&tp);
            }
        }
        if m.epoch != STATIC_LEAVE_EPOCH {
            m.previous_epoch = m.epoch;
            m.epoch = STATIC_LEAVE_EPOCH;
        }
        m.rebalance_deadline = None;
        m.session_deadline = env.now.saturating_add(u64::from(env.session_timeout_ms));
        schedule(fx, &g.id, m);
    } else {
        tracing::info!(group = %g.id, member = %id, "member leaves");
        if g.remove(&id, env.topics, RebalanceRecord::LEAVE, env.now)
            .is_some()
        {
            unschedule(fx, &g.id, &id);
        }
        g.compute_target_when_due(env);
        g.note_reconciled(env.now);
    }
    Ok(HeartbeatResponse {
        error: None,
        member_id: id,
        member_epoch: req.member_epoch,
        heartbeat_interval_ms: 0,
        assignment: None,
    })
}
