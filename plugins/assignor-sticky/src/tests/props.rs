//! Property tests: contract, balance, stickiness, determinism.

use std::collections::{BTreeMap, HashMap};

use drover_abi::{AssignInput, Assignment, TopicPartitions};
use drover_plugin_testkit::assignor::builders::{
    holders, homogeneous, loads, permutation, reordered, synthetic, topic_name, with_owned, without,
};
use drover_plugin_testkit::assignor::contract::check_contract;
use proptest::{collection::vec, prelude::*};

use super::{assign, moved};

/// Owned lists: per member, (topic index, partition) pairs; indexes past the listed
/// topics name unknown topics, partitions may be negative or out of range.
type Owned = Vec<Vec<(usize, i32)>>;

fn with_random_owned(mut input: AssignInput, owned: &Owned) -> AssignInput {
    for (member, pairs) in input.members.iter_mut().zip(owned) {
        let mut by_topic: BTreeMap<usize, Vec<i32>> = BTreeMap::new();
        for &(t, p) in pairs {
            by_topic.entry(t).or_default().push(p);
        }
        member.owned = by_topic
            .into_iter()
            .map(|(t, p)| TopicPartitions::new(topic_name(t), p))
            .collect();
    }
    input
}

fn owned() -> impl Strategy<Value = Owned> {
    vec(vec((0usize..7, -1i32..22), 0..14), 0..10)
}

/// Any group (different subscriptions), members owning random, partly invalid lists.
fn group() -> impl Strategy<Value = AssignInput> {
    (vec(0u32..20, 0..6), vec(any::<u64>(), 0..9), owned())
        .prop_map(|(p, s, o)| with_random_owned(synthetic(&p, &s), &o))
}

/// A group with identical subscriptions, members owning random lists.
fn same_topics() -> impl Strategy<Value = AssignInput> {
    (1usize..10, vec(0u32..30, 1..4), owned())
        .prop_map(|(m, p, o)| with_random_owned(homogeneous(m, &p), &o))
}

fn spread(output: &Assignment) -> usize {
    let loads = loads(output);
    loads.iter().max().unwrap_or(&0) - loads.iter().min().unwrap_or(&0)
}

/// Kafka's balance criterion for different subscriptions: no partition could move from
/// its holder to another subscriber of its topic with two fewer partitions.
fn no_improving_move(input: &AssignInput, output: &Assignment) -> Result<(), String> {
    let load: HashMap<String, usize> = output
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .zip(loads(output))
        .collect();
    for ((topic, p), holder) in holders(output) {
        for m in input.members.iter() {
            let subscribed = m.topics.iter().any(|t| t.as_str() == topic);
            if subscribed && load[&holder] >= load[m.member_id.as_str()] + 2 {
                return Err(format!(
                    "{topic}/{p} could move from {holder} to {}",
                    m.member_id
                ));
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn meets_the_contract(input in group()) {
        // `assign` checks the contract.
        assign(&input);
    }

    #[test]
    fn identical_subscriptions_are_balanced(input in same_topics()) {
        let out = assign(&input);
        prop_assert!(spread(&out) <= 1, "loads {:?}", loads(&out));
    }

    #[test]
    fn different_subscriptions_admit_no_improving_move(input in group()) {
        let out = assign(&input);
        prop_assert_eq!(no_improving_move(&input, &out), Ok(()));
    }

    #[test]
    fn ignores_member_order(input in group(), seed in any::<u64>()) {
        let shuffled = reordered(&input, &permutation(input.members.len(), seed));
        prop_assert_eq!(assign(&shuffled), assign(&input));
    }

    #[test]
    fn refeeding_the_assignment_changes_nothing(input in group()) {
        let out = assign(&input);
        prop_assert_eq!(assign(&with_owned(&input, &out)), out);
    }

    #[test]
    fn refeeding_with_identical_subscriptions_changes_nothing(input in same_topics()) {
        let out = assign(&input);
        prop_assert_eq!(assign(&with_owned(&input, &out)), out);
    }

    #[test]
    fn only_the_leavers_partitions_move(input in same_topics(), pick in any::<prop::sample::Index>()) {
        prop_assume!(input.members.len() >= 2);
        let before = assign(&input);
        let leaver = before.members[pick.index(before.members.len())].member_id.to_string();
        let after = assign(&with_owned(&without(&input, &leaver), &before));
        let moves = moved(&before, &after);
        prop_assert!(moves.values().all(|(old, _)| *old == leaver), "moves {:?}", moves);
        prop_assert!(spread(&after) <= 1);
        let lost = holders(&before).values().filter(|h| **h == leaver).count();
        prop_assert_eq!(moves.len(), lost);
    }

    #[test]
    fn contract_holds_after_membership_changes(input in group(), pick in any::<prop::sample::Index>()) {
        prop_assume!(!input.members.is_empty());
        let before = assign(&input);
        let leaver = before.members[pick.index(before.members.len())].member_id.to_string();
        let next = with_owned(&without(&input, &leaver), &before);
        prop_assert_eq!(check_contract(&next, &assign(&next)), Ok(()));
    }
}
