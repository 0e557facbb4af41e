//! OffsetCommit, OffsetFetch (one group, or several from v8) and OffsetDelete for every
//! kind of group, through the active offset store.
//!
//! Commit rules (Kafka's group coordinator): a classic group accepts a commit from a
//! member of its current generation, or with generation −1 and no member id while it is
//! empty (a "simple" commit, as the admin client and manual-assignment consumers send);
//! an unknown group accepts generation −1 and, once the store has the offsets, is kept
//! as an empty classic group (as Kafka does); a KIP-848 group checks the member epoch.
//! A group's commits reach the store one batch at a time, in the order they were
//! accepted. The answer waits until the store has them; a store failure answers
//! COORDINATOR_NOT_AVAILABLE (retriable) for every accepted partition.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::classic::ClassicState;
use super::ClassicGroup;
use crate::core::conn::SlotRef;
use crate::core::{Coordinator, Op};
use crate::io::{FetchScope, Output};
use crate::kafka_wire::KafkaReplyTo;
use crate::types::{GroupId, OffsetEntry, OpId, StoreError, TopicName, TopicPartition};

/// An OffsetCommit waiting for the store.
#[derive(Debug)]
pub(crate) struct CommitWait {
    slot: SlotRef,
    to: KafkaReplyTo,
    response: OffsetCommitResponse,
    /// (topic index, partition index) of the accepted partitions.
    accepted: Vec<(usize, usize)>,
    records: Vec<OffsetEntry>,
}

/// An OffsetFetch waiting for one store read per group.
#[derive(Debug)]
struct FetchWait {
    slot: SlotRef,
    to: KafkaReplyTo,
    /// Per group: id, the partitions asked (None: all), and the result once in.
    groups: Vec<FetchOne>,
    remaining: usize,
}

#[derive(Debug)]
struct FetchOne {
    group: GroupId,
    topics: Asked,
    result: Option<Result<Vec<OffsetEntry>, i16>>,
}

/// An OffsetDelete (or a DeleteGroups entry) waiting for the store.
#[derive(Debug)]
pub(crate) enum DeleteWait {
    Offsets {
        slot: SlotRef,
        to: KafkaReplyTo,
        response: OffsetDeleteResponse,
        /// Whether the coordinator knew the group (else, when nothing was deleted:
        /// GROUP_ID_NOT_FOUND).
        known: bool,
    },
    Group {
        wait: u64,
        index: usize,
    },
}

/// Kafka offset requests waiting for something other than one store operation (their
/// operations are in [`Ctx::ops`](crate::core::Ctx)).
#[derive(Debug, Default)]
pub(crate) struct KafkaOffsets {
    /// Per group, commits accepted while a batch was in flight.
    queued: BTreeMap<GroupId, Vec<CommitWait>>,
    /// OffsetFetch requests waiting for one store read per group.
    fetches: BTreeMap<u64, FetchWait>,
    next_wait: u64,
}

impl KafkaOffsets {
    /// Topics `lost` are gone (deleted, or re-created with a new id): the commits
    /// queued behind a group's batch in flight lose their entries for them, which are
    /// answered UNKNOWN_TOPIC_OR_PARTITION (as Kafka answers a commit for a topic it
    /// does not have), so none lands on a re-created topic. Returns the commits left
    /// with nothing to write, to answer now. (A batch already handed to the store is
    /// ordered before the host's removal of the topics' offsets.)
    fn forget_topics(
        &mut self,
        lost: &std::collections::BTreeSet<TopicName>,
    ) -> Vec<(SlotRef, KafkaReplyTo, OffsetCommitResponse)> {
        let mut answered = Vec::new();
        for waits in self.queued.values_mut() {
            for w in waits.iter_mut() {
                w.records.retain(|r| !lost.contains(&r.tp.topic));
                let response = &mut w.response;
                w.accepted.retain(|&(t, p)| {
                    let topic = &mut response.topics[t];
                    if !lost.contains(topic.name.as_str()) {
                        return true;
                    }
                    topic.partitions[p].error_code = ResponseError::UnknownTopicOrPartition.code();
                    false
                });
            }
            let (empty, keep): (Vec<CommitWait>, Vec<CommitWait>) = std::mem::take(waits)
                .into_iter()
                .partition(|w| w.records.is_empty());
            *waits = keep;
            answered.extend(empty.into_iter().map(|w| (w.slot, w.to, w.response)));
        }
        self.queued.retain(|_, waits| !waits.is_empty());
        answered
    }

    pub(super) fn next_wait(&mut self) -> u64 {
        self.next_wait += 1;
        self.next_wait
    }
}

/// Partitions asked for, by topic; `None`: every partition the group has offsets for.
type Asked = Option<Vec<(TopicName, Vec<i32>)>>;

/// A KIP-848 member's id and epoch in an OffsetFetch v9.
type MemberEpoch = (Option<String>, i32);

/// Partitions to answer for, by topic, each with its committed offset if any.
type Answer<'a> = Vec<(TopicName, Vec<(i32, Option<&'a OffsetEntry>)>)>;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

impl Coordinator {
    /// The group-level check of an OffsetCommit (Kafka's `validateOffsetCommit`).
    fn kafka_commit_check(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        version: i16,
    ) -> Result<(), ResponseError> {
        if group.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if !self.owns(group) {
            return Err(ResponseError::NotCoordinator);
        }
        if let Some(g) = self.groups.get(group) {
            // A native group: only a simple commit while it has no member.
            return if g.members.is_empty() && generation < 0 && member_id.is_empty() {
                Ok(())
            } else {
                Err(ResponseError::UnknownMemberId)
            };
        }
        if self.kafka.consumer.contains(group) {
            return self
                .kafka
                .consumer
                .check_commit(group, member_id, generation)
                .map_err(|code| {
                    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
                });
        }
        let Some(g) = self.kafka.classic.get(group) else {
            return if generation < 0 {
                Ok(())
            } else if version >= 9 {
                Err(ResponseError::GroupIdNotFound)
            } else {
                Err(ResponseError::IllegalGeneration)
            };
        };
        if generation < 0 && g.members.is_empty() {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            g.check_member(member_id, instance_id)?;
            if generation != g.generation {
                return Err(ResponseError::IllegalGeneration);
            }
        } else {
            return Err(ResponseError::UnknownMemberId);
        }
        if g.state == ClassicState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    pub(super) fn on_offset_commit(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: OffsetCommitRequest,
    ) {
        let group = r.group_id.to_string();
        let check = self.kafka_commit_check(
            &group,
            r.member_id.as_str(),
            r.group_instance_id.as_deref(),
            r.generation_id_or_member_epoch,
            to.version,
        );
        let max_metadata = self.cx.config.max_metadata_bytes;
        let gid = GroupId::new(&group);
        let mut response = OffsetCommitResponse::default();
        let mut accepted = Vec::new();
        let mut records = Vec::new();
        for (ti, t) in r.topics.into_iter().enumerate() {
            let topic = TopicName::new(t.name.as_str());
            let mut out = OffsetCommitResponseTopic::default();
            out.name = t.name.clone();
            for (pi, p) in t.partitions.into_iter().enumerate() {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: p.partition_index,
                };
                let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                let code = match &check {
                    Err(e) => Some(*e),
                    Ok(()) if !self.cx.exists(&tp) => Some(ResponseError::UnknownTopicOrPartition),
                    Ok(()) if metadata.as_ref().is_some_and(|m| m.len() > max_metadata) => {
                        Some(ResponseError::OffsetMetadataTooLarge)
                    }
                    Ok(()) if p.committed_offset < 0 => Some(ResponseError::OffsetOutOfRange),
                    Ok(()) => None,
                };
                if code.is_none() {
                    accepted.push((ti, pi));
                    records.push(OffsetEntry {
                        group: gid.clone(),
                        tp,
                        offset: p.committed_offset,
                        metadata,
                    });
                }
                let mut po = OffsetCommitResponsePartition::default();
                po.partition_index = p.partition_index;
                po.error_code = code.map_or(0, |e| e.code());
                out.partitions.push(po);
            }
            response.topics.push(out);
        }
        let wait = CommitWait {
            slot,
            to,
            response,
            accepted,
            records,
        };
        if wait.records.is_empty() {
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::OffsetCommit(wait.response));
        }
        // One commit per group in flight, whichever path sent it (a native group's own
        // batch included): otherwise this one waits for it.
        if self.cx.commits_in_flight.contains_key(&gid) {
            self.kafka.offsets.queued.entry(gid).or_default().push(wait);
        } else {
            self.send_commit(gid, vec![wait]);
        }
    }

    /// Topics `lost` are gone: queued Kafka commits drop their entries for them
    /// ([`KafkaOffsets::forget_topics`]).
    pub(crate) fn forget_kafka_commits_of(&mut self, lost: &std::collections::BTreeSet<TopicName>) {
        for (slot, to, response) in self.kafka.offsets.forget_topics(lost) {
            self.cx
                .respond_kafka(slot, to, ResponseKind::OffsetCommit(response));
        }
    }

    /// Sends one batch of a group's commits to the store.
    fn send_commit(&mut self, group: GroupId, waits: Vec<CommitWait>) {
        let op = self.cx.next_op();
        let records: Vec<OffsetEntry> = waits.iter().flat_map(|w| w.records.clone()).collect();
        self.cx.commits_in_flight.insert(group.clone(), op);
        self.cx.ops.insert(op, Op::KafkaCommit { group, waits });
        self.cx.out.push(Output::CommitOffsets { op, records });
    }

    /// The store's answer to a Kafka commit batch ([`Op::KafkaCommit`]).
    pub(crate) fn on_kafka_committed(
        &mut self,
        op: OpId,
        group: GroupId,
        waits: Vec<CommitWait>,
        result: Result<(), StoreError>,
    ) {
        if let Err(e) = &result {
            tracing::warn!(%group, %op, error = %e, "offset commit failed");
        } else if self.group_kind(group.as_str()).is_none() && self.owns(group.as_str()) {
            // Kafka keeps a group that only commits (generation −1: the admin client,
            // manually assigned consumers) as an empty classic group: ListGroups and
            // DescribeGroups show it. Made once the offsets are durable, as Kafka makes
            // it in the same write: a failed commit leaves no group behind.
            self.kafka
                .classic
                .insert(group.clone(), ClassicGroup::new(group.clone()));
        }
        for mut w in waits {
            if result.is_err() {
                for &(t, p) in &w.accepted {
                    w.response.topics[t].partitions[p].error_code =
                        ResponseError::CoordinatorNotAvailable.code();
                }
            }
            self.cx
                .respond_kafka(w.slot, w.to, ResponseKind::OffsetCommit(w.response));
        }
        self.cx.release_commit(&group, op);
        if self.kafka.offsets.queued.contains_key(&group) {
            self.send_queued_kafka_commits(&group);
        } else if let Some(g) = self.groups.get_mut(&group) {
            // A native group's batch that waited for this one.
            g.flush_commits(&mut self.cx);
        }
    }

    /// Sends the Kafka commits queued for `group`, unless one of its commits is in
    /// flight.
    pub(crate) fn send_queued_kafka_commits(&mut self, group: &GroupId) {
        if self.cx.commits_in_flight.contains_key(group) {
            return;
        }
        if let Some(next) = self.kafka.offsets.queued.remove(group) {
            self.send_commit(group.clone(), next);
        }
    }

    pub(super) fn on_offset_fetch(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: OffsetFetchRequest,
    ) {
        let asked: Vec<(String, Asked, Option<MemberEpoch>)> = if to.version >= 8 {
            r.groups
                .into_iter()
                .map(|g| {
                    let topics = g.topics.map(|ts| {
                        ts.into_iter()
                            .map(|t| (TopicName::new(t.name.as_str()), t.partition_indexes))
                            .collect()
                    });
                    let member = (to.version >= 9)
                        .then(|| (g.member_id.map(|m| m.to_string()), g.member_epoch));
                    (g.group_id.to_string(), topics, member)
                })
                .collect()
        } else {
            let topics = r.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (TopicName::new(t.name.as_str()), t.partition_indexes))
                    .collect()
            });
            vec![(r.group_id.to_string(), topics, None)]
        };
        let wait_id = self.kafka.offsets.next_wait();
        let mut wait = FetchWait {
            slot,
            to,
            groups: Vec::with_capacity(asked.len()),
            remaining: 0,
        };
        let mut outputs = Vec::new();
        for (index, (group, topics, member)) in asked.into_iter().enumerate() {
            let error = if group.is_empty() {
                Some(ResponseError::InvalidGroupId)
            } else if !self.owns(&group) {
                Some(ResponseError::NotCoordinator)
            } else if let Some((member_id, epoch)) = member {
                // v9: a KIP-848 member's fetch carries its epoch.
                self.kafka
                    .consumer
                    .check_fetch(&group, member_id.as_deref(), epoch)
                    .err()
                    .map(|code| {
                        ResponseError::try_from_code(code)
                            .unwrap_or(ResponseError::UnknownServerError)
                    })
            } else {
                None
            };
            let gid = GroupId::new(&group);
            let result = error.map(|e| Err(e.code()));
            if result.is_none() {
                let scope = match &topics {
                    None => FetchScope::WholeGroup,
                    Some(ts) => FetchScope::Partitions(
                        ts.iter()
                            .flat_map(|(t, ps)| {
                                ps.iter().map(|&p| TopicPartition {
                                    topic: t.clone(),
                                    partition: p,
                                })
                            })
                            .collect(),
                    ),
                };
                let op = self.cx.next_op();
                self.cx.ops.insert(
                    op,
                    Op::KafkaFetch {
                        wait: wait_id,
                        index,
                    },
                );
                outputs.push(Output::FetchOffsets {
                    op,
                    group: gid.clone(),
                    scope,
                });
                wait.remaining += 1;
            }
            wait.groups.push(FetchOne {
                group: gid,
                topics,
                result,
            });
        }
        if wait.remaining == 0 {
            return self.finish_fetch(wait);
        }
        self.kafka.offsets.fetches.insert(wait_id, wait);
        self.cx.out.extend(outputs);
    }

    /// The store's answer to one group's read of an OffsetFetch ([`Op::KafkaFetch`]:
    /// entry `index` of request `wait_id`).
    pub(crate) fn on_kafka_fetched(
        &mut self,
        op: OpId,
        wait_id: u64,
        index: usize,
        result: Result<Vec<OffsetEntry>, StoreError>,
    ) {
        let Some(wait) = self.kafka.offsets.fetches.get_mut(&wait_id) else {
            return;
        };
        wait.groups[index].result = Some(result.map_err(|e| {
            tracing::warn!(%op, error = %e, "offset fetch failed");
            ResponseError::CoordinatorNotAvailable.code()
        }));
        wait.remaining -= 1;
        if wait.remaining == 0 {
            if let Some(wait) = self.kafka.offsets.fetches.remove(&wait_id) {
                self.finish_fetch(wait);
            }
        }
    }

    fn finish_fetch(&mut self, wait: FetchWait) {
        let v = wait.to.version;
        let mut response = OffsetFetchResponse::default();
        for one in wait.groups {
            let (error, found) = match one.result {
                Some(Ok(entries)) => (0, entries),
                Some(Err(code)) => (code, Vec::new()),
                None => (0, Vec::new()),
            };
            let by_tp: BTreeMap<TopicPartition, OffsetEntry> =
                found.into_iter().map(|e| (e.tp.clone(), e)).collect();
            // The partitions to answer for: those asked, or every one found.
            let mut topics: Answer<'_> = Vec::new();
            match &one.topics {
                Some(asked) => {
                    for (t, ps) in asked {
                        let parts = ps
                            .iter()
                            .map(|&p| {
                                let tp = TopicPartition {
                                    topic: t.clone(),
                                    partition: p,
                                };
                                (p, by_tp.get(&tp))
                            })
                            .collect();
                        topics.push((t.clone(), parts));
                    }
                }
                None => {
                    for (tp, e) in &by_tp {
                        match topics.last_mut() {
                            Some((t, parts)) if *t == tp.topic => {
                                parts.push((tp.partition, Some(e)))
                            }
                            _ => topics.push((tp.topic.clone(), vec![(tp.partition, Some(e))])),
                        }
                    }
                }
            }
            if v >= 8 {
                let mut g = OffsetFetchResponseGroup::default();
                g.group_id = s(one.group.as_str()).into();
                g.error_code = error;
                for (t, parts) in topics {
                    let mut ot = OffsetFetchResponseTopics::default();
                    ot.name = s(t.as_str()).into();
                    for (p, e) in parts {
                        let mut op = OffsetFetchResponsePartitions::default();
                        op.partition_index = p;
                        op.committed_offset = e.map_or(-1, |e| e.offset);
                        op.committed_leader_epoch = -1;
                        op.metadata =
                            Some(s(e.and_then(|e| e.metadata.clone()).unwrap_or_default()));
                        ot.partitions.push(op);
                    }
                    g.topics.push(ot);
                }
                response.groups.push(g);
            } else {
                response.error_code = if v >= 2 { error } else { 0 };
                for (t, parts) in topics {
                    let mut ot = OffsetFetchResponseTopic::default();
                    ot.name = s(t.as_str()).into();
                    for (p, e) in parts {
                        let mut op = OffsetFetchResponsePartition::default();
                        op.partition_index = p;
                        op.committed_offset = e.map_or(-1, |e| e.offset);
                        op.committed_leader_epoch = -1;
                        op.metadata =
                            Some(s(e.and_then(|e| e.metadata.clone()).unwrap_or_default()));
                        op.error_code = if v < 2 { error } else { 0 };
                        ot.partitions.push(op);
                    }
                    response.topics.push(ot);
                }
            }
        }
        self.cx
            .respond_kafka(wait.slot, wait.to, ResponseKind::OffsetFetch(response));
    }

    pub(super) fn on_offset_delete(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: OffsetDeleteRequest,
    ) {
        let group = r.group_id.to_string();
        let mut response = OffsetDeleteResponse::default();
        let group_error = if group.is_empty() {
            Some(ResponseError::InvalidGroupId)
        } else if !self.owns(&group) {
            Some(ResponseError::NotCoordinator)
        } else {
            None
        };
        if let Some(e) = group_error {
            response.error_code = e.code();
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::OffsetDelete(response));
        }
        // Offsets of a topic the group consumes stay (Kafka: GROUP_SUBSCRIBED_TO_TOPIC).
        let subscribed = self.subscribed_topics(&group);
        let mut delete = Vec::new();
        for t in r.topics {
            let topic = TopicName::new(t.name.as_str());
            let mut out = OffsetDeleteResponseTopic::default();
            out.name = t.name.clone();
            for p in t.partitions {
                let mut po = OffsetDeleteResponsePartition::default();
                po.partition_index = p.partition_index;
                if subscribed.contains(&topic) {
                    po.error_code = ResponseError::GroupSubscribedToTopic.code();
                } else {
                    delete.push(TopicPartition {
                        topic: topic.clone(),
                        partition: p.partition_index,
                    });
                }
                out.partitions.push(po);
            }
            response.topics.push(out);
        }
        if delete.is_empty() {
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::OffsetDelete(response));
        }
        let op = self.cx.next_op();
        let known = self.group_kind(&group).is_some();
        self.cx.ops.insert(
            op,
            Op::DeleteOffsets(DeleteWait::Offsets {
                slot,
                to,
                response,
                known,
            }),
        );
        self.cx.out.push(Output::DeleteOffsets {
            op,
            group: GroupId::new(&group),
            scope: FetchScope::Partitions(delete),
        });
    }

    /// The topics the members of `group` consume: a native group's resolved
    /// subscriptions, a classic `consumer` group's subscriptions from its members'
    /// protocol metadata (every topic, when a member's metadata does not parse).
    fn subscribed_topics(&self, group: &str) -> std::collections::BTreeSet<TopicName> {
        let mut out = std::collections::BTreeSet::new();
        if let Some(g) = self.groups.get(group) {
            for m in g.members.values() {
                out.extend(m.topics.iter().cloned());
            }
        }
        if let Some(d) = self.kafka.consumer.describe(group) {
            for m in d.members {
                out.extend(m.subscribed_topic_names);
                out.extend(m.assignment.into_iter().map(|tp| tp.topic));
            }
        }
        if let Some(g) = self.kafka.classic.get(group) {
            match g.subscribed_topics() {
                Some(topics) => out.extend(topics.into_iter().map(TopicName::from)),
                None => out.extend(self.cx.topics.keys().cloned()),
            }
        }
        out
    }
}
