//! proptest strategies for assignor inputs, and a short description of an input for
//! failure messages.

use drover_abi::{
    std_types::{RNone, RSome, RString, RVec},
    AssignInput, AssignorMember, TopicInfo, TopicPartitions,
};
use proptest::{collection::vec, prelude::*};

/// Any valid group: 1–24 members with distinct ids (`m0`, `m1`, …, so byte order is
/// not index order), 1–5 topics of 0–40 partitions, each member subscribing to a
/// random non-empty set of them (sometimes also to a topic missing from the input),
/// owning random and partly invalid partitions (unknown topic, out of range, claimed
/// by others), with a random rack and a weight of 1–4.
pub fn group() -> impl Strategy<Value = AssignInput> {
    (1usize..=5, 1usize..=24).prop_flat_map(|(n_topics, n_members)| {
        let member = (
            vec(any::<bool>(), n_topics),
            any::<bool>(),
            vec((0..=n_topics, 0i32..45), 0..6),
            prop::option::of(0u8..3),
            1u32..=4,
        );
        (vec(0u32..=40, n_topics), vec(member, n_members)).prop_map(move |(counts, members)| {
            // Topic `n_topics` is subscribable but missing from the input's topic list.
            let names: Vec<String> = (0..=n_topics).map(|i| format!("topic-{i}")).collect();
            let members = members
                .into_iter()
                .enumerate()
                .map(|(i, (mask, ghost, owned, rack, weight))| {
                    let mut topics: Vec<&str> = names[..n_topics]
                        .iter()
                        .zip(&mask)
                        .filter(|(_, on)| **on)
                        .map(|(t, _)| t.as_str())
                        .collect();
                    if topics.is_empty() {
                        topics.push(&names[i % n_topics]);
                    }
                    if ghost {
                        topics.push(&names[n_topics]);
                    }
                    AssignorMember {
                        member_id: RString::from(format!("m{i}")),
                        topics: topics.into_iter().map(RString::from).collect(),
                        owned: owned
                            .into_iter()
                            .map(|(t, p)| TopicPartitions::new(names[t].as_str(), vec![p]))
                            .collect(),
                        rack: rack.map_or(RNone, |r| RSome(RString::from(format!("rack-{r}")))),
                        weight,
                    }
                })
                .collect();
            AssignInput {
                group: RString::from("testkit"),
                members,
                topics: names
                    .iter()
                    .zip(&counts)
                    .map(|(t, &c)| TopicInfo::new(t.as_str(), c))
                    .collect(),
            }
        })
    })
}

/// A group with identical subscriptions: 1–30 members (ids `c0`, `c1`, …) all
/// subscribing to every one of 1–4 topics of 0–60 partitions, owning nothing, no
/// rack, weight 1.
pub fn homogeneous() -> impl Strategy<Value = AssignInput> {
    (vec(0u32..=60, 1..=4), 1usize..=30).prop_map(|(counts, n)| {
        let topics: Vec<RString> = (0..counts.len())
            .map(|i| RString::from(format!("t{i}")))
            .collect();
        AssignInput {
            group: RString::from("testkit"),
            topics: topics
                .iter()
                .zip(&counts)
                .map(|(t, &c)| TopicInfo::new(t.clone(), c))
                .collect(),
            members: (0..n)
                .map(|i| AssignorMember {
                    member_id: RString::from(format!("c{i}")),
                    topics: RVec::from(topics.clone()),
                    owned: RVec::new(),
                    rack: RNone,
                    weight: 1,
                })
                .collect(),
        }
    })
}

/// One line describing `input` (members with their subscriptions and owned
/// partitions, topics with their partition counts), cut at about 600 characters.
pub fn describe(input: &AssignInput) -> String {
    let members: Vec<String> = input
        .members
        .iter()
        .map(|m| {
            let topics: Vec<&str> = m.topics.iter().map(|t| t.as_str()).collect();
            let owned: Vec<String> = m
                .owned
                .iter()
                .map(|tp| format!("{}{:?}", tp.topic, tp.partitions.as_slice()))
                .collect();
            if owned.is_empty() {
                format!("{}[{}]", m.member_id, topics.join(","))
            } else {
                format!(
                    "{}[{}] owning {}",
                    m.member_id,
                    topics.join(","),
                    owned.join(",")
                )
            }
        })
        .collect();
    let topics: Vec<String> = input
        .topics
        .iter()
        .map(|t| format!("{}/{}", t.name, t.partitions))
        .collect();
    let mut text = format!("members {}; topics {}", members.join(" "), topics.join(" "));
    if text.len() > 600 {
        let cut = (0..=600)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}
