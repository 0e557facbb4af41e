//! The coordinator state machine: input dispatch, the consumer requests
//! (RegisterConsumer, CommitOffset, FetchOffsets, LeaveGroup, DescribeGroups), the
//! consumers' answers on their channels, topic changes, timers, and in cluster mode
//! the coordinator slots it owns ([`Ownership`]). Groups and their rebalances are in
//! [`group`], the commit pipeline in [`offsets`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use drover_protocol as proto;
use drover_protocol::{ErrorCode, NativeRequest, NativeResponse};

mod conn;
mod group;
mod kafka;
mod offsets;

use conn::{ChannelOf, Conn, ReadyAnswer, SlotRef};
use group::{Group, Member, Outstanding};
use offsets::{CommitKind, Waiter};

use crate::assignors::Assignors;
use crate::config::{ConfigError, CoordinatorConfig, RebalanceMode};
use crate::io::{Event, FailureReason, FetchScope, Input, Output};
use crate::subscription::{compile_pattern, Resolver, SubscriptionSpec};
use crate::timers::Timers;
use crate::types::{
    ConnId, ConsumerId, Generation, GroupId, OffsetEntry, OpId, StoreError, TopicName,
    TopicPartition,
};
use crate::wire;

/// What a deadline is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKey {
    /// Write pending Heartbeat offsets.
    CommitTick,
    /// A group's debounced rebalance, retry, or zombie release.
    Group(GroupId),
    /// A member's heartbeat or session deadline.
    Member(GroupId, ConsumerId),
    /// A classic Kafka group's deadline.
    Classic(GroupId, kafka::ClassicTimer),
    /// The earliest deadline of the KIP-848 groups.
    ConsumerGroups,
}

/// An offset-store operation in flight.
#[derive(Debug)]
pub(crate) enum Op {
    Commit {
        group: GroupId,
        records: Vec<OffsetEntry>,
        waiters: Vec<u64>,
    },
    RebalanceFetch {
        group: GroupId,
    },
    /// A commit of a group dropped with its slot: the result only answers the
    /// CommitOffset requests that waited for it.
    DroppedCommit {
        waiters: Vec<u64>,
    },
    /// A rebalance fetch of a group dropped with its slot: the result is ignored.
    DroppedFetch,
    ClientFetch {
        slot: SlotRef,
        correlation_id: i32,
        group: GroupId,
        topics: Option<Vec<proto::TopicPartitions>>,
    },
}

/// Everything but the groups, so group code can borrow both.
pub(crate) struct Ctx {
    pub config: CoordinatorConfig,
    pub assignors: Box<dyn Assignors + Send>,
    pub topics: BTreeMap<TopicName, u32>,
    pub conns: HashMap<ConnId, Conn>,
    /// Connections the coordinator closed, until the host reports them closed.
    pub closing: HashSet<ConnId>,
    pub timers: Timers<TimerKey>,
    pub ops: HashMap<OpId, Op>,
    pub waiters: HashMap<u64, Waiter>,
    pub groups_with_pending: BTreeSet<GroupId>,
    /// Channels whose connection became free to carry a request.
    pub to_pump: Vec<ChannelOf>,
    pub out: Vec<Output>,
    pub now: u64,
    next_op: u64,
    next_waiter: u64,
    next_incarnation: u64,
}

impl Ctx {
    pub(crate) fn next_op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    pub(crate) fn event(&mut self, event: Event) {
        self.out.push(Output::Event(event));
    }

    pub(crate) fn metric(&mut self, name: &'static str, value: i64) {
        self.out.push(Output::Metric { name, value });
    }

    /// The assignor a rebalance of `group` runs: `requested` when it is loaded, else the
    /// default (a missing or refused plugin must not fail the group's consumers; issue
    /// "graceful refusal"). A fallback is logged (rate-limited per group by the caller's
    /// rebalance rate), counted (`assignor_fallbacks`) and reported as an event.
    pub(crate) fn effective_assignor(&mut self, group: &GroupId, requested: &str) -> String {
        if self.assignors.contains(requested) {
            return requested.to_owned();
        }
        let default = self.config.default_assignor.clone();
        tracing::warn!(
            %group,
            requested,
            default,
            "assignor `{requested}` is not loaded; the group uses the default assignor `{default}`"
        );
        self.metric("assignor_fallbacks", 1);
        self.event(Event::AssignorFallback {
            group: group.clone(),
            requested: requested.to_owned(),
            used: default.clone(),
        });
        default
    }

    pub(crate) fn commit_tick_set(&self) -> bool {
        self.timers.is_set(&TimerKey::CommitTick)
    }

    fn reserve(&mut self, conn: ConnId) -> SlotRef {
        self.conns.entry(conn).or_default().reserve(conn)
    }

    /// Fills a response slot and sends what is ready.
    pub(crate) fn respond(
        &mut self,
        slot: SlotRef,
        correlation_id: i32,
        response: &NativeResponse,
    ) {
        self.respond_opening(slot, correlation_id, response, false);
    }

    /// [`Ctx::respond`]; with `opens_channel`, the host learns that the connection is a
    /// channel (`Output::ChannelOpened`) just before this answer leaves.
    pub(crate) fn respond_opening(
        &mut self,
        slot: SlotRef,
        correlation_id: i32,
        response: &NativeResponse,
        opens_channel: bool,
    ) {
        let frame = match wire::encode_response(correlation_id, response) {
            Ok(b) => b,
            Err(e) => {
                self.reject(slot.conn, format!("cannot encode the response: {e}"));
                return;
            }
        };
        self.fill_answer(
            slot,
            ReadyAnswer {
                frame,
                opens_channel,
            },
        );
    }

    /// Fills a response slot with an encoded frame and sends what is ready.
    pub(crate) fn fill(&mut self, slot: SlotRef, frame: Bytes) {
        self.fill_answer(
            slot,
            ReadyAnswer {
                frame,
                opens_channel: false,
            },
        );
    }

    fn fill_answer(&mut self, slot: SlotRef, answer: ReadyAnswer) {
        let Some(conn) = self.conns.get_mut(&slot.conn) else {
            return;
        };
        for ready in conn.fill(slot.id, answer) {
            if ready.opens_channel {
                self.out.push(Output::ChannelOpened { conn: slot.conn });
            }
            self.out.push(Output::Answer {
                conn: slot.conn,
                bytes: ready.frame,
            });
        }
        if conn.idle() {
            if let Some(ch) = &conn.channel {
                self.to_pump.push(ch.clone());
            }
        }
    }

    /// Closes a connection for a protocol violation.
    fn reject(&mut self, conn: ConnId, message: String) {
        tracing::info!(%conn, message, "closing connection");
        self.conns.remove(&conn);
        self.closing.insert(conn);
        self.out.push(Output::CloseConnection { conn });
        self.event(Event::ConnectionRejected { conn, message });
    }

    fn exists(&self, tp: &TopicPartition) -> bool {
        self.topics
            .get(&tp.topic)
            .is_some_and(|&n| tp.partition >= 0 && i64::from(tp.partition) < i64::from(n))
    }
}

/// A group as operators see it (for the admin API and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The group.
    pub group: GroupId,
    /// `stable`, `stopping`, `fetching` or `starting` (where the group is in its
    /// rebalance cycle), or `empty` when it has no registered consumers and no rebalance
    /// is running.
    pub state: &'static str,
    /// The current generation.
    pub generation: Generation,
    /// The assignor its members use (none without members).
    pub assignor: Option<String>,
    /// The rebalance mode for that assignor (for the default assignor without members).
    pub mode: RebalanceMode,
    /// Registered consumers, by id.
    pub members: Vec<MemberSnapshot>,
    /// Partitions of failed consumers not released yet (lease running).
    pub held_by_failed: Vec<TopicPartition>,
}

/// A member as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// The consumer id.
    pub consumer: ConsumerId,
    /// The host it declared.
    pub host: String,
    /// Its session timeout, in milliseconds.
    pub session_timeout_ms: u64,
    /// The generation the coordinator believes it is in.
    pub generation: Generation,
    /// The subscription, as text: `static: a(2), b(1)`, `whitelist: re (2 streams)`.
    pub subscription: String,
    /// The subscribed topics, resolved against the current metadata.
    pub topics: Vec<TopicName>,
    /// Its reset policy: 0 earliest, 1 latest, 2 none.
    pub auto_offset_reset: i8,
    /// The partitions it may be delivering.
    pub owned: Vec<TopicPartition>,
}

/// Which groups the coordinator serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Standalone: every group (the default, [`CoordinatorConfig::slot_count`] `None`).
    All,
    /// Cluster mode: the groups whose slot,
    /// [`drover_protocol::coordinator_slot`]`(group, count)`, is in `owned`. Requests
    /// for other groups get NOT_COORDINATOR (docs/protocol.md §6.8).
    Slots {
        /// The number of slots.
        count: u32,
        /// The slots this coordinator owns ([`Input::SlotGained`] /
        /// [`Input::SlotLost`]).
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

/// The consumer group coordinator: a deterministic state machine. Feed it inputs with
/// [`Coordinator::handle`]; execute the outputs; deliver [`Input::Timer`] at
/// [`Coordinator::poll_timeout`].
pub struct Coordinator {
    cx: Ctx,
    groups: BTreeMap<GroupId, Group>,
    ownership: Ownership,
    /// Cluster mode: per owned slot, until when its groups may not rebalance (the
    /// takeover wait of docs/protocol.md §6.8).
    takeover_until: BTreeMap<u32, u64>,
    /// Kafka's classic and KIP-848 groups and Kafka offset requests in flight.
    kafka: kafka::KafkaGroups,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("groups", &self.groups.len())
            .field("connections", &self.cx.conns.len())
            .field("now", &self.cx.now)
            .finish_non_exhaustive()
    }
}

impl Coordinator {
    /// A coordinator with no groups and no topics (deliver [`Input::TopicsChanged`]
    /// first). With [`CoordinatorConfig::slot_count`] set it starts in cluster mode
    /// owning no slot ([`Input::SlotGained`]); otherwise it serves every group.
    pub fn new(
        config: CoordinatorConfig,
        assignors: impl Assignors + Send + 'static,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let ownership = match config.slot_count {
            None => Ownership::All,
            Some(count) => Ownership::Slots {
                count,
                owned: BTreeSet::new(),
            },
        };
        Ok(Coordinator {
            cx: Ctx {
                config,
                assignors: Box::new(assignors),
                topics: BTreeMap::new(),
                conns: HashMap::new(),
                closing: HashSet::new(),
                timers: Timers::default(),
                ops: HashMap::new(),
                waiters: HashMap::new(),
                groups_with_pending: BTreeSet::new(),
                to_pump: Vec::new(),
                out: Vec::new(),
                now: 0,
                next_op: 0,
                next_waiter: 0,
                next_incarnation: 0,
            },
            groups: BTreeMap::new(),
            ownership,
            takeover_until: BTreeMap::new(),
            kafka: kafka::KafkaGroups::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.cx.config
    }

    /// Replaces the loaded assignors (the host rescanned its plugin directory) and,
    /// when `default_assignor` is not empty, the default. Rebalances that start from now
    /// on use the new set; assignments already made stay. A group whose assignor is no
    /// longer loaded falls back to the default at its next rebalance
    /// ([`Ctx::effective_assignor`]). Nothing is sent, so no outputs.
    pub fn replace_assignors(
        &mut self,
        assignors: impl Assignors + Send + 'static,
        default_assignor: &str,
    ) {
        self.cx.assignors = Box::new(assignors);
        if !default_assignor.is_empty() {
            self.cx.config.default_assignor = default_assignor.to_owned();
        }
        tracing::info!(
            default_assignor = self.cx.config.default_assignor,
            "the set of loaded assignors changed"
        );
    }

    /// The topics as last reported.
    pub fn topics(&self) -> &BTreeMap<TopicName, u32> {
        &self.cx.topics
    }

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
    /// takeover wait after [`Input::SlotGained`]); `None` for a slot not owned, and
    /// standalone.
    pub fn takeover_until(&self, slot: u32) -> Option<u64> {
        self.takeover_until.get(&slot).copied()
    }

    /// Handles one input at `now_ms` (a monotonic clock; a value below an earlier one is
    /// treated as the earlier one) and returns the outputs to execute, in order.
    pub fn handle(&mut self, now_ms: u64, input: Input) -> Vec<Output> {
        self.cx.now = self.cx.now.max(now_ms);
        self.run_timers();
        match input {
            Input::Frame { conn, bytes } => self.on_frame(conn, bytes),
            Input::ConnectionOpened { conn, peer } => {
                self.cx.conns.entry(conn).or_default().peer = Some(peer);
            }
            Input::ConnectionClosed { conn } => self.on_closed(conn),
            Input::Timer => {}
            Input::TopicsChanged { topics } => {
                let lost: BTreeSet<TopicName> = self
                    .cx
                    .topics
                    .keys()
                    .filter(|t| !topics.contains_key(*t))
                    .cloned()
                    .collect();
                self.forget_topics(&lost);
                self.on_topics(topics)
            }
            Input::OffsetsCommitted { op, result } => self.on_committed(op, result),
            Input::OffsetsFetched { op, result } => self.on_fetched(op, result),
            Input::OffsetsDeleted { op, result } => self.on_offsets_deleted(op, result),
            Input::TopicIds { ids } => {
                let lost: BTreeSet<TopicName> = self
                    .kafka
                    .topic_ids
                    .iter()
                    .filter(|(t, id)| ids.get(*t) != Some(*id))
                    .map(|(t, _)| t.clone())
                    .collect();
                self.kafka.topic_ids = ids;
                self.forget_topics(&lost);
            }
            Input::SlotGained { slot, stopped_ms } => self.on_slot_gained(slot, stopped_ms),
            Input::SlotLost { slot } => self.on_slot_lost(slot),
        }
        self.settle();
        std::mem::take(&mut self.cx.out)
    }

    /// When the coordinator next needs [`Input::Timer`], if ever (same clock as
    /// `now_ms`).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.cx.timers.next()
    }

    /// The ids of every group the coordinator has seen (in cluster mode: since it
    /// gained the group's slot, which it still owns).
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.keys().cloned().collect()
    }

    /// A group's state, members and assignment.
    pub fn group(&self, id: &str) -> Option<GroupSnapshot> {
        let g = self.groups.get(id)?;
        let assignor = g.assignor().map(str::to_owned);
        let mode = self.cx.config.mode_for(
            assignor
                .as_deref()
                .unwrap_or(&self.cx.config.default_assignor),
        );
        let mut held: BTreeSet<TopicPartition> = BTreeSet::new();
        for z in &g.zombies {
            held.extend(z.partitions.iter().cloned());
        }
        let state = if g.members.is_empty() && !g.in_rebalance() {
            "empty"
        } else {
            g.phase.name()
        };
        Some(GroupSnapshot {
            group: g.id.clone(),
            state,
            generation: g.generation,
            assignor,
            mode,
            members: g
                .members
                .values()
                .map(|m| MemberSnapshot {
                    consumer: m.id.clone(),
                    host: m.host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    generation: m.generation,
                    subscription: describe(&m.subscription),
                    topics: m.topics.iter().cloned().collect(),
                    auto_offset_reset: m.auto_offset_reset,
                    owned: m.owned.iter().cloned().collect(),
                })
                .collect(),
            held_by_failed: held.into_iter().collect(),
        })
    }

    /// The answer to a DescribeGroups request (docs/protocol.md §5.8), built from
    /// [`Coordinator::group`]: one entry per requested id in request order, or, for
    /// `groups: None`, one per group of [`Coordinator::group_ids`] (at most
    /// [`proto::MAX_GROUPS_PER_REQUEST`], the first in id order). An empty id gets
    /// INVALID_GROUP_ID, the id of a group whose slot the coordinator does not own
    /// (cluster mode) NOT_COORDINATOR, and an id the coordinator has never seen
    /// GROUP_ID_NOT_FOUND, all with empty fields. Arrays longer than the protocol's
    /// caps are cut at the cap (with a warning in the log), so the answer always
    /// encodes.
    pub fn describe_groups(
        &self,
        request: &proto::DescribeGroupsRequest,
    ) -> proto::DescribeGroupsResponse {
        let describe = |id: &str| {
            if id.is_empty() {
                return proto::DescribedGroup::error(id, ErrorCode::INVALID_GROUP_ID);
            }
            if !self.owns(id) {
                return proto::DescribedGroup::error(id, ErrorCode::NOT_COORDINATOR);
            }
            match self.group(id) {
                Some(snapshot) => wire::group_to_wire(snapshot),
                None => proto::DescribedGroup::error(id, ErrorCode::GROUP_ID_NOT_FOUND),
            }
        };
        let groups = match &request.groups {
            Some(ids) => ids
                .iter()
                .take(proto::MAX_GROUPS_PER_REQUEST)
                .map(|id| describe(id))
                .collect(),
            None => {
                if self.groups.len() > proto::MAX_GROUPS_PER_REQUEST {
                    tracing::warn!(
                        groups = self.groups.len(),
                        max = proto::MAX_GROUPS_PER_REQUEST,
                        "DescribeGroups of every group: describing only the first groups by id"
                    );
                }
                self.groups
                    .keys()
                    .take(proto::MAX_GROUPS_PER_REQUEST)
                    .map(|id| describe(id.as_str()))
                    .collect()
            }
        };
        proto::DescribeGroupsResponse { groups }
    }

    // ------------------------------------------------------------------ plumbing

    fn run_timers(&mut self) {
        // A handler that keeps re-arming a timer in the past would spin the host's
        // coordinator thread; the budget turns such a bug into a logged delay.
        let mut budget = 1_000_000u32;
        while let Some(key) = self.cx.timers.pop_due(self.cx.now) {
            budget -= 1;
            if budget == 0 {
                tracing::error!(?key, "timer livelock; deferring timers by 1 ms");
                debug_assert!(false, "timer livelock on {key:?}");
                self.cx.timers.set(key, Some(self.cx.now + 1));
                return;
            }
            match key {
                TimerKey::CommitTick => self.commit_tick(),
                TimerKey::Group(id) => {
                    if let Some(g) = self.groups.get_mut(&id) {
                        g.on_timer(&mut self.cx);
                    }
                }
                TimerKey::Member(gid, cid) => {
                    if let Some(g) = self.groups.get_mut(&gid) {
                        g.on_member_timer(&mut self.cx, &cid);
                    }
                }
                TimerKey::Classic(gid, timer) => self.on_classic_timer(&gid, timer),
                TimerKey::ConsumerGroups => self.on_consumer_timer(),
            }
        }
    }

    /// Runs what handlers left for later: channels to pump, timers that became due.
    fn settle(&mut self) {
        for _ in 0..64 {
            if self.cx.to_pump.is_empty() && self.cx.timers.next().is_none_or(|t| t > self.cx.now) {
                return;
            }
            while let Some(ch) = self.cx.to_pump.pop() {
                if let Some(g) = self.groups.get_mut(&ch.group) {
                    if g.members
                        .get(&ch.consumer)
                        .is_some_and(|m| m.incarnation == ch.incarnation)
                    {
                        g.pump(&mut self.cx, &ch.consumer);
                    }
                }
            }
            self.run_timers();
        }
    }

    fn commit_tick(&mut self) {
        let ids: Vec<GroupId> = self.cx.groups_with_pending.iter().cloned().collect();
        for id in ids {
            match self.groups.get_mut(&id) {
                Some(g) => g.flush_commits(&mut self.cx),
                None => {
                    self.cx.groups_with_pending.remove(&id);
                }
            }
        }
        if !self.cx.groups_with_pending.is_empty() {
            let at = self
                .cx
                .now
                .saturating_add(self.cx.config.commit_interval_ms);
            self.cx.timers.set(TimerKey::CommitTick, Some(at));
        }
    }

    fn on_closed(&mut self, conn: ConnId) {
        if self.cx.closing.remove(&conn) {
            return;
        }
        let Some(c) = self.cx.conns.remove(&conn) else {
            return;
        };
        if let Some(ch) = c.channel {
            if let Some(g) = self.groups.get_mut(&ch.group) {
                if g.members
                    .get(&ch.consumer)
                    .is_some_and(|m| m.incarnation == ch.incarnation)
                {
                    g.fail_member(&mut self.cx, &ch.consumer, FailureReason::ChannelClosed);
                }
            }
        }
    }

    fn on_frame(&mut self, conn: ConnId, bytes: Bytes) {
        if self.cx.closing.contains(&conn) {
            return;
        }
        let channel = self.cx.conns.get(&conn).and_then(|c| c.channel.clone());
        match channel {
            Some(ch) => self.on_channel_frame(ch, bytes),
            None => self.on_request(conn, bytes),
        }
    }

    // ------------------------------------------------------------------ requests

    fn on_request(&mut self, conn: ConnId, bytes: Bytes) {
        if bytes.len() >= 2
            && !proto::ApiKey::is_native_code(i16::from_be_bytes([bytes[0], bytes[1]]))
        {
            return self.on_kafka_request(conn, bytes);
        }
        let (header, request) = match proto::decode_request_frame(bytes) {
            Ok(x) => x,
            Err(e) => {
                self.cx.reject(conn, format!("malformed request: {e}"));
                return;
            }
        };
        let corr = header.correlation_id;
        match request {
            NativeRequest::RegisterConsumer(r) => self.on_register(conn, corr, r),
            NativeRequest::CommitOffset(r) => self.on_commit(conn, corr, r),
            NativeRequest::FetchOffsets(r) => self.on_fetch(conn, corr, r),
            NativeRequest::LeaveGroup(r) => self.on_leave(conn, corr, r),
            NativeRequest::DescribeGroups(r) => {
                let slot = self.cx.reserve(conn);
                let response = NativeResponse::DescribeGroups(self.describe_groups(&r));
                self.cx.respond(slot, corr, &response);
            }
            other => self.cx.reject(
                conn,
                format!(
                    "{} is sent by the coordinator, not to it",
                    other.api_key().name()
                ),
            ),
        }
    }

    fn on_register(&mut self, conn: ConnId, corr: i32, r: proto::RegisterConsumerRequest) {
        let slot = self.cx.reserve(conn);
        let refuse = |cx: &mut Ctx, code: ErrorCode, message: String| {
            tracing::debug!(group = r.group_id, consumer = r.consumer_id, %code, message, "registration refused");
            let response = NativeResponse::RegisterConsumer(proto::RegisterConsumerResponse {
                error_code: code,
                error_message: Some(message),
                heartbeat_interval_ms: 0,
                generation: 0,
            });
            cx.respond(slot, corr, &response);
        };
        // An empty group id is INVALID_GROUP_ID (from `validate`) wherever it is sent;
        // any other check comes after the ownership check (docs/protocol.md §7.2).
        if !r.group_id.is_empty() && !self.owns(&r.group_id) {
            let message = self.not_coordinator_message(&r.group_id);
            return refuse(&mut self.cx, ErrorCode::NOT_COORDINATOR, message);
        }
        if !r.group_id.is_empty() && !self.take_group_id(&r.group_id, kafka::GroupKind::Native) {
            let message = format!(
                "group {} is a Kafka consumer group with members (classic or KIP-848)",
                r.group_id
            );
            return refuse(
                &mut self.cx,
                ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
                message,
            );
        }
        let hold_until = self.hold_for(&r.group_id);
        let cx = &mut self.cx;
        if let Err((code, message)) = r.validate() {
            return refuse(cx, code, message);
        }
        let sub = &r.subscription;
        if !sub.kind.is_wildcard() && sub.topics.len() > cx.config.max_subscription_topics {
            return refuse(
                cx,
                ErrorCode::INVALID_REQUEST,
                format!(
                    "{} topics exceed the coordinator's limit of {}",
                    sub.topics.len(),
                    cx.config.max_subscription_topics
                ),
            );
        }
        if r.session_timeout_ms < cx.config.min_session_timeout_ms
            || r.session_timeout_ms > cx.config.max_session_timeout_ms
        {
            return refuse(
                cx,
                ErrorCode::INVALID_SESSION_TIMEOUT,
                format!(
                    "session_timeout_ms {} is outside {}..={}",
                    r.session_timeout_ms,
                    cx.config.min_session_timeout_ms,
                    cx.config.max_session_timeout_ms
                ),
            );
        }
        let spec = if sub.kind.is_wildcard() {
            let pattern = sub.pattern.clone().unwrap_or_default();
            match compile_pattern(&pattern) {
                Ok(regex) => SubscriptionSpec::Wildcard {
                    pattern,
                    regex,
                    blacklist: sub.kind == proto::SubscriptionKind::BLACKLIST,
                    streams: sub.pattern_streams,
                },
                Err(e) => return refuse(cx, ErrorCode::INVALID_REGULAR_EXPRESSION, e),
            }
        } else {
            SubscriptionSpec::Static(
                sub.topics
                    .iter()
                    .map(|t| (TopicName::new(&t.topic), t.streams))
                    .collect(),
            )
        };
        let assignor = r
            .assignor
            .clone()
            .unwrap_or_else(|| cx.config.default_assignor.clone());
        if !cx.assignors.contains(&assignor) {
            // Accepted: the group falls back to the default assignor at its rebalances
            // (Ctx::effective_assignor) until a rescan loads this one.
            tracing::warn!(
                group = r.group_id,
                consumer = r.consumer_id,
                "consumer names assignor `{assignor}`, which is not loaded; the group uses the default `{}` until it is",
                cx.config.default_assignor
            );
        }
        let gid = GroupId::new(&r.group_id);
        let cid = ConsumerId::new(&r.consumer_id);
        let group = self
            .groups
            .entry(gid.clone())
            .or_insert_with(|| Group::new(gid.clone(), hold_until));
        if let Some((_, other)) = group.members.iter().find(|(id, _)| **id != cid) {
            if other.assignor != assignor {
                let message = format!(
                    "the group's consumers use assignor `{}`, not `{assignor}`",
                    other.assignor
                );
                return refuse(cx, ErrorCode::INCONSISTENT_GROUP_PROTOCOL, message);
            }
        }
        let others = group.members.len() - usize::from(group.members.contains_key(&cid));
        if others >= cx.config.max_group_size {
            return refuse(
                cx,
                ErrorCode::GROUP_MAX_SIZE_REACHED,
                format!("the group has {others} consumers, the maximum"),
            );
        }
        if group.members.contains_key(&cid) {
            group.fail_member(cx, &cid, FailureReason::Replaced);
        }
        cx.next_incarnation += 1;
        let incarnation = cx.next_incarnation;
        let st = r.session_timeout_ms as u64;
        let topics = Arc::new(spec.resolve(&cx.topics, cx.config.exclude_internal_topics));
        let member = Member {
            id: cid.clone(),
            incarnation,
            conn,
            host: r.host.clone(),
            session_timeout_ms: st,
            heartbeat_interval_ms: (st / 3).max(1),
            subscription: spec,
            topics,
            auto_offset_reset: r.auto_offset_reset.0,
            assignor,
            generation: group.generation,
            owned: BTreeSet::new(),
            stopped_in_rebalance: BTreeSet::new(),
            last_recv_ms: cx.now,
            last_sent_ms: cx.now,
            next_corr: 0,
            outstanding: None,
            queued_stop: None,
            queued_start: None,
        };
        group.members.insert(cid.clone(), member);
        if let Some(c) = cx.conns.get_mut(&conn) {
            c.channel = Some(ChannelOf {
                group: gid.clone(),
                consumer: cid.clone(),
                incarnation,
            });
        }
        let response = NativeResponse::RegisterConsumer(proto::RegisterConsumerResponse {
            error_code: ErrorCode::NONE,
            error_message: None,
            heartbeat_interval_ms: (st / 3) as i32,
            generation: group.generation.0,
        });
        cx.respond_opening(slot, corr, &response, true);
        tracing::info!(group = %gid, consumer = %cid, host = r.host, generation = %group.generation, "consumer registered");
        cx.event(Event::MemberRegistered {
            group: gid,
            consumer: cid.clone(),
            generation: group.generation,
        });
        group.update_member_timer(cx, &cid);
        group.trigger(cx, "join");
        group.progress(cx);
    }

    fn on_commit(&mut self, conn: ConnId, corr: i32, r: proto::CommitOffsetRequest) {
        let slot = self.cx.reserve(conn);
        if !r.group_id.is_empty() && !self.owns(&r.group_id) {
            // Every partition gets NOT_COORDINATOR; nothing is kept.
            let topics = r
                .topics
                .into_iter()
                .map(|t| proto::TopicErrors {
                    topic: t.topic,
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| proto::PartitionError {
                            partition: p.partition,
                            error_code: ErrorCode::NOT_COORDINATOR,
                        })
                        .collect(),
                })
                .collect();
            let response = NativeResponse::CommitOffset(proto::CommitOffsetResponse { topics });
            self.cx.respond(slot, corr, &response);
            return;
        }
        let hold_until = self.hold_for(&r.group_id);
        let cx = &mut self.cx;
        let gid = GroupId::new(&r.group_id);
        let non_member = r.consumer_id.is_empty() && r.generation == -1;
        let group = self.groups.get(&gid);
        let member = group.and_then(|g| g.members.get(r.consumer_id.as_str()));
        let mut accepted: Vec<(usize, usize, TopicPartition, offsets::OffsetValue)> = Vec::new();
        let mut response = proto::CommitOffsetResponse {
            topics: Vec::with_capacity(r.topics.len()),
        };
        for (ti, t) in r.topics.into_iter().enumerate() {
            let topic = TopicName::new(&t.topic);
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for (pi, p) in t.partitions.into_iter().enumerate() {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: p.partition,
                };
                let code = commit_check(
                    cx,
                    r.group_id.is_empty(),
                    group,
                    member,
                    non_member,
                    r.generation,
                    &tp,
                    &p,
                );
                if code.is_none() {
                    accepted.push((ti, pi, tp, (p.offset, p.metadata)));
                }
                partitions.push(proto::PartitionError {
                    partition: p.partition,
                    error_code: code,
                });
            }
            response.topics.push(proto::TopicErrors {
                topic: t.topic,
                partitions,
            });
        }
        if accepted.is_empty() {
            cx.respond(slot, corr, &NativeResponse::CommitOffset(response));
            return;
        }
        let group = self
            .groups
            .entry(gid.clone())
            .or_insert_with(|| Group::new(gid.clone(), hold_until));
        let mut waiting = Vec::with_capacity(accepted.len());
        for (ti, pi, tp, value) in accepted {
            waiting.push((ti, pi));
            let kind = if non_member {
                CommitKind::Reset
            } else {
                CommitKind::Explicit
            };
            group.accept_offset(cx, tp, value, Generation(r.generation), kind);
        }
        cx.next_waiter += 1;
        let id = cx.next_waiter;
        cx.waiters.insert(
            id,
            Waiter {
                slot,
                correlation_id: corr,
                response,
                waiting,
            },
        );
        group.add_waiter(cx, id);
    }

    fn on_fetch(&mut self, conn: ConnId, corr: i32, r: proto::FetchOffsetsRequest) {
        let slot = self.cx.reserve(conn);
        if r.group_id.is_empty() {
            let response = NativeResponse::FetchOffsets(proto::FetchOffsetsResponse {
                error_code: ErrorCode::INVALID_GROUP_ID,
                topics: Vec::new(),
            });
            self.cx.respond(slot, corr, &response);
            return;
        }
        if !self.owns(&r.group_id) {
            let response = NativeResponse::FetchOffsets(proto::FetchOffsetsResponse {
                error_code: ErrorCode::NOT_COORDINATOR,
                topics: Vec::new(),
            });
            self.cx.respond(slot, corr, &response);
            return;
        }
        let group = GroupId::new(&r.group_id);
        let scope = match &r.topics {
            None => FetchScope::WholeGroup,
            Some(topics) => FetchScope::Partitions(wire::partitions_from_wire(topics.clone())),
        };
        let op = self.cx.next_op();
        self.cx.ops.insert(
            op,
            Op::ClientFetch {
                slot,
                correlation_id: corr,
                group: group.clone(),
                topics: r.topics,
            },
        );
        self.cx.out.push(Output::FetchOffsets { op, group, scope });
    }

    fn on_leave(&mut self, conn: ConnId, corr: i32, r: proto::LeaveGroupRequest) {
        let slot = self.cx.reserve(conn);
        let code = if r.group_id.is_empty() {
            ErrorCode::INVALID_GROUP_ID
        } else if !self.owns(&r.group_id) {
            ErrorCode::NOT_COORDINATOR
        } else {
            match self.groups.get_mut(r.group_id.as_str()) {
                Some(g) if g.members.contains_key(r.consumer_id.as_str()) => {
                    g.leave(&mut self.cx, &ConsumerId::new(&r.consumer_id));
                    ErrorCode::NONE
                }
                _ => ErrorCode::UNKNOWN_MEMBER_ID,
            }
        };
        let response = NativeResponse::LeaveGroup(proto::LeaveGroupResponse { error_code: code });
        self.cx.respond(slot, corr, &response);
    }

    // ------------------------------------------------------------------ channel answers

    fn on_channel_frame(&mut self, ch: ChannelOf, bytes: Bytes) {
        let cx = &mut self.cx;
        let Some(g) = self.groups.get_mut(&ch.group) else {
            return;
        };
        let id = ch.consumer;
        let Some(m) = g.members.get_mut(&id) else {
            return;
        };
        if m.incarnation != ch.incarnation {
            return;
        }
        m.last_recv_ms = cx.now;
        let Some(outstanding) = m.outstanding.take() else {
            tracing::info!(group = %g.id, consumer = %id, "frame on the channel with no request outstanding");
            return g.fail_member(cx, &id, FailureReason::ProtocolViolation);
        };
        let (header, response) = match proto::decode_response_frame(bytes, outstanding.api_key(), 0)
        {
            Ok(x) => x,
            Err(e) => {
                tracing::info!(group = %g.id, consumer = %id, error = %e, "malformed answer on the channel");
                return g.fail_member(cx, &id, FailureReason::ProtocolViolation);
            }
        };
        if header.correlation_id != outstanding.corr() {
            tracing::info!(group = %g.id, consumer = %id, expected = outstanding.corr(), got = header.correlation_id, "wrong correlation id on the channel");
            return g.fail_member(cx, &id, FailureReason::ProtocolViolation);
        }
        match (outstanding, response) {
            (Outstanding::Heartbeat { .. }, NativeResponse::Heartbeat(r)) => {
                if !r.error_code.is_none() {
                    return g.fail_member(cx, &id, FailureReason::ErrorResponse);
                }
                accept_channel_offsets(g, cx, &id, r.offsets, false);
                if !r.fetchers_healthy {
                    return g.fail_member(cx, &id, FailureReason::FetchersUnhealthy);
                }
                g.pump(cx, &id);
            }
            (Outstanding::Stop { partitions, .. }, NativeResponse::StopFetcher(r)) => {
                if !r.error_code.is_none() {
                    return g.fail_member(cx, &id, FailureReason::ErrorResponse);
                }
                accept_channel_offsets(g, cx, &id, r.offsets, true);
                g.on_stopped(cx, &id, partitions);
                g.pump(cx, &id);
            }
            (Outstanding::Start { .. }, NativeResponse::StartFetcher(r)) => {
                if !r.error_code.is_none() {
                    return g.fail_member(cx, &id, FailureReason::ErrorResponse);
                }
                g.on_started(cx, &id);
                g.pump(cx, &id);
            }
            _ => g.fail_member(cx, &id, FailureReason::ProtocolViolation),
        }
    }

    // ------------------------------------------------------------------ slots

    /// The NOT_COORDINATOR message of a RegisterConsumer for `group`.
    fn not_coordinator_message(&self, group: &str) -> String {
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
    fn hold_for(&self, group: &str) -> Option<u64> {
        let slot = self.ownership.slot_of(group)?;
        self.takeover_until
            .get(&slot)
            .copied()
            .filter(|&until| until > self.cx.now)
    }

    /// Cluster mode: slot `slot` is now ours. Its groups start empty; the first
    /// rebalance of each waits for the end of the takeover wait (§6.8).
    fn on_slot_gained(&mut self, slot: u32, stopped_ms: u64) {
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
                .keys()
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
        self.cx.metric("slots_gained", 1);
    }

    /// Cluster mode: slot `slot` is no longer ours. Every group of the slot is dropped
    /// (§6.8): the channels of its consumers are closed, its timers removed, its
    /// accepted offsets not yet handed to the store discarded (the CommitOffset
    /// requests waiting for them get NOT_COORDINATOR); a batch already handed to the
    /// store answers its waiting requests when its result comes, and a rebalance
    /// fetch's result is ignored. No frame is sent for those groups afterwards.
    fn on_slot_lost(&mut self, slot: u32) {
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
        let ids: Vec<GroupId> = self
            .groups
            .keys()
            .filter(|g| proto::coordinator_slot(g.as_str(), count) == slot)
            .cloned()
            .collect();
        let (mut consumers, mut discarded) = (0, 0);
        let cx = &mut self.cx;
        for id in &ids {
            let Some(g) = self.groups.remove(id) else {
                continue;
            };
            tracing::info!(group = %id, slot, members = g.members.len(), "group dropped with its slot");
            for m in g.members.values() {
                cx.timers
                    .set(TimerKey::Member(g.id.clone(), m.id.clone()), None);
                if cx.conns.remove(&m.conn).is_some() {
                    cx.closing.insert(m.conn);
                    cx.out.push(Output::CloseConnection { conn: m.conn });
                }
                consumers += 1;
            }
            cx.timers.set(TimerKey::Group(g.id.clone()), None);
            cx.groups_with_pending.remove(&g.id);
            discarded += g.commits.pending.len();
            for w in g.commits.pending_waiters {
                cx.complete_waiter_with(w, ErrorCode::NOT_COORDINATOR);
            }
        }
        if !ids.is_empty() {
            let dropped: BTreeSet<&GroupId> = ids.iter().collect();
            for op in cx.ops.values_mut() {
                match op {
                    Op::Commit { group, waiters, .. } if dropped.contains(group) => {
                        *op = Op::DroppedCommit {
                            waiters: std::mem::take(waiters),
                        };
                    }
                    Op::RebalanceFetch { group } if dropped.contains(group) => {
                        *op = Op::DroppedFetch;
                    }
                    _ => {}
                }
            }
        }
        if cx.groups_with_pending.is_empty() {
            cx.timers.set(TimerKey::CommitTick, None);
        }
        self.drop_kafka_groups_of(slot, count);
        let cx = &mut self.cx;
        cx.event(Event::SlotLost {
            slot,
            groups: ids.len(),
            consumers,
            discarded_offsets: discarded,
        });
        cx.metric("slots_lost", 1);
    }

    // ------------------------------------------------------------------ topics, store

    /// Topics `lost` are gone: deleted (missing from [`Input::TopicsChanged`]) or
    /// re-created with a new id ([`Input::TopicIds`]). Offsets accepted for them and
    /// not yet handed to the store are dropped, in native and Kafka groups alike; the
    /// host removes what the store has, after every batch already handed to it
    /// (Kafka's `onPartitionsDeleted`).
    fn forget_topics(&mut self, lost: &BTreeSet<TopicName>) {
        if lost.is_empty() {
            return;
        }
        tracing::debug!(topics = ?lost, "topics gone: dropping their offsets not yet written");
        for g in self.groups.values_mut() {
            g.forget_topics(&mut self.cx, lost);
        }
        self.forget_kafka_commits_of(lost);
    }

    fn on_topics(&mut self, topics: BTreeMap<TopicName, u32>) {
        let old = std::mem::replace(&mut self.cx.topics, topics);
        let cx = &mut self.cx;
        let mut resolver = Resolver::new(&cx.topics, cx.config.exclude_internal_topics);
        let mut changed_groups = Vec::new();
        for g in self.groups.values_mut() {
            let mut changed = false;
            let mut union: BTreeSet<TopicName> = BTreeSet::new();
            for m in g.members.values_mut() {
                let resolved = resolver.resolve(&m.subscription);
                union.extend(m.topics.iter().cloned());
                union.extend(resolved.iter().cloned());
                if *resolved != *m.topics {
                    changed = true;
                    m.topics = resolved;
                }
            }
            if !changed {
                changed = union.iter().any(|t| old.get(t) != cx.topics.get(t));
            }
            if changed {
                changed_groups.push(g.id.clone());
            }
        }
        for id in changed_groups {
            if let Some(g) = self.groups.get_mut(&id) {
                g.trigger(&mut self.cx, "topic metadata changed");
                g.progress(&mut self.cx);
            }
        }
        self.consumer_topics_changed();
    }

    fn on_committed(&mut self, op: OpId, result: Result<(), StoreError>) {
        if self.kafka.offsets.has_op(op) {
            return self.on_kafka_committed(op, result);
        }
        match self.cx.ops.remove(&op) {
            Some(Op::Commit {
                group,
                records,
                waiters,
            }) => {
                if let Some(g) = self.groups.get_mut(&group) {
                    g.on_committed(&mut self.cx, op, records, waiters, result);
                } else {
                    for w in waiters {
                        self.cx.complete_waiter(w, result.is_err());
                    }
                }
            }
            Some(Op::DroppedCommit { waiters }) => {
                // The batch was handed to the store before the group's slot was lost:
                // the CommitOffset requests that waited for it get its real outcome
                // (NONE only if durable). Nothing else depends on it.
                tracing::debug!(%op, ok = result.is_ok(), "commit result of a group dropped with its slot");
                for w in waiters {
                    self.cx.complete_waiter(w, result.is_err());
                }
            }
            Some(other) => {
                tracing::warn!(%op, "commit result for a fetch operation");
                self.cx.ops.insert(op, other);
            }
            None => tracing::warn!(%op, "result of an unknown operation"),
        }
    }

    fn on_fetched(&mut self, op: OpId, result: Result<Vec<OffsetEntry>, StoreError>) {
        if self.kafka.offsets.has_op(op) {
            return self.on_kafka_fetched(op, result);
        }
        match self.cx.ops.remove(&op) {
            Some(Op::RebalanceFetch { group }) => {
                let Some(g) = self.groups.get_mut(&group) else {
                    return;
                };
                let result = result.map(|entries| {
                    entries
                        .into_iter()
                        .filter(|e| e.group == group && e.offset >= 0)
                        .map(|e| (e.tp, e.offset))
                        .collect::<BTreeMap<_, _>>()
                });
                g.on_fetched(&mut self.cx, op, result);
            }
            Some(Op::DroppedFetch) => {
                tracing::debug!(%op, "start offsets of a group dropped with its slot: ignored");
            }
            Some(Op::ClientFetch {
                slot,
                correlation_id,
                group,
                topics,
            }) => {
                let response = fetch_response(&self.cx, &group, topics, result);
                self.cx.respond(
                    slot,
                    correlation_id,
                    &NativeResponse::FetchOffsets(response),
                );
            }
            Some(other) => {
                tracing::warn!(%op, "fetch result for a commit operation");
                self.cx.ops.insert(op, other);
            }
            None => tracing::warn!(%op, "result of an unknown operation"),
        }
    }
}

/// The per-partition checks of a CommitOffset (docs/protocol.md §6.5), in order.
#[allow(clippy::too_many_arguments)]
fn commit_check(
    cx: &Ctx,
    group_id_empty: bool,
    group: Option<&Group>,
    member: Option<&Member>,
    non_member: bool,
    generation: i32,
    tp: &TopicPartition,
    p: &proto::PartitionOffset,
) -> ErrorCode {
    if group_id_empty {
        return ErrorCode::INVALID_GROUP_ID;
    }
    if non_member {
        if group.is_some_and(|g| !g.members.is_empty()) {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        }
    } else {
        let Some(m) = member else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        let Some(g) = group else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        if generation != g.generation.0 || generation != m.generation.0 {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        if !cx.exists(tp) {
            return ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
        }
        if !m.owned.contains(tp) {
            return if g.in_rebalance() && m.stopped_in_rebalance.contains(tp) {
                ErrorCode::REBALANCE_IN_PROGRESS
            } else {
                ErrorCode::ILLEGAL_GENERATION
            };
        }
    }
    if !cx.exists(tp) {
        return ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
    }
    if p.offset < 0 {
        return ErrorCode::INVALID_REQUEST;
    }
    if p.metadata
        .as_ref()
        .is_some_and(|m| m.len() > cx.config.max_metadata_bytes)
    {
        return ErrorCode::OFFSET_METADATA_TOO_LARGE;
    }
    ErrorCode::NONE
}

/// Offsets on the channel (Heartbeat and StopFetcher answers): accepted for partitions
/// the consumer owns in the coordinator's view. The channel is sequenced, so these
/// cannot be stale.
fn accept_channel_offsets(
    g: &mut Group,
    cx: &mut Ctx,
    id: &ConsumerId,
    offsets: Vec<proto::TopicOffsets>,
    urgent: bool,
) {
    let mut any = false;
    let Some(generation) = g.members.get(id).map(|m| m.generation) else {
        return;
    };
    for o in wire::offsets_from_wire(offsets) {
        let ok = g.members.get(id).is_some_and(|m| m.owned.contains(&o.tp))
            && cx.exists(&o.tp)
            && o.offset >= 0
            && o.metadata
                .as_ref()
                .is_none_or(|m| m.len() <= cx.config.max_metadata_bytes);
        if ok {
            g.accept_offset(
                cx,
                o.tp,
                (o.offset, o.metadata),
                generation,
                CommitKind::Channel,
            );
            any = true;
        }
    }
    if urgent && any {
        g.commits.urgent = true;
        g.flush_commits(cx);
    }
}

/// Builds a FetchOffsets response from the store's answer.
fn fetch_response(
    cx: &Ctx,
    group: &GroupId,
    topics: Option<Vec<proto::TopicPartitions>>,
    result: Result<Vec<OffsetEntry>, StoreError>,
) -> proto::FetchOffsetsResponse {
    let entries = match result {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(%group, error = %e, "offset fetch failed");
            return proto::FetchOffsetsResponse {
                error_code: ErrorCode::COORDINATOR_NOT_AVAILABLE,
                topics: Vec::new(),
            };
        }
    };
    let found: BTreeMap<TopicPartition, (i64, Option<String>)> = entries
        .into_iter()
        .filter(|e| &e.group == group)
        .map(|e| (e.tp, (e.offset, Some(e.metadata.unwrap_or_default()))))
        .collect();
    let topics = match topics {
        Some(requested) => requested
            .into_iter()
            .map(|t| {
                let topic = TopicName::new(&t.topic);
                let partitions = t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let tp = TopicPartition {
                            topic: topic.clone(),
                            partition: p,
                        };
                        match found.get(&tp) {
                            Some((offset, metadata)) => proto::FetchedOffset {
                                partition: p,
                                offset: *offset,
                                metadata: metadata.clone(),
                                error_code: ErrorCode::NONE,
                            },
                            None => proto::FetchedOffset {
                                partition: p,
                                offset: proto::FetchedOffset::NO_OFFSET,
                                metadata: None,
                                error_code: if cx.exists(&tp) {
                                    ErrorCode::NONE
                                } else {
                                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                                },
                            },
                        }
                    })
                    .collect();
                proto::TopicFetchedOffsets {
                    topic: t.topic,
                    partitions,
                }
            })
            .collect(),
        None => {
            let mut out: Vec<proto::TopicFetchedOffsets> = Vec::new();
            for (tp, (offset, metadata)) in found {
                let entry = proto::FetchedOffset {
                    partition: tp.partition,
                    offset,
                    metadata,
                    error_code: ErrorCode::NONE,
                };
                match out.last_mut() {
                    Some(last) if last.topic == tp.topic.as_str() => last.partitions.push(entry),
                    _ => out.push(proto::TopicFetchedOffsets {
                        topic: tp.topic.to_string(),
                        partitions: vec![entry],
                    }),
                }
            }
            out
        }
    };
    proto::FetchOffsetsResponse {
        error_code: ErrorCode::NONE,
        topics,
    }
}

/// A subscription as text, for operators.
fn describe(spec: &SubscriptionSpec) -> String {
    match spec {
        SubscriptionSpec::Static(list) => {
            let items: Vec<String> = list.iter().map(|(t, s)| format!("{t}({s})")).collect();
            format!("static: {}", items.join(", "))
        }
        SubscriptionSpec::Wildcard {
            pattern,
            blacklist,
            streams,
            ..
        } => format!(
            "{}: {pattern} ({streams} streams)",
            if *blacklist { "blacklist" } else { "whitelist" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinator_can_move_to_the_hosts_coordinator_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<Coordinator>();
    }

    #[test]
    fn an_invalid_config_is_refused() {
        let config = CoordinatorConfig {
            default_assignor: String::new(),
            ..CoordinatorConfig::default()
        };
        assert!(Coordinator::new(config, crate::AssignorSet::new()).is_err());
    }
}
