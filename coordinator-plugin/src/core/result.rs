//! The one result shape of every group engine — native, classic, KIP-848 and share —
//! after Kafka's `CoordinatorResult` (records to append, a response, timer changes),
//! made for a sans-IO coordinator: a call of an engine returns a [`GroupResult`], the
//! answer to its caller (`response`: a heartbeat's answer, whether a rerun happened,
//! nothing) and its [`Effect`]s in the order they were decided — answers to requests
//! (deferred ones included), requests pushed on channels and connections dropped,
//! timer changes on the coordinator's one timer table (set or cancel a [`TimerKey`]),
//! offset-store operations (a rebalance's start-offset read, a commit batch, offsets
//! waiting for the commit tick), events and counters.
//!
//! An engine records into an [`Effects`] list lent to it for the call, which also lends
//! the coordinator's one operation counter (an operation a group later matches a
//! result against takes its id when it is decided: ids stay unique across groups and
//! are numbered in decision order). Engines read no clock and touch no shared state;
//! one applier (`Ctx::apply`, `core/apply.rs`) carries out any engine's result in
//! order.

use bytes::Bytes;

use super::commits::CommitWaiter;
use super::ctx::OpIds;
use super::kafka::{ClassicReply, Pending};
use super::native::Waiter;
use super::TimerKey;
use crate::io::{CoordinatorCounter, Event};
use crate::types::{ConnId, GroupId, OffsetEntry, OpId, TopicPartition};

/// One decision of a group engine, carried out by `Ctx::apply` in order.
#[derive(Debug)]
pub(crate) enum Effect {
    // Answers.
    /// A classic group's JoinGroup or SyncGroup answer, this request's or a deferred
    /// one, sent in the version it was asked in.
    ClassicReply(Pending, ClassicReply),
    /// Answer a native CommitOffset request as it stands.
    AnswerCommit(Waiter),
    /// Answer the waiters of a commit batch whose result arrived; `failed`: every entry
    /// that waited for the store gets COORDINATOR_NOT_AVAILABLE.
    AnswerBatch {
        waiters: Vec<CommitWaiter>,
        failed: bool,
    },

    // Connections.
    /// Send a request frame on a native member's channel
    /// ([`Output::Push`](crate::io::Output::Push)).
    Push { conn: ConnId, bytes: Bytes },
    /// A removed member's connection: forgotten, and closed unless the host closed it
    /// already ([`Output::CloseConnection`](crate::io::Output::CloseConnection)).
    DropConnection { conn: ConnId, close: bool },

    // Timers.
    /// Set (`Some`, ms of the coordinator's clock) or cancel (`None`) a deadline of the
    /// one timer table.
    Timer(TimerKey, Option<u64>),

    // Offset-store operations.
    /// Read the committed offsets of these partitions of `group` for a rebalance, as
    /// operation `op` ([`Output::FetchOffsets`](crate::io::Output::FetchOffsets)); its
    /// result comes back to `NativeGroup::on_fetched`.
    FetchStartOffsets {
        op: OpId,
        group: GroupId,
        partitions: Vec<TopicPartition>,
    },
    /// Hand `group`'s pending batch to the commit queue as operation `op`; `waiters`
    /// are answered with its result.
    SendBatch {
        op: OpId,
        group: GroupId,
        records: Vec<OffsetEntry>,
        waiters: Vec<Waiter>,
    },
    /// `group` has accepted offsets waiting for the commit tick (`true`: arm the tick),
    /// or none any more (`false`).
    PendingOffsets(GroupId, bool),

    // Events and counters.
    /// An event for the host.
    Event(Event),
    /// A counter to add to.
    Metric(CoordinatorCounter, u64),
}

/// What one call of a group engine decided: its answer to the caller and its effects,
/// in order (Kafka's `CoordinatorResult`).
#[derive(Debug)]
#[must_use = "a group's effects must be applied (`Ctx::apply`)"]
pub(crate) struct GroupResult<R> {
    /// The call's own answer (a heartbeat's response; `()` when every answer is an
    /// effect).
    pub response: R,
    /// The decisions, in order.
    pub effects: Vec<Effect>,
}

/// What `Ctx` lends each call of a group engine: the coordinator's one operation
/// counter, and an emptied effect list kept from the last call (so an effect list
/// costs no allocation per input).
#[derive(Debug, Default)]
pub(crate) struct EffectLender {
    op_ids: OpIds,
    spare: Vec<Effect>,
}

impl EffectLender {
    /// An empty effect list for one call, lent the operation counter.
    pub(in crate::core) fn effects(&mut self) -> Effects<'_> {
        Effects::new(std::mem::take(&mut self.spare), &mut self.op_ids)
    }

    /// A new operation id, for an operation the coordinator itself starts.
    pub(in crate::core) fn next_op(&mut self) -> OpId {
        self.op_ids.next()
    }

    /// Keeps an applied (emptied) list for the next call.
    pub(in crate::core) fn give_back(&mut self, list: Vec<Effect>) {
        self.spare = list;
    }
}

/// The decisions of one call of a group engine, in order, and the operation counter
/// lent for it.
pub(crate) struct Effects<'a> {
    list: Vec<Effect>,
    op_ids: &'a mut OpIds,
}

impl<'a> Effects<'a> {
    /// An empty effect list that fills `list` (cleared; its capacity is kept from
    /// call to call, so an effect list costs no allocation per input).
    pub(in crate::core) fn new(mut list: Vec<Effect>, op_ids: &'a mut OpIds) -> Self {
        list.clear();
        Effects { list, op_ids }
    }

    /// Records a decision.
    pub(crate) fn push(&mut self, effect: Effect) {
        self.list.push(effect);
    }

    /// Sets (`Some`) or cancels (`None`) deadline `key`.
    pub(crate) fn timer(&mut self, key: TimerKey, at: Option<u64>) {
        self.push(Effect::Timer(key, at));
    }

    /// A new operation id (see the module docs).
    pub(crate) fn op_id(&mut self) -> OpId {
        self.op_ids.next()
    }

    pub(crate) fn event(&mut self, event: Event) {
        self.push(Effect::Event(event));
    }

    /// Adds `value` to `counter`; nothing for 0.
    pub(crate) fn metric(&mut self, counter: CoordinatorCounter, value: u64) {
        if value > 0 {
            self.push(Effect::Metric(counter, value));
        }
    }

    /// The result of the call: `response` and the decisions, in order.
    pub(in crate::core) fn finish<R>(self, response: R) -> GroupResult<R> {
        GroupResult {
            response,
            effects: self.list,
        }
    }
}
