//! ShareGroupHeartbeat (v1) and ShareGroupDescribe (v1) of KIP-932: the wire boundary
//! of the share-group engine ([`super::share_group`]), and the coordinator's other
//! entry points into it: the members' session timers firing (`on_share_timers`),
//! topic changes (`share_topics_changed`) and share assignor results
//! (`share_assignor_done`). Each call runs the engine with its
//! environment and an effect list and hands the result to the one applier
//! (`Ctx::apply`).
//!
//! The wire names assigned partitions by topic id; the engine by name (ids from the
//! host, [`crate::Input::TopicIds`]; a topic whose id the coordinator does not know is
//! left out of an answer).

use std::collections::BTreeSet;

use kafka_protocol::messages::share_group_describe_response::{
    Assignment as DescribeAssignment, DescribedGroup, Member,
    TopicPartitions as DescribeTopicPartitions,
};
use kafka_protocol::messages::share_group_heartbeat_response::{
    Assignment, TopicPartitions as HeartbeatTopicPartitions,
};
use kafka_protocol::messages::{
    ResponseKind, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::ResponseError;

use super::consumer_api::{by_topic_id, s};
use super::share_group::{Env, ShareHeartbeat};
use crate::core::assigning::GroupAssignors;
use crate::core::conn::SlotRef;
use crate::core::groups::GroupKind;
use crate::core::result::Effects;
use crate::core::{Coordinator, Ctx};
use crate::kafka_wire::KafkaReplyTo;
use crate::types::{GroupId, TopicName, TopicPartition};

/// Runs `f` with the share-group engine's environment (time, topics, limits, the
/// share assignors) and an empty effect list, and applies its result.
fn share<R>(cx: &mut Ctx, f: impl FnOnce(&Env<'_>, &mut Effects<'_>) -> R) -> R {
    let result = {
        let Ctx {
            config,
            topics,
            partition_stats,
            assignors,
            now,
            calls,
            lender,
            ..
        } = &mut *cx;
        let env = Env {
            now: *now,
            topics,
            session_timeout_ms: config.share_session_timeout_ms,
            heartbeat_interval_ms: config.share_heartbeat_interval_ms,
            max_group_size: config.share_max_group_size,
            max_groups: config.share_max_groups,
            max_subscription_topics: config.max_subscription_topics,
            assignors: GroupAssignors::new(&**assignors, calls),
            partition_stats,
            config,
        };
        let mut fx = lender.effects();
        let response = f(&env, &mut fx);
        fx.finish(response)
    };
    cx.apply(result)
}

impl Coordinator {
    /// Share members whose session timers fired (group, member id).
    pub(crate) fn on_share_timers(&mut self, due: Vec<(GroupId, String)>) {
        let (share_groups, groups) = (&mut self.kafka.share, &mut self.groups);
        let expired = share(&mut self.cx, |env, fx| {
            share_groups.expire(groups, env, fx, due)
        });
        for (group, member) in expired {
            tracing::info!(%group, member, "share member fenced: session timeout");
        }
    }

    /// Topics changed: share groups whose subscribed topics changed get a new target.
    pub(crate) fn share_topics_changed(&mut self) {
        let (share_groups, groups) = (&mut self.kafka.share, &mut self.groups);
        share(&mut self.cx, |env, fx| {
            share_groups.topics_changed(groups, env, fx)
        });
    }

    /// The result of assignor call `call` of share group `group` arrived.
    pub(crate) fn share_assignor_done(
        &mut self,
        group: &GroupId,
        call: u64,
        result: Result<drover_abi::assignor::Assignment, drover_abi::PluginError>,
    ) {
        let (share_groups, groups) = (&mut self.kafka.share, &mut self.groups);
        share(&mut self.cx, |env, fx| {
            share_groups.assignor_done(groups, env, fx, group, call, result)
        });
    }

    pub(super) fn on_share_heartbeat(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        client_id: String,
        r: ShareGroupHeartbeatRequest,
    ) {
        let id: &str = &r.group_id;
        let mut out = ShareGroupHeartbeatResponse::default();
        let refuse = |out: &mut ShareGroupHeartbeatResponse, e: ResponseError, m: String| {
            out.error_code = e.code();
            out.error_message = Some(s(m));
            out.member_id = Some(r.member_id.clone());
        };
        if id.is_empty() {
            refuse(
                &mut out,
                ResponseError::InvalidRequest,
                "GroupId can't be empty.".into(),
            );
        } else if !self.owns(id) {
            refuse(
                &mut out,
                ResponseError::NotCoordinator,
                self.not_coordinator_message(id),
            );
        } else if !self.take_group_id(id, GroupKind::Share) {
            // Kafka 4.1: "Group … is not a share group."
            refuse(
                &mut out,
                ResponseError::GroupIdNotFound,
                format!("Group {id} is not a share group."),
            );
        }
        if out.error_code != 0 {
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::ShareGroupHeartbeat(out));
        }
        let request = ShareHeartbeat {
            group: self
                .groups
                .stored_id(id)
                .unwrap_or_else(|| GroupId::new(id)),
            member_id: r.member_id.to_string(),
            member_epoch: r.member_epoch,
            rack_id: r.rack_id.as_ref().map(|x| x.to_string()),
            subscribed_topic_names: r
                .subscribed_topic_names
                .as_ref()
                .map(|ts| ts.iter().map(|t| TopicName::new(t.as_str())).collect()),
            client_id,
            client_host: self.client_host(slot.conn),
        };
        let (share_groups, groups) = (&mut self.kafka.share, &mut self.groups);
        let reply = share(&mut self.cx, |env, fx| {
            share_groups.heartbeat(groups, env, fx, request)
        });
        out.member_id = Some(s(reply.member_id));
        out.member_epoch = reply.member_epoch;
        out.heartbeat_interval_ms = reply.heartbeat_interval_ms;
        if let Some((error, message)) = reply.error {
            out.error_code = error.code();
            out.error_message = Some(s(message));
        }
        out.assignment = reply.assignment.map(|parts| {
            let mut a = Assignment::default();
            a.topic_partitions = by_topic_id(self, &parts)
                .into_iter()
                .map(|(id, _, ps)| {
                    let mut t = HeartbeatTopicPartitions::default();
                    t.topic_id = id;
                    t.partitions = ps;
                    t
                })
                .collect();
            a
        });
        self.cx
            .respond_kafka(slot, to, ResponseKind::ShareGroupHeartbeat(out));
    }

    pub(super) fn on_share_group_describe(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: ShareGroupDescribeRequest,
    ) {
        let mut response = ShareGroupDescribeResponse::default();
        for gid in r.group_ids {
            let id = gid.to_string();
            let mut d = DescribedGroup::default();
            d.group_id = gid;
            d.authorized_operations = i32::MIN;
            let error = |d: &mut DescribedGroup, e: ResponseError, m: String| {
                d.error_code = e.code();
                d.error_message = Some(s(m));
            };
            if id.is_empty() {
                error(
                    &mut d,
                    ResponseError::InvalidGroupId,
                    "empty group id".into(),
                );
            } else if !self.owns(&id) {
                error(
                    &mut d,
                    ResponseError::NotCoordinator,
                    self.not_coordinator_message(&id),
                );
            } else if let Some(g) = self.groups.share(id.as_str()) {
                let (state, epoch, assignment_epoch, assignor) = g.described();
                d.group_state = s(state);
                d.group_epoch = epoch;
                d.assignment_epoch = assignment_epoch;
                d.assignor_name = s(assignor);
                for m in g.members.values() {
                    let assignment = |parts: &BTreeSet<TopicPartition>| {
                        let mut a = DescribeAssignment::default();
                        a.topic_partitions = by_topic_id(self, parts)
                            .into_iter()
                            .map(|(id, name, ps)| {
                                let mut t = DescribeTopicPartitions::default();
                                t.topic_id = id;
                                t.topic_name = s(name.as_str()).into();
                                t.partitions = ps;
                                t
                            })
                            .collect();
                        a
                    };
                    let mut dm = Member::default();
                    dm.member_id = s(m.id.clone());
                    dm.rack_id = m.rack_id.clone().map(s);
                    dm.member_epoch = m.epoch;
                    dm.client_id = s(m.client_id.clone());
                    dm.client_host = s(m.client_host.clone());
                    dm.subscribed_topic_names =
                        m.names.iter().map(|t| s(t.as_str()).into()).collect();
                    dm.assignment = assignment(&m.assigned);
                    d.members.push(dm);
                }
            } else {
                // Kafka 4.1: an unknown group, or one of another type.
                error(
                    &mut d,
                    ResponseError::GroupIdNotFound,
                    format!("Group {id} is not a share group."),
                );
            }
            response.groups.push(d);
        }
        self.cx
            .respond_kafka(slot, to, ResponseKind::ShareGroupDescribe(response));
    }
}
