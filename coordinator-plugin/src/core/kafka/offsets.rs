//! OffsetCommit, OffsetFetch (one group, or several from v8) and OffsetDelete for every
//! kind of group, through the active offset store.
//!
//! Commit rules (Kafka's group coordinator): a classic group accepts a commit from a
//! member of its current generation, or with generation −1 and no member id while it is
//! empty (a "simple" commit, as the admin client and manual-assignment consumers send);
//! an unknown group accepts generation −1 and, once the store has the offsets, is kept
//! as an empty classic group (as Kafka does); a KIP-848 group checks the member epoch.
//! The offset itself is not checked: any value is stored, negative ones included, as
//! Kafka's `OffsetMetadataManager` does (it checks only the metadata size and the
//! group's rules); OffsetFetch returns it as stored, and a client reads a negative
//! committed offset as none (its `auto.offset.reset` applies; −2 is also the sentinel
//! kafkajs' `resetOffsets` to earliest commits).
//! The group that has the id validates a commit (`validate_offset_commit`; the rules
//! above), and accepted entries go through the group id's one commit queue
//! (`core::commits`), so a group's commits reach the store one batch at a time, in the
//! order they were accepted, whichever protocol sent them. The answer waits until the
//! store has them; a store failure answers COORDINATOR_NOT_AVAILABLE (retriable) for
//! every accepted partition.

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

use crate::core::commits::{CommitApi, CommitAuthor};
use crate::core::conn::SlotRef;
use crate::core::groups::{Group, Subscribed};
use crate::core::{Coordinator, Op};
use crate::io::{FetchScope, Output};
use crate::kafka_wire::KafkaReplyTo;
use crate::types::{GroupId, OffsetEntry, OpId, StoreError, TopicName, TopicPartition};

/// An OffsetCommit waiting for the store: its answer, and the offsets it writes.
#[derive(Debug)]
pub(crate) struct CommitWait {
    pub slot: SlotRef,
    pub to: KafkaReplyTo,
    /// The answer, every partition's error code set but for the store's outcome.
    pub response: OffsetCommitResponse,
    /// (topic index, partition index) of the accepted partitions.
    accepted: Vec<(usize, usize)>,
    /// The accepted offsets.
    pub records: Vec<OffsetEntry>,
}

impl CommitWait {
    /// The store did not write the offsets: every accepted partition gets `error`.
    pub(crate) fn fail(&mut self, error: ResponseError) {
        for &(t, p) in &self.accepted {
            self.response.topics[t].partitions[p].error_code = error.code();
        }
    }

    /// Topics `lost` are gone (deleted, or re-created with a new id) while this commit
    /// waited behind a batch in flight: its entries for them are not written and are
    /// answered UNKNOWN_TOPIC_OR_PARTITION (as Kafka answers a commit for a topic it
    /// does not have), so none lands on a re-created topic. (A batch already handed to
    /// the store is ordered before the host's removal of the topics' offsets.)
    pub(crate) fn forget_topics(&mut self, lost: &std::collections::BTreeSet<TopicName>) {
        self.records.retain(|r| !lost.contains(&r.tp.topic));
        let response = &mut self.response;
        self.accepted.retain(|&(t, p)| {
            let topic = &mut response.topics[t];
            if !lost.contains(topic.name.as_str()) {
                return true;
            }
            topic.partitions[p].error_code = ResponseError::UnknownTopicOrPartition.code();
            false
        });
    }
}

/// An OffsetFetch waiting for one store read per group.
#[derive(Debug)]
struct FetchWait {
    slot: SlotRef,
    to: KafkaReplyTo,
    /// Per group: id, the partitions asked (None: all), and the result once in.
    groups: Vec<FetchOne>,
    remaining: usize,
    /// OffsetFetch v7+ `require_stable`: partitions with pending transactional offsets
    /// are answered UNSTABLE_OFFSET_COMMIT (KIP-447).
    require_stable: bool,
}

#[derive(Debug)]
struct FetchOne {
    group: GroupId,
    topics: Asked,
    result: Option<Result<Vec<OffsetEntry>, ResponseError>>,
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
/// operations are in the operation table of [`Ctx`](crate::core::Ctx)).
#[derive(Debug, Default)]
pub(crate) struct KafkaOffsets {
    /// OffsetFetch requests waiting for one store read per group.
    fetches: BTreeMap<u64, FetchWait>,
    next_wait: u64,
}

impl KafkaOffsets {
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
    /// The error of one partition of an OffsetCommit or a TxnOffsetCommit, as Kafka's
    /// `OffsetMetadataManager` decides it: the group's verdict `check` on the whole
    /// request first, then UNKNOWN_TOPIC_OR_PARTITION for a partition the broker does
    /// not have, then OFFSET_METADATA_TOO_LARGE for metadata longer than
    /// `max_metadata_bytes` (Kafka's `offset.metadata.max.bytes`); `None` accepts it.
    pub(super) fn partition_commit_error(
        &self,
        check: Result<(), ResponseError>,
        tp: &TopicPartition,
        metadata: Option<&str>,
    ) -> Option<ResponseError> {
        match check {
            Err(e) => Some(e),
            Ok(()) if !self.cx.exists(tp) => Some(ResponseError::UnknownTopicOrPartition),
            Ok(()) if metadata.is_some_and(|m| m.len() > self.cx.config.max_metadata_bytes) => {
                Some(ResponseError::OffsetMetadataTooLarge)
            }
            Ok(()) => None,
        }
    }

    pub(super) fn on_offset_commit(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: OffsetCommitRequest,
    ) {
        let group = r.group_id.to_string();
        let check = self
            .validate_offset_commit(
                &group,
                &CommitAuthor {
                    member_id: r.member_id.as_str(),
                    instance_id: r.group_instance_id.as_deref(),
                    generation: r.generation_id_or_member_epoch,
                    api: CommitApi::Kafka {
                        version: to.version,
                    },
                },
            )
            .map(|_| ());
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
                let code = self.partition_commit_error(check, &tp, metadata.as_deref());
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
        // Through the group id's one commit queue: after a batch in flight of either
        // path (a native group's own included).
        self.queue_commit(gid, crate::core::commits::Queued::Kafka(wait));
    }

    pub(super) fn on_offset_fetch(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: OffsetFetchRequest,
    ) {
        let require_stable = to.version >= 7 && r.require_stable;
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
            require_stable,
        };
        let mut outputs = Vec::new();
        for (index, (group, topics, member)) in asked.into_iter().enumerate() {
            // v9: a KIP-848 member's fetch carries its id and epoch.
            let member = member.as_ref().map(|(m, e)| (m.as_deref(), *e));
            let error = self.validate_offset_fetch(&group, member).err();
            let gid = GroupId::new(&group);
            let result = error.map(Err);
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
                let op = self.cx.add_op(Op::KafkaFetch {
                    wait: wait_id,
                    index,
                });
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
        self.cx.outputs(outputs);
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
            ResponseError::CoordinatorNotAvailable
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
                Some(Err(e)) => (e.code(), Vec::new()),
                None => (0, Vec::new()),
            };
            let by_tp: BTreeMap<TopicPartition, OffsetEntry> =
                found.into_iter().map(|e| (e.tp.clone(), e)).collect();
            if let Some(g) = self.groups.consumer_mut(&one.group) {
                g.note_fetched(by_tp.iter().map(|(tp, e)| (tp, e.offset)));
            }
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
            // KIP-447: with `require_stable`, a partition with transactional offsets not
            // yet committed to the store answers UNSTABLE_OFFSET_COMMIT (retriable) and
            // no offset, as Kafka's `fetchOffsets` does.
            let unstable = |p: i32, t: &TopicName| {
                wait.require_stable
                    && self.groups.txn.is_unstable(
                        one.group.as_str(),
                        &TopicPartition {
                            topic: t.clone(),
                            partition: p,
                        },
                    )
            };
            let unstable_code = ResponseError::UnstableOffsetCommit.code();
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
                        let e = if unstable(p, &t) {
                            op.error_code = unstable_code;
                            None
                        } else {
                            e
                        };
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
                        let stable = !unstable(p, &t);
                        let e = if stable { e } else { None };
                        op.committed_offset = e.map_or(-1, |e| e.offset);
                        op.committed_leader_epoch = -1;
                        op.metadata =
                            Some(s(e.and_then(|e| e.metadata.clone()).unwrap_or_default()));
                        op.error_code = match (stable, v < 2) {
                            (false, _) => unstable_code,
                            (true, true) => error,
                            (true, false) => 0,
                        };
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
            self.groups
                .get(group.as_str())
                .and_then(|g| g.validate_offset_delete().err())
        };
        if let Some(e) = group_error {
            response.error_code = e.code();
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::OffsetDelete(response));
        }
        // Offsets of a topic the group consumes stay (Kafka: GROUP_SUBSCRIBED_TO_TOPIC).
        let subscribed = match self
            .groups
            .get(group.as_str())
            .map(Group::subscribed_topics)
        {
            Some(Subscribed::Topics(topics)) => topics,
            Some(Subscribed::Every) => self.cx.topics.keys().cloned().collect(),
            None => Default::default(),
        };
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
        let known = self.group_kind(&group).is_some();
        let op = self.cx.add_op(Op::DeleteOffsets(DeleteWait::Offsets {
            slot,
            to,
            response,
            known,
        }));
        self.cx.output(Output::DeleteOffsets {
            op,
            group: GroupId::new(&group),
            scope: FetchScope::Partitions(delete),
        });
    }
}
