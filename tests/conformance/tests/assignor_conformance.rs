//! The assignor conformance suite, run against every built assignor plugin (and the
//! example custom assignor) through its loaded `.so`.
//!
//! Properties (drover_abi::assignor's contract and the balance rules):
//! - every subscribed partition is assigned exactly once, only to a subscriber of its
//!   topic; no unknown topic or partition; every member appears exactly once;
//! - deterministic, and independent of the order members are listed in;
//! - balance: round-robin and sticky give max − min ≤ 1 for homogeneous subscriptions;
//!   range matches Kafka's per-topic rule exactly; round-robin matches Kafka's
//!   circular rule exactly;
//! - sticky: when one of N members leaves, only the leaver's partitions move, and
//!   re-feeding an assignment as owned changes nothing.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::OnceLock,
};

use drover_abi::{
    std_types::{RNone, RString, RVec},
    AssignInput, Assignment, AssignorMember, TopicInfo, TopicPartitions,
};
use drover_host::plugins::AssignorHandle;
use drover_tests::{load_assignor, ASSIGNORS};
use proptest::prelude::*;

/// Every assignor under test: the built plugins and the example, loaded once per test
/// binary.
fn all() -> &'static [(&'static str, AssignorHandle)] {
    static ALL: OnceLock<Vec<(&'static str, AssignorHandle)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<_> = ASSIGNORS
            .iter()
            .map(|(lib, name)| (*name, load_assignor(lib).1))
            .collect();
        v.push((
            "weighted",
            load_assignor("drover_example_weighted_assignor").1,
        ));
        v
    })
}

fn handle(name: &str) -> &'static AssignorHandle {
    &all().iter().find(|(n, _)| *n == name).unwrap().1
}

type Owner = BTreeMap<(String, i32), String>;

/// partition -> member, checking the contract on the way.
fn check_contract(input: &AssignInput, out: &Assignment) -> Result<Owner, TestCaseError> {
    let counts: BTreeMap<&str, u32> = input
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    let subs: BTreeMap<&str, BTreeSet<&str>> = input
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.topics.iter().map(|t| t.as_str()).collect(),
            )
        })
        .collect();
    let out_ids: Vec<&str> = out.members.iter().map(|m| m.member_id.as_str()).collect();
    let out_set: BTreeSet<&str> = out_ids.iter().copied().collect();
    prop_assert_eq!(out_ids.len(), out_set.len(), "a member appears twice");
    prop_assert_eq!(&out_set, &subs.keys().copied().collect::<BTreeSet<_>>());

    let mut owner = Owner::new();
    for m in out.members.iter() {
        for tp in m.partitions.iter() {
            let topic = tp.topic.as_str();
            let count = counts.get(topic);
            prop_assert!(count.is_some(), "unknown topic {topic}");
            prop_assert!(
                subs[m.member_id.as_str()].contains(topic),
                "{topic} given to non-subscriber {}",
                m.member_id
            );
            for &p in tp.partitions.iter() {
                prop_assert!(
                    p >= 0 && (p as u32) < count.copied().unwrap_or(0),
                    "bad partition {topic}-{p}"
                );
                let prev = owner.insert((topic.to_owned(), p), m.member_id.to_string());
                prop_assert!(prev.is_none(), "{topic}-{p} assigned twice");
            }
        }
    }
    for (topic, n) in &counts {
        if subs.values().any(|s| s.contains(topic)) {
            for p in 0..*n as i32 {
                prop_assert!(
                    owner.contains_key(&(topic.to_string(), p)),
                    "{topic}-{p} unassigned"
                );
            }
        }
    }
    Ok(owner)
}

fn load(out: &Assignment) -> BTreeMap<String, usize> {
    out.members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.partitions.iter().map(|tp| tp.partitions.len()).sum(),
            )
        })
        .collect()
}

fn member(id: &str, topics: &[String], owned: Vec<TopicPartitions>) -> AssignorMember {
    AssignorMember {
        member_id: RString::from(id),
        topics: topics.iter().map(|t| RString::from(t.as_str())).collect(),
        owned: RVec::from(owned),
        rack: RNone,
        weight: 1,
    }
}

/// A random group: 1–24 members, 1–5 topics of 0–40 partitions, random non-empty
/// subscriptions, random (possibly invalid) owned partitions.
fn group() -> impl Strategy<Value = AssignInput> {
    (1usize..=5, 1usize..=24).prop_flat_map(|(n_topics, n_members)| {
        (
            prop::collection::vec(0u32..=40, n_topics),
            prop::collection::vec(
                (
                    prop::collection::vec(any::<bool>(), n_topics),
                    prop::collection::vec((0usize..n_topics, 0i32..45), 0..6),
                ),
                n_members,
            ),
        )
            .prop_map(move |(counts, members)| {
                let topics: Vec<String> = (0..counts.len()).map(|i| format!("topic-{i}")).collect();
                AssignInput {
                    group: RString::from("g"),
                    topics: topics
                        .iter()
                        .zip(&counts)
                        .map(|(t, c)| TopicInfo::new(t.as_str(), *c))
                        .collect(),
                    members: members
                        .into_iter()
                        .enumerate()
                        .map(|(i, (mask, owned))| {
                            let mut subs: Vec<String> = topics
                                .iter()
                                .zip(&mask)
                                .filter(|(_, on)| **on)
                                .map(|(t, _)| t.clone())
                                .collect();
                            if subs.is_empty() {
                                subs.push(topics[i % topics.len()].clone());
                            }
                            let owned = owned
                                .into_iter()
                                .map(|(t, p)| TopicPartitions::new(topics[t].as_str(), vec![p]))
                                .collect();
                            member(&format!("member-{i:02}"), &subs, owned)
                        })
                        .collect(),
                }
            })
    })
}

/// A homogeneous group: every member subscribes to every topic; no owned partitions.
fn homogeneous() -> impl Strategy<Value = AssignInput> {
    (prop::collection::vec(0u32..=60, 1..=4), 1usize..=30).prop_map(|(counts, n)| {
        let topics: Vec<String> = (0..counts.len()).map(|i| format!("t{i}")).collect();
        AssignInput {
            group: RString::from("g"),
            topics: topics
                .iter()
                .zip(&counts)
                .map(|(t, c)| TopicInfo::new(t.as_str(), *c))
                .collect(),
            members: (0..n)
                .map(|i| member(&format!("c{i:03}"), &topics, vec![]))
                .collect(),
        }
    })
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_assignor_meets_the_contract_and_is_deterministic(input in group()) {
        for (name, assignor) in all() {
            let out = assignor.assign(&input).map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
            check_contract(&input, &out)?;
            let mut reversed = input.clone();
            reversed.members.reverse();
            let again = assignor.assign(&reversed).unwrap();
            prop_assert_eq!(&again, &out, "{} depends on member order", name);
        }
    }

    #[test]
    fn balanced_for_homogeneous_subscriptions(input in homogeneous()) {
        for (name, assignor) in all() {
            let out = assignor.assign(&input).unwrap();
            check_contract(&input, &out)?;
            if *name == "range" {
                continue; // range balances per topic, checked below
            }
            let l = load(&out);
            let (min, max) = (l.values().min().unwrap(), l.values().max().unwrap());
            prop_assert!(max - min <= 1, "{}: loads {:?}", name, l);
        }
    }

    #[test]
    fn range_follows_kafkas_per_topic_rule(input in group()) {
        let out = handle("range").assign(&input).unwrap();
        let owner = check_contract(&input, &out)?;
        for t in input.topics.iter() {
            let mut subs: Vec<&str> = input
                .members
                .iter()
                .filter(|m| m.topics.iter().any(|x| x == &t.name))
                .map(|m| m.member_id.as_str())
                .collect();
            subs.sort();
            if subs.is_empty() {
                continue;
            }
            let (n, m) = (t.partitions as usize, subs.len());
            let mut next = 0;
            for (i, id) in subs.iter().enumerate() {
                let len = n / m + usize::from(i < n % m);
                for p in next..next + len {
                    prop_assert_eq!(&owner[&(t.name.to_string(), p as i32)], id);
                }
                next += len;
            }
        }
    }

    #[test]
    fn round_robin_follows_kafkas_circular_rule(input in group()) {
        let out = handle("round-robin").assign(&input).unwrap();
        let owner = check_contract(&input, &out)?;
        let mut members: Vec<&AssignorMember> = input.members.iter().collect();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let mut topics: Vec<&TopicInfo> = input.topics.iter().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let mut cursor = 0;
        for t in topics {
            if !members.iter().any(|m| m.topics.contains(&t.name)) {
                continue;
            }
            for p in 0..t.partitions as i32 {
                while !members[cursor % members.len()].topics.contains(&t.name) {
                    cursor += 1;
                }
                let expected = members[cursor % members.len()].member_id.as_str();
                prop_assert_eq!(owner[&(t.name.to_string(), p)].as_str(), expected);
                cursor += 1;
            }
        }
    }

    #[test]
    fn sticky_moves_only_the_leavers_partitions(input in homogeneous(), leaver in any::<prop::sample::Index>()) {
        let sticky = handle("sticky");
        let first = sticky.assign(&input).unwrap();
        let before = check_contract(&input, &first)?;
        if input.members.len() < 2 {
            return Ok(());
        }
        let gone = leaver.get(&input.members).member_id.to_string();
        let mut next = input.clone();
        next.members = input
            .members
            .iter()
            .filter(|m| m.member_id.as_str() != gone)
            .map(|m| {
                let mut m = m.clone();
                m.owned = first.members.iter().find(|x| x.member_id == m.member_id).unwrap().partitions.clone();
                m
            })
            .collect();
        let second = sticky.assign(&next).unwrap();
        let after = check_contract(&next, &second)?;
        for (tp, old) in &before {
            if *old != gone {
                prop_assert_eq!(&after[tp], old, "{:?} moved although its owner stayed", tp);
            }
        }
        let l = load(&second);
        prop_assert!(l.values().max().unwrap() - l.values().min().unwrap() <= 1, "{:?}", l);

        // Re-feeding the result as owned changes nothing.
        let mut stable = next.clone();
        for m in stable.members.iter_mut() {
            m.owned = second.members.iter().find(|x| x.member_id == m.member_id).unwrap().partitions.clone();
        }
        prop_assert_eq!(sticky.assign(&stable).unwrap(), second);
    }
}

#[test]
fn duplicate_member_ids_are_refused_by_every_assignor() {
    let topics = vec!["t".to_owned()];
    let input = AssignInput {
        group: RString::from("g"),
        members: RVec::from(vec![
            member("a", &topics, vec![]),
            member("a", &topics, vec![]),
        ]),
        topics: RVec::from(vec![TopicInfo::new("t", 3)]),
    };
    for (name, assignor) in all() {
        let err = assignor.assign(&input).expect_err(name);
        assert!(err.to_string().contains('a'), "{name}: {err}");
    }
}

#[test]
fn empty_group_gives_empty_assignment() {
    let input = AssignInput {
        group: RString::from("g"),
        members: RVec::new(),
        topics: RVec::from(vec![TopicInfo::new("t", 3)]),
    };
    for (name, assignor) in all() {
        let out = assignor.assign(&input).expect(name);
        assert!(out.members.is_empty(), "{name}");
    }
}
