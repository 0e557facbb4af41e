use std::collections::BTreeMap;

use drover_abi::{
    sdk::{AssignorPlugin, PluginContext},
    AssignInput, Assignment, ErrorKind, TopicPartitions,
};
use drover_plugin_testkit::assignor::builders::{
    holders, homogeneous, input, loads, member, permutation, reordered, synthetic,
};
use drover_plugin_testkit::assignor::contract::check_contract;
use proptest::{collection::vec, prelude::*};

use crate::RoundRobinAssignor;

fn assign(input: &AssignInput) -> Assignment {
    RoundRobinAssignor.assign(input).expect("assign")
}

fn parts(output: &Assignment, member: usize) -> Vec<TopicPartitions> {
    output.members[member].partitions.to_vec()
}

#[test]
fn config_must_be_empty() {
    assert!(RoundRobinAssignor::new(&PluginContext::default()).is_ok());
    let ctx = PluginContext {
        config: "x = 1".into(),
        ..PluginContext::default()
    };
    let err = RoundRobinAssignor::new(&ctx).expect_err("rejected");
    assert_eq!(err.kind, ErrorKind::InvalidConfig);
}

/// First example of Kafka's RoundRobinAssignor javadoc (identical subscriptions).
#[test]
fn kafka_javadoc_homogeneous_example() {
    let input = input(
        vec![member("C1", &["t0", "t1"]), member("C0", &["t1", "t0"])],
        &[("t0", 3), ("t1", 3)],
    );
    let out = assign(&input);
    assert_eq!(
        parts(&out, 0),
        [
            TopicPartitions::new("t0", vec![0, 2]),
            TopicPartitions::new("t1", vec![1])
        ]
    );
    assert_eq!(
        parts(&out, 1),
        [
            TopicPartitions::new("t0", vec![1]),
            TopicPartitions::new("t1", vec![0, 2])
        ]
    );
}

/// Second example of the javadoc (different subscriptions).
#[test]
fn kafka_javadoc_heterogeneous_example() {
    let input = input(
        vec![
            member("C0", &["t0"]),
            member("C1", &["t0", "t1"]),
            member("C2", &["t0", "t1", "t2"]),
        ],
        &[("t0", 1), ("t1", 2), ("t2", 3)],
    );
    let out = assign(&input);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("t0", vec![0])]);
    assert_eq!(parts(&out, 1), [TopicPartitions::new("t1", vec![0])]);
    assert_eq!(
        parts(&out, 2),
        [
            TopicPartitions::new("t1", vec![1]),
            TopicPartitions::new("t2", vec![0, 1, 2])
        ]
    );
}

#[test]
fn duplicate_member_is_invalid_input() {
    let input = input(vec![member("a", &["x"]), member("a", &["x"])], &[("x", 1)]);
    let err = RoundRobinAssignor.assign(&input).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

/// Kafka's loop, literally: a circular iterator over the sorted members, skipping
/// those not subscribed to the partition's topic.
fn reference(input: &AssignInput) -> BTreeMap<(String, i32), String> {
    let mut members: Vec<_> = input.members.iter().collect();
    members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    let mut topics: Vec<_> = input
        .topics
        .iter()
        .filter(|t| members.iter().any(|m| m.topics.contains(&t.name)))
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let mut result = BTreeMap::new();
    let mut cursor = 0;
    for topic in topics {
        for p in 0..topic.partitions as i32 {
            while !members[cursor].topics.contains(&topic.name) {
                cursor = (cursor + 1) % members.len();
            }
            result.insert(
                (topic.name.to_string(), p),
                members[cursor].member_id.to_string(),
            );
            cursor = (cursor + 1) % members.len();
        }
    }
    result
}

fn group() -> impl Strategy<Value = AssignInput> {
    (vec(0u32..20, 0..6), vec(any::<u64>(), 0..9)).prop_map(|(p, s)| synthetic(&p, &s))
}

proptest! {
    #[test]
    fn meets_the_contract(input in group()) {
        let out = assign(&input);
        prop_assert_eq!(check_contract(&input, &out), Ok(()));
    }

    #[test]
    fn matches_kafkas_circular_walk(input in group()) {
        prop_assert_eq!(holders(&assign(&input)), reference(&input));
    }

    #[test]
    fn is_balanced_for_identical_subscriptions(
        members in 1usize..12,
        partitions in vec(0u32..30, 1..5),
    ) {
        let out = assign(&homogeneous(members, &partitions));
        let loads = loads(&out);
        let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        prop_assert!(max - min <= 1, "loads {:?}", loads);
    }

    #[test]
    fn ignores_member_order(input in group(), seed in any::<u64>()) {
        let shuffled = reordered(&input, &permutation(input.members.len(), seed));
        prop_assert_eq!(assign(&shuffled), assign(&input));
    }
}

/// The test kit's suite, in-process: balanced for identical subscriptions; not sticky.
#[test]
fn passes_the_testkit_suite() {
    use drover_plugin_testkit::assignor::{run, Claim, Claims, Options};
    let instance = drover_abi::sdk::in_process::assignor::<RoundRobinAssignor>("").expect("new");
    let report = run(
        &instance,
        &Options::new(Claims::none().with(Claim::Balanced)),
    );
    report.assert_passed();
}
