use drover_abi::{Assignment, MemberAssignment, TopicPartitions};

use super::*;
use crate::assignor::contract::check_contract;

/// A member's partitions: (topic, partitions) pairs.
type Parts<'a> = &'a [(&'a str, &'a [i32])];

fn assignment(members: &[(&str, Parts<'_>)]) -> Assignment {
    Assignment {
        members: members
            .iter()
            .map(|&(id, parts)| MemberAssignment {
                member_id: id.into(),
                partitions: parts
                    .iter()
                    .map(|&(t, p)| TopicPartitions::new(t, p.to_vec()))
                    .collect(),
            })
            .collect(),
    }
}

fn group() -> AssignInput {
    input(
        vec![member("b", &["x"]), member("a", &["x", "y"])],
        &[("x", 2), ("y", 1), ("z", 5)],
    )
}

#[test]
fn a_valid_assignment_passes() {
    let out = assignment(&[("a", &[("x", &[0]), ("y", &[0])]), ("b", &[("x", &[1])])]);
    assert_eq!(check_contract(&group(), &out), Ok(()));
    assert_eq!(loads(&out), [2, 1]);
    assert_eq!(holders(&out).len(), 3);
}

#[test]
fn violations_are_reported() {
    let cases: &[&[(&str, Parts<'_>)]] = &[
        // b missing.
        &[("a", &[("x", &[0, 1]), ("y", &[0])])],
        // Members unsorted.
        &[("b", &[("x", &[1])]), ("a", &[("x", &[0]), ("y", &[0])])],
        // y/0 unassigned.
        &[("a", &[("x", &[0])]), ("b", &[("x", &[1])])],
        // x/1 twice.
        &[("a", &[("x", &[0, 1]), ("y", &[0])]), ("b", &[("x", &[1])])],
        // b does not subscribe to y.
        &[("a", &[("x", &[0])]), ("b", &[("x", &[1]), ("y", &[0])])],
        // Out of range.
        &[("a", &[("x", &[0]), ("y", &[0, 1])]), ("b", &[("x", &[1])])],
        // Topics unsorted.
        &[("a", &[("y", &[0]), ("x", &[0])]), ("b", &[("x", &[1])])],
        // Partitions unsorted.
        &[("a", &[("x", &[1, 0]), ("y", &[0])]), ("b", &[])],
        // Empty entry.
        &[
            ("a", &[("x", &[0]), ("y", &[0])]),
            ("b", &[("x", &[1]), ("z", &[])]),
        ],
    ];
    for case in cases {
        assert!(
            check_contract(&group(), &assignment(case)).is_err(),
            "{case:?}"
        );
    }
}

#[test]
fn builders_compose() {
    let base = synthetic(&[3, 4], &[0b01, 0b11]);
    assert_eq!(base.members[1].topics.len(), 2);
    assert_eq!(homogeneous(3, &[1]).members.len(), 3);
    let out = assignment(&[("member-00000", &[("topic-000", &[0])])]);
    let fed = with_owned(&base, &out);
    assert_eq!(fed.members[0].owned.len(), 1);
    assert!(fed.members[1].owned.is_empty());
    assert_eq!(without(&base, "member-00000").members.len(), 1);
    let swapped = reordered(&base, &[1, 0]);
    assert_eq!(swapped.members[0], base.members[1]);
    let o = owning(member("a", &["x"]), &[("x", &[1])]);
    assert_eq!(o.owned[0].partitions.len(), 1);
}

#[test]
fn synthetic_may_subscribe_to_a_missing_topic() {
    let input = synthetic(&[2], &[0b11, 0b01]);
    assert_eq!(input.topics.len(), 1);
    assert_eq!(input.members[0].topics.len(), 2);
    assert_eq!(homogeneous(2, &[1, 1]).members[1].topics.len(), 2);
}

#[test]
fn permutation_is_a_permutation() {
    let mut p = permutation(50, 7);
    assert_ne!(p, (0..50).collect::<Vec<_>>());
    p.sort_unstable();
    assert_eq!(p, (0..50).collect::<Vec<_>>());
    assert!(permutation(0, 1).is_empty());
}
