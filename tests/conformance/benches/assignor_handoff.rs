//! The cost of running an assignor call under its budget
//! (`coordinator.assignor_timeout_ms`, host/src/coordination/assignor_budget.rs; issue 28
//! item 2): the same call of `range` (the default assignor, loaded from its `.so`) with
//! an input and a context as the coordinator builds them, made directly on the calling
//! thread (as with `assignor_timeout_ms = 0`) and through the host's budgeted wrapper,
//! which copies the input and the context and hands the call to the plugin's worker
//! thread, waiting for its result. The difference is the hand-off; `copy-only` is the
//! copy of the input and the context the wrapper makes, alone. `handed-out` is the
//! whole path of a coordinator of ABI 3.6: the call as a job (`RunAssignor`) queued to
//! the assignor's thread of the host's driver (`coordination::driver::assignor_runs`),
//! which makes the budgeted call and posts the result to the coordinator thread's
//! mailbox, where the bench waits for it.
//!
//! Homogeneous groups: every member subscribes to every topic of (at most) 1,000
//! partitions; every partition has a context entry (leader, log offsets, committed
//! offset, produce rates), as after the host's first partition table.
//!
//! `cargo bench -p drover-tests --bench assignor_handoff`. Figures go in
//! docs/benchmarks.md.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use abi_stable::sabi_trait::TD_Opaque;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use drover_abi::{
    assignor::{AssignContext, AssignorArc, PartitionContext, TopicContext},
    std_types::{RNone, RSlice, RSome, RString, RVec},
    AssignInput, AssignorMember, TopicInfo,
};
use drover_abi::{
    coordinator::{AssignorJob, AssignorJob_TO},
    std_types::{RArc, RResult},
    Assignment, PluginError,
};
use drover_host::coordination::driver::{assignor_runs::AssignorRuns, client::Msg};
use drover_host::{coordination::assignor_budget::AssignorBudgets, metrics::Metrics};
use drover_tests::load_assignor;

/// (members, partitions, partitions per topic): homogeneous groups over topics of 1,000
/// partitions, and issue 19's largest KIP-848 group shape (one topic, a partition per
/// member).
const SIZES: &[(usize, u32, u32)] = &[
    (10, 100, 1_000),
    (100, 1_000, 1_000),
    (1_000, 10_000, 1_000),
    (10_000, 100_000, 1_000),
    (100_000, 100_000, 100_000),
];

/// `members` members all subscribed to topics of `per_topic` partitions totalling
/// `partitions`, and a context entry for every partition.
fn group(members: usize, partitions: u32, per_topic: u32) -> (AssignInput, Vec<TopicContext>) {
    let per_topic = partitions.min(per_topic);
    let topics: Vec<TopicInfo> = (0..partitions / per_topic)
        .map(|i| TopicInfo::new(format!("topic-{i:04}"), per_topic))
        .collect();
    let names: RVec<RString> = topics.iter().map(|t| t.name.clone()).collect();
    let context = topics
        .iter()
        .map(|t| TopicContext {
            topic: t.name.clone(),
            partitions: (0..t.partitions as i32)
                .map(|p| PartitionContext {
                    partition: p,
                    leader: RSome(0),
                    log_start_offset: RSome(0),
                    log_end_offset: RSome(10_000 + i64::from(p)),
                    committed_offset: RSome(9_000),
                    produce_bytes_per_sec: RSome(1_000.0 + f64::from(p)),
                    produce_records_per_sec: RSome(10.0),
                })
                .collect(),
        })
        .collect();
    let input = AssignInput {
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
    };
    (input, context)
}

fn call(assignor: &AssignorArc, input: &AssignInput, topics: &[TopicContext]) -> usize {
    AssignContext {
        members: RSlice::from_slice(&[]),
        brokers: RSlice::from_slice(&[]),
        topics: RSlice::from_slice(topics),
        partition_data_age_ms: drover_abi::std_types::ROption::RNone,
    }
    .lend(|context| {
        assignor
            .assign_with_context(input, context)
            .unwrap()
            .members
            .len()
    })
}

/// One call as a coordinator of ABI 3.6 hands it to the host: the input and the
/// context owned by the job (shared here, as the coordinator moves what it built).
struct Job {
    assignor: AssignorArc,
    input: Arc<AssignInput>,
    topics: Arc<Vec<TopicContext>>,
}

impl AssignorJob for Job {
    fn run(&self) -> RResult<Assignment, PluginError> {
        AssignContext {
            members: RSlice::from_slice(&[]),
            brokers: RSlice::from_slice(&[]),
            topics: RSlice::from_slice(&self.topics),
            partition_data_age_ms: drover_abi::std_types::ROption::RNone,
        }
        .lend(|context| self.assignor.assign_with_context(&self.input, context))
    }

    fn group(&self) -> RString {
        "bench".into()
    }

    fn assignor(&self) -> RString {
        "range".into()
    }
}

fn handoff(c: &mut Criterion) {
    let (_, handle) = load_assignor("drover_assignor_range");
    let handle = Arc::new(handle);
    let direct = handle.instance();
    let budgets = AssignorBudgets::new(60_000, Arc::new(Metrics::new()));
    let named = budgets.named(&BTreeMap::from([("range".to_owned(), Arc::clone(&handle))]));
    let budgeted = named[0].assignor.clone();
    let mut g = c.benchmark_group("assignor-handoff");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for &(members, partitions, per_topic) in SIZES {
        let (input, context) = group(members, partitions, per_topic);
        let topics = partitions / per_topic.min(partitions);
        let size = format!("{members}x{partitions}in{topics}");
        g.bench_with_input(BenchmarkId::new("direct", &size), &input, |b, input| {
            b.iter(|| call(&direct, input, &context))
        });
        g.bench_with_input(BenchmarkId::new("budgeted", &size), &input, |b, input| {
            b.iter(|| call(&budgeted, input, &context))
        });
        let (mailbox, results) = flume::unbounded::<Msg>();
        let mut runs = AssignorRuns::new(mailbox.downgrade(), 60_000);
        let (shared_input, shared_topics) = (Arc::new(input.clone()), Arc::new(context.clone()));
        g.bench_function(BenchmarkId::new("handed-out", &size), |b| {
            b.iter(|| {
                let job = Job {
                    assignor: budgeted.clone(),
                    input: Arc::clone(&shared_input),
                    topics: Arc::clone(&shared_topics),
                };
                let job = RArc::new(AssignorJob_TO::from_value(job, TD_Opaque));
                assert!(runs.run(1, job).is_none());
                match results.recv().expect("a result") {
                    Msg::AssignorDone { result, .. } => result.unwrap().members.len(),
                    _ => unreachable!("only assignor results are posted"),
                }
            })
        });
        // What the wrapper copies (and later drops) per call, alone, on one thread.
        g.bench_with_input(BenchmarkId::new("copy-only", &size), &input, |b, input| {
            b.iter(|| {
                let copy = (input.clone(), context.to_vec());
                copy.0.members.len() + copy.1.len()
            })
        });
    }
    g.finish();
}

#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, handoff);
}
criterion_main!(group::benches);
