//! What native group code reads, after the KIP-848 engine's `Env`: a [`NativeEnv`] of
//! exactly what a group reads (the time, the configuration, the topics, the assignors,
//! whether a member's connection is idle, whether a batch of the group id is in
//! flight). What it decides it records in the one result shape of every group type
//! ([`Effects`] of [`Effect`](crate::core::result::Effect)s, `core/result.rs`: a request
//! to push on a channel, a connection to drop, a timer to set, a read or a write for
//! the offset store, a request to answer, an event, a metric). The group never sees
//! the coordinator's shared state (`Ctx`); one adapter (`apply`) builds the
//! environment, runs a group method and hands its result to the one applier.
//!
//! Ids: an operation a group later matches a result against (its rebalance fetch) or
//! that the commit queue tracks (its batch) takes its [`OpId`](crate::types::OpId)
//! when it is decided, from the operation counter lent to the effect list
//! ([`Effects::op_id`]): ids stay unique across groups (a group dropped and re-created
//! with the same id can never match a result of its predecessor's fetch).

use std::collections::{BTreeMap, HashMap};

use crate::config::CoordinatorConfig;
use crate::core::assigning::GroupAssignors;
use crate::core::conn::Conn;
use crate::core::result::Effects;
use crate::io::{CoordinatorCounter, Event};
use crate::types::{ConnId, GroupId, TopicName, TopicPartition};

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
