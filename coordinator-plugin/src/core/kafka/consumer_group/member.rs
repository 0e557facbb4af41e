//! One member of a KIP-848 group: what it subscribes to, the epoch and partitions it
//! has reconciled to, its deadlines, and its entry in the coordinator's timer table
//! (Kafka's `ConsumerGroupMember` and `MemberState`).

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use crate::core::result::Effects;
use crate::core::TimerKey;
use crate::subscription::is_internal_topic;
use crate::types::{GroupId, TopicName, TopicPartition};

/// Where a member is in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberState {
    /// At its target assignment (or about to move to a new one on its next heartbeat).
    Stable,
    /// Waiting for the member to revoke partitions.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// One member of a group.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) rack_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) rebalance_timeout_ms: u64,
    pub(super) names: BTreeSet<TopicName>,
    /// The pattern as sent and its compiled, anchored form.
    pub(super) regex: Option<(String, Regex)>,
    /// The server assignor it asked for, resolved to a loaded assignor.
    pub(super) server_assignor: Option<String>,
    /// The topics it subscribes to: its names, and the existing topics its regex
    /// matches.
    pub(super) topics: BTreeSet<TopicName>,
    pub(super) epoch: i32,
    pub(super) previous_epoch: i32,
    pub(super) state: MemberState,
    pub(super) assigned: BTreeSet<TopicPartition>,
    pub(super) pending_revocation: BTreeSet<TopicPartition>,
    pub(super) session_deadline: u64,
    /// While partitions await revocation: when the member is fenced for not revoking.
    pub(super) rebalance_deadline: Option<u64>,
    /// When its next heartbeat is expected (monotonic ms): its latest answer's time
    /// plus the interval that answer gave it. Members waiting for partitions it holds
    /// are told to come back then ([`super::heartbeat`]).
    pub(super) next_heartbeat: u64,
}

impl Member {
    pub(super) fn new(id: String, now: u64) -> Self {
        Member {
            id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 0,
            names: BTreeSet::new(),
            regex: None,
            server_assignor: None,
            topics: BTreeSet::new(),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: BTreeSet::new(),
            pending_revocation: BTreeSet::new(),
            session_deadline: now,
            rebalance_deadline: None,
            next_heartbeat: now,
        }
    }

    /// The topics this member subscribes to given the current topics; `cache` shares
    /// the matches of a pattern between the members that use it.
    pub(super) fn resolve(
        &self,
        topics: &BTreeMap<TopicName, u32>,
        cache: &mut BTreeMap<String, BTreeSet<TopicName>>,
    ) -> BTreeSet<TopicName> {
        let mut out = self.names.clone();
        if let Some((pattern, regex)) = &self.regex {
            let matches = cache.entry(pattern.clone()).or_insert_with(|| {
                topics
                    .keys()
                    .filter(|t| !is_internal_topic(t.as_str()) && regex.is_match(t.as_str()))
                    .cloned()
                    .collect()
            });
            out.extend(matches.iter().cloned());
        }
        out
    }

    /// When this member must next be looked at (monotonic ms): its session deadline,
    /// or its rebalance deadline when earlier.
    pub(super) fn deadline(&self) -> u64 {
        self.rebalance_deadline
            .map_or(self.session_deadline, |r| r.min(self.session_deadline))
    }
}

/// The key of member `id`'s deadline in the coordinator's timer table.
pub(super) fn timer_key(group: &GroupId, id: &str) -> TimerKey {
    TimerKey::ConsumerMember(group.clone(), id.to_owned())
}

/// Sets (or moves) `m`'s entry in the timer table to [`Member::deadline`] (an effect).
pub(super) fn schedule(fx: &mut Effects<'_>, group: &GroupId, m: &Member) {
    fx.timer(timer_key(group, &m.id), Some(m.deadline()));
}

/// Cancels member `id`'s entry in the timer table (an effect).
pub(super) fn unschedule(fx: &mut Effects<'_>, group: &GroupId, id: &str) {
    fx.timer(timer_key(group, id), None);
}
