//! Racks (KIP-881): examples with the test kit's generated context (even partition `p`
//! led by broker `p % 3` in rack `r{p % 3}`, odd ones unknown), and properties over
//! racked groups.

use drover_abi::{
    sdk::{assignor::Context, AssignorPlugin},
    std_types::{RNone, RSome},
    AssignInput, Assignment, AssignorMember, TopicPartitions,
};
use drover_plugin_testkit::assignor::{
    builders::{holders, input, loads, member, owning, with_owned},
    contract::check_contract,
    generate::{group, homogeneous},
    GeneratedContext,
};
use proptest::{collection::vec, prelude::*};

use super::{assign, parts};
use crate::StickyAssignor;

fn assign_racked(input: &AssignInput) -> Assignment {
    GeneratedContext::for_input(input)
        .lend(|raw| StickyAssignor.assign_with_context(input, &Context::new(raw)))
        .expect("assign")
}

fn racked(mut m: AssignorMember, rack: &str) -> AssignorMember {
    m.rack = RSome(rack.into());
    m
}

/// Identical subscriptions: partition 0 (rack r0) goes to `b` in r0 and partition 2
/// (r2) to `a` in r2 before the shares are filled in order.
#[test]
fn unowned_partitions_go_to_members_in_their_leader_rack() {
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

/// An owner of all six partitions in rack r1 keeps partition 4 (led in r1) among its
/// quota of two when two members join, where without racks it keeps 0 and 1.
#[test]
fn an_over_quota_owner_keeps_its_rack_local_partitions() {
    let all: Vec<i32> = (0..6).collect();
    let members = vec![
        racked(owning(member("a", &["t"]), &[("t", &all)]), "r1"),
        member("b", &["t"]),
        member("c", &["t"]),
    ];
    let input = input(members, &[("t", 6)]);
    assert_eq!(
        parts(&assign_racked(&input), 0),
        [TopicPartitions::new("t", vec![0, 4])]
    );
    assert_eq!(
        parts(&assign(&input), 0),
        [TopicPartitions::new("t", vec![0, 1])]
    );
}

/// Different subscriptions: on a tie in load, the subscriber in the leader's rack
/// takes the partition (partition 2, rack r2, to `b`).
#[test]
fn different_subscriptions_break_ties_by_rack() {
    let members = vec![
        racked(member("a", &["t"]), "r0"),
        racked(member("b", &["t"]), "r2"),
        member("c", &["u"]),
    ];
    let input = input(members, &[("t", 4), ("u", 1)]);
    let out = assign_racked(&input);
    assert_eq!(parts(&out, 0), [TopicPartitions::new("t", vec![0, 3])]);
    assert_eq!(parts(&out, 1), [TopicPartitions::new("t", vec![1, 2])]);
    assert_eq!(
        parts(&assign(&input), 1),
        [TopicPartitions::new("t", vec![1, 3])]
    );
}

/// Members in racks r0..r2, or none.
fn with_racks(mut input: AssignInput, racks: &[u8]) -> AssignInput {
    for (i, m) in input.members.iter_mut().enumerate() {
        m.rack = match racks[i % racks.len()] {
            3 => RNone,
            r => RSome(format!("r{r}").into()),
        };
    }
    input
}

proptest! {
    /// With racks: the contract; fed back, nothing moves.
    #[test]
    fn racked_groups_keep_the_contract_and_stay(input in group(), racks in vec(0u8..4, 1..9)) {
        let input = with_racks(input, &racks);
        let out = assign_racked(&input);
        prop_assert_eq!(check_contract(&input, &out), Ok(()));
        prop_assert_eq!(holders(&assign_racked(&with_owned(&input, &out))), holders(&out));
    }

    /// With racks and identical subscriptions: balanced within one partition.
    #[test]
    fn racked_identical_subscriptions_stay_balanced(input in homogeneous(), racks in vec(0u8..4, 1..9)) {
        let input = with_racks(input, &racks);
        let l = loads(&assign_racked(&input));
        prop_assert!(l.iter().max().unwrap_or(&0) - l.iter().min().unwrap_or(&0) <= 1, "{l:?}");
    }
}
