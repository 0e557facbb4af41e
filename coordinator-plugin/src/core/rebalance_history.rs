//! Each group's recent rebalances, for operators (issue 32: the console's rebalance
//! timeline): why each ran, when, how long it took, how many partitions changed owner
//! and with how many members. A [`RebalanceHistory`] keeps the last
//! [`proto::MAX_REBALANCES_PER_GROUP`] of one group, in the coordinator's monotonic
//! clock (ms; sans-IO: the caller passes `now`), and answers DescribeRebalances
//! ([`proto::DescribeRebalancesRequest`]) with ages relative to the answer.
//!
//! The cause of a rebalance is the first trigger of the series it answered (triggers
//! arriving within the debounce join one rebalance): [`RebalanceHistory::triggered`]
//! keeps the first until [`RebalanceHistory::started`] takes it.
//!
//! A KIP-848 group's rebalance is a new group epoch whose target assignment changed
//! ([`RebalanceHistory::target_changed`]): it starts when the first epoch bump of the
//! series happened ([`RebalanceHistory::triggered_at`]), counts the partitions that
//! changed owner between the old and the new target, and ends when every member has
//! reconciled to the target ([`RebalanceHistory::ended`]) or a newer target supersedes
//! it.

use std::collections::{BTreeMap, VecDeque};

use drover_protocol as proto;
use proto::RebalanceRecord;

use crate::io::FailureReason;
use crate::types::{ConsumerId, TopicPartition};

/// A rebalance as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    generation: i32,
    cause: &'static str,
    started_ms: u64,
    ended_ms: Option<u64>,
    moved: Option<u32>,
    members: u32,
    assignor: Option<String>,
    /// Owners when it started, to count what moved.
    before: BTreeMap<TopicPartition, ConsumerId>,
}

/// One group's recent rebalances (module docs). Bounded: at most
/// [`proto::MAX_REBALANCES_PER_GROUP`] entries, the oldest dropped first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RebalanceHistory {
    entries: VecDeque<Entry>,
    pending: Option<&'static str>,
    /// When the first trigger of the pending series came (KIP-848 groups: the first
    /// epoch bump), ms.
    pending_since: Option<u64>,
}

/// The cause a trigger reason stands for: a native group's (`NativeGroup::trigger`'s
/// `why`) or a classic group's (`ClassicGroup::prepare_rebalance`'s).
pub(crate) fn cause_of_trigger(why: &str) -> &'static str {
    if why.contains("expired") {
        RebalanceRecord::SESSION_EXPIRY
    } else if why.contains("join") {
        RebalanceRecord::JOIN
    } else if why.contains("left") {
        RebalanceRecord::LEAVE
    } else if why.contains("topic") {
        RebalanceRecord::TOPIC_CHANGE
    } else if why.contains("drift") {
        RebalanceRecord::LOAD_DRIFT
    } else if why.contains("assignor") || why.contains("rescan") {
        RebalanceRecord::PLUGIN_RESCAN
    } else if why.contains("subscription") {
        RebalanceRecord::SUBSCRIPTION_CHANGE
    } else {
        RebalanceRecord::OTHER
    }
}

/// The cause a member's failure stands for: its session expired, or it went away
/// (its channel closed: the process died or left without LeaveGroup).
pub(crate) fn cause_of_failure(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::SessionTimeout => RebalanceRecord::SESSION_EXPIRY,
        FailureReason::ChannelClosed => RebalanceRecord::LEAVE,
        _ => RebalanceRecord::OTHER,
    }
}

impl RebalanceHistory {
    /// A trigger with `cause`; the first of a series is the next rebalance's cause.
    pub(crate) fn triggered(&mut self, cause: &'static str) {
        self.pending.get_or_insert(cause);
    }

    /// A trigger with `cause` at `now` (a KIP-848 group's epoch bump); the first of a
    /// series is the next rebalance's cause and start ([`Self::target_changed`]).
    pub(crate) fn triggered_at(&mut self, cause: &'static str, now: u64) {
        self.triggered(cause);
        self.pending_since.get_or_insert(now);
    }

    /// The pending series changed nothing (a KIP-848 group's new target is the one in
    /// force): it is no rebalance, and its cause is not the next one's.
    pub(crate) fn discard_pending(&mut self) {
        self.pending = None;
        self.pending_since = None;
    }

    /// Whether a rebalance is running (not ended, not superseded).
    pub(crate) fn is_running(&self) -> bool {
        self.entries.back().is_some_and(|e| e.ended_ms.is_none())
    }

    /// A KIP-848 group's target changed at `now` (its group epoch `generation`, with
    /// `members` members, computed by `assignor`) from owners `before` to `after`: a
    /// rebalance that started at the first epoch bump of its series (else `now`), with
    /// the partitions that changed owner counted; it runs until [`Self::ended`] or the
    /// next one.
    pub(crate) fn target_changed(
        &mut self,
        now: u64,
        generation: i32,
        members: usize,
        assignor: &str,
        before: BTreeMap<TopicPartition, ConsumerId>,
        after: &BTreeMap<TopicPartition, ConsumerId>,
    ) {
        let since = self.pending_since.take().unwrap_or(now).min(now);
        let moved = moved_between(&before, after);
        self.started(since, generation, members, Some(assignor), BTreeMap::new());
        if let Some(e) = self.entries.back_mut() {
            e.moved = Some(moved);
        }
    }

    /// A rebalance started at `now` from `generation` with `members` members, running
    /// `assignor`, while `owners` owned the partitions.
    pub(crate) fn started(
        &mut self,
        now: u64,
        generation: i32,
        members: usize,
        assignor: Option<&str>,
        owners: BTreeMap<TopicPartition, ConsumerId>,
    ) {
        self.pending_since = None;
        // One superseded before it finished (a classic group's members did not sync)
        // ends here.
        if let Some(e) = self.entries.back_mut().filter(|e| e.ended_ms.is_none()) {
            e.ended_ms = Some(now.max(e.started_ms));
        }
        if self.entries.len() >= proto::MAX_REBALANCES_PER_GROUP {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry {
            generation,
            cause: self.pending.take().unwrap_or(RebalanceRecord::OTHER),
            started_ms: now,
            ended_ms: None,
            moved: None,
            members: u32::try_from(members).unwrap_or(u32::MAX),
            assignor: assignor.map(str::to_owned),
            before: owners,
        });
    }

    /// The running rebalance ended at `now` with `owners` owning the partitions.
    pub(crate) fn completed(&mut self, now: u64, owners: &BTreeMap<TopicPartition, ConsumerId>) {
        let Some(e) = self.entries.back_mut().filter(|e| e.ended_ms.is_none()) else {
            return;
        };
        let before = std::mem::take(&mut e.before);
        e.moved = Some(moved_between(&before, owners));
        e.ended_ms = Some(now.max(e.started_ms));
    }

    /// A classic group's rebalance started at `now` for `why` from `generation` with
    /// `members` members. Its assignment is the client leader's, opaque here, so what
    /// moved is not counted.
    pub(crate) fn classic_started(&mut self, now: u64, why: &str, generation: i32, members: usize) {
        self.triggered(cause_of_trigger(why));
        self.started(now, generation, members, None, BTreeMap::new());
    }

    /// The running rebalance ended at `now` without counting moves here: a classic
    /// group's (SyncGroup gave the assignment, or every member left), or a KIP-848
    /// group's (every member reconciled to the target; its moves were counted when
    /// the target changed).
    pub(crate) fn ended(&mut self, now: u64) {
        if let Some(e) = self.entries.back_mut().filter(|e| e.ended_ms.is_none()) {
            e.ended_ms = Some(now.max(e.started_ms));
        }
    }

    /// The records as DescribeRebalances answers them at `now`, oldest first.
    pub(crate) fn to_wire(&self, now: u64) -> Vec<RebalanceRecord> {
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.entries
            .iter()
            .map(|e| RebalanceRecord {
                generation: e.generation,
                cause: e.cause.to_owned(),
                age_ms: ms(now.saturating_sub(e.started_ms)),
                duration_ms: e.ended_ms.map_or(-1, |end| ms(end - e.started_ms)),
                partitions_moved: e.moved.map_or(-1, |m| i32::try_from(m).unwrap_or(i32::MAX)),
                members: i32::try_from(e.members).unwrap_or(i32::MAX),
                assignor: e.assignor.clone(),
            })
            .collect()
    }
}

/// How many partitions changed owner from `before` to `after`: those whose owner
/// changed or went, and those that gained one.
fn moved_between(
    before: &BTreeMap<TopicPartition, ConsumerId>,
    after: &BTreeMap<TopicPartition, ConsumerId>,
) -> u32 {
    let changed = before
        .iter()
        .filter(|(tp, owner)| after.get(*tp) != Some(*owner))
        .count()
        + after.keys().filter(|tp| !before.contains_key(*tp)).count();
    u32::try_from(changed).unwrap_or(u32::MAX)
}

impl super::Coordinator {
    /// DescribeRebalances: each requested group's history (native, classic and KIP-848
    /// groups; a group this coordinator does not have is GROUP_ID_NOT_FOUND; a group of
    /// a slot it does not own NOT_COORDINATOR). At most
    /// [`proto::MAX_GROUPS_PER_REQUEST`] groups are answered.
    pub(crate) fn describe_rebalances(
        &self,
        request: &proto::DescribeRebalancesRequest,
    ) -> proto::DescribeRebalancesResponse {
        let now = self.cx.now;
        let groups = request
            .groups
            .iter()
            .take(proto::MAX_GROUPS_PER_REQUEST)
            .map(|id| {
                let (error_code, rebalances) = if id.is_empty() {
                    (proto::ErrorCode::INVALID_GROUP_ID, Vec::new())
                } else if !self.owns(id) {
                    (proto::ErrorCode::NOT_COORDINATOR, Vec::new())
                } else {
                    match self
                        .groups
                        .get(id.as_str())
                        .and_then(|g| g.rebalance_history())
                    {
                        Some(h) => (proto::ErrorCode::NONE, h.to_wire(now)),
                        None => (proto::ErrorCode::GROUP_ID_NOT_FOUND, Vec::new()),
                    }
                };
                proto::GroupRebalances {
                    group_id: id.clone(),
                    error_code,
                    rebalances,
                }
            })
            .collect();
        proto::DescribeRebalancesResponse { groups }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn owners(pairs: &[(&str, i32, &str)]) -> BTreeMap<TopicPartition, ConsumerId> {
        pairs
            .iter()
            .map(|(t, p, c)| (tp(t, *p), ConsumerId::from(*c)))
            .collect()
    }

    #[test]
    fn records_the_first_cause_duration_and_moves() {
        let mut h = RebalanceHistory::default();
        h.triggered(cause_of_failure(FailureReason::SessionTimeout));
        h.triggered(cause_of_trigger("join"));
        h.started(
            1_000,
            4,
            2,
            Some("range"),
            owners(&[("t", 0, "a"), ("t", 1, "b")]),
        );
        assert_eq!(h.to_wire(1_500)[0].duration_ms, -1);
        h.completed(
            1_200,
            &owners(&[("t", 0, "a"), ("t", 1, "a"), ("t", 2, "a")]),
        );
        let r = &h.to_wire(2_000)[0];
        assert_eq!(r.cause, RebalanceRecord::SESSION_EXPIRY);
        assert_eq!((r.generation, r.members), (4, 2));
        assert_eq!((r.age_ms, r.duration_ms), (1_000, 200));
        assert_eq!(r.partitions_moved, 2, "t-1 changed owner, t-2 gained one");
        assert_eq!(r.assignor.as_deref(), Some("range"));
        h.started(3_000, 5, 1, None, BTreeMap::new());
        assert_eq!(h.to_wire(3_000)[1].cause, RebalanceRecord::OTHER);
    }

    #[test]
    fn keeps_a_bounded_history() {
        let mut h = RebalanceHistory::default();
        for i in 0..(proto::MAX_REBALANCES_PER_GROUP as u64 + 10) {
            h.triggered(RebalanceRecord::JOIN);
            h.started(i, i as i32, 1, None, BTreeMap::new());
            h.completed(i, &BTreeMap::new());
        }
        let wire = h.to_wire(1_000);
        assert_eq!(wire.len(), proto::MAX_REBALANCES_PER_GROUP);
        assert_eq!(wire[0].generation, 10, "the oldest went first");
    }

    #[test]
    fn a_classic_rebalance_records_its_cause_and_duration_but_no_moves() {
        let mut h = RebalanceHistory::default();
        h.classic_started(100, "a member's session expired", 3, 2);
        h.ended(400);
        let r = &h.to_wire(1_000)[0];
        assert_eq!(r.cause, RebalanceRecord::SESSION_EXPIRY);
        assert_eq!((r.generation, r.members, r.duration_ms), (3, 2, 300));
        assert_eq!(r.partitions_moved, -1, "the client assigns: unknown");
    }

    #[test]
    fn a_target_change_starts_at_the_first_bump_and_counts_moves_at_once() {
        let mut h = RebalanceHistory::default();
        h.triggered_at(RebalanceRecord::JOIN, 100);
        h.triggered_at(RebalanceRecord::LEAVE, 150);
        let before = owners(&[("t", 0, "a"), ("t", 1, "a")]);
        let after = owners(&[("t", 0, "a"), ("t", 1, "b")]);
        h.target_changed(200, 3, 2, "sticky", before, &after);
        assert!(h.is_running());
        let r = &h.to_wire(300)[0];
        assert_eq!((r.cause.as_str(), r.age_ms), (RebalanceRecord::JOIN, 200));
        assert_eq!((r.partitions_moved, r.duration_ms), (1, -1));
        h.ended(450);
        assert!(!h.is_running());
        assert_eq!(h.to_wire(500)[0].duration_ms, 350);
        h.triggered_at(RebalanceRecord::TOPIC_CHANGE, 600);
        h.discard_pending();
        h.target_changed(700, 4, 2, "sticky", after.clone(), &after);
        let r = &h.to_wire(700)[1];
        assert_eq!((r.cause.as_str(), r.age_ms), (RebalanceRecord::OTHER, 0));
    }

    #[test]
    fn trigger_reasons_map_to_causes() {
        assert_eq!(
            cause_of_trigger("a member joined again"),
            RebalanceRecord::JOIN
        );
        assert_eq!(cause_of_trigger("a member left"), RebalanceRecord::LEAVE);
        assert_eq!(cause_of_trigger("join"), RebalanceRecord::JOIN);
        assert_eq!(cause_of_trigger("member left"), RebalanceRecord::LEAVE);
        assert_eq!(
            cause_of_trigger("topic metadata changed"),
            RebalanceRecord::TOPIC_CHANGE
        );
        assert_eq!(
            cause_of_trigger("assignor inputs drifted (rerun_on_drift_ms)"),
            RebalanceRecord::LOAD_DRIFT
        );
        assert_eq!(
            cause_of_failure(FailureReason::ChannelClosed),
            RebalanceRecord::LEAVE
        );
    }
}
