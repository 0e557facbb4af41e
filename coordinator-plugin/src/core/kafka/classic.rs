//! A classic Kafka consumer group: the JoinGroup / SyncGroup / Heartbeat / LeaveGroup
//! state machine of Kafka's group coordinator (Kafka protocol guide, "The consumer
//! group protocol"; KIP-394 member ids; KIP-345 static membership; the initial
//! rebalance delay of `group.initial.rebalance.delay.ms`).
//!
//! States: `Empty` → `PreparingRebalance` (members rejoin; the join phase ends when all
//! known members have rejoined or the rebalance timeout passes) → `CompletingRebalance`
//! (the leader computes the assignment with the client-side assignor and sends it with
//! SyncGroup) → `Stable`. A member that stops heartbeating for its session timeout is
//! removed and the group rebalances.
//!
//! A pure state machine, in the style of the KIP-848 engine (`consumer_group`): it works
//! on domain values, reads no clock and does no I/O. Each call reads a [`ClassicEnv`]
//! (the time in ms, the limits) and records its decisions as the effects of the one
//! result shape of every group type (`core/result.rs`): the [`ClassicReply`]s it
//! decided, each with the [`Pending`] handle of the request it answers (a JoinGroup or
//! SyncGroup answer is often deferred until the join or sync phase ends, so a call may
//! answer other members' requests too), its [`ClassicTimer`] deadlines set and
//! cancelled, and its counters. The wire glue (`classic_api`) decodes the requests,
//! calls the group and hands its result to the one applier (`Ctx::apply`), which sends
//! the answers in order.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use crate::core::commits::{CommitApi, CommitAuthor};
use crate::core::conn::SlotRef;
use crate::core::native::debounce_ms;
use crate::core::result::{Effect, Effects};
use crate::core::TimerKey;
use crate::io::CoordinatorCounter;
use crate::kafka_wire::KafkaReplyTo;
use crate::types::GroupId;

/// Where a deferred answer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    pub slot: SlotRef,
    pub to: KafkaReplyTo,
}

/// The state of a classic group (the names DescribeGroups reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClassicState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl ClassicState {
    /// Kafka's name of the state.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
        }
    }
}

/// A classic group's deadlines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ClassicTimer {
    /// End of the join phase (initial delay or rebalance timeout).
    Join,
    /// End of the sync phase: members that have not sent SyncGroup are removed.
    Sync,
    /// A member's session deadline.
    Session(String),
    /// A KIP-394 member id handed out but not yet used to join.
    PendingJoin(String),
}

/// A member as its JoinGroup described it.
#[derive(Debug, Clone)]
pub(crate) struct ClassicMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// The assignment from the last SyncGroup of the leader.
    pub assignment: Bytes,
    awaiting_join: Option<Pending>,
    awaiting_sync: Option<Pending>,
}

impl ClassicMember {
    /// The metadata of protocol `name`, if the member supports it.
    pub(crate) fn metadata(&self, name: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| m)
    }
}

/// What a JoinGroup asks, after the wire checks.
#[derive(Debug, Clone)]
pub(crate) struct JoinParams {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394 (JoinGroup v4+): a dynamic member without an id gets one with
    /// MEMBER_ID_REQUIRED and joins again with it.
    pub require_known_member_id: bool,
}

/// An answer of the group, in domain form.
#[derive(Debug, Clone)]
pub(crate) enum ClassicReply {
    Join(JoinResult),
    Sync {
        /// `None` on success.
        error: Option<ResponseError>,
        protocol_type: Option<String>,
        protocol_name: Option<String>,
        assignment: Bytes,
    },
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, Default)]
pub(crate) struct JoinResult {
    /// `None` on success.
    pub error: Option<ResponseError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// The leader gets (member id, instance id, metadata) of every member.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// v9+: the leader of a group that stays stable does not assign again.
    pub skip_assignment: bool,
}

impl ClassicReply {
    /// A SyncGroup answer with `error` and no assignment.
    pub(crate) fn sync_error(error: ResponseError) -> ClassicReply {
        ClassicReply::Sync {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

impl JoinResult {
    pub(crate) fn error(error: ResponseError, member_id: &str) -> JoinResult {
        JoinResult {
            error: Some(error),
            generation: -1,
            member_id: member_id.to_owned(),
            ..JoinResult::default()
        }
    }
}

/// The configuration a classic group needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClassicLimits {
    /// Kafka's `group.initial.rebalance.delay.ms`, ms.
    pub initial_rebalance_delay_ms: u64,
    /// `initial_rebalance_quiet_ms`: no JoinGroup for this long ends the initial
    /// delay, ms.
    pub initial_rebalance_quiet_ms: u64,
    pub max_group_size: usize,
}

/// The initial delay of a rebalance that starts from an empty group, which collects
/// the members that come (Kafka's `InitialDelayedJoin`, `group.initial.rebalance.delay.ms`):
/// it runs for the delay and, when new members joined meanwhile, for another delay,
/// and so on, up to the group's rebalance timeout in all (Kafka's upper bound); and it
/// ends early once no JoinGroup came for a quiet window (Drover's rule: the delay is
/// there to collect joiners, not to wait when none come). The window is the native
/// debounce's stream rule (docs/protocol.md §6.4, [`debounce_ms`]) applied to new
/// members: from the second new member on, twice the spacing of the latest two, at
/// least `initial_rebalance_quiet_ms` and at most `initial_rebalance_delay_ms`, so
/// members started at a steady pace (0.45 s, 1 s apart) join one generation. Before a
/// second member there is no spacing to go by: a lone first member waits the delay, as
/// on Kafka (ending it after the quiet time gave the first member every partition and
/// an eager rebalance for the next joiner, seconds later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InitialDelay {
    /// When the current period ends (ms).
    until: u64,
    /// The latest end of the whole delay (ms): its start plus the larger of the delay
    /// and the members' largest rebalance timeout.
    cap: u64,
    /// Whether a new member joined during the current period (Kafka's
    /// `newMemberAdded`): the period then extends when it ends.
    new_members: bool,
    /// When the latest JoinGroup came (ms).
    last_join: u64,
    /// When the latest new member was added (ms).
    last_new: u64,
    /// The spacing of the latest two new members (ms); `None` until a second one.
    spacing: Option<u64>,
}

impl InitialDelay {
    /// A new member was added at `now`: its spacing from the previous one.
    fn new_member(&mut self, now: u64) {
        self.new_members = true;
        self.spacing = Some(now.saturating_sub(self.last_new));
        self.last_new = now;
    }

    /// How long without a JoinGroup ends the delay (ms): `None` before a second new
    /// member, else [`debounce_ms`] of the quiet time, capped by the delay, for the
    /// spacing of the latest two.
    fn quiet_window(&self, limits: &ClassicLimits) -> Option<u64> {
        self.spacing.map(|gap| {
            debounce_ms(
                limits.initial_rebalance_quiet_ms,
                limits.initial_rebalance_delay_ms,
                Some(gap),
            )
        })
    }

    /// When the join timer must next look at the delay: the end of the period or of
    /// the quiet window, whichever is first.
    fn wake(&self, limits: &ClassicLimits) -> u64 {
        match self.quiet_window(limits) {
            Some(w) => self.until.min(self.last_join.saturating_add(w)),
            None => self.until,
        }
    }
}

/// One classic group.
#[derive(Debug)]
pub(crate) struct ClassicGroup {
    pub id: GroupId,
    pub state: ClassicState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, ClassicMember>,
    /// Static members: group.instance.id → member id.
    pub instances: BTreeMap<String, String>,
    /// KIP-394 member ids handed out and not yet joined, with their session timeout.
    pending_members: BTreeMap<String, i32>,
    /// The initial delay of an empty group's rebalance, while it runs.
    initial_delay: Option<InitialDelay>,
    next_member: u64,
    /// Its recent rebalances (DescribeRebalances).
    pub history: crate::core::rebalance_history::RebalanceHistory,
}

/// What a classic group reads: the time and its limits. Its deadlines are
/// [`TimerKey::Classic`] entries of the coordinator's one timer table, which it sets
/// and cancels through its result's effects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClassicEnv {
    /// Now, in ms of the coordinator's monotonic clock.
    pub now: u64,
    /// The configuration.
    pub limits: ClassicLimits,
}

/// A classic group's answers, recorded as effects of its result.
impl Effects<'_> {
    fn reply(&mut self, to: Pending, reply: ClassicReply) {
        self.push(Effect::ClassicReply(to, reply));
    }

    /// A SyncGroup answer with `error` and no assignment.
    fn sync_error(&mut self, to: Pending, error: ResponseError) {
        self.reply(to, ClassicReply::sync_error(error));
    }
}

impl ClassicGroup {
    pub(crate) fn new(id: GroupId) -> ClassicGroup {
        ClassicGroup {
            id,
            state: ClassicState::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            instances: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            initial_delay: None,
            next_member: 0,
            history: Default::default(),
        }
    }

    fn timer(&self, t: ClassicTimer) -> TimerKey {
        TimerKey::Classic(self.id.clone(), t)
    }

    fn new_member_id(&mut self, now: u64, prefix: &str) -> String {
        self.next_member += 1;
        // Unique for the broker's lifetime: the coordinator's clock and a counter.
        format!("{prefix}-{:x}-{:x}", now, self.next_member)
    }

    /// Whether `member_id` / `instance_id` name a current member: `Err` with
    /// FENCED_INSTANCE_ID when the instance belongs to another member id, else
    /// UNKNOWN_MEMBER_ID when unknown.
    pub(crate) fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = instance_id {
            if let Some(owner) = self.instances.get(instance) {
                if owner != member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        }
    }

    /// The group-level check of an OffsetCommit (Kafka's
    /// `ClassicGroup.validateOffsetCommit`): a simple commit (negative generation) while
    /// the group is empty; otherwise a current member (UNKNOWN_MEMBER_ID,
    /// FENCED_INSTANCE_ID) of the current generation (ILLEGAL_GENERATION), and not while
    /// the group waits for its leader's assignment (REBALANCE_IN_PROGRESS). By the native
    /// CommitOffset only a simple commit (a native client is never a member of a Kafka
    /// group; UNKNOWN_MEMBER_ID).
    pub(crate) fn validate_offset_commit(
        &self,
        author: &CommitAuthor,
    ) -> Result<(), ResponseError> {
        if author.api == CommitApi::Native && !author.is_simple() {
            return Err(ResponseError::UnknownMemberId);
        }
        let (member_id, instance_id, generation) =
            (author.member_id, author.instance_id, author.generation);
        if generation < 0 && self.members.is_empty() {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.check_member(member_id, instance_id)?;
            if generation != self.generation {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if !author.api.is_transactional() {
            // TxnOffsetCommit before v3 carries no member id or generation: Kafka lets
            // it through whatever the group's state.
            return Err(ResponseError::UnknownMemberId);
        }
        if self.state == ClassicState::CompletingRebalance && !author.api.is_transactional() {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// The protocols every member supports, in the first member's order.
    fn common_protocols(&self) -> Vec<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let mut common: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in members {
            common.retain(|n| m.metadata(n).is_some());
        }
        common
    }

    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let common = self.common_protocols();
        protocols.iter().any(|(n, _)| common.contains(n))
    }

    /// The topics the members subscribe to, from their `consumer` protocol metadata
    /// (Kafka's ConsumerProtocolSubscription: a version, then the subscription); `None`
    /// when some member's metadata does not parse or the protocol type is not
    /// `consumer`.
    pub(crate) fn subscribed_topics(&self) -> Option<std::collections::BTreeSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        let mut out = std::collections::BTreeSet::new();
        if self.members.is_empty() {
            return Some(out);
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        for m in self.members.values() {
            let (_, mut metadata) = m.protocols.first()?.clone();
            if metadata.len() < 2 {
                return None;
            }
            let version = i16::from_be_bytes([metadata[0], metadata[1]]);
            let _ = bytes::Buf::get_i16(&mut metadata);
            let sub =
                ConsumerProtocolSubscription::decode(&mut metadata, version.clamp(0, 3)).ok()?;
            out.extend(sub.topics.iter().map(|t| t.to_string()));
        }
        Some(out)
    }

    // ------------------------------------------------------------------ JoinGroup

    /// Handles a JoinGroup. The effects hold its answer when it is decided now (else
    /// the answer comes in the result of the call that ends the join phase: the last
    /// member's join, a timer, a leave), other members' answers it completes, timer
    /// changes and counters.
    pub(crate) fn join(
        &mut self,
        env: &ClassicEnv,
        fx: &mut Effects<'_>,
        p: JoinParams,
        pending: Pending,
    ) {
        if let Some(d) = &mut self.initial_delay {
            d.last_join = env.now;
        }
        self.join_into(env, p, pending, fx);
        if let Some(d) = self.initial_delay {
            let at = d.wake(&env.limits);
            fx.timer(self.timer(ClassicTimer::Join), Some(at));
        }
    }

    /// [`ClassicGroup::join`], adding to `fx`.
    fn join_into(
        &mut self,
        env: &ClassicEnv,
        p: JoinParams,
        pending: Pending,
        fx: &mut Effects<'_>,
    ) {
        if !self.supports(&p.protocol_type, &p.protocols) {
            let r = JoinResult::error(ResponseError::InconsistentGroupProtocol, &p.member_id);
            return fx.reply(pending, ClassicReply::Join(r));
        }
        if p.member_id.is_empty() {
            return self.join_new(env, p, pending, fx);
        }
        if let Some(session) = self.pending_members.remove(&p.member_id) {
            fx.timer(
                self.timer(ClassicTimer::PendingJoin(p.member_id.clone())),
                None,
            );
            let _ = session;
            return self.add_member(env, p, pending, fx);
        }
        if let Err(e) = self.check_member(&p.member_id, p.instance_id.as_deref()) {
            return fx.reply(
                pending,
                ClassicReply::Join(JoinResult::error(e, &p.member_id)),
            );
        }
        // A known member joins again.
        let changed = self.members[&p.member_id].protocols != p.protocols;
        let is_leader = self.leader.as_deref() == Some(p.member_id.as_str());
        if let Some(m) = self.members.get_mut(&p.member_id) {
            m.protocols = p.protocols;
            m.session_timeout_ms = p.session_timeout_ms;
            m.rebalance_timeout_ms = p.rebalance_timeout_ms;
            m.client_id = p.client_id;
            m.client_host = p.client_host;
        }
        match self.state {
            ClassicState::PreparingRebalance => {
                self.await_join(&p.member_id, pending, fx);
                self.try_complete_join(env, fx);
            }
            ClassicState::CompletingRebalance | ClassicState::Stable
                if !(changed || is_leader && self.state == ClassicState::Stable) =>
            {
                // Same metadata: the current generation stands (Kafka answers at once).
                let r = self.join_result(&p.member_id, false);
                fx.reply(pending, ClassicReply::Join(r));
            }
            _ => {
                self.await_join(&p.member_id, pending, fx);
                self.prepare_rebalance(env, "a member joined again", fx);
            }
        }
    }

    fn join_new(
        &mut self,
        env: &ClassicEnv,
        mut p: JoinParams,
        pending: Pending,
        fx: &mut Effects<'_>,
    ) {
        let prefix = p.instance_id.clone().unwrap_or_else(|| {
            if p.client_id.is_empty() {
                "member".into()
            } else {
                p.client_id.clone()
            }
        });
        let member_id = self.new_member_id(env.now, &prefix);
        if let Some(instance) = p.instance_id.clone() {
            if let Some(old) = self.instances.get(&instance).cloned() {
                return self.replace_static(env, old, member_id, p, pending, fx);
            }
            p.member_id = member_id;
            return self.add_member(env, p, pending, fx);
        }
        if p.require_known_member_id {
            if self.members.len() + self.pending_members.len() >= env.limits.max_group_size {
                let r = JoinResult::error(ResponseError::GroupMaxSizeReached, "");
                return fx.reply(pending, ClassicReply::Join(r));
            }
            self.pending_members
                .insert(member_id.clone(), p.session_timeout_ms);
            let at = env.now + p.session_timeout_ms.max(0) as u64;
            fx.timer(
                self.timer(ClassicTimer::PendingJoin(member_id.clone())),
                Some(at),
            );
            let r = JoinResult::error(ResponseError::MemberIdRequired, &member_id);
            return fx.reply(pending, ClassicReply::Join(r));
        }
        p.member_id = member_id;
        self.add_member(env, p, pending, fx);
    }

    /// KIP-345: a static member restarted with a new member id takes the old one's place
    /// and assignment; a stable group does not rebalance unless its protocols changed.
    #[allow(clippy::too_many_arguments)]
    fn replace_static(
        &mut self,
        env: &ClassicEnv,
        old_id: String,
        new_id: String,
        p: JoinParams,
        pending: Pending,
        fx: &mut Effects<'_>,
    ) {
        let Some(mut member) = self.members.remove(&old_id) else {
            self.instances
                .remove(p.instance_id.as_deref().unwrap_or_default());
            let mut p = p;
            p.member_id = new_id;
            return self.add_member(env, p, pending, fx);
        };
        fx.timer(self.timer(ClassicTimer::Session(old_id.clone())), None);
        // The old incarnation's outstanding answers: it is fenced.
        for old in [member.awaiting_join.take(), member.awaiting_sync.take()]
            .into_iter()
            .flatten()
        {
            let e = ResponseError::FencedInstanceId;
            let r = match old.to.key {
                kafka_protocol::messages::ApiKey::JoinGroup => {
                    ClassicReply::Join(JoinResult::error(e, &old_id))
                }
                _ => ClassicReply::sync_error(e),
            };
            fx.reply(old, r);
        }
        let changed = member.protocols != p.protocols;
        member.member_id = new_id.clone();
        member.protocols = p.protocols;
        member.session_timeout_ms = p.session_timeout_ms;
        member.rebalance_timeout_ms = p.rebalance_timeout_ms;
        member.client_id = p.client_id;
        member.client_host = p.client_host;
        self.members.insert(new_id.clone(), member);
        if let Some(instance) = &p.instance_id {
            self.instances.insert(instance.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        tracing::info!(group = %self.id, old = old_id, new = new_id, "static member rejoined");
        match self.state {
            ClassicState::Stable if !changed => {
                self.touch(env, fx, &new_id);
                let r = self.join_result(&new_id, true);
                fx.reply(pending, ClassicReply::Join(r));
            }
            ClassicState::PreparingRebalance => {
                self.await_join(&new_id, pending, fx);
                self.try_complete_join(env, fx);
            }
            _ => {
                self.await_join(&new_id, pending, fx);
                self.prepare_rebalance(env, "a static member joined with new metadata", fx);
            }
        }
    }

    fn add_member(
        &mut self,
        env: &ClassicEnv,
        p: JoinParams,
        pending: Pending,
        fx: &mut Effects<'_>,
    ) {
        if self.members.len() >= env.limits.max_group_size {
            let r = JoinResult::error(ResponseError::GroupMaxSizeReached, &p.member_id);
            return fx.reply(pending, ClassicReply::Join(r));
        }
        if self.members.is_empty() {
            self.protocol_type = Some(p.protocol_type.clone());
        }
        if let Some(instance) = &p.instance_id {
            self.instances.insert(instance.clone(), p.member_id.clone());
        }
        let id = p.member_id.clone();
        self.members.insert(
            id.clone(),
            ClassicMember {
                member_id: id.clone(),
                instance_id: p.instance_id,
                client_id: p.client_id,
                client_host: p.client_host,
                session_timeout_ms: p.session_timeout_ms,
                rebalance_timeout_ms: p.rebalance_timeout_ms,
                protocols: p.protocols,
                assignment: Bytes::new(),
                awaiting_join: None,
                awaiting_sync: None,
            },
        );
        tracing::debug!(group = %self.id, member = id, "member joined");
        self.await_join(&id, pending, fx);
        if let Some(d) = &mut self.initial_delay {
            d.new_member(env.now);
        }
        if self.state == ClassicState::PreparingRebalance {
            self.try_complete_join(env, fx);
        } else {
            self.prepare_rebalance(env, "a member joined", fx);
        }
    }

    /// Parks a member's JoinGroup answer until the join phase ends; no session deadline
    /// meanwhile (Kafka does not expire members waiting for their join answer).
    fn await_join(&mut self, member_id: &str, pending: Pending, fx: &mut Effects<'_>) {
        fx.timer(
            self.timer(ClassicTimer::Session(member_id.to_owned())),
            None,
        );
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if let Some(old) = m.awaiting_join.replace(pending) {
            let r = JoinResult::error(ResponseError::RebalanceInProgress, member_id);
            fx.reply(old, ClassicReply::Join(r));
        }
    }

    /// Starts (or restarts) the join phase.
    fn prepare_rebalance(&mut self, env: &ClassicEnv, why: &str, fx: &mut Effects<'_>) {
        if self.state == ClassicState::CompletingRebalance {
            // Members waiting for their assignment must join again.
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(p) = m.awaiting_sync.take() {
                    fx.sync_error(p, ResponseError::RebalanceInProgress);
                }
            }
            fx.timer(self.timer(ClassicTimer::Sync), None);
        }
        if self.state == ClassicState::PreparingRebalance {
            return self.try_complete_join(env, fx);
        }
        tracing::debug!(group = %self.id, generation = self.generation, why, "rebalance");
        fx.metric(CoordinatorCounter::ClassicRebalances, 1);
        self.history
            .classic_started(env.now, why, self.generation, self.members.len());
        let delay = env.limits.initial_rebalance_delay_ms;
        let at = if self.state == ClassicState::Empty && delay > 0 {
            let d = InitialDelay {
                until: env.now + delay,
                cap: env.now + delay.max(self.max_rebalance_timeout()),
                new_members: false,
                last_join: env.now,
                last_new: env.now,
                spacing: None,
            };
            self.initial_delay = Some(d);
            d.wake(&env.limits)
        } else {
            self.initial_delay = None;
            env.now + self.max_rebalance_timeout()
        };
        self.state = ClassicState::PreparingRebalance;
        fx.timer(self.timer(ClassicTimer::Join), Some(at));
        self.try_complete_join(env, fx);
    }

    fn max_rebalance_timeout(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as u64)
            .max()
            .unwrap_or(0)
    }

    /// Ends the join phase once every member has rejoined and no KIP-394 member id is
    /// outstanding (and the initial delay, if any, is over).
    fn try_complete_join(&mut self, env: &ClassicEnv, fx: &mut Effects<'_>) {
        if self.state != ClassicState::PreparingRebalance || self.initial_delay.is_some() {
            return;
        }
        let all = self.members.values().all(|m| m.awaiting_join.is_some());
        if all && self.pending_members.is_empty() {
            self.complete_join(env, fx);
        }
    }

    /// The join phase's deadline. During the initial delay: the delay ends after the
    /// quiet window without a JoinGroup ([`InitialDelay`]), at its cap, or at the end of a period in which
    /// no new member joined; else it extends by another period
    /// ([`InitialDelay`]). After the delay the ordinary wait starts; after the
    /// rebalance timeout, members that did not rejoin are removed.
    fn on_join_timer(&mut self, env: &ClassicEnv, fx: &mut Effects<'_>) {
        if self.state != ClassicState::PreparingRebalance {
            return;
        }
        if let Some(mut d) = self.initial_delay {
            let quiet = d.quiet_window(&env.limits);
            let ended = if quiet.is_some_and(|w| env.now >= d.last_join.saturating_add(w)) {
                Some("no JoinGroup for the quiet window")
            } else if env.now >= d.until && (!d.new_members || d.until >= d.cap) {
                Some("the delay is over")
            } else {
                if env.now >= d.until {
                    // Kafka's extension: new members came during this period.
                    d.until = (env.now + env.limits.initial_rebalance_delay_ms).min(d.cap);
                    d.new_members = false;
                }
                None
            };
            if let Some(why) = ended {
                tracing::debug!(group = %self.id, why, "initial rebalance delay ends");
                self.initial_delay = None;
                let at = env.now + self.max_rebalance_timeout();
                fx.timer(self.timer(ClassicTimer::Join), Some(at));
                return self.try_complete_join(env, fx);
            }
            self.initial_delay = Some(d);
            let at = d.wake(&env.limits);
            fx.timer(self.timer(ClassicTimer::Join), Some(at));
            return;
        }
        self.complete_join(env, fx);
    }

    fn complete_join(&mut self, env: &ClassicEnv, fx: &mut Effects<'_>) {
        fx.timer(self.timer(ClassicTimer::Join), None);
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            tracing::info!(group = %self.id, member = id, "member did not rejoin in time: removed");
            self.remove(&id, fx);
        }
        self.generation += 1;
        fx.metric(CoordinatorCounter::ClassicGenerations, 1);
        if self.members.is_empty() {
            self.state = ClassicState::Empty;
            self.history.ended(env.now);
            // The protocol type stays (Kafka's ClassicGroup keeps it when the group
            // goes Empty): DescribeGroups and ListGroups still say `consumer`.
            self.protocol_name = None;
            self.leader = None;
            return;
        }
        self.protocol_name = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = ClassicState::CompletingRebalance;
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result(&id, false);
            if let Some(p) = self
                .members
                .get_mut(&id)
                .and_then(|m| m.awaiting_join.take())
            {
                fx.reply(p, ClassicReply::Join(result));
            }
            self.touch(env, fx, &id);
        }
        let at = env.now + self.max_rebalance_timeout();
        fx.timer(self.timer(ClassicTimer::Sync), Some(at));
        tracing::info!(group = %self.id, generation = self.generation, members = self.members.len(),
            protocol = self.protocol_name.as_deref().unwrap_or(""), "classic group generation");
    }

    /// The protocol most members prefer among those all support (ties: the first
    /// member's order).
    fn select_protocol(&self) -> Option<String> {
        let common = self.common_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| common.contains(n)) {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        common
            .iter()
            .find(|n| votes.get(n.as_str()) == Some(&best))
            .cloned()
    }

    /// The JoinGroup answer of `member_id` for the current generation.
    fn join_result(&self, member_id: &str, skip_assignment: bool) -> JoinResult {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.members
                .values()
                .map(|m| {
                    (
                        m.member_id.clone(),
                        m.instance_id.clone(),
                        m.metadata(&protocol).cloned().unwrap_or_default(),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader,
            member_id: member_id.to_owned(),
            members,
            skip_assignment,
        }
    }

    // ------------------------------------------------------------------ SyncGroup

    /// Handles a SyncGroup whose member and generation the caller has checked:
    /// the answers it completes (this one's, or the whole group's once the leader's
    /// assignment arrives).
    pub(crate) fn sync(
        &mut self,
        env: &ClassicEnv,
        fx: &mut Effects<'_>,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        pending: Pending,
    ) {
        self.sync_into(env, member_id, assignments, pending, fx);
    }

    /// [`ClassicGroup::sync`], adding to `fx`.
    fn sync_into(
        &mut self,
        env: &ClassicEnv,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        pending: Pending,
        fx: &mut Effects<'_>,
    ) {
        match self.state {
            ClassicState::PreparingRebalance | ClassicState::Empty => {
                fx.sync_error(pending, ResponseError::RebalanceInProgress)
            }
            ClassicState::Stable => {
                self.touch(env, fx, member_id);
                let r = self.sync_ok(member_id);
                fx.reply(pending, r);
            }
            ClassicState::CompletingRebalance => {
                self.touch(env, fx, member_id);
                if let Some(m) = self.members.get_mut(member_id) {
                    if let Some(old) = m.awaiting_sync.replace(pending) {
                        fx.sync_error(old, ResponseError::RebalanceInProgress);
                    }
                }
                if self.leader.as_deref() != Some(member_id) {
                    return;
                }
                let mut given: BTreeMap<String, Bytes> = assignments.into_iter().collect();
                for m in self.members.values_mut() {
                    m.assignment = given.remove(&m.member_id).unwrap_or_default();
                }
                if !given.is_empty() {
                    tracing::debug!(group = %self.id, unknown = given.len(), "assignment for unknown members ignored");
                }
                self.state = ClassicState::Stable;
                self.history.ended(env.now);
                fx.timer(self.timer(ClassicTimer::Sync), None);
                let ids: Vec<String> = self.members.keys().cloned().collect();
                for id in ids {
                    let r = self.sync_ok(&id);
                    if let Some(p) = self
                        .members
                        .get_mut(&id)
                        .and_then(|m| m.awaiting_sync.take())
                    {
                        fx.reply(p, r);
                    }
                }
            }
        }
    }

    fn sync_ok(&self, member_id: &str) -> ClassicReply {
        ClassicReply::Sync {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// The sync phase's deadline: members that have not sent SyncGroup are removed and
    /// the group rebalances.
    fn on_sync_timer(&mut self, env: &ClassicEnv, fx: &mut Effects<'_>) {
        if self.state != ClassicState::CompletingRebalance {
            return;
        }
        let late: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_sync.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in &late {
            tracing::info!(group = %self.id, member = id, "no SyncGroup before the rebalance timeout: removed");
            self.remove(id, fx);
        }
        self.prepare_rebalance(env, "members did not sync", fx);
    }

    // ------------------------------------------------------------------ Heartbeat, LeaveGroup

    /// A heartbeat of a checked member of the current generation: the error to answer.
    pub(crate) fn heartbeat(
        &mut self,
        env: &ClassicEnv,
        fx: &mut Effects<'_>,
        member_id: &str,
    ) -> Option<ResponseError> {
        match self.state {
            ClassicState::Empty => Some(ResponseError::UnknownMemberId),
            ClassicState::PreparingRebalance => {
                if self.members[member_id].awaiting_join.is_none() {
                    self.touch(env, fx, member_id);
                }
                Some(ResponseError::RebalanceInProgress)
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.touch(env, fx, member_id);
                None
            }
        }
    }

    /// A member leaves (LeaveGroup): removed, and the group rebalances; the
    /// deferred answers this completes.
    pub(crate) fn leave(&mut self, env: &ClassicEnv, fx: &mut Effects<'_>, member_id: &str) {
        self.leave_into(env, member_id, fx);
    }

    /// [`ClassicGroup::leave`], adding to `fx`.
    fn leave_into(&mut self, env: &ClassicEnv, member_id: &str, fx: &mut Effects<'_>) {
        if self.pending_members.remove(member_id).is_some() {
            fx.timer(
                self.timer(ClassicTimer::PendingJoin(member_id.to_owned())),
                None,
            );
            return self.try_complete_join(env, fx);
        }
        tracing::info!(group = %self.id, member = member_id, "member left");
        self.remove(member_id, fx);
        self.prepare_rebalance(env, "a member left", fx);
    }

    /// Whether `member_id` is a KIP-394 id handed out and not yet used.
    pub(crate) fn is_pending(&self, member_id: &str) -> bool {
        self.pending_members.contains_key(member_id)
    }

    /// Restarts `member_id`'s session deadline.
    fn touch(&self, env: &ClassicEnv, fx: &mut Effects<'_>, member_id: &str) {
        if let Some(m) = self.members.get(member_id) {
            let at = env.now + m.session_timeout_ms.max(0) as u64;
            fx.timer(
                self.timer(ClassicTimer::Session(member_id.to_owned())),
                Some(at),
            );
        }
    }

    fn remove(&mut self, member_id: &str, fx: &mut Effects<'_>) {
        fx.timer(
            self.timer(ClassicTimer::Session(member_id.to_owned())),
            None,
        );
        let Some(mut m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &m.instance_id {
            if self.instances.get(instance).map(String::as_str) == Some(member_id) {
                self.instances.remove(instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
        if let Some(p) = m.awaiting_join.take() {
            let r = JoinResult::error(ResponseError::UnknownMemberId, member_id);
            fx.reply(p, ClassicReply::Join(r));
        }
        if let Some(p) = m.awaiting_sync.take() {
            fx.sync_error(p, ResponseError::UnknownMemberId);
        }
    }

    /// A deadline of this group passed: the answers and counters it
    /// leads to.
    pub(crate) fn on_timer(&mut self, env: &ClassicEnv, fx: &mut Effects<'_>, timer: ClassicTimer) {
        self.on_timer_into(env, timer, fx);
    }

    /// [`ClassicGroup::on_timer`], adding to `fx`.
    fn on_timer_into(&mut self, env: &ClassicEnv, timer: ClassicTimer, fx: &mut Effects<'_>) {
        match timer {
            ClassicTimer::Join => self.on_join_timer(env, fx),
            ClassicTimer::Sync => self.on_sync_timer(env, fx),
            ClassicTimer::Session(member) => {
                if self.members.contains_key(&member) {
                    tracing::info!(group = %self.id, member, "session timeout: member removed");
                    fx.metric(CoordinatorCounter::ClassicMembersExpired, 1);
                    self.remove(&member, fx);
                    self.prepare_rebalance(env, "a member's session expired", fx);
                }
            }
            ClassicTimer::PendingJoin(member) => {
                if self.pending_members.remove(&member).is_some() {
                    self.try_complete_join(env, fx);
                }
            }
        }
    }

    /// Drops every member (the group's slot was lost, or the group is deleted): their
    /// outstanding answers get `error`, their timers go.
    pub(crate) fn drop_all(&mut self, fx: &mut Effects<'_>, error: ResponseError) {
        for t in [ClassicTimer::Join, ClassicTimer::Sync] {
            fx.timer(self.timer(t), None);
        }
        for id in std::mem::take(&mut self.pending_members).into_keys() {
            fx.timer(self.timer(ClassicTimer::PendingJoin(id)), None);
        }
        for (id, mut m) in std::mem::take(&mut self.members) {
            fx.timer(self.timer(ClassicTimer::Session(id.clone())), None);
            if let Some(p) = m.awaiting_join.take() {
                fx.reply(p, ClassicReply::Join(JoinResult::error(error, &id)));
            }
            if let Some(p) = m.awaiting_sync.take() {
                fx.sync_error(p, error);
            }
        }
        self.instances.clear();
        self.state = ClassicState::Empty;
    }
}
