//! Deterministic simulation of transactional offset commits (issue 18): seeded random
//! runs of transactional producers committing offsets for simple groups
//! (TxnOffsetCommit), committing or aborting, with a store that answers late or fails,
//! and coordinator restarts (a broker crash: unanswered store operations land or not;
//! the new coordinator gets the open transactions' offsets back through
//! `TxnOffsetsPending` and the transactions decided but not yet applied again, as the
//! transaction coordinator keeps them in its durable record until applied).
//!
//! Checked after every event (docs/design.md, "No lost commits", for transactions):
//! the store never holds an offset of a transaction that did not commit, and for every
//! partition a committed transaction wrote, once its completion was applied, the store
//! holds that transaction's offset or a later committed one's.
//!
//! Every offset is `transaction id × 1000 + n`, so a stored offset names its
//! transaction. Each transaction commits offsets for one group (as Kafka Streams
//! does). `TXN_SIM_SEEDS=n` runs n seeds (default 200); a failure prints its seed.

use crate::common;
use crate::kafka;

use std::collections::{BTreeMap, BTreeSet};

use common::Rng;
use drover_coordinator::{Coordinator, GroupId, Input, PendingTxnOffsets, TopicName, TxnProducer};
use kafka::*;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{ProducerId, TxnOffsetCommitRequest};

const GROUPS: [&str; 2] = ["ga", "gb"];
const PRODUCERS: i64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Committed { seq: u64, applied: bool },
    Aborted { applied: bool },
}

#[derive(Debug)]
struct Txn {
    producer: TxnProducer,
    group: &'static str,
    state: State,
    /// What the ledger recorded for it.
    recorded: Vec<PendingTxnOffsets>,
    /// Partitions it staged.
    partitions: BTreeSet<i32>,
}

struct Sim {
    h: Harness,
    rng: Rng,
    txns: BTreeMap<u64, Txn>,
    /// Per producer id, its open transaction and epoch.
    open: BTreeMap<i64, (Option<u64>, i16)>,
    next_txn: u64,
    next_seq: u64,
    trace: Vec<String>,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut h = Harness::new();
        h.store.delay_ms = 0;
        Sim {
            h,
            rng: Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15),
            txns: BTreeMap::new(),
            open: (1..=PRODUCERS).map(|p| (p, (None, 0))).collect(),
            next_txn: 1,
            next_seq: 1,
            trace: Vec::new(),
        }
    }

    fn step(&mut self) {
        let pid = 1 + self.rng.below(PRODUCERS as u64) as i64;
        let (open, epoch) = self.open[&pid];
        let producer = TxnProducer { id: pid, epoch };
        let roll = self.rng.below(100);
        match open {
            _ if roll < 4 => self.restart(),
            _ if roll < 10 => {
                self.h.store.fail_commits = 1 + self.rng.below(2) as u32;
                self.trace.push("store fails".into());
            }
            _ if roll < 20 => {
                let ms = self.rng.below(50);
                self.h.store.delay_ms = self.rng.below(20);
                self.h.advance(ms);
            }
            // As Kafka's transaction coordinator, a producer's next transaction waits
            // until the previous one is applied (CONCURRENT_TRANSACTIONS meanwhile).
            None if self.unapplied(pid) => self.h.advance(5),
            None => {
                let id = self.next_txn;
                self.next_txn += 1;
                let group = GROUPS[self.rng.below(2) as usize];
                self.txns.insert(
                    id,
                    Txn {
                        producer,
                        group,
                        state: State::Open,
                        recorded: Vec::new(),
                        partitions: BTreeSet::new(),
                    },
                );
                self.open.insert(pid, (Some(id), epoch));
                self.trace
                    .push(format!("txn {id} begins ({producer}, {group})"));
            }
            Some(id) if roll < 70 => self.commit_offsets(id, producer),
            Some(id) => {
                let commit = self.rng.chance(0.6);
                let state = if commit {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    State::Committed {
                        seq,
                        applied: false,
                    }
                } else {
                    State::Aborted { applied: false }
                };
                self.txns.get_mut(&id).unwrap().state = state;
                // Sometimes the next transaction runs at a new epoch.
                let epoch = if self.rng.chance(0.3) {
                    epoch + 1
                } else {
                    epoch
                };
                self.open.insert(pid, (None, epoch));
                self.trace.push(format!("txn {id} ends: {state:?}"));
                self.h.feed(Input::TxnCompleted {
                    op: id,
                    producer,
                    committed: commit,
                });
            }
        }
        self.note_applied();
        self.check();
    }

    /// Whether producer `pid` has a transaction decided but not yet applied.
    fn unapplied(&self, pid: i64) -> bool {
        self.txns.values().any(|t| {
            t.producer.id == pid
                && matches!(
                    t.state,
                    State::Committed { applied: false, .. } | State::Aborted { applied: false }
                )
        })
    }

    fn commit_offsets(&mut self, id: u64, producer: TxnProducer) {
        let group = self.txns[&id].group;
        let n = 1 + self.rng.below(3);
        let mut r = TxnOffsetCommitRequest::default();
        r.transactional_id = s(format!("tx-{}", producer.id)).into();
        r.group_id = s(group).into();
        r.producer_id = ProducerId(producer.id);
        r.producer_epoch = producer.epoch;
        r.generation_id = -1;
        let mut topic = TxnOffsetCommitRequestTopic::default();
        topic.name = s("orders").into();
        let mut parts = BTreeSet::new();
        for k in 0..n {
            let p = self.rng.below(6) as i32;
            if !parts.insert(p) {
                continue;
            }
            let mut pr = TxnOffsetCommitRequestPartition::default();
            pr.partition_index = p;
            pr.committed_offset = (id * 1000 + k) as i64;
            topic.partitions.push(pr);
        }
        r.topics.push(topic);
        let before = self.h.ledger.recorded.len();
        let answer = self.h.admin(3, r);
        let codes: Vec<i16> = answer.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert!(codes.iter().all(|c| *c == 0), "txn {id}: {codes:?}");
        let recorded: Vec<PendingTxnOffsets> = self.h.ledger.recorded[before..].to_vec();
        let txn = self.txns.get_mut(&id).unwrap();
        txn.partitions.extend(parts.iter().copied());
        txn.recorded.extend(recorded);
        self.trace
            .push(format!("txn {id} commits offsets of {group}: {parts:?}"));
    }

    /// The broker crashes and restarts: a new coordinator, the open and decided but
    /// unapplied transactions restored by the transaction coordinator.
    fn restart(&mut self) {
        let land = self.rng.chance(0.5);
        self.trace
            .push(format!("restart (in-flight writes land: {land})"));
        self.h.crash_store_ops(land);
        self.h.store.fail_commits = 0;
        self.h.coord = Coordinator::new(config(), crate::common::TestAssignors::default())
            .expect("valid config");
        let ids = topics()
            .into_iter()
            .map(|(n, _, id)| (TopicName::new(n), id))
            .collect();
        self.h.feed(Input::TopicIds { ids });
        let topics = topics()
            .into_iter()
            .map(|(n, p, _)| (TopicName::new(n), p))
            .collect();
        self.h.feed(Input::TopicsChanged { topics });
        let unresolved: Vec<u64> = self
            .txns
            .iter()
            .filter(|(_, t)| {
                !matches!(
                    t.state,
                    State::Committed { applied: true, .. } | State::Aborted { applied: true }
                )
            })
            .map(|(id, _)| *id)
            .collect();
        let pending = unresolved
            .iter()
            .flat_map(|id| self.txns[id].recorded.clone())
            .collect();
        self.h.feed(Input::TxnOffsetsPending { pending });
        // Decided ones again, in the order they were decided.
        let mut decided: Vec<(u64, u64, bool)> = unresolved
            .iter()
            .filter_map(|id| match self.txns[id].state {
                State::Committed { seq, .. } => Some((seq, *id, true)),
                State::Aborted { .. } => Some((0, *id, false)),
                State::Open => None,
            })
            .collect();
        decided.sort();
        for (_, id, committed) in decided {
            let producer = self.txns[&id].producer;
            self.h.feed(Input::TxnCompleted {
                op: id,
                producer,
                committed,
            });
        }
    }

    fn note_applied(&mut self) {
        for op in std::mem::take(&mut self.h.ledger.applied) {
            self.trace.push(format!("txn {op} applied"));
            if let Some(t) = self.txns.get_mut(&op) {
                t.state = match t.state {
                    State::Committed { seq, .. } => State::Committed { seq, applied: true },
                    State::Aborted { .. } => State::Aborted { applied: true },
                    State::Open => panic!("txn {op} applied while open"),
                };
            }
        }
    }

    fn check(&self) {
        // Only committed transactions' offsets are in the store.
        let mut stored: BTreeMap<(String, i32), u64> = BTreeMap::new();
        for ((g, tp), e) in &self.h.store.offsets {
            let id = e.offset as u64 / 1000;
            let txn = &self.txns[&id];
            assert!(
                matches!(txn.state, State::Committed { .. }),
                "{g} {tp:?} holds offset {} of txn {id}, which is {:?}",
                e.offset,
                txn.state
            );
            stored.insert((g.to_string(), tp.partition), id);
        }
        // No applied commit lost: each of its partitions holds it or a later commit.
        for (id, t) in &self.txns {
            let State::Committed { seq, applied: true } = t.state else {
                continue;
            };
            for p in &t.partitions {
                let holder = stored.get(&(t.group.to_string(), *p)).unwrap_or_else(|| {
                    panic!(
                        "txn {id} committed {} orders-{p}, the store has nothing",
                        t.group
                    )
                });
                let State::Committed { seq: held, .. } = self.txns[holder].state else {
                    unreachable!()
                };
                assert!(
                    held >= seq,
                    "txn {id} (commit #{seq}) lost {} orders-{p} to txn {holder} (commit #{held})",
                    t.group
                );
            }
        }
        let _ = GroupId::new("");
    }
}

#[test]
fn committed_offsets_hold_exactly_the_committed_transactions_across_restarts() {
    let seeds: u64 = std::env::var("TXN_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    for seed in 0..seeds {
        let result = std::panic::catch_unwind(|| {
            let mut sim = Sim::new(seed);
            for _ in 0..300 {
                let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.step()));
                if let Err(e) = stepped {
                    let tail = sim.trace.len().saturating_sub(40);
                    eprintln!("trace (last 40):\n{}", sim.trace[tail..].join("\n"));
                    std::panic::resume_unwind(e);
                }
            }
            // Quiet: the store recovers, time passes, every decided transaction is
            // applied.
            sim.h.store.fail_commits = 0;
            sim.h.advance(1_000);
            sim.note_applied();
            sim.check();
            for (id, t) in &sim.txns {
                assert!(
                    !matches!(
                        t.state,
                        State::Committed { applied: false, .. } | State::Aborted { applied: false }
                    ),
                    "txn {id} decided but never applied: {:?}\n{}",
                    t.state,
                    sim.trace.join("\n")
                );
            }
        });
        if let Err(e) = result {
            eprintln!("transaction simulation failed with seed {seed}");
            std::panic::resume_unwind(e);
        }
    }
}
