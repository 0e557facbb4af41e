use std::collections::BTreeMap;

use drover_abi::{
    sdk::{AssignorPlugin, PluginContext},
    AssignInput, Assignment, ErrorKind, TopicPartitions,
};
use drover_plugin_testkit::assignor::builders::{input, member, permutation, reordered, synthetic};
use drover_plugin_testkit::assignor::contract::check_contract;
use proptest::{collection::vec, prelude::*};

use crate::RangeAssignor;

fn assign(input: &AssignInput) -> Assignment {
    RangeAssignor.assign(input).expect("assign")
}

fn parts(output: &Assignment, member: usize) -> Vec<TopicPartitions> {
    output.members[member].partitions.to_vec()
}

#[test]
fn config_must_be_empty() {
    assert!(RangeAssignor::new(&PluginContext::default()).is_ok());
    let ctx = PluginContext {
        config: "x = 1".into(),
        ..PluginContext::default()
    };
    let err = RangeAssignor::new(&ctx).expect_err("rejected");
    assert_eq!(err.kind, ErrorKind::InvalidConfig);
}

/// The example of Kafka's RangeAssignor javadoc: two consumers, two topics of three.
#[test]
fn kafka_javadoc_example() {
    let input = input(
        vec![member("C1", &["t0", "t1"]), member("C0", &["t0", "t1"])],
        &[("t0", 3), ("t1", 3)],
    );
    let out = assign(&input);
    assert_eq!(out.members[0].member_id.as_str(), "C0");
    assert_eq!(
        parts(&out, 0),
        [
            TopicPartitions::new("t0", vec![0, 1]),
            TopicPartitions::new("t1", vec![0, 1])
        ]
    );
    assert_eq!(
        parts(&out, 1),
        [
            TopicPartitions::new("t0", vec![2]),
            TopicPartitions::new("t1", vec![2])
        ]
    );
}

#[test]
fn ranges_are_per_topic_subscribers() {
    let input = input(
        vec![
            member("a", &["x"]),
            member("b", &["x", "y"]),
            member("c", &[]),
        ],
        &[("x", 5), ("y", 2)],
    );
    let out = assign(&input);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("x", vec![0, 1, 2])]);
    assert_eq!(
        parts(&out, 1),
        [
            TopicPartitions::new("x", vec![3, 4]),
            TopicPartitions::new("y", vec![0, 1])
        ]
    );
    assert!(parts(&out, 2).is_empty());
}

#[test]
fn duplicate_member_is_invalid_input() {
    let input = input(vec![member("a", &["x"]), member("a", &["x"])], &[("x", 1)]);
    let err = RangeAssignor.assign(&input).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

/// Expected partitions of each (member, topic): members of a topic sorted by id, the
/// first `n % m` get `n / m + 1` partitions, the others `n / m`, in contiguous ranges.
fn expected(input: &AssignInput) -> BTreeMap<(String, String), Vec<i32>> {
    let mut expected = BTreeMap::new();
    for topic in input.topics.iter() {
        let mut members: Vec<&str> = input
            .members
            .iter()
            .filter(|m| m.topics.contains(&topic.name))
            .map(|m| m.member_id.as_str())
            .collect();
        members.sort_unstable();
        let n = topic.partitions as usize;
        let mut next = 0;
        for (k, id) in members.iter().enumerate() {
            let len = n / members.len() + usize::from(k < n % members.len());
            if len > 0 {
                let range = (next as i32..(next + len) as i32).collect();
                expected.insert((id.to_string(), topic.name.to_string()), range);
            }
            next += len;
        }
    }
    expected
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
    fn gives_floor_or_ceil_with_extras_to_first_members(input in group()) {
        let out = assign(&input);
        let mut got = BTreeMap::new();
        for m in out.members.iter() {
            for tp in m.partitions.iter() {
                got.insert((m.member_id.to_string(), tp.topic.to_string()), tp.partitions.to_vec());
            }
        }
        prop_assert_eq!(got, expected(&input));
    }

    #[test]
    fn ignores_member_order(input in group(), seed in any::<u64>()) {
        let shuffled = reordered(&input, &permutation(input.members.len(), seed));
        prop_assert_eq!(assign(&shuffled), assign(&input));
    }
}

/// The test kit's suite, in-process: range balances per topic only, so it claims nothing beyond the contract.
#[test]
fn passes_the_testkit_suite() {
    use drover_plugin_testkit::assignor::{run, Claims, Options};
    let instance = drover_abi::sdk::in_process::assignor::<RangeAssignor>("").expect("new");
    let report = run(&instance, &Options::new(Claims::none()));
    report.assert_passed();
}

/// `input`'s assignment with the test kit's generated context: even partitions led by
/// broker `p % 3` in rack `r{p % 3}`, odd ones unknown.
fn assign_racked(input: &AssignInput) -> Assignment {
    use drover_abi::sdk::assignor::Context;
    drover_plugin_testkit::assignor::GeneratedContext::for_input(input)
        .lend(|raw| RangeAssignor.assign_with_context(input, &Context::new(raw)))
        .expect("assign")
}

fn racked(mut m: drover_abi::AssignorMember, rack: &str) -> drover_abi::AssignorMember {
    m.rack = drover_abi::std_types::RSome(rack.into());
    m
}

/// KIP-881: `a` in rack r2 and `b` in rack r0; partition 2 is led in r2, partition 0
/// in r0 (1 and 3 unknown). Each first takes the partition in its rack, then the
/// shares are filled in order: a {1, 2}, b {0, 3} — where without racks a has {0, 1}.
#[test]
fn members_take_partitions_led_in_their_rack_first() {
    let members = vec![
        racked(member("a", &["t"]), "r2"),
        racked(member("b", &["t"]), "r0"),
    ];
    let input = input(members, &[("t", 4)]);
    let out = assign_racked(&input);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("t", vec![1, 2])]);
    assert_eq!(parts(&out, 1), [TopicPartitions::new("t", vec![0, 3])]);
    assert_eq!(
        parts(&assign(&input), 0),
        [TopicPartitions::new("t", vec![0, 1])]
    );
}

/// Without member racks, the context's leader racks change nothing.
#[test]
fn no_member_racks_no_change() {
    let input = input(vec![member("a", &["t"]), member("b", &["t"])], &[("t", 5)]);
    assert_eq!(assign_racked(&input), assign(&input));
}

/// Members in racks r0..r2 (and some without) over generated groups.
fn racked_group() -> impl Strategy<Value = AssignInput> {
    (group(), vec(0u8..4, 9)).prop_map(|(mut input, racks)| {
        for (i, m) in input.members.iter_mut().enumerate() {
            m.rack = match racks[i % racks.len()] {
                3 => drover_abi::std_types::RNone,
                r => drover_abi::std_types::RSome(format!("r{r}").into()),
            };
        }
        input
    })
}

proptest! {
    /// With racks: the contract holds and, per topic, every subscriber gets `n / m` or
    /// `n / m + 1` partitions, `n % m` of them the larger share (racks decide which
    /// partitions, and which members get the extras, never the shares).
    #[test]
    fn racks_keep_the_contract_and_the_shares(input in racked_group()) {
        let racked = assign_racked(&input);
        prop_assert_eq!(check_contract(&input, &racked), Ok(()));
        for topic in input.topics.iter() {
            let subscribers: Vec<&str> = input.members.iter()
                .filter(|m| m.topics.contains(&topic.name))
                .map(|m| m.member_id.as_str()).collect();
            if subscribers.is_empty() {
                continue;
            }
            let (n, m) = (topic.partitions as usize, subscribers.len());
            let shares: Vec<usize> = subscribers.iter().map(|id| {
                racked.members.iter().filter(|a| a.member_id.as_str() == *id)
                    .flat_map(|a| a.partitions.iter())
                    .filter(|tp| tp.topic == topic.name)
                    .map(|tp| tp.partitions.len()).sum()
            }).collect();
            prop_assert!(shares.iter().all(|&s| s == n / m || s == n / m + 1), "{shares:?}");
            prop_assert_eq!(shares.iter().filter(|&&s| s == n / m + 1).count(), n % m);
        }
    }
}
