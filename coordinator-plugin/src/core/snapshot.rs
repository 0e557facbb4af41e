//! Snapshots of groups for operators: [`GroupSnapshot`] and [`MemberSnapshot`] (the
//! admin API's `GET /v1/groups`, DescribeGroups, and tests), one model for the native
//! and the KIP-848 groups ([`Group::snapshot`]), from [`Coordinator::snapshot`] and
//! [`Coordinator::group`].

use std::collections::BTreeSet;

use super::groups::{Group, GroupKind};
use super::native::NativeGroup;
use super::Coordinator;

use crate::config::{CoordinatorConfig, RebalanceMode};
use crate::seen_loads::TopicSeenLoads;
use crate::subscription::SubscriptionSpec;
use crate::types::{ConsumerId, Generation, GroupId, TopicName, TopicPartition};

/// A group as operators see it (for the admin API and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSnapshot {
    /// The group.
    pub group: GroupId,
    /// Its protocol: `native`, `consumer` (KIP-848) or `share` (KIP-932), as ListGroups
    /// names them.
    pub group_type: &'static str,
    /// A native group: `stable`, `stopping`, `fetching` or `starting` (where the group
    /// is in its rebalance cycle), or `empty` when it has no registered consumers and
    /// no rebalance is running. A KIP-848 group: Kafka's `Empty`, `Assigning`,
    /// `Reconciling` or `Stable`; a share group: `Empty` or `Stable`.
    pub state: &'static str,
    /// The current generation (a KIP-848 group: its group epoch).
    pub generation: Generation,
    /// The assignor its members use (none without members; a KIP-848 group: the one
    /// of its target assignment).
    pub assignor: Option<String>,
    /// The rebalance mode for that assignor (for the default assignor without members;
    /// KIP-848 groups: incremental).
    pub mode: RebalanceMode,
    /// Registered consumers, by id.
    pub members: Vec<MemberSnapshot>,
    /// Partitions of failed consumers not released yet (lease running).
    pub held_by_failed: Vec<TopicPartition>,
    /// Produce rates and lag of its partitions as its last assignment saw them (a
    /// KIP-848 group: the assignor of its target in force).
    pub loads: Vec<TopicSeenLoads>,
}

/// A member as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// The consumer id (a KIP-848 member id).
    pub consumer: ConsumerId,
    /// The host it declared (a KIP-848 member: the client host of its last
    /// heartbeat).
    pub host: String,
    /// Its session timeout, in milliseconds (a KIP-848 member: the coordinator's
    /// `consumer_session_timeout_ms`, which every member of such a group has).
    pub session_timeout_ms: u64,
    /// The generation the coordinator believes it is in (a KIP-848 member: its member
    /// epoch).
    pub generation: Generation,
    /// The subscription, as text: `static: a(2), b(1)`, `whitelist: re (2 streams)`
    /// (a KIP-848 member: its regex, or its topic names joined by `,`).
    pub subscription: String,
    /// The subscribed topics, resolved against the current metadata.
    pub topics: Vec<TopicName>,
    /// Its reset policy: 0 earliest, 1 latest, 2 none; −1 for a KIP-848 member (its
    /// client resets on its own).
    pub auto_offset_reset: i8,
    /// The partitions it may be delivering (a KIP-848 member: assigned, and asked to
    /// revoke but not yet revoked).
    pub owned: Vec<TopicPartition>,
    /// What it declared for the assignor (RegisterConsumer v1): rack, weight, labels
    /// (a KIP-848 member: its rack, weight 1, no labels).
    pub data: drover_protocol::MemberData,
}

impl Coordinator {
    /// The ids of every native group the coordinator has seen (in cluster mode: since
    /// it gained the group's slot, which it still owns).
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.ids_of(GroupKind::Native)
    }

    /// The ids of every group [`Coordinator::snapshot`] describes (native and KIP-848),
    /// in id order.
    pub fn described_group_ids(&self) -> Vec<GroupId> {
        self.groups
            .iter()
            .filter(|(_, g)| g.has_snapshot())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// A native group's state, members and assignment; `None` for a group of another
    /// protocol.
    pub fn group(&self, id: &str) -> Option<GroupSnapshot> {
        self.groups
            .native(id)
            .map(|g| native_snapshot(g, &self.cx.config))
    }

    /// The state, members, assignment and last seen loads of group `id`, native or
    /// KIP-848 (`Group::snapshot`); `None` for an unknown or classic group.
    pub fn snapshot(&self, id: &str) -> Option<GroupSnapshot> {
        self.groups.get(id)?.snapshot(&self.cx.config)
    }
}

impl Group {
    /// Whether [`Group::snapshot`] describes the group (native and KIP-848 groups).
    pub(crate) fn has_snapshot(&self) -> bool {
        match self {
            Group::Native(_) | Group::Consumer(_) | Group::Share(_) => true,
            Group::Classic(_) => false,
        }
    }

    /// The group as operators see it, whatever its protocol: a native group's
    /// registered consumers, a KIP-848 group's members. `None` for a classic group (it
    /// assigns on the client; Kafka's DescribeGroups describes it).
    pub(crate) fn snapshot(&self, config: &CoordinatorConfig) -> Option<GroupSnapshot> {
        match self {
            Group::Native(g) => Some(native_snapshot(g, config)),
            Group::Consumer(g) => Some(g.snapshot(u64::from(config.consumer_session_timeout_ms))),
            Group::Share(g) => Some(g.snapshot(u64::from(config.share_session_timeout_ms))),
            Group::Classic(_) => None,
        }
    }
}

/// A native group's snapshot.
fn native_snapshot(g: &NativeGroup, config: &CoordinatorConfig) -> GroupSnapshot {
    let assignor = g.assignor().map(str::to_owned);
    let mode = config.mode_for(assignor.as_deref().unwrap_or(&config.default_assignor));
    let mut held: BTreeSet<TopicPartition> = BTreeSet::new();
    for z in &g.zombies {
        held.extend(z.partitions.iter().cloned());
    }
    let state = if g.members.is_empty() && !g.in_rebalance() {
        "empty"
    } else {
        g.phase.name()
    };
    GroupSnapshot {
        group: g.id.clone(),
        group_type: GroupKind::Native.name(),
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
