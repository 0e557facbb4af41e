//! The `simple` share assignor (KIP-932's default, after Kafka's
//! `org.apache.kafka.coordinator.group.assignor.SimpleAssignor`): a pure function from
//! the members' subscriptions and the subscribed topics' partition counts to a target
//! assignment in which a partition may go to several members.
//!
//! The rule, per topic, over the members subscribed to it (in member-id order) and its
//! partitions: the topic's name hashed (FNV-1a) picks a starting member, so that
//! topics with few partitions do not all land on the first members; then
//! - with at least as many subscribers as partitions, the subscribers from the start
//!   take partitions 0, 1, … in turn, wrapping around the partitions: every partition
//!   gets ⌊s/p⌋ or ⌈s/p⌉ members and every subscriber exactly one partition;
//! - with fewer subscribers, partition `i` goes to the subscriber `i` places after the
//!   start: every partition gets exactly one member and the subscribers ⌊p/s⌋ or
//!   ⌈p/s⌉ partitions each.
//!
//! So every partition of a subscribed topic goes to at least one member when the topic
//! has subscribers, only subscribers get a topic's partitions, and the result depends
//! on the inputs only (not on the order they are given in). Kafka's assignor also
//! spreads partitions by hashing when the subscriptions are the same and assigns each
//! subscriber its topics otherwise; this rule does both the same way.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::{TopicName, TopicPartition};

/// The name of this assignor (Kafka's `group.share.assignors` default).
pub(crate) const SIMPLE: &str = crate::config::SIMPLE_SHARE_ASSIGNOR;

/// FNV-1a over `bytes` (32 bits): the topic's starting member.
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The target assignment of members `subscriptions` (member id → subscribed topics)
/// over `topics` (name → partition count; a subscribed topic missing here, or with 0
/// partitions, gives nothing). Every member appears in the result, possibly with no
/// partitions.
pub(crate) fn assign(
    subscriptions: &BTreeMap<String, BTreeSet<TopicName>>,
    topics: &BTreeMap<TopicName, u32>,
) -> BTreeMap<String, BTreeSet<TopicPartition>> {
    let mut out: BTreeMap<String, BTreeSet<TopicPartition>> = subscriptions
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let mut subscribers: BTreeMap<&TopicName, Vec<&String>> = BTreeMap::new();
    for (member, subscribed) in subscriptions {
        for t in subscribed {
            subscribers.entry(t).or_default().push(member);
        }
    }
    for (topic, members) in subscribers {
        let Some(&count) = topics.get(topic) else {
            continue;
        };
        let partitions = usize::try_from(count).unwrap_or(usize::MAX);
        if partitions == 0 || members.is_empty() {
            continue;
        }
        let start = fnv1a(topic.as_str().as_bytes()) as usize % members.len();
        let member_at = |k: usize| members[(start + k) % members.len()];
        let mut give = |member: &String, partition: usize| {
            let partition = i32::try_from(partition).unwrap_or(i32::MAX);
            if let Some(set) = out.get_mut(member) {
                set.insert(TopicPartition {
                    topic: topic.clone(),
                    partition,
                });
            }
        };
        if members.len() >= partitions {
            for k in 0..members.len() {
                give(member_at(k), k % partitions);
            }
        } else {
            for p in 0..partitions {
                give(member_at(p), p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(name: &str) -> TopicName {
        TopicName::new(name)
    }

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<TopicName>> {
        members
            .iter()
            .map(|(m, ts)| ((*m).to_owned(), ts.iter().map(|x| t(x)).collect()))
            .collect()
    }

    #[test]
    fn more_members_than_partitions_share_every_partition() {
        let topics = [(t("q"), 1)].into_iter().collect();
        let out = assign(
            &subs(&[("a", &["q"]), ("b", &["q"]), ("c", &["q"]), ("d", &["q"])]),
            &topics,
        );
        for (m, parts) in &out {
            assert_eq!(parts.len(), 1, "{m}: {parts:?}");
        }
    }

    #[test]
    fn fewer_members_spread_the_partitions_evenly() {
        let topics = [(t("q"), 10)].into_iter().collect();
        let out = assign(
            &subs(&[("a", &["q"]), ("b", &["q"]), ("c", &["q"])]),
            &topics,
        );
        let sizes: Vec<usize> = out.values().map(BTreeSet::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 10);
        assert!(sizes.iter().all(|&n| n == 3 || n == 4), "{sizes:?}");
    }

    #[test]
    fn unknown_topics_and_no_members_give_nothing() {
        let topics = [(t("q"), 3)].into_iter().collect();
        let out = assign(&subs(&[("a", &["missing"])]), &topics);
        assert_eq!(out["a"], BTreeSet::new());
        assert!(assign(&BTreeMap::new(), &topics).is_empty());
    }

    proptest! {
        /// Every partition of a subscribed topic goes to at least one member, and only
        /// a topic's subscribers get its partitions; every member is in the output.
        #[test]
        fn covers_every_subscribed_partition_with_subscribers_only(
            counts in proptest::collection::vec(0u32..12, 1..5),
            members in proptest::collection::btree_map("[a-f][0-9]{0,2}", proptest::collection::btree_set(0usize..5, 0..5), 0..20),
        ) {
            let topics: BTreeMap<TopicName, u32> = counts
                .iter()
                .enumerate()
                .map(|(i, c)| (t(&format!("t{i}")), *c))
                .collect();
            // Index 4 may name a topic that does not exist (no partitions to give).
            let subscriptions: BTreeMap<String, BTreeSet<TopicName>> = members
                .iter()
                .map(|(m, ts)| (m.clone(), ts.iter().map(|i| t(&format!("t{i}"))).collect()))
                .collect();
            let out = assign(&subscriptions, &topics);
            prop_assert_eq!(out.keys().collect::<Vec<_>>(), subscriptions.keys().collect::<Vec<_>>());
            for (m, parts) in &out {
                for tp in parts {
                    prop_assert!(subscriptions[m].contains(&tp.topic), "{} got {:?}", m, tp);
                    prop_assert!((tp.partition as u32) < topics[&tp.topic]);
                }
            }
            for (topic, &count) in &topics {
                let subscribed = subscriptions.values().any(|s| s.contains(topic));
                for p in 0..count as i32 {
                    let holders = out.values().filter(|s| s.contains(&TopicPartition { topic: topic.clone(), partition: p })).count();
                    if subscribed {
                        prop_assert!(holders >= 1, "{}-{} unassigned", topic, p);
                    } else {
                        prop_assert_eq!(holders, 0);
                    }
                }
            }
            // Deterministic.
            prop_assert_eq!(assign(&subscriptions, &topics), out);
        }
    }
}
