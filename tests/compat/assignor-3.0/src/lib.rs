//! Compatibility fixture: `compat-round-robin`, an assignor built against the frozen
//! drover-abi 3.0 (assignor ABI 3.0). Deals each topic's partitions round-robin over the
//! members subscribed to it, members in id order. Meets the whole contract of
//! `drover_abi::assignor` (duplicate member ids and topics refused, every member listed,
//! output sorted), so it passes the assignor conformance suite of any later 3.x broker.

use std::collections::{BTreeMap, BTreeSet};

use drover_abi::{
    sdk::{AssignorPlugin, PluginContext, PluginInfo},
    std_types::RVec,
    AssignInput, Assignment, MemberAssignment, PluginError, TopicPartitions,
};

/// The plugin: stateless.
pub struct CompatRoundRobin;

impl PluginInfo for CompatRoundRobin {
    const NAME: &'static str = "compat-round-robin";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "compatibility fixture: round-robin, built on assignor ABI 3.0";
}

impl AssignorPlugin for CompatRoundRobin {
    fn new(_: &PluginContext) -> Result<Self, PluginError> {
        Ok(CompatRoundRobin)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        let mut topics = BTreeMap::new();
        for t in input.topics.iter() {
            if topics.insert(t.name.as_str(), t.partitions).is_some() {
                return Err(PluginError::invalid_input(format!(
                    "topic {} listed twice",
                    t.name
                )));
            }
        }
        let mut members: BTreeMap<&str, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        let mut subscribers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for m in input.members.iter() {
            if members
                .insert(m.member_id.as_str(), BTreeMap::new())
                .is_some()
            {
                return Err(PluginError::invalid_input(format!(
                    "member {} listed twice",
                    m.member_id
                )));
            }
            let subscribed: BTreeSet<&str> = m.topics.iter().map(|t| t.as_str()).collect();
            for topic in subscribed {
                subscribers
                    .entry(topic)
                    .or_default()
                    .push(m.member_id.as_str());
            }
        }
        for (topic, subs) in subscribers.iter_mut() {
            subs.sort_unstable();
            let count = topics.get(topic).copied().unwrap_or(0);
            for p in 0..count {
                let owner = subs[p as usize % subs.len()];
                let owned = members.get_mut(owner).expect("subscriber is a member");
                owned.entry(topic).or_default().push(p as i32);
            }
        }
        let members = members
            .into_iter()
            .map(|(id, owned)| MemberAssignment {
                member_id: id.into(),
                partitions: owned
                    .into_iter()
                    .map(|(topic, partitions)| TopicPartitions::new(topic, partitions))
                    .collect::<RVec<_>>(),
            })
            .collect();
        Ok(Assignment { members })
    }
}

drover_abi::export_assignor!(CompatRoundRobin);
