//! ConsumerGroupHeartbeat (v0–v1) and ConsumerGroupDescribe (v0–v1) of KIP-848: the
//! wire boundary of the consumer group state machine ([`super::consumer_group`]).
//!
//! The wire names topics by id; the state machine by name. Ids come from the host
//! ([`crate::Input::TopicIds`]); an owned partition of a topic id the coordinator does
//! not know (a topic deleted meanwhile) is dropped, as Kafka does.
//!
//! Also the coordinator's other entry points into the engine: the [`Env`] it builds
//! from the coordinator's state (whose `Cell`s count assignor fallbacks and failures,
//! added to the call's result as the `assignor_fallbacks` and `assignor_failures`
//! counters) and the effect list each call fills, whose result goes to the one applier
//! (`Ctx::apply`); the members' timers firing
//! (`on_consumer_timers`) and topic changes (`consumer_topics_changed`). A lost slot's
//! KIP-848 groups are dropped with the classic ones (`classic_api`).

use std::collections::BTreeSet;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribeAssignment, DescribedGroup, Member,
    TopicPartitions as DescribeTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions as HeartbeatTopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::consumer_group::{Env, HeartbeatRequest};
use crate::core::assigning::GroupAssignors;
use crate::core::conn::SlotRef;
use crate::core::groups::GroupKind;
use crate::core::result::Effects;
use crate::core::{Coordinator, Ctx};
use crate::io::CoordinatorCounter;
use crate::kafka_wire::KafkaReplyTo;
use crate::types::{GroupId, TopicName, TopicPartition};

pub(super) fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// Partitions grouped by topic id, in topic-name order (unknown ids left out).
pub(super) fn by_topic_id<'a>(
    coordinator: &Coordinator,
    partitions: impl IntoIterator<Item = &'a TopicPartition>,
) -> Vec<(Uuid, TopicName, Vec<i32>)> {
    let mut out: Vec<(Uuid, TopicName, Vec<i32>)> = Vec::new();
    for tp in partitions {
        let Some(id) = coordinator.kafka.topic_ids.get(&tp.topic) else {
            continue;
        };
        match out.last_mut() {
            Some((_, t, ps)) if *t == tp.topic => ps.push(tp.partition),
            _ => out.push((Uuid::from_bytes(*id), tp.topic.clone(), vec![tp.partition])),
        }
    }
    out
}

/// Runs `f` with the KIP-848 engine's environment and an empty effect list, and
/// applies its result, with the assignor fallbacks and failures the call counted in its
/// `Env` added as counters (`assignor_fallbacks`, `assignor_failures`). `steady`: the
/// steady heartbeat interval of a heartbeat, ms (the configured one otherwise).
fn consumer<R>(
    cx: &mut Ctx,
    steady: Option<u32>,
    f: impl FnOnce(&Env<'_>, &mut Effects<'_>) -> R,
) -> R {
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
        let heartbeat_interval_ms = steady.unwrap_or(config.consumer_heartbeat_interval_ms);
        let env = Env {
            now: *now,
            topics,
            partition_stats,
            assignors: GroupAssignors::new(&**assignors, calls),
            default_assignor: &config.default_assignor,
            session_timeout_ms: config.consumer_session_timeout_ms,
            heartbeat_interval_ms,
            reconcile_heartbeat_interval_ms: config
                .consumer_reconcile_heartbeat_interval_ms
                .min(config.consumer_heartbeat_interval_ms)
                .min(heartbeat_interval_ms),
            rebalance_settle_ms: config.consumer_rebalance_settle_ms,
            assignment_interval_ms: config.consumer_assignment_interval_ms,
            max_group_size: config.max_group_size,
            fallbacks: std::cell::Cell::new(0),
            failures: std::cell::Cell::new(0),
        };
        let mut fx = lender.effects();
        let response = f(&env, &mut fx);
        fx.metric(CoordinatorCounter::AssignorFallbacks, env.fallbacks.get());
        fx.metric(CoordinatorCounter::AssignorFailures, env.failures.get());
        fx.finish(response)
    };
    cx.apply(result)
}

impl Coordinator {
    /// The timers of KIP-848 members fired (group, member id), in deadline order:
    /// members past their session or rebalance timeout are fenced.
    pub(crate) fn on_consumer_timers(&mut self, due: Vec<(GroupId, String)>) {
        let (engine, groups) = (&mut self.kafka.consumer, &mut self.groups);
        let expired = consumer(&mut self.cx, None, |env, fx| {
            engine.expire(groups, env, fx, due)
        });
        for (group, member, reason) in expired {
            tracing::info!(%group, member, reason, "KIP-848 member fenced");
        }
    }

    /// Topics changed: regex subscriptions and partition counts of KIP-848 groups.
    pub(crate) fn consumer_topics_changed(&mut self) {
        let (engine, groups) = (&mut self.kafka.consumer, &mut self.groups);
        consumer(&mut self.cx, None, |env, _| {
            engine.topics_changed(groups, env)
        });
    }

    /// Re-runs the assignors of KIP-848 groups `ids` whose inputs drifted
    /// ([`ConsumerGroups::rerun`](super::consumer_group::ConsumerGroups::rerun)).
    pub(crate) fn consumer_rerun(&mut self, ids: Vec<GroupId>) {
        let (engine, groups) = (&mut self.kafka.consumer, &mut self.groups);
        consumer(&mut self.cx, None, |env, _| engine.rerun(groups, env, ids));
    }

    /// The result of assignor call `call` of KIP-848 group `group` arrived.
    pub(crate) fn consumer_assignor_done(
        &mut self,
        group: &GroupId,
        call: u64,
        result: Result<drover_abi::assignor::Assignment, drover_abi::PluginError>,
    ) {
        let (engine, groups) = (&mut self.kafka.consumer, &mut self.groups);
        consumer(&mut self.cx, None, |env, _| {
            engine.assignor_done(groups, env, group, call, result)
        });
    }

    pub(super) fn on_consumer_heartbeat(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        client_id: String,
        r: ConsumerGroupHeartbeatRequest,
    ) {
        // Borrowed from the request: a steady heartbeat copies no group id.
        let id: &str = &r.group_id;
        let mut out = ConsumerGroupHeartbeatResponse::default();
        let refuse = |out: &mut ConsumerGroupHeartbeatResponse, e: ResponseError, m: String| {
            out.error_code = e.code();
            out.error_message = Some(s(m));
            out.member_id = Some(r.member_id.clone());
        };
        if id.is_empty() {
            refuse(
                &mut out,
                ResponseError::InvalidGroupId,
                "empty group id".into(),
            );
        } else if !self.owns(id) {
            refuse(
                &mut out,
                ResponseError::NotCoordinator,
                self.not_coordinator_message(id),
            );
        } else if !self.take_group_id(id, GroupKind::Consumer) {
            refuse(
                &mut out,
                ResponseError::GroupIdNotFound,
                format!("group {id} is not a consumer (KIP-848) group"),
            );
        }
        if out.error_code != 0 {
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::ConsumerGroupHeartbeat(out));
        }
        let by_id = &self.kafka.topic_names;
        let owned = r.topic_partitions.map(|tps| {
            tps.iter()
                .filter_map(|t| {
                    by_id
                        .get(t.topic_id.as_bytes())
                        .map(|name| (name, &t.partitions))
                })
                .flat_map(|(name, ps)| {
                    ps.iter().map(|&p| TopicPartition {
                        topic: name.clone(),
                        partition: p,
                    })
                })
                .collect::<BTreeSet<_>>()
        });
        let request = HeartbeatRequest {
            version: to.version,
            group: self
                .groups
                .stored_id(id)
                .unwrap_or_else(|| GroupId::new(id)),
            member_id: r.member_id.to_string(),
            instance_id: r.instance_id.map(|i| i.to_string()),
            rack_id: r.rack_id.map(|i| i.to_string()),
            client_id,
            client_host: self.client_host(slot.conn),
            member_epoch: r.member_epoch,
            rebalance_timeout_ms: r.rebalance_timeout_ms,
            subscribed_topic_names: r
                .subscribed_topic_names
                .map(|ts| ts.iter().map(|t| TopicName::new(t.as_str())).collect()),
            subscribed_topic_regex: r.subscribed_topic_regex.map(|x| x.to_string()),
            server_assignor: r.server_assignor.map(|x| x.to_string()),
            owned_partitions: owned,
        };
        let members = self.kafka.consumer.member_count(&self.groups, self.cx.now);
        let steady = self.cx.config.steady_heartbeat_interval_ms(members);
        let (engine, groups) = (&mut self.kafka.consumer, &mut self.groups);
        let reply = consumer(&mut self.cx, Some(steady), |env, fx| {
            engine.heartbeat(groups, env, fx, request)
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
            .respond_kafka(slot, to, ResponseKind::ConsumerGroupHeartbeat(out));
    }

    pub(super) fn on_consumer_group_describe(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: ConsumerGroupDescribeRequest,
    ) {
        let mut response = ConsumerGroupDescribeResponse::default();
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
            } else if let Some(g) = self.kafka.consumer.describe(&self.groups, &id) {
                d.group_state = s(g.state);
                d.group_epoch = g.group_epoch;
                d.assignment_epoch = g.assignment_epoch;
                d.assignor_name = s(g.assignor);
                for m in g.members {
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
                    dm.member_id = s(m.member_id);
                    dm.instance_id = m.instance_id.map(s);
                    dm.rack_id = m.rack_id.map(s);
                    dm.member_epoch = m.member_epoch;
                    dm.client_id = s(m.client_id);
                    dm.client_host = s(m.client_host);
                    dm.subscribed_topic_names = m
                        .subscribed_topic_names
                        .iter()
                        .map(|t| s(t.as_str()).into())
                        .collect();
                    dm.subscribed_topic_regex = m.subscribed_topic_regex.map(s);
                    dm.assignment = assignment(&m.assignment);
                    dm.target_assignment = assignment(&m.target_assignment);
                    // v1: 1 = consumer protocol member (0 would be classic).
                    dm.member_type = if to.version >= 1 { 1 } else { -1 };
                    d.members.push(dm);
                }
            } else {
                // Classic and native groups too: a client falls back to DescribeGroups.
                error(
                    &mut d,
                    ResponseError::GroupIdNotFound,
                    format!("group {id} is not a consumer (KIP-848) group"),
                );
            }
            response.groups.push(d);
        }
        self.cx
            .respond_kafka(slot, to, ResponseKind::ConsumerGroupDescribe(response));
    }
}
