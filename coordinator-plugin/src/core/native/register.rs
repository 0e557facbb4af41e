//! The native RegisterConsumer request (docs/protocol.md §7.2): its checks and error
//! codes, and a consumer joining (or re-joining) its group on a new channel.

use std::collections::BTreeSet;
use std::sync::Arc;

use drover_protocol as proto;
use drover_protocol::NativeResponse;
use kafka_protocol::ResponseError;

use super::effects::NativeEnv;
use super::group::{Member, NativeGroup};
use crate::core::conn::ChannelOf;
use crate::core::groups::GroupKind;
use crate::core::result::Effects;
use crate::core::{Coordinator, Ctx};

use crate::assignors::Assignors;
use crate::io::{Event, FailureReason};
use crate::subscription::{compile_pattern, SubscriptionSpec};
use crate::types::{ConnId, ConsumerId, GroupId, TopicName};
use crate::wire;

impl Coordinator {
    pub(in crate::core) fn on_register(
        &mut self,
        conn: ConnId,
        corr: i32,
        r: proto::RegisterConsumerRequest,
    ) {
        let slot = self.cx.reserve(conn);
        let refuse = |cx: &mut Ctx, error: ResponseError, message: String| {
            tracing::debug!(group = r.group_id, consumer = r.consumer_id, %error, reason = message, "registration refused");
            let response = NativeResponse::RegisterConsumer(proto::RegisterConsumerResponse {
                error_code: wire::error_code(error),
                error_message: Some(message),
                heartbeat_interval_ms: 0,
                generation: 0,
            });
            cx.respond(slot, corr, &response);
        };
        // An empty group id is INVALID_GROUP_ID (from `validate`) wherever it is sent;
        // any other check comes after the ownership check (docs/protocol.md §7.2).
        if !r.group_id.is_empty() && !self.owns(&r.group_id) {
            let message = self.not_coordinator_message(&r.group_id);
            return refuse(&mut self.cx, ResponseError::NotCoordinator, message);
        }
        if !r.group_id.is_empty() && !self.take_group_id(&r.group_id, GroupKind::Native) {
            let message = format!(
                "group {} is a Kafka consumer group with members (classic or KIP-848)",
                r.group_id
            );
            return refuse(
                &mut self.cx,
                ResponseError::InconsistentGroupProtocol,
                message,
            );
        }
        let hold_until = self.hold_for(&r.group_id);
        let cx = &mut self.cx;
        if let Err((code, message)) = r.validate() {
            // The protocol crate's checks always name an error.
            let error = wire::kafka_error(code).unwrap_or(ResponseError::InvalidRequest);
            return refuse(cx, error, message);
        }
        let sub = &r.subscription;
        if !sub.kind.is_wildcard() && sub.topics.len() > cx.config.max_subscription_topics {
            return refuse(
                cx,
                ResponseError::InvalidRequest,
                format!(
                    "{} topics exceed the coordinator's limit of {}",
                    sub.topics.len(),
                    cx.config.max_subscription_topics
                ),
            );
        }
        if r.session_timeout_ms < cx.config.min_session_timeout_ms
            || r.session_timeout_ms > cx.config.max_session_timeout_ms
        {
            return refuse(
                cx,
                ResponseError::InvalidSessionTimeout,
                format!(
                    "session_timeout_ms {} is outside {}..={}",
                    r.session_timeout_ms,
                    cx.config.min_session_timeout_ms,
                    cx.config.max_session_timeout_ms
                ),
            );
        }
        let spec = if sub.kind.is_wildcard() {
            let pattern = sub.pattern.clone().unwrap_or_default();
            match compile_pattern(&pattern) {
                Ok(regex) => SubscriptionSpec::Wildcard {
                    pattern,
                    regex,
                    blacklist: sub.kind == proto::SubscriptionKind::BLACKLIST,
                    streams: sub.pattern_streams,
                },
                Err(e) => return refuse(cx, ResponseError::InvalidRegularExpression, e),
            }
        } else {
            SubscriptionSpec::Static(
                sub.topics
                    .iter()
                    .map(|t| (TopicName::new(&t.topic), t.streams))
                    .collect(),
            )
        };
        let assignor = r
            .assignor
            .clone()
            .unwrap_or_else(|| cx.config.default_assignor.clone());
        if !cx.assignors.contains(&assignor) {
            // Accepted: the group falls back to the default assignor at its rebalances
            // (`effects::effective_assignor`) until a rescan loads this one.
            tracing::warn!(
                group = r.group_id,
                consumer = r.consumer_id,
                "consumer names assignor `{assignor}`, which is not loaded; the group uses the default `{}` until it is",
                cx.config.default_assignor
            );
        }
        let gid = GroupId::new(&r.group_id);
        let cid = ConsumerId::new(&r.consumer_id);
        let group = self
            .groups
            .native_or_insert(gid.clone(), || NativeGroup::new(gid.clone(), hold_until));
        if let Some((_, other)) = group.members.iter().find(|(id, _)| **id != cid) {
            if other.assignor != assignor {
                let message = format!(
                    "the group's consumers use assignor `{}`, not `{assignor}`",
                    other.assignor
                );
                return refuse(cx, ResponseError::InconsistentGroupProtocol, message);
            }
        }
        let others = group.members.len() - usize::from(group.members.contains_key(&cid));
        if others >= cx.config.max_group_size {
            return refuse(
                cx,
                ResponseError::GroupMaxSizeReached,
                format!("the group has {others} consumers, the maximum"),
            );
        }
        if group.members.contains_key(&cid) {
            cx.native(group, |g, env, fx| {
                g.fail_member(env, fx, &cid, FailureReason::Replaced);
            });
        }
        let incarnation = cx.next_incarnation();
        let st = r.session_timeout_ms as u64;
        let topics = Arc::new(spec.resolve(&cx.topics, cx.config.exclude_internal_topics));
        let member = Member {
            id: cid.clone(),
            incarnation,
            conn,
            host: r.host.clone(),
            session_timeout_ms: st,
            heartbeat_interval_ms: (st / 3).max(1),
            subscription: spec,
            topics,
            auto_offset_reset: r.auto_offset_reset.0,
            assignor,
            data: r.member.clone(),
            generation: group.generation,
            owned: BTreeSet::new(),
            stopped_in_rebalance: BTreeSet::new(),
            last_recv_ms: cx.now,
            last_sent_ms: cx.now,
            ping_early_ms: 0,
            next_corr: 0,
            outstanding: None,
            queued_stop: None,
            queued_start: None,
        };
        cx.set_channel(
            conn,
            ChannelOf {
                group: gid.clone(),
                consumer: cid.clone(),
                incarnation,
            },
        );
        let response = NativeResponse::RegisterConsumer(proto::RegisterConsumerResponse {
            error_code: wire::error_code(None),
            error_message: None,
            heartbeat_interval_ms: (st / 3) as i32,
            generation: group.generation.0,
        });
        cx.respond_opening(slot, corr, &response, true);
        tracing::info!(group = %gid, consumer = %cid, host = r.host, generation = %group.generation, "consumer registered");
        cx.native(group, |g, env, fx| g.join(env, fx, member));
    }
}

impl NativeGroup {
    /// A registered consumer joins (its RegisterConsumer answered): it is a member from
    /// now on, its timer runs, and a rebalance is triggered.
    pub(super) fn join(&mut self, env: &NativeEnv<'_>, fx: &mut Effects<'_>, member: Member) {
        let id = member.id.clone();
        self.members.insert(id.clone(), member);
        fx.event(Event::MemberRegistered {
            group: self.id.clone(),
            consumer: id.clone(),
            generation: self.generation,
        });
        self.update_member_timer(env, fx, &id);
        // The first member of a group waits the quiet time too (no gap before it, so
        // `rebalance_quiet_ms`): members started together join within it and share
        // the first generation, instead of the first taking everything at once and
        // giving most of it back one round later (docs/protocol.md §6.4).
        self.trigger(env, fx, "join");
        self.progress(env, fx);
    }
}
