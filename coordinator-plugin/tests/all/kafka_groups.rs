//! Kafka's group APIs through the wire: the classic protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup), offsets (OffsetCommit, OffsetFetch, OffsetDelete), group
//! administration (DescribeGroups, ListGroups, DeleteGroups) and KIP-848
//! (ConsumerGroupHeartbeat, ConsumerGroupDescribe), spoken by fake clients that encode
//! with the `kafka-protocol` crate, against one coordinator on virtual time with an
//! in-memory offset store (`kafka/mod.rs`). Ends with a property test of the classic
//! state machine.

use crate::common;
use crate::kafka;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use drover_coordinator::kafka_wire::{served_versions, KAFKA_GROUP_APIS};
use drover_coordinator::{ConnId, CoordinatorConfig, FetchScope, Input, Output, TopicName};
use kafka::*;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopic;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatResponse,
    JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetFetchRequest, SyncGroupResponse,
};
use kafka_protocol::ResponseError as E;
use uuid::Uuid;

const G: &str = "g";
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 5_000;
/// `config().initial_rebalance_delay_ms`.
const INITIAL_DELAY: u64 = 3_000;
/// `config().initial_rebalance_quiet_ms` (the default).
const INITIAL_QUIET: u64 = 300;

// ---------------------------------------------------------------------------- a classic member

/// A classic consumer as the tests drive it.
#[derive(Debug, Clone)]
struct Member {
    conn: ConnId,
    group: String,
    id: String,
    instance: Option<String>,
    topics: Vec<&'static str>,
    generation: i32,
    session: i32,
    rebalance: i32,
}

impl Member {
    fn new(h: &mut Harness, group: &str, topics: &[&'static str]) -> Member {
        Member {
            conn: h.connect(),
            group: group.into(),
            id: String::new(),
            instance: None,
            topics: topics.to_vec(),
            generation: -1,
            session: SESSION,
            rebalance: REBALANCE,
        }
    }

    fn new_static(h: &mut Harness, group: &str, instance: &str, topics: &[&'static str]) -> Member {
        let mut m = Member::new(h, group, topics);
        m.instance = Some(instance.into());
        m
    }

    fn join_request(&self) -> kafka_protocol::messages::JoinGroupRequest {
        join_request(
            &self.group,
            &self.id,
            self.instance.as_deref(),
            &self.topics,
            self.session,
            self.rebalance,
        )
    }

    /// Sends JoinGroup v9 with the member's current id.
    fn join(&self, h: &mut Harness) -> Call<JoinGroupResponse> {
        h.send(self.conn, 9, self.join_request())
    }

    /// A dynamic member's first join (KIP-394): MEMBER_ID_REQUIRED with an id, then the
    /// join with it, whose answer is returned.
    fn first_join(&mut self, h: &mut Harness) -> Call<JoinGroupResponse> {
        assert!(self.id.is_empty() && self.instance.is_none());
        let r = h.call(self.conn, 9, self.join_request());
        assert_eq!(r.error_code, E::MemberIdRequired.code(), "{r:?}");
        assert_eq!(r.generation_id, -1);
        assert!(!r.member_id.is_empty());
        self.id = r.member_id.to_string();
        self.join(h)
    }

    /// Takes a successful join answer and follows it.
    fn joined(&mut self, h: &mut Harness, call: &Call<JoinGroupResponse>) -> JoinGroupResponse {
        let r = h.take(call);
        assert_eq!(r.error_code, 0, "join of {} failed: {r:?}", self.id);
        self.id = r.member_id.to_string();
        self.generation = r.generation_id;
        r
    }

    fn sync(&self, h: &mut Harness, assignments: Vec<(String, Bytes)>) -> Call<SyncGroupResponse> {
        h.send(
            self.conn,
            5,
            sync_request(
                &self.group,
                &self.id,
                self.instance.as_deref(),
                self.generation,
                assignments,
            ),
        )
    }

    fn heartbeat(&self, h: &mut Harness) -> i16 {
        let r: HeartbeatResponse = h.call(
            self.conn,
            4,
            heartbeat_request(
                &self.group,
                &self.id,
                self.instance.as_deref(),
                self.generation,
            ),
        );
        r.error_code
    }

    /// OffsetCommit v8 at the member's generation; the per-partition error codes.
    fn commit(&self, h: &mut Harness, offsets: &[(&str, i32, i64)]) -> Vec<i16> {
        let mut request = commit_request(&self.group, &self.id, self.generation, offsets);
        request.group_instance_id = self.instance.as_deref().map(s);
        let call = h.send(self.conn, 8, request);
        codes(&h.take(&call))
    }
}

/// The leader's plan: the partitions of the subscribed topics, round robin over the
/// members in id order; the user data names the generation and the member.
fn plan(members: &[JoinGroupResponseMember], generation: i32) -> Vec<(String, Bytes)> {
    let mut ids: Vec<(String, Vec<String>)> = members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                decode_subscription(m.metadata.clone()),
            )
        })
        .collect();
    ids.sort();
    let mut out: BTreeMap<String, Vec<(&str, i32)>> =
        ids.iter().map(|(id, _)| (id.clone(), Vec::new())).collect();
    let mut turn = 0;
    for (topic, partitions, _) in topics() {
        for p in 0..partitions as i32 {
            let subscribers: Vec<&String> = ids
                .iter()
                .filter(|(_, t)| t.iter().any(|x| x == topic))
                .map(|(id, _)| id)
                .collect();
            if subscribers.is_empty() {
                continue;
            }
            let m = subscribers[turn % subscribers.len()];
            turn += 1;
            out.get_mut(m).unwrap().push((topic, p));
        }
    }
    out.into_iter()
        .map(|(id, parts)| {
            let bytes = assignment(&parts, &format!("g{generation}:{id}"));
            (id, bytes)
        })
        .collect()
}

fn commit_request(
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    let mut r = OffsetCommitRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.generation_id_or_member_epoch = generation;
    r.retention_time_ms = -1;
    for (t, p, o) in offsets {
        let mut part = OffsetCommitRequestPartition::default();
        part.partition_index = *p;
        part.committed_offset = *o;
        part.committed_leader_epoch = -1;
        part.committed_metadata = Some(s(format!("m{o}")));
        match r.topics.last_mut() {
            Some(x) if x.name.as_str() == *t => x.partitions.push(part),
            _ => {
                let mut topic = OffsetCommitRequestTopic::default();
                topic.name = s(*t).into();
                topic.partitions.push(part);
                r.topics.push(topic);
            }
        }
    }
    r
}

/// Per-partition error codes of an OffsetCommit answer, in request order.
fn codes(r: &OffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn describe(h: &mut Harness, group: &str) -> DescribedGroup {
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![s(group).into()];
    let mut answer = h.admin(5, r);
    assert_eq!(answer.groups.len(), 1);
    answer.groups.pop().unwrap()
}

/// ListGroups v5: (group, state, type, protocol type).
fn list(h: &mut Harness) -> Vec<(String, String, String, String)> {
    let r = h.admin(5, ListGroupsRequest::default());
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

/// Three dynamic members (orders; orders+payments; payments) joined during the initial
/// delay, 100 ms apart: generation 1, CompletingRebalance, once no JoinGroup came for
/// the quiet time. Returns them (in member id order, leader first) and the leader's
/// join answer.
fn three_joined(h: &mut Harness) -> (Vec<Member>, JoinGroupResponse) {
    let mut a = Member::new(h, G, &["orders"]);
    let mut b = Member::new(h, G, &["orders", "payments"]);
    let mut c = Member::new(h, G, &["payments"]);
    let ja = a.first_join(h);
    h.advance(100);
    let jb = b.first_join(h);
    h.advance(100);
    let jc = c.first_join(h);
    h.advance(INITIAL_QUIET - 1);
    assert!(h.waiting(&ja) && h.waiting(&jb) && h.waiting(&jc));
    h.advance(1);
    let ra = a.joined(h, &ja);
    let rb = b.joined(h, &jb);
    let rc = c.joined(h, &jc);
    assert!(a.id < b.id && b.id < c.id, "ids in join order");
    let leader = [&ra, &rb, &rc]
        .into_iter()
        .find(|r| r.leader == r.member_id)
        .expect("a leader")
        .clone();
    (vec![a, b, c], leader)
}

/// [`three_joined`], then everyone syncs: Stable at generation 1.
fn three_stable(h: &mut Harness) -> Vec<Member> {
    let (members, leader) = three_joined(h);
    let planned = plan(&leader.members, 1);
    let calls: Vec<_> = members
        .iter()
        .map(|m| {
            let given = if m.id == leader.member_id.as_str() {
                planned.clone()
            } else {
                Vec::new()
            };
            m.sync(h, given)
        })
        .collect();
    for c in &calls {
        assert_eq!(h.take(c).error_code, 0);
    }
    assert_eq!(describe(h, G).group_state.as_str(), "Stable");
    members
}

/// Everyone in `members` joins again (all answered at once when the last arrives);
/// returns the answers.
fn rejoin_all(h: &mut Harness, members: &mut [Member]) -> Vec<JoinGroupResponse> {
    let calls: Vec<_> = members.iter().map(|m| m.join(h)).collect();
    members
        .iter_mut()
        .zip(&calls)
        .map(|(m, c)| m.joined(h, c))
        .collect()
}

/// Syncs every member (leader with its plan) and checks each got its planned share.
fn sync_all(h: &mut Harness, members: &[Member], answers: &[JoinGroupResponse]) {
    let leader = answers
        .iter()
        .find(|r| r.leader == r.member_id)
        .expect("a leader");
    let planned = plan(&leader.members, leader.generation_id);
    let calls: Vec<_> = members
        .iter()
        .map(|m| {
            let given = if m.id == leader.member_id.as_str() {
                planned.clone()
            } else {
                Vec::new()
            };
            m.sync(h, given)
        })
        .collect();
    let planned: BTreeMap<String, Bytes> = planned.into_iter().collect();
    for (m, c) in members.iter().zip(&calls) {
        let r = h.take(c);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.assignment, planned[&m.id]);
    }
}

// ---------------------------------------------------------------------------- classic: joining

/// Kafka's extend-on-join rule stays: while new members keep joining (here one every
/// 250 ms, never quiet for `initial_rebalance_quiet_ms`), the delay goes on past
/// `initial_rebalance_delay_ms`, and ends at its cap, the members' rebalance timeout,
/// with every member in one generation.
#[test]
fn the_initial_delay_extends_while_joiners_come_up_to_the_rebalance_timeout() {
    let mut h = Harness::new();
    let mut first = Member::new(&mut h, G, &["orders"]);
    let start = h.now;
    let mut members = vec![(first.first_join(&mut h), first)];
    loop {
        h.advance(250);
        if h.now >= start + REBALANCE as u64 {
            break;
        }
        assert!(
            members.iter().all(|(call, _)| h.waiting(call)),
            "still collecting joiners at +{} ms",
            h.now - start
        );
        let mut m = Member::new(&mut h, G, &["orders"]);
        members.push((m.first_join(&mut h), m));
    }
    assert!(h.now - start > INITIAL_DELAY);
    let generations: BTreeSet<i32> = members
        .iter_mut()
        .map(|(call, m)| m.joined(&mut h, call).generation_id)
        .collect();
    assert_eq!(generations, BTreeSet::from([1]));
    assert_eq!(describe(&mut h, G).members.len(), 20);
}

/// Joiners that stop coming end the delay after the quiet time, long before
/// `initial_rebalance_delay_ms`; one generation holds them all.
#[test]
fn the_initial_delay_ends_once_joiners_stop_coming() {
    let mut h = Harness::new();
    let mut members = Vec::new();
    for _ in 0..5 {
        let mut m = Member::new(&mut h, G, &["orders"]);
        members.push((m.first_join(&mut h), m));
        h.advance(50);
    }
    // The last JoinGroup came 50 ms ago.
    h.advance(INITIAL_QUIET - 50 - 1);
    assert!(members.iter().all(|(call, _)| h.waiting(call)));
    h.advance(1);
    let answers: Vec<JoinGroupResponse> = members
        .iter_mut()
        .map(|(call, m)| m.joined(&mut h, call))
        .collect();
    assert!(answers.iter().all(|r| r.generation_id == 1));
    assert_eq!(
        answers.iter().filter(|r| r.leader == r.member_id).count(),
        1
    );
    let leader = answers.iter().find(|r| r.leader == r.member_id).unwrap();
    assert_eq!(leader.members.len(), 5);
}

/// Members started at a steady pace, 450 ms or 1 s apart (more than the quiet time),
/// join one generation: a lone first member waits the delay (no spacing to go by yet),
/// and from the second on the delay ends only after twice the spacing without a
/// JoinGroup, the native debounce's stream rule. (Ending it after the quiet time gave
/// the first member every partition at generation 1 and an eager rebalance for the
/// next.)
#[test]
fn members_joining_at_a_steady_pace_share_the_first_generation() {
    for spacing in [450, 1_000] {
        let mut h = Harness::new();
        let start = h.now;
        let mut members = Vec::new();
        for i in 0..4 {
            if i > 0 {
                h.advance(spacing);
            }
            assert!(
                members.iter().all(|(call, _)| h.waiting(call)),
                "spacing {spacing}: answered before member {i} came"
            );
            let mut m = Member::new(&mut h, G, &["orders"]);
            members.push((m.first_join(&mut h), m));
        }
        h.advance(REBALANCE as u64);
        let generations: BTreeSet<i32> = members
            .iter_mut()
            .map(|(call, m)| m.joined(&mut h, call).generation_id)
            .collect();
        assert_eq!(generations, BTreeSet::from([1]), "spacing {spacing}");
        assert_eq!(describe(&mut h, G).members.len(), 4);
        assert!(h.now - start <= 3 * spacing + REBALANCE as u64);
    }
}

#[test]
fn kip394_member_id_required_then_join() {
    let mut h = Harness::new();
    let mut m = Member::new(&mut h, G, &["orders"]);
    let call = m.first_join(&mut h);
    // The join waits for the initial rebalance delay of the empty group: all of it
    // for a lone member (the quiet window needs the spacing of two new members).
    h.advance(INITIAL_DELAY - 1);
    assert!(h.waiting(&call));
    h.advance(1);
    let r = m.joined(&mut h, &call);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, r.member_id);
    assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.members[0].metadata, subscription(&["orders"]));
    assert!(
        m.id.starts_with("client-"),
        "id from the client id: {}",
        m.id
    );

    // Before KIP-394 (v3) a member without id gets one in its join answer directly.
    let c = h.connect();
    let mut req = join_request("old", "", None, &["orders"], SESSION, REBALANCE);
    req.group_instance_id = None;
    let call = h.send(c, 3, req);
    h.advance(INITIAL_DELAY);
    let r = h.take(&call);
    assert_eq!(r.error_code, 0);
    assert!(!r.member_id.is_empty());
    assert_eq!(r.generation_id, 1);

    // A KIP-394 id handed out and never used expires with its session timeout.
    let c = h.connect();
    let r = h.call(
        c,
        9,
        join_request("lazy", "", None, &["orders"], 1_000, 1_000),
    );
    assert_eq!(r.error_code, E::MemberIdRequired.code());
    let pending = r.member_id.to_string();
    h.advance(1_001);
    let call = h.send(
        c,
        9,
        join_request("lazy", &pending, None, &["orders"], 1_000, 1_000),
    );
    // Used after expiry: an unknown member.
    let r = h.take(&call);
    assert_eq!(r.error_code, E::UnknownMemberId.code(), "{r:?}");
}

#[test]
fn joins_out_of_bounds_are_refused_cleanly() {
    let mut h = Harness::with_config(CoordinatorConfig {
        max_join_metadata_bytes: 200,
        ..config()
    });
    let c = h.connect();
    // Protocol metadata over the limit: INVALID_REQUEST, the connection stays open.
    let mut r = join_request(G, "", None, &["orders"], SESSION, REBALANCE);
    r.protocols[0].metadata = Bytes::from(vec![0u8; 200]);
    let answer = h.call(c, 9, r);
    assert_eq!(answer.error_code, E::InvalidRequest.code());
    assert!(h.is_open(c));
    // A session timeout out of bounds.
    let r = join_request(G, "", None, &["orders"], 99, REBALANCE);
    assert_eq!(h.call(c, 9, r).error_code, E::InvalidSessionTimeout.code());
    let r = join_request(G, "", None, &["orders"], 60_001, REBALANCE);
    assert_eq!(h.call(c, 9, r).error_code, E::InvalidSessionTimeout.code());
    // No protocol, or an empty group id.
    let mut r = join_request(G, "", None, &["orders"], SESSION, REBALANCE);
    r.protocols.clear();
    assert_eq!(
        h.call(c, 9, r).error_code,
        E::InconsistentGroupProtocol.code()
    );
    let r = join_request("", "", None, &["orders"], SESSION, REBALANCE);
    assert_eq!(h.call(c, 9, r).error_code, E::InvalidGroupId.code());
    // A member of another protocol type than the group's.
    let mut a = Member::new(&mut h, G, &["orders"]);
    let _call = a.first_join(&mut h);
    let mut r = join_request(G, "", None, &["orders"], SESSION, REBALANCE);
    r.protocol_type = s("connect");
    assert_eq!(
        h.call(c, 9, r).error_code,
        E::InconsistentGroupProtocol.code()
    );
    assert!(list(&mut h).iter().all(|g| g.0 == G));
}

#[test]
fn every_join_group_version_decodes_and_completes_a_generation() {
    let mut h = Harness::new();
    for version in 0..=9i16 {
        let group = format!("v{version}");
        let conn = h.connect();
        let mut req = join_request(&group, "", None, &["orders"], SESSION, REBALANCE);
        if version < 1 {
            req.rebalance_timeout_ms = -1;
        }
        let call = h.send(conn, version, req.clone());
        let call = if version >= 4 {
            let r = h.take(&call);
            assert_eq!(r.error_code, E::MemberIdRequired.code(), "v{version}");
            req.member_id = r.member_id.clone();
            h.send(conn, version, req)
        } else {
            call
        };
        // Parked for the initial delay.
        assert!(h.waiting(&call), "v{version} answered at once");
        h.advance(INITIAL_DELAY);
        let r = h.take(&call);
        assert_eq!(r.error_code, 0, "v{version}: {r:?}");
        assert_eq!(r.generation_id, 1);
        let id = r.member_id.to_string();
        let sync_v = version.min(5);
        let planned = plan(&r.members, 1);
        let synced: SyncGroupResponse = h.call(
            conn,
            sync_v,
            sync_request(&group, &id, None, 1, planned.clone()),
        );
        assert_eq!(synced.error_code, 0, "v{version}");
        assert_eq!(synced.assignment, planned[0].1);
        let hb: HeartbeatResponse = h.call(
            conn,
            version.min(4),
            heartbeat_request(&group, &id, None, 1),
        );
        assert_eq!(hb.error_code, 0);
        let mut leave = LeaveGroupRequest::default();
        leave.group_id = s(&group).into();
        if version.min(5) >= 3 {
            let mut mi = MemberIdentity::default();
            mi.member_id = s(&id);
            leave.members.push(mi);
        } else {
            leave.member_id = s(&id);
        }
        let l = h.call(conn, version.min(5), leave);
        assert_eq!(l.error_code, 0);
        assert_eq!(describe(&mut h, &group).group_state.as_str(), "Empty");
    }
}

#[test]
fn three_members_joining_during_the_initial_delay_make_one_generation() {
    let mut h = Harness::new();
    let (members, leader) = three_joined(&mut h);
    // One generation; the first member (smallest id) leads and gets every member with
    // its metadata; the followers get no member list.
    assert_eq!(leader.member_id.as_str(), members[0].id);
    assert!(members.iter().all(|m| m.generation == 1));
    let listed: Vec<(String, Vec<String>)> = leader
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                decode_subscription(m.metadata.clone()),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (members[0].id.clone(), vec!["orders".to_string()]),
            (
                members[1].id.clone(),
                vec!["orders".to_string(), "payments".to_string()]
            ),
            (members[2].id.clone(), vec!["payments".to_string()]),
        ]
    );
    let d = describe(&mut h, G);
    assert_eq!(d.group_state.as_str(), "CompletingRebalance");
    assert_eq!(d.protocol_data.as_str(), "range");
    assert_eq!(d.members.len(), 3);
    // The host's peer address is the member's host.
    assert!(d
        .members
        .iter()
        .all(|m| m.client_host.starts_with("/10.0.0.")));
    assert_eq!(
        h.events
            .iter()
            .filter(|o| matches!(
                o,
                Output::Metric {
                    counter: drover_coordinator::CoordinatorCounter::ClassicGenerations,
                    ..
                }
            ))
            .count(),
        1
    );
}

#[test]
fn the_followers_join_answers_carry_no_members() {
    let mut h = Harness::new();
    let mut a = Member::new(&mut h, G, &["orders"]);
    let mut b = Member::new(&mut h, G, &["orders"]);
    let ja = a.first_join(&mut h);
    let jb = b.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    let ra = a.joined(&mut h, &ja);
    let rb = b.joined(&mut h, &jb);
    assert_eq!(ra.leader, ra.member_id);
    assert_eq!(rb.leader, ra.member_id);
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty());
    assert_eq!(ra.generation_id, rb.generation_id);
}

#[test]
fn sync_group_distributes_the_leaders_assignment() {
    let mut h = Harness::new();
    let (members, leader) = three_joined(&mut h);
    let planned = plan(&leader.members, 1);
    // The followers sync first and wait for the leader.
    let fb = members[1].sync(&mut h, Vec::new());
    let fc = members[2].sync(&mut h, Vec::new());
    h.advance(100);
    assert!(h.waiting(&fb) && h.waiting(&fc));
    let fa = members[0].sync(&mut h, planned.clone());
    for (m, call) in members.iter().zip([&fa, &fb, &fc]) {
        let r = h.take(call);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        let mine = planned.iter().find(|(id, _)| *id == m.id).unwrap();
        assert_eq!(r.assignment, mine.1);
        let (parts, user) = decode_assignment(r.assignment);
        assert_eq!(user, format!("g1:{}", m.id));
        // Each gets partitions of its own topics only.
        assert!(parts.iter().all(|(t, _)| m.topics.contains(&t.as_str())));
    }
    let d = describe(&mut h, G);
    assert_eq!(d.group_state.as_str(), "Stable");
    for dm in &d.members {
        let mine = planned
            .iter()
            .find(|(id, _)| id == dm.member_id.as_str())
            .unwrap();
        assert_eq!(dm.member_assignment, mine.1);
    }
    // A SyncGroup in Stable (a retry) gets the same assignment again.
    let again = members[1].sync(&mut h, Vec::new());
    assert_eq!(h.take(&again).assignment, planned[1].1);
    // Heartbeats are fine.
    assert!(members.iter().all(|m| m.heartbeat(&mut h) == 0));
}

#[test]
fn a_fourth_member_makes_the_others_rejoin_into_the_next_generation() {
    let mut h = Harness::new();
    let mut members = three_stable(&mut h);
    let mut d = Member::new(&mut h, G, &["orders", "payments"]);
    let jd = d.first_join(&mut h);
    assert_eq!(
        describe(&mut h, G).group_state.as_str(),
        "PreparingRebalance"
    );
    // The others learn it from their heartbeats.
    for m in &members {
        assert_eq!(m.heartbeat(&mut h), E::RebalanceInProgress.code());
    }
    // Two of three rejoin: still waiting (no initial delay for a non-empty group, but
    // every known member must rejoin).
    let j0 = members[0].join(&mut h);
    let j1 = members[1].join(&mut h);
    h.advance(1_000);
    assert!(h.waiting(&jd) && h.waiting(&j0) && h.waiting(&j1));
    // The last one completes the join phase at once, long before the rebalance timeout.
    let j2 = members[2].join(&mut h);
    let answers: Vec<JoinGroupResponse> = [&j0, &j1, &j2]
        .into_iter()
        .zip(members.iter_mut())
        .map(|(c, m)| m.joined(&mut h, c))
        .collect();
    let rd = d.joined(&mut h, &jd);
    assert!(answers.iter().all(|r| r.generation_id == 2));
    assert_eq!(rd.generation_id, 2);
    // The leader stays the leader and sees four members.
    assert_eq!(answers[0].leader.as_str(), members[0].id);
    assert_eq!(answers[0].members.len(), 4);
    members.push(d);
    let mut all = answers;
    all.push(rd);
    sync_all(&mut h, &members, &all);
    assert_eq!(describe(&mut h, G).group_state.as_str(), "Stable");
    // A heartbeat of the old generation is refused.
    let mut stale = members[1].clone();
    stale.generation = 1;
    assert_eq!(stale.heartbeat(&mut h), E::IllegalGeneration.code());
}

#[test]
fn a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() {
    let mut h = Harness::new();
    let mut a = Member::new(&mut h, G, &["orders"]);
    let mut b = Member::new(&mut h, G, &["orders"]);
    let mut c = Member::new(&mut h, G, &["orders"]);
    for m in [&mut a, &mut b, &mut c] {
        m.session = 1_000;
    }
    let calls: Vec<_> = [&mut a, &mut b, &mut c]
        .into_iter()
        .map(|m| m.first_join(&mut h))
        .collect();
    h.advance(INITIAL_QUIET);
    let mut members = vec![a, b, c];
    let answers: Vec<_> = members
        .iter_mut()
        .zip(&calls)
        .map(|(m, call)| m.joined(&mut h, call))
        .collect();
    sync_all(&mut h, &members, &answers);
    let synced_at = h.now;
    // a and b heartbeat every 400 ms; c is silent.
    let silent = members.pop().unwrap();
    let mut rebalance_seen_at = None;
    for _ in 0..10 {
        h.advance(400);
        let codes: Vec<i16> = members.iter().map(|m| m.heartbeat(&mut h)).collect();
        if codes.iter().all(|&c| c == E::RebalanceInProgress.code()) {
            rebalance_seen_at = Some(h.now);
            break;
        }
        assert_eq!(codes, [0, 0], "at {}", h.now);
    }
    let seen = rebalance_seen_at.expect("the group rebalanced");
    assert!(seen > synced_at + 1_000 && seen <= synced_at + 1_400);
    assert!(h.events.iter().any(|o| matches!(
        o,
        Output::Metric {
            counter: drover_coordinator::CoordinatorCounter::ClassicMembersExpired,
            ..
        }
    )));
    let answers = rejoin_all(&mut h, &mut members);
    assert!(answers.iter().all(|r| r.generation_id == 2));
    let leader = answers.iter().find(|r| r.leader == r.member_id).unwrap();
    assert_eq!(leader.members.len(), 2);
    assert!(leader
        .members
        .iter()
        .all(|m| m.member_id.as_str() != silent.id));
    assert_eq!(silent.heartbeat(&mut h), E::UnknownMemberId.code());
}

#[test]
fn a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed() {
    let mut h = Harness::new();
    let mut members = three_stable(&mut h);
    let mut d = Member::new(&mut h, G, &["orders"]);
    let started = h.now;
    let jd = d.first_join(&mut h);
    let j0 = members[0].join(&mut h);
    let j1 = members[1].join(&mut h);
    // members[2] keeps heartbeating but never rejoins.
    for _ in 0..4 {
        h.advance(1_000);
        assert_eq!(members[2].heartbeat(&mut h), E::RebalanceInProgress.code());
    }
    h.advance_to(started + REBALANCE as u64 - 1);
    assert!(h.waiting(&jd) && h.waiting(&j0) && h.waiting(&j1));
    h.advance_to(started + REBALANCE as u64);
    let r0 = members[0].joined(&mut h, &j0);
    let r1 = members[1].joined(&mut h, &j1);
    let rd = d.joined(&mut h, &jd);
    assert_eq!(
        (r0.generation_id, r1.generation_id, rd.generation_id),
        (2, 2, 2)
    );
    assert_eq!(r0.leader.as_str(), members[0].id);
    let ids: BTreeSet<String> = r0.members.iter().map(|m| m.member_id.to_string()).collect();
    assert_eq!(
        ids,
        [members[0].id.clone(), members[1].id.clone(), d.id.clone()]
            .into_iter()
            .collect()
    );
    let late = members.pop().unwrap();
    assert_eq!(late.heartbeat(&mut h), E::UnknownMemberId.code());
    // Its late join is that of an unknown member.
    let call = late.join(&mut h);
    let r = h.take(&call);
    assert_eq!(r.error_code, E::UnknownMemberId.code());
}

#[test]
fn members_that_did_not_sync_are_removed_after_the_rebalance_timeout() {
    let mut h = Harness::new();
    let (mut members, _) = three_joined(&mut h);
    let joined_at = h.now;
    // The followers sync; the leader never does.
    let fb = members[1].sync(&mut h, Vec::new());
    let fc = members[2].sync(&mut h, Vec::new());
    h.advance_to(joined_at + REBALANCE as u64 - 1);
    assert!(h.waiting(&fb) && h.waiting(&fc));
    h.advance_to(joined_at + REBALANCE as u64);
    // The followers are told to rejoin; the leader is gone.
    assert_eq!(h.take(&fb).error_code, E::RebalanceInProgress.code());
    assert_eq!(h.take(&fc).error_code, E::RebalanceInProgress.code());
    let d = describe(&mut h, G);
    assert_eq!(d.group_state.as_str(), "PreparingRebalance");
    assert_eq!(d.members.len(), 2);
    let leader = members.remove(0);
    assert_eq!(leader.heartbeat(&mut h), E::UnknownMemberId.code());
    let answers = rejoin_all(&mut h, &mut members);
    assert!(answers.iter().all(|r| r.generation_id == 2));
    // A new leader.
    assert_eq!(answers[0].leader.as_str(), members[0].id);
    sync_all(&mut h, &members, &answers);
    assert_eq!(describe(&mut h, G).group_state.as_str(), "Stable");
}

#[test]
fn a_group_whose_leader_alone_never_syncs_becomes_empty() {
    let mut h = Harness::new();
    let mut a = Member::new(&mut h, G, &["orders"]);
    let call = a.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    a.joined(&mut h, &call);
    h.advance(REBALANCE as u64);
    let d = describe(&mut h, G);
    assert_eq!(d.group_state.as_str(), "Empty");
    assert!(d.members.is_empty());
    assert_eq!(a.heartbeat(&mut h), E::UnknownMemberId.code());
}

// ---------------------------------------------------------------------------- static members

/// Three static members (instances ia, ib, ic) joined and synced.
fn three_static(h: &mut Harness) -> (Vec<Member>, Vec<(String, Bytes)>) {
    let mut members: Vec<Member> = ["ia", "ib", "ic"]
        .into_iter()
        .map(|i| Member::new_static(h, G, i, &["orders", "payments"]))
        .collect();
    // Static members join with their instance id at once (no KIP-394 round).
    let calls: Vec<_> = members.iter().map(|m| m.join(h)).collect();
    h.advance(INITIAL_DELAY);
    let answers: Vec<_> = members
        .iter_mut()
        .zip(&calls)
        .map(|(m, c)| m.joined(h, c))
        .collect();
    let leader = answers.iter().find(|r| r.leader == r.member_id).unwrap();
    // The leader sees the instance ids.
    let instances: BTreeSet<String> = leader
        .members
        .iter()
        .map(|m| m.group_instance_id.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(instances.len(), 3);
    let planned = plan(&leader.members, 1);
    sync_all(h, &members, &answers);
    (members, planned)
}

#[test]
fn a_restarted_static_member_gets_its_assignment_back_without_a_rebalance() {
    let mut h = Harness::new();
    let (members, planned) = three_static(&mut h);
    let old = members[1].clone();
    let old_assignment = planned
        .iter()
        .find(|(id, _)| *id == old.id)
        .unwrap()
        .1
        .clone();
    // The process restarts: new connection, no member id, same instance id.
    let mut new = Member::new_static(&mut h, G, "ib", &["orders", "payments"]);
    let r = h.call(new.conn, 9, new.join_request());
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_ne!(r.member_id.as_str(), old.id);
    assert_eq!(r.generation_id, 1, "no generation bump");
    assert_eq!(r.leader.as_str(), members[0].id);
    assert!(r.members.is_empty(), "a follower gets no member list");
    new.id = r.member_id.to_string();
    new.generation = r.generation_id;
    let call = new.sync(&mut h, Vec::new());
    let synced = h.take(&call);
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, old_assignment);
    // The group never left Stable; the others carry on.
    let d = describe(&mut h, G);
    assert_eq!(d.group_state.as_str(), "Stable");
    let by_instance: BTreeMap<String, (String, Bytes)> = d
        .members
        .iter()
        .map(|m| {
            (
                m.group_instance_id.as_ref().unwrap().to_string(),
                (m.member_id.to_string(), m.member_assignment.clone()),
            )
        })
        .collect();
    assert_eq!(by_instance["ib"], (new.id.clone(), old_assignment));
    assert_eq!(members[0].heartbeat(&mut h), 0);
    assert_eq!(members[2].heartbeat(&mut h), 0);
    assert_eq!(new.heartbeat(&mut h), 0);
    // The old incarnation is fenced.
    assert_eq!(old.heartbeat(&mut h), E::FencedInstanceId.code());
    let call = old.sync(&mut h, Vec::new());
    let r = h.take(&call);
    assert_eq!(r.error_code, E::FencedInstanceId.code());
    let codes = old.commit(&mut h, &[("orders", 0, 5)]);
    assert_eq!(codes, [E::FencedInstanceId.code()]);
    assert_eq!(
        h.events
            .iter()
            .filter(|o| matches!(
                o,
                Output::Metric {
                    counter: drover_coordinator::CoordinatorCounter::ClassicGenerations,
                    ..
                }
            ))
            .count(),
        1,
        "one generation only"
    );
}

#[test]
fn a_restarted_static_leader_is_told_to_skip_the_assignment() {
    let mut h = Harness::new();
    let (members, planned) = three_static(&mut h);
    let mut new = Member::new_static(&mut h, G, "ia", &["orders", "payments"]);
    let r = h.call(new.conn, 9, new.join_request());
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, r.member_id, "the new incarnation leads");
    assert!(r.skip_assignment);
    assert_eq!(r.members.len(), 3);
    new.id = r.member_id.to_string();
    new.generation = 1;
    let call = new.sync(&mut h, Vec::new());
    let synced = h.take(&call);
    assert_eq!(synced.assignment, planned[0].1);
    assert_eq!(members[0].heartbeat(&mut h), E::FencedInstanceId.code());
    assert_eq!(members[1].heartbeat(&mut h), 0);
}

#[test]
fn leave_group_v3_removes_a_batch_of_members() {
    let mut h = Harness::new();
    let mut a = Member::new(&mut h, G, &["orders"]);
    let b = Member::new_static(&mut h, G, "ib", &["orders"]);
    let mut c = Member::new(&mut h, G, &["orders"]);
    let calls = [a.first_join(&mut h), b.join(&mut h), c.first_join(&mut h)];
    h.advance(INITIAL_DELAY);
    let mut members = vec![a, b, c];
    let answers: Vec<_> = members
        .iter_mut()
        .zip(&calls)
        .map(|(m, call)| m.joined(&mut h, call))
        .collect();
    sync_all(&mut h, &members, &answers);

    let mut leave = LeaveGroupRequest::default();
    leave.group_id = s(G).into();
    let identity = |id: &str, instance: Option<&str>| {
        let mut mi = MemberIdentity::default();
        mi.member_id = s(id);
        mi.group_instance_id = instance.map(s);
        mi
    };
    leave.members = vec![
        identity(&members[0].id, None),
        // A static member may leave by instance id alone.
        identity("", Some("ib")),
        identity("nobody", None),
    ];
    let r = h.admin(3, leave);
    assert_eq!(r.error_code, 0);
    let per: Vec<(String, Option<String>, i16)> = r
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.group_instance_id.as_ref().map(|i| i.to_string()),
                m.error_code,
            )
        })
        .collect();
    assert_eq!(
        per,
        vec![
            (members[0].id.clone(), None, 0),
            (String::new(), Some("ib".into()), 0),
            ("nobody".into(), None, E::UnknownMemberId.code()),
        ]
    );
    // The group rebalances around the one left.
    assert_eq!(members[2].heartbeat(&mut h), E::RebalanceInProgress.code());
    let mut rest = vec![members.pop().unwrap()];
    let answers = rejoin_all(&mut h, &mut rest);
    assert_eq!(answers[0].generation_id, 2);
    assert_eq!(answers[0].leader.as_str(), rest[0].id);
    assert_eq!(answers[0].members.len(), 1);
    assert_eq!(members[0].heartbeat(&mut h), E::UnknownMemberId.code());

    // LeaveGroup of a group the coordinator does not know.
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = s("nope").into();
    leave.members = vec![identity("x", None)];
    assert_eq!(h.admin(3, leave).error_code, E::UnknownMemberId.code());
}

/// Kafka's ClassicGroup keeps its protocol type when its last member leaves: the empty
/// group is still described and listed as a `consumer` group (issue 17), and a member
/// of another protocol type may take it over, as any empty group.
#[test]
fn an_empty_group_keeps_its_protocol_type() {
    let mut h = Harness::new();
    let mut a = Member::new(&mut h, G, &["orders"]);
    let call = a.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    let answer = a.joined(&mut h, &call);
    sync_all(&mut h, std::slice::from_ref(&a), &[answer]);
    assert_eq!(describe(&mut h, G).group_state.as_str(), "Stable");

    let mut leave = LeaveGroupRequest::default();
    leave.group_id = s(G).into();
    leave.member_id = s(&a.id);
    assert_eq!(h.admin(1, leave).error_code, 0);
    let d = describe(&mut h, G);
    assert_eq!(
        (
            d.group_state.as_str(),
            d.protocol_type.as_str(),
            d.members.len()
        ),
        ("Empty", "consumer", 0)
    );
    assert!(list(&mut h).contains(&(
        G.into(),
        "Empty".into(),
        "classic".into(),
        "consumer".into()
    )));

    // An empty group accepts a member of any protocol type, and takes its type.
    let c = h.connect();
    let mut r = join_request(G, "", Some("w1"), &["orders"], SESSION, REBALANCE);
    r.protocol_type = s("connect");
    let call = h.send(c, 9, r);
    h.advance(INITIAL_DELAY);
    assert_eq!(h.take(&call).error_code, 0);
    assert_eq!(describe(&mut h, G).protocol_type.as_str(), "connect");
}

// ---------------------------------------------------------------------------- offsets

#[test]
fn offset_commit_checks_the_generation_and_the_member() {
    let mut h = Harness::new();
    let (mut members, leader) = three_joined(&mut h);
    // CompletingRebalance: commits wait for the assignment.
    assert_eq!(
        members[0].commit(&mut h, &[("orders", 0, 1)]),
        [E::RebalanceInProgress.code()]
    );
    assert_eq!(h.store.get(G, &tp("orders", 0)), None);
    // Sync, so the group is Stable at generation 1.
    let planned = plan(&leader.members, 1);
    let calls: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(i, m)| m.sync(&mut h, if i == 0 { planned.clone() } else { vec![] }))
        .collect();
    for c in &calls {
        assert_eq!(h.take(c).error_code, 0);
    }

    // A member of the current generation commits.
    assert_eq!(
        members[0].commit(&mut h, &[("orders", 0, 10), ("orders", 1, 11)]),
        [0, 0]
    );
    assert_eq!(h.store.get(G, &tp("orders", 0)), Some(10));
    assert_eq!(h.store.get(G, &tp("orders", 1)), Some(11));
    // An older generation.
    let mut stale = members[0].clone();
    stale.generation = 0;
    assert_eq!(
        stale.commit(&mut h, &[("orders", 0, 99)]),
        [E::IllegalGeneration.code()]
    );
    // An unknown member.
    let mut ghost = members[0].clone();
    ghost.id = "ghost".into();
    assert_eq!(
        ghost.commit(&mut h, &[("orders", 0, 99)]),
        [E::UnknownMemberId.code()]
    );
    // Generation −1 without a member id, while the group has members.
    let mut anonymous = members[0].clone();
    anonymous.id = String::new();
    anonymous.generation = -1;
    assert_eq!(
        anonymous.commit(&mut h, &[("orders", 0, 99)]),
        [E::UnknownMemberId.code()]
    );
    assert_eq!(h.store.get(G, &tp("orders", 0)), Some(10));
    // An unknown partition next to good ones; a negative offset is stored as any
    // other (Kafka checks only the metadata size and the member).
    let codes = members[0].commit(
        &mut h,
        &[
            ("orders", 2, 5),
            ("orders", 6, 5),
            ("nope", 0, 5),
            ("payments", 0, -3),
        ],
    );
    assert_eq!(
        codes,
        [
            0,
            E::UnknownTopicOrPartition.code(),
            E::UnknownTopicOrPartition.code(),
            0
        ]
    );
    assert_eq!(h.store.get(G, &tp("payments", 0)), Some(-3));

    // During PreparingRebalance the current generation may still commit.
    let mut d = Member::new(&mut h, G, &["orders"]);
    let jd = d.first_join(&mut h);
    assert_eq!(members[1].commit(&mut h, &[("orders", 3, 30)]), [0]);
    // Once the join phase is over (CompletingRebalance), not any more.
    let answers = rejoin_all(&mut h, &mut members);
    d.joined(&mut h, &jd);
    assert_eq!(answers[0].generation_id, 2);
    assert_eq!(
        members[1].commit(&mut h, &[("orders", 3, 31)]),
        [E::RebalanceInProgress.code()]
    );
    assert_eq!(h.store.get(G, &tp("orders", 3)), Some(30));
}

#[test]
fn a_standalone_commit_creates_an_empty_group() {
    let mut h = Harness::new();
    let conn = h.connect();
    let r = h.call(
        conn,
        8,
        commit_request("solo", "", -1, &[("orders", 0, 42)]),
    );
    assert_eq!(codes(&r), [0]);
    assert_eq!(h.store.get("solo", &tp("orders", 0)), Some(42));
    let listed = list(&mut h);
    assert!(
        listed.contains(&(
            "solo".into(),
            "Empty".into(),
            "classic".into(),
            String::new()
        )),
        "{listed:?}"
    );
    let d = describe(&mut h, "solo");
    assert_eq!(d.error_code, 0);
    assert_eq!(d.group_state.as_str(), "Empty");
    // A second standalone commit is accepted too (the group is empty).
    let r = h.call(
        conn,
        2,
        commit_request("solo", "", -1, &[("orders", 0, 43)]),
    );
    assert_eq!(codes(&r), [0]);
    assert_eq!(h.store.get("solo", &tp("orders", 0)), Some(43));
    // A generation ≥ 0 for a group the coordinator does not know: ILLEGAL_GENERATION
    // before v9, GROUP_ID_NOT_FOUND from v9.
    let r = h.call(
        conn,
        8,
        commit_request("ghost", "m", 3, &[("orders", 0, 1)]),
    );
    assert_eq!(codes(&r), [E::IllegalGeneration.code()]);
    let r = h.call(
        conn,
        9,
        commit_request("ghost", "m", 3, &[("orders", 0, 1)]),
    );
    assert_eq!(codes(&r), [E::GroupIdNotFound.code()]);
    assert!(!list(&mut h).iter().any(|g| g.0 == "ghost"));
    // ListGroups filters.
    let mut r = ListGroupsRequest::default();
    r.states_filter = vec![s("empty")];
    r.types_filter = vec![s("classic")];
    let answer = h.admin(5, r);
    assert_eq!(answer.groups.len(), 1);
    let mut r = ListGroupsRequest::default();
    r.states_filter = vec![s("Stable")];
    assert!(h.admin(5, r).groups.is_empty());
}

#[test]
fn offset_metadata_over_the_limit_is_refused() {
    let mut h = Harness::with_config(CoordinatorConfig {
        max_metadata_bytes: 16,
        ..config()
    });
    let conn = h.connect();
    let mut r = commit_request("solo", "", -1, &[("orders", 0, 1), ("orders", 1, 2)]);
    r.topics[0].partitions[0].committed_metadata = Some(s("x".repeat(17)));
    r.topics[0].partitions[1].committed_metadata = Some(s("y".repeat(16)));
    let answer = h.call(conn, 8, r);
    assert_eq!(codes(&answer), [E::OffsetMetadataTooLarge.code(), 0]);
    assert_eq!(h.store.get("solo", &tp("orders", 0)), None);
    assert_eq!(h.store.get("solo", &tp("orders", 1)), Some(2));
}

#[test]
fn a_store_failure_answers_coordinator_not_available() {
    let mut h = Harness::new();
    let conn = h.connect();
    h.store.fail_commits = 1;
    let r = h.call(
        conn,
        8,
        commit_request("solo", "", -1, &[("orders", 0, 1), ("nope", 0, 1)]),
    );
    // The refused partition keeps its own error.
    assert_eq!(
        codes(&r),
        [
            E::CoordinatorNotAvailable.code(),
            E::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(h.store.get("solo", &tp("orders", 0)), None);
    // Nothing was committed, so no group was made.
    assert!(!list(&mut h).iter().any(|g| g.0 == "solo"));
    // The retry goes through.
    let r = h.call(conn, 8, commit_request("solo", "", -1, &[("orders", 0, 1)]));
    assert_eq!(codes(&r), [0]);
    assert_eq!(h.store.get("solo", &tp("orders", 0)), Some(1));
    assert!(list(&mut h).contains(&(
        "solo".into(),
        "Empty".into(),
        "classic".into(),
        String::new()
    )));
}

#[test]
fn a_groups_commits_reach_the_store_one_batch_at_a_time_in_order() {
    let mut h = Harness::new();
    h.store.delay_ms = 50;
    let c1 = h.connect();
    let c2 = h.connect();
    let first = h.send(c1, 8, commit_request("solo", "", -1, &[("orders", 0, 1)]));
    let second = h.send(c2, 8, commit_request("solo", "", -1, &[("orders", 0, 2)]));
    let third = h.send(c2, 8, commit_request("solo", "", -1, &[("orders", 1, 3)]));
    // A commit of another group is not held up.
    let other = h.send(c1, 8, commit_request("other", "", -1, &[("orders", 0, 9)]));
    let commits = |h: &Harness| {
        h.store_ops(|o| matches!(o, Output::CommitOffsets { .. }))
            .len()
    };
    assert_eq!(commits(&h), 2, "one batch per group in flight");
    h.advance(49);
    assert!(h.waiting(&first) && h.waiting(&second));
    h.advance(1);
    assert_eq!(codes(&h.take(&first)), [0]);
    // On c1 the other group's answer follows the first.
    assert_eq!(codes(&h.take(&other)), [0]);
    assert!(h.waiting(&second));
    // The two queued commits go as one batch.
    assert_eq!(commits(&h), 3);
    h.advance(50);
    assert_eq!(codes(&h.take(&second)), [0]);
    assert_eq!(codes(&h.take(&third)), [0]);
    assert_eq!(h.store.get("solo", &tp("orders", 0)), Some(2));
    assert_eq!(h.store.get("solo", &tp("orders", 1)), Some(3));
    // Answers on one connection come in request order.
    let order: Vec<i32> = h.received(c2).iter().map(|(c, _)| *c).collect();
    assert_eq!(order, [1, 2]);
}

/// The host's inputs after `orders` was deleted and re-created (a new topic id, the
/// same partition count) and `audit` deleted.
fn recreate_orders_delete_audit(h: &mut Harness) {
    let ids = [("orders", [9u8; 16]), ("payments", PAYMENTS_ID)]
        .into_iter()
        .map(|(n, id)| (TopicName::new(n), id))
        .collect();
    h.feed(Input::TopicIds { ids });
    let topics = [("orders", 6), ("payments", 3)]
        .into_iter()
        .map(|(n, p)| (TopicName::new(n), p))
        .collect();
    h.feed(Input::TopicsChanged { topics });
}

#[test]
fn commits_queued_for_a_deleted_or_recreated_topic_never_reach_the_store() {
    let mut h = Harness::new();
    h.store.hold = true;
    let c1 = h.connect();
    let c2 = h.connect();
    // One batch in flight; three commits queued behind it.
    let first = h.send(c1, 8, commit_request("solo", "", -1, &[("orders", 0, 1)]));
    let mixed = h.send(
        c2,
        8,
        commit_request("solo", "", -1, &[("orders", 0, 60), ("payments", 0, 5)]),
    );
    let old_only = h.send(c2, 8, commit_request("solo", "", -1, &[("orders", 1, 7)]));
    let audit = h.send(c1, 8, commit_request("solo", "", -1, &[("audit", 1, 3)]));
    assert_eq!(h.held().len(), 1);
    recreate_orders_delete_audit(&mut h);
    // The queued commits with nothing left to write are answered at once (in request
    // order on their connections: behind the batch in flight on c1, after `mixed` on c2).
    assert!(h.waiting(&old_only) && h.waiting(&audit));
    h.release_store();
    assert_eq!(codes(&h.take(&first)), [0]);
    assert_eq!(codes(&h.take(&audit)), [E::UnknownTopicOrPartition.code()]);
    // The next batch carries only what still exists.
    let batch: Vec<Output> = h.held().to_vec();
    assert_eq!(batch.len(), 1);
    let Output::CommitOffsets { records, .. } = &batch[0] else {
        panic!("{batch:?}")
    };
    let written: Vec<(String, i32, i64)> = records
        .iter()
        .map(|r| (r.tp.topic.to_string(), r.tp.partition, r.offset))
        .collect();
    assert_eq!(written, [("payments".to_string(), 0, 5)]);
    h.release_store();
    assert_eq!(
        codes(&h.take(&mixed)),
        [E::UnknownTopicOrPartition.code(), 0]
    );
    assert_eq!(
        codes(&h.take(&old_only)),
        [E::UnknownTopicOrPartition.code()]
    );
    // The in-flight batch landed (the host removes it with the topic's offsets); the
    // queued old-topic offsets did not.
    assert_eq!(h.store.get("solo", &tp("orders", 0)), Some(1));
    assert_eq!(h.store.get("solo", &tp("orders", 1)), None);
    assert_eq!(h.store.get("solo", &tp("audit", 1)), None);
    // The re-created topic takes commits; the deleted one is unknown.
    h.store.hold = false;
    let r = h.call(c1, 8, commit_request("solo", "", -1, &[("orders", 1, 2)]));
    assert_eq!(codes(&r), [0]);
    let r = h.call(c1, 8, commit_request("solo", "", -1, &[("audit", 0, 2)]));
    assert_eq!(codes(&r), [E::UnknownTopicOrPartition.code()]);
}

/// One group of an OffsetFetch v8 answer: id, error, (topic, partition, offset).
type GroupOffsets = (String, i16, Vec<(String, i32, i64)>);

fn fetch_v7(group: &str, topics: Option<&[(&str, &[i32])]>) -> OffsetFetchRequest {
    let mut r = OffsetFetchRequest::default();
    r.group_id = s(group).into();
    r.topics = topics.map(|ts| {
        ts.iter()
            .map(|(t, ps)| {
                let mut x = OffsetFetchRequestTopic::default();
                x.name = s(*t).into();
                x.partition_indexes = ps.to_vec();
                x
            })
            .collect()
    });
    r
}

fn fetch_group(group: &str, topics: Option<&[(&str, &[i32])]>) -> OffsetFetchRequestGroup {
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = s(group).into();
    g.member_epoch = -1;
    g.topics = topics.map(|ts| {
        ts.iter()
            .map(|(t, ps)| {
                let mut x = OffsetFetchRequestTopics::default();
                x.name = s(*t).into();
                x.partition_indexes = ps.to_vec();
                x
            })
            .collect()
    });
    g
}

/// Kafka stores any committed offset, negative ones included (kafkajs' `resetOffsets`
/// to earliest commits the sentinel −2 with OffsetCommit v5), and OffsetFetch returns
/// it as stored: a client reads it as no valid offset and applies its reset policy.
#[test]
fn a_negative_offset_is_stored_and_fetched_as_committed() {
    let mut h = Harness::new();
    let conn = h.connect();
    let r = h.call(
        conn,
        8,
        commit_request("g1", "", -1, &[("orders", 0, 10), ("orders", 1, 11)]),
    );
    assert_eq!(codes(&r), [0, 0]);
    for version in [2, 5, 8] {
        let r = h.call(
            conn,
            version,
            commit_request("g1", "", -1, &[("orders", 0, -2), ("orders", 1, -1)]),
        );
        assert_eq!(codes(&r), [0, 0], "OffsetCommit v{version}");
        assert_eq!(h.store.get("g1", &tp("orders", 0)), Some(-2));
        assert_eq!(h.store.get("g1", &tp("orders", 1)), Some(-1));
    }
    let r = h.call(conn, 7, fetch_v7("g1", Some(&[("orders", &[0, 1])])));
    assert_eq!(r.error_code, 0);
    let got: Vec<(i32, i64, i16)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
        .collect();
    assert_eq!(got, [(0, -2, 0), (1, -1, 0)]);
}

#[test]
fn offset_fetch_v7_and_multi_group_v8() {
    let mut h = Harness::new();
    let conn = h.connect();
    let r = h.call(
        conn,
        8,
        commit_request(
            "g1",
            "",
            -1,
            &[("orders", 0, 10), ("orders", 1, 11), ("payments", 2, 12)],
        ),
    );
    assert_eq!(codes(&r), [0, 0, 0]);
    let r = h.call(conn, 8, commit_request("g2", "", -1, &[("audit", 0, 20)]));
    assert_eq!(codes(&r), [0]);

    // v7, every offset of the group.
    let r = h.call(conn, 7, fetch_v7("g1", None));
    assert_eq!(r.error_code, 0);
    let got: Vec<(String, i32, i64, Option<String>)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.as_ref().map(|m| m.to_string()),
                )
            })
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("orders".into(), 0, 10, Some("m10".into())),
            ("orders".into(), 1, 11, Some("m11".into())),
            ("payments".into(), 2, 12, Some("m12".into())),
        ]
    );
    // v7, some partitions: one without an offset is −1.
    let r = h.call(conn, 7, fetch_v7("g1", Some(&[("orders", &[1, 5])])));
    let got: Vec<(i32, i64)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    assert_eq!(got, [(1, 11), (5, -1)]);

    // v8, several groups at once, the store slow: one answer once every read is in.
    h.store.delay_ms = 30;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![
        fetch_group("g1", Some(&[("orders", &[0])])),
        fetch_group("g2", None),
        fetch_group("unknown", None),
        fetch_group("", None),
    ];
    let call = h.send(conn, 8, req.clone());
    let fetches = h.store_ops(|o| matches!(o, Output::FetchOffsets { .. }));
    assert!(fetches.iter().any(|o| matches!(
        o,
        Output::FetchOffsets { group, scope: FetchScope::WholeGroup, .. } if group.as_str() == "g2"
    )));
    h.advance(29);
    assert!(h.waiting(&call));
    h.advance(1);
    let r = h.take(&call);
    let summary: Vec<GroupOffsets> = r
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.error_code,
                g.topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(|p| (t.name.to_string(), p.partition_index, p.committed_offset))
                    })
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("g1".into(), 0, vec![("orders".into(), 0, 10)]),
            ("g2".into(), 0, vec![("audit".into(), 0, 20)]),
            ("unknown".into(), 0, vec![]),
            (String::new(), E::InvalidGroupId.code(), vec![]),
        ]
    );

    // One group's read fails: only that group reports it.
    h.store.delay_ms = 0;
    h.store.fail_fetches = 1;
    let r = h.call(conn, 8, req);
    let errors: Vec<i16> = r.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(
        errors,
        [
            E::CoordinatorNotAvailable.code(),
            0,
            0,
            E::InvalidGroupId.code()
        ]
    );
    // v7 with a failing read: the top-level error.
    h.store.fail_fetches = 1;
    let r = h.call(conn, 7, fetch_v7("g1", None));
    assert_eq!(r.error_code, E::CoordinatorNotAvailable.code());
}

#[test]
fn delete_groups_refuses_a_group_with_members_and_deletes_an_empty_one() {
    let mut h = Harness::new();
    let _members = three_stable(&mut h);
    let conn = h.connect();
    let r = h.call(
        conn,
        8,
        commit_request("solo", "", -1, &[("orders", 0, 1), ("audit", 1, 2)]),
    );
    assert_eq!(codes(&r), [0, 0]);
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![s(G).into(), s("solo").into(), s("never").into()];
    let r = h.call(conn, 2, req);
    let results: Vec<(String, i16)> = r
        .results
        .iter()
        .map(|x| (x.group_id.to_string(), x.error_code))
        .collect();
    assert_eq!(
        results,
        vec![
            (G.into(), E::NonEmptyGroup.code()),
            ("solo".into(), 0),
            ("never".into(), E::GroupIdNotFound.code()),
        ]
    );
    let deletes = h.store_ops(|o| matches!(o, Output::DeleteOffsets { .. }));
    assert!(deletes.iter().any(|o| matches!(
        o,
        Output::DeleteOffsets { group, scope: FetchScope::WholeGroup, .. } if group.as_str() == "solo"
    )));
    assert!(!deletes.iter().any(|o| matches!(
        o,
        Output::DeleteOffsets { group, .. } if group.as_str() == G
    )));
    assert!(h.store.offsets.keys().all(|(g, _)| g.as_str() != "solo"));
    let listed = list(&mut h);
    assert!(!listed.iter().any(|g| g.0 == "solo"));
    assert!(listed.iter().any(|g| g.0 == G && g.1 == "Stable"));
    // A deleted group that had offsets but no group state (only in the store) is
    // deleted too.
    h.store.put("orphan", tp("orders", 0), 7);
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![s("orphan").into()];
    assert_eq!(h.call(conn, 2, req).results[0].error_code, 0);
    assert!(h.store.offsets.keys().all(|(g, _)| g.as_str() != "orphan"));
}

#[test]
fn offset_delete_keeps_the_offsets_of_subscribed_topics() {
    let mut h = Harness::new();
    let members = three_stable(&mut h);
    // members subscribe to orders and payments, not audit.
    assert_eq!(members[0].commit(&mut h, &[("orders", 0, 5)]), [0]);
    h.store.put(G, tp("audit", 0), 3);
    h.store.put(G, tp("audit", 1), 4);
    let mut req = OffsetDeleteRequest::default();
    req.group_id = s(G).into();
    for (t, ps) in [("orders", vec![0]), ("audit", vec![0])] {
        let mut x = OffsetDeleteRequestTopic::default();
        x.name = s(t).into();
        x.partitions = ps
            .into_iter()
            .map(|p| {
                let mut y = OffsetDeleteRequestPartition::default();
                y.partition_index = p;
                y
            })
            .collect();
        req.topics.push(x);
    }
    let r = h.admin(0, req.clone());
    assert_eq!(r.error_code, 0);
    let per: Vec<(String, i32, i16)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(
        per,
        vec![
            ("orders".into(), 0, E::GroupSubscribedToTopic.code()),
            ("audit".into(), 0, 0),
        ]
    );
    assert_eq!(h.store.get(G, &tp("orders", 0)), Some(5));
    assert_eq!(h.store.get(G, &tp("audit", 0)), None);
    assert_eq!(h.store.get(G, &tp("audit", 1)), Some(4));
    assert!(h
        .store_ops(|o| matches!(o, Output::DeleteOffsets { .. }))
        .iter()
        .any(|o| matches!(
            o,
            Output::DeleteOffsets { scope: FetchScope::Partitions(ps), .. } if ps == &vec![tp("audit", 0)]
        )));

    // An unknown group.
    req.group_id = s("nope").into();
    let r = h.admin(0, req);
    assert_eq!(r.error_code, E::GroupIdNotFound.code());
    assert!(r.topics.is_empty());
}

#[test]
fn offset_delete_of_a_group_with_metadata_in_an_old_subscription_version() {
    // v0 ConsumerProtocolSubscription metadata parses as well.
    let mut h = Harness::new();
    let c = h.connect();
    let mut req = join_request("old", "", None, &["orders"], SESSION, REBALANCE);
    for p in &mut req.protocols {
        p.metadata = subscription_at(0, &["orders"]);
    }
    let call = h.send(c, 3, req);
    h.advance(INITIAL_DELAY);
    assert_eq!(h.take(&call).error_code, 0);
    h.store.put("old", tp("orders", 1), 1);
    h.store.put("old", tp("payments", 1), 1);
    let mut req = OffsetDeleteRequest::default();
    req.group_id = s("old").into();
    for t in ["orders", "payments"] {
        let mut x = OffsetDeleteRequestTopic::default();
        x.name = s(t).into();
        let mut y = OffsetDeleteRequestPartition::default();
        y.partition_index = 1;
        x.partitions.push(y);
        req.topics.push(x);
    }
    let r = h.admin(0, req);
    let per: Vec<i16> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(per, [E::GroupSubscribedToTopic.code(), 0]);
}

// ---------------------------------------------------------------------------- KIP-848

fn cg_join(
    group: &str,
    member: &str,
    topics: &[&str],
    assignor: Option<&str>,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 5_000;
    r.subscribed_topic_names = Some(topics.iter().map(|t| s(*t).into()).collect());
    r.server_assignor = assignor.map(s);
    r.topic_partitions = Some(Vec::new());
    r
}

/// A heartbeat at `epoch` reporting `owned` (by topic id), or nothing changed.
fn cg_beat(
    group: &str,
    member: &str,
    epoch: i32,
    owned: Option<&[(Uuid, Vec<i32>)]>,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = -1;
    r.topic_partitions = owned.map(|o| {
        o.iter()
            .map(|(id, ps)| {
                let mut t = OwnedTopic::default();
                t.topic_id = *id;
                t.partitions = ps.clone();
                t
            })
            .collect()
    });
    r
}

/// The assignment of a heartbeat answer by topic id; `None` when absent.
fn cg_assignment(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<(Uuid, Vec<i32>)>> {
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

fn orders() -> Uuid {
    Uuid::from_bytes(ORDERS_ID)
}

#[test]
fn kip848_members_join_and_reconcile_through_the_wire() {
    let mut h = Harness::new();
    let c1 = h.connect();
    let c2 = h.connect();
    let m1 = "5Cq1X3ZpR1mGZtY9rG0y2A";
    let m2 = "mY0cS9P8T6yXbq2Nw1vUeA";
    let r = h.call(c1, 1, cg_join("k", m1, &["orders"], Some("uniform")));
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.member_id.as_deref(), Some(m1), "the client's member id");
    assert_eq!(r.member_epoch, 1);
    // Given partitions to take: the short interval of a reconciling member
    // (`consumer_reconcile_heartbeat_interval_ms`, 200 by default).
    assert_eq!(r.heartbeat_interval_ms, 200);
    // Topic ids map back to the names: everything of orders.
    assert_eq!(cg_assignment(&r), Some(vec![(orders(), (0..6).collect())]));
    // v1 requires a member id.
    let r = h.call(c2, 1, cg_join("k", "", &["orders"], None));
    assert_eq!(r.error_code, E::InvalidRequest.code());

    // A second member: its share is still m1's, so it gets it only once m1 revoked.
    let r = h.call(c2, 1, cg_join("k", m2, &["orders"], None));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(cg_assignment(&r), Some(vec![]));
    // Waiting for partitions m1 holds: until m1's next heartbeat (it was told 200 ms)
    // plus a quarter of a reconciliation interval for m1 to acknowledge the revocation.
    assert_eq!(
        r.heartbeat_interval_ms, 250,
        "waiting for partitions m1 holds"
    );
    // m1 at epoch 1 may still commit.
    let commit = |h: &mut Harness, epoch: i32, offset: i64| {
        let call = h.send(
            c1,
            9,
            commit_request("k", m1, epoch, &[("orders", 0, offset)]),
        );
        codes(&h.take(&call))
    };
    assert_eq!(commit(&mut h, 1, 7), [0]);
    let all: Vec<(Uuid, Vec<i32>)> = vec![(orders(), (0..6).collect())];
    let r = h.call(c1, 1, cg_beat("k", m1, 1, Some(&all)));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, 1, "revoking first, at its old epoch");
    assert_eq!(r.heartbeat_interval_ms, 200, "partitions to revoke");
    let kept = cg_assignment(&r).expect("a new assignment");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].1.len(), 3);
    let r = h.call(c1, 1, cg_beat("k", m1, 1, Some(&kept)));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.heartbeat_interval_ms, 1_000, "m1 is reconciled");
    let r = h.call(c2, 1, cg_beat("k", m2, 2, Some(&[])));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.heartbeat_interval_ms, 200, "m2 takes its partitions");
    let got = cg_assignment(&r).expect("its partitions");
    let r = h.call(c2, 1, cg_beat("k", m2, 2, Some(&got)));
    assert_eq!(r.heartbeat_interval_ms, 1_000, "m2 is reconciled");
    let mut union: Vec<i32> = kept[0].1.iter().chain(&got[0].1).copied().collect();
    union.sort();
    assert_eq!(union, (0..6).collect::<Vec<_>>());

    // Offsets: a commit with the member's old epoch is stale now.
    assert_eq!(commit(&mut h, 1, 8), [E::StaleMemberEpoch.code()]);
    assert_eq!(commit(&mut h, 2, 9), [0]);
    assert_eq!(h.store.get("k", &tp("orders", 0)), Some(9));
    // OffsetFetch v9 checks the epoch too.
    let mut req = OffsetFetchRequest::default();
    let mut g = fetch_group("k", None);
    g.member_id = Some(s(m1));
    g.member_epoch = 1;
    req.groups = vec![g];
    let r = h.call(c1, 9, req.clone());
    assert_eq!(r.groups[0].error_code, E::StaleMemberEpoch.code());
    req.groups[0].member_epoch = 2;
    let r = h.call(c1, 9, req);
    assert_eq!(r.groups[0].error_code, 0);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 9);

    // ConsumerGroupDescribe.
    let mut req = ConsumerGroupDescribeRequest::default();
    req.group_ids = vec![s("k").into(), s("nope").into()];
    let r = h.admin(1, req);
    let d = &r.groups[0];
    assert_eq!(d.error_code, 0);
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!((d.group_epoch, d.assignment_epoch), (2, 2));
    assert_eq!(d.assignor_name.as_str(), "sticky", "uniform is our sticky");
    assert_eq!(d.members.len(), 2);
    for m in &d.members {
        assert_eq!(m.member_epoch, 2);
        assert_eq!(m.member_type, 1);
        assert_eq!(m.subscribed_topic_names.len(), 1);
        assert_eq!(m.subscribed_topic_names[0].as_str(), "orders");
        assert!(m.client_host.starts_with("/10.0.0."));
        let t = &m.assignment.topic_partitions[0];
        assert_eq!((t.topic_id, t.topic_name.as_str()), (orders(), "orders"));
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(m.assignment, m.target_assignment);
    }
    assert_eq!(r.groups[1].error_code, E::GroupIdNotFound.code());
    let listed = list(&mut h);
    assert!(listed.contains(&(
        "k".into(),
        "Stable".into(),
        "consumer".into(),
        "consumer".into()
    )));
    // Kafka 4: DescribeGroups is for classic groups.
    assert_eq!(describe(&mut h, "k").error_code, E::GroupIdNotFound.code());

    // m2 leaves; the group is not empty, so it cannot be deleted.
    let r = h.call(c2, 1, cg_beat("k", m2, -1, None));
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![s("k").into()];
    assert_eq!(
        h.admin(2, req.clone()).results[0].error_code,
        E::NonEmptyGroup.code()
    );
    let r = h.call(c1, 1, cg_beat("k", m1, -1, None));
    assert_eq!(r.error_code, 0);
    assert!(list(&mut h).contains(&(
        "k".into(),
        "Empty".into(),
        "consumer".into(),
        "consumer".into()
    )));
    // Empty: deleted with its offsets.
    assert_eq!(h.admin(2, req).results[0].error_code, 0);
    assert_eq!(h.store.get("k", &tp("orders", 0)), None);
    assert!(!list(&mut h).iter().any(|g| g.0 == "k"));
}

#[test]
fn deleting_an_empty_kip848_group_without_offsets_succeeds() {
    let mut h = Harness::new();
    let c = h.connect();
    let r = h.call(c, 1, cg_join("k", "m1", &["orders"], None));
    assert_eq!(r.error_code, 0);
    let r = h.call(c, 1, cg_beat("k", "m1", -1, None));
    assert_eq!(r.error_code, 0);
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![s("k").into()];
    let r = h.admin(2, req);
    // The group existed (Empty): deleted, whether or not it had committed offsets.
    assert_eq!(r.results[0].error_code, 0);
    assert!(!list(&mut h).iter().any(|g| g.0 == "k"));
}

/// Through the coordinator's timers (`poll_timeout()` and `Input::Timer`): a KIP-848
/// member that does not revoke within its rebalance timeout is fenced and its
/// partitions go to the other member; that member, silent for the session timeout, is
/// fenced too; and then no deadline is left.
#[test]
fn kip848_members_past_their_deadlines_are_fenced_by_the_coordinators_timers() {
    let mut h = Harness::new();
    let (c1, c2) = (h.connect(), h.connect());
    let (m1, m2) = ("kip848-member-1", "kip848-member-2");
    let expired = |h: &Harness| {
        h.events
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    Output::Metric {
                        counter: drover_coordinator::CoordinatorCounter::ConsumerMembersExpired,
                        ..
                    }
                )
            })
            .count()
    };
    let r = h.call(c1, 1, cg_join("k", m1, &["orders"], None));
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let all: Vec<(Uuid, Vec<i32>)> = vec![(orders(), (0..6).collect())];
    assert_eq!(cg_assignment(&r), Some(all.clone()));
    // m1's next deadline is its session's.
    assert_eq!(h.coord.poll_timeout(), Some(h.now + SESSION as u64));
    let r = h.call(c2, 1, cg_join("k", m2, &["orders"], None));
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(cg_assignment(&r), Some(vec![]));
    // m1 is asked to revoke half: its rebalance deadline comes first.
    let asked_at = h.now;
    let r = h.call(c1, 1, cg_beat("k", m1, 1, Some(&all)));
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(h.coord.poll_timeout(), Some(asked_at + REBALANCE as u64));

    // m1 never answers; m2 heartbeats every second.
    while h.now + 1_000 < asked_at + REBALANCE as u64 {
        h.advance(1_000);
        let r = h.call(c2, 1, cg_beat("k", m2, 2, None));
        assert_eq!((r.error_code, r.member_epoch), (0, 2), "at {}", h.now);
    }
    assert_eq!(expired(&h), 0);
    h.advance_to(asked_at + REBALANCE as u64);
    assert_eq!(expired(&h), 1);
    let d = &h
        .admin(1, {
            let mut req = ConsumerGroupDescribeRequest::default();
            req.group_ids = vec![s("k").into()];
            req
        })
        .groups[0];
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id.as_str(), m2);
    let r = h.call(c2, 1, cg_beat("k", m2, 2, Some(&[])));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, 3, "m1's removal bumped the group epoch");
    assert_eq!(cg_assignment(&r), Some(all));
    let r = h.call(c1, 1, cg_beat("k", m1, 1, None));
    assert_eq!(r.error_code, E::UnknownMemberId.code());

    // m2 falls silent: fenced at its session deadline, then nothing is scheduled.
    let last = h.now;
    assert_eq!(h.coord.poll_timeout(), Some(last + SESSION as u64));
    h.advance(SESSION as u64 - 1);
    assert_eq!(expired(&h), 1);
    h.advance(1);
    assert_eq!(expired(&h), 2);
    assert_eq!(h.coord.poll_timeout(), None);
    assert!(list(&mut h).contains(&(
        "k".into(),
        "Empty".into(),
        "consumer".into(),
        "consumer".into()
    )));
}

// ---------------------------------------------------------------------------- mixed protocols

#[test]
fn a_classic_join_for_a_kip848_group_with_members_is_inconsistent() {
    let mut h = Harness::new();
    let c = h.connect();
    let r = h.call(c, 1, cg_join("k", "m1", &["orders"], None));
    assert_eq!(r.error_code, 0);
    let mut m = Member::new(&mut h, "k", &["orders"]);
    let call = m.join(&mut h);
    let r = h.take(&call);
    assert_eq!(r.error_code, E::InconsistentGroupProtocol.code());
    m.id = "x".into();
    let r = h.call(m.conn, 3, m.join_request());
    assert_eq!(r.error_code, E::InconsistentGroupProtocol.code());
    // And a ConsumerGroupHeartbeat for a classic group with members is refused.
    let _members = three_stable(&mut h);
    let r = h.call(c, 1, cg_join(G, "m9", &["orders"], None));
    assert_eq!(r.error_code, E::GroupIdNotFound.code());
    // Both groups are listed with their type.
    let listed = list(&mut h);
    assert!(listed.iter().any(|g| g.0 == "k" && g.2 == "consumer"));
    assert!(listed
        .iter()
        .any(|g| g.0 == G && g.2 == "classic" && g.3 == "consumer"));
}

#[test]
fn an_empty_classic_group_is_converted_by_a_consumer_group_heartbeat() {
    let mut h = Harness::new();
    // An empty classic group made by a standalone commit, with offsets.
    let c = h.connect();
    let r = h.call(c, 8, commit_request("conv", "", -1, &[("orders", 2, 77)]));
    assert_eq!(codes(&r), [0]);
    assert!(list(&mut h)
        .iter()
        .any(|g| g.0 == "conv" && g.2 == "classic"));
    let r = h.call(c, 1, cg_join("conv", "m1", &["orders"], None));
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.member_epoch, 1);
    let listed = list(&mut h);
    assert!(
        listed.iter().any(|g| g.0 == "conv" && g.2 == "consumer"),
        "{listed:?}"
    );
    // The committed offsets stay.
    let mut req = OffsetFetchRequest::default();
    let mut g = fetch_group("conv", None);
    g.member_id = Some(s("m1"));
    g.member_epoch = 1;
    req.groups = vec![g];
    let r = h.call(c, 9, req);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 77);

    // A classic group whose members all left is converted too; and back: an empty
    // KIP-848 group is taken by a classic join.
    let mut a = Member::new(&mut h, "back", &["orders"]);
    let call = a.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    a.joined(&mut h, &call);
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = s("back").into();
    leave.member_id = s(&a.id);
    assert_eq!(h.call(a.conn, 1, leave).error_code, 0);
    let r = h.call(c, 1, cg_join("back", "m2", &["orders"], None));
    assert_eq!(r.error_code, 0);
    let r = h.call(c, 1, cg_beat("back", "m2", -1, None));
    assert_eq!(r.error_code, 0);
    let mut b = Member::new(&mut h, "back", &["orders"]);
    let call = b.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    b.joined(&mut h, &call);
    assert!(list(&mut h)
        .iter()
        .any(|g| g.0 == "back" && g.2 == "classic"));
}

#[test]
fn the_hosts_api_versions_probe_lists_the_fifteen_group_apis() {
    let mut h = Harness::new();
    let r = h.admin(3, ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
    // The twelve group APIs, TxnOffsetCommit (coordinator ABI 3.4), ShareGroupHeartbeat
    // and ShareGroupDescribe (coordinator ABI 3.7).
    assert_eq!(r.api_keys.len(), 15);
    let got: BTreeMap<i16, (i16, i16)> = r
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect();
    let want: BTreeMap<i16, (i16, i16)> = KAFKA_GROUP_APIS
        .iter()
        .map(|k| {
            let v = served_versions(*k);
            (*k as i16, (v.min, v.max))
        })
        .collect();
    assert_eq!(got, want);
    for key in [
        ApiKey::JoinGroup,
        ApiKey::SyncGroup,
        ApiKey::Heartbeat,
        ApiKey::LeaveGroup,
        ApiKey::OffsetCommit,
        ApiKey::OffsetFetch,
        ApiKey::OffsetDelete,
        ApiKey::DescribeGroups,
        ApiKey::ListGroups,
        ApiKey::DeleteGroups,
        ApiKey::ConsumerGroupHeartbeat,
        ApiKey::ConsumerGroupDescribe,
    ] {
        assert!(got.contains_key(&(key as i16)), "{key:?}");
    }
    assert_eq!(got[&(ApiKey::OffsetCommit as i16)].1, 9);
    assert_eq!(got[&(ApiKey::JoinGroup as i16)], (0, 9));
}

#[test]
fn every_served_version_of_every_api_round_trips() {
    let mut h = Harness::new();
    let (members, _) = three_static(&mut h);
    let c = h.connect();
    let ok = |h: &Harness| assert!(h.is_open(c), "the coordinator closed the connection");
    let v = |k: ApiKey| served_versions(k).min..=served_versions(k).max;
    for version in v(ApiKey::DescribeGroups) {
        let mut r = DescribeGroupsRequest::default();
        r.groups = vec![s(G).into(), s("none").into()];
        let answer = h.call(c, version, r);
        assert_eq!(answer.groups[0].members.len(), 3, "v{version}");
        assert_eq!(
            answer.groups[0].members[0].group_instance_id.is_some(),
            version >= 4
        );
    }
    for version in v(ApiKey::ListGroups) {
        let answer = h.call(c, version, ListGroupsRequest::default());
        assert!(answer.groups.iter().any(|g| g.group_id.as_str() == G));
    }
    for version in v(ApiKey::OffsetCommit) {
        let mut r = commit_request("solo", "", -1, &[("orders", 0, 100 + version as i64)]);
        if version < 1 {
            r.member_id = s("");
        }
        let answer = h.call(c, version, r);
        assert_eq!(codes(&answer), [0], "v{version}");
        assert_eq!(
            h.store.get("solo", &tp("orders", 0)),
            Some(100 + version as i64)
        );
    }
    for version in v(ApiKey::OffsetFetch) {
        let answer = if version >= 8 {
            let mut r = OffsetFetchRequest::default();
            r.groups = vec![fetch_group("solo", Some(&[("orders", &[0])]))];
            let a = h.call(c, version, r);
            a.groups[0].topics[0].partitions[0].committed_offset
        } else {
            let a = h.call(c, version, fetch_v7("solo", Some(&[("orders", &[0])])));
            a.topics[0].partitions[0].committed_offset
        };
        assert_eq!(answer, 109, "v{version}");
    }
    for version in v(ApiKey::Heartbeat) {
        let m = &members[0];
        let mut r = heartbeat_request(G, &m.id, None, 1);
        if version >= 3 {
            r.group_instance_id = Some(s("ia"));
        }
        assert_eq!(h.call(c, version, r).error_code, 0, "v{version}");
    }
    for version in v(ApiKey::SyncGroup) {
        let m = &members[1];
        let mut r = sync_request(G, &m.id, None, 1, Vec::new());
        if version >= 3 {
            r.group_instance_id = Some(s("ib"));
        }
        if version >= 5 {
            r.protocol_type = Some(s("consumer"));
            r.protocol_name = Some(s("range"));
        }
        let answer = h.call(c, version, r);
        assert_eq!(answer.error_code, 0, "v{version}");
        assert!(!answer.assignment.is_empty());
    }
    for version in v(ApiKey::LeaveGroup) {
        let mut r = LeaveGroupRequest::default();
        r.group_id = s(G).into();
        if version >= 3 {
            let mut mi = MemberIdentity::default();
            mi.member_id = s("nobody");
            r.members.push(mi);
        } else {
            r.member_id = s("nobody");
        }
        let answer = h.call(c, version, r);
        let code = if version >= 3 {
            answer.members[0].error_code
        } else {
            answer.error_code
        };
        assert_eq!(code, E::UnknownMemberId.code(), "v{version}");
    }
    for version in v(ApiKey::DeleteGroups) {
        let mut r = DeleteGroupsRequest::default();
        r.groups_names = vec![s(G).into()];
        let answer = h.call(c, version, r);
        assert_eq!(answer.results[0].error_code, E::NonEmptyGroup.code());
    }
    for version in v(ApiKey::OffsetDelete) {
        let mut r = OffsetDeleteRequest::default();
        r.group_id = s("solo").into();
        let answer = h.call(c, version, r);
        assert_eq!(answer.error_code, 0);
    }
    for version in v(ApiKey::ConsumerGroupHeartbeat) {
        let member = if version >= 1 { "cm1" } else { "" };
        let answer = h.call(
            c,
            version,
            cg_join(&format!("k{version}"), member, &["orders"], None),
        );
        assert_eq!(answer.error_code, 0, "v{version}: {answer:?}");
        assert!(!answer.member_id.unwrap().is_empty());
    }
    for version in v(ApiKey::ConsumerGroupDescribe) {
        let mut r = ConsumerGroupDescribeRequest::default();
        r.group_ids = vec![s("k1").into()];
        let answer = h.call(c, version, r);
        assert_eq!(answer.groups[0].members.len(), 1);
        assert_eq!(
            answer.groups[0].members[0].member_type,
            if version >= 1 { 1 } else { -1 }
        );
    }
    ok(&h);
}

#[test]
fn a_version_the_coordinator_does_not_serve_closes_the_connection() {
    let mut h = Harness::new();
    let c = h.connect();
    let mut frame = bytes::BytesMut::new();
    bytes::BufMut::put_i16(&mut frame, ApiKey::OffsetCommit as i16);
    bytes::BufMut::put_i16(&mut frame, 10);
    bytes::BufMut::put_i32(&mut frame, 1);
    bytes::BufMut::put_i16(&mut frame, -1);
    h.send_raw(c, frame.freeze());
    assert!(h.closed_by_coordinator(c));
}

// ---------------------------------------------------------------------------- cluster mode

const SLOTS: u32 = 4;

fn cluster() -> Harness {
    Harness::with_config(CoordinatorConfig {
        slot_count: Some(SLOTS),
        ..config()
    })
}

/// A group id in `slot`, and one in another slot.
fn group_in(slot: u32, nth: usize) -> String {
    (0..)
        .map(|i| format!("cg{i}"))
        .filter(|g| drover_protocol::coordinator_slot(g, SLOTS) == slot)
        .nth(nth)
        .unwrap()
}

fn group_not_in(slot: u32) -> String {
    (0..)
        .map(|i| format!("cg{i}"))
        .find(|g| drover_protocol::coordinator_slot(g, SLOTS) != slot)
        .unwrap()
}

#[test]
fn a_join_for_a_group_of_a_slot_not_owned_is_not_coordinator() {
    let mut h = cluster();
    h.feed(Input::SlotGained {
        slot: 0,
        stopped_ms: 0,
    });
    let other = group_not_in(0);
    let m = Member::new(&mut h, &other, &["orders"]);
    let call = m.join(&mut h);
    let r = h.take(&call);
    assert_eq!(r.error_code, E::NotCoordinator.code());
    let r = h.call(
        m.conn,
        8,
        commit_request(&other, "", -1, &[("orders", 0, 1)]),
    );
    assert_eq!(codes(&r), [E::NotCoordinator.code()]);
    assert_eq!(
        describe(&mut h, &other).error_code,
        E::NotCoordinator.code()
    );
    let r = h.call(m.conn, 1, cg_join(&other, "m1", &["orders"], None));
    assert_eq!(r.error_code, E::NotCoordinator.code());
    // A group of the owned slot is served.
    let mut mine = Member::new(&mut h, &group_in(0, 0), &["orders"]);
    let call = mine.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    assert_eq!(mine.joined(&mut h, &call).generation_id, 1);
    assert!(h.store.log.is_empty());
}

#[test]
fn slot_lost_answers_parked_joins_with_not_coordinator() {
    let mut h = cluster();
    h.feed(Input::SlotGained {
        slot: 1,
        stopped_ms: 0,
    });
    h.feed(Input::SlotGained {
        slot: 2,
        stopped_ms: 0,
    });
    let (ga, gb) = (group_in(1, 0), group_in(1, 1));
    let kept = group_in(2, 0);
    // ga: two members waiting in the initial delay.
    let mut a1 = Member::new(&mut h, &ga, &["orders"]);
    let mut a2 = Member::new(&mut h, &ga, &["orders"]);
    let j1 = a1.first_join(&mut h);
    let j2 = a2.first_join(&mut h);
    // gb: a follower waiting in SyncGroup.
    let mut b1 = Member::new(&mut h, &gb, &["orders"]);
    let mut b2 = Member::new(&mut h, &gb, &["orders"]);
    let k1 = b1.first_join(&mut h);
    let k2 = b2.first_join(&mut h);
    // kept: a group of slot 2.
    let mut c1 = Member::new(&mut h, &kept, &["orders"]);
    let jc = c1.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    a1.joined(&mut h, &j1);
    a2.joined(&mut h, &j2);
    // ga rebalances again: a third member, a1 rejoins; a2 has not yet.
    let mut a3 = Member::new(&mut h, &ga, &["orders"]);
    let j3 = a3.first_join(&mut h);
    let j1 = a1.join(&mut h);
    b1.joined(&mut h, &k1);
    b2.joined(&mut h, &k2);
    c1.joined(&mut h, &jc);
    let (b_leader, b_follower) = if b1.id < b2.id { (b1, b2) } else { (b2, b1) };
    let sync = b_follower.sync(&mut h, Vec::new());
    assert!(h.waiting(&j3) && h.waiting(&j1) && h.waiting(&sync));

    h.feed(Input::SlotLost { slot: 1 });
    for call in [&j3, &j1] {
        let r = h.take(call);
        assert_eq!(r.error_code, E::NotCoordinator.code());
    }
    assert_eq!(h.take(&sync).error_code, E::NotCoordinator.code());
    // The slot's groups are gone; the other slot's stays.
    let listed = list(&mut h);
    assert!(!listed.iter().any(|g| g.0 == ga || g.0 == gb), "{listed:?}");
    assert!(listed.iter().any(|g| g.0 == kept));
    // Nothing more for them, however long we wait (a frame would fail the harness).
    h.advance(60_000);
    assert_eq!(a2.heartbeat(&mut h), E::NotCoordinator.code());
    assert_eq!(b_leader.heartbeat(&mut h), E::NotCoordinator.code());

    // The slot comes back: the groups start over.
    h.feed(Input::SlotGained {
        slot: 1,
        stopped_ms: 0,
    });
    assert_eq!(a2.heartbeat(&mut h), E::UnknownMemberId.code());
    let mut again = Member::new(&mut h, &ga, &["orders"]);
    let call = again.first_join(&mut h);
    h.advance(INITIAL_DELAY);
    assert_eq!(again.joined(&mut h, &call).generation_id, 1);
}

/// A KIP-848 group dropped with its slot takes its members' deadlines with it.
#[test]
fn a_kip848_group_dropped_with_its_slot_leaves_no_deadline() {
    let mut h = cluster();
    h.feed(Input::SlotGained {
        slot: 1,
        stopped_ms: 0,
    });
    let group = group_in(1, 0);
    let c = h.connect();
    let r = h.call(c, 1, cg_join(&group, "m1", &["orders"], None));
    assert_eq!(r.error_code, 0);
    assert_eq!(h.coord.poll_timeout(), Some(h.now + SESSION as u64));
    h.feed(Input::SlotLost { slot: 1 });
    assert_eq!(h.coord.poll_timeout(), None);
    let r = h.call(c, 1, cg_beat(&group, "m1", 1, None));
    assert_eq!(r.error_code, E::NotCoordinator.code());
}

#[test]
fn a_connection_closed_with_a_parked_join_gets_nothing_and_the_member_stays_until_its_timeout() {
    let mut h = Harness::new();
    let mut a = Member::new(&mut h, G, &["orders"]);
    let mut b = Member::new(&mut h, G, &["orders"]);
    let ja = a.first_join(&mut h);
    let jb = b.first_join(&mut h);
    h.close(a.conn);
    h.advance(INITIAL_DELAY);
    // b's answer comes; a's connection gets nothing (the harness checks). a, the
    // leader, stays a member (Kafka does not tie members to connections)...
    let rb = b.joined(&mut h, &jb);
    assert_eq!(rb.generation_id, 1);
    assert_eq!(rb.leader.as_str(), a.id);
    assert!(!h.answered(&ja));
    assert_eq!(describe(&mut h, G).members.len(), 2);
    // ... until it misses the sync deadline.
    let sb = b.sync(&mut h, Vec::new());
    h.advance(REBALANCE as u64);
    assert_eq!(h.take(&sb).error_code, E::RebalanceInProgress.code());
    let mut rest = [b];
    let answers = rejoin_all(&mut h, &mut rest);
    assert_eq!(answers[0].generation_id, 2);
    assert_eq!(answers[0].members.len(), 1);
    sync_all(&mut h, &rest, &answers);
}

// ---------------------------------------------------------------------------- property test

/// Random joins, syncs, heartbeats, leaves, restarts, closed connections and time
/// advances of four classic clients of one group (two static, two dynamic, of
/// different protocol versions), checking after every step:
///
/// - a JoinGroup still unanswered (first in its connection's queue) exists only in
///   PreparingRebalance, a SyncGroup only in CompletingRebalance, nothing else is ever
///   left unanswered: every parked join or sync is answered when its phase ends (and
///   the harness checks each request is answered once, in order, and never on a closed
///   connection);
/// - the generation of successful JoinGroup answers never decreases;
/// - in Stable, every member's assignment (DescribeGroups, and successful SyncGroup
///   answers) is what the leader's SyncGroup that completed the generation gave it;
/// - `poll_timeout()` is always after now (the harness).
mod classic_property {
    use super::*;
    use kafka_protocol::messages::LeaveGroupResponse;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Join(usize, bool),
        Sync(usize),
        Heartbeat(usize),
        Leave(usize),
        Restart(usize),
        Close(usize),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let c = 0..CLIENTS;
        prop_oneof![
            3 => (c.clone(), any::<bool>()).prop_map(|(i, alt)| Op::Join(i, alt)),
            2 => c.clone().prop_map(Op::Sync),
            4 => c.clone().prop_map(Op::Heartbeat),
            1 => c.clone().prop_map(Op::Leave),
            1 => c.clone().prop_map(Op::Restart),
            1 => c.prop_map(Op::Close),
            4 => (0u64..6_000).prop_map(Op::Advance),
        ]
    }

    const CLIENTS: usize = 4;
    const GROUP: &str = "pg";

    /// Versions: (join, sync, heartbeat, leave).
    const VERSIONS: [(i16, i16, i16, i16); CLIENTS] =
        [(9, 5, 4, 5), (5, 3, 3, 3), (4, 2, 2, 2), (1, 1, 1, 1)];
    const SESSIONS: [(i32, i32); CLIENTS] = [
        (2_000, 3_000),
        (3_000, 2_000),
        (1_500, 4_000),
        (2_500, 2_500),
    ];

    /// A request in flight, with the member id it was sent with (an error answer
    /// makes the client forget its member id only if it still has that one: answers
    /// may arrive behind a parked join that gave it a new id).
    enum Pending {
        Join(Call<JoinGroupResponse>, String),
        /// With the generation it was sent for.
        Sync(Call<SyncGroupResponse>, String, i32),
        Heartbeat(Call<HeartbeatResponse>, String),
        Leave(Call<LeaveGroupResponse>),
    }

    struct Client {
        conn: Option<ConnId>,
        instance: Option<String>,
        member_id: String,
        generation: i32,
        alt: bool,
        last_join: Option<JoinGroupResponse>,
        pending: Vec<Pending>,
    }

    /// Whose assignment: a static member's instance, or a dynamic member's id.
    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Instance(String),
        Member(String),
    }

    struct Model {
        h: Harness,
        clients: Vec<Client>,
        admin: ConnId,
        max_generation: i32,
        /// The leader's SyncGroup that completed the latest generation: (generation,
        /// assignment by member).
        applied: Option<(i32, BTreeMap<Key, Bytes>)>,
    }

    impl Model {
        fn new() -> Model {
            let mut h = Harness::with_config(CoordinatorConfig {
                initial_rebalance_delay_ms: 500,
                ..config()
            });
            let admin = h.connect();
            let clients = (0..CLIENTS)
                .map(|i| Client {
                    conn: None,
                    instance: (i < 2).then(|| format!("s{i}")),
                    member_id: String::new(),
                    generation: -1,
                    alt: false,
                    last_join: None,
                    pending: Vec::new(),
                })
                .collect();
            Model {
                h,
                clients,
                admin,
                max_generation: 0,
                applied: None,
            }
        }

        fn describe(&mut self) -> DescribedGroup {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![s(GROUP).into()];
            let mut answer = self.h.call(self.admin, 5, r);
            answer.groups.pop().unwrap()
        }

        fn conn(&mut self, i: usize) -> ConnId {
            if let Some(c) = self.clients[i].conn.filter(|c| self.h.is_open(*c)) {
                return c;
            }
            let c = self.h.connect();
            self.clients[i].conn = Some(c);
            self.clients[i].pending.clear();
            c
        }

        fn close(&mut self, i: usize) {
            if let Some(c) = self.clients[i].conn.take() {
                self.h.close(c);
            }
            self.clients[i].pending.clear();
        }

        fn topics(&self, i: usize) -> &'static [&'static str] {
            if self.clients[i].alt {
                &["orders"]
            } else {
                &["orders", "payments"]
            }
        }

        fn join(&mut self, i: usize) {
            let conn = self.conn(i);
            let (sv, rv) = SESSIONS[i];
            let c = &self.clients[i];
            let mut r = join_request(
                GROUP,
                &c.member_id,
                c.instance.as_deref(),
                self.topics(i),
                sv,
                rv,
            );
            if VERSIONS[i].0 < 5 {
                r.group_instance_id = None;
            }
            let sent = self.clients[i].member_id.clone();
            let call = self.h.send(conn, VERSIONS[i].0, r);
            self.clients[i].pending.push(Pending::Join(call, sent));
        }

        fn sync(&mut self, i: usize) {
            let conn = self.conn(i);
            let c = &self.clients[i];
            let assignments = match &c.last_join {
                Some(j) if j.leader == j.member_id && j.member_id.as_str() == c.member_id => {
                    plan(&j.members, j.generation_id)
                }
                _ => Vec::new(),
            };
            let sent: BTreeMap<String, Bytes> = assignments.iter().cloned().collect();
            let r = sync_request(
                GROUP,
                &c.member_id,
                c.instance.as_deref(),
                c.generation,
                assignments,
            );
            let generation = c.generation;
            let member = c.member_id.clone();
            let before = self.describe().group_state.to_string();
            let call = self.h.send(conn, VERSIONS[i].1, r);
            self.clients[i]
                .pending
                .push(Pending::Sync(call, member, generation));
            let after = self.describe();
            if before == "CompletingRebalance" && after.group_state.as_str() == "Stable" {
                // This SyncGroup (the leader's) completed the generation.
                let applied = after
                    .members
                    .iter()
                    .map(|m| {
                        let key = match &m.group_instance_id {
                            Some(i) => Key::Instance(i.to_string()),
                            None => Key::Member(m.member_id.to_string()),
                        };
                        let given = sent.get(m.member_id.as_str()).cloned().unwrap_or_default();
                        (key, given)
                    })
                    .collect();
                self.applied = Some((generation, applied));
            }
        }

        fn heartbeat(&mut self, i: usize) {
            let conn = self.conn(i);
            let c = &self.clients[i];
            let r = heartbeat_request(GROUP, &c.member_id, c.instance.as_deref(), c.generation);
            let sent = c.member_id.clone();
            let call = self.h.send(conn, VERSIONS[i].2, r);
            self.clients[i].pending.push(Pending::Heartbeat(call, sent));
        }

        fn leave(&mut self, i: usize) {
            let conn = self.conn(i);
            let c = &self.clients[i];
            let mut r = LeaveGroupRequest::default();
            r.group_id = s(GROUP).into();
            if VERSIONS[i].3 >= 3 {
                let mut mi = MemberIdentity::default();
                mi.member_id = s(&c.member_id);
                mi.group_instance_id = c.instance.as_deref().map(s);
                r.members.push(mi);
            } else {
                r.member_id = s(&c.member_id);
            }
            let call = self.h.send(conn, VERSIONS[i].3, r);
            let c = &mut self.clients[i];
            c.pending.push(Pending::Leave(call));
            c.member_id.clear();
            c.generation = -1;
            c.last_join = None;
        }

        fn forget(&mut self, i: usize) {
            let c = &mut self.clients[i];
            c.member_id.clear();
            c.generation = -1;
            c.last_join = None;
        }

        fn forget_if(&mut self, i: usize, sent: &str) {
            if self.clients[i].member_id == sent {
                self.forget(i);
            }
        }

        /// Whether client `i` has a JoinGroup or a SyncGroup in flight.
        fn joining(&self, i: usize) -> bool {
            self.clients[i]
                .pending
                .iter()
                .any(|p| matches!(p, Pending::Join(..) | Pending::Sync(..)))
        }

        fn apply(&mut self, op: &Op) {
            match *op {
                Op::Join(i, alt) => {
                    self.clients[i].alt = alt;
                    self.join(i);
                }
                Op::Sync(i) => self.sync(i),
                Op::Heartbeat(i) => self.heartbeat(i),
                Op::Leave(i) => self.leave(i),
                Op::Restart(i) => {
                    self.close(i);
                    self.forget(i);
                    self.join(i);
                }
                Op::Close(i) => self.close(i),
                Op::Advance(ms) => self.h.advance(ms),
            }
            self.react();
            self.check();
        }

        /// Takes the answers that came and reacts as a client would.
        fn react(&mut self) {
            for round in 0.. {
                assert!(round < 1_000, "the clients never settle at {}", self.h.now);
                let mut progressed = false;
                for i in 0..CLIENTS {
                    let pending = std::mem::take(&mut self.clients[i].pending);
                    let mut still = Vec::new();
                    let mut answered = Vec::new();
                    for p in pending {
                        let done = match &p {
                            Pending::Join(c, _) => self.h.answered(c),
                            Pending::Sync(c, ..) => self.h.answered(c),
                            Pending::Heartbeat(c, _) => self.h.answered(c),
                            Pending::Leave(c) => self.h.answered(c),
                        };
                        if done {
                            answered.push(p);
                        } else {
                            still.push(p);
                        }
                    }
                    self.clients[i].pending = still;
                    for p in answered {
                        progressed = true;
                        self.on_answer(i, p);
                    }
                }
                if !progressed {
                    break;
                }
            }
        }

        fn on_answer(&mut self, i: usize, p: Pending) {
            // A client in the middle of a join or sync ignores what an older request
            // tells it.
            let rejoin = |m: &mut Model| {
                if !m.joining(i) {
                    m.join(i);
                }
            };
            match p {
                Pending::Join(call, sent) => {
                    let r = self.h.take(&call);
                    match error_of(r.error_code) {
                        None => {
                            assert!(
                                r.generation_id >= self.max_generation,
                                "generation went back: {} after {}",
                                r.generation_id,
                                self.max_generation
                            );
                            self.max_generation = r.generation_id;
                            if r.leader == r.member_id {
                                assert!(!r.members.is_empty(), "a leader without members");
                            } else if !r.skip_assignment {
                                assert!(r.members.is_empty(), "a follower got the members");
                            }
                            let c = &mut self.clients[i];
                            c.member_id = r.member_id.to_string();
                            c.generation = r.generation_id;
                            c.last_join = Some(r);
                            self.sync(i);
                        }
                        Some(E::MemberIdRequired) => {
                            if self.clients[i].member_id == sent {
                                self.clients[i].member_id = r.member_id.to_string();
                                rejoin(self);
                            }
                        }
                        Some(E::UnknownMemberId | E::FencedInstanceId) => self.forget_if(i, &sent),
                        Some(_) => {}
                    }
                }
                Pending::Sync(call, sent, generation) => {
                    let r = self.h.take(&call);
                    match error_of(r.error_code) {
                        None => {
                            let (g, applied) = self
                                .applied
                                .as_ref()
                                .expect("a sync succeeded before any generation completed");
                            if *g == generation {
                                let key = match &self.clients[i].instance {
                                    Some(x) => Key::Instance(x.clone()),
                                    None => Key::Member(sent.clone()),
                                };
                                assert_eq!(
                                    Some(&r.assignment),
                                    applied.get(&key),
                                    "client {i} ({key:?}) synced an assignment not from the leader: {applied:?}"
                                );
                            }
                        }
                        Some(E::RebalanceInProgress | E::IllegalGeneration) => rejoin(self),
                        Some(E::UnknownMemberId | E::FencedInstanceId) => self.forget_if(i, &sent),
                        Some(_) => {}
                    }
                }
                Pending::Heartbeat(call, sent) => {
                    let r = self.h.take(&call);
                    match error_of(r.error_code) {
                        Some(E::RebalanceInProgress | E::IllegalGeneration) => rejoin(self),
                        Some(E::UnknownMemberId | E::FencedInstanceId) => self.forget_if(i, &sent),
                        _ => {}
                    }
                }
                Pending::Leave(call) => {
                    self.h.take(&call);
                }
            }
        }

        fn check(&mut self) {
            let d = self.describe();
            let state = d.group_state.to_string();
            for c in &self.clients {
                let Some(conn) = c.conn.filter(|c| self.h.is_open(*c)) else {
                    continue;
                };
                if let Some((corr, key)) = self.h.outstanding(conn).first().copied() {
                    let allowed = match key {
                        ApiKey::JoinGroup => state == "PreparingRebalance",
                        ApiKey::SyncGroup => state == "CompletingRebalance",
                        _ => false,
                    };
                    assert!(
                        allowed,
                        "{key:?} #{corr} on {conn} unanswered in state {state} at {}",
                        self.h.now
                    );
                }
            }
            if state == "Stable" {
                let (_, applied) = self.applied.as_ref().expect("Stable without a leader sync");
                for m in &d.members {
                    let key = match &m.group_instance_id {
                        Some(i) => Key::Instance(i.to_string()),
                        None => Key::Member(m.member_id.to_string()),
                    };
                    assert_eq!(
                        Some(&m.member_assignment),
                        applied.get(&key),
                        "member {} ({key:?}) holds an assignment the leader did not give",
                        m.member_id
                    );
                }
            }
        }
    }

    fn error_of(code: i16) -> Option<E> {
        (code != 0).then(|| E::try_from_code(code).expect("a known error code"))
    }

    fn run(ops: &[Op]) {
        let mut m = Model::new();
        for op in ops {
            m.apply(op);
        }
        // Quiet: everyone heartbeats and follows until the group settles or empties.
        for _ in 0..20 {
            for i in 0..CLIENTS {
                m.apply(&Op::Heartbeat(i));
            }
            m.apply(&Op::Advance(300));
        }
        // Then the group is stable with exactly the clients that believe they are
        // members (those that left or were removed have forgotten their ids), or empty.
        let d = m.describe();
        let described: BTreeSet<String> =
            d.members.iter().map(|x| x.member_id.to_string()).collect();
        let believed: BTreeSet<String> = m
            .clients
            .iter()
            .filter(|c| !c.member_id.is_empty())
            .map(|c| c.member_id.clone())
            .collect();
        match d.group_state.as_str() {
            "Stable" | "Empty" | "Dead" => {
                assert_eq!(described, believed, "{}", d.group_state.as_str())
            }
            other => panic!("not settled: {other}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn classic_groups_keep_their_invariants(ops in proptest::collection::vec(op(), 1..120)) {
            run(&ops);
        }
    }

    #[test]
    fn a_fixed_sequence_reaches_stable_with_everyone() {
        let mut m = Model::new();
        for i in 0..CLIENTS {
            m.apply(&Op::Join(i, false));
        }
        m.apply(&Op::Advance(600));
        for _ in 0..3 {
            for i in 0..CLIENTS {
                m.apply(&Op::Heartbeat(i));
            }
            m.apply(&Op::Advance(300));
        }
        let d = m.describe();
        assert_eq!(d.group_state.as_str(), "Stable");
        assert_eq!(d.members.len(), CLIENTS);
        assert!(m.applied.is_some());
    }
}

#[test]
fn delete_groups_waits_for_every_store_delete() {
    let mut h = Harness::new();
    let c = h.connect();
    for g in ["e1", "e2"] {
        let r = h.call(c, 8, commit_request(g, "", -1, &[("orders", 0, 1)]));
        assert_eq!(codes(&r), [0]);
    }
    h.store.hold = true;
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![s("e1").into(), s("e2").into()];
    let call = h.send(c, 2, req);
    // A request behind it on the same connection waits too.
    let listed = h.send(c, 5, ListGroupsRequest::default());
    assert_eq!(h.held().len(), 2);
    assert!(h.waiting(&call) && h.waiting(&listed));
    // The first delete fails, the second succeeds.
    h.store.fail_deletes = 1;
    h.release_store();
    let r = h.take(&call);
    let results: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
    assert_eq!(results, [E::CoordinatorNotAvailable.code(), 0]);
    assert_eq!(h.store.get("e1", &tp("orders", 0)), Some(1));
    assert_eq!(h.store.get("e2", &tp("orders", 0)), None);
    // The groups were forgotten (e1's offsets stay for a retry).
    assert!(h.take(&listed).groups.is_empty());
    h.store.hold = false;
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![s("e1").into()];
    assert_eq!(h.call(c, 2, req).results[0].error_code, 0);
    assert!(h.store.offsets.is_empty());
}

/// Host data for `orders` (6 partitions): partition `hot` receives 1000 bytes/s, the
/// others 1.
fn orders_rates(hot: i32) -> Input {
    use drover_abi::assignor::{PartitionContext, TopicContext};
    use drover_abi::std_types::RSome;
    let partitions: Vec<PartitionContext> = (0..6)
        .map(|p| {
            let mut c = PartitionContext::unknown(p);
            c.produce_bytes_per_sec = RSome(if p == hot { 1000.0 } else { 1.0 });
            c
        })
        .collect();
    Input::PartitionStats(drover_coordinator::PartitionStats::new(
        [],
        [TopicContext {
            topic: "orders".into(),
            partitions: partitions.into(),
        }],
    ))
}

/// A KIP-848 member as a client reconciles: it owns what its last assignment said
/// (revoking and taking at once) and reports it at every heartbeat.
struct Reconciling {
    conn: ConnId,
    id: &'static str,
    epoch: i32,
    owned: Vec<(Uuid, Vec<i32>)>,
}

/// `rounds` heartbeats of every member, 100 ms apart; after every answer no partition
/// is owned by two members. Returns the group epochs the members reached.
fn reconcile(h: &mut Harness, members: &mut [Reconciling], rounds: usize) {
    for _ in 0..rounds {
        for i in 0..members.len() {
            let m = &members[i];
            let r = h.call(m.conn, 1, cg_beat("k", m.id, m.epoch, Some(&m.owned)));
            assert_eq!(r.error_code, 0, "{r:?}");
            members[i].epoch = r.member_epoch;
            if let Some(a) = cg_assignment(&r) {
                members[i].owned = a;
            }
            let mut seen: BTreeMap<i32, &str> = BTreeMap::new();
            for m in members.iter() {
                for (_, ps) in &m.owned {
                    for p in ps {
                        if let Some(other) = seen.insert(*p, m.id) {
                            panic!("orders-{p} owned by {other} and {} at once", m.id);
                        }
                    }
                }
            }
        }
        h.advance(100);
    }
}

/// Member `id` joins group `k` on a new connection, subscribed to `orders` with
/// server assignor `assignor`, holding what its join answer gave it.
fn join_reconciling(h: &mut Harness, id: &'static str, assignor: &str) -> Reconciling {
    let conn = h.connect();
    let r = h.call(conn, 1, cg_join("k", id, &["orders"], Some(assignor)));
    assert_eq!(r.error_code, 0, "{r:?}");
    Reconciling {
        conn,
        id,
        epoch: r.member_epoch,
        owned: cg_assignment(&r).unwrap_or_default(),
    }
}

fn owned_partitions(m: &Reconciling) -> Vec<i32> {
    let mut ps: Vec<i32> = m.owned.iter().flat_map(|(_, ps)| ps.clone()).collect();
    ps.sort();
    ps
}

#[test]
fn kip848_group_is_rerun_on_drift_and_moves_partitions_by_revoke_then_assign() {
    let mut cfg = config();
    cfg.rerun_on_drift_ms = [("by-rate".to_owned(), 1_000)].into_iter().collect();
    let mut h = Harness::with_assignors(cfg, common::TestAssignors::default());
    h.feed(orders_rates(0));
    let (m1, m2) = ("5Cq1X3ZpR1mGZtY9rG0y2A", "mY0cS9P8T6yXbq2Nw1vUeA");
    let mut members = vec![
        join_reconciling(&mut h, m1, "by-rate"),
        join_reconciling(&mut h, m2, "by-rate"),
    ];
    reconcile(&mut h, &mut members, 5);
    // by-rate: the hot partition alone to the first member, the rest to the second.
    assert_eq!(owned_partitions(&members[0]), [0]);
    assert_eq!(owned_partitions(&members[1]), [1, 2, 3, 4, 5]);
    let epoch = members[0].epoch;

    // The table that first finds the group starts its clock; one interval later a
    // table where partition 5 is hot re-runs the assignor: no member joined or left.
    h.feed(orders_rates(5));
    h.advance(1_000);
    h.feed(orders_rates(5));
    reconcile(&mut h, &mut members, 5);
    assert_eq!(owned_partitions(&members[0]), [5]);
    assert_eq!(owned_partitions(&members[1]), [0, 1, 2, 3, 4]);
    assert!(
        members.iter().all(|m| m.epoch == epoch + 1),
        "one new group epoch"
    );

    // Within the interval nothing is re-run, whatever the table says.
    h.feed(orders_rates(0));
    reconcile(&mut h, &mut members, 3);
    assert_eq!(owned_partitions(&members[0]), [5]);
}

/// A re-run whose assignor gives the target the group already has (the hot
/// partition did not move) starts no new group epoch: nothing for the members to do.
#[test]
fn kip848_rerun_that_moves_nothing_keeps_the_group_epoch() {
    let mut cfg = config();
    cfg.rerun_on_drift_ms = [("by-rate".to_owned(), 1_000)].into_iter().collect();
    let mut h = Harness::with_assignors(cfg, common::TestAssignors::default());
    h.feed(orders_rates(0));
    let mut members = vec![
        join_reconciling(&mut h, "5Cq1X3ZpR1mGZtY9rG0y2A", "by-rate"),
        join_reconciling(&mut h, "mY0cS9P8T6yXbq2Nw1vUeA", "by-rate"),
    ];
    reconcile(&mut h, &mut members, 5);
    let epoch = members[0].epoch;
    // Same hot partition, a table an interval later: the assignor runs, finds the
    // same target, and the epoch stays.
    h.advance(1_000);
    h.feed(orders_rates(0));
    h.advance(1_000);
    h.feed(orders_rates(0));
    reconcile(&mut h, &mut members, 3);
    assert!(
        members.iter().all(|m| m.epoch == epoch),
        "no new group epoch: {:?}",
        members.iter().map(|m| m.epoch).collect::<Vec<_>>()
    );
    assert_eq!(owned_partitions(&members[0]), [0]);
}

/// A group whose assignor a rescan removed is not re-run on drift: the default would
/// stand in and reshuffle it (and again when the assignor is back). No assignor runs,
/// the epoch stays.
#[test]
fn kip848_groups_whose_assignor_is_no_longer_loaded_are_not_rerun() {
    let mut cfg = config();
    cfg.rerun_on_drift_ms = [("drifty".to_owned(), 1_000)].into_iter().collect();
    let assignors = common::TestAssignors::default().with_alias("drifty", "range");
    let calls = assignors.calls.clone();
    let mut h = Harness::with_assignors(cfg, assignors);
    h.feed(orders_rates(0));
    let mut members = vec![join_reconciling(&mut h, "5Cq1X3ZpR1mGZtY9rG0y2A", "drifty")];
    reconcile(&mut h, &mut members, 2);
    let epoch = members[0].epoch;

    let without = common::TestAssignors {
        calls: calls.clone(),
        ..Default::default()
    };
    h.coord.replace_assignors(without, "");
    let before = calls.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..3 {
        h.advance(1_000);
        h.feed(orders_rates(5));
    }
    reconcile(&mut h, &mut members, 2);
    assert_eq!(members[0].epoch, epoch, "no new group epoch");
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "no assignor ran"
    );
}

#[test]
fn kip848_groups_of_an_unlisted_assignor_are_not_rerun() {
    let mut cfg = config();
    cfg.rerun_on_drift_ms = BTreeMap::new();
    let mut h = Harness::with_assignors(cfg, common::TestAssignors::default());
    h.feed(orders_rates(0));
    let mut members = vec![join_reconciling(
        &mut h,
        "5Cq1X3ZpR1mGZtY9rG0y2A",
        "by-rate",
    )];
    reconcile(&mut h, &mut members, 2);
    let epoch = members[0].epoch;
    h.feed(orders_rates(5));
    h.advance(5_000);
    h.feed(orders_rates(5));
    reconcile(&mut h, &mut members, 2);
    assert_eq!(members[0].epoch, epoch, "no new group epoch");
}

/// A reconciled KIP-848 member is told the steady interval the heartbeat budget
/// allows for all KIP-848 members of the coordinator (`consumer_heartbeat_budget_per_s`):
/// short while they are few, longer as they grow, never beyond
/// `consumer_heartbeat_interval_ms`; without a budget always that one.
#[test]
fn kip848_steady_interval_follows_the_heartbeat_budget() {
    fn reconciled_interval(h: &mut Harness, conn: ConnId, group: &str, member: &str) -> i32 {
        let r = h.call(conn, 1, cg_join(group, member, &["orders"], None));
        assert_eq!(r.error_code, 0, "{r:?}");
        let got = cg_assignment(&r).expect("its partitions");
        let r = h.call(conn, 1, cg_beat(group, member, r.member_epoch, Some(&got)));
        assert_eq!(r.error_code, 0, "{r:?}");
        r.heartbeat_interval_ms
    }
    let budgeted = CoordinatorConfig {
        consumer_heartbeat_interval_ms: 5_000,
        consumer_heartbeat_budget_per_s: 2,
        consumer_min_heartbeat_interval_ms: 1_000,
        ..kafka::config()
    };
    let mut h = Harness::with_config(budgeted);
    let c = h.connect();
    // One member: 1 × 1000 / 2 = 500 ms, raised to the 1 s minimum.
    assert_eq!(reconciled_interval(&mut h, c, "b0", "member-b0"), 1_000);
    for k in 1..6 {
        reconciled_interval(&mut h, c, &format!("b{k}"), &format!("member-b{k}"));
    }
    // Six members once counted again (at most once a second): 6 × 1000 / 2 = 3 s.
    h.advance(1_000);
    let all: Vec<(Uuid, Vec<i32>)> = vec![(orders(), (0..6).collect())];
    let r = h.call(c, 1, cg_beat("b0", "member-b0", 1, Some(&all)));
    assert_eq!(r.heartbeat_interval_ms, 3_000, "{r:?}");

    let unbudgeted = CoordinatorConfig {
        consumer_heartbeat_interval_ms: 5_000,
        consumer_heartbeat_budget_per_s: 0,
        ..kafka::config()
    };
    let mut h = Harness::with_config(unbudgeted);
    let c = h.connect();
    assert_eq!(reconciled_interval(&mut h, c, "u", "member-u"), 5_000);
}

/// Assignors run as the host runs plugins (coordinator ABI 3.6): the call is handed
/// out, not made inside `handle`. While it runs, the group's members keep being
/// answered (no assignment yet, told to come back soon); its result then gives them
/// their partitions.
#[test]
fn kip848_assignor_calls_run_off_the_coordinator_thread() {
    let assignors = common::TestAssignors::default().threaded();
    let calls = assignors.calls.clone();
    let mut h = Harness::with_assignors(config(), assignors);
    h.hold_assignors = true;
    let mut members = vec![join_reconciling(&mut h, "5Cq1X3ZpR1mGZtY9rG0y2A", "range")];
    reconcile(&mut h, &mut members, 3);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(members[0].owned.is_empty(), "{:?}", members[0].owned);
    let r = h.call(
        members[0].conn,
        1,
        cg_beat("k", members[0].id, members[0].epoch, None),
    );
    assert!(
        r.heartbeat_interval_ms <= config().consumer_reconcile_heartbeat_interval_ms as i32,
        "a member waiting for a running assignor comes back soon: {r:?}"
    );

    h.release_assignors();
    reconcile(&mut h, &mut members, 3);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(owned_partitions(&members[0]), [0, 1, 2, 3, 4, 5]);
}

/// A result that comes back after the group changed serves the members still there
/// (a late target is as good as the one in force), and the group's next run, over
/// the members as they are, follows at once: no partition is ever owned twice and
/// every member ends up with its share.
#[test]
fn kip848_a_late_assignor_result_serves_the_members_still_there() {
    let assignors = common::TestAssignors::default().threaded();
    let calls = assignors.calls.clone();
    let mut h = Harness::with_assignors(config(), assignors);
    h.hold_assignors = true;
    let mut members = vec![join_reconciling(&mut h, "5Cq1X3ZpR1mGZtY9rG0y2A", "range")];
    members.push(join_reconciling(&mut h, "mY0cS9P8T6yXbq2Nw1vUeA", "range"));
    reconcile(&mut h, &mut members, 2);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);

    // The held call was made for the first member alone.
    h.hold_assignors = false;
    h.release_assignors();
    reconcile(&mut h, &mut members, 8);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(owned_partitions(&members[0]), [0, 1, 2]);
    assert_eq!(owned_partitions(&members[1]), [3, 4, 5]);
}
