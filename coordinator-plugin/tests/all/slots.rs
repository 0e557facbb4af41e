//! Cluster mode (docs/protocol.md §6.8): coordinator slots, on virtual time. One
//! coordinator plays both the old and the new owner of a slot: losing the slot and
//! gaining it back exercises the same rules as a move to another broker, since the
//! new owner knows nothing of the old one's groups.

use crate::common;

use bytes::BytesMut;
use common::*;
use drover_coordinator::{
    ConnId, Coordinator, CoordinatorConfig, Event, GroupId, Input, Output, Ownership,
};
use drover_protocol as proto;
use drover_protocol::{ApiKey, ErrorCode, NativeRequest, NativeResponse};

const ST: i32 = 3_000;
const SLOTS: u32 = 4;
/// `max_session_timeout_ms`, and so the takeover wait.
const MAX_ST: i32 = 10_000;
const WAIT: u64 = MAX_ST as u64;

fn cluster_config() -> CoordinatorConfig {
    CoordinatorConfig {
        slot_count: Some(SLOTS),
        max_session_timeout_ms: MAX_ST,
        ..test_config()
    }
}

fn cluster_world() -> World {
    let mut w = World::new(cluster_config(), Params::fixed(), 1);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    w
}

/// The `nth` group id of the form `g<i>` in `slot`.
fn group_in_slot(slot: u32, nth: usize) -> String {
    (0..)
        .map(|i| format!("g{i}"))
        .filter(|g| proto::coordinator_slot(g, SLOTS) == slot)
        .nth(nth)
        .unwrap()
}

fn spec(id: &str, group: &str) -> ConsumerSpec {
    ConsumerSpec::new(
        id,
        group,
        proto::Subscription::static_topics([("orders", 1), ("payments", 1)]),
        ST,
    )
}

/// The channel of a member consumer.
fn channel(w: &World, id: &str) -> ConnId {
    match w.consumers[id].phase {
        Phase::Member(conn) => conn,
        ref other => panic!("{id} is not a member: {other:?}"),
    }
}

/// Sends one request on a fresh connection; returns the connection and the answer.
fn request(w: &mut World, request: NativeRequest) -> (ConnId, NativeResponse) {
    let key = request.api_key();
    let conn = w.raw_conn();
    w.raw_request(conn, 7, &request);
    w.run_for(10);
    let mut answers = w.raw_decoded(conn, key);
    assert_eq!(answers.len(), 1, "{answers:?}");
    let (corr, response) = answers.pop().unwrap();
    assert_eq!(corr, 7);
    (conn, response)
}

fn register_request(group: &str, consumer: &str) -> NativeRequest {
    NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
        group_id: group.into(),
        consumer_id: consumer.into(),
        host: "h".into(),
        session_timeout_ms: ST,
        subscription: proto::Subscription::static_topics([("orders", 1)]),
        auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
        assignor: None,
        member: proto::MemberData::default(),
    })
}

fn describe(w: &mut World, groups: Option<Vec<&str>>) -> proto::DescribeGroupsResponse {
    let request = NativeRequest::DescribeGroups(proto::DescribeGroupsRequest::new(
        groups.map(|g| g.into_iter().map(String::from).collect()),
    ));
    match request_answer(w, request) {
        NativeResponse::DescribeGroups(r) => r,
        other => panic!("{other:?}"),
    }
}

fn request_answer(w: &mut World, r: NativeRequest) -> NativeResponse {
    request(w, r).1
}

/// StartFetchers a consumer accepted at or after `t`.
fn starts_since(w: &World, id: &str, t: u64) -> Vec<StartSeen> {
    w.consumers[id]
        .starts
        .iter()
        .filter(|(at, _, _)| *at >= t)
        .cloned()
        .collect()
}

#[test]
fn a_group_of_a_slot_not_owned_gets_not_coordinator_and_leaves_no_state() {
    let mut w = cluster_world();
    let owned = group_in_slot(0, 0);
    let g = group_in_slot(1, 0);
    w.slot_gained(0);
    assert_eq!(
        w.coord.ownership(),
        &Ownership::Slots {
            count: SLOTS,
            owned: [0].into_iter().collect()
        }
    );
    assert!(w.coord.owns(&owned) && !w.coord.owns(&g));

    // RegisterConsumer: NOT_COORDINATOR, even for a request that is invalid otherwise.
    let (conn, answer) = request(&mut w, register_request(&g, "c"));
    let NativeResponse::RegisterConsumer(r) = answer else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::NOT_COORDINATOR);
    let message = r.error_message.unwrap_or_default();
    assert!(message.contains("slot 1 of 4"), "{message}");
    let NativeRequest::RegisterConsumer(mut bad) = register_request(&g, "") else {
        unreachable!()
    };
    bad.session_timeout_ms = 1;
    let NativeResponse::RegisterConsumer(r) =
        request_answer(&mut w, NativeRequest::RegisterConsumer(bad))
    else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::NOT_COORDINATOR);
    // An empty group id is INVALID_GROUP_ID wherever it is sent.
    let NativeResponse::RegisterConsumer(r) = request_answer(&mut w, register_request("", "c"))
    else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::INVALID_GROUP_ID);

    // CommitOffset, member and non-member forms: every partition NOT_COORDINATOR.
    for (consumer, generation) in [("c", 1), ("", -1)] {
        let commit = NativeRequest::CommitOffset(proto::CommitOffsetRequest {
            group_id: g.clone(),
            consumer_id: consumer.into(),
            generation,
            topics: vec![proto::TopicOffsets {
                topic: "orders".into(),
                partitions: (0..3)
                    .map(|p| proto::PartitionOffset {
                        partition: p,
                        offset: 5,
                        metadata: None,
                    })
                    .collect(),
            }],
        });
        let NativeResponse::CommitOffset(r) = request_answer(&mut w, commit) else {
            panic!()
        };
        assert_eq!(r.topics.len(), 1);
        assert_eq!(r.topics[0].partitions.len(), 3);
        assert!(r.topics[0]
            .partitions
            .iter()
            .all(|p| p.error_code == ErrorCode::NOT_COORDINATOR));
    }

    // FetchOffsets: NOT_COORDINATOR at top level, with or without a partition list.
    for topics in [None, Some(vec![proto::TopicPartitions::new("orders", [0])])] {
        let fetch = NativeRequest::FetchOffsets(proto::FetchOffsetsRequest {
            group_id: g.clone(),
            topics,
        });
        let NativeResponse::FetchOffsets(r) = request_answer(&mut w, fetch) else {
            panic!()
        };
        assert_eq!(r.error_code, ErrorCode::NOT_COORDINATOR);
        assert!(r.topics.is_empty());
    }

    // LeaveGroup.
    let leave = NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
        group_id: g.clone(),
        consumer_id: "c".into(),
    });
    let NativeResponse::LeaveGroup(r) = request_answer(&mut w, leave) else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::NOT_COORDINATOR);

    // DescribeGroups: per entry.
    let d = describe(&mut w, Some(vec![&g, "", &owned]));
    let codes: Vec<ErrorCode> = d.groups.iter().map(|e| e.error_code).collect();
    assert_eq!(
        codes,
        [
            ErrorCode::NOT_COORDINATOR,
            ErrorCode::INVALID_GROUP_ID,
            ErrorCode::GROUP_ID_NOT_FOUND
        ]
    );
    assert_eq!(d.groups[0].group_id, g);
    assert!(d.groups[0].members.is_empty() && d.groups[0].state.is_empty());

    // Nothing was kept: no group, no timer, nothing written.
    assert!(w.coord.group_ids().is_empty());
    assert_eq!(w.coord.poll_timeout(), None);
    assert!(w.store.is_empty());
    assert_eq!(w.events.len(), 1, "only the slot gain: {:?}", w.events);

    // The refused registration left an ordinary connection: once the slot is ours,
    // the same connection registers.
    assert!(!w.closed_by_coordinator(conn));
    w.slot_gained(1);
    w.raw_request(conn, 8, &register_request(&g, "c"));
    w.run_for(10);
    let answers = w.raw_decoded(conn, ApiKey::RegisterConsumer);
    let Some((8, NativeResponse::RegisterConsumer(r))) = answers.last() else {
        panic!("{answers:?}")
    };
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!(w.coord.group_ids(), [GroupId::new(&g)]);
}

#[test]
fn a_gained_slot_waits_one_session_timeout_bound_before_its_first_start() {
    let mut w = cluster_world();
    let g = group_in_slot(2, 0);
    // Offsets the slot's previous coordinator committed to the shared store.
    for p in 0..6 {
        w.store.insert(
            (GroupId::new(&g), tp("orders", p)),
            (100 + i64::from(p), None),
        );
    }
    w.run_for(1_000);
    let gained = w.now;
    w.slot_gained(2);
    assert_eq!(w.coord.takeover_until(2), Some(gained + WAIT));
    assert_eq!(
        w.count_events(|e| matches!(
            e,
            Event::SlotGained { slot: 2, takeover_until } if *takeover_until == gained + WAIT
        )),
        1
    );
    // Consumers come back at once and register; heartbeats flow, nothing starts.
    for id in ["c1", "c2"] {
        w.join(spec(id, &g));
    }
    w.run_until(gained + WAIT - 1);
    for id in ["c1", "c2"] {
        let c = &w.consumers[id];
        assert!(c.is_member(), "{id} is not registered");
        assert!(c.starts.is_empty(), "{id} started during the takeover wait");
        assert!(c.requests_seen.contains(&ApiKey::Heartbeat));
    }
    let snap = w.coord.group(&g).unwrap();
    assert_eq!(snap.members.len(), 2);
    assert_eq!(snap.generation.0, 0);
    assert!(snap.members.iter().all(|m| m.owned.is_empty()));
    assert_eq!(
        w.count_events(|e| matches!(e, Event::RebalanceStarted { .. })),
        0
    );
    // A consumer that registers late in the wait joins the same first rebalance.
    w.join(spec("c3", &g));
    w.run_until(gained + WAIT + 1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    let first = ["c1", "c2", "c3"]
        .iter()
        .flat_map(|id| w.consumers[*id].starts.iter())
        .map(|(at, _, _)| *at)
        .min()
        .unwrap();
    assert!(first >= gained + WAIT, "first start at {first}");
    assert_eq!(
        w.count_events(|e| matches!(e, Event::GenerationStarted { .. })),
        1
    );
    // Start offsets come from the store.
    for id in ["c1", "c2", "c3"] {
        let (_, generation, parts) = &w.consumers[id].starts[0];
        assert_eq!(*generation, 1);
        for (tp, start) in parts {
            let expected = if tp.topic.as_str() == "orders" {
                100 + i64::from(tp.partition)
            } else {
                -2
            };
            assert_eq!(*start, expected, "{id} {tp}");
        }
    }
}

#[test]
fn losing_a_slot_closes_its_channels_and_forgets_its_groups() {
    let mut w = cluster_world();
    let g = group_in_slot(2, 0);
    let other = group_in_slot(3, 0);
    w.slot_gained(2);
    w.slot_gained(3);
    for id in ["c1", "c2"] {
        w.join(spec(id, &g));
    }
    w.join(spec("d1", &other));
    w.run_for(WAIT + 2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    let d1_before = (w.consumers["d1"].generation, w.owned("d1"));
    let channels = [channel(&w, "c1"), channel(&w, "c2")];

    // A commit is in flight when the slot goes, and a second waits behind it.
    w.params.store_delay = (500, 500);
    let generation = w.consumers["c1"].generation;
    let owned: Vec<_> = w.owned("c1").into_iter().collect();
    let first: Vec<_> = owned.iter().map(|tp| (tp.clone(), 1_000)).collect();
    let second: Vec<_> = owned.iter().map(|tp| (tp.clone(), 2_000)).collect();
    w.commit("c1", generation, &first);
    w.run_for(10);
    w.commit("c1", generation, &second);
    w.run_for(10);
    let lost = w.now;
    w.slot_lost(2);

    // At once: the group is forgotten and the channels closed.
    assert_eq!(w.coord.group_ids(), [GroupId::new(&other)]);
    assert!(w.coord.group(&g).is_none());
    for conn in channels {
        assert!(w.closed_by_coordinator(conn));
    }
    assert_eq!(
        w.count_events(|e| matches!(
            e,
            Event::SlotLost {
                slot: 2,
                groups: 1,
                consumers: 2,
                ..
            }
        )),
        1
    );
    // The commit result arrives for a group that no longer exists: it only answers the
    // request that waited for it. The consumers keep re-registering in vain.
    w.run_for(3_000);
    w.assert_clean();
    let results = &w.consumers["c1"].commit_results;
    let answers: Vec<&Vec<_>> = results
        .iter()
        .filter(|r| r.iter().any(|(_, o, _)| *o == 1_000 || *o == 2_000))
        .collect();
    assert_eq!(answers.len(), 2, "{results:?}");
    assert!(answers[0]
        .iter()
        .all(|(_, o, code)| *o == 1_000 && *code == ErrorCode::NONE));
    assert!(answers[1]
        .iter()
        .all(|(_, o, code)| *o == 2_000 && *code == ErrorCode::NOT_COORDINATOR));
    for tp in &owned {
        assert_eq!(
            w.store[&(GroupId::new(&g), tp.clone())].0,
            1_000,
            "{tp}: the batch in flight was written, the pending one dropped"
        );
    }
    for id in ["c1", "c2"] {
        let c = &w.consumers[id];
        assert!(!c.is_member() && c.owned.is_empty(), "{id}");
        assert!(c.register_errors.contains(&ErrorCode::NOT_COORDINATOR));
        assert!(starts_since(&w, id, lost).is_empty());
    }
    assert!(w.coord.group(&g).is_none());
    // The other slot's group is untouched.
    assert_eq!((w.consumers["d1"].generation, w.owned("d1")), d1_before);
    assert!(w.consumers["d1"].is_member());

    // The slot comes back (here, to the same broker): the consumers re-register, and
    // after the takeover wait they start from the store's offsets.
    w.params.store_delay = (1, 1);
    let gained = w.now;
    let store = w.store.clone();
    w.slot_gained(2);
    w.run_for(WAIT + 2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    let mut all = Vec::new();
    for id in ["c1", "c2"] {
        let starts = starts_since(&w, id, gained);
        assert!(!starts.is_empty(), "{id} never started again");
        assert!(
            starts[0].0 >= gained + WAIT,
            "{id} started at {}",
            starts[0].0
        );
        assert_eq!(starts[0].1, 1, "generations start again at the new owner");
        all.extend(starts[0].2.clone());
    }
    assert_eq!(all.len(), 9);
    for (tp, start) in all {
        let stored = store
            .get(&(GroupId::new(&g), tp.clone()))
            .map_or(-2, |v| v.0);
        if owned.contains(&tp) {
            assert_eq!(start, 1_000, "{tp}");
        } else {
            assert_eq!(start, stored, "{tp}");
        }
    }
}

#[test]
fn a_consumer_cut_off_from_the_old_owner_stops_before_the_new_owner_starts_anyone() {
    let mut w = cluster_world();
    let g = group_in_slot(1, 0);
    w.slot_gained(1);
    for id in ["c1", "c2"] {
        w.join(spec(id, &g));
    }
    w.run_for(WAIT + 2_000);
    w.check_coverage().unwrap();
    let c1_owned = w.owned("c1");
    assert!(!c1_owned.is_empty());
    // c1's channel goes silent: neither side notices, so c1 delivers until its lease
    // ends (up to ST from now). The slot moves meanwhile.
    w.cut_channel("c1", None, None);
    // No coordinator frame reaches c1 any more, so its lease deadline stays.
    let c1_stops = w.consumers["c1"].lease_deadline;
    w.run_for(100);
    w.slot_lost(1);
    w.run_for(50);
    let gained = w.now;
    assert!(
        c1_stops > gained,
        "c1 still delivers when the slot is gained again"
    );
    w.slot_gained(1);
    // A new consumer and c2 (whose channel was closed) register with the new owner.
    w.join(spec("c3", &g));
    // The safety check runs after every event: nobody delivers c1's partitions while
    // c1 may. c1 itself loses its lease, re-registers, and all three share the group.
    w.run_for(WAIT + 3_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    let taken = ["c2", "c3"]
        .iter()
        .flat_map(|id| starts_since(&w, id, gained))
        .filter(|(_, _, parts)| parts.iter().any(|(tp, _)| c1_owned.contains(tp)))
        .map(|(at, _, _)| at)
        .min()
        .expect("c1's partitions handed out again");
    assert!(taken >= gained + WAIT, "taken at {taken}");
    assert!(c1_stops <= taken, "c1 delivers until {c1_stops}");
    assert!(w.consumers["c1"].registrations >= 2);
    assert_eq!(
        w.count_events(|e| matches!(e, Event::SafetyCheckFailed { .. })),
        0
    );
}

#[test]
fn losing_a_slot_mid_rebalance_sends_nothing_more() {
    let mut w = cluster_world();
    let g = group_in_slot(0, 0);
    w.slot_gained(0);
    w.join(spec("c1", &g));
    w.params.store_delay = (400, 400);
    // Until the rebalance reads its start offsets.
    w.step_until(1_000_000, |w| {
        w.coord.group(&g).is_some_and(|s| s.state == "fetching")
    });
    assert!(w.now >= WAIT);
    w.slot_lost(0);
    w.run_for(2_000);
    w.assert_clean();
    assert!(w.consumers["c1"].starts.is_empty());
    assert_eq!(
        w.count_events(|e| matches!(e, Event::GenerationStarted { .. })),
        0
    );
    assert!(w.coord.group_ids().is_empty());
}

#[test]
fn describe_groups_shows_only_the_groups_of_owned_slots() {
    let mut w = cluster_world();
    let a = group_in_slot(0, 0);
    let b = group_in_slot(3, 0);
    let unknown = group_in_slot(0, 1);
    w.slot_gained(0);
    w.slot_gained(3);
    w.join(spec("a1", &a));
    w.join(spec("b1", &b));
    w.run_for(100);
    let all = describe(&mut w, None);
    let ids: Vec<&str> = all.groups.iter().map(|e| e.group_id.as_str()).collect();
    let mut expected = vec![a.as_str(), b.as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    w.slot_lost(3);
    w.run_for(10);
    let all = describe(&mut w, None);
    assert_eq!(all.groups.len(), 1);
    assert_eq!(all.groups[0].group_id, a);
    assert_eq!(all.groups[0].error_code, ErrorCode::NONE);
    assert_eq!(all.groups[0].members.len(), 1);
    let named = describe(&mut w, Some(vec![&b, &a, &unknown]));
    let codes: Vec<ErrorCode> = named.groups.iter().map(|e| e.error_code).collect();
    assert_eq!(
        codes,
        [
            ErrorCode::NOT_COORDINATOR,
            ErrorCode::NONE,
            ErrorCode::GROUP_ID_NOT_FOUND
        ]
    );
    // Owning nothing: the null form lists nothing.
    w.slot_lost(0);
    assert!(describe(&mut w, None).groups.is_empty());
}

// ---------------------------------------------------------------- the core directly

fn raw_frame(request: &NativeRequest) -> bytes::Bytes {
    let mut buf = BytesMut::new();
    proto::encode_request_frame(&mut buf, 1, Some("t"), request).unwrap();
    buf.freeze().slice(4..)
}

#[test]
fn slot_inputs_out_of_place_are_ignored() {
    // Standalone: slot inputs change nothing.
    let mut k = Coordinator::new(test_config(), TestAssignors::default()).unwrap();
    assert!(k
        .handle(
            0,
            Input::SlotGained {
                slot: 0,
                stopped_ms: 0
            }
        )
        .is_empty());
    assert!(k.handle(0, Input::SlotLost { slot: 0 }).is_empty());
    assert_eq!(k.ownership(), &Ownership::All);
    assert!(k.owns("anything"));
    assert_eq!(k.takeover_until(0), None);

    let mut k = Coordinator::new(cluster_config(), TestAssignors::default()).unwrap();
    // Out of range, lost while not owned: nothing.
    assert!(k
        .handle(
            0,
            Input::SlotGained {
                slot: SLOTS,
                stopped_ms: 0
            }
        )
        .is_empty());
    assert!(k.handle(0, Input::SlotLost { slot: 1 }).is_empty());
    // Gained twice: the takeover wait is not restarted.
    let out = k.handle(
        5,
        Input::SlotGained {
            slot: 1,
            stopped_ms: 0,
        },
    );
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Event(Event::SlotGained { slot: 1, .. }))));
    assert!(k
        .handle(
            900,
            Input::SlotGained {
                slot: 1,
                stopped_ms: 0
            }
        )
        .is_empty());
    assert_eq!(k.takeover_until(1), Some(5 + WAIT));
    // A registration while owned, then the loss: one close, no timers left.
    let g = group_in_slot(1, 0);
    let out = k.handle(
        1_000,
        Input::Frame {
            conn: ConnId(1),
            bytes: raw_frame(&register_request(&g, "c")),
        },
    );
    assert!(matches!(out[0], Output::ChannelOpened { conn: ConnId(1) }));
    assert!(matches!(
        out[1],
        Output::Answer {
            conn: ConnId(1),
            ..
        }
    ));
    assert!(k.poll_timeout().is_some());
    let out = k.handle(1_001, Input::SlotLost { slot: 1 });
    let closes: Vec<_> = out
        .iter()
        .filter(|o| matches!(o, Output::CloseConnection { conn: ConnId(1) }))
        .collect();
    assert_eq!(closes.len(), 1);
    assert!(!out
        .iter()
        .any(|o| matches!(o, Output::Answer { .. } | Output::Push { .. })));
    assert_eq!(k.poll_timeout(), None);
    assert!(k.group_ids().is_empty());
    // The host's ConnectionClosed for it, and later frames on it, are harmless.
    assert!(k
        .handle(1_002, Input::ConnectionClosed { conn: ConnId(1) })
        .is_empty());
}

/// A lost slot's Kafka commits queued behind a batch in flight are not written by the
/// broker that lost the slot: the queued OffsetCommit is answered NOT_COORDINATOR (as a
/// native CommitOffset waiting in the same slot is), the one already handed to the
/// store gets its outcome, and only its offset lands.
#[test]
fn losing_a_slot_answers_its_queued_kafka_commits_not_coordinator() {
    use kafka_protocol::messages::OffsetCommitResponse;
    let mut w = cluster_world();
    let g = group_in_slot(2, 0);
    w.slot_gained(2);
    w.run_for(WAIT + 10);
    w.params.store_delay = (500, 500);
    let first = w.raw_conn();
    w.raw_bytes(first, kafka_simple_commit(&g, "orders", 0, 1_000));
    w.run_for(10);
    let second = w.raw_conn();
    w.raw_bytes(second, kafka_simple_commit(&g, "orders", 0, 2_000));
    w.run_for(10);
    w.slot_lost(2);
    w.run_for(3_000);
    w.assert_clean();
    let code = |conn| {
        let answer: OffsetCommitResponse = kafka_answer(&w, conn, 8);
        answer.topics[0].partitions[0].error_code
    };
    assert_eq!(code(first), ErrorCode::NONE.0);
    assert_eq!(code(second), ErrorCode::NOT_COORDINATOR.0);
    assert_eq!(
        w.store[&(GroupId::new(&g), tp("orders", 0))].0,
        1_000,
        "the queued commit was not written"
    );
}
