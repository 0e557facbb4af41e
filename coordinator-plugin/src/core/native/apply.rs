//! The one adapter between native groups and the coordinator's shared state:
//! [`Ctx::native`] builds a group's [`NativeEnv`], runs one group method with an empty
//! [`Effects`] list and applies the decisions in order — operation ids and the
//! operation table, connections, timers, the commit queue, answers and outputs.

use drover_protocol::NativeResponse;
use kafka_protocol::ResponseError;

use super::effects::{Effects, NativeEffect, NativeEnv};
use super::group::NativeGroup;
use super::offsets::Waiter;
use crate::core::commits::{BatchSource, CommitWaiter};
use crate::core::{Ctx, Op, TimerKey};
use crate::io::{FetchScope, Output};
use crate::types::GroupId;
use crate::wire;

impl Ctx {
    /// Runs `f` on group `g` with the group's environment and applies what it decided.
    pub(in crate::core) fn native<R>(
        &mut self,
        g: &mut NativeGroup,
        f: impl FnOnce(&mut NativeGroup, &NativeEnv<'_>, &mut Effects<'_>) -> R,
    ) -> R {
        let (env, mut fx) = self.native_call(&g.id);
        let result = f(g, &env, &mut fx);
        let mut effects = fx.into_list();
        self.apply_native(&g.id, &mut effects);
        self.spare_effects = effects;
        result
    }

    /// Applies `effects` in order, leaving the list empty.
    fn apply_native(&mut self, group: &GroupId, effects: &mut Vec<NativeEffect>) {
        for effect in effects.drain(..) {
            match effect {
                NativeEffect::Push { conn, bytes } => self.output(Output::Push { conn, bytes }),
                NativeEffect::DropConnection { conn, close } => {
                    self.drop_connection(conn, close);
                }
                NativeEffect::GroupTimer(at) => self.timers.set(TimerKey::Group(group.clone()), at),
                NativeEffect::MemberTimer(id, at) => {
                    self.timers.set(TimerKey::Member(group.clone(), id), at);
                }
                NativeEffect::FetchStartOffsets { op, partitions } => {
                    self.add_op_as(
                        op,
                        Op::RebalanceFetch {
                            group: group.clone(),
                        },
                    );
                    self.output(Output::FetchOffsets {
                        op,
                        group: group.clone(),
                        scope: FetchScope::Partitions(partitions),
                    });
                }
                NativeEffect::SendBatch {
                    op,
                    records,
                    waiters,
                } => {
                    let waiters = waiters.into_iter().map(CommitWaiter::Native).collect();
                    self.send_commit_as(
                        op,
                        group.clone(),
                        records,
                        waiters,
                        BatchSource::NativeGroup,
                    );
                }
                NativeEffect::Answer(w) => self.answer_waiter(w, None),
                NativeEffect::AnswerBatch { waiters, failed } => {
                    self.answer_commit_waiters(waiters, failed);
                }
                NativeEffect::PendingOffsets(pending) => self.set_pending(group, pending),
                NativeEffect::Event(event) => self.event(event),
                NativeEffect::Metric(counter, value) => self.metric(counter, value),
            }
        }
    }

    /// Answers a CommitOffset request: its entries that waited for the store get
    /// `error` (`None`: written).
    pub(in crate::core) fn answer_waiter(&mut self, mut w: Waiter, error: Option<ResponseError>) {
        if let Some(e) = error {
            for (t, p) in w.waiting {
                w.response.topics[t].partitions[p].error_code = wire::error_code(e);
            }
        }
        let response = NativeResponse::CommitOffset(w.response);
        self.respond(w.slot, w.correlation_id, &response);
    }
}
