//! The native offset requests: CommitOffset with its per-partition checks
//! (docs/protocol.md §6.5) and FetchOffsets, handed to the offset store.

use drover_protocol as proto;
use drover_protocol::NativeResponse;
use kafka_protocol::ResponseError;

use super::group::{Group, Member};
use super::offsets::{CommitKind, Waiter};
use super::{offsets, Coordinator, Ctx, Op};

use crate::io::{FetchScope, Output};
use crate::types::{ConnId, Generation, GroupId, TopicName, TopicPartition};
use crate::wire;

impl Coordinator {
    pub(super) fn on_commit(&mut self, conn: ConnId, corr: i32, r: proto::CommitOffsetRequest) {
        let slot = self.cx.reserve(conn);
        if !r.group_id.is_empty() && !self.owns(&r.group_id) {
            // Every partition gets NOT_COORDINATOR; nothing is kept.
            let topics = r
                .topics
                .into_iter()
                .map(|t| proto::TopicErrors {
                    topic: t.topic,
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| proto::PartitionError {
                            partition: p.partition,
                            error_code: wire::error_code(ResponseError::NotCoordinator),
                        })
                        .collect(),
                })
                .collect();
            let response = NativeResponse::CommitOffset(proto::CommitOffsetResponse { topics });
            self.cx.respond(slot, corr, &response);
            return;
        }
        let hold_until = self.hold_for(&r.group_id);
        let cx = &mut self.cx;
        let gid = GroupId::new(&r.group_id);
        let non_member = r.consumer_id.is_empty() && r.generation == -1;
        let group = self.groups.get(&gid);
        let member = group.and_then(|g| g.members.get(r.consumer_id.as_str()));
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
                let error = commit_check(
                    cx,
                    r.group_id.is_empty(),
                    group,
                    member,
                    non_member,
                    r.generation,
                    &tp,
                    &p,
                );
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
            cx.respond(slot, corr, &NativeResponse::CommitOffset(response));
            return;
        }
        let group = self
            .groups
            .entry(gid.clone())
            .or_insert_with(|| Group::new(gid.clone(), hold_until));
        let mut waiting = Vec::with_capacity(accepted.len());
        for (ti, pi, tp, value) in accepted {
            waiting.push((ti, pi));
            let kind = if non_member {
                CommitKind::Reset
            } else {
                CommitKind::Explicit
            };
            group.accept_offset(cx, tp, value, Generation(r.generation), kind);
        }
        cx.next_waiter += 1;
        let id = cx.next_waiter;
        cx.waiters.insert(
            id,
            Waiter {
                slot,
                correlation_id: corr,
                response,
                waiting,
            },
        );
        group.add_waiter(cx, id);
    }

    pub(super) fn on_fetch(&mut self, conn: ConnId, corr: i32, r: proto::FetchOffsetsRequest) {
        let slot = self.cx.reserve(conn);
        if r.group_id.is_empty() {
            let response = NativeResponse::FetchOffsets(proto::FetchOffsetsResponse {
                error_code: wire::error_code(ResponseError::InvalidGroupId),
                topics: Vec::new(),
            });
            self.cx.respond(slot, corr, &response);
            return;
        }
        if !self.owns(&r.group_id) {
            let response = NativeResponse::FetchOffsets(proto::FetchOffsetsResponse {
                error_code: wire::error_code(ResponseError::NotCoordinator),
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
        let op = self.cx.next_op();
        self.cx.ops.insert(
            op,
            Op::ClientFetch {
                slot,
                correlation_id: corr,
                group: group.clone(),
                topics: r.topics,
            },
        );
        self.cx.out.push(Output::FetchOffsets { op, group, scope });
    }
}

/// The per-partition checks of a CommitOffset (docs/protocol.md §6.5), in order: the
/// partition's error, or `None` when the offset is accepted.
#[allow(clippy::too_many_arguments)]
fn commit_check(
    cx: &Ctx,
    group_id_empty: bool,
    group: Option<&Group>,
    member: Option<&Member>,
    non_member: bool,
    generation: i32,
    tp: &TopicPartition,
    p: &proto::PartitionOffset,
) -> Option<ResponseError> {
    if group_id_empty {
        return Some(ResponseError::InvalidGroupId);
    }
    if non_member {
        if group.is_some_and(|g| !g.members.is_empty()) {
            return Some(ResponseError::UnknownMemberId);
        }
    } else {
        let Some(m) = member else {
            return Some(ResponseError::UnknownMemberId);
        };
        let Some(g) = group else {
            return Some(ResponseError::UnknownMemberId);
        };
        if generation != g.generation.0 || generation != m.generation.0 {
            return Some(ResponseError::IllegalGeneration);
        }
        if !cx.exists(tp) {
            return Some(ResponseError::UnknownTopicOrPartition);
        }
        if !m.owned.contains(tp) {
            return if g.in_rebalance() && m.stopped_in_rebalance.contains(tp) {
                Some(ResponseError::RebalanceInProgress)
            } else {
                Some(ResponseError::IllegalGeneration)
            };
        }
    }
    if !cx.exists(tp) {
        return Some(ResponseError::UnknownTopicOrPartition);
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
