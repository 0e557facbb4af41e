//! A group's commit pipeline (docs/protocol.md §6.5).
//!
//! Offsets from Heartbeat responses, StopFetcher responses and CommitOffset requests
//! are merged into a pending batch (a later value for a partition replaces an earlier
//! one) and written as one [`Output::CommitOffsets`](crate::io::Output::CommitOffsets). At most one batch per group is in
//! flight, so a group's commits reach the store in the order they were accepted and a
//! partition's committed offset follows the order of acceptance. Heartbeat offsets are
//! written every `commit_interval_ms`; final offsets and explicit commits at once.
//! Before a rebalance reads start offsets, every accepted offset of the partitions it
//! reads is written, so the read sees them. (Those partitions are free: nobody owns
//! them, so no new offset for them can be accepted while the rebalance waits, and the
//! wait ends even under a constant stream of Heartbeat offsets for other partitions.)

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::ResponseError;

use super::effects::NativeEnv;
use super::group::NativeGroup;
use crate::core::commits::CommitWaiter;
use crate::core::result::{Effect, Effects};
use crate::io::{CoordinatorCounter, Event};
use crate::types::{Generation, OffsetEntry, OpId, StoreError, TopicName, TopicPartition};
use crate::wire;

/// Where an offset comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitKind {
    /// A Heartbeat or StopFetcher answer.
    Channel,
    /// A member's CommitOffset.
    Explicit,
    /// The non-member form of CommitOffset.
    Reset,
}

/// An offset value: (offset, metadata).
pub(crate) type OffsetValue = (i64, Option<String>);

#[derive(Debug, Default)]
pub(crate) struct Commits {
    /// Accepted, not yet sent to the store.
    pub pending: BTreeMap<TopicPartition, OffsetValue>,
    /// CommitOffset requests answered when the pending batch is durable.
    pub pending_waiters: Vec<Waiter>,
    /// The partitions of the group's batch in flight (the commit queue keeps its
    /// operation: at most one batch per group id is in flight). Not empty exactly while
    /// the group's own batch is out, which is how a call that sent one knows the group
    /// id is busy ([`NativeEnv::batch_in_flight`] says so for batches already out when
    /// the call began).
    pub inflight_tps: BTreeSet<TopicPartition>,
    /// The last value accepted per partition (pending, in flight or written) and the
    /// generation it was accepted in. Every Heartbeat answer looks its partitions up
    /// here, hence a hash map (a B-tree of 100,000 partitions cost a pointer chase per
    /// level); whoever lists it sorts what it takes ([`Commits::known_in_order`]).
    pub known: HashMap<TopicPartition, (OffsetValue, Generation)>,
    /// Flush as soon as nothing is in flight.
    pub urgent: bool,
}

impl Commits {
    /// The last accepted offset of each partition, in partition order.
    pub(crate) fn known_in_order(&self) -> Vec<(&TopicPartition, i64)> {
        let mut known: Vec<(&TopicPartition, i64)> = self
            .known
            .iter()
            .map(|(tp, ((offset, _), _))| (tp, *offset))
            .collect();
        known.sort_unstable_by(|a, b| a.0.cmp(b.0));
        known
    }

    /// Whether no offset of these partitions is pending or in flight.
    pub(crate) fn settled(&self, tps: &BTreeSet<TopicPartition>) -> bool {
        let pending = if self.pending.len() < tps.len() {
            self.pending.keys().any(|tp| tps.contains(tp))
        } else {
            tps.iter().any(|tp| self.pending.contains_key(tp))
        };
        !pending && self.inflight_tps.is_disjoint(tps)
    }
}

/// A CommitOffset request waiting for its batch.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub slot: crate::core::conn::SlotRef,
    pub correlation_id: i32,
    pub response: drover_protocol::CommitOffsetResponse,
    /// (topic index, partition index) of the entries waiting for the store.
    pub waiting: Vec<(usize, usize)>,
}

impl NativeGroup {
    /// Accepts an offset for the pending batch.
    ///
    /// `generation` is the one the offset belongs to: the member's generation (for
    /// channel offsets, that of the request they answer; for CommitOffset, the one it
    /// carries, which is checked to be the member's).
    ///
    /// Within a generation a partition's committed offset never goes backwards: an
    /// offset below the last one accepted for the partition in the same generation (a
    /// CommitOffset that raced with a newer Heartbeat answer, or a Heartbeat answer
    /// delayed past a CommitOffset) is not written. Unchanged Heartbeat offsets are not
    /// written again. A non-member commit (a reset tool, only while the group has no
    /// consumers) is always written.
    pub(crate) fn accept_offset(
        &mut self,

        fx: &mut Effects<'_>,
        tp: TopicPartition,
        value: OffsetValue,
        generation: Generation,
        kind: CommitKind,
    ) {
        if let Some((known, known_generation)) = self.commits.known.get(&tp) {
            match kind {
                CommitKind::Channel if *known == value => return,
                CommitKind::Channel | CommitKind::Explicit
                    if *known_generation == generation && value.0 < known.0 =>
                {
                    return
                }
                _ => {}
            }
        }
        self.commits
            .known
            .insert(tp.clone(), (value.clone(), generation));
        self.commits.pending.insert(tp, value);
        fx.push(Effect::PendingOffsets(self.id.clone(), true));
    }

    /// Sends the pending batch through the group id's commit queue, unless a batch of
    /// the group id is in flight (of either source: a Kafka OffsetCommit to this group
    /// id waits the same way, [`CommitQueue`](crate::core::commits::CommitQueue)).
    pub(crate) fn flush_commits(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>) {
        if env.batch_in_flight || !self.commits.inflight_tps.is_empty() {
            return;
        }
        if self.commits.pending.is_empty() {
            // Waiters whose offsets were superseded: what they asked for is stored.
            for w in std::mem::take(&mut self.commits.pending_waiters) {
                fx.push(Effect::AnswerCommit(w));
            }
            return;
        }
        let records: Vec<OffsetEntry> = std::mem::take(&mut self.commits.pending)
            .into_iter()
            .map(|(tp, (offset, metadata))| OffsetEntry {
                group: self.id.clone(),
                tp,
                offset,
                metadata,
            })
            .collect();
        fx.push(Effect::PendingOffsets(self.id.clone(), false));
        let waiters = std::mem::take(&mut self.commits.pending_waiters);
        self.commits.inflight_tps = records.iter().map(|r| r.tp.clone()).collect();
        self.commits.urgent = false;
        fx.metric(CoordinatorCounter::CommitBatches, 1);
        let op = fx.op_id();
        fx.push(Effect::SendBatch {
            op,
            group: self.id.clone(),
            records,
            waiters,
        });
    }

    /// The result of the batch in flight.
    pub(crate) fn on_committed(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        op: OpId,
        records: Vec<OffsetEntry>,
        waiters: Vec<CommitWaiter>,
        result: Result<(), StoreError>,
    ) {
        // The group's batch: the one commit of the group id in flight. (A batch sent
        // by a group of the same id that was dropped meanwhile blocked this group's
        // own, which has none in flight.)
        self.commits.inflight_tps.clear();
        let failed = result.is_err();
        if let Err(e) = result {
            tracing::warn!(group = %self.id, %op, records = records.len(), error = %e, "offset commit failed");
            fx.event(Event::CommitFailed {
                group: self.id.clone(),
                records: records.len(),
                retrying: e.retriable,
                message: e.message.clone(),
            });
            fx.metric(CoordinatorCounter::CommitFailures, 1);
            for r in records {
                let value = (r.offset, r.metadata);
                if e.retriable {
                    // Retried with the next batch unless a newer value is pending.
                    self.commits.pending.entry(r.tp).or_insert(value);
                } else if self.commits.known.get(&r.tp).map(|k| &k.0) == Some(&value) {
                    // Let the next Heartbeat carry it again.
                    self.commits.known.remove(&r.tp);
                }
            }
            if !self.commits.pending.is_empty() {
                fx.push(Effect::PendingOffsets(self.id.clone(), true));
            }
        }
        fx.push(Effect::AnswerBatch { waiters, failed });
        // After a failure, wait for the commit tick instead of retrying in a loop (an
        // empty flush only answers waiters).
        if (self.commits.urgent && !failed) || self.commits.pending.is_empty() {
            self.flush_commits(env, fx);
        }
        self.progress(env, fx);
    }

    /// Topics `lost` are gone (deleted, or re-created with a new id): their accepted
    /// offsets not yet handed to the store are dropped (the CommitOffset entries
    /// waiting for them get UNKNOWN_TOPIC_OR_PARTITION), so none lands on a re-created
    /// topic, and their last accepted values are forgotten, so a re-created topic's
    /// offsets are not held to the old topic's (no "backwards" offset refused). A batch
    /// already handed to the store is ordered before the host's removal of the
    /// topics' offsets.
    pub(crate) fn forget_topics(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        lost: &BTreeSet<TopicName>,
    ) {
        self.commits.known.retain(|tp, _| !lost.contains(&tp.topic));
        let before = self.commits.pending.len();
        self.commits
            .pending
            .retain(|tp, _| !lost.contains(&tp.topic));
        if self.commits.pending.len() == before {
            return;
        }
        for w in &mut self.commits.pending_waiters {
            let response = &mut w.response;
            w.waiting.retain(|&(t, p)| {
                let topic = &mut response.topics[t];
                if !lost.contains(topic.topic.as_str()) {
                    return true;
                }
                topic.partitions[p].error_code =
                    wire::error_code(ResponseError::UnknownTopicOrPartition);
                false
            });
        }
        // Waiters left with nothing pending are answered now (or with the batch in
        // flight).
        self.flush_commits(env, fx);
    }

    /// A CommitOffset request with accepted entries: answered with the batch.
    pub(crate) fn add_waiter(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>, waiter: Waiter) {
        self.commits.pending_waiters.push(waiter);
        self.commits.urgent = true;
        self.flush_commits(env, fx);
    }
}
