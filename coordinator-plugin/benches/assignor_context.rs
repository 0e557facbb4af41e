//! What building an assignor's input and context costs next to the assignment itself
//! (issue 16): at 1,000 members × 10,000 partitions and 10,000 members × 1,000,000
//! partitions, in topics of 1,000 partitions each, every member subscribing to every
//! topic and owning every `members`-th partition (a group after a rebalance), every
//! partition with the host's data (`PartitionStats`: leader, log offsets, produce
//! rates) and a committed offset.
//!
//! - `assignor_context/<size>/build`: `AssignorCall::build`, the code a native
//!   rebalance runs before its assignor: the `AssignInput` (members' topic lists and
//!   owned partitions, topic counts) and the `AssignContext` (each subscribed
//!   partition's entry from the table, the committed offset laid over it, the leaders'
//!   racks).
//! - `assignor_context/<size>/range`, `…/sticky`, `…/load-aware`: one call of the
//!   assignor (`range` is the default), loaded from its `.so` and called through the
//!   plugin ABI with that input and context, output built but not checked. Produce
//!   rates differ per partition (256–4,351 bytes/s), so `load-aware` balances by rate
//!   and, from the round-robin ownership, moves partitions until every member is
//!   within its band (10% of a fair share).
//!
//! ```text
//! cargo bench -p drover-coordinator --bench assignor_context
//! ```

#[allow(dead_code)] // this bench uses only `plugin`
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use drover_abi::assignor::{BrokerContext, PartitionContext, TopicContext};
use drover_abi::std_types::RSome;
use drover_coordinator::assignor_call::{AssignorCall, CallMember};
use drover_coordinator::{ConsumerId, PartitionStats, TopicName, TopicPartition};

const PARTITIONS_PER_TOPIC: u32 = 1_000;

/// A group of `members` members over `topics` topics, and the host's table of them.
struct Setup {
    ids: Vec<ConsumerId>,
    subscribed: BTreeSet<TopicName>,
    owned: Vec<BTreeSet<TopicPartition>>,
    topics: BTreeMap<TopicName, u32>,
    stats: PartitionStats,
    committed: BTreeMap<TopicPartition, i64>,
}

impl Setup {
    fn new(members: usize, topics: usize) -> Setup {
        let names: Vec<TopicName> = (0..topics)
            .map(|t| TopicName::new(format!("topic-{t:04}")))
            .collect();
        let ids = (0..members)
            .map(|m| ConsumerId::new(format!("consumer-{m:05}")))
            .collect();
        let mut owned = vec![BTreeSet::new(); members];
        let mut committed = BTreeMap::new();
        let mut table = Vec::with_capacity(topics);
        for (t, name) in names.iter().enumerate() {
            let mut partitions = Vec::with_capacity(PARTITIONS_PER_TOPIC as usize);
            for p in 0..PARTITIONS_PER_TOPIC as i32 {
                let tp = TopicPartition::new(name.as_str(), p);
                let global = t * PARTITIONS_PER_TOPIC as usize + p as usize;
                owned[global % members].insert(tp.clone());
                committed.insert(tp, 1_000);
                let mut c = PartitionContext::unknown(p);
                c.leader = RSome((global % 3) as i32);
                c.log_start_offset = RSome(0);
                c.log_end_offset = RSome(2_000);
                c.produce_bytes_per_sec = RSome(256.0 + ((global * 7_919) % 4_096) as f64);
                c.produce_records_per_sec = RSome(10.0);
                partitions.push(c);
            }
            table.push(TopicContext {
                topic: name.as_str().into(),
                partitions: partitions.into(),
            });
        }
        let brokers = (0..3).map(|b| BrokerContext {
            broker_id: b,
            rack: RSome(format!("rack-{b}").into()),
        });
        Setup {
            ids,
            subscribed: names.iter().cloned().collect(),
            owned,
            topics: names
                .into_iter()
                .map(|n| (n, PARTITIONS_PER_TOPIC))
                .collect(),
            stats: PartitionStats::new(brokers, table),
            committed,
        }
    }

    fn build(&self) -> AssignorCall {
        let members: Vec<CallMember<'_>> = self
            .ids
            .iter()
            .zip(&self.owned)
            .map(|(id, owned)| CallMember {
                id,
                topics: &self.subscribed,
                owned,
            })
            .collect();
        AssignorCall::build(
            "bench",
            &members,
            &self.topics,
            &self.stats,
            self.committed.iter().map(|(tp, o)| (tp, *o)),
        )
    }
}

fn bench(c: &mut Criterion) {
    let plugins: Vec<_> = [
        "drover_assignor_range",
        "drover_assignor_sticky",
        "drover_assignor_load_aware",
    ]
    .into_iter()
    .map(support::plugin)
    .collect();
    for (label, members, topics, seconds) in [
        ("1000x10000", 1_000, 10, 5),
        ("10000x1000000", 10_000, 1_000, 30),
    ] {
        let setup = Setup::new(members, topics);
        let mut group = c.benchmark_group(format!("assignor_context/{label}"));
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .measurement_time(Duration::from_secs(seconds))
            .warm_up_time(Duration::from_secs(1));
        group.bench_function("build", |b| b.iter(|| black_box(setup.build())));
        let call = setup.build();
        assert_eq!(call.input().members.len(), members);
        for (name, assignors) in &plugins {
            group.bench_function(name.as_str(), |b| {
                b.iter(|| black_box(call.run(assignors, name).expect("assigns")))
            });
        }
        group.finish();
    }
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
criterion_main!(group::benches);
