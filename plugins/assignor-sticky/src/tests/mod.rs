//! Examples; the properties are in `props`.

mod props;
mod racks;

use std::collections::BTreeMap;

use drover_abi::{
    sdk::{AssignorPlugin, PluginContext},
    AssignInput, Assignment, ErrorKind, TopicPartitions,
};
use drover_plugin_testkit::assignor::builders::{
    holders, homogeneous, input, loads, member, owning, with_owned, without,
};
use drover_plugin_testkit::assignor::contract::check_contract;

use crate::StickyAssignor;

fn assign(input: &AssignInput) -> Assignment {
    let out = StickyAssignor.assign(input).expect("assign");
    assert_eq!(check_contract(input, &out), Ok(()));
    out
}

fn parts(output: &Assignment, member: usize) -> Vec<TopicPartitions> {
    output.members[member].partitions.to_vec()
}

/// Partitions whose holder differs between `before` and `after` (present in both).
fn moved(before: &Assignment, after: &Assignment) -> BTreeMap<(String, i32), (String, String)> {
    let after = holders(after);
    holders(before)
        .into_iter()
        .filter_map(|(tp, old)| match after.get(&tp) {
            Some(new) if *new != old => Some((tp, (old, new.clone()))),
            _ => None,
        })
        .collect()
}

#[test]
fn config_must_be_empty() {
    assert!(StickyAssignor::new(&PluginContext::default()).is_ok());
    let ctx = PluginContext {
        config: "x = 1".into(),
        ..PluginContext::default()
    };
    let err = StickyAssignor::new(&ctx).expect_err("rejected");
    assert_eq!(err.kind, ErrorKind::InvalidConfig);
}

#[test]
fn duplicate_member_is_invalid_input() {
    let input = input(vec![member("a", &["x"]), member("a", &["x"])], &[("x", 1)]);
    let err = StickyAssignor.assign(&input).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

#[test]
fn fresh_group_gets_contiguous_balanced_ranges() {
    let out = assign(&input(
        vec![
            member("c", &["x"]),
            member("b", &["x"]),
            member("a", &["x"]),
        ],
        &[("x", 7)],
    ));
    assert_eq!(parts(&out, 0), [TopicPartitions::new("x", vec![0, 1, 2])]);
    assert_eq!(parts(&out, 1), [TopicPartitions::new("x", vec![3, 4])]);
    assert_eq!(parts(&out, 2), [TopicPartitions::new("x", vec![5, 6])]);
}

#[test]
fn fewer_partitions_than_members() {
    let out = assign(&homogeneous(5, &[2, 1]));
    assert_eq!(loads(&out), [1, 1, 1, 0, 0]);
}

#[test]
fn joining_member_takes_only_the_surplus() {
    let before = input(
        vec![
            owning(member("a", &["x"]), &[("x", &[0, 1, 2, 3, 4])]),
            owning(member("b", &["x"]), &[("x", &[5, 6, 7, 8, 9])]),
            member("c", &["x"]),
        ],
        &[("x", 10)],
    );
    let out = assign(&before);
    // Quota 3, one extra slot: a keeps 4 (first in id order), b keeps 3, c gets 3.
    assert_eq!(loads(&out), [4, 3, 3]);
    assert_eq!(
        parts(&out, 0),
        [TopicPartitions::new("x", vec![0, 1, 2, 3])]
    );
    assert_eq!(parts(&out, 1), [TopicPartitions::new("x", vec![5, 6, 7])]);
    assert_eq!(parts(&out, 2), [TopicPartitions::new("x", vec![4, 8, 9])]);
}

#[test]
fn leaving_member_moves_only_its_partitions() {
    let group = homogeneous(4, &[7, 3]);
    let first = assign(&group);
    let leaver = first.members[1].member_id.to_string();
    let second = assign(&with_owned(&without(&group, &leaver), &first));
    let moves = moved(&first, &second);
    assert!(!moves.is_empty());
    assert!(moves.values().all(|(old, _)| *old == leaver), "{moves:?}");
    let loads = loads(&second);
    assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1);
}

#[test]
fn invalid_owned_partitions_are_ignored() {
    let input = input(
        vec![
            owning(
                member("a", &["x"]),
                &[("x", &[0, 9, -1]), ("y", &[0]), ("nope", &[0])],
            ),
            // b claims x/0 too: a, first by id, keeps it.
            owning(member("b", &["x", "y"]), &[("x", &[0, 1]), ("y", &[0])]),
        ],
        &[("x", 2), ("y", 1)],
    );
    let out = assign(&input);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("x", vec![0])]);
    assert_eq!(
        parts(&out, 1),
        [
            TopicPartitions::new("x", vec![1]),
            TopicPartitions::new("y", vec![0])
        ]
    );
}

#[test]
fn claimed_partition_goes_to_first_member_by_id() {
    let input = input(
        vec![
            owning(member("b", &["x"]), &[("x", &[0])]),
            owning(member("a", &["x"]), &[("x", &[0])]),
        ],
        &[("x", 2)],
    );
    let out = assign(&input);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("x", vec![0])]);
    assert_eq!(parts(&out, 1), [TopicPartitions::new("x", vec![1])]);
}

#[test]
fn heterogeneous_owner_of_everything_gives_way() {
    let input = input(
        vec![
            owning(
                member("a", &["x", "y"]),
                &[("x", &[0, 1, 2, 3, 4, 5]), ("y", &[0, 1, 2, 3, 4, 5])],
            ),
            member("b", &["y"]),
        ],
        &[("x", 6), ("y", 6)],
    );
    let out = assign(&input);
    assert_eq!(loads(&out), [6, 6]);
    assert_eq!(
        parts(&out, 0),
        [TopicPartitions::new("x", vec![0, 1, 2, 3, 4, 5])]
    );
}

#[test]
fn heterogeneous_most_constrained_topic_first() {
    // x has one subscriber (a), y two: a takes all of x, so b gets all of y.
    let input = input(
        vec![member("a", &["x", "y"]), member("b", &["y"])],
        &[("x", 4), ("y", 4)],
    );
    let out = assign(&input);
    assert_eq!(
        parts(&out, 0),
        [TopicPartitions::new("x", vec![0, 1, 2, 3])]
    );
    assert_eq!(
        parts(&out, 1),
        [TopicPartitions::new("y", vec![0, 1, 2, 3])]
    );
}

#[test]
fn heterogeneous_overloaded_owner_keeps_what_balance_allows() {
    // a keeps y/0..2 and is overloaded once c (new) and b are served: one y moves.
    let input = input(
        vec![
            owning(member("a", &["x", "y"]), &[("y", &[0, 1, 2])]),
            member("b", &["x"]),
            member("c", &["y"]),
        ],
        &[("x", 2), ("y", 4)],
    );
    let out = assign(&input);
    assert_eq!(loads(&out), [2, 2, 2]);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("y", vec![0, 1])]);
    assert_eq!(parts(&out, 1), [TopicPartitions::new("x", vec![0, 1])]);
    assert_eq!(parts(&out, 2), [TopicPartitions::new("y", vec![2, 3])]);
}

#[test]
fn long_subscription_chain_stays_correct() {
    // Member i subscribes to topics i and i + 1. Then member 0 claims every partition:
    // it keeps those of its two topics, the rest are invalid and reassigned.
    let names: Vec<String> = (0..=120).map(|i| format!("t{i:03}")).collect();
    let members = (0..120)
        .map(|i| member(&format!("m{i:03}"), &[&names[i], &names[i + 1]]))
        .collect();
    let topics: Vec<(&str, u32)> = names.iter().map(|n| (n.as_str(), 3)).collect();
    let mut group = input(members, &topics);
    let out = assign(&group);
    group.members[0].owned = out
        .members
        .iter()
        .flat_map(|m| m.partitions.to_vec())
        .collect();
    let again = assign(&group);
    assert_eq!(assign(&group), again);
}

/// The test kit's suite, in-process: balanced, and keeps owned partitions where balance allows.
#[test]
fn passes_the_testkit_suite() {
    use drover_plugin_testkit::assignor::{run, Claim, Claims, Options};
    let instance = drover_abi::sdk::in_process::assignor::<StickyAssignor>("").expect("new");
    let report = run(
        &instance,
        &Options::new(Claims::none().with(Claim::Balanced).with(Claim::Sticky)),
    );
    report.assert_passed();
}
