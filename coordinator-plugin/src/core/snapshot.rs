//! Snapshots of native groups for operators: [`GroupSnapshot`] and [`MemberSnapshot`]
//! (the admin API's `GET /v1/groups`, DescribeGroups, and tests), from
//! [`Coordinator::group`].

use std::collections::BTreeSet;

use super::groups::GroupKind;
use super::Coordinator;

use crate::config::RebalanceMode;
use crate::seen_loads::TopicSeenLoads;
use crate::subscription::SubscriptionSpec;
use crate::types::{ConsumerId, Generation, GroupId, TopicName, TopicPartition};

/// A group as operators see it (for the admin API and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSnapshot {
    /// The group.
    pub group: GroupId,
    /// `stable`, `stopping`, `fetching` or `starting` (where the group is in its
    /// rebalance cycle), or `empty` when it has no registered consumers and no rebalance
    /// is running.
    pub state: &'static str,
    /// The current generation.
    pub generation: Generation,
    /// The assignor its members use (none without members).
    pub assignor: Option<String>,
    /// The rebalance mode for that assignor (for the default assignor without members).
    pub mode: RebalanceMode,
    /// Registered consumers, by id.
    pub members: Vec<MemberSnapshot>,
    /// Partitions of failed consumers not released yet (lease running).
    pub held_by_failed: Vec<TopicPartition>,
    /// Produce rates and lag of its partitions as its last assignment saw them.
    pub loads: Vec<TopicSeenLoads>,
}

/// A member as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// The consumer id.
    pub consumer: ConsumerId,
    /// The host it declared.
    pub host: String,
    /// Its session timeout, in milliseconds.
    pub session_timeout_ms: u64,
    /// The generation the coordinator believes it is in.
    pub generation: Generation,
    /// The subscription, as text: `static: a(2), b(1)`, `whitelist: re (2 streams)`.
    pub subscription: String,
    /// The subscribed topics, resolved against the current metadata.
    pub topics: Vec<TopicName>,
    /// Its reset policy: 0 earliest, 1 latest, 2 none.
    pub auto_offset_reset: i8,
    /// The partitions it may be delivering.
    pub owned: Vec<TopicPartition>,
    /// What it declared for the assignor (RegisterConsumer v1): rack, weight, labels.
    pub data: drover_protocol::MemberData,
}

impl Coordinator {
    /// The ids of every native group the coordinator has seen (in cluster mode: since
    /// it gained the group's slot, which it still owns).
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.ids_of(GroupKind::Native)
    }

    /// A group's state, members and assignment.
    pub fn group(&self, id: &str) -> Option<GroupSnapshot> {
        let g = self.groups.native(id)?;
        let assignor = g.assignor().map(str::to_owned);
        let mode = self.cx.config.mode_for(
            assignor
                .as_deref()
                .unwrap_or(&self.cx.config.default_assignor),
        );
        let mut held: BTreeSet<TopicPartition> = BTreeSet::new();
        for z in &g.zombies {
            held.extend(z.partitions.iter().cloned());
        }
        let state = if g.members.is_empty() && !g.in_rebalance() {
            "empty"
        } else {
            g.phase.name()
        };
        Some(GroupSnapshot {
            group: g.id.clone(),
            state,
            generation: g.generation,
            assignor,
            mode,
            members: g
                .members
                .values()
                .map(|m| MemberSnapshot {
                    consumer: m.id.clone(),
                    host: m.host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    generation: m.generation,
                    subscription: describe(&m.subscription),
                    topics: m.topics.iter().cloned().collect(),
                    auto_offset_reset: m.auto_offset_reset,
                    owned: m.owned.iter().cloned().collect(),
                    data: m.data.clone(),
                })
                .collect(),
            held_by_failed: held.into_iter().collect(),
            loads: g.last_loads.clone(),
        })
    }
}

/// A subscription as text, for operators.
fn describe(spec: &SubscriptionSpec) -> String {
    match spec {
        SubscriptionSpec::Static(list) => {
            let items: Vec<String> = list.iter().map(|(t, s)| format!("{t}({s})")).collect();
            format!("static: {}", items.join(", "))
        }
        SubscriptionSpec::Wildcard {
            pattern,
            blacklist,
            streams,
            ..
        } => format!(
            "{}: {pattern} ({streams} streams)",
            if *blacklist { "blacklist" } else { "whitelist" }
        ),
    }
}
