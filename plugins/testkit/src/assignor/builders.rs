//! Inputs for assignor tests: members, groups, synthetic groups from bit masks,
//! membership changes (a member leaves, owned partitions fed back), and views of an
//! output (loads, holders).

use std::collections::{BTreeMap, HashMap};

use drover_abi::{
    std_types::{ROption, RString, RVec},
    AssignInput, Assignment, AssignorMember, TopicInfo, TopicPartitions,
};

/// A member `id` subscribing to `topics`, owning nothing, no rack, weight 1.
pub fn member(id: &str, topics: &[&str]) -> AssignorMember {
    AssignorMember {
        member_id: id.into(),
        topics: topics.iter().map(|&t| RString::from(t)).collect(),
        owned: RVec::new(),
        rack: ROption::RNone,
        weight: 1,
    }
}

/// `member` owning `owned` (topic, partitions) pairs.
pub fn owning(mut member: AssignorMember, owned: &[(&str, &[i32])]) -> AssignorMember {
    member.owned = owned
        .iter()
        .map(|&(t, p)| TopicPartitions::new(t, p.to_vec()))
        .collect();
    member
}

/// An input of group `g` with `members` and `topics` (name, partition count).
pub fn input(members: Vec<AssignorMember>, topics: &[(&str, u32)]) -> AssignInput {
    AssignInput {
        group: "g".into(),
        members: RVec::from(members),
        topics: topics.iter().map(|&(n, p)| TopicInfo::new(n, p)).collect(),
    }
}

/// Name of synthetic member `i` (zero-padded, so id order is index order).
pub fn member_name(i: usize) -> String {
    format!("member-{i:05}")
}

/// Name of synthetic topic `j`.
pub fn topic_name(j: usize) -> String {
    format!("topic-{j:03}")
}

/// A synthetic input: topic `j` has `partitions[j]` partitions; member `i` subscribes
/// to topic `j` when bit `j` of `subscriptions[i]` is set, and bit `partitions.len()`
/// subscribes it to a topic missing from the input's topic list. Topics beyond bit 62
/// are never subscribed.
pub fn synthetic(partitions: &[u32], subscriptions: &[u64]) -> AssignInput {
    let topics: Vec<String> = (0..=partitions.len()).map(topic_name).collect();
    let members = subscriptions
        .iter()
        .enumerate()
        .map(|(i, &bits)| {
            let subscribed: Vec<&str> = (0..topics.len().min(63))
                .filter(|&j| bits & (1 << j) != 0)
                .map(|j| topics[j].as_str())
                .collect();
            member(&member_name(i), &subscribed)
        })
        .collect();
    let listed: Vec<(&str, u32)> = topics
        .iter()
        .map(|t| t.as_str())
        .zip(partitions.iter().copied())
        .collect();
    input(members, &listed)
}

/// `members` members all subscribing to every topic of `partitions` (at most 62).
pub fn homogeneous(members: usize, partitions: &[u32]) -> AssignInput {
    let all = (1u64 << partitions.len().min(62)) - 1;
    synthetic(partitions, &vec![all; members])
}

/// A pseudo-random permutation of `0..n` drawn from `seed` (Fisher–Yates over
/// SplitMix64), for shuffling member order in tests.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    order
}

/// `input` with each member owning what `previous` gave the member of the same id.
pub fn with_owned(input: &AssignInput, previous: &Assignment) -> AssignInput {
    let by_id: HashMap<&str, &RVec<TopicPartitions>> = previous
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), &m.partitions))
        .collect();
    let mut next = input.clone();
    for member in next.members.iter_mut() {
        member.owned = by_id
            .get(member.member_id.as_str())
            .map_or_else(RVec::new, |&p| p.clone());
    }
    next
}

/// `input` without the member called `id`.
pub fn without(input: &AssignInput, id: &str) -> AssignInput {
    let mut next = input.clone();
    next.members = input
        .members
        .iter()
        .filter(|m| m.member_id.as_str() != id)
        .cloned()
        .collect();
    next
}

/// `input` with its members reordered: the member at `order[k]` comes `k`-th.
pub fn reordered(input: &AssignInput, order: &[usize]) -> AssignInput {
    let mut next = input.clone();
    next.members = order.iter().map(|&i| input.members[i].clone()).collect();
    next
}

/// Partition count of each output member, in output order.
pub fn loads(output: &Assignment) -> Vec<usize> {
    output
        .members
        .iter()
        .map(|m| m.partitions.iter().map(|tp| tp.partitions.len()).sum())
        .collect()
}

/// Who holds each (topic, partition).
pub fn holders(output: &Assignment) -> BTreeMap<(String, i32), String> {
    let mut map = BTreeMap::new();
    for m in output.members.iter() {
        for tp in m.partitions.iter() {
            for &p in tp.partitions.iter() {
                map.insert((tp.topic.to_string(), p), m.member_id.to_string());
            }
        }
    }
    map
}

#[cfg(test)]
mod tests;
