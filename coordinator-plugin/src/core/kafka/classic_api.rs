//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the wire checks common to every
//! classic request (group id, ownership, the group's protocol, member and generation)
//! and the conversion between `kafka-protocol` messages and the classic group's
//! domain values: it lends the pure group a `ClassicEnv` (the clock, the limits) and an
//! effect list, and hands the group's result to the one applier (`Ctx::apply`, which
//! sends the answers, deferred ones included, in order, moves the timers and counts).
//! Also the coordinator's other entry
//! points into classic groups: their timers firing (`on_classic_timer`), and dropping
//! the Kafka groups, classic and KIP-848, of a lost coordinator slot
//! (`drop_classic_with_slot`).

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ResponseKind, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::classic::{
    ClassicEnv, ClassicGroup, ClassicLimits, ClassicReply, ClassicTimer, JoinParams, JoinResult,
    Pending,
};
use crate::core::conn::SlotRef;
use crate::core::groups::GroupKind;
use crate::core::result::Effects;
use crate::core::{Coordinator, Ctx};
use crate::kafka_wire::KafkaReplyTo;
use crate::types::GroupId;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// Sends a classic group's answer in the version it was asked in.
pub(in crate::core) fn send(cx: &mut Ctx, p: Pending, reply: ClassicReply) {
    let v = p.to.version;
    let response = match reply {
        ClassicReply::Join(r) => {
            let mut out = JoinGroupResponse::default();
            out.error_code = r.error.map_or(0, |e| e.code());
            out.generation_id = r.generation;
            // Non-nullable before v7.
            out.protocol_type = r.protocol_type.map(s).or((v < 7).then(StrBytes::default));
            out.protocol_name = r.protocol_name.map(s).or((v < 7).then(StrBytes::default));
            out.leader = s(r.leader);
            out.skip_assignment = v >= 9 && r.skip_assignment;
            out.member_id = s(r.member_id);
            out.members = r
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    let mut m = JoinGroupResponseMember::default();
                    m.member_id = s(id);
                    m.group_instance_id = if v >= 5 { instance.map(s) } else { None };
                    m.metadata = metadata;
                    m
                })
                .collect();
            ResponseKind::JoinGroup(out)
        }
        ClassicReply::Sync {
            error,
            protocol_type,
            protocol_name,
            assignment,
        } => {
            let mut out = SyncGroupResponse::default();
            out.error_code = error.map_or(0, |e| e.code());
            if v >= 5 {
                out.protocol_type = protocol_type.map(s);
                out.protocol_name = protocol_name.map(s);
            }
            out.assignment = assignment;
            ResponseKind::SyncGroup(out)
        }
    };
    cx.respond_kafka(p.slot, p.to, response);
}

/// What a classic group reads from the coordinator's shared state: the time and the
/// configured limits.
fn classic_env(cx: &Ctx) -> ClassicEnv {
    ClassicEnv {
        now: cx.now,
        limits: ClassicLimits {
            initial_rebalance_delay_ms: cx.config.initial_rebalance_delay_ms,
            initial_rebalance_quiet_ms: cx.config.initial_rebalance_quiet_ms,
            max_group_size: cx.config.max_group_size,
        },
    }
}

/// Runs `f` on a classic group with the group's environment and an empty effect list,
/// and applies its result.
fn classic<R>(cx: &mut Ctx, f: impl FnOnce(&ClassicEnv, &mut Effects<'_>) -> R) -> R {
    let env = classic_env(cx);
    let mut fx = cx.lender.effects();
    let response = f(&env, &mut fx);
    let result = fx.finish(response);
    cx.apply(result)
}

impl Coordinator {
    /// The error of a request for classic group `id`, before the group is looked at:
    /// empty id, another coordinator's group, a group of another protocol.
    fn classic_precheck(&self, id: &str) -> Option<ResponseError> {
        if id.is_empty() {
            return Some(ResponseError::InvalidGroupId);
        }
        if !self.owns(id) {
            return Some(ResponseError::NotCoordinator);
        }
        match self.group_kind(id) {
            Some(GroupKind::Native | GroupKind::Consumer) => {
                Some(ResponseError::InconsistentGroupProtocol)
            }
            _ => None,
        }
    }

    pub(super) fn on_join_group(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        client_id: String,
        r: JoinGroupRequest,
    ) {
        let pending = Pending { slot, to };
        let member_id = r.member_id.to_string();
        let fail = |cx: &mut Ctx, e: ResponseError| {
            send(
                cx,
                pending,
                ClassicReply::Join(JoinResult::error(e, &member_id)),
            );
        };
        let id = r.group_id.to_string();
        if !id.is_empty() && self.owns(&id) && !self.take_group_id(&id, GroupKind::Classic) {
            return fail(&mut self.cx, ResponseError::InconsistentGroupProtocol);
        }
        if let Some(e) = self.classic_precheck(&id) {
            return fail(&mut self.cx, e);
        }
        let config = &self.cx.config;
        if r.session_timeout_ms < config.min_session_timeout_ms
            || r.session_timeout_ms > config.max_session_timeout_ms
        {
            return fail(&mut self.cx, ResponseError::InvalidSessionTimeout);
        }
        if r.protocol_type.is_empty() || r.protocols.is_empty() {
            return fail(&mut self.cx, ResponseError::InconsistentGroupProtocol);
        }
        let metadata: usize = r
            .protocols
            .iter()
            .map(|p| p.name.len() + p.metadata.len())
            .sum();
        if metadata > config.max_join_metadata_bytes {
            tracing::info!(
                group = id,
                bytes = metadata,
                max = config.max_join_metadata_bytes,
                "JoinGroup refused: protocol metadata over the limit"
            );
            return fail(&mut self.cx, ResponseError::InvalidRequest);
        }
        let params = JoinParams {
            member_id: member_id.clone(),
            instance_id: r.group_instance_id.as_ref().map(|i| i.to_string()),
            client_id,
            client_host: self.client_host(slot.conn),
            session_timeout_ms: r.session_timeout_ms,
            // v0 has no rebalance timeout: it is the session timeout.
            rebalance_timeout_ms: if to.version >= 1 {
                r.rebalance_timeout_ms
            } else {
                r.session_timeout_ms
            },
            protocol_type: r.protocol_type.to_string(),
            protocols: r
                .protocols
                .into_iter()
                .map(|p| (p.name.to_string(), p.metadata))
                .collect(),
            require_known_member_id: to.version >= 4,
        };
        let gid = GroupId::new(&id);
        let group = self
            .groups
            .classic_or_insert(gid.clone(), || ClassicGroup::new(gid));
        classic(&mut self.cx, |env, fx| group.join(env, fx, params, pending));
    }

    /// The member and generation checks of SyncGroup and Heartbeat.
    fn classic_member_check(
        &self,
        id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        if let Some(e) = self.classic_precheck(id) {
            return Err(e);
        }
        let Some(group) = self.groups.classic(id) else {
            return Err(ResponseError::UnknownMemberId);
        };
        group.check_member(member_id, instance_id)?;
        if generation != group.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    pub(super) fn on_sync_group(&mut self, slot: SlotRef, to: KafkaReplyTo, r: SyncGroupRequest) {
        let pending = Pending { slot, to };
        let id = r.group_id.to_string();
        let member_id = r.member_id.to_string();
        let instance = r.group_instance_id.as_ref().map(|i| i.to_string());
        let error = |e: ResponseError| ClassicReply::Sync {
            error: Some(e),
            protocol_type: None,
            protocol_name: None,
            assignment: Default::default(),
        };
        if let Err(e) =
            self.classic_member_check(&id, &member_id, instance.as_deref(), r.generation_id)
        {
            return send(&mut self.cx, pending, error(e));
        }
        let Some(group) = self.groups.classic_mut(id.as_str()) else {
            return send(&mut self.cx, pending, error(ResponseError::UnknownMemberId));
        };
        // v5: the protocol type and name must be the group's.
        let mismatch = |given: &Option<StrBytes>, ours: &Option<String>| {
            given
                .as_ref()
                .is_some_and(|g| ours.as_deref() != Some(g.as_str()))
        };
        if mismatch(&r.protocol_type, &group.protocol_type)
            || mismatch(&r.protocol_name, &group.protocol_name)
        {
            return send(
                &mut self.cx,
                pending,
                error(ResponseError::InconsistentGroupProtocol),
            );
        }
        let assignments = r
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect();
        classic(&mut self.cx, |env, fx| {
            group.sync(env, fx, &member_id, assignments, pending);
        });
    }

    pub(super) fn on_classic_heartbeat(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: HeartbeatRequest,
    ) {
        let id = r.group_id.to_string();
        let member_id = r.member_id.to_string();
        let instance = r.group_instance_id.as_ref().map(|i| i.to_string());
        let error = match self.classic_member_check(
            &id,
            &member_id,
            instance.as_deref(),
            r.generation_id,
        ) {
            Err(e) => Some(e),
            Ok(()) => self
                .groups
                .classic_mut(id.as_str())
                .and_then(|g| classic(&mut self.cx, |env, fx| g.heartbeat(env, fx, &member_id))),
        };
        let mut out = HeartbeatResponse::default();
        out.error_code = error.map_or(0, |e| e.code());
        self.cx
            .respond_kafka(slot, to, ResponseKind::Heartbeat(out));
    }

    pub(super) fn on_leave_group(&mut self, slot: SlotRef, to: KafkaReplyTo, r: LeaveGroupRequest) {
        let id = r.group_id.to_string();
        // v0–v2: one member by id; v3+ (KIP-345): a batch of (member id, instance id).
        let leaving: Vec<(String, Option<String>)> = if to.version >= 3 {
            r.members
                .iter()
                .map(|m| {
                    (
                        m.member_id.to_string(),
                        m.group_instance_id.as_ref().map(|i| i.to_string()),
                    )
                })
                .collect()
        } else {
            vec![(r.member_id.to_string(), None)]
        };
        let mut out = LeaveGroupResponse::default();
        if let Some(e) = self.classic_precheck(&id) {
            out.error_code = e.code();
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::LeaveGroup(out));
        }
        let mut results = Vec::with_capacity(leaving.len());
        match self.groups.classic_mut(id.as_str()) {
            None => {
                out.error_code = ResponseError::UnknownMemberId.code();
            }
            Some(group) => {
                for (member_id, instance) in leaving {
                    // A static member may leave by instance id alone.
                    let member = match (&instance, member_id.is_empty()) {
                        (Some(i), true) => group.instances.get(i).cloned().unwrap_or_default(),
                        _ => member_id.clone(),
                    };
                    let error = if group.is_pending(&member) {
                        None
                    } else {
                        group.check_member(&member, instance.as_deref()).err()
                    };
                    if error.is_none() {
                        classic(&mut self.cx, |env, fx| group.leave(env, fx, &member));
                    }
                    let mut m = MemberResponse::default();
                    m.member_id = s(member_id);
                    m.group_instance_id = instance.map(s);
                    m.error_code = error.map_or(0, |e| e.code());
                    results.push(m);
                }
            }
        }
        if to.version >= 3 {
            out.members = results;
        } else if let Some(m) = results.first() {
            out.error_code = m.error_code;
        }
        self.cx
            .respond_kafka(slot, to, ResponseKind::LeaveGroup(out));
    }

    /// Drops classic group `g` (already out of the table) with its lost slot: members
    /// waiting for an answer get NOT_COORDINATOR and find the slot's new owner (offset
    /// commits in flight still get the store's answer).
    pub(crate) fn drop_classic_with_slot(&mut self, mut g: ClassicGroup, slot: u32) {
        tracing::info!(group = %g.id, slot, members = g.members.len(), "classic group dropped with its slot");
        classic(&mut self.cx, |_, fx| {
            g.drop_all(fx, ResponseError::NotCoordinator);
        });
    }

    /// A classic group's deadline passed.
    pub(crate) fn on_classic_timer(&mut self, group: &GroupId, timer: ClassicTimer) {
        if let Some(g) = self.groups.classic_mut(group) {
            classic(&mut self.cx, |env, fx| g.on_timer(env, fx, timer));
        }
    }
}
