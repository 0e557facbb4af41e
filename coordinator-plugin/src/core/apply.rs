//! The one applier of group engines' results: [`Ctx::apply`] carries out a
//! [`GroupResult`]'s effects in order — answers, connections, timer changes on the one
//! timer table, offset-store operations (the operation table and the commit queue),
//! events and counters — and hands back the call's response. Every engine's result goes
//! through it, whatever the group type (`result`).

use drover_protocol::NativeResponse;
use kafka_protocol::ResponseError;

use super::commits::{BatchSource, CommitWaiter};
use super::native::Waiter;
use super::result::{Effect, GroupResult};
use super::{Ctx, Op};
use crate::io::{FetchScope, Output};
use crate::wire;

impl Ctx {
    /// Applies `result`'s effects in order and returns its response. The emptied list
    /// is kept for the next engine call, which then allocates none.
    pub(in crate::core) fn apply<R>(&mut self, result: GroupResult<R>) -> R {
        let GroupResult {
            response,
            mut effects,
        } = result;
        for effect in effects.drain(..) {
            self.apply_one(effect);
        }
        self.lender.give_back(effects);
        response
    }

    fn apply_one(&mut self, effect: Effect) {
        match effect {
            Effect::ClassicReply(to, reply) => super::kafka::send_classic(self, to, reply),
            Effect::AnswerCommit(w) => self.answer_waiter(w, None),
            Effect::AnswerBatch { waiters, failed } => {
                self.answer_commit_waiters(waiters, failed);
            }
            Effect::Push { conn, bytes } => self.output(Output::Push { conn, bytes }),
            Effect::DropConnection { conn, close } => self.drop_connection(conn, close),
            Effect::Timer(key, at) => self.timers.set(key, at),
            Effect::FetchStartOffsets {
                op,
                group,
                partitions,
            } => {
                self.add_op_as(
                    op,
                    Op::RebalanceFetch {
                        group: group.clone(),
                    },
                );
                self.output(Output::FetchOffsets {
                    op,
                    group,
                    scope: FetchScope::Partitions(partitions),
                });
            }
            Effect::SendBatch {
                op,
                group,
                records,
                waiters,
            } => {
                let waiters = waiters.into_iter().map(CommitWaiter::Native).collect();
                self.send_commit_as(op, group, records, waiters, BatchSource::NativeGroup);
            }
            Effect::PendingOffsets(group, pending) => self.set_pending(&group, pending),
            Effect::Event(event) => self.event(event),
            Effect::Metric(counter, value) => self.metric(counter, value),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CoordinatorConfig;
    use crate::core::TimerKey;
    use crate::io::{CoordinatorCounter, Event};
    use crate::types::{ConnId, GroupId};

    fn ctx() -> Ctx {
        Ctx::new(
            CoordinatorConfig::default(),
            Box::new(crate::AssignorSet::new()),
        )
    }

    fn member(id: &str) -> TimerKey {
        TimerKey::ConsumerMember(GroupId::new("g"), id.to_owned())
    }

    /// A result's effects are carried out in the order the engine decided them: two
    /// deadlines of one millisecond fire in the order they were set, a deadline set
    /// then cancelled is gone (the other order would keep it), and outputs leave in
    /// order.
    #[test]
    fn a_results_effects_apply_in_order() {
        let mut cx = ctx();
        let mut fx = cx.lender.effects();
        fx.timer(member("b"), Some(5));
        fx.timer(member("a"), Some(5));
        fx.metric(CoordinatorCounter::ClassicRebalances, 2);
        fx.timer(member("c"), Some(3));
        fx.timer(member("c"), None);
        fx.event(Event::ConnectionRejected {
            conn: ConnId(7),
            message: "m".into(),
        });
        fx.metric(CoordinatorCounter::ClassicGenerations, 0);
        let op = fx.op_id();
        let result = fx.finish(op);
        assert_eq!(cx.apply(result), op);
        assert_eq!(cx.timers.pop_due(5), Some(member("b")));
        assert_eq!(cx.timers.pop_due(5), Some(member("a")));
        assert_eq!(cx.timers.pop_due(u64::MAX), None);
        let out = cx.take_outputs();
        assert!(
            matches!(
                out.as_slice(),
                [
                    Output::Metric {
                        counter: CoordinatorCounter::ClassicRebalances,
                        value: 2
                    },
                    Output::Event(Event::ConnectionRejected { .. }),
                ]
            ),
            "{out:?}"
        );
        // The next call's list is the emptied one, and ids go on.
        let fx = cx.lender.effects();
        assert!(fx.finish(()).effects.is_empty());
        assert!(cx.next_op() > op);
    }
}
