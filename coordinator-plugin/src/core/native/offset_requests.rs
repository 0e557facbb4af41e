//! The native offset requests: CommitOffset with its per-partition checks
//! (docs/protocol.md §6.5) and FetchOffsets, handed to the offset store.

use drover_protocol as proto;
use drover_protocol::NativeResponse;
use kafka_protocol::ResponseError;

use super::group::{Member, NativeGroup};
use super::offsets;
use super::offsets::{CommitKind, Waiter};
use crate::core::commits::{CommitApi, CommitAuthor};
use crate::core::groups::GroupKind;
use crate::core::{Coordinator, Ctx, Op};

use crate::io::{FetchScope, Output};
use crate::types::{ConnId, Generation, GroupId, TopicName, TopicPartition};
use crate::wire;

impl Coordinator {
    pub(in crate::core) fn on_commit(
        &mut self,
        conn: ConnId,
        corr: i32,
        r: proto::CommitOffsetRequest,
    ) {
        let slot = self.cx.reserve(conn);
        let hold_until = self.hold_for(&r.group_id);
        let gid = GroupId::new(&r.group_id);
        let author = CommitAuthor {
            member_id: &r.consumer_id,
            instance_id: None,
            generation: r.generation,
            api: CommitApi::Native,
        };
        let simple = author.is_simple();
        // The one commit check, whatever the group's type (a group of a Kafka protocol
        // takes only a simple commit: it has no native member; taken while it is empty,
        // its id then goes to a native group, as by a RegisterConsumer). Refused as a
        // whole (an empty id, a slot not owned, the group's rules), every partition
        // gets the error and nothing is kept.
        let checked = self.validate_offset_commit(&r.group_id, &author);
        let cx = &self.cx;
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
                let error = match &checked {
                    Err(e) => Some(*e),
                    Ok(member) => partition_check(cx, *member, &tp, &p),
                };
                if error.is_none() {
                    accepted.push((ti, pi, tp, (p.offset, p.metadata)));
                }
                partitions.push(proto::PartitionError {
                    partition: p.partition,
                    error_code: wire::error_code(error),
                });
            }
            response.topics.push(proto::TopicErrors {
                topic: t.topic,
                partitions,
            });
        }
        if accepted.is_empty() {
            self.cx
                .respond(slot, corr, &NativeResponse::CommitOffset(response));
            return;
        }
        if !self.take_group_id(gid.as_str(), GroupKind::Native) {
            // Validated above: a group of another kind here is empty.
            tracing::warn!(group = %gid, "a native commit to a non-empty group of another protocol");
        }
        let cx = &mut self.cx;
        let group = self
            .groups
            .native_or_insert(gid.clone(), || NativeGroup::new(gid.clone(), hold_until));
        let kind = if simple {
            CommitKind::Reset
        } else {
            CommitKind::Explicit
        };
        let generation = Generation(r.generation);
        cx.native(group, |g, env, fx| {
            let mut waiting = Vec::with_capacity(accepted.len());
            for (ti, pi, tp, value) in accepted {
                waiting.push((ti, pi));
                g.accept_offset(fx, tp, value, generation, kind);
            }
            let waiter = Waiter {
                slot,
                correlation_id: corr,
                response,
                waiting,
            };
            g.add_waiter(env, fx, waiter);
        });
    }

    pub(in crate::core) fn on_fetch(
        &mut self,
        conn: ConnId,
        corr: i32,
        r: proto::FetchOffsetsRequest,
    ) {
        let slot = self.cx.reserve(conn);
        if let Err(e) = self.validate_offset_fetch(&r.group_id, None) {
            let response = NativeResponse::FetchOffsets(proto::FetchOffsetsResponse {
                error_code: wire::error_code(e),
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
        let op = self.cx.add_op(Op::ClientFetch {
            slot,
            correlation_id: corr,
            group: group.clone(),
            topics: r.topics,
        });
        self.cx.output(Output::FetchOffsets { op, group, scope });
    }
}

/// The per-partition checks of a CommitOffset (docs/protocol.md §6.5), in order, after
/// the group's ([`NativeGroup::validate_offset_commit`]): a member commits only partitions it
/// owns (REBALANCE_IN_PROGRESS for one it stopped in the running rebalance,
/// ILLEGAL_GENERATION otherwise); the partition must exist, the offset be at least 0
/// and the metadata at most `max_metadata_bytes` long.
fn partition_check(
    cx: &Ctx,
    member: Option<(&NativeGroup, &Member)>,
    tp: &TopicPartition,
    p: &proto::PartitionOffset,
) -> Option<ResponseError> {
    if !cx.exists(tp) {
        return Some(ResponseError::UnknownTopicOrPartition);
    }
    if let Some((g, m)) = member {
        if !m.owned.contains(tp) {
            return if g.in_rebalance() && m.stopped_in_rebalance.contains(tp) {
                Some(ResponseError::RebalanceInProgress)
            } else {
                Some(ResponseError::IllegalGeneration)
            };
        }
    }
    if p.offset < 0 {
        return Some(ResponseError::InvalidRequest);
    }
    if p.metadata
        .as_ref()
        .is_some_and(|m| m.len() > cx.config.max_metadata_bytes)
    {
        return Some(ResponseError::OffsetMetadataTooLarge);
    }
    None
}

impl NativeGroup {
    /// The group-level check of a commit to a native group (docs/protocol.md §6.5;
    /// Kafka's `validateOffsetCommit`): by the native API, a simple commit only while
    /// the group has no consumer (UNKNOWN_MEMBER_ID otherwise), a member's commit with
    /// the group's and the member's generation (UNKNOWN_MEMBER_ID for an unknown
    /// consumer, ILLEGAL_GENERATION for another generation), returning the member; by
    /// Kafka's OffsetCommit, only a simple commit while the group has no consumer (a
    /// Kafka client is never a member of a native group).
    pub(crate) fn validate_offset_commit(
        &self,
        author: &CommitAuthor,
    ) -> Result<Option<&Member>, ResponseError> {
        if author.is_simple() {
            return if self.members.is_empty() {
                Ok(None)
            } else {
                Err(ResponseError::UnknownMemberId)
            };
        }
        if author.api != CommitApi::Native {
            return Err(ResponseError::UnknownMemberId);
        }
        let m = self
            .members
            .get(author.member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if author.generation != self.generation.0 || author.generation != m.generation.0 {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(Some(m))
    }
}
