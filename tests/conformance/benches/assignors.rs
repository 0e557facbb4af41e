//! Assignor benchmarks through the loaded plugins: homogeneous groups of
//! members × partitions (partitions spread over topics of 1,000 partitions each), and
//! sticky's reassignment after one member leaves.
//!
//! `cargo bench -p drover-tests --bench assignors`. Figures go in docs/benchmarks.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use drover_abi::{
    std_types::{RNone, RString, RVec},
    AssignInput, AssignorMember, TopicInfo,
};
use drover_tests::{load_assignor, ASSIGNORS};

const SIZES: &[(usize, u32)] = &[
    (100, 1_000),
    (1_000, 10_000),
    (10_000, 100_000),
    (10_000, 1_000_000),
];

/// `members` members all subscribed to topics of 1,000 partitions totalling `partitions`.
fn group(members: usize, partitions: u32) -> AssignInput {
    let per_topic = partitions.min(1_000);
    let topics: Vec<TopicInfo> = (0..partitions / per_topic)
        .map(|i| TopicInfo::new(format!("topic-{i:04}"), per_topic))
        .collect();
    let names: RVec<RString> = topics.iter().map(|t| t.name.clone()).collect();
    AssignInput {
        group: RString::from("bench"),
        members: (0..members)
            .map(|i| AssignorMember {
                member_id: RString::from(format!("consumer-{i:05}")),
                topics: names.clone(),
                owned: RVec::new(),
                rack: RNone,
                weight: 1,
            })
            .collect(),
        topics: RVec::from(topics),
    }
}

fn assign(c: &mut Criterion) {
    let mut g = c.benchmark_group("assign");
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    for (lib, name) in ASSIGNORS {
        let (_, assignor) = load_assignor(lib);
        for &(members, partitions) in SIZES {
            let input = group(members, partitions);
            g.bench_with_input(
                BenchmarkId::new(*name, format!("{members}x{partitions}")),
                &input,
                |b, input| b.iter(|| assignor.assign(input).unwrap()),
            );
        }
    }
    g.finish();
}

fn sticky_after_leave(c: &mut Criterion) {
    let mut g = c.benchmark_group("sticky-one-leaves");
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    let (_, sticky) = load_assignor("drover_assignor_sticky");
    for &(members, partitions) in SIZES {
        let input = group(members, partitions);
        let first = sticky.assign(&input).unwrap();
        let mut next = input.clone();
        next.members = input
            .members
            .iter()
            .zip(first.members.iter())
            .skip(1) // the first member leaves
            .map(|(m, a)| {
                let mut m = m.clone();
                m.owned = a.partitions.clone();
                m
            })
            .collect();
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{members}x{partitions}")),
            &next,
            |b, input| b.iter(|| sticky.assign(input).unwrap()),
        );
    }
    g.finish();
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, assign, sticky_after_leave);
}
criterion_main!(group::benches);
