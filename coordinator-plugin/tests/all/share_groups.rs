//! Share groups (KIP-932) through the wire: ShareGroupHeartbeat v1 and
//! ShareGroupDescribe v1, spoken by fake clients encoding with the `kafka-protocol`
//! crate against one coordinator on virtual time (the Kafka harness, `kafka/mod.rs`):
//! joins, epochs and fencing, leaving, session expiry, the size limits, the group id
//! belonging to one type, ListGroups / DeleteGroups / the offsets APIs on a share
//! group, and hostile requests.

use crate::common;
use crate::kafka;

use std::collections::{BTreeMap, BTreeSet};

use drover_coordinator::{CoordinatorConfig, Input, TopicName};
use kafka::*;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::ResponseError as E;
use uuid::Uuid;

/// A member id as a client generates it (22 characters, Kafka's base64 UUID form).
fn mid(i: usize) -> String {
    format!("share-member-{i:09}")
}

fn join(group: &str, member: &str, topics: &[&str]) -> ShareGroupHeartbeatRequest {
    let mut r = ShareGroupHeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.member_epoch = 0;
    r.subscribed_topic_names = Some(topics.iter().map(|t| s(*t).into()).collect());
    r
}

fn beat(group: &str, member: &str, epoch: i32) -> ShareGroupHeartbeatRequest {
    let mut r = ShareGroupHeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.member_epoch = epoch;
    r
}

/// The answer's assignment as (topic id, sorted partitions); `None` when absent.
fn assignment(r: &ShareGroupHeartbeatResponse) -> Option<Vec<(Uuid, Vec<i32>)>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .map(|t| {
                let mut ps = t.partitions.clone();
                ps.sort();
                (t.topic_id, ps)
            })
            .collect()
    })
}

fn partitions_of(r: &ShareGroupHeartbeatResponse) -> BTreeSet<(Uuid, i32)> {
    assignment(r)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t, p)))
        .collect()
}

fn describe(h: &mut Harness, groups: &[&str]) -> ShareGroupDescribeResponse {
    let mut r = ShareGroupDescribeRequest::default();
    r.group_ids = groups.iter().map(|g| s(*g).into()).collect();
    h.admin(1, r)
}

fn list(h: &mut Harness, types: &[&str]) -> Vec<(String, String, String, String)> {
    let mut req = ListGroupsRequest::default();
    req.types_filter = types.iter().map(|t| s(*t)).collect();
    let r = h.admin(5, req);
    assert_eq!(r.error_code, 0);
    r.groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.group_state.to_string(),
                g.group_type.to_string(),
                g.protocol_type.to_string(),
            )
        })
        .collect()
}

/// The partitions ShareGroupDescribe shows for `member` of `group`.
fn held_by(h: &mut Harness, group: &str, member: &str) -> BTreeSet<(Uuid, i32)> {
    let d = describe(h, &[group]);
    let m = d.groups[0]
        .members
        .iter()
        .find(|m| m.member_id.as_str() == member)
        .expect("a member");
    m.assignment
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect()
}

fn audit() -> Uuid {
    Uuid::from_bytes(AUDIT_ID)
}

#[test]
fn four_members_on_a_two_partition_topic_all_get_a_partition() {
    let mut h = Harness::new();
    let c = h.connect();
    let mut epochs = Vec::new();
    for i in 0..4 {
        let r = h.call(c, 1, join("q", &mid(i), &["audit"]));
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.member_id.as_deref(), Some(mid(i).as_str()));
        assert!(
            r.assignment.is_some(),
            "a join is answered with its assignment"
        );
        epochs.push(r.member_epoch);
    }
    // Each join is a new group epoch, and the joiner gets it at once.
    assert_eq!(epochs, [1, 2, 3, 4]);
    // The earlier members learn the final target on their next heartbeat.
    let mut held: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    for (i, epoch) in epochs.iter().enumerate() {
        let r = h.call(c, 1, beat("q", &mid(i), *epoch));
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.member_epoch, 4);
        assert_eq!(r.heartbeat_interval_ms, 5_000);
        if *epoch == 4 {
            // Unchanged since the join's answer: none in this one.
            assert!(r.assignment.is_none());
        }
        // An answer carries the assignment only when it changed from the last one
        // the member was given.
        let mine = held_by(&mut h, "q", &mid(i));
        if let Some(parts) = r.assignment.as_ref().map(|_| partitions_of(&r)) {
            assert_eq!(parts, mine);
        }
        assert_eq!(mine.len(), 1, "member {i}: {mine:?}");
        for tp in mine {
            *held.entry(tp).or_default() += 1;
        }
    }
    // Both partitions are shared by two members each.
    assert_eq!(
        held,
        [((audit(), 0), 2), ((audit(), 1), 2)].into_iter().collect()
    );
    let d = describe(&mut h, &["q"]);
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(
        (
            g.group_state.as_str(),
            g.group_epoch,
            g.assignment_epoch,
            g.assignor_name.as_str()
        ),
        ("Stable", 4, 4, "simple")
    );
    assert_eq!(g.members.len(), 4);
    assert!(g.members.iter().all(|m| m.member_epoch == 4));
}

#[test]
fn fewer_members_than_partitions_split_them_without_overlap() {
    let mut h = Harness::new();
    let c = h.connect();
    let a = h.call(c, 1, join("q", &mid(1), &["orders"]));
    assert_eq!(partitions_of(&a).len(), 6);
    let b = h.call(c, 1, join("q", &mid(2), &["orders"]));
    let a = h.call(c, 1, beat("q", &mid(1), a.member_epoch));
    let (pa, pb) = (partitions_of(&a), partitions_of(&b));
    assert_eq!(pa.len() + pb.len(), 6, "{pa:?} {pb:?}");
    assert!(pa.is_disjoint(&pb));
    assert_eq!(pa.len(), 3);
}

#[test]
fn epochs_fence_newer_and_stale_heartbeats_and_accept_a_lost_answer() {
    let mut h = Harness::new();
    let c = h.connect();
    let a = h.call(c, 1, join("q", &mid(1), &["orders"]));
    assert_eq!(a.member_epoch, 1);
    h.call(c, 1, join("q", &mid(2), &["orders"]));
    h.call(c, 1, join("q", &mid(3), &["orders"]));
    // Member 1 moves from epoch 1 to 3.
    let r = h.call(c, 1, beat("q", &mid(1), 1));
    assert_eq!((r.error_code, r.member_epoch), (0, 3));
    // A newer epoch than the coordinator's is fenced.
    let r = h.call(c, 1, beat("q", &mid(1), 7));
    assert_eq!(r.error_code, E::FencedMemberEpoch.code());
    assert_eq!(r.member_epoch, 0);
    // Its previous epoch (the answer moving it to 3 was lost) is accepted.
    let r = h.call(c, 1, beat("q", &mid(1), 1));
    assert_eq!((r.error_code, r.member_epoch), (0, 3));
    // Member 2 is at 2; after a leave (epoch 4) member 1 moves to 4, and its epoch 2
    // is neither current nor previous (3).
    h.call(c, 1, beat("q", &mid(3), -1));
    let r = h.call(c, 1, beat("q", &mid(1), 3));
    assert_eq!(r.member_epoch, 4);
    let r = h.call(c, 1, beat("q", &mid(1), 2));
    assert_eq!(r.error_code, E::FencedMemberEpoch.code());
    // Epoch 0 rejoins with the same id, keeping its place.
    let r = h.call(c, 1, join("q", &mid(1), &["orders"]));
    assert_eq!((r.error_code, r.member_epoch), (0, 4));
    assert!(r.assignment.is_some());
    // An unknown member id is UNKNOWN_MEMBER_ID, and so is a heartbeat of a group the
    // coordinator does not know (the client rejoins); a leave of one is
    // GROUP_ID_NOT_FOUND.
    let r = h.call(c, 1, beat("q", &mid(9), 4));
    assert_eq!(r.error_code, E::UnknownMemberId.code());
    let r = h.call(c, 1, beat("nope", &mid(1), 4));
    assert_eq!(r.error_code, E::UnknownMemberId.code());
    let r = h.call(c, 1, beat("nope", &mid(1), -1));
    assert_eq!(r.error_code, E::GroupIdNotFound.code());
}

#[test]
fn a_member_leaving_gives_its_partitions_to_the_others() {
    let mut h = Harness::new();
    let c = h.connect();
    let a = h.call(c, 1, join("q", &mid(1), &["orders"]));
    let b = h.call(c, 1, join("q", &mid(2), &["orders"]));
    assert_eq!(partitions_of(&b).len(), 3);
    let r = h.call(c, 1, beat("q", &mid(2), -1));
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    let a = h.call(c, 1, beat("q", &mid(1), a.member_epoch));
    assert_eq!(a.member_epoch, 3);
    // Its last answer (the join's) gave it all six: unchanged, so none in this one.
    assert!(a.assignment.is_none());
    assert_eq!(held_by(&mut h, "q", &mid(1)).len(), 6);
    // Gone: its heartbeats are UNKNOWN_MEMBER_ID, and leaving twice too.
    assert_eq!(
        h.call(c, 1, beat("q", &mid(2), b.member_epoch)).error_code,
        E::UnknownMemberId.code()
    );
    assert_eq!(
        h.call(c, 1, beat("q", &mid(2), -1)).error_code,
        E::UnknownMemberId.code()
    );
}

#[test]
fn a_silent_member_is_removed_after_the_session_timeout() {
    let mut h = Harness::with_config(CoordinatorConfig {
        share_session_timeout_ms: 10_000,
        share_heartbeat_interval_ms: 1_000,
        ..config()
    });
    let c = h.connect();
    let a = h.call(c, 1, join("q", &mid(1), &["orders"]));
    h.call(c, 1, join("q", &mid(2), &["orders"]));
    let mut epoch = a.member_epoch;
    // Member 1 heartbeats every second; member 2 is silent.
    for _ in 0..12 {
        h.advance(1_000);
        let r = h.call(c, 1, beat("q", &mid(1), epoch));
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.heartbeat_interval_ms, 1_000);
        epoch = r.member_epoch;
    }
    let d = describe(&mut h, &["q"]);
    let ids: Vec<&str> = d.groups[0]
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert_eq!(ids, [mid(1).as_str()]);
    let expired = h
        .events
        .iter()
        .filter(|o| {
            matches!(
                o,
                drover_coordinator::Output::Metric {
                    counter: drover_coordinator::CoordinatorCounter::ShareMembersExpired,
                    ..
                }
            )
        })
        .count();
    assert_eq!(expired, 1);
    // Its removal was a new epoch; member 1 now has every partition.
    assert_eq!(epoch, 3);
    let snap = h.coord.snapshot("q").expect("a share group has a snapshot");
    assert_eq!(snap.group_type, "share");
    assert_eq!(snap.members.len(), 1);
    assert_eq!(snap.members[0].owned.len(), 6);
    assert_eq!(snap.members[0].session_timeout_ms, 10_000);
    // Nobody left: the group is empty, still listed.
    h.advance(20_000);
    assert_eq!(
        list(&mut h, &["share"]),
        [("q".into(), "Empty".into(), "share".into(), "share".into())]
    );
}

#[test]
fn group_size_and_group_count_are_bounded() {
    let mut h = Harness::with_config(CoordinatorConfig {
        share_max_group_size: 2,
        share_max_groups: 2,
        ..config()
    });
    let c = h.connect();
    assert_eq!(h.call(c, 1, join("q", &mid(1), &["orders"])).error_code, 0);
    assert_eq!(h.call(c, 1, join("q", &mid(2), &["orders"])).error_code, 0);
    let r = h.call(c, 1, join("q", &mid(3), &["orders"]));
    assert_eq!(r.error_code, E::GroupMaxSizeReached.code());
    // A member already in the group rejoins.
    assert_eq!(h.call(c, 1, join("q", &mid(2), &["orders"])).error_code, 0);
    assert_eq!(h.call(c, 1, join("r", &mid(1), &["orders"])).error_code, 0);
    let r = h.call(c, 1, join("s", &mid(1), &["orders"]));
    assert_eq!(r.error_code, E::GroupMaxSizeReached.code());
    assert!(list(&mut h, &["share"]).iter().all(|g| g.0 != "s"));
    // Deleting an empty one makes room.
    assert_eq!(h.call(c, 1, beat("r", &mid(1), -1)).error_code, 0);
    let mut del = DeleteGroupsRequest::default();
    del.groups_names = vec![s("r").into(), s("q").into()];
    let r = h.admin(2, del);
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    assert_eq!(r.results[1].error_code, E::NonEmptyGroup.code());
    assert_eq!(h.call(c, 1, join("s", &mid(1), &["orders"])).error_code, 0);
}

#[test]
fn a_group_id_belongs_to_one_type() {
    let mut h = Harness::new();
    let c = h.connect();
    // A KIP-848 group's id: a share heartbeat is GROUP_ID_NOT_FOUND.
    let mut cg = ConsumerGroupHeartbeatRequest::default();
    cg.group_id = s("k").into();
    cg.member_id = s("m1");
    cg.rebalance_timeout_ms = 5_000;
    cg.subscribed_topic_names = Some(vec![s("orders").into()]);
    cg.topic_partitions = Some(Vec::new());
    assert_eq!(h.call(c, 1, cg.clone()).error_code, 0);
    let r = h.call(c, 1, join("k", &mid(1), &["orders"]));
    assert_eq!(r.error_code, E::GroupIdNotFound.code());
    // A share group's id, even once empty: a KIP-848 heartbeat is GROUP_ID_NOT_FOUND,
    // a classic JoinGroup INCONSISTENT_GROUP_PROTOCOL.
    h.call(c, 1, join("q", &mid(1), &["orders"]));
    h.call(c, 1, beat("q", &mid(1), -1));
    cg.group_id = s("q").into();
    assert_eq!(h.call(c, 1, cg).error_code, E::GroupIdNotFound.code());
    let j = h.call(
        c,
        9,
        join_request("q", "", None, &["orders"], 10_000, 10_000),
    );
    assert_eq!(j.error_code, E::InconsistentGroupProtocol.code());
    assert_eq!(
        list(&mut h, &[])
            .iter()
            .find(|g| g.0 == "q")
            .map(|g| g.2.clone()),
        Some("share".into())
    );
    // ShareGroupDescribe of the KIP-848 group: not a share group.
    let d = describe(&mut h, &["k", "q", "unknown"]);
    let codes: Vec<i16> = d.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(
        codes,
        [E::GroupIdNotFound.code(), 0, E::GroupIdNotFound.code()]
    );
    assert_eq!(d.groups[1].group_state.as_str(), "Empty");
}

#[test]
fn the_offsets_apis_refuse_a_share_group() {
    let mut h = Harness::new();
    let c = h.connect();
    h.call(c, 1, join("q", &mid(1), &["orders"]));
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = s("q").into();
    commit.generation_id_or_member_epoch = -1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = s("orders").into();
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 5;
    t.partitions = vec![p];
    commit.topics = vec![t];
    let r = h.call(c, 8, commit);
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        E::GroupIdNotFound.code()
    );
    let mut fetch = OffsetFetchRequest::default();
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = s("q").into();
    g.topics = None;
    fetch.groups = vec![g];
    let r = h.call(c, 9, fetch);
    assert_eq!(r.groups[0].error_code, E::GroupIdNotFound.code());
    let mut del = OffsetDeleteRequest::default();
    del.group_id = s("q").into();
    let mut t = OffsetDeleteRequestTopic::default();
    t.name = s("payments").into();
    let mut p = OffsetDeleteRequestPartition::default();
    p.partition_index = 0;
    t.partitions = vec![p];
    del.topics = vec![t];
    let r = h.call(c, 0, del);
    assert_eq!(r.error_code, E::GroupIdNotFound.code());
    assert!(h.store.offsets.is_empty());
}

#[test]
fn list_groups_filters_share_groups_by_type() {
    let mut h = Harness::new();
    let c = h.connect();
    h.call(c, 1, join("q", &mid(1), &["orders"]));
    let mut cg = ConsumerGroupHeartbeatRequest::default();
    cg.group_id = s("k").into();
    cg.member_id = s("m1");
    cg.rebalance_timeout_ms = 5_000;
    cg.subscribed_topic_names = Some(vec![s("orders").into()]);
    cg.topic_partitions = Some(Vec::new());
    h.call(c, 1, cg);
    assert_eq!(
        list(&mut h, &["share"]),
        [("q".into(), "Stable".into(), "share".into(), "share".into())]
    );
    assert_eq!(list(&mut h, &["consumer"]).len(), 1);
    assert_eq!(list(&mut h, &[]).len(), 2);
}

#[test]
fn a_topic_growing_gives_members_its_new_partitions_at_a_new_epoch() {
    let mut h = Harness::new();
    let c = h.connect();
    let a = h.call(c, 1, join("q", &mid(1), &["audit"]));
    assert_eq!(partitions_of(&a).len(), 2);
    let topics = topics()
        .into_iter()
        .map(|(n, p, _)| (TopicName::new(n), if n == "audit" { 5 } else { p }))
        .collect();
    h.feed(Input::TopicsChanged { topics });
    let r = h.call(c, 1, beat("q", &mid(1), a.member_epoch));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(partitions_of(&r).len(), 5);
    // A subscription change is a new epoch too; an unknown topic gives nothing.
    let mut sub = beat("q", &mid(1), 2);
    sub.subscribed_topic_names = Some(vec![s("no-such-topic").into()]);
    let r = h.call(c, 1, sub);
    assert_eq!((r.error_code, r.member_epoch), (0, 3));
    assert_eq!(assignment(&r), Some(vec![]));
}

#[test]
fn hostile_heartbeats_are_refused_with_invalid_request() {
    let mut h = Harness::new();
    let c = h.connect();
    let invalid = E::InvalidRequest.code();
    // Member ids that are not client UUIDs.
    for id in [
        "",
        "   ",
        "member-1",
        &"x".repeat(10_000),
        "share-member-00000000!",
    ] {
        let r = h.call(c, 1, join("q", id, &["orders"]));
        assert_eq!(r.error_code, invalid, "{id:?}");
    }
    // A hex UUID is accepted.
    let hex = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    assert_eq!(h.call(c, 1, join("q", hex, &["orders"])).error_code, 0);
    // Epochs below −1.
    for epoch in [-2, -5, i32::MIN] {
        let r = h.call(c, 1, beat("q", hex, epoch));
        assert_eq!(r.error_code, invalid, "{epoch}");
    }
    // A join without topics, with an empty list, with a blank rack.
    let mut r = join("q", &mid(1), &[]);
    assert_eq!(h.call(c, 1, r.clone()).error_code, invalid);
    r.subscribed_topic_names = None;
    assert_eq!(h.call(c, 1, r).error_code, invalid);
    let mut r = join("q", &mid(1), &["orders"]);
    r.rack_id = Some(s(" "));
    assert_eq!(h.call(c, 1, r).error_code, invalid);
    let mut r = join("q", &mid(1), &["orders"]);
    r.rack_id = Some(s("r".repeat(256)));
    assert_eq!(h.call(c, 1, r).error_code, invalid);
    // A huge subscription (over `max_subscription_topics`), and an overlong name.
    let names: Vec<String> = (0..10_001).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let r = h.call(c, 1, join("q", &mid(1), &names));
    assert_eq!(r.error_code, invalid);
    let long = "t".repeat(250);
    let r = h.call(c, 1, join("q", &mid(1), &[long.as_str()]));
    assert_eq!(r.error_code, invalid);
    // An empty group id.
    let r = h.call(c, 1, join("", &mid(1), &["orders"]));
    assert_eq!(r.error_code, invalid);
    // None of it made a member or a group beyond the one valid join.
    let d = describe(&mut h, &["q"]);
    assert_eq!(d.groups[0].members.len(), 1);
    assert_eq!(list(&mut h, &["share"]).len(), 1);
    assert!(h.is_open(c));
}

/// Cluster mode: a share group dropped with its slot takes its members' deadlines with
/// it, frees its place under `share_max_groups`, and its members are told
/// NOT_COORDINATOR; a new owner of the slot builds the group again from their joins.
#[test]
fn a_share_group_dropped_with_its_slot_leaves_no_deadline() {
    const SLOTS: u32 = 4;
    let mut h = Harness::with_config(CoordinatorConfig {
        slot_count: Some(SLOTS),
        share_max_groups: 1,
        ..config()
    });
    h.feed(Input::SlotGained {
        slot: 1,
        stopped_ms: 0,
    });
    let group = (0..)
        .map(|i| format!("sg{i}"))
        .find(|g| drover_protocol::coordinator_slot(g, SLOTS) == 1)
        .unwrap();
    let c = h.connect();
    let r = h.call(c, 1, join(&group, &mid(1), &["orders"]));
    assert_eq!(r.error_code, 0);
    assert_eq!(h.coord.poll_timeout(), Some(h.now + 45_000));
    h.feed(Input::SlotLost { slot: 1 });
    assert_eq!(h.coord.poll_timeout(), None);
    let r = h.call(c, 1, beat(&group, &mid(1), 1));
    assert_eq!(r.error_code, E::NotCoordinator.code());
    h.feed(Input::SlotGained {
        slot: 1,
        stopped_ms: h.now,
    });
    // The slot back (as at a new owner after a fail-over): the group is unknown here,
    // so the member's heartbeat is UNKNOWN_MEMBER_ID, never GROUP_ID_NOT_FOUND (fatal
    // to librdkafka's share consumer), and its epoch-0 rejoin recreates the group.
    let r = h.call(c, 1, beat(&group, &mid(1), 1));
    assert_eq!(r.error_code, E::UnknownMemberId.code());
    let r = h.call(c, 1, join(&group, &mid(1), &["orders"]));
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert!(r.assignment.is_some());
    let d = describe(&mut h, &[&group]);
    assert_eq!(d.groups[0].members.len(), 1);
}

/// One step of the property test below.
#[derive(Debug, Clone)]
enum Step {
    /// Member `i` joins (or rejoins) with these topics (indexes into `TOPICS`).
    Join(usize, Vec<usize>),
    /// Member `i` heartbeats at the epoch it was last told.
    Beat(usize),
    /// Member `i` changes its subscription.
    Subscribe(usize, Vec<usize>),
    /// Member `i` leaves.
    Leave(usize),
    /// Time passes (silent members expire past 10 s).
    Advance(u64),
}

const TOPICS: [&str; 4] = ["orders", "payments", "audit", "missing"];

fn topic_names(ix: &[usize]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ix.iter().map(|i| TOPICS[*i]).collect();
    v.sort();
    v.dedup();
    v
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let topics = proptest::collection::vec(0usize..4, 1..4);
    prop_oneof![
        (0usize..6, topics.clone()).prop_map(|(i, t)| Step::Join(i, t)),
        (0usize..6).prop_map(Step::Beat),
        (0usize..6, topics).prop_map(|(i, t)| Step::Subscribe(i, t)),
        (0usize..6).prop_map(Step::Leave),
        (1u64..6_000).prop_map(Step::Advance),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Whatever members do, once every member still in the group has heartbeated at the
    /// group's epoch: every member is at the assignment epoch (equal to the group
    /// epoch), every partition of a topic some member subscribes to is held by at least
    /// one member, and only a topic's subscribers hold its partitions. Epochs never go
    /// back. The same with the group's assignor `simple`, a share assignor plugin
    /// (`fan-out`) called inline or off the coordinator thread, or one whose output
    /// breaks the share contract (`share-broken`, replaced by `simple`).
    #[test]
    fn after_every_member_heartbeats_the_subscribed_partitions_are_covered(
        steps in proptest::collection::vec(step(), 1..40),
        assignor in proptest::sample::select(vec!["simple", "fan-out", "share-broken"]),
        threaded in proptest::bool::ANY,
    ) {
        let assignors = common::TestAssignors::default();
        let assignors = if threaded { assignors.threaded() } else { assignors };
        let mut h = Harness::with_assignors(CoordinatorConfig {
            share_session_timeout_ms: 10_000,
            share_heartbeat_interval_ms: 1_000,
            share_assignor: assignor.into(),
            ..config()
        }, assignors);
        let c = h.connect();
        let mut told: BTreeMap<usize, i32> = BTreeMap::new();
        let mut last_epoch = 0;
        for st in steps {
            match st {
                Step::Join(i, t) => {
                    let r = h.call(c, 1, join("p", &mid(i), &topic_names(&t)));
                    proptest::prop_assert_eq!(r.error_code, 0);
                    told.insert(i, r.member_epoch);
                }
                Step::Beat(i) => {
                    if let Some(&e) = told.get(&i) {
                        let r = h.call(c, 1, beat("p", &mid(i), e));
                        if r.error_code == 0 {
                            told.insert(i, r.member_epoch);
                        } else {
                            // Expired meanwhile: unknown now.
                            proptest::prop_assert_eq!(r.error_code, E::UnknownMemberId.code());
                            told.remove(&i);
                        }
                    }
                }
                Step::Subscribe(i, t) => {
                    if let Some(&e) = told.get(&i) {
                        let mut r = beat("p", &mid(i), e);
                        r.subscribed_topic_names =
                            Some(topic_names(&t).into_iter().map(|x| s(x).into()).collect());
                        let r = h.call(c, 1, r);
                        if r.error_code == 0 {
                            told.insert(i, r.member_epoch);
                        } else {
                            told.remove(&i);
                        }
                    }
                }
                Step::Leave(i) => {
                    if told.remove(&i).is_some() {
                        let r = h.call(c, 1, beat("p", &mid(i), -1));
                        proptest::prop_assert!(
                            r.error_code == 0 || r.error_code == E::UnknownMemberId.code()
                        );
                    }
                }
                Step::Advance(ms) => h.advance(ms),
            }
            let d = describe(&mut h, &["p"]);
            if d.groups[0].error_code == 0 {
                let g = &d.groups[0];
                proptest::prop_assert_eq!(g.group_epoch, g.assignment_epoch);
                proptest::prop_assert!(g.group_epoch >= last_epoch);
                last_epoch = g.group_epoch;
            }
        }
        // Settle: every member still there heartbeats once at the current epoch.
        for (i, e) in told.clone() {
            let r = h.call(c, 1, beat("p", &mid(i), e));
            if r.error_code != 0 {
                told.remove(&i);
            }
        }
        let d = describe(&mut h, &["p"]);
        let g = &d.groups[0];
        if g.error_code != 0 {
            return Ok(());
        }
        let counts: BTreeMap<&str, i32> =
            topics().into_iter().map(|(n, p, _)| (n, p as i32)).collect();
        let mut held: BTreeMap<(String, i32), usize> = BTreeMap::new();
        for m in &g.members {
            proptest::prop_assert_eq!(m.member_epoch, g.assignment_epoch);
            let subscribed: BTreeSet<&str> =
                m.subscribed_topic_names.iter().map(|t| t.as_str()).collect();
            for t in &m.assignment.topic_partitions {
                proptest::prop_assert!(subscribed.contains(t.topic_name.as_str()));
                for p in &t.partitions {
                    *held.entry((t.topic_name.to_string(), *p)).or_default() += 1;
                }
            }
        }
        let subscribed: BTreeSet<String> = g
            .members
            .iter()
            .flat_map(|m| m.subscribed_topic_names.iter().map(|t| t.to_string()))
            .collect();
        for t in subscribed {
            for p in 0..counts.get(t.as_str()).copied().unwrap_or(0) {
                proptest::prop_assert!(held.contains_key(&(t.clone(), p)), "{}-{} unheld", t, p);
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Share assignors (assignor ABI 3.3): the selected plugin computes the target, and
// `simple` runs when it cannot.
// ---------------------------------------------------------------------------------

/// How many `counter` increments the coordinator reported so far.
fn counted(h: &Harness, counter: drover_coordinator::CoordinatorCounter) -> u64 {
    h.events
        .iter()
        .map(|o| match o {
            drover_coordinator::Output::Metric { counter: c, value } if *c == counter => *value,
            _ => 0,
        })
        .sum()
}

/// A harness whose share groups select `default` (and `per_group`'s entries).
fn with_share_assignor(
    default: &str,
    per_group: &[(&str, &str)],
    assignors: common::TestAssignors,
) -> Harness {
    let config = CoordinatorConfig {
        share_assignor: default.into(),
        share_group_assignors: per_group
            .iter()
            .map(|(g, a)| ((*g).to_owned(), (*a).to_owned()))
            .collect(),
        ..config()
    };
    Harness::with_assignors(config, assignors)
}

/// Each member's partitions after every member heartbeated once more, from
/// ShareGroupDescribe.
fn settled(h: &mut Harness, group: &str, members: usize) -> Vec<BTreeSet<(Uuid, i32)>> {
    let c = h.connect();
    let d = describe(h, &[group]);
    (0..members)
        .map(|i| {
            let epoch = d.groups[0]
                .members
                .iter()
                .find(|m| m.member_id.as_str() == mid(i))
                .expect("a member")
                .member_epoch;
            let r = h.call(c, 1, beat(group, &mid(i), epoch));
            assert_eq!(r.error_code, 0, "{r:?}");
            held_by(h, group, &mid(i))
        })
        .collect()
}

#[test]
fn a_share_group_runs_the_share_assignor_it_selects_with_the_partition_data() {
    let assignors = common::TestAssignors::default();
    let mut h = with_share_assignor("fan-out", &[], assignors.clone());
    h.feed(Input::PartitionStats(
        drover_coordinator::PartitionStats::new(
            [drover_abi::assignor::BrokerContext {
                broker_id: 4,
                rack: drover_abi::std_types::RSome("rack-b".into()),
            }],
            [drover_abi::assignor::TopicContext {
                topic: "audit".into(),
                partitions: vec![{
                    let mut p = drover_abi::assignor::PartitionContext::unknown(1);
                    p.leader = drover_abi::std_types::RSome(4);
                    p.log_end_offset = drover_abi::std_types::RSome(90);
                    p.produce_records_per_sec = drover_abi::std_types::RSome(3.0);
                    p
                }]
                .into(),
            }],
        ),
    ));
    let c = h.connect();
    for i in 0..3 {
        assert_eq!(h.call(c, 1, join("q", &mid(i), &["audit"])).error_code, 0);
    }
    // `fan-out` gives every member both partitions, where `simple` would split them.
    let both: BTreeSet<(Uuid, i32)> = [(audit(), 0), (audit(), 1)].into();
    assert_eq!(settled(&mut h, "q", 3), vec![both.clone(); 3]);
    let d = describe(&mut h, &["q"]);
    assert_eq!(d.groups[0].assignor_name.as_str(), "fan-out");
    // Its context carried what the host knows of the partitions (no committed
    // offsets: a share group's progress is share-partition state).
    let seen = assignors
        .contexts
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("a call");
    let p1 = seen.partition("audit", 1).expect("audit-1 in the context");
    assert_eq!(p1.leader.into_option(), Some(4));
    assert_eq!(p1.log_end_offset.into_option(), Some(90));
    assert_eq!(p1.committed_offset.into_option(), None);
    assert_eq!(
        seen.brokers[0]
            .rack
            .as_ref()
            .map(|r| r.as_str())
            .into_option(),
        Some("rack-b")
    );
    assert_eq!(
        counted(
            &h,
            drover_coordinator::CoordinatorCounter::AssignorFallbacks
        ),
        0
    );
}

#[test]
fn a_share_assignor_call_runs_off_the_coordinator_thread_and_lands_at_a_new_epoch() {
    let mut h = with_share_assignor("fan-out", &[], common::TestAssignors::default().threaded());
    h.hold_assignors = true;
    let c = h.connect();
    let first = h.call(c, 1, join("q", &mid(0), &["audit"]));
    // While the call runs, the target in force (none yet) serves at the new epoch and
    // the member is told to come back soon.
    assert_eq!(first.error_code, 0);
    assert_eq!(first.member_epoch, 1);
    assert_eq!(partitions_of(&first), BTreeSet::new());
    assert_eq!(first.heartbeat_interval_ms, 500);
    h.release_assignors();
    let next = h.call(c, 1, beat("q", &mid(0), 1));
    assert_eq!(next.error_code, 0, "{next:?}");
    assert_eq!(next.member_epoch, 2, "the result is a new epoch");
    assert_eq!(partitions_of(&next), [(audit(), 0), (audit(), 1)].into());
    assert_eq!(next.heartbeat_interval_ms, 5_000);
    // A change while a call runs: the stale result is dropped for a run over the
    // group as it is, whose result every member gets.
    h.call(c, 1, join("q", &mid(1), &["audit"]));
    h.call(c, 1, join("q", &mid(2), &["audit"]));
    h.release_assignors();
    h.release_assignors();
    let both: BTreeSet<(Uuid, i32)> = [(audit(), 0), (audit(), 1)].into();
    assert_eq!(settled(&mut h, "q", 3), vec![both; 3]);
}

#[test]
fn an_assignor_without_share_support_is_never_offered_a_share_group() {
    // `sticky` is loaded but serves no share groups (as an assignor built before
    // assignor ABI 3.3): `simple` runs, counted as a fallback.
    let assignors = common::TestAssignors::default();
    let mut h = with_share_assignor("sticky", &[], assignors.clone());
    let c = h.connect();
    for i in 0..4 {
        assert_eq!(h.call(c, 1, join("q", &mid(i), &["audit"])).error_code, 0);
    }
    assert_eq!(assignors.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(
        describe(&mut h, &["q"]).groups[0].assignor_name.as_str(),
        "simple"
    );
    assert!(settled(&mut h, "q", 4).iter().all(|p| p.len() == 1));
    assert_eq!(
        counted(
            &h,
            drover_coordinator::CoordinatorCounter::AssignorFallbacks
        ),
        4
    );
}

#[test]
fn a_failing_or_contract_breaking_share_assignor_gives_way_to_simple() {
    for broken in [true, false] {
        let assignors = common::TestAssignors::default();
        assignors
            .broken
            .store(broken, std::sync::atomic::Ordering::SeqCst);
        let mut h = with_share_assignor("share-broken", &[], assignors.clone());
        let c = h.connect();
        for i in 0..2 {
            assert_eq!(h.call(c, 1, join("q", &mid(i), &["audit"])).error_code, 0);
        }
        // Called for each epoch, each time replaced by `simple`'s target.
        assert_eq!(assignors.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(
            describe(&mut h, &["q"]).groups[0].assignor_name.as_str(),
            "simple"
        );
        let held = settled(&mut h, "q", 2);
        assert_eq!(
            held.iter().map(BTreeSet::len).sum::<usize>(),
            2,
            "broken={broken}"
        );
        use drover_coordinator::CoordinatorCounter::{AssignorFailures, AssignorFallbacks};
        assert_eq!(counted(&h, AssignorFailures), 2);
        assert_eq!(counted(&h, AssignorFallbacks), 2);
    }
}

#[test]
fn each_share_group_selects_its_own_assignor() {
    let mut h = with_share_assignor(
        "simple",
        &[("fanned", "fan-out"), ("missing", "not-loaded")],
        common::TestAssignors::default(),
    );
    let c = h.connect();
    for g in ["plain", "fanned", "missing"] {
        for i in 0..2 {
            assert_eq!(h.call(c, 1, join(g, &mid(i), &["audit"])).error_code, 0);
        }
    }
    let d = describe(&mut h, &["plain", "fanned", "missing"]);
    let names: Vec<&str> = d.groups.iter().map(|g| g.assignor_name.as_str()).collect();
    assert_eq!(names, ["simple", "fan-out", "simple"]);
    assert!(settled(&mut h, "fanned", 2).iter().all(|p| p.len() == 2));
    assert!(settled(&mut h, "plain", 2).iter().all(|p| p.len() == 1));
}
