//! [`Racks`]: the racks of a group's members and of its partitions' leaders, interned
//! to small integers, for rack-aware policies (Kafka's KIP-881: prefer a member in the
//! rack of a partition's replica — in Drover, its leader).

use std::collections::HashMap;

use super::{Context, GroupView};

/// The racks of one assignment: per member index (`AssignorMember::rack`) and per
/// global partition id (the rack of the partition's leader broker, from the context),
/// each an interned id, equal ids meaning equal rack names. Unknown racks have none.
///
/// Built in O(members) when no member declared a rack (then nothing is looked up per
/// partition, and [`Racks::is_active`] is false), O(members + partitions) otherwise.
#[derive(Debug, Clone)]
pub struct Racks {
    member: Vec<u32>,
    leader: Vec<u32>,
    active: bool,
}

/// Interned value of an unknown rack.
const NONE: u32 = u32::MAX;

impl Racks {
    /// The racks of `view`'s members and of its partitions' leaders as `ctx` knows them.
    pub fn new(view: &GroupView<'_>, ctx: &Context<'_>) -> Racks {
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut intern = |rack: &str| match ids.get(rack) {
            Some(&i) => i,
            None => {
                let next = ids.len() as u32;
                ids.insert(rack.to_owned(), next);
                next
            }
        };
        let member: Vec<u32> = view
            .members()
            .iter()
            .map(|m| {
                m.input
                    .rack
                    .as_ref()
                    .into_option()
                    .map_or(NONE, |r| intern(r.as_str()))
            })
            .collect();
        let mut leader = vec![NONE; view.partition_count()];
        let mut any_leader = false;
        if member.iter().any(|&r| r != NONE) {
            for topic in view.topics() {
                for p in 0..topic.partitions {
                    if let Some(rack) = ctx.leader_rack(topic.name, p as i32) {
                        leader[(topic.first + p) as usize] = intern(rack);
                        any_leader = true;
                    }
                }
            }
        }
        Racks {
            member,
            leader,
            active: any_leader,
        }
    }

    /// No racks at all (what a policy sees without a context).
    pub fn none(view: &GroupView<'_>) -> Racks {
        Racks {
            member: vec![NONE; view.members().len()],
            leader: vec![NONE; view.partition_count()],
            active: false,
        }
    }

    /// Whether some member has a rack and some partition a leader with a rack: without
    /// both, a rack-aware policy must behave exactly as without racks (KIP-881).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Member `m`'s interned rack, if it declared one.
    pub fn member(&self, m: u32) -> Option<u32> {
        Some(self.member[m as usize]).filter(|&r| r != NONE)
    }

    /// The interned rack of global partition `g`'s leader, if known.
    pub fn leader(&self, g: u32) -> Option<u32> {
        Some(self.leader[g as usize]).filter(|&r| r != NONE)
    }

    /// Whether member `m` sits in the rack of partition `g`'s leader (both known).
    pub fn matches(&self, m: u32, g: u32) -> bool {
        let rack = self.leader[g as usize];
        rack != NONE && self.member[m as usize] == rack
    }
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::{RNone, RSlice, RSome, RString, RVec};

    use super::*;
    use crate::assignor::{AssignContext, BrokerContext, PartitionContext, TopicContext};
    use crate::{AssignInput, AssignorMember, TopicInfo};

    fn member(id: &str, rack: Option<&str>) -> AssignorMember {
        AssignorMember {
            member_id: id.into(),
            topics: RVec::from(vec![RString::from("t")]),
            owned: RVec::new(),
            rack: rack.map_or(RNone, |r| RSome(r.into())),
            weight: 1,
        }
    }

    /// (active, member racks, leader racks, b matches partition 1) for `members`, with
    /// partition 0 led by broker 0 (rack "x") and 1 by broker 1 (rack "y").
    fn racks(members: Vec<AssignorMember>) -> (bool, Vec<Option<u32>>, Vec<Option<u32>>, bool) {
        let input = AssignInput {
            group: "g".into(),
            members: RVec::from(members),
            topics: RVec::from(vec![TopicInfo::new("t", 2)]),
        };
        let view = GroupView::new(&input).unwrap();
        let brokers = [0, 1].map(|b| BrokerContext {
            broker_id: b,
            rack: RSome(["x", "y"][b as usize].into()),
        });
        let partitions = (0..2)
            .map(|p| {
                let mut pc = PartitionContext::unknown(p);
                pc.leader = RSome(p);
                pc
            })
            .collect();
        let topics = [TopicContext {
            topic: "t".into(),
            partitions,
        }];
        AssignContext {
            members: RSlice::from_slice(&[]),
            brokers: RSlice::from_slice(&brokers),
            topics: RSlice::from_slice(&topics),
        }
        .lend(|raw| {
            let r = Racks::new(&view, &Context::new(raw));
            (
                r.is_active(),
                (0..2).map(|m| r.member(m)).collect(),
                (0..2).map(|g| r.leader(g)).collect(),
                r.matches(1, 1),
            )
        })
    }

    #[test]
    fn interns_member_and_leader_racks() {
        let (active, members, leaders, b_on_1) =
            racks(vec![member("a", Some("x")), member("b", Some("y"))]);
        assert!(active && b_on_1);
        assert_eq!(members, [Some(0), Some(1)]);
        assert_eq!(leaders, [Some(0), Some(1)]);
    }

    #[test]
    fn without_member_racks_nothing_is_looked_up() {
        let (active, members, leaders, b_on_1) = racks(vec![member("a", None), member("b", None)]);
        assert!(!active && !b_on_1);
        assert_eq!(members, [None, None]);
        assert_eq!(leaders, [None, None]);
    }
}
