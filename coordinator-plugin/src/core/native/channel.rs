//! The consumers' answers on their channels (Heartbeat, StopFetcher, StartFetcher
//! answers): their offsets, errors and protocol violations.

use bytes::Bytes;
use drover_protocol as proto;
use drover_protocol::NativeResponse;

use super::effects::NativeEnv;
use super::group::{NativeGroup, Outstanding};
use super::offsets::CommitKind;
use crate::core::conn::ChannelOf;
use crate::core::result::Effects;
use crate::core::Coordinator;

use crate::io::FailureReason;
use crate::types::ConsumerId;
use crate::wire;

impl Coordinator {
    pub(in crate::core) fn on_channel_frame(&mut self, ch: ChannelOf, bytes: Bytes) {
        let Some(g) = self.groups.native_mut(&ch.group) else {
            return;
        };
        self.cx.native(g, |g, env, fx| {
            g.on_channel_answer(env, fx, &ch.consumer, ch.incarnation, bytes);
        });
    }
}

impl NativeGroup {
    /// A frame on member `id`'s channel (registration `incarnation`): the answer to the
    /// request outstanding on it, checked (a frame with none outstanding, a malformed
    /// one, a wrong correlation id or an error answer fail the member), with its
    /// offsets accepted and the rebalance moved on.
    fn on_channel_answer(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
        incarnation: u64,
        bytes: Bytes,
    ) {
        let g = self;
        let Some(m) = g.members.get_mut(id) else {
            return;
        };
        if m.incarnation != incarnation {
            return;
        }
        m.last_recv_ms = env.now;
        let Some(outstanding) = m.outstanding.take() else {
            tracing::info!(group = %g.id, consumer = %id, "frame on the channel with no request outstanding");
            return g.fail_member(env, fx, id, FailureReason::ProtocolViolation);
        };
        let (header, response) = match proto::decode_response_frame(bytes, outstanding.api_key(), 0)
        {
            Ok(x) => x,
            Err(e) => {
                tracing::info!(group = %g.id, consumer = %id, error = %e, "malformed answer on the channel");
                return g.fail_member(env, fx, id, FailureReason::ProtocolViolation);
            }
        };
        if header.correlation_id != outstanding.corr() {
            tracing::info!(group = %g.id, consumer = %id, expected = outstanding.corr(), got = header.correlation_id, "wrong correlation id on the channel");
            return g.fail_member(env, fx, id, FailureReason::ProtocolViolation);
        }
        match (outstanding, response) {
            (Outstanding::Heartbeat { .. }, NativeResponse::Heartbeat(r)) => {
                if !r.error_code.is_none() {
                    return g.fail_member(env, fx, id, FailureReason::ErrorResponse);
                }
                g.accept_channel_offsets(env, fx, id, r.offsets, false);
                if !r.fetchers_healthy {
                    return g.fail_member(env, fx, id, FailureReason::FetchersUnhealthy);
                }
                g.pump(env, fx, id);
            }
            (Outstanding::Stop { partitions, .. }, NativeResponse::StopFetcher(r)) => {
                if !r.error_code.is_none() {
                    return g.fail_member(env, fx, id, FailureReason::ErrorResponse);
                }
                g.accept_channel_offsets(env, fx, id, r.offsets, true);
                g.on_stopped(env, fx, id, partitions);
                g.pump(env, fx, id);
            }
            (Outstanding::Start { .. }, NativeResponse::StartFetcher(r)) => {
                if !r.error_code.is_none() {
                    return g.fail_member(env, fx, id, FailureReason::ErrorResponse);
                }
                g.on_started(env, fx, id);
                g.pump(env, fx, id);
            }
            _ => g.fail_member(env, fx, id, FailureReason::ProtocolViolation),
        }
    }

    /// Offsets on the channel (Heartbeat and StopFetcher answers): accepted for
    /// partitions the consumer owns in the coordinator's view. The channel is
    /// sequenced, so these cannot be stale.
    fn accept_channel_offsets(
        &mut self,
        env: &NativeEnv<'_>,
        fx: &mut Effects<'_>,
        id: &ConsumerId,
        offsets: Vec<proto::TopicOffsets>,
        urgent: bool,
    ) {
        let g = self;
        let mut any = false;
        let Some(generation) = g.members.get(id).map(|m| m.generation) else {
            return;
        };
        for o in wire::offsets_from_wire(offsets, env.topics) {
            let ok = g.members.get(id).is_some_and(|m| m.owned.contains(&o.tp))
                && env.exists(&o.tp)
                && o.offset >= 0
                && o.metadata
                    .as_ref()
                    .is_none_or(|m| m.len() <= env.config.max_metadata_bytes);
            if ok {
                g.accept_offset(
                    fx,
                    o.tp,
                    (o.offset, o.metadata),
                    generation,
                    CommitKind::Channel,
                );
                any = true;
            }
        }
        if urgent && any {
            g.commits.urgent = true;
            g.flush_commits(env, fx);
        }
    }
}
