//! The coordinator's shared state, [`Ctx`]: everything but the groups. Its read side
//! (configuration, assignors, topics, clock, the one timer table, the commit queue) is
//! what each group type's environment is built from ([`Ctx::native_call`] for native
//! groups), beside the effect list lent to each engine call (`lender`); its bookkeeping
//! is private behind methods: connections (answering requests on their answer slots,
//! channels, connections closing or free to pump), the one operation table and its ids
//! ([`Op`], [`OpIds`]), the native groups waiting for the commit tick, and the outputs
//! of the input being handled, with events and metrics. Engines' results are applied
//! by `Ctx::apply` (`core/apply.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use drover_protocol as proto;
use drover_protocol::NativeResponse;

use super::commits::{BatchSource, CommitQueue, CommitWaiter};
use super::conn::{ChannelOf, Conn, ReadyAnswer, SlotRef};
use super::kafka::DeleteWait;
use super::native::NativeEnv;
use super::result::{EffectLender, Effects};
use super::TimerKey;

use super::assigning::{AssignorCalls, GroupAssignors};
use crate::assignors::Assignors;
use crate::config::CoordinatorConfig;
use crate::io::{CoordinatorCounter, Event, Output};
use crate::log_limit::LogLimit;
use crate::timers::Timers;
use crate::types::{ConnId, GroupId, OffsetEntry, OpId, TopicName, TopicPartition};
use crate::wire;

/// An offset-store operation in flight, of either protocol: the one table ([`Ctx`]'s,
/// [`Ctx::add_op`], [`Ctx::take_op`]) the store's results are dispatched from, by
/// variant. A variant holds what its result completes (a commit batch carries its
/// waiting requests), or the key of the request waiting for several results: a Kafka
/// OffsetFetch of several groups in the Kafka side's fetch waits, a DeleteGroups in its
/// own waits.
#[derive(Debug)]
pub(crate) enum Op {
    /// A batch of a group id's commits ([`Output::CommitOffsets`]), of either protocol:
    /// the only commit operation, at most one per group id in flight
    /// ([`CommitQueue`]). Its result answers `waiters`; `source` says what else it does.
    Commit {
        group: GroupId,
        records: Vec<OffsetEntry>,
        waiters: Vec<CommitWaiter>,
        source: BatchSource,
    },
    /// A native group's start offsets for a rebalance ([`Output::FetchOffsets`]).
    RebalanceFetch { group: GroupId },
    /// A rebalance fetch of a group dropped with its slot: the result is ignored.
    DroppedFetch,
    /// A native FetchOffsets request.
    ClientFetch {
        slot: SlotRef,
        correlation_id: i32,
        group: GroupId,
        topics: Option<Vec<proto::TopicPartitions>>,
    },
    /// One group's read of a Kafka OffsetFetch: entry `index` of the request waiting as
    /// `wait` ([`Output::FetchOffsets`]).
    KafkaFetch { wait: u64, index: usize },
    /// A Kafka OffsetDelete, or one group of a DeleteGroups ([`Output::DeleteOffsets`]).
    DeleteOffsets(DeleteWait),
    /// A TxnOffsetCommit whose offsets the host records with the transaction
    /// ([`Output::StageTxnOffsets`]).
    StageTxn(super::kafka::StageWait),
}

/// The coordinator's shared state: everything but the groups. Its read side — the
/// configuration, assignors, topics, clock and the one timer table — is open to the
/// `core` module, from which each group type's environment is built (native groups:
/// [`Ctx::native_call`]; the others in their glue, `classic_api`, `consumer_api`,
/// `share_api`), with the effect list each call fills (`lender`); no engine holds the
/// timer table, whose changes are effects. Its bookkeeping is private, behind methods: connections (answer slots,
/// channels, those closing, those to pump), the operation table and its ids, the
/// groups with offsets waiting for the commit tick, the outputs of the current input.
pub(crate) struct Ctx {
    pub(super) config: CoordinatorConfig,
    pub(super) assignors: Box<dyn Assignors + Send>,
    /// The topics and their partition counts, as last reported.
    pub(super) topics: BTreeMap<TopicName, u32>,
    /// The host's partition table, as last reported (`Input::PartitionStats`).
    pub(super) partition_stats: crate::PartitionStats,
    /// Now: the coordinator's monotonic clock, ms (set by `Coordinator::handle`).
    pub(super) now: u64,
    /// Every deadline of the coordinator ([`TimerKey`]).
    pub(super) timers: Timers<TimerKey>,
    /// Per group id, the one `CommitOffsets` in flight, whichever path sent it (a
    /// native group's batch or Kafka OffsetCommits), and the commits queued behind it:
    /// the ABI promises the host at most one per group.
    pub(super) commits: CommitQueue,
    conns: HashMap<ConnId, Conn>,
    /// Connections the coordinator closed, until the host reports them closed.
    closing: HashSet<ConnId>,
    /// Channels whose connection became free to carry a request.
    to_pump: Vec<ChannelOf>,
    /// Every offset-store operation in flight, native and Kafka.
    ops: HashMap<OpId, Op>,
    /// The operation counter and the spare effect list, lent to each call of a group
    /// engine (the glue of an engine whose environment borrows other fields of `Ctx`
    /// destructures it and borrows this one beside them).
    pub(super) lender: EffectLender,
    /// Native groups with accepted offsets waiting for the commit tick.
    groups_with_pending: BTreeSet<GroupId>,
    /// The outputs of the input being handled, in order.
    out: Vec<Output>,
    next_incarnation: u64,
    /// The rate limit of [`Ctx::reject`]'s log line.
    reject_log: LogLimit,
    /// Assignor calls started during the input being handled, and those in flight
    /// ([`super::assigning`]).
    pub(super) calls: AssignorCalls,
}

impl Ctx {
    /// The shared state of a coordinator with no connections, topics or operations.
    pub(super) fn new(config: CoordinatorConfig, assignors: Box<dyn Assignors + Send>) -> Self {
        Ctx {
            config,
            assignors,
            topics: BTreeMap::new(),
            partition_stats: crate::PartitionStats::default(),
            now: 0,
            timers: Timers::default(),
            commits: CommitQueue::default(),
            conns: HashMap::new(),
            closing: HashSet::new(),
            to_pump: Vec::new(),
            ops: HashMap::new(),
            lender: EffectLender::default(),
            groups_with_pending: BTreeSet::new(),
            out: Vec::new(),
            next_incarnation: 0,
            reject_log: LogLimit::new(1_000),
            calls: AssignorCalls::default(),
        }
    }

    /// The environment of one call of native group `group` and the empty effect list
    /// it fills (lent the operation counter).
    pub(super) fn native_call(&mut self, group: &GroupId) -> (NativeEnv<'_>, Effects<'_>) {
        let env = NativeEnv::new(
            self.now,
            &self.config,
            &self.topics,
            &self.partition_stats,
            GroupAssignors::new(&*self.assignors, &self.calls),
            &self.conns,
            self.commits.busy(group),
        );
        (env, self.lender.effects())
    }

    pub(super) fn next_op(&mut self) -> OpId {
        self.lender.next_op()
    }

    /// Puts offset-store operation `op` into the operation table under a new id, which
    /// it returns (the caller outputs the request to the store with that id).
    pub(super) fn add_op(&mut self, op: Op) -> OpId {
        let id = self.next_op();
        self.ops.insert(id, op);
        id
    }

    /// [`Ctx::add_op`] under an id taken already (an [`OpIds`] lent to group code).
    pub(super) fn add_op_as(&mut self, id: OpId, op: Op) {
        self.ops.insert(id, op);
    }

    /// Takes operation `id` out of the table for its `result` ("commit", "fetch",
    /// "delete") when `wanted` accepts it; an operation of another kind stays, with a
    /// warning, as does a result of an unknown operation.
    pub(super) fn take_op(
        &mut self,
        id: OpId,
        result: &str,
        wanted: impl Fn(&Op) -> bool,
    ) -> Option<Op> {
        match self.ops.get(&id) {
            Some(op) if wanted(op) => self.ops.remove(&id),
            Some(_) => {
                tracing::warn!(op = %id, "{result} result for another kind of operation");
                None
            }
            None => {
                tracing::warn!(op = %id, "result of an unknown operation");
                None
            }
        }
    }

    /// Native groups `dropped` went with their slot: their batch in flight only answers
    /// its waiters ([`BatchSource::Dropped`]) and their rebalance fetch's result is
    /// ignored ([`Op::DroppedFetch`]).
    pub(super) fn forget_ops_of(&mut self, dropped: &BTreeSet<&GroupId>) {
        for op in self.ops.values_mut() {
            match op {
                Op::Commit {
                    group,
                    source: source @ BatchSource::NativeGroup,
                    ..
                } if dropped.contains(group) => *source = BatchSource::Dropped,
                Op::RebalanceFetch { group } if dropped.contains(group) => {
                    *op = Op::DroppedFetch;
                }
                _ => {}
            }
        }
    }

    /// Adds an output.
    pub(super) fn output(&mut self, output: Output) {
        self.out.push(output);
    }

    /// Adds outputs, in order.
    pub(super) fn outputs(&mut self, outputs: impl IntoIterator<Item = Output>) {
        self.out.extend(outputs);
    }

    /// The outputs of the input handled, in order; the list is empty afterwards.
    /// The outputs of the input handled, with a [`Output::RunAssignor`] for each
    /// assignor call started during it.
    pub(super) fn take_outputs(&mut self) -> Vec<Output> {
        for job in self.calls.take_started() {
            self.out.push(Output::RunAssignor(std::sync::Arc::new(job)));
        }
        std::mem::take(&mut self.out)
    }

    /// A new registration's incarnation, unique for the coordinator's lifetime.
    pub(super) fn next_incarnation(&mut self) -> u64 {
        self.next_incarnation += 1;
        self.next_incarnation
    }

    pub(crate) fn event(&mut self, event: Event) {
        self.out.push(Output::Event(event));
    }

    pub(crate) fn metric(&mut self, counter: CoordinatorCounter, value: u64) {
        self.out.push(Output::Metric { counter, value });
    }

    /// Whether native group `group` has offsets waiting for the commit tick; with
    /// `true` the tick is armed ([`Ctx::arm_commit_tick`]).
    pub(super) fn set_pending(&mut self, group: &GroupId, pending: bool) {
        if pending {
            self.groups_with_pending.insert(group.clone());
            self.arm_commit_tick();
        } else {
            self.groups_with_pending.remove(group);
        }
    }

    /// The native groups with offsets waiting for the commit tick, in id order.
    pub(super) fn pending_groups(&self) -> Vec<GroupId> {
        self.groups_with_pending.iter().cloned().collect()
    }

    /// The commit tick fired (its group flushed, or gone): armed again while any group
    /// still has offsets waiting, else cleared.
    pub(super) fn rearm_commit_tick(&mut self) {
        if self.groups_with_pending.is_empty() {
            self.timers.set(TimerKey::CommitTick, None);
        } else {
            self.arm_commit_tick();
        }
    }

    /// Arms the commit tick ([`TimerKey::CommitTick`]) at now + `commit_interval_ms`,
    /// unless it is armed already: native groups' accepted Heartbeat offsets are written
    /// at most `commit_interval_ms` after they were accepted (docs/protocol.md §6.5).
    pub(crate) fn arm_commit_tick(&mut self) {
        if !self.timers.is_set(&TimerKey::CommitTick) {
            let at = self.now.saturating_add(self.config.commit_interval_ms);
            self.timers.set(TimerKey::CommitTick, Some(at));
        }
    }

    pub(super) fn reserve(&mut self, conn: ConnId) -> SlotRef {
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
    /// Logged at info at most once a second, with `suppressed` the refusals logged at
    /// debug only since the last such line (a client can send refused frames at will).
    pub(super) fn reject(&mut self, conn: ConnId, message: String) {
        match self.reject_log.allow(self.now) {
            Some(suppressed) => tracing::info!(
                %conn,
                reason = message,
                suppressed,
                "closing connection"
            ),
            None => tracing::debug!(%conn, reason = message, "closing connection"),
        }
        self.conns.remove(&conn);
        crate::shrink::map(&mut self.conns);
        self.closing.insert(conn);
        self.out.push(Output::CloseConnection { conn });
        self.event(Event::ConnectionRejected { conn, message });
    }

    /// The host opened connection `conn` from `peer`.
    pub(super) fn open_connection(&mut self, conn: ConnId, peer: String) {
        self.conns.entry(conn).or_default().peer = Some(peer);
    }

    /// The host reports connection `conn` closed: forgotten. Returns the channel it
    /// was, unless the coordinator had closed it itself (then its member is gone
    /// already).
    pub(super) fn connection_closed(&mut self, conn: ConnId) -> Option<ChannelOf> {
        if self.closing.remove(&conn) {
            crate::shrink::set(&mut self.closing);
            return None;
        }
        let channel = self.conns.remove(&conn).and_then(|c| c.channel);
        crate::shrink::map(&mut self.conns);
        channel
    }

    /// Whether the coordinator closed `conn` (its frames are ignored until the host
    /// reports it closed).
    pub(super) fn is_closing(&self, conn: ConnId) -> bool {
        self.closing.contains(&conn)
    }

    /// The channel connection `conn` is, if RegisterConsumer made it one.
    pub(super) fn channel_of(&self, conn: ConnId) -> Option<ChannelOf> {
        self.conns.get(&conn).and_then(|c| c.channel.clone())
    }

    /// Connection `conn` is member `channel`'s channel from now on.
    pub(super) fn set_channel(&mut self, conn: ConnId, channel: ChannelOf) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.channel = Some(channel);
        }
    }

    /// A removed member's connection: forgotten; with `close`, closed
    /// ([`Output::CloseConnection`]) and its frames ignored until the host reports it
    /// closed.
    pub(super) fn drop_connection(&mut self, conn: ConnId, close: bool) {
        self.conns.remove(&conn);
        crate::shrink::map(&mut self.conns);
        if close {
            self.closing.insert(conn);
            self.out.push(Output::CloseConnection { conn });
        }
    }

    /// Closes connection `conn` if it is open (a channel of a group dropped with its
    /// slot).
    pub(super) fn close_if_open(&mut self, conn: ConnId) -> bool {
        let open = self.conns.contains_key(&conn);
        if open {
            self.drop_connection(conn, true);
        }
        open
    }

    /// The next channel whose connection became free to carry a request.
    pub(super) fn pop_to_pump(&mut self) -> Option<ChannelOf> {
        self.to_pump.pop()
    }

    /// Whether a channel waits to be pumped.
    pub(super) fn has_to_pump(&self) -> bool {
        !self.to_pump.is_empty()
    }

    /// The client's IP address on connection `conn`, if the host told it.
    pub(super) fn peer(&self, conn: ConnId) -> Option<&str> {
        self.conns.get(&conn).and_then(|c| c.peer.as_deref())
    }

    /// How many connections are open.
    pub(super) fn connection_count(&self) -> usize {
        self.conns.len()
    }

    pub(super) fn exists(&self, tp: &TopicPartition) -> bool {
        partition_exists(&self.topics, tp)
    }
}

/// Whether `tp` is a partition of `topics` (a known topic, 0 ≤ partition < its count).
pub(crate) fn partition_exists(topics: &BTreeMap<TopicName, u32>, tp: &TopicPartition) -> bool {
    topics
        .get(&tp.topic)
        .is_some_and(|&n| tp.partition >= 0 && i64::from(tp.partition) < i64::from(n))
}

/// The coordinator's one source of operation ids ([`OpId`]), unique for its lifetime.
#[derive(Debug, Default)]
pub(crate) struct OpIds {
    last: u64,
}

impl OpIds {
    /// The next id.
    pub(crate) fn next(&mut self) -> OpId {
        self.last += 1;
        OpId(self.last)
    }
}
