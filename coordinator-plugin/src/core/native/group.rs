//! A group's state: members, zombies (failed members whose partitions are not released
//! yet) and the rebalance phase; and the rebalance engine (docs/protocol.md §6.2 and
//! §6.4). The group's commit pipeline is in `offsets`.
//!
//! Every method is pure in the sense of the KIP-848 engine: it reads what it needs
//! from a [`NativeEnv`] and records what it decides in an [`Effects`] list, the one
//! result shape of every group type (requests to push, timers, the rebalance's offset
//! fetch, events, metrics), which the coordinator applies (`Ctx::apply`); it never
//! sees the coordinator's shared state.
//!
//! Safety rests on one piece of bookkeeping: the coordinator's view of who may be
//! delivering a partition. A live member "owns" the partitions of the last StartFetcher
//! sent to it, minus those released by its answers to StopFetcher. A failed member whose
//! partitions are not released at once becomes a [`Zombie`] until its lease has surely
//! expired (rule d). A partition is handed to a consumer only when no other member owns
//! it and no zombie holds it; [`NativeGroup::start_round`] re-checks this before every
//! StartFetcher.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use drover_protocol as proto;
use drover_protocol::NativeRequest;

use super::effects::{effective_assignor, NativeEnv};
use super::offsets::Commits;
use drover_abi::assignor::{AssignInput, Assignment};
use drover_abi::PluginError;

use crate::assignors::{
    build_input, same_members, validate_against_input, ContextParts, MemberView,
};
use crate::config::RebalanceMode;
use crate::core::assigning::Call;
use crate::core::result::{Effect, Effects};
use crate::core::TimerKey;
use crate::id_map::IdMap;
use crate::io::{CoordinatorCounter, Event, FailureReason};
use crate::seen_loads::TopicSeenLoads;
use crate::subscription::SubscriptionSpec;
use crate::types::{ConnId, ConsumerId, Generation, GroupId, TopicName, TopicPartition};
use crate::wire;

/// What the coordinator asks a consumer to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StopPlan {
    /// Eager: everything.
    All,
    /// Incremental: these partitions.
    Partitions(BTreeSet<TopicPartition>),
}

/// A StartFetcher waiting for the channel to be free.
#[derive(Debug, Clone)]
pub(crate) struct StartPlan {
    pub generation: Generation,
    /// Partitions with their start offsets, sorted.
    pub starts: Vec<(TopicPartition, i64)>,
}

/// The request outstanding on a channel.
#[derive(Debug, Clone)]
pub(crate) enum Outstanding {
    Heartbeat {
        corr: i32,
    },
    Stop {
        corr: i32,
        /// The partitions the request covers (for `stop_all`, everything owned then).
        partitions: BTreeSet<TopicPartition>,
    },
    Start {
        corr: i32,
    },
}

impl Outstanding {
    pub(crate) fn corr(&self) -> i32 {
        match self {
            Outstanding::Heartbeat { corr }
            | Outstanding::Stop { corr, .. }
            | Outstanding::Start { corr } => *corr,
        }
    }

    pub(crate) fn api_key(&self) -> proto::ApiKey {
        match self {
            Outstanding::Heartbeat { .. } => proto::ApiKey::Heartbeat,
            Outstanding::Stop { .. } => proto::ApiKey::StopFetcher,
            Outstanding::Start { .. } => proto::ApiKey::StartFetcher,
        }
    }
}

/// A registered consumer.
#[derive(Debug)]
pub(crate) struct Member {
    pub id: ConsumerId,
    /// Unique per registration, so a stale reference to a replaced registration is
    /// recognised.
    pub incarnation: u64,
    pub conn: ConnId,
    pub host: String,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub subscription: SubscriptionSpec,
    /// The subscription resolved against the current topics.
    pub topics: Arc<BTreeSet<TopicName>>,
    pub auto_offset_reset: i8,
    /// The assignor, resolved (the default when the consumer named none).
    pub assignor: String,
    /// What the consumer declared about itself for the assignor (RegisterConsumer v1:
    /// rack, weight ≥ 1, labels; the defaults for v0), checked by
    /// `proto::MemberData::validate` at registration.
    pub data: drover_protocol::MemberData,
    /// The generation the coordinator believes the consumer is in.
    pub generation: Generation,
    /// Partitions the consumer may be delivering (see the module docs).
    pub owned: BTreeSet<TopicPartition>,
    /// Partitions it released by StopFetcher in the running rebalance.
    pub stopped_in_rebalance: BTreeSet<TopicPartition>,
    pub last_recv_ms: u64,
    pub last_sent_ms: u64,
    /// How much earlier than a whole interval after the last request the next
    /// Heartbeat is due, ms: set after a StartFetcher ([`ping_spread`]), else 0.
    pub ping_early_ms: u64,
    pub next_corr: i32,
    pub outstanding: Option<Outstanding>,
    pub queued_stop: Option<StopPlan>,
    pub queued_start: Option<StartPlan>,
}

impl Member {
    /// When the member fails for silence.
    /// When the next Heartbeat is due: a ping interval after the last request sent,
    /// less [`Member::ping_early_ms`].
    pub(crate) fn ping_due(&self) -> u64 {
        self.last_sent_ms
            .saturating_add(self.heartbeat_interval_ms)
            .saturating_sub(self.ping_early_ms)
    }

    pub(crate) fn session_deadline(&self) -> u64 {
        self.last_recv_ms.saturating_add(self.session_timeout_ms)
    }

    /// The partitions of the outstanding StopFetcher, if any.
    fn stopping(&self) -> Option<&BTreeSet<TopicPartition>> {
        match &self.outstanding {
            Some(Outstanding::Stop { partitions, .. }) => Some(partitions),
            _ => None,
        }
    }
}

/// Partitions of a failed member, held until `release_at` (rule d).
#[derive(Debug)]
pub(crate) struct Zombie {
    pub consumer: ConsumerId,
    pub partitions: BTreeSet<TopicPartition>,
    pub release_at: u64,
}

/// Who may be delivering a partition, for the safety check.
#[derive(Debug, Clone)]
enum Holder {
    Member(ConsumerId),
    Zombie(ConsumerId, u64),
    StartedThisRound(ConsumerId),
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Member(id) => write!(f, "owned by {id}"),
            Holder::Zombie(id, at) => write!(f, "held by failed consumer {id} until {at}"),
            Holder::StartedThisRound(id) => write!(f, "started by {id} in this round"),
        }
    }
}

/// How long after a trigger a rebalance starts (ms), given `rebalance_quiet_ms`,
/// `rebalance_delay_ms` and the time since the previous trigger (`gap`, `None` for the
/// group's first). A trigger with none before it within `rebalance_delay_ms` waits
/// only the quiet time: a lone leave or failure is acted on at once, and a burst
/// arriving within the quiet time gives one rebalance. When triggers come in a
/// stream, spaced more than half the quiet time apart, each waits twice the spacing
/// (so the next one of the stream joins the same rebalance), at most
/// `rebalance_delay_ms`: the fixed debounce of earlier versions is now the cap.
/// `rebalance_quiet_ms` at or above `rebalance_delay_ms` gives that fixed debounce.
pub(crate) fn debounce_ms(quiet_ms: u64, delay_ms: u64, gap: Option<u64>) -> u64 {
    let quiet = quiet_ms.min(delay_ms);
    match gap {
        Some(gap) if gap < delay_ms => gap.saturating_mul(2).clamp(quiet, delay_ms),
        _ => quiet,
    }
}

/// A computed target assignment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Target {
    /// Per member (by incarnation): its partitions.
    pub members: BTreeMap<ConsumerId, (u64, BTreeSet<TopicPartition>)>,
    /// Reverse index.
    pub owner: BTreeMap<TopicPartition, ConsumerId>,
}

impl Target {
    fn for_member(&self, m: &Member) -> Option<&BTreeSet<TopicPartition>> {
        match self.members.get(&m.id) {
            Some((inc, set)) if *inc == m.incarnation => Some(set),
            _ => None,
        }
    }
}

/// Where a group is in its rebalance cycle.
#[derive(Debug)]
pub(crate) enum Phase {
    Stable,
    /// Stopping the partitions that move (incremental: `target` computed first; eager:
    /// everything, `target` computed once all stopped).
    Stopping {
        mode: RebalanceMode,
        target: Option<Target>,
    },
    /// Every move is released; flushing commits, then reading start offsets.
    Fetching {
        target: Target,
        op: Option<crate::types::OpId>,
    },
    /// The StartFetcher round of the current generation is out.
    Starting {
        awaiting: BTreeSet<ConsumerId>,
    },
}

impl Phase {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Phase::Stable => "stable",
            Phase::Stopping { .. } => "stopping",
            Phase::Fetching { .. } => "fetching",
            Phase::Starting { .. } => "starting",
        }
    }
}

/// A native group (docs/protocol.md §6): its consumers, the failed ones whose
/// partitions are not released yet, its rebalance and its pending commits.
#[derive(Debug)]
pub(crate) struct NativeGroup {
    pub id: GroupId,
    pub generation: Generation,
    pub members: IdMap<ConsumerId, Member>,
    pub zombies: Vec<Zombie>,
    pub phase: Phase,
    /// When the debounced rebalance is due, if one is wanted.
    pub due: Option<u64>,
    /// The first trigger of the current debounce series.
    pub first_trigger: Option<u64>,
    /// The latest trigger, of this series or an earlier one: the spacing of
    /// triggers sets the debounce ([`debounce_ms`]).
    pub last_trigger: Option<u64>,
    /// Members with a queued or outstanding StopFetcher in the running rebalance.
    pub stops_pending: BTreeSet<ConsumerId>,
    pub commits: Commits,
    /// Cluster mode: no rebalance starts before this time, the end of the takeover
    /// wait of the group's slot (docs/protocol.md §6.8). Consumers of the slot's
    /// previous coordinator may be delivering until then, so nothing may be started.
    pub hold_until: Option<u64>,
    /// The produce rates and lag the last assignment's context carried, for
    /// DescribeGroups v1 (empty before the first assignment).
    pub last_loads: Vec<TopicSeenLoads>,
    /// The assignor call the group waits for, handed to the host
    /// ([`crate::assignor_job`]); at most one.
    assigning: Option<Assigning>,
    /// Its recent rebalances (DescribeRebalances).
    pub history: crate::core::rebalance_history::RebalanceHistory,
}

/// Why a native group runs its assignor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// The target of the rebalance under way (Stopping).
    Rebalance,
    /// A stable group's inputs drifted (`rerun_on_drift_ms`): a new target only
    /// triggers a rebalance when it moves something.
    Drift,
}

/// An assignor call a native group waits for.
#[derive(Debug)]
struct Assigning {
    /// The call's id (0 while it runs inline).
    call: u64,
    /// Why.
    purpose: Purpose,
    /// The assignor called.
    assignor: String,
    /// What it was given (the output is checked against it).
    input: Arc<AssignInput>,
}

/// What starting an assignor call gave.
enum Computed {
    /// The target (the call ran inline).
    Ready(Target),
    /// The call was handed to the host.
    Started,
    /// The call failed, the default assignor's too (counted and reported).
    Failed,
}

impl NativeGroup {
    pub(crate) fn new(id: GroupId, hold_until: Option<u64>) -> Self {
        NativeGroup {
            id,
            generation: Generation(0),
            members: IdMap::default(),
            zombies: Vec::new(),
            phase: Phase::Stable,
            due: None,
            first_trigger: None,
            last_trigger: None,
            stops_pending: BTreeSet::new(),
            commits: Commits::default(),
            hold_until,
            last_loads: Vec::new(),
            assigning: None,
            history: Default::default(),
        }
    }

    /// Whether the takeover wait of the group's slot is still running at `now`.
    fn held(&self, now: u64) -> bool {
        self.hold_until.is_some_and(|h| now < h)
    }

    /// The assignor the group's members use (they all use the same one).
    pub(crate) fn assignor(&self) -> Option<&str> {
        self.members.values().next().map(|m| m.assignor.as_str())
    }

    /// Whether the group may be forgotten (its id taken by a group of another protocol,
    /// or deleted by DeleteGroups): no member, no rebalance running, no zombie (whose
    /// partitions would otherwise be handed out while its lease runs, rule d), no
    /// accepted offset waiting for the commit queue and no CommitOffset request waiting
    /// for its batch. A batch already in flight does not hold the group: its result
    /// answers its waiters without it.
    pub(crate) fn may_be_dropped(&self) -> bool {
        self.members.is_empty()
            && !self.in_rebalance()
            && self.zombies.is_empty()
            && self.commits.pending.is_empty()
            && self.commits.pending_waiters.is_empty()
    }

    pub(crate) fn in_rebalance(&self) -> bool {
        !matches!(self.phase, Phase::Stable)
    }

    /// Who may be delivering each partition: live members (what they own) and zombies.
    /// Who owns each partition now (members only), for the rebalance history.
    fn owners(&self) -> BTreeMap<TopicPartition, ConsumerId> {
        self.members
            .values()
            .flat_map(|m| m.owned.iter().map(|tp| (tp.clone(), m.id.clone())))
            .collect()
    }

    fn holders(&self) -> BTreeMap<TopicPartition, Holder> {
        let mut held = BTreeMap::new();
        for m in self.members.values() {
            for tp in &m.owned {
                held.insert(tp.clone(), Holder::Member(m.id.clone()));
            }
        }
        for z in &self.zombies {
            for tp in &z.partitions {
                held.insert(tp.clone(), Holder::Zombie(z.consumer.clone(), z.release_at));
            }
        }
        held
    }

    // ---------------------------------------------------------------- triggers, timers

    /// A rebalance trigger: the rebalance starts [`debounce_ms`] after it (a short
    /// quiet time, longer while triggers come in a steady stream), at most
    /// `rebalance_max_delay_ms` after the first trigger of a series.
    pub(crate) fn trigger(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>, why: &str) {
        self.history
            .triggered(crate::core::rebalance_history::cause_of_trigger(why));
        let now = env.now;
        let first = *self.first_trigger.get_or_insert(now);
        let gap = self
            .last_trigger
            .replace(now)
            .map(|t| now.saturating_sub(t));
        let wait = debounce_ms(
            env.config.rebalance_quiet_ms,
            env.config.rebalance_delay_ms,
            gap,
        );
        let due = now
            .saturating_add(wait)
            .min(first.saturating_add(env.config.rebalance_max_delay_ms));
        tracing::debug!(group = %self.id, why, due, "rebalance trigger");
        self.due = Some(due);
        self.update_timer(fx);
    }

    /// Re-runs the assignor because its inputs drifted (`rerun_on_drift_ms`): a stable
    /// group with no rebalance pending first runs it over the new inputs, and when the
    /// target it gives is what every member owns already, nothing happens (no new
    /// generation, no StartFetcher: a re-run that moves nothing costs the members
    /// nothing). Otherwise, or while a rebalance is pending or under way, it triggers
    /// the usual debounced rebalance. Returns whether it triggered one.
    pub(crate) fn rerun_on_drift(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) -> bool {
        if matches!(self.phase, Phase::Stable) && self.due.is_none() && !self.members.is_empty() {
            match self.compute_target(env, fx, Purpose::Drift) {
                Computed::Ready(target) if self.owns_target(&target) => {
                    tracing::debug!(group = %self.id, "assignor inputs drifted: same assignment");
                    return false;
                }
                // The host runs it: its result decides (`assignor_done`).
                Computed::Started => return false,
                Computed::Ready(_) | Computed::Failed => {}
            }
        }
        self.trigger(env, fx, "assignor inputs drifted (rerun_on_drift_ms)");
        true
    }

    /// Schedules a retry (after an assignor or fetch failure) without debounce.
    fn retry_later(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        let at = env.now.saturating_add(env.config.retry_backoff_ms);
        self.due = Some(self.due.map_or(at, |d| d.max(at)));
        self.update_timer(fx);
    }

    pub(crate) fn update_timer(&self, fx: &mut Effects<'_>) {
        let zombie = self.zombies.iter().map(|z| z.release_at).min();
        // While a StartFetcher round is out, a due rebalance waits for its completion
        // (which runs `progress`), not for a timer. During a slot's takeover wait, it
        // waits for the end of the wait.
        let due = match self.phase {
            Phase::Starting { .. } => None,
            _ => self
                .due
                .map(|d| self.hold_until.map_or(d, |hold| d.max(hold))),
        };
        let at = match (due, zombie) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        fx.timer(TimerKey::Group(self.id.clone()), at);
    }

    /// The group timer fired: release expired zombies, then move the rebalance on.
    pub(crate) fn on_timer(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        let now = env.now;
        let before = self.zombies.len();
        self.zombies.retain(|z| z.release_at > now);
        if self.zombies.len() != before {
            tracing::debug!(group = %self.id, released = before - self.zombies.len(), "zombie leases expired");
        }
        self.progress(env, fx);
    }

    pub(crate) fn update_member_timer(
        &self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
    ) {
        let Some(m) = self.members.get(id) else {
            fx.timer(TimerKey::Member(self.id.clone(), id.clone()), None);
            return;
        };
        let mut at = m.session_deadline();
        // The next Heartbeat, if the channel can carry it. While an earlier response is
        // still waiting on the connection, the flush of that response pumps the member.
        if m.outstanding.is_none() && env.conn_idle(m.conn) {
            at = at.min(m.ping_due());
        }
        fx.timer(TimerKey::Member(self.id.clone(), id.clone()), Some(at));
    }

    /// A member's timer fired: fail it for silence, or send what is due.
    pub(crate) fn on_member_timer(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
    ) {
        let Some(m) = self.members.get(id) else {
            return;
        };
        if env.now >= m.session_deadline() {
            self.fail_member(env, fx, id, FailureReason::SessionTimeout);
            return;
        }
        self.pump(env, fx, id);
    }

    // ---------------------------------------------------------------- channel output

    /// Sends the member's next request if its channel is free: a queued StopFetcher or
    /// StartFetcher, else a Heartbeat once the interval has passed.
    pub(crate) fn pump(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>, id: &ConsumerId) {
        let group_id = self.id.clone();
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        if m.outstanding.is_some() || !env.conn_idle(m.conn) {
            self.update_member_timer(env, fx, id);
            return;
        }
        let corr = m.next_corr;
        let (request, outstanding) = if let Some(stop) = m.queued_stop.take() {
            let (stop_all, partitions) = match stop {
                StopPlan::All => (true, m.owned.clone()),
                StopPlan::Partitions(p) => (false, p),
            };
            let request = NativeRequest::StopFetcher(proto::StopFetcherRequest {
                group_id: group_id.to_string(),
                generation: m.generation.0,
                stop_all,
                partitions: if stop_all {
                    Vec::new()
                } else {
                    wire::partitions_to_wire(&partitions)
                },
            });
            (request, Outstanding::Stop { corr, partitions })
        } else if let Some(start) = m.queued_start.take() {
            let request = NativeRequest::StartFetcher(proto::StartFetcherRequest {
                group_id: group_id.to_string(),
                generation: start.generation.0,
                assignment: wire::assignment_to_wire(start.starts.iter().map(|(tp, o)| (tp, *o))),
            });
            // From the moment it is sent, the consumer may deliver what it names.
            m.generation = start.generation;
            m.owned = start.starts.into_iter().map(|(tp, _)| tp).collect();
            (request, Outstanding::Start { corr })
        } else if env.now >= m.ping_due() {
            let request = NativeRequest::Heartbeat(proto::HeartbeatRequest {
                group_id: group_id.to_string(),
                generation: m.generation.0,
            });
            (request, Outstanding::Heartbeat { corr })
        } else {
            self.update_member_timer(env, fx, id);
            return;
        };
        // After a StartFetcher the next Heartbeat comes between half an interval and
        // an interval later, at a point fixed by the member id: a rebalance starts
        // every member in the same millisecond, and without this they would all be
        // pinged in one millisecond from then on.
        let early = match outstanding {
            Outstanding::Start { .. } => ping_spread(id, m.heartbeat_interval_ms),
            _ => 0,
        };
        match wire::encode_request(corr, &request) {
            Ok(bytes) => {
                m.next_corr = m.next_corr.wrapping_add(1);
                m.last_sent_ms = env.now;
                m.ping_early_ms = early;
                m.outstanding = Some(outstanding);
                fx.push(Effect::Push {
                    conn: m.conn,
                    bytes,
                });
                self.update_member_timer(env, fx, id);
            }
            Err(e) => {
                tracing::error!(group = %group_id, consumer = %id, error = %e, "cannot encode a request to the consumer");
                self.fail_member(env, fx, id, FailureReason::EncodeFailure);
            }
        }
    }

    // ---------------------------------------------------------------- membership

    /// Removes a member: closes its channel (unless it is already closed), releases its
    /// partitions at once or after its lease, and triggers a rebalance.
    pub(crate) fn fail_member(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
        reason: FailureReason,
    ) {
        self.remove_member(
            env,
            fx,
            id,
            reason.releases_at_once(),
            reason != FailureReason::ChannelClosed,
        );
        fx.event(Event::MemberFailed {
            group: self.id.clone(),
            consumer: id.clone(),
            reason,
        });
        fx.metric(CoordinatorCounter::MembersFailed, 1);
        self.history
            .triggered(crate::core::rebalance_history::cause_of_failure(reason));
        self.trigger(env, fx, "member failed");
        self.progress(env, fx);
    }

    /// LeaveGroup: releases the member's partitions at once (rule c).
    pub(crate) fn leave(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>, id: &ConsumerId) {
        self.remove_member(env, fx, id, true, true);
        fx.event(Event::MemberLeft {
            group: self.id.clone(),
            consumer: id.clone(),
        });
        self.trigger(env, fx, "member left");
        self.progress(env, fx);
    }

    fn remove_member(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
        release_now: bool,
        close: bool,
    ) {
        let Some(m) = self.members.remove(id) else {
            return;
        };
        tracing::info!(group = %self.id, consumer = %id, owned = m.owned.len(), release_now, "member removed");
        fx.timer(TimerKey::Member(self.id.clone(), id.clone()), None);
        fx.push(Effect::DropConnection {
            conn: m.conn,
            close,
        });
        self.stops_pending.remove(id);
        if let Phase::Starting { awaiting } = &mut self.phase {
            awaiting.remove(id);
        }
        let release_at = m.session_deadline();
        if !release_now && release_at > env.now && !m.owned.is_empty() {
            self.zombies.push(Zombie {
                consumer: m.id.clone(),
                partitions: m.owned,
                release_at,
            });
            self.update_timer(fx);
        }
    }

    // ---------------------------------------------------------------- rebalance engine

    /// Moves the rebalance on as far as it can go now.
    pub(crate) fn progress(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        // Each iteration either changes the phase or returns.
        for _ in 0..8 {
            let now = env.now;
            // A group of a freshly gained slot stays in Stable (owning nothing) until
            // the takeover wait is over: its first rebalance, and so its first
            // StartFetcher, comes after.
            let due_now = self.due.is_some_and(|d| d <= now) && !self.held(now);
            match &mut self.phase {
                Phase::Stable => {
                    if !due_now {
                        break;
                    }
                    self.begin(env, fx);
                    if matches!(self.phase, Phase::Stable) {
                        break;
                    }
                }
                Phase::Stopping { .. } => {
                    if due_now {
                        self.due = None;
                        self.first_trigger = None;
                        self.recompute(env, fx);
                    }
                    if !self.stopping_done(env, fx) {
                        break;
                    }
                }
                Phase::Fetching { op, .. } => {
                    if due_now {
                        let mode = env.config.mode_for(self.assignor().unwrap_or(""));
                        self.phase = Phase::Stopping { mode, target: None };
                        continue;
                    }
                    if self.due.is_some() || op.is_some() {
                        break;
                    }
                    if !self.fetch_start_offsets(env, fx) {
                        break;
                    }
                }
                Phase::Starting { awaiting } => {
                    if !awaiting.is_empty() {
                        break;
                    }
                    let owners = self.owners();
                    self.history.completed(now, &owners);
                    self.complete(fx);
                }
            }
        }
        self.update_timer(fx);
    }

    /// Stable → Stopping.
    fn begin(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        self.due = None;
        self.first_trigger = None;
        if self.members.is_empty() {
            return;
        }
        let mode = env.config.mode_for(self.assignor().unwrap_or(""));
        fx.event(Event::RebalanceStarted {
            group: self.id.clone(),
            generation: self.generation,
            mode: mode.as_str(),
        });
        fx.metric(CoordinatorCounter::RebalancesStarted, 1);
        let owners = self.owners();
        let assignor = self.assignor().map(str::to_owned);
        self.history.started(
            env.now,
            self.generation.0,
            self.members.len(),
            assignor.as_deref(),
            owners,
        );
        for m in self.members.values_mut_unordered() {
            m.stopped_in_rebalance.clear();
        }
        self.phase = Phase::Stopping { mode, target: None };
        self.recompute(env, fx);
    }

    /// In Stopping: (re)computes the target (incremental) and plans the StopFetchers.
    fn recompute(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        let Phase::Stopping { mode, .. } = &self.phase else {
            return;
        };
        let mode = *mode;
        // At most one call per group: one in flight computes again, over the members
        // as they are then, when its result arrives (`assignor_done`).
        let in_flight = self
            .assigning
            .as_ref()
            .is_some_and(|a| a.purpose == Purpose::Rebalance);
        let target = match mode {
            RebalanceMode::Eager => None,
            RebalanceMode::Incremental if in_flight => None,
            RebalanceMode::Incremental => match self.compute_target(env, fx, Purpose::Rebalance) {
                Computed::Ready(t) => Some(t),
                // Planned when the result arrives (`assignor_done`).
                Computed::Started => None,
                Computed::Failed => {
                    self.retry_later(env, fx);
                    None
                }
            },
        };
        self.phase = Phase::Stopping { mode, target };
        self.plan_stops(env, fx);
    }

    /// In Stopping: plans each member's StopFetcher for the phase's mode and target
    /// (eager: everything; incremental: what the target takes away, nothing while the
    /// target is not known) and sends those that can go.
    fn plan_stops(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        let Phase::Stopping { mode, target } = &self.phase else {
            return;
        };
        let mode = *mode;
        let ids: Vec<ConsumerId> = self.members.keys().cloned().collect();
        for id in &ids {
            let Some(m) = self.members.get_mut(id) else {
                continue;
            };
            let plan = match (mode, target) {
                (RebalanceMode::Eager, _) => {
                    if m.owned.is_empty() || m.stopping().is_some() {
                        None
                    } else {
                        Some(StopPlan::All)
                    }
                }
                (RebalanceMode::Incremental, Some(t)) => {
                    let keep = t.for_member(m);
                    let in_flight = m.stopping();
                    let stop: BTreeSet<TopicPartition> = m
                        .owned
                        .iter()
                        .filter(|tp| !keep.is_some_and(|k| k.contains(*tp)))
                        .filter(|tp| !in_flight.is_some_and(|s| s.contains(*tp)))
                        .cloned()
                        .collect();
                    (!stop.is_empty()).then_some(StopPlan::Partitions(stop))
                }
                (RebalanceMode::Incremental, None) => None,
            };
            let busy = plan.is_some() || m.stopping().is_some();
            m.queued_stop = plan;
            if busy {
                self.stops_pending.insert(id.clone());
            } else {
                self.stops_pending.remove(id);
            }
        }
        for id in &ids {
            self.pump(env, fx, id);
        }
    }

    /// Starts the group's assignor over the live members for `purpose` (the assignor
    /// the group names, or the default when it is not loaded): the target when the
    /// call ran inline, [`Computed::Started`] when it was handed to the host (its
    /// result comes to [`Self::assignor_done`]). A rebalance over more than
    /// `max_assigned_partitions` partitions fails without a call.
    fn compute_target(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        purpose: Purpose,
    ) -> Computed {
        let requested = self
            .assignor()
            .unwrap_or(&env.config.default_assignor)
            .to_owned();
        let assignor = effective_assignor(env, fx, &self.id, &requested);
        self.launch(env, fx, purpose, assignor)
    }

    /// Calls assignor `name` over the live members as they are now.
    fn launch(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        purpose: Purpose,
        name: String,
    ) -> Computed {
        let views = self.views();
        let total: u64 = {
            let mut topics: BTreeSet<&TopicName> = BTreeSet::new();
            for m in &views {
                topics.extend(m.topics.iter());
            }
            topics
                .iter()
                .filter_map(|t| env.topics.get(*t))
                .map(|&c| u64::from(c))
                .sum()
        };
        if total > env.config.max_assigned_partitions as u64 {
            let error = format!(
                "{total} partitions exceed max_assigned_partitions ({})",
                env.config.max_assigned_partitions
            );
            self.assignor_failed(fx, &name, error);
            return Computed::Failed;
        }
        let input = Arc::new(build_input(self.id.as_str(), &views, env.topics));
        let context = ContextParts::build(
            &views,
            env.topics,
            env.partition_stats,
            self.commits.known_in_order(),
        )
        .aged(env.partition_stats, env.now);
        self.last_loads = context.seen_loads();
        let mut call = Assigning {
            call: 0,
            purpose,
            assignor: name,
            input: Arc::clone(&input),
        };
        match env.assignors.call(&self.id, &call.assignor, input, context) {
            Call::Done(result) => self.complete_call(env, fx, call, result),
            Call::Started(id) => {
                call.call = id;
                self.assigning = Some(call);
                Computed::Started
            }
        }
    }

    /// The live members as an assignor sees them.
    fn views(&self) -> Vec<MemberView<'_>> {
        self.members
            .values()
            .map(|m| MemberView {
                id: &m.id,
                topics: &m.topics,
                owned: &m.owned,
                rack: m.data.rack.as_deref(),
                // `validate` at registration keeps it ≥ 1.
                weight: u32::try_from(m.data.weight).unwrap_or(1).max(1),
                labels: &m.data.labels,
            })
            .collect()
    }

    /// Whether `input` (a call's) still describes the group ([`same_members`]).
    fn input_current(&self, env: &NativeEnv<'_>, input: &AssignInput) -> bool {
        same_members(
            &build_input(self.id.as_str(), &self.views(), env.topics),
            input,
        )
    }

    /// Logs, reports and counts a failed assignor call.
    fn assignor_failed(&self, fx: &mut Effects<'_>, assignor: &str, error: String) {
        tracing::warn!(group = %self.id, assignor, %error, "assignment failed");
        fx.event(Event::AssignorFailed {
            group: self.id.clone(),
            assignor: assignor.to_owned(),
            message: error,
        });
        fx.metric(CoordinatorCounter::AssignorFailures, 1);
    }

    /// Checks a call's output against its input and makes it the target of the
    /// members still here. A failing assignor (an error, a panic, a call past its
    /// budget, an answer breaking the contract) must not stall the group: the
    /// default assignor runs instead, for this rebalance.
    fn complete_call(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        call: Assigning,
        result: Result<Assignment, PluginError>,
    ) -> Computed {
        let checked = result.map_err(|e| e.to_string()).and_then(|output| {
            validate_against_input(&call.input, &output)
                .map_err(|e| format!("invalid assignment: {e}"))
        });
        let checked = match checked {
            Ok(c) => c,
            Err(error) => {
                self.assignor_failed(fx, &call.assignor, error);
                let default = env.config.default_assignor.clone();
                if call.assignor == default {
                    return Computed::Failed;
                }
                let assignor = call.assignor;
                tracing::warn!(group = %self.id, assignor, default, "assignor `{assignor}` failed; this rebalance runs the default assignor `{default}`");
                fx.metric(CoordinatorCounter::AssignorFallbacks, 1);
                fx.event(Event::AssignorFallback {
                    group: self.id.clone(),
                    requested: assignor,
                    used: default.clone(),
                });
                return self.launch(env, fx, call.purpose, default);
            }
        };
        let mut target = Target::default();
        for (id, set) in checked {
            let Some(m) = self.members.get(&id) else {
                continue;
            };
            for tp in &set {
                target.owner.insert(tp.clone(), id.clone());
            }
            target.members.insert(id, (m.incarnation, set));
        }
        Computed::Ready(target)
    }

    /// The result of assignor call `call` arrived from the host: taken if the group
    /// still waits for it (a rebalance still stopping, or a drift re-run of a stable
    /// group), else dropped.
    pub(crate) fn assignor_done(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        call: u64,
        result: Result<Assignment, PluginError>,
    ) {
        let waiting = match self.assigning.take() {
            Some(w) if w.call == call => w,
            other => {
                self.assigning = other;
                return;
            }
        };
        let purpose = waiting.purpose;
        if !self.input_current(env, &waiting.input) {
            // Members came, went or changed while the assignor ran: a target for the
            // old ones must not start a generation (a member would fetch outside its
            // subscription, or get nothing). A rebalance computes again, over the
            // members as they are; a drift re-run is dropped.
            tracing::debug!(group = %self.id, call, "the members changed during the assignor call; computing again");
            if purpose == Purpose::Rebalance {
                self.recompute(env, fx);
                self.progress(env, fx);
            }
            return;
        }
        let computed = self.complete_call(env, fx, waiting, result);
        match (purpose, computed) {
            (_, Computed::Started) => {}
            (Purpose::Rebalance, computed) => {
                let Phase::Stopping { target, .. } = &mut self.phase else {
                    return;
                };
                match computed {
                    Computed::Ready(t) => {
                        *target = Some(t);
                        self.plan_stops(env, fx);
                    }
                    _ => self.retry_later(env, fx),
                }
                self.progress(env, fx);
            }
            (Purpose::Drift, computed) => {
                if !matches!(self.phase, Phase::Stable) || self.due.is_some() {
                    return;
                }
                if let Computed::Ready(target) = computed {
                    if self.owns_target(&target) {
                        tracing::debug!(group = %self.id, "assignor inputs drifted: same assignment");
                        return;
                    }
                }
                self.trigger(env, fx, "assignor inputs drifted (rerun_on_drift_ms)");
            }
        }
    }

    /// Whether every member owns exactly what `target` gives it.
    fn owns_target(&self, target: &Target) -> bool {
        target.members.len() == self.members.len()
            && self
                .members
                .values()
                .all(|m| target.for_member(m).is_some_and(|set| *set == m.owned))
    }

    /// Whether the Stopping phase is over; moves to Fetching when it is.
    fn stopping_done(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) -> bool {
        if self.due.is_some() || !self.stops_pending.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            // Everyone left: nothing to assign, no new generation.
            self.phase = Phase::Stable;
            self.history.completed(env.now, &BTreeMap::new());
            self.complete_without_round(fx);
            return false;
        }
        let Phase::Stopping { mode, target } = &mut self.phase else {
            return false;
        };
        if target.is_none() {
            if *mode == RebalanceMode::Incremental {
                // The target could not be computed; a retry is scheduled.
                return false;
            }
            // Eager: everyone has stopped; compute now (unless a call is out already).
            if self
                .assigning
                .as_ref()
                .is_some_and(|a| a.purpose == Purpose::Rebalance)
            {
                return false;
            }
            match self.compute_target(env, fx, Purpose::Rebalance) {
                Computed::Ready(t) => {
                    if let Phase::Stopping { target, .. } = &mut self.phase {
                        *target = Some(t);
                    }
                }
                Computed::Started => return false,
                Computed::Failed => {
                    self.retry_later(env, fx);
                    return false;
                }
            }
        }
        let Phase::Stopping {
            target: Some(target),
            ..
        } = &self.phase
        else {
            return false;
        };
        // Partitions of failed consumers are used only once released (rule d).
        let blocked = self
            .zombies
            .iter()
            .flat_map(|z| z.partitions.iter())
            .any(|tp| target.owner.contains_key(tp));
        if blocked {
            return false;
        }
        let target = target.clone();
        self.phase = Phase::Fetching { target, op: None };
        true
    }

    /// In Fetching: once commits are flushed, reads the committed offsets of newly
    /// assigned partitions; starts the round directly when there are none.
    fn fetch_start_offsets(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) -> bool {
        let Phase::Fetching { target, .. } = &self.phase else {
            return false;
        };
        let mut wanted: BTreeSet<TopicPartition> = BTreeSet::new();
        for m in self.members.values() {
            if let Some(set) = target.for_member(m) {
                wanted.extend(set.iter().filter(|tp| !m.owned.contains(*tp)).cloned());
            }
        }
        if wanted.is_empty() {
            self.start_round(env, fx, &BTreeMap::new());
            return true;
        }
        if !self.commits.settled(&wanted) {
            self.commits.urgent = true;
            self.flush_commits(env, fx);
            return false;
        }
        let op = fx.op_id();
        fx.push(Effect::FetchStartOffsets {
            op,
            group: self.id.clone(),
            partitions: wanted.into_iter().collect(),
        });
        if let Phase::Fetching { op: slot, .. } = &mut self.phase {
            *slot = Some(op);
        }
        false
    }

    /// The offsets of a rebalance fetch arrived.
    pub(crate) fn on_fetched(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        op: crate::types::OpId,
        result: Result<BTreeMap<TopicPartition, i64>, crate::types::StoreError>,
    ) {
        let Phase::Fetching {
            op: Some(current), ..
        } = &self.phase
        else {
            return;
        };
        if *current != op {
            return;
        }
        match result {
            Ok(offsets) => {
                if self.due.is_some() {
                    // A trigger came meanwhile: recompute first.
                    if let Phase::Fetching { op, .. } = &mut self.phase {
                        *op = None;
                    }
                } else {
                    self.start_round(env, fx, &offsets);
                }
            }
            Err(e) => {
                tracing::warn!(group = %self.id, error = %e, "offset fetch for a rebalance failed");
                fx.event(Event::OffsetFetchFailed {
                    group: self.id.clone(),
                    message: e.message,
                });
                if let Phase::Fetching { op, .. } = &mut self.phase {
                    *op = None;
                }
                self.retry_later(env, fx);
            }
        }
        self.progress(env, fx);
    }

    /// Fetching → Starting: a new generation, and a StartFetcher to every member.
    fn start_round(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) {
        let Phase::Fetching { target, .. } = std::mem::replace(&mut self.phase, Phase::Stable)
        else {
            return;
        };
        self.generation = self.generation.next();
        let generation = self.generation;
        let ids: Vec<ConsumerId> = self.members.keys().cloned().collect();
        let mut awaiting = BTreeSet::new();
        let mut withheld = false;
        let mut held = self.holders();
        for id in &ids {
            let mut starts = Vec::new();
            if let Some(m) = self.members.get(id) {
                if let Some(set) = target.for_member(m) {
                    for tp in set {
                        if m.owned.contains(tp) {
                            starts.push((tp.clone(), proto::PartitionStart::KEEP_POSITION));
                            continue;
                        }
                        if let Some(why) = held.get(tp) {
                            tracing::error!(group = %self.id, partition = %tp, %why, "safety check: partition withheld");
                            fx.event(Event::SafetyCheckFailed {
                                group: self.id.clone(),
                                message: format!("{tp} for {id}: {why}"),
                            });
                            withheld = true;
                            continue;
                        }
                        held.insert(tp.clone(), Holder::StartedThisRound(id.clone()));
                        let start = offsets
                            .get(tp)
                            .copied()
                            .unwrap_or(proto::PartitionStart::NO_COMMITTED_OFFSET);
                        starts.push((tp.clone(), start));
                    }
                }
            }
            if let Some(m) = self.members.get_mut(id) {
                m.queued_start = Some(StartPlan { generation, starts });
                awaiting.insert(id.clone());
            }
        }
        fx.event(Event::GenerationStarted {
            group: self.id.clone(),
            generation,
            members: awaiting.len(),
        });
        fx.metric(CoordinatorCounter::Generations, 1);
        self.phase = Phase::Starting { awaiting };
        for id in &ids {
            self.pump(env, fx, id);
        }
        if withheld {
            self.trigger(env, fx, "partitions withheld by the safety check");
        }
    }

    /// Stopping → Stable when no member is left.
    fn complete_without_round(&mut self, fx: &mut Effects<'_>) {
        fx.event(Event::RebalanceCompleted {
            group: self.id.clone(),
            generation: self.generation,
            members: 0,
        });
    }

    /// Starting → Stable once every member answered its StartFetcher.
    fn complete(&mut self, fx: &mut Effects<'_>) {
        self.phase = Phase::Stable;
        for m in self.members.values_mut_unordered() {
            m.stopped_in_rebalance.clear();
        }
        fx.event(Event::RebalanceCompleted {
            group: self.id.clone(),
            generation: self.generation,
            members: self.members.len(),
        });
    }

    // ---------------------------------------------------------------- channel input

    /// A StopFetcher was answered NONE: its partitions are released (rule a).
    pub(crate) fn on_stopped(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
        partitions: BTreeSet<TopicPartition>,
    ) {
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        for tp in &partitions {
            m.owned.remove(tp);
        }
        m.stopped_in_rebalance.extend(partitions);
        if m.queued_stop.is_none() {
            self.stops_pending.remove(id);
        }
        self.progress(env, fx);
    }

    /// A StartFetcher was answered NONE.
    pub(crate) fn on_started(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
    ) {
        if let Phase::Starting { awaiting } = &mut self.phase {
            awaiting.remove(id);
        }
        self.progress(env, fx);
    }
}

/// How much earlier than a whole interval after a StartFetcher member `id` gets its next
/// Heartbeat, ms: a spread in `[0, interval / 2]` fixed by a hash of the id (the FNV-1a
/// of slot placement), so members started together are pinged at spread-out times.
fn ping_spread(id: &ConsumerId, interval_ms: u64) -> u64 {
    let buckets = u32::try_from(interval_ms / 2 + 1).unwrap_or(u32::MAX);
    u64::from(drover_protocol::coordinator_slot(id.as_str(), buckets))
}
