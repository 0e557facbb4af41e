//! `weighted`: an example rebalance policy for Drover, written against `drover-abi` only.
//!
//! Each member declares a weight (its relative capacity; `AssignorMember::weight`,
//! 1 when it declared none, and 0 is read as 1). Partitions are dealt one at a time, in
//! (topic, partition) order, each to the subscribed member with the smallest
//! `(assigned + 1) / weight` — a member of weight 2 ends up with about twice the
//! partitions of a member of weight 1. Ties go to the smaller member id, so the result
//! is deterministic. With equal weights this is a least-loaded deal: balanced to within
//! one partition for homogeneous subscriptions.
//!
//! Cost: O(P log M) for P partitions and M members (one heap per topic).

use std::{
    cmp::{Ordering, Reverse},
    collections::{BTreeMap, BinaryHeap},
};

use drover_abi::{
    sdk::{AssignorPlugin, PluginContext, PluginInfo},
    std_types::{RString, RVec},
    AssignInput, Assignment, MemberAssignment, PluginError, TopicPartitions,
};

/// The plugin: stateless.
pub struct Weighted;

impl PluginInfo for Weighted {
    const NAME: &'static str = "weighted";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "example: partitions in proportion to member weight";
}

impl AssignorPlugin for Weighted {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        if ctx.config.trim().is_empty() {
            Ok(Weighted)
        } else {
            Err(PluginError::invalid_config(
                "`weighted` takes no configuration",
            ))
        }
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        assign(input)
    }
}

drover_abi::export_assignor!(Weighted);

/// A member's place in a topic's heap: smallest `(load + 1) / weight` first, then id.
#[derive(PartialEq, Eq)]
struct Candidate {
    load: u64,
    weight: u64,
    index: usize,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // (a.load + 1) / a.weight  vs  (b.load + 1) / b.weight, without division.
        ((self.load + 1) * other.weight)
            .cmp(&((other.load + 1) * self.weight))
            .then(self.index.cmp(&other.index))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The policy itself, usable without loading the plugin.
pub fn assign(input: &AssignInput) -> Result<Assignment, PluginError> {
    let mut members: Vec<_> = input.members.iter().collect();
    members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    if let Some(w) = members
        .windows(2)
        .find(|w| w[0].member_id == w[1].member_id)
    {
        return Err(PluginError::invalid_input(format!(
            "member id `{}` appears twice",
            w[0].member_id
        )));
    }
    let mut topics: Vec<_> = input.topics.iter().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));

    let mut loads = vec![0u64; members.len()];
    let mut result: Vec<BTreeMap<&str, Vec<i32>>> = vec![BTreeMap::new(); members.len()];
    for topic in topics {
        let mut heap: BinaryHeap<Reverse<Candidate>> = members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.topics.contains(&topic.name))
            .map(|(index, m)| {
                Reverse(Candidate {
                    load: loads[index],
                    weight: u64::from(m.weight.max(1)),
                    index,
                })
            })
            .collect();
        for partition in 0..topic.partitions as i32 {
            let Some(Reverse(mut best)) = heap.pop() else {
                break; // nobody subscribes to this topic
            };
            result[best.index]
                .entry(topic.name.as_str())
                .or_default()
                .push(partition);
            best.load += 1;
            loads[best.index] = best.load;
            heap.push(Reverse(best));
        }
    }

    let members = members
        .iter()
        .zip(result)
        .map(|(m, topics)| MemberAssignment {
            member_id: m.member_id.clone(),
            partitions: topics
                .into_iter()
                .map(|(topic, partitions)| TopicPartitions {
                    topic: RString::from(topic),
                    partitions: RVec::from(partitions),
                })
                .collect(),
        })
        .collect();
    Ok(Assignment { members })
}

#[cfg(test)]
mod tests {
    use drover_abi::{std_types::RNone, AssignorMember, TopicInfo};

    use super::*;

    fn member(id: &str, weight: u32) -> AssignorMember {
        AssignorMember {
            member_id: id.into(),
            topics: RVec::from(vec![RString::from("t")]),
            owned: RVec::new(),
            rack: RNone,
            weight,
        }
    }

    #[test]
    fn heavier_members_get_proportionally_more() {
        let input = AssignInput {
            group: "g".into(),
            members: RVec::from(vec![member("a", 1), member("b", 3)]),
            topics: RVec::from(vec![TopicInfo::new("t", 8)]),
        };
        let out = assign(&input).unwrap();
        let counts: Vec<usize> = out
            .members
            .iter()
            .map(|m| m.partitions.iter().map(|tp| tp.partitions.len()).sum())
            .collect();
        assert_eq!(counts, vec![2, 6]);
    }
}
