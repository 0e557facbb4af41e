//! The coordinator's shared state, [`Ctx`]: everything but the groups (configuration,
//! assignors, topics, connections, timers, the offset-store operations in flight,
//! outputs), split off so group code can borrow both, with its helpers: answering
//! requests on their connection's slots, outputs for metrics and events, the effective
//! assignor of a rebalance, operation ids.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use drover_protocol as proto;
use drover_protocol::NativeResponse;

use super::commits::{BatchSource, CommitQueue, CommitWaiter};
use super::conn::{ChannelOf, Conn, ReadyAnswer, SlotRef};
use super::kafka::DeleteWait;
use super::TimerKey;

use crate::assignors::Assignors;
use crate::config::CoordinatorConfig;
use crate::io::{CoordinatorCounter, Event, Output};
use crate::log_limit::LogLimit;
use crate::timers::Timers;
use crate::types::{ConnId, GroupId, OffsetEntry, OpId, TopicName, TopicPartition};
use crate::wire;

/// An offset-store operation in flight, of either protocol: the one table
/// ([`Ctx::ops`]) the store's results are dispatched from, by variant. A variant holds
/// what its result completes, or the key of the request waiting for several results:
/// a Kafka OffsetFetch of several groups in
/// the Kafka side's fetch waits, a DeleteGroups in its own waits.
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
    /// Every offset-store operation in flight, native and Kafka.
    pub ops: HashMap<OpId, Op>,
    pub groups_with_pending: BTreeSet<GroupId>,
    /// Per group id, the one `CommitOffsets` in flight, whichever path sent it (a
    /// native group's batch or Kafka OffsetCommits), and the commits queued behind it:
    /// the ABI promises the host at most one per group.
    pub commits: CommitQueue,
    /// Channels whose connection became free to carry a request.
    pub to_pump: Vec<ChannelOf>,
    pub out: Vec<Output>,
    pub now: u64,
    /// The operation counter ([`Ctx::next_op`]; lent to native group code).
    pub(super) op_ids: OpIds,
    pub(super) next_incarnation: u64,
    /// The rate limit of [`Ctx::reject`]'s log line.
    pub(super) reject_log: LogLimit,
}

impl Ctx {
    pub(crate) fn next_op(&mut self) -> OpId {
        self.op_ids.next()
    }

    pub(crate) fn event(&mut self, event: Event) {
        self.out.push(Output::Event(event));
    }

    pub(crate) fn metric(&mut self, counter: CoordinatorCounter, value: u64) {
        self.out.push(Output::Metric { counter, value });
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
        self.closing.insert(conn);
        self.out.push(Output::CloseConnection { conn });
        self.event(Event::ConnectionRejected { conn, message });
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
