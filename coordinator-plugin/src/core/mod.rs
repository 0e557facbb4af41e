//! The coordinator state machine: [`Coordinator`] with its input dispatch, timers and
//! topic changes, and the routing of the offset store's results. Its other jobs have a
//! file each: the shared state [`Ctx`] (`ctx`: the read side group environments are built
//! from, and private bookkeeping — connections, the operation table, outputs — behind
//! methods), the one group table of every protocol
//! ([`groups`]: `Group::{Native, Classic, Consumer, Share}` and what every group answers), the
//! one commit path of every group type ([`commits`]: the group's validation, the
//! per-group commit queue, the result's answers), the operator snapshots (`snapshot`),
//! the coordinator slots it owns in cluster mode ([`Ownership`], `slots`) and the
//! connections' answer slots (`conn`). Group behaviour is by type: native groups in
//! [`native`] (the pure group and its rebalances, its pending batch, what it reads and
//! its adapter, the native requests by API family, the channel answers), Kafka's
//! classic, KIP-848 and share groups and Kafka's group APIs in `kafka`. Every engine
//! returns the one result shape (`result`: its answer and its effects in order —
//! answers, timer changes, store operations, counters), which the one applier
//! (`apply`, `Ctx::apply`) carries out. Every offset-store operation in flight is an
//! [`Op`] in one table, and the store's results are dispatched on it.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use drover_protocol as proto;
use drover_protocol::{NativeRequest, NativeResponse};

mod apply;
mod assigning;
mod commits;
mod conn;
mod ctx;
mod drift;
mod groups;
mod kafka;
mod native;
pub(crate) mod rebalance_history;
mod result;
mod slots;
mod snapshot;
mod topic_scope;
mod txn_completion;
mod txn_offsets;

pub(crate) use ctx::{Ctx, Op};
pub use slots::Ownership;
pub use snapshot::{GroupSnapshot, MemberSnapshot};

use groups::{Group, Groups};
use native::fetch_response;

use crate::assignors::Assignors;
use crate::config::{ConfigError, CoordinatorConfig};
use crate::io::{FailureReason, Input, Output};
use crate::subscription::Resolver;
use crate::types::{ConnId, ConsumerId, GroupId, OffsetEntry, OpId, StoreError, TopicName};

/// What a deadline is for: every deadline of the coordinator, native, classic and
/// KIP-848, is one entry of the timer table [`Ctx::timers`], under one of these keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum TimerKey {
    /// Write pending Heartbeat offsets.
    CommitTick,
    /// A group's debounced rebalance, retry, or zombie release.
    Group(GroupId),
    /// A member's heartbeat or session deadline.
    Member(GroupId, ConsumerId),
    /// A classic Kafka group's deadline.
    Classic(GroupId, kafka::ClassicTimer),
    /// A KIP-848 member's session deadline, or its rebalance deadline when earlier
    /// (group, member id).
    ConsumerMember(GroupId, String),
    /// A share group member's session deadline (group, member id).
    ShareMember(GroupId, String),
    /// When the topic scope of a connection a pattern member uses is due for a refresh
    /// ([`topic_scope`]).
    TopicScope(ConnId),
}

/// The consumer group coordinator: a deterministic state machine. Feed it inputs with
/// [`Coordinator::handle`]; execute the outputs; deliver [`Input::Timer`] at
/// [`Coordinator::poll_timeout`].
pub struct Coordinator {
    cx: Ctx,
    /// Every group, of every protocol.
    groups: Groups,
    ownership: Ownership,
    /// Cluster mode: per owned slot, until when its groups may not rebalance (the
    /// takeover wait of docs/protocol.md §6.8).
    takeover_until: BTreeMap<u32, u64>,
    /// Kafka's classic and KIP-848 groups and Kafka offset requests in flight.
    kafka: kafka::KafkaGroups,
    /// Transactions' outcomes whose offsets are on their way to the store.
    completions: txn_completion::Completions,
    /// When each native group was last re-run because its inputs drifted.
    drift: drift::DriftClock,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("groups", &self.groups.len())
            .field("connections", &self.cx.connection_count())
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
        let coordinator = Coordinator {
            cx: Ctx::new(config, Box::new(assignors)),
            groups: Groups::default(),
            ownership,
            takeover_until: BTreeMap::new(),
            kafka: kafka::KafkaGroups::default(),
            completions: txn_completion::Completions::default(),
            drift: drift::DriftClock::default(),
        };
        coordinator.warn_rerun_assignors_not_loaded();
        Ok(coordinator)
    }

    /// The names in `rerun_on_drift_ms` that are not loaded assignors
    /// ([`CoordinatorConfig::rerun_assignors_not_loaded`]).
    pub fn rerun_assignors_not_loaded(&self) -> Vec<&str> {
        let assignors = &self.cx.assignors;
        self.cx
            .config
            .rerun_assignors_not_loaded(|name| assignors.contains(name))
    }

    /// Logs a warning for each `rerun_on_drift_ms` name that is not a loaded assignor:
    /// such an entry re-runs nothing (and setting the table replaced the default). The
    /// default table is not the operator's doing: it names `load-aware`, which a broker
    /// without that plugin simply does not run, so it is not warned about.
    fn warn_rerun_assignors_not_loaded(&self) {
        if self.cx.config.rerun_on_drift_ms == CoordinatorConfig::default().rerun_on_drift_ms {
            return;
        }
        for name in self.rerun_assignors_not_loaded() {
            tracing::warn!(
                assignor = name,
                "rerun_on_drift_ms names an assignor that is not loaded: it re-runs \
                 nothing until a rescan of the plugin directory loads it (a typo? the \
                 table replaces the default, so list every assignor to re-run)"
            );
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.cx.config
    }

    /// Replaces the loaded assignors (the host rescanned its plugin directory) and,
    /// when `default_assignor` is not empty, the default. Rebalances that start from now
    /// on use the new set; assignments already made stay. A group whose assignor is no
    /// longer loaded falls back to the default at its next rebalance (with a warning and
    /// the `assignor_fallbacks` counter). Nothing is sent, so no outputs.
    pub fn replace_assignors(
        &mut self,
        assignors: impl Assignors + Send + 'static,
        default_assignor: &str,
    ) {
        let inactive_before: BTreeSet<String> = self
            .rerun_assignors_not_loaded()
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.cx.assignors = Box::new(assignors);
        if !default_assignor.is_empty() {
            self.cx.config.default_assignor = default_assignor.to_owned();
        }
        tracing::info!(
            default_assignor = self.cx.config.default_assignor,
            "the set of loaded assignors changed"
        );
        let inactive_now: BTreeSet<&str> = self.rerun_assignors_not_loaded().into_iter().collect();
        for name in self.cx.config.rerun_on_drift_ms.keys() {
            match (
                inactive_before.contains(name),
                inactive_now.contains(name.as_str()),
            ) {
                (true, false) => tracing::info!(
                    assignor = name.as_str(),
                    "rerun_on_drift_ms: the assignor is loaded now, so its groups are \
                     re-run when their inputs drift"
                ),
                (false, true) => tracing::warn!(
                    assignor = name.as_str(),
                    "rerun_on_drift_ms: the assignor is no longer loaded, so its entry \
                     re-runs nothing until a rescan loads it again"
                ),
                _ => {}
            }
        }
    }

    /// The topics as last reported.
    pub fn topics(&self) -> &BTreeMap<TopicName, u32> {
        &self.cx.topics
    }

    /// Handles one input at `now_ms` (a monotonic clock; a value below an earlier one is
    /// treated as the earlier one) and returns the outputs to execute, in order.
    pub fn handle(&mut self, now_ms: u64, input: Input) -> Vec<Output> {
        self.cx.now = self.cx.now.max(now_ms);
        self.run_timers();
        match input {
            Input::Frame { conn, bytes } => self.on_frame(conn, bytes),
            Input::ConnectionOpened { conn, peer } => {
                self.cx.open_connection(conn, peer);
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
            Input::OffsetsDeleted { op, result } => self.on_deleted(op, result),
            Input::TopicIds { ids } => {
                let lost: BTreeSet<TopicName> = self
                    .kafka
                    .topic_ids
                    .iter()
                    .filter(|(t, id)| ids.get(*t) != Some(*id))
                    .map(|(t, _)| t.clone())
                    .collect();
                self.kafka.set_topic_ids(ids);
                self.forget_topics(&lost);
            }
            Input::SlotGained { slot, stopped_ms } => self.on_slot_gained(slot, stopped_ms),
            Input::SlotLost { slot } => self.on_slot_lost(slot),
            Input::PartitionStats(stats) => self.on_partition_stats(stats),
            Input::TxnOffsetsStaged { op, result } => {
                let taken = self
                    .cx
                    .take_op(op, "staging", |o| matches!(o, Op::StageTxn(_)));
                if let Some(Op::StageTxn(wait)) = taken {
                    self.on_txn_staged(op, wait, result);
                }
            }
            Input::TxnOffsetsPending { pending } => self.on_txn_pending(pending),
            Input::TxnCompleted {
                op,
                producer,
                committed,
            } => self.on_txn_completed(op, producer, committed),
            Input::AssignorDone { call, result } => self.on_assignor_done(call, result),
            Input::TopicScope { conn, topics } => self.on_topic_scope(conn, topics),
        }
        self.settle();
        self.cx.take_outputs()
    }

    /// The result of an assignor call handed to the host: to the group that made it,
    /// whichever its type; dropped (with a debug line) when the call or the group is
    /// unknown.
    fn on_assignor_done(
        &mut self,
        call: u64,
        result: Result<drover_abi::assignor::Assignment, drover_abi::PluginError>,
    ) {
        let Some(group) = self.cx.calls.finished(call) else {
            tracing::debug!(call, "result of an unknown assignor call");
            return;
        };
        match self.groups.get(&group) {
            Some(Group::Consumer(_)) => self.consumer_assignor_done(&group, call, result),
            Some(Group::Native(_)) => {
                if let Some(g) = self.groups.native_mut(&group) {
                    self.cx
                        .native(g, |g, env, fx| g.assignor_done(env, fx, call, result));
                }
            }
            Some(Group::Share(_)) => self.share_assignor_done(&group, call, result),
            Some(Group::Classic(_)) | None => {
                tracing::debug!(%group, call, "assignor result for a group that no longer waits for it");
            }
        }
    }

    /// When the coordinator next needs [`Input::Timer`], if ever (same clock as
    /// `now_ms`).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.cx.timers.next()
    }

    /// Runs every due timer in deadline order; the KIP-848 members whose timers fired
    /// are handed to their engine together at the end, so that each group that loses
    /// members recomputes its target once.
    fn run_timers(&mut self) {
        // A handler that keeps re-arming a timer in the past would spin the host's
        // coordinator thread; the budget turns such a bug into a logged delay.
        let mut budget = 1_000_000u32;
        let mut consumer_members = Vec::new();
        let mut share_members = Vec::new();
        while let Some(key) = self.cx.timers.pop_due(self.cx.now) {
            budget -= 1;
            if budget == 0 {
                tracing::error!(?key, "timer livelock; deferring timers by 1 ms");
                debug_assert!(false, "timer livelock on {key:?}");
                self.cx.timers.set(key, Some(self.cx.now + 1));
                break;
            }
            match key {
                TimerKey::CommitTick => self.commit_tick(),
                TimerKey::Group(id) => {
                    if let Some(g) = self.groups.native_mut(&id) {
                        self.cx.native(g, |g, env, fx| g.on_timer(env, fx));
                    }
                }
                TimerKey::Member(gid, cid) => {
                    if let Some(g) = self.groups.native_mut(&gid) {
                        self.cx
                            .native(g, |g, env, fx| g.on_member_timer(env, fx, &cid));
                    }
                }
                TimerKey::Classic(gid, timer) => self.on_classic_timer(&gid, timer),
                TimerKey::ConsumerMember(gid, member) => consumer_members.push((gid, member)),
                TimerKey::ShareMember(gid, member) => share_members.push((gid, member)),
                TimerKey::TopicScope(conn) => self.topic_scope_due(conn),
            }
        }
        if !consumer_members.is_empty() {
            self.on_consumer_timers(consumer_members);
        }
        if !share_members.is_empty() {
            self.on_share_timers(share_members);
        }
    }

    /// Runs what handlers left for later: channels to pump, timers that became due.
    fn settle(&mut self) {
        for _ in 0..64 {
            if !self.cx.has_to_pump() && self.cx.timers.next().is_none_or(|t| t > self.cx.now) {
                return;
            }
            while let Some(ch) = self.cx.pop_to_pump() {
                if let Some(g) = self.groups.native_mut(&ch.group) {
                    if g.members
                        .get(&ch.consumer)
                        .is_some_and(|m| m.incarnation == ch.incarnation)
                    {
                        self.cx
                            .native(g, |g, env, fx| g.pump(env, fx, &ch.consumer));
                    }
                }
            }
            self.run_timers();
        }
    }

    fn commit_tick(&mut self) {
        for id in self.cx.pending_groups() {
            match self.groups.native_mut(&id) {
                Some(g) => self.cx.native(g, |g, env, fx| g.flush_commits(env, fx)),
                None => self.cx.set_pending(&id, false),
            }
        }
        self.cx.rearm_commit_tick();
    }

    fn on_closed(&mut self, conn: ConnId) {
        self.forget_topic_scope(conn);
        if let Some(ch) = self.cx.connection_closed(conn) {
            if let Some(g) = self.groups.native_mut(&ch.group) {
                if g.members
                    .get(&ch.consumer)
                    .is_some_and(|m| m.incarnation == ch.incarnation)
                {
                    self.cx.native(g, |g, env, fx| {
                        g.fail_member(env, fx, &ch.consumer, FailureReason::ChannelClosed);
                    });
                }
            }
        }
    }

    fn on_frame(&mut self, conn: ConnId, bytes: Bytes) {
        if self.cx.is_closing(conn) {
            return;
        }
        match self.cx.channel_of(conn) {
            Some(ch) => self.on_channel_frame(ch, bytes),
            None => self.on_request(conn, bytes),
        }
    }

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
            NativeRequest::DescribeRebalances(r) => {
                let slot = self.cx.reserve(conn);
                let response = NativeResponse::DescribeRebalances(self.describe_rebalances(&r));
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
        for g in self.groups.natives_mut() {
            self.cx
                .native(g, |g, env, fx| g.forget_topics(env, fx, lost));
        }
        for g in self.groups.consumers_mut() {
            g.forget_committed(lost);
        }
        self.forget_queued_commits_of(lost);
        self.groups.txn.forget_topics(lost);
    }

    fn on_topics(&mut self, topics: BTreeMap<TopicName, u32>) {
        let old = std::mem::replace(&mut self.cx.topics, topics);
        let cx = &mut self.cx;
        let mut resolver = Resolver::new(&cx.topics, cx.config.exclude_internal_topics);
        let mut changed_groups = Vec::new();
        for g in self.groups.natives_mut() {
            let mut changed = false;
            let mut union: BTreeSet<TopicName> = BTreeSet::new();
            for m in g.members.values_mut_unordered() {
                let resolved = topic_scope::scoped(
                    resolver.resolve(&m.subscription),
                    &m.subscription,
                    cx.scopes.get(m.conn),
                );
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
            if let Some(g) = self.groups.native_mut(&id) {
                self.cx.native(g, |g, env, fx| {
                    g.trigger(env, fx, "topic metadata changed");
                    g.progress(env, fx);
                });
            }
        }
        self.consumer_topics_changed();
        self.share_topics_changed();
        self.refresh_topic_scopes();
    }

    /// The store's answer to [`Output::CommitOffsets`] `op`, dispatched on its [`Op`].
    fn on_committed(&mut self, op: OpId, result: Result<(), StoreError>) {
        let taken = self
            .cx
            .take_op(op, "commit", |o| matches!(o, Op::Commit { .. }));
        if let Some(Op::Commit {
            group,
            records,
            waiters,
            source,
        }) = taken
        {
            self.on_commit_result(op, group, records, waiters, source, result);
        }
    }

    /// The store's answer to [`Output::FetchOffsets`] `op`, dispatched on its [`Op`].
    fn on_fetched(&mut self, op: OpId, result: Result<Vec<OffsetEntry>, StoreError>) {
        let taken = self.cx.take_op(op, "fetch", |o| {
            matches!(
                o,
                Op::RebalanceFetch { .. }
                    | Op::DroppedFetch
                    | Op::ClientFetch { .. }
                    | Op::KafkaFetch { .. }
            )
        });
        match taken {
            Some(Op::RebalanceFetch { group }) => {
                let Some(g) = self.groups.native_mut(&group) else {
                    return;
                };
                let result = result.map(|entries| {
                    entries
                        .into_iter()
                        .filter(|e| e.group == group && e.offset >= 0)
                        .map(|e| (e.tp, e.offset))
                        .collect::<BTreeMap<_, _>>()
                });
                self.cx
                    .native(g, |g, env, fx| g.on_fetched(env, fx, op, result));
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
            Some(Op::KafkaFetch { wait, index }) => self.on_kafka_fetched(op, wait, index, result),
            Some(Op::Commit { .. } | Op::DeleteOffsets(_) | Op::StageTxn(_)) | None => {}
        }
    }

    /// The store's answer to [`Output::DeleteOffsets`] `op`, dispatched on its [`Op`].
    fn on_deleted(&mut self, op: OpId, result: Result<u64, StoreError>) {
        let taken = self
            .cx
            .take_op(op, "delete", |o| matches!(o, Op::DeleteOffsets(_)));
        if let Some(Op::DeleteOffsets(wait)) = taken {
            self.on_offsets_deleted(op, wait, result);
        }
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

    /// Loaded assignors by name, for the check of `rerun_on_drift_ms`.
    struct Named(&'static [&'static str]);

    impl Assignors for Named {
        fn contains(&self, name: &str) -> bool {
            self.0.contains(&name)
        }

        fn assign(
            &self,
            name: &str,
            _: &drover_abi::AssignInput,
        ) -> Result<drover_abi::Assignment, drover_abi::PluginError> {
            Err(drover_abi::PluginError::invalid_input(format!("no {name}")))
        }
    }

    /// A `rerun_on_drift_ms` name that is not a loaded assignor starts the coordinator
    /// (a plugin may come with a rescan) but is reported, at startup and again when
    /// the loaded assignors change.
    #[test]
    fn rerun_on_drift_names_not_loaded_are_reported() {
        let config = CoordinatorConfig::from_toml(
            "default_assignor = \"range\"\nrerun_on_drift_ms = { nosuch = 5000, sticky = 5000 }\n",
        )
        .unwrap();
        let mut k = Coordinator::new(config, Named(&["range", "sticky"])).unwrap();
        assert_eq!(k.rerun_assignors_not_loaded(), ["nosuch"]);
        k.replace_assignors(Named(&["range", "nosuch"]), "");
        assert_eq!(k.rerun_assignors_not_loaded(), ["sticky"]);
    }
}
