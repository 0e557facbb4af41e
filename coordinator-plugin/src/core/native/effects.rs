//! What native group code reads and what it decides, after the KIP-848 engine's `Env`:
//! a [`NativeEnv`] of exactly what a group reads (the time, the configuration, the
//! topics, the assignors, whether a member's connection is idle, whether a batch of the
//! group id is in flight) and an [`Effects`] list it fills with typed decisions
//! ([`NativeEffect`]: a request to push on a channel, a connection to drop, a timer to
//! set, a read or a write for the offset store, a request to answer, an event, a
//! metric). The group never sees the coordinator's shared state (`Ctx`); one adapter
//! (`apply`) builds the environment, runs a group method and applies its effects in
//! order.
//!
//! Ids: an operation a group later matches a result against (its rebalance fetch) or
//! that the commit queue tracks (its batch) needs a unique [`OpId`] at the moment it is
//! decided. [`Effects::op_id`] takes it from the coordinator's one operation counter,
//! lent to the effect list for the call: ids stay unique across groups (a group dropped
//! and re-created with the same id can never match a result of its predecessor's fetch)
//! and are numbered in the order of the decisions, as every other operation is.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::offsets::Waiter;
use crate::config::CoordinatorConfig;
use crate::core::assigning::GroupAssignors;
use crate::core::commits::CommitWaiter;
use crate::core::conn::Conn;
use crate::core::ctx::OpIds;
use crate::io::{CoordinatorCounter, Event};
use crate::types::{ConnId, ConsumerId, GroupId, OffsetEntry, OpId, TopicName, TopicPartition};

/// What a native group reads from outside itself, for one call.
pub(crate) struct NativeEnv<'a> {
    /// Now, in ms of the coordinator's monotonic clock.
    pub now: u64,
    /// The coordinator's configuration (the group reads the rebalance delays, the
    /// retry backoff, the default assignor and the assignor modes, the partition cap
    /// of a rebalance and the metadata length cap).
    pub config: &'a CoordinatorConfig,
    /// The topics and their partition counts.
    pub topics: &'a BTreeMap<TopicName, u32>,
    /// The host's partition table, for assignors' contexts.
    pub partition_stats: &'a crate::PartitionStats,
    /// The loaded assignors, and where calls handed to the host are recorded.
    pub assignors: GroupAssignors<'a>,
    /// Whether a batch of the group's id was in flight in the commit queue when the
    /// call began (the group's own, or Kafka commits to its id). A batch the group
    /// sends during the call it knows by its `Commits::inflight_tps`.
    pub batch_in_flight: bool,
    /// The connections, read only for [`NativeEnv::conn_idle`].
    conns: &'a HashMap<ConnId, Conn>,
}

impl<'a> NativeEnv<'a> {
    pub(in crate::core) fn new(
        now: u64,
        config: &'a CoordinatorConfig,
        topics: &'a BTreeMap<TopicName, u32>,
        partition_stats: &'a crate::PartitionStats,
        assignors: GroupAssignors<'a>,
        conns: &'a HashMap<ConnId, Conn>,
        batch_in_flight: bool,
    ) -> Self {
        NativeEnv {
            now,
            config,
            topics,
            partition_stats,
            assignors,
            batch_in_flight,
            conns,
        }
    }

    /// Whether connection `conn` is open and every answer on it has left, so its
    /// channel may carry a request (docs/protocol.md §1: answers leave in request
    /// order).
    pub(crate) fn conn_idle(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.idle())
    }

    /// Whether the partition exists in the topics as last reported.
    pub(crate) fn exists(&self, tp: &TopicPartition) -> bool {
        crate::core::ctx::partition_exists(self.topics, tp)
    }
}

/// One decision of a native group, applied to the coordinator's state in order.
#[derive(Debug)]
pub(crate) enum NativeEffect {
    /// Send a request frame on a member's channel ([`Output::Push`](crate::io::Output::Push)).
    Push { conn: ConnId, bytes: Bytes },
    /// A removed member's connection: forgotten, and closed unless the host closed it
    /// already ([`Output::CloseConnection`](crate::io::Output::CloseConnection)).
    DropConnection { conn: ConnId, close: bool },
    /// The group's timer (`TimerKey::Group`): at this time, or cleared.
    GroupTimer(Option<u64>),
    /// A member's timer (`TimerKey::Member`): at this time, or cleared.
    MemberTimer(ConsumerId, Option<u64>),
    /// Read the committed offsets of these partitions for a rebalance, as operation
    /// `op` ([`Output::FetchOffsets`](crate::io::Output::FetchOffsets)); its result
    /// comes back to `NativeGroup::on_fetched`.
    FetchStartOffsets {
        op: OpId,
        partitions: Vec<TopicPartition>,
    },
    /// Hand the group's pending batch to the commit queue as operation `op`; `waiters`
    /// are answered with its result.
    SendBatch {
        op: OpId,
        records: Vec<OffsetEntry>,
        waiters: Vec<Waiter>,
    },
    /// Answer a CommitOffset request as it stands.
    Answer(Waiter),
    /// Answer the waiters of a batch whose result arrived; `failed`: every entry that
    /// waited for the store gets COORDINATOR_NOT_AVAILABLE.
    AnswerBatch {
        waiters: Vec<CommitWaiter>,
        failed: bool,
    },
    /// The group has accepted offsets waiting for the commit tick (`true`: arm the
    /// tick), or none any more (`false`).
    PendingOffsets(bool),
    /// An event for the host.
    Event(Event),
    /// A counter to add to.
    Metric(CoordinatorCounter, u64),
}

/// The decisions of one call of a native group, in order, and the operation counter
/// lent for it.
pub(crate) struct Effects<'a> {
    list: Vec<NativeEffect>,
    op_ids: &'a mut OpIds,
}

impl<'a> Effects<'a> {
    /// An empty effect list that fills `list` (cleared; its capacity is kept from
    /// call to call, so an effect list costs no allocation per input).
    pub(in crate::core) fn new(mut list: Vec<NativeEffect>, op_ids: &'a mut OpIds) -> Self {
        list.clear();
        Effects { list, op_ids }
    }

    /// Records a decision.
    pub(crate) fn push(&mut self, effect: NativeEffect) {
        self.list.push(effect);
    }

    /// A new operation id (see the module docs).
    pub(crate) fn op_id(&mut self) -> OpId {
        self.op_ids.next()
    }

    pub(crate) fn event(&mut self, event: Event) {
        self.push(NativeEffect::Event(event));
    }

    pub(crate) fn metric(&mut self, counter: CoordinatorCounter, value: u64) {
        self.push(NativeEffect::Metric(counter, value));
    }

    /// The decisions, in order.
    pub(in crate::core) fn into_list(self) -> Vec<NativeEffect> {
        self.list
    }
}

/// The assignor a rebalance of `group` runs: `requested` when it is loaded, else the
/// default (a missing or refused plugin must not fail the group's consumers; issue
/// "graceful refusal"). A fallback is logged (rate-limited per group by the caller's
/// rebalance rate), counted (`assignor_fallbacks`) and reported as an event.
pub(crate) fn effective_assignor(
    env: &NativeEnv<'_>,
    fx: &mut Effects<'_>,
    group: &GroupId,
    requested: &str,
) -> String {
    if env.assignors.contains(requested) {
        return requested.to_owned();
    }
    let default = env.config.default_assignor.clone();
    tracing::warn!(
        %group,
        requested,
        default,
        "assignor `{requested}` is not loaded; the group uses the default assignor `{default}`"
    );
    fx.metric(CoordinatorCounter::AssignorFallbacks, 1);
    fx.event(Event::AssignorFallback {
        group: group.clone(),
        requested: requested.to_owned(),
        used: default.clone(),
    });
    default
}
