//! Scenario tests: one coordinator, a few fake consumers, virtual time.

use crate::common;

use common::*;
use drover_coordinator::{CoordinatorConfig, Event, FailureReason, RebalanceMode};
use drover_protocol as proto;
use drover_protocol::{ApiKey, ErrorCode, NativeRequest, NativeResponse};

const ST: i32 = 3_000;

fn world() -> World {
    world_with(test_config())
}

fn world_with(config: CoordinatorConfig) -> World {
    let mut w = World::new(config, Params::fixed(), 1);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    w
}

fn static_spec(id: &str, topics: &[&str]) -> ConsumerSpec {
    ConsumerSpec::new(
        id,
        "g",
        proto::Subscription::static_topics(topics.iter().map(|t| (*t, 1))),
        ST,
    )
}

fn balanced(w: &World, ids: &[&str], total: usize) {
    let sizes: Vec<usize> = ids.iter().map(|id| w.owned(id).len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), total, "sizes {sizes:?}");
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(max - min <= 1, "unbalanced: {sizes:?}");
}

#[test]
fn join_of_three_gives_a_balanced_assignment() {
    let mut w = world();
    for id in ["c1", "c2", "c3"] {
        w.join(static_spec(id, &["orders", "payments"]));
    }
    w.run_for(2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    balanced(&w, &["c1", "c2", "c3"], 9);
    // One rebalance for the three joins (debounced), generation 1.
    assert_eq!(
        w.count_events(|e| matches!(e, Event::GenerationStarted { .. })),
        1
    );
    let snap = w.coord.group("g").unwrap();
    assert_eq!(snap.generation.0, 1);
    assert_eq!(snap.state, "stable");
    assert_eq!(snap.members.len(), 3);
    for c in w.consumers.values() {
        assert_eq!(c.generation, 1);
        // Fresh partitions start from −2 (nothing committed).
        assert!(c.starts[0].2.iter().all(|(_, s)| *s == -2));
    }
    // Heartbeats flow: every consumer answered several by now.
    for c in w.consumers.values() {
        let pings = c
            .requests_seen
            .iter()
            .filter(|k| **k == ApiKey::Heartbeat)
            .count();
        assert!(pings >= 1, "{} saw {pings} heartbeats", c.spec.id);
    }
}

/// Partitions a consumer owned, and when others first started any of them afterwards.
fn first_takeover(
    w: &World,
    from: &str,
    owned: &std::collections::BTreeSet<drover_coordinator::TopicPartition>,
    after: u64,
) -> Option<u64> {
    w.consumers
        .values()
        .filter(|c| c.spec.id != from)
        .flat_map(|c| c.starts.iter())
        .filter(|(t, _, parts)| {
            *t >= after && parts.iter().any(|(tp, s)| owned.contains(tp) && *s != -1)
        })
        .map(|(t, _, _)| *t)
        .min()
}

fn three(w: &mut World) {
    for id in ["c1", "c2", "c3"] {
        w.join(static_spec(id, &["orders", "payments"]));
    }
    w.run_for(2_000);
    w.check_coverage().unwrap();
}

#[test]
fn a_leaving_consumer_releases_its_partitions_at_once() {
    let mut w = world();
    three(&mut w);
    let owned = w.owned("c2");
    let t0 = w.now;
    w.leave("c2");
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    balanced(&w, &["c1", "c3"], 9);
    let taken = first_takeover(&w, "c2", &owned, t0).expect("taken over");
    // Released by LeaveGroup (rule c): no lease wait, only the debounce.
    assert!(taken - t0 < 500, "took {} ms", taken - t0);
    assert_eq!(
        w.count_events(
            |e| matches!(e, Event::MemberLeft { consumer, .. } if consumer.as_str() == "c2")
        ),
        1
    );
    assert_eq!(w.coord.group("g").unwrap().members.len(), 2);
}

#[test]
fn a_crashed_consumers_partitions_move_only_after_its_lease() {
    let mut w = world();
    three(&mut w);
    let owned = w.owned("c2");
    let t0 = w.now;
    w.crash("c2");
    w.run_for(2 * ST as u64);
    w.assert_clean();
    w.check_coverage().unwrap();
    balanced(&w, &["c1", "c3"], 9);
    assert_eq!(
        w.count_events(|e| matches!(
            e,
            Event::MemberFailed {
                reason: FailureReason::ChannelClosed,
                ..
            }
        )),
        1
    );
    // Rule d: not before st after the coordinator last heard from c2, which was at
    // most one heartbeat interval (plus a round trip) before the crash.
    let taken = first_takeover(&w, "c2", &owned, t0).expect("taken over");
    assert!(
        taken >= t0 + ST as u64 - ST as u64 / 3 - 5,
        "taken over after {} ms",
        taken - t0
    );
}

#[test]
fn a_silently_partitioned_consumer_stops_before_its_partitions_move() {
    // Neither side hears of the cut: the coordinator fails c2 by session timeout, and c2
    // stops at its lease deadline. The safety check runs at every step.
    let mut w = world();
    three(&mut w);
    let owned = w.owned("c2");
    let t0 = w.now;
    w.cut_channel("c2", None, None);
    w.run_for(3 * ST as u64);
    w.assert_clean();
    w.check_coverage().unwrap();
    // The coordinator failed c2 by its session timeout, or c2's lease ran out first (its
    // lease is anchored earlier) and its new registration replaced the old one.
    assert_eq!(
        w.count_events(|e| matches!(
            e,
            Event::MemberFailed {
                reason: FailureReason::SessionTimeout | FailureReason::Replaced,
                ..
            }
        )),
        1
    );
    // The partitions were started again (by c2's new registration, as the sticky
    // assignor gives the free partitions to the member with fewest).
    assert!(first_takeover(&w, "", &owned, t0).is_some());
    // c2 noticed through its lease and came back.
    assert!(w.consumers["c2"].registrations >= 2);
}

#[test]
fn a_consumer_with_a_dead_fetcher_releases_at_once() {
    let mut w = world();
    three(&mut w);
    let owned = w.owned("c3");
    let t0 = w.now;
    w.fetcher_dies("c3");
    w.run_for(2_000);
    w.assert_clean();
    assert_eq!(
        w.count_events(|e| matches!(
            e,
            Event::MemberFailed {
                reason: FailureReason::FetchersUnhealthy,
                ..
            }
        )),
        1
    );
    // Rule b: no lease wait; at most a heartbeat interval to notice, then the debounce.
    let taken = first_takeover(&w, "c3", &owned, t0).expect("taken over");
    assert!(taken - t0 < ST as u64 / 3 + 500, "took {} ms", taken - t0);
    w.run_for(2_000);
    w.check_coverage().unwrap();
}

#[test]
fn a_slow_responder_is_failed_by_its_session_timeout() {
    let mut params = Params::fixed();
    params.answer_delay = (0, 0);
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 6)]);
    w.join(static_spec("c1", &["orders"]));
    w.join(ConsumerSpec::new(
        "slow",
        "g",
        proto::Subscription::static_topics([("orders", 1)]),
        300,
    ));
    w.run_for(1_000);
    w.check_coverage().unwrap();
    // From now on "slow" takes longer than its session timeout to answer.
    w.params.answer_delay = (400, 400);
    w.run_for(3_000);
    w.assert_clean();
    assert!(w.count_events(|e| matches!(e, Event::MemberFailed { consumer, reason: FailureReason::SessionTimeout, .. } if consumer.as_str() == "slow")) >= 1);
}

#[test]
fn a_subscription_change_rebalances() {
    let mut w = world();
    three(&mut w);
    w.resubscribe("c1", proto::Subscription::static_topics([("payments", 1)]));
    w.run_for(2 * ST as u64);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert!(w
        .owned("c1")
        .iter()
        .all(|tp| tp.topic.as_str() == "payments"));
    assert!(
        w.count_events(|e| matches!(
            e,
            Event::MemberFailed {
                reason: FailureReason::Replaced,
                ..
            }
        )) == 1
    );
}

#[test]
fn a_partition_count_change_rebalances() {
    let mut w = world();
    three(&mut w);
    let generation = w.coord.group("g").unwrap().generation;
    w.set_topics(&[("orders", 9), ("payments", 3)]);
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    balanced(&w, &["c1", "c2", "c3"], 12);
    assert!(w.coord.group("g").unwrap().generation > generation);
    // The new partitions start from −2; nothing was stopped (sticky, incremental).
    for c in w.consumers.values() {
        let (_, _, last) = c.starts.last().unwrap();
        for (tp, start) in last {
            if tp.topic.as_str() == "orders" && tp.partition >= 6 {
                assert_eq!(*start, -2);
            } else {
                assert_eq!(*start, -1, "{tp} restarted");
            }
        }
        assert!(c.stops.is_empty(), "{} was stopped", c.spec.id);
    }
}

fn wildcard_spec(id: &str, pattern: &str) -> ConsumerSpec {
    ConsumerSpec::new(id, "g", proto::Subscription::whitelist(pattern, 1), ST)
}

#[test]
fn wildcard_topic_creation_and_deletion_rebalance() {
    let mut w = world();
    w.join(wildcard_spec("c1", "ord.*"));
    w.join(wildcard_spec("c2", "ord.*"));
    w.run_for(1_000);
    w.check_coverage().unwrap();
    assert_eq!(w.owned("c1").len() + w.owned("c2").len(), 6);
    // A matching topic appears.
    w.set_topics(&[("orders", 6), ("payments", 3), ("orders-eu", 4)]);
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert_eq!(w.owned("c1").len() + w.owned("c2").len(), 10);
    // A non-matching topic appears: no rebalance.
    let generation = w.coord.group("g").unwrap().generation;
    w.set_topics(&[
        ("orders", 6),
        ("payments", 3),
        ("orders-eu", 4),
        ("audit", 2),
    ]);
    w.run_for(1_000);
    assert_eq!(w.coord.group("g").unwrap().generation, generation);
    // The matching topic is deleted: its partitions are stopped.
    w.set_topics(&[("orders", 6), ("payments", 3), ("audit", 2)]);
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert_eq!(w.owned("c1").len() + w.owned("c2").len(), 6);
    let stopped: usize = w
        .consumers
        .values()
        .flat_map(|c| c.stops.iter())
        .map(|(_, _, parts)| {
            parts
                .iter()
                .filter(|tp| tp.topic.as_str() == "orders-eu")
                .count()
        })
        .sum();
    assert_eq!(stopped, 4);
}

#[test]
fn blacklist_subscriptions_follow_topics_too() {
    let mut w = world();
    w.join(ConsumerSpec::new(
        "c1",
        "g",
        proto::Subscription::blacklist("pay.*", 1),
        ST,
    ));
    w.run_for(1_000);
    assert_eq!(w.owned("c1").len(), 6);
    w.set_topics(&[
        ("orders", 6),
        ("payments", 3),
        ("audit", 2),
        ("__internal", 5),
    ]);
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert_eq!(w.owned("c1").len(), 8);
}

#[test]
fn commits_are_checked_per_partition() {
    let mut w = world();
    three(&mut w);
    let generation = w.consumers["c1"].generation;
    let mine = w.owned("c1");
    let not_mine = w.owned("c2");
    let a = mine.iter().next().unwrap().clone();
    let b = not_mine.iter().next().unwrap().clone();
    w.commit("c1", generation, &[(a.clone(), 5_000)]);
    w.commit("c1", generation - 1, &[(a.clone(), 5_001)]);
    w.commit(
        "c1",
        generation,
        &[
            (b.clone(), 7),
            (tp("nope", 0), 1),
            (tp("orders", 99), 1),
            (a.clone(), -3),
        ],
    );
    w.commit("ghost", generation, &[(a.clone(), 1)]);
    w.run_for(100);
    let results = &w.consumers["c1"].commit_results;
    assert_eq!(results.len(), 3);
    assert_eq!(results[0], vec![(a.clone(), 5_000, ErrorCode::NONE)]);
    assert_eq!(
        results[1],
        vec![(a.clone(), 5_001, ErrorCode::ILLEGAL_GENERATION)]
    );
    let codes: Vec<ErrorCode> = results[2].iter().map(|r| r.2).collect();
    assert_eq!(
        codes,
        [
            ErrorCode::ILLEGAL_GENERATION,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode::INVALID_REQUEST,
        ]
    );
    // NONE means durable.
    let stored = w.store[&(drover_coordinator::GroupId::new("g"), a.clone())].0;
    assert!(stored >= 5_000);
    w.assert_clean();
}

#[test]
fn a_commit_from_an_old_generation_is_refused_after_a_rebalance() {
    let mut w = world();
    three(&mut w);
    let old = w.consumers["c1"].generation;
    let kept = w.owned("c1");
    w.join(static_spec("c4", &["orders", "payments"]));
    w.run_for(1_000);
    w.check_coverage().unwrap();
    let new = w.consumers["c1"].generation;
    assert!(new > old);
    let still = w.owned("c1");
    let p = kept
        .intersection(&still)
        .next()
        .expect("c1 kept a partition")
        .clone();
    w.commit("c1", old, &[(p.clone(), 9_999)]);
    w.commit("c1", new, &[(p.clone(), 9_999)]);
    w.run_for(100);
    let r = &w.consumers["c1"].commit_results;
    assert_eq!(r[0][0].2, ErrorCode::ILLEGAL_GENERATION);
    assert_eq!(r[1][0].2, ErrorCode::NONE);
    w.assert_clean();
}

#[test]
fn a_stopped_partition_commit_gets_rebalance_in_progress() {
    // c1 is slow to answer StartFetcher... simpler: catch the window between c1's
    // StopFetcher answer and the StartFetcher round by making the store slow.
    let mut params = Params::fixed();
    params.store_delay = (300, 300);
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 4)]);
    w.join(static_spec("c1", &["orders"]));
    w.run_for(2_000);
    assert_eq!(w.owned("c1").len(), 4);
    let generation = w.consumers["c1"].generation;
    w.join(static_spec("c2", &["orders"]));
    // Run until c1 has answered its StopFetcher.
    w.step_until(100_000, |w| !w.consumers["c1"].stops.is_empty());
    w.run_for(5);
    let stopped = w.consumers["c1"].stops[0].2[0].clone();
    let kept = w.owned("c1").into_iter().next().unwrap();
    assert_eq!(w.coord.group("g").unwrap().state, "fetching");
    w.commit("c1", generation, &[(stopped.clone(), 1), (kept.clone(), 1)]);
    w.run_for(2_000);
    let r = &w.consumers["c1"].commit_results[0];
    assert_eq!(r[0].2, ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(r[1].2, ErrorCode::NONE);
    w.assert_clean();
    w.check_coverage().unwrap();
}

#[test]
fn offsets_reported_on_heartbeats_are_committed_and_used_as_start_offsets() {
    let mut w = world();
    three(&mut w);
    w.run_for(3_000);
    let g = drover_coordinator::GroupId::new("g");
    for id in ["c1", "c2", "c3"] {
        for tp in w.owned(id) {
            let stored = w.store.get(&(g.clone(), tp.clone())).map(|v| v.0);
            assert!(stored.is_some_and(|o| o > 0), "{tp}: {stored:?}");
        }
    }
    // A joiner takes partitions over from their committed (final) offsets.
    w.join(static_spec("c4", &["orders", "payments"]));
    w.run_for(1_000);
    w.assert_clean();
    let (_, _, starts) = w.consumers["c4"].starts.last().unwrap().clone();
    assert!(!starts.is_empty());
    for (tp, start) in starts {
        assert!(start > 0, "{tp} started at {start}");
        // The final offset from the StopFetcher answer was stored first.
        assert!(w.store[&(g.clone(), tp.clone())].0 >= start);
    }
}

#[test]
fn fetch_offsets_reads_the_store() {
    let mut w = world();
    three(&mut w);
    w.run_for(1_000);
    let mine: Vec<_> = w.owned("c1").into_iter().collect();
    w.fetch(
        "c1",
        Some(vec![
            proto::TopicPartitions::new(mine[0].topic.as_str(), vec![mine[0].partition]),
            proto::TopicPartitions::new("orders", vec![999]),
        ]),
    );
    w.fetch("c1", None);
    w.run_for(100);
    let r = &w.consumers["c1"].fetch_results;
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].error_code, ErrorCode::NONE);
    assert!(r[0].topics[0].partitions[0].offset > 0);
    assert_eq!(
        r[0].topics[1].partitions[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(r[0].topics[1].partitions[0].offset, -1);
    let all: usize = r[1].topics.iter().map(|t| t.partitions.len()).sum();
    assert_eq!(all, 9);
}

#[test]
fn a_consumer_crashing_during_the_stop_phase_restarts_the_rebalance() {
    let mut params = Params::fixed();
    params.answer_delay = (50, 50);
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    three(&mut w);
    w.join(static_spec("c4", &["orders", "payments"]));
    // Wait for the StopFetchers, then cut c2's channel before it answers.
    let t0 = w.now;
    while !w.consumers["c2"].stops.iter().any(|(t, _, _)| *t >= t0) {
        w.step();
    }
    w.cut_channel("c2", Some(10), None);
    w.run_for(3 * ST as u64);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert!(
        w.count_events(
            |e| matches!(e, Event::MemberFailed { consumer, .. } if consumer.as_str() == "c2")
        ) >= 1
    );
}

#[test]
fn a_consumer_crashing_during_the_start_phase_restarts_the_rebalance() {
    let mut params = Params::fixed();
    params.answer_delay = (50, 50);
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    three(&mut w);
    let generations = w.count_events(|e| matches!(e, Event::GenerationStarted { .. }));
    w.join(static_spec("c4", &["orders", "payments"]));
    w.step_until(100_000, |w| {
        w.count_events(|e| matches!(e, Event::GenerationStarted { .. })) > generations
    });
    // The StartFetcher round is out; c3 dies before answering.
    w.run_for(2);
    w.crash("c3");
    w.run_for(3 * ST as u64);
    w.assert_clean();
    w.check_coverage().unwrap();
    balanced(&w, &["c1", "c2", "c4"], 9);
    // Another generation followed the interrupted one.
    assert!(w.count_events(|e| matches!(e, Event::GenerationStarted { .. })) >= generations + 2);
}

fn mode_world(mode: RebalanceMode) -> World {
    let mut w = world_with(CoordinatorConfig {
        rebalance_mode: mode,
        ..test_config()
    });
    w.join(static_spec("c1", &["orders"]));
    w.join(static_spec("c2", &["orders"]));
    w.run_for(2_000);
    w.join(static_spec("c3", &["payments"]));
    w.run_for(2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    w
}

#[test]
fn incremental_mode_does_not_stop_consumers_that_keep_their_partitions() {
    let w = mode_world(RebalanceMode::Incremental);
    for id in ["c1", "c2"] {
        let c = &w.consumers[id];
        assert!(c.stops.is_empty(), "{id} was stopped");
        let (_, _, last) = c.starts.last().unwrap();
        assert!(last.iter().all(|(_, s)| *s == -1), "{id}: {last:?}");
        assert_eq!(c.starts.len(), 2);
    }
}

#[test]
fn eager_mode_stops_everyone() {
    let w = mode_world(RebalanceMode::Eager);
    for id in ["c1", "c2"] {
        let c = &w.consumers[id];
        assert_eq!(c.stops.len(), 1, "{id}");
        assert!(c.stops[0].1, "stop_all");
        let (_, _, last) = c.starts.last().unwrap();
        // Restarted from the committed final offsets.
        assert!(last.iter().all(|(_, s)| *s >= 0), "{id}: {last:?}");
    }
}

/// Twenty members joining 20 ms apart give one rebalance: the first member's waits the
/// quiet time like any other trigger's (it is not started at once, which gave the first
/// member every partition and took them back one round later), and each joiner comes
/// within the quiet time of the previous one.
#[test]
fn a_join_storm_gives_one_rebalance() {
    let mut w = world();
    for i in 0..20 {
        w.join(static_spec(&format!("c{i:02}"), &["orders", "payments"]));
        w.run_for(20);
        if i == 0 {
            assert_eq!(
                w.count_events(|e| matches!(e, Event::GenerationStarted { .. })),
                0,
                "the first member's rebalance waits the quiet time"
            );
        }
    }
    w.run_for(2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert_eq!(
        w.count_events(|e| matches!(e, Event::RebalanceStarted { .. })),
        1
    );
    assert_eq!(
        w.count_events(|e| matches!(e, Event::GenerationStarted { .. })),
        1
    );
}

#[test]
fn the_debounce_is_bounded() {
    // Joins every 40 ms (under the 50 ms delay) for 2 s: the 500 ms cap forces
    // rebalances during the storm.
    let mut w = world();
    for i in 0..50 {
        w.join(static_spec(&format!("c{i:02}"), &["orders", "payments"]));
        w.run_for(40);
    }
    w.run_for(3_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    let n = w.count_events(|e| matches!(e, Event::RebalanceStarted { .. }));
    assert!((2..=10).contains(&n), "{n} rebalances");
}

#[test]
fn the_group_size_is_limited() {
    let mut w = world_with(CoordinatorConfig {
        max_group_size: 2,
        ..test_config()
    });
    for id in ["c1", "c2", "c3"] {
        w.join(static_spec(id, &["orders", "payments"]));
    }
    w.run_for(2_000);
    let refused: Vec<_> = w
        .consumers
        .values()
        .filter(|c| {
            c.register_errors
                .contains(&ErrorCode::GROUP_MAX_SIZE_REACHED)
        })
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(w.coord.group("g").unwrap().members.len(), 2);
    w.assert_clean();
}

fn register(
    w: &mut World,
    corr: i32,
    f: impl FnOnce(&mut proto::RegisterConsumerRequest),
) -> (drover_coordinator::ConnId, proto::RegisterConsumerResponse) {
    let conn = w.raw_conn();
    let mut r = proto::RegisterConsumerRequest {
        group_id: "g".into(),
        consumer_id: format!("raw{corr}"),
        host: "h".into(),
        session_timeout_ms: ST,
        subscription: proto::Subscription::static_topics([("orders", 1)]),
        auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
        assignor: None,
        member: proto::MemberData::default(),
    };
    f(&mut r);
    w.raw_request(conn, corr, &NativeRequest::RegisterConsumer(r));
    w.run_for(10);
    let responses = w.raw_decoded(conn, ApiKey::RegisterConsumer);
    let Some((c, NativeResponse::RegisterConsumer(r))) = responses.into_iter().next() else {
        panic!("no answer");
    };
    assert_eq!(c, corr);
    (conn, r)
}

#[test]
fn registration_errors_are_precise() {
    let mut w = world();
    let code = |w: &mut World, corr, f: fn(&mut proto::RegisterConsumerRequest)| {
        register(w, corr, f).1.error_code
    };
    assert_eq!(
        code(&mut w, 1, |r| r.group_id.clear()),
        ErrorCode::INVALID_GROUP_ID
    );
    assert_eq!(
        code(&mut w, 2, |r| r.consumer_id.clear()),
        ErrorCode::INVALID_REQUEST
    );
    assert_eq!(
        code(&mut w, 3, |r| r.session_timeout_ms = 10),
        ErrorCode::INVALID_SESSION_TIMEOUT
    );
    assert_eq!(
        code(&mut w, 4, |r| r.session_timeout_ms = 1_000_000),
        ErrorCode::INVALID_SESSION_TIMEOUT
    );
    assert_eq!(
        code(&mut w, 5, |r| r.subscription =
            proto::Subscription::whitelist("orders(", 1)),
        ErrorCode::INVALID_REGULAR_EXPRESSION
    );
    assert_eq!(
        code(&mut w, 6, |r| r.subscription =
            proto::Subscription::blacklist("(?=x)", 1)),
        ErrorCode::INVALID_REGULAR_EXPRESSION
    );
    // Structural errors come before the regex check.
    assert_eq!(
        code(&mut w, 8, |r| {
            r.subscription = proto::Subscription::whitelist("(", 0);
        }),
        ErrorCode::INVALID_REQUEST
    );
    // A registered consumer with `sticky`; another names `range`.
    let (_, ok) = register(&mut w, 9, |_| {});
    assert_eq!(ok.error_code, ErrorCode::NONE);
    assert_eq!(ok.heartbeat_interval_ms, ST / 3);
    assert_eq!(ok.generation, 0);
    assert_eq!(
        code(&mut w, 10, |r| r.assignor = Some("range".into())),
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    assert_eq!(
        code(&mut w, 11, |r| r.assignor = Some("sticky".into())),
        ErrorCode::NONE
    );
    // Too many static topics.
    let mut small = world_with(CoordinatorConfig {
        max_subscription_topics: 1,
        ..test_config()
    });
    assert_eq!(
        code(&mut small, 12, |r| r.subscription =
            proto::Subscription::static_topics([("a", 1), ("b", 1)])),
        ErrorCode::INVALID_REQUEST
    );
}

#[test]
fn a_refused_registration_leaves_an_ordinary_connection() {
    let mut w = world();
    let (conn, r) = register(&mut w, 1, |r| r.session_timeout_ms = 1);
    assert_eq!(r.error_code, ErrorCode::INVALID_SESSION_TIMEOUT);
    // The consumer may retry on the same connection.
    let mut ok = proto::RegisterConsumerRequest {
        group_id: "g".into(),
        consumer_id: "retry".into(),
        host: "h".into(),
        session_timeout_ms: ST,
        subscription: proto::Subscription::static_topics([("orders", 1)]),
        auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
        assignor: None,
        member: proto::MemberData::default(),
    };
    ok.host = "h2".into();
    w.raw_request(conn, 2, &NativeRequest::RegisterConsumer(ok));
    w.run_for(10);
    let answers = w.raw_decoded(conn, ApiKey::RegisterConsumer);
    assert_eq!(answers.len(), 2);
    assert!(!w.closed_by_coordinator(conn));
    assert_eq!(w.coord.group("g").unwrap().members[0].host, "h2");
}

#[test]
fn coordinator_apis_and_malformed_frames_close_the_connection() {
    let mut w = world();
    let conn = w.raw_conn();
    w.raw_request(
        conn,
        1,
        &NativeRequest::Heartbeat(proto::HeartbeatRequest {
            group_id: "g".into(),
            generation: 0,
        }),
    );
    w.run_for(10);
    assert!(w.closed_by_coordinator(conn));
    let conn = w.raw_conn();
    w.raw_bytes(
        conn,
        bytes::Bytes::from_static(&[0x4e, 0x20, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 1]),
    );
    w.run_for(10);
    assert!(w.closed_by_coordinator(conn));
    assert!(w.raw_responses.is_empty());
    assert_eq!(
        w.count_events(|e| matches!(e, Event::ConnectionRejected { .. })),
        2
    );
}

#[test]
fn leave_group_answers() {
    let mut w = world();
    let conn = w.raw_conn();
    w.raw_request(
        conn,
        1,
        &NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
            group_id: "g".into(),
            consumer_id: "nobody".into(),
        }),
    );
    w.raw_request(
        conn,
        2,
        &NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
            group_id: "".into(),
            consumer_id: "nobody".into(),
        }),
    );
    w.run_for(10);
    let codes: Vec<_> = w
        .raw_decoded(conn, ApiKey::LeaveGroup)
        .into_iter()
        .map(|(c, r)| match r {
            NativeResponse::LeaveGroup(r) => (c, r.error_code),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        codes,
        [
            (1, ErrorCode::UNKNOWN_MEMBER_ID),
            (2, ErrorCode::INVALID_GROUP_ID)
        ]
    );
}

#[test]
fn a_group_naming_an_assignor_that_is_not_loaded_runs_the_default() {
    let mut w = world();
    let mut spec = static_spec("c1", &["orders"]);
    spec.assignor = Some("not-loaded".into());
    w.join(spec);
    w.run_for(1_000);
    // Registered (not refused), assigned by the default assignor, and the fallback is
    // reported as an event and a metric.
    assert!(w.consumers["c1"].register_errors.is_empty());
    w.check_coverage().unwrap();
    assert_eq!(
        w.coord.group("g").unwrap().assignor.as_deref(),
        Some("not-loaded")
    );
    let fallbacks = w.count_events(|e| {
        matches!(e, Event::AssignorFallback { requested, used, .. }
            if requested == "not-loaded" && used == "sticky")
    });
    assert!(fallbacks >= 1, "{fallbacks}");
    assert!(w.metric_total("assignor_fallbacks") >= 1);

    // A rescan loads it: the next rebalance runs it, with no fallback.
    w.coord.replace_assignors(
        TestAssignors::default().with_alias("not-loaded", "sticky"),
        "",
    );
    let before = w.count_events(|e| matches!(e, Event::AssignorFallback { .. }));
    let mut spec = static_spec("c2", &["orders"]);
    spec.assignor = Some("not-loaded".into());
    w.join(spec);
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert_eq!(
        w.count_events(|e| matches!(e, Event::AssignorFallback { .. })),
        before
    );
}

#[test]
fn a_group_whose_assignor_fails_runs_the_default_instead_of_stalling() {
    let assignors = TestAssignors::default();
    assignors
        .broken
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let mut w = World::with_assignors(test_config(), Params::fixed(), 1, assignors);
    w.set_topics(&[("orders", 6)]);
    for id in ["c1", "c2"] {
        let mut spec = static_spec(id, &["orders"]);
        spec.assignor = Some("broken".into());
        w.join(spec);
    }
    w.run_for(2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert!(
        w.count_events(
            |e| matches!(e, Event::AssignorFailed { assignor, .. } if assignor == "broken")
        ) >= 1
    );
    assert!(
        w.count_events(
            |e| matches!(e, Event::AssignorFallback { requested, used, .. }
        if requested == "broken" && used == "sticky")
        ) >= 1
    );
    assert!(w.metric_total("assignor_fallbacks") >= 1);
}

#[test]
fn a_failing_assignor_is_retried() {
    let assignors = TestAssignors::default();
    assignors
        .broken
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let mut w = World::with_assignors(
        CoordinatorConfig {
            default_assignor: "broken".into(),
            ..test_config()
        },
        Params::fixed(),
        1,
        assignors.clone(),
    );
    w.set_topics(&[("orders", 6)]);
    w.join(static_spec("c1", &["orders"]));
    w.run_for(1_000);
    assert!(w.count_events(|e| matches!(e, Event::AssignorFailed { .. })) >= 3);
    assert!(w.owned("c1").is_empty());
    assignors
        .broken
        .store(false, std::sync::atomic::Ordering::SeqCst);
    w.run_for(1_000);
    w.assert_clean();
    w.check_coverage().unwrap();
}

#[test]
fn offset_store_failures_are_retried() {
    let mut params = Params::fixed();
    params.commit_fail_rate = 0.5;
    params.fetch_fail_rate = 0.5;
    let mut w = World::new(test_config(), params, 7);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    three(&mut w);
    w.join(static_spec("c4", &["orders", "payments"]));
    w.run_for(5_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert!(w.count_events(|e| matches!(e, Event::CommitFailed { .. })) > 0);
}

#[test]
fn poll_timeout_drives_heartbeats() {
    let mut w = world();
    w.join(static_spec("c1", &["orders"]));
    w.run_for(1_000);
    let next = w.coord.poll_timeout().expect("a heartbeat is scheduled");
    assert!(next > w.now && next <= w.now + ST as u64 / 3 + 1);
    let before = w.consumers["c1"].requests_seen.len();
    w.run_for(10 * ST as u64 / 3 + 10);
    let pings = w.consumers["c1"].requests_seen[before..]
        .iter()
        .filter(|k| **k == ApiKey::Heartbeat)
        .count();
    assert!((9..=11).contains(&pings), "{pings} pings");
    w.assert_clean();
}

// ---------------------------------------------------------------- raw channel clients

fn raw_register(w: &mut World, id: &str, st: i32) -> drover_coordinator::ConnId {
    let conn = w.raw_conn();
    w.raw_request(
        conn,
        1,
        &NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
            group_id: "g".into(),
            consumer_id: id.into(),
            host: "raw".into(),
            session_timeout_ms: st,
            subscription: proto::Subscription::static_topics([("orders", 1)]),
            auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
            assignor: None,
            member: proto::MemberData::default(),
        }),
    );
    w.run_for(5);
    conn
}

/// The coordinator requests a raw client received on its channel, in order.
fn channel_requests(w: &World, conn: drover_coordinator::ConnId) -> Vec<(i32, NativeRequest)> {
    w.raw_responses
        .iter()
        .filter(|(c, _)| *c == conn)
        .filter_map(|(_, b)| proto::decode_request_frame(b.clone()).ok())
        .map(|(h, r)| (h.correlation_id, r))
        .collect()
}

fn answer(w: &mut World, conn: drover_coordinator::ConnId, corr: i32, response: &NativeResponse) {
    let mut buf = bytes::BytesMut::new();
    proto::encode_response_frame(&mut buf, corr, response).unwrap();
    w.raw_bytes(conn, buf.freeze().slice(4..));
}

fn failures(w: &World, reason: FailureReason) -> usize {
    w.count_events(|e| matches!(e, Event::MemberFailed { reason: r, .. } if *r == reason))
}

#[test]
fn registering_the_same_id_again_replaces_the_old_registration() {
    let mut w = world();
    let first = raw_register(&mut w, "c1", ST);
    let second = raw_register(&mut w, "c1", ST);
    assert!(w.closed_by_coordinator(first));
    assert!(!w.closed_by_coordinator(second));
    assert_eq!(failures(&w, FailureReason::Replaced), 1);
    assert_eq!(w.coord.group("g").unwrap().members.len(), 1);
}

#[test]
fn a_wrong_correlation_id_on_the_channel_fails_the_consumer() {
    let mut w = world();
    let conn = raw_register(&mut w, "c1", ST);
    w.run_for(500);
    let requests = channel_requests(&w, conn);
    let (corr, NativeRequest::StartFetcher(_)) = &requests[0] else {
        panic!("{requests:?}")
    };
    let ok = NativeResponse::StartFetcher(proto::StartFetcherResponse {
        error_code: ErrorCode::NONE,
    });
    answer(&mut w, conn, corr + 1, &ok);
    w.run_for(10);
    assert!(w.closed_by_coordinator(conn));
    assert_eq!(failures(&w, FailureReason::ProtocolViolation), 1);
    // Its partitions wait for the lease (rule d): still held.
    let snap = w.coord.group("g").unwrap();
    assert_eq!(snap.held_by_failed.len(), 6);
    w.run_for(ST as u64);
    assert!(w.coord.group("g").unwrap().held_by_failed.is_empty());
}

#[test]
fn a_frame_with_no_request_outstanding_fails_the_consumer() {
    let mut w = world();
    let conn = raw_register(&mut w, "c1", ST);
    let hb = NativeResponse::Heartbeat(proto::HeartbeatResponse {
        error_code: ErrorCode::NONE,
        fetchers_healthy: true,
        offsets: vec![],
    });
    answer(&mut w, conn, 0, &hb);
    w.run_for(10);
    assert!(w.closed_by_coordinator(conn));
    assert_eq!(failures(&w, FailureReason::ProtocolViolation), 1);
}

#[test]
fn an_error_answer_releases_at_once() {
    let mut w = world();
    let conn = raw_register(&mut w, "raw", ST);
    w.run_for(500);
    let requests = channel_requests(&w, conn);
    let (corr, NativeRequest::StartFetcher(start)) = &requests[0] else {
        panic!("{requests:?}")
    };
    assert_eq!(start.assignment[0].partitions.len(), 6);
    let ok = NativeResponse::StartFetcher(proto::StartFetcherResponse {
        error_code: ErrorCode::NONE,
    });
    answer(&mut w, conn, *corr, &ok);
    w.run_for(ST as u64 / 3 + 10);
    let requests = channel_requests(&w, conn);
    let (corr, NativeRequest::Heartbeat(_)) = requests.last().unwrap() else {
        panic!("{requests:?}")
    };
    // A regular consumer joins; then the raw one answers its Heartbeat with an error.
    w.join(static_spec("c2", &["orders"]));
    w.run_for(100);
    assert!(w.owned("c2").is_empty());
    let t0 = w.now;
    let error = NativeResponse::Heartbeat(proto::HeartbeatResponse {
        error_code: ErrorCode::ILLEGAL_GENERATION,
        fetchers_healthy: true,
        offsets: vec![],
    });
    answer(&mut w, conn, *corr, &error);
    w.run_for(500);
    assert_eq!(failures(&w, FailureReason::ErrorResponse), 1);
    // Rule b: no lease wait.
    assert_eq!(w.owned("c2").len(), 6);
    let started = w.consumers["c2"].starts.last().unwrap().0;
    assert!(started - t0 < 200, "{}", started - t0);
    w.assert_clean();
}

#[test]
fn non_member_commits_and_metadata_limits() {
    let mut w = world();
    let conn = w.raw_conn();
    let commit = |generation: i32, consumer: &str, metadata: Option<String>| {
        NativeRequest::CommitOffset(proto::CommitOffsetRequest {
            group_id: "g".into(),
            consumer_id: consumer.into(),
            generation,
            topics: vec![proto::TopicOffsets {
                topic: "orders".into(),
                partitions: vec![proto::PartitionOffset {
                    partition: 0,
                    offset: 100,
                    metadata,
                }],
            }],
        })
    };
    // A reset tool commits while the group has no consumers.
    w.raw_request(conn, 1, &commit(-1, "", Some("reset".into())));
    w.raw_request(conn, 2, &commit(-1, "", Some("x".repeat(5000))));
    w.run_for(10);
    let g = drover_coordinator::GroupId::new("g");
    assert_eq!(w.store[&(g, tp("orders", 0))].1.as_deref(), Some("reset"));
    w.join(static_spec("c1", &["orders"]));
    w.run_for(1_000);
    // Now the group has a consumer: refused. And the consumer started from 100.
    w.raw_request(conn, 3, &commit(-1, "", None));
    w.run_for(10);
    let codes: Vec<_> = w
        .raw_decoded(conn, ApiKey::CommitOffset)
        .into_iter()
        .map(|(c, r)| match r {
            NativeResponse::CommitOffset(r) => (c, r.topics[0].partitions[0].error_code),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        codes,
        [
            (1, ErrorCode::NONE),
            (2, ErrorCode::OFFSET_METADATA_TOO_LARGE),
            (3, ErrorCode::UNKNOWN_MEMBER_ID)
        ]
    );
    let (_, _, starts) = &w.consumers["c1"].starts[0];
    assert!(starts.contains(&(tp("orders", 0), 100)));
}

#[test]
fn responses_on_a_connection_keep_request_order() {
    // A FetchOffsets waits for the store; a LeaveGroup after it on the same connection
    // is answered after it.
    let mut params = Params::fixed();
    params.store_delay = (50, 50);
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 2)]);
    let conn = w.raw_conn();
    w.raw_request(
        conn,
        1,
        &NativeRequest::FetchOffsets(proto::FetchOffsetsRequest {
            group_id: "g".into(),
            topics: None,
        }),
    );
    w.raw_request(
        conn,
        2,
        &NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
            group_id: "g".into(),
            consumer_id: "x".into(),
        }),
    );
    w.run_for(200);
    let mut order = Vec::new();
    for (_, b) in &w.raw_responses {
        let mut b = b.clone();
        order.push(
            proto::ResponseHeader::decode(&mut b)
                .unwrap()
                .correlation_id,
        );
    }
    assert_eq!(order, [1, 2]);
}

#[test]
fn a_rebalance_completes_under_constant_heartbeat_commits_and_a_slow_store() {
    // 20 consumers answering a Heartbeat every 100 ms with fresh offsets, a store that
    // takes 150 ms per batch: the commit pipeline is never empty. The rebalance only
    // waits for the offsets of the partitions it reads.
    let mut params = Params::fixed();
    params.store_delay = (150, 150);
    params.consume_every = 10;
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 40)]);
    for i in 0..20 {
        w.join(ConsumerSpec::new(
            &format!("c{i:02}"),
            "g",
            proto::Subscription::static_topics([("orders", 1)]),
            300,
        ));
    }
    w.run_for(3_000);
    w.check_coverage().unwrap();
    let generations = w.count_events(|e| matches!(e, Event::GenerationStarted { .. }));
    w.join(ConsumerSpec::new(
        "late",
        "g",
        proto::Subscription::static_topics([("orders", 1)]),
        300,
    ));
    w.run_for(2_000);
    w.assert_clean();
    w.check_coverage().unwrap();
    assert!(w.count_events(|e| matches!(e, Event::GenerationStarted { .. })) > generations);
    assert_eq!(w.owned("late").len(), 1);
}

// ------------------------------------------------------------------ DescribeGroups

/// Sends DescribeGroups on a fresh connection and returns the answer.
fn describe(w: &mut World, groups: Option<Vec<&str>>) -> proto::DescribeGroupsResponse {
    let conn = w.raw_conn();
    let request = proto::DescribeGroupsRequest::new(
        groups.map(|g| g.into_iter().map(String::from).collect()),
    );
    w.raw_request(conn, 9, &NativeRequest::DescribeGroups(request));
    w.run_for(5);
    assert!(!w.closed_by_coordinator(conn));
    let mut answers = w.raw_decoded(conn, ApiKey::DescribeGroups);
    assert_eq!(answers.len(), 1, "{answers:?}");
    let Some((9, NativeResponse::DescribeGroups(r))) = answers.pop() else {
        panic!("{answers:?}")
    };
    r
}

/// The partitions of a described member, flattened.
fn described_partitions(
    m: &proto::DescribedMember,
) -> std::collections::BTreeSet<drover_coordinator::TopicPartition> {
    m.partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| tp(&t.topic, *p)))
        .collect()
}

#[test]
fn describe_groups_shows_a_formed_group() {
    let mut w = world();
    w.join(static_spec("c1", &["orders", "payments"]));
    let mut c2 = ConsumerSpec::new(
        "c2",
        "g",
        proto::Subscription::whitelist("ord.*", 2),
        ST * 2,
    );
    c2.assignor = Some("sticky".into());
    w.join(c2);
    w.run_for(2_000);
    w.check_coverage().unwrap();

    let r = describe(&mut w, Some(vec!["g"]));
    assert_eq!(r.groups.len(), 1);
    let g = &r.groups[0];
    assert_eq!(g.group_id, "g");
    assert_eq!(g.error_code, ErrorCode::NONE);
    assert_eq!(g.state, proto::DescribedGroup::STABLE);
    let snap = w.coord.group("g").unwrap();
    assert_eq!(g.generation, snap.generation.0);
    assert!(g.generation >= 1);
    assert_eq!(g.assignor.as_deref(), Some("sticky"));
    assert_eq!(g.rebalance_mode, proto::DescribedGroup::INCREMENTAL);
    assert!(g.held_by_failed.is_empty());

    let ids: Vec<&str> = g.members.iter().map(|m| m.consumer_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    let (m1, m2) = (&g.members[0], &g.members[1]);
    assert_eq!(m1.host, "test-host");
    assert_eq!(m1.session_timeout_ms, ST);
    assert_eq!(m2.session_timeout_ms, 2 * ST);
    assert_eq!(m1.generation, g.generation);
    assert_eq!(m2.generation, g.generation);
    assert_eq!(m1.subscription, "static: orders(1), payments(1)");
    assert_eq!(m2.subscription, "whitelist: ord.* (2 streams)");
    assert_eq!(m1.topics, ["orders", "payments"]);
    assert_eq!(m2.topics, ["orders"]);
    assert_eq!(m1.auto_offset_reset, proto::AutoOffsetReset::EARLIEST);
    // The partitions are what each consumer owns, and together all 9, once each.
    assert_eq!(described_partitions(m1), w.owned("c1"));
    assert_eq!(described_partitions(m2), w.owned("c2"));
    assert_eq!(
        described_partitions(m1).len() + described_partitions(m2).len(),
        9
    );
    assert!(described_partitions(m2)
        .iter()
        .all(|p| p.topic.as_str() == "orders"));
    for m in &g.members {
        // Sorted by topic, then partition.
        let topics: Vec<&str> = m.partitions.iter().map(|t| t.topic.as_str()).collect();
        assert!(topics.windows(2).all(|w| w[0] < w[1]), "{topics:?}");
        assert!(m
            .partitions
            .iter()
            .all(|t| t.partitions.windows(2).all(|w| w[0] < w[1])));
    }
    w.assert_clean();
}

#[test]
fn describe_groups_of_an_unknown_group_says_not_found() {
    let mut w = world();
    w.join(static_spec("c1", &["orders"]));
    w.run_for(1_000);
    let r = describe(&mut w, Some(vec!["nope", "g", "", "nope"]));
    let codes: Vec<(&str, ErrorCode)> = r
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("nope", ErrorCode::GROUP_ID_NOT_FOUND),
            ("g", ErrorCode::NONE),
            ("", ErrorCode::INVALID_GROUP_ID),
            ("nope", ErrorCode::GROUP_ID_NOT_FOUND),
        ]
    );
    // Not found: every other field is empty.
    assert_eq!(
        r.groups[0],
        proto::DescribedGroup::error("nope", ErrorCode::GROUP_ID_NOT_FOUND)
    );
    assert_eq!(r.groups[0].state, "");
    assert_eq!(r.groups[0].generation, 0);
    assert_eq!(r.groups[0].assignor, None);
    assert!(r.groups[0].members.is_empty());
    // Describing creates nothing.
    assert_eq!(w.coord.group_ids().len(), 1);
    // An empty list describes nothing.
    assert!(describe(&mut w, Some(vec![])).groups.is_empty());
}

#[test]
fn describe_groups_with_null_lists_every_group() {
    let mut w = world();
    assert!(describe(&mut w, None).groups.is_empty());
    w.join(static_spec("c1", &["orders"]));
    w.join(ConsumerSpec::new(
        "a1",
        "alpha",
        proto::Subscription::static_topics([("payments", 1)]),
        ST,
    ));
    w.join(ConsumerSpec::new(
        "z1",
        "zulu",
        proto::Subscription::static_topics([("payments", 1)]),
        ST,
    ));
    w.run_for(1_000);
    w.leave("z1");
    w.run_for(1_000);

    let r = describe(&mut w, None);
    let ids: Vec<&str> = r.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(ids, ["alpha", "g", "zulu"]);
    assert!(r.groups.iter().all(|g| g.error_code == ErrorCode::NONE));
    let alpha = &r.groups[0];
    assert_eq!(alpha.state, "stable");
    assert_eq!(alpha.members.len(), 1);
    assert_eq!(described_partitions(&alpha.members[0]).len(), 3);
    // A group whose last consumer left is still there, empty, with its generation.
    let zulu = &r.groups[2];
    assert_eq!(zulu.state, proto::DescribedGroup::EMPTY);
    assert!(zulu.members.is_empty());
    assert_eq!(zulu.assignor, None);
    assert_eq!(zulu.generation, 1);
    // Without members, the mode is that of the default assignor.
    assert_eq!(zulu.rebalance_mode, "incremental");
    // The same as naming them.
    assert_eq!(describe(&mut w, Some(vec!["alpha", "g", "zulu"])), r);
}

#[test]
fn describe_groups_reports_partitions_held_by_a_failed_consumer() {
    let mut w = world_with(CoordinatorConfig {
        assignor_modes: [("sticky".to_owned(), RebalanceMode::Eager)]
            .into_iter()
            .collect(),
        ..test_config()
    });
    w.join(static_spec("c1", &["orders"]));
    w.join(static_spec("c2", &["orders"]));
    w.run_for(1_000);
    let owned = w.owned("c2");
    w.crash("c2");
    w.run_for(200);
    let r = describe(&mut w, Some(vec!["g"]));
    let g = &r.groups[0];
    assert_eq!(g.rebalance_mode, "eager");
    let held: std::collections::BTreeSet<drover_coordinator::TopicPartition> = g
        .held_by_failed
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| tp(&t.topic, *p)))
        .collect();
    assert_eq!(held, owned);
    assert_eq!(g.members.len(), 1);
}

#[test]
fn describe_groups_on_the_channel_fails_the_consumer() {
    // DescribeGroups is a consumer request: on the coordinator channel C only answers.
    let mut w = world();
    let conn = raw_register(&mut w, "c1", ST);
    w.run_for(500);
    w.raw_request(
        conn,
        7,
        &NativeRequest::DescribeGroups(proto::DescribeGroupsRequest::new(None)),
    );
    w.run_for(10);
    assert!(w.closed_by_coordinator(conn));
    assert_eq!(failures(&w, FailureReason::ProtocolViolation), 1);
    assert!(w.raw_decoded(conn, ApiKey::DescribeGroups).is_empty());
}

/// Offsets a native group accepted while its batch was in flight, for a topic deleted
/// before they were written, never reach the store (the host removes the topic's
/// stored offsets after the batch in flight): their CommitOffset entries are answered
/// UNKNOWN_TOPIC_OR_PARTITION, the rest of the request is written.
#[test]
fn pending_native_offsets_of_a_deleted_topic_never_reach_the_store() {
    let mut params = Params::fixed();
    params.store_delay = (100, 100);
    let mut w = World::new(test_config(), params, 1);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    let conn = w.raw_conn();
    let commit = |w: &mut World, corr: i32, offsets: &[(&str, i32, i64)]| {
        let topics = offsets
            .iter()
            .map(|(t, p, o)| proto::TopicOffsets {
                topic: t.to_string(),
                partitions: vec![proto::PartitionOffset {
                    partition: *p,
                    offset: *o,
                    metadata: None,
                }],
            })
            .collect();
        let request = proto::CommitOffsetRequest {
            group_id: "solo".into(),
            consumer_id: String::new(),
            generation: -1,
            topics,
        };
        w.raw_request(conn, corr, &NativeRequest::CommitOffset(request));
        w.run_for(10);
    };
    // In flight for 100 ms; the next two wait behind it.
    commit(&mut w, 1, &[("payments", 0, 1)]);
    commit(&mut w, 2, &[("orders", 0, 60), ("payments", 1, 5)]);
    commit(&mut w, 3, &[("orders", 1, 7)]);
    w.set_topics(&[("payments", 3)]);
    w.run_for(500);
    let codes: Vec<(i32, Vec<ErrorCode>)> = w
        .raw_decoded(conn, ApiKey::CommitOffset)
        .into_iter()
        .map(|(corr, r)| {
            let NativeResponse::CommitOffset(r) = r else {
                panic!("{r:?}")
            };
            let codes = r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect();
            (corr, codes)
        })
        .collect();
    let unknown = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
    assert_eq!(
        codes,
        [
            (1, vec![ErrorCode::NONE]),
            (2, vec![unknown, ErrorCode::NONE]),
            (3, vec![unknown]),
        ]
    );
    let stored: Vec<(String, i64)> = w
        .store
        .iter()
        .map(|((_, tp), (offset, _))| (tp.to_string(), *offset))
        .collect();
    assert_eq!(
        stored,
        [("payments-0".to_string(), 1), ("payments-1".to_string(), 5)]
    );
    w.assert_clean();
}

/// The ABI promises the host at most one commit per group in flight (the World checks
/// it after every output). A native group whose last member left has its final offsets
/// in flight; a Kafka simple commit to the same group id meanwhile waits for that batch
/// instead of going out beside it, and both land.
#[test]
fn a_kafka_commit_to_an_emptied_native_group_waits_for_its_batch_in_flight() {
    let mut params = Params::fixed();
    params.store_delay = (400, 400);
    let mut w = World::new(test_config(), params, 5);
    w.log = Some(Vec::new());
    w.set_topics(&[("orders", 2)]);
    w.join(static_spec("c1", &["orders"]));
    w.run_for(3_000);
    w.check_coverage().unwrap();
    // An explicit commit goes out as the group's batch (400 ms in flight); the member
    // leaves meanwhile, so the group is empty while its batch is still out.
    let generation = w.consumers["c1"].generation;
    w.commit("c1", generation, &[(tp("orders", 0), 10_000)]);
    w.run_for(20);
    w.leave("c1");
    w.run_for(20);
    assert!(w.coord.group("g").is_some_and(|g| g.members.is_empty()));
    let conn = w.raw_conn();
    w.raw_bytes(conn, kafka_simple_commit("g", "orders", 1, 77));
    w.run_for(2_000);
    for l in w
        .log
        .as_ref()
        .unwrap()
        .iter()
        .filter(|l| l.contains("commit") || l.contains("leave") || l.contains("Leave"))
    {
        eprintln!("{l}");
    }
    w.assert_clean();
    let stored = w
        .store
        .get(&(drover_coordinator::GroupId::new("g"), tp("orders", 1)))
        .map(|v| v.0);
    assert_eq!(
        stored,
        Some(77),
        "the Kafka commit landed after the native batch"
    );
}

/// The other direction through the one commit queue: a Kafka simple commit to an empty
/// native group is in flight when the group's own commit (a native reset commit) comes;
/// the group's batch waits for it instead of going out beside it (the World checks at
/// most one commit per group in flight after every output), then both land and both
/// requests are answered NONE.
#[test]
fn a_native_groups_batch_waits_for_a_kafka_commit_in_flight() {
    let mut params = Params::fixed();
    params.store_delay = (400, 400);
    let mut w = World::new(test_config(), params, 6);
    let native = a_native_commit_waiting_behind_a_kafka_commit(&mut w);
    w.run_for(2_000);
    w.assert_clean();
    assert_eq!(
        w.store
            .get(&(drover_coordinator::GroupId::new("g"), tp("orders", 1)))
            .map(|v| v.0),
        Some(100_000),
        "the Kafka commit landed"
    );
    assert_native_commit_landed(&w, native);
}

/// A ConsumerGroupHeartbeat v1 frame (after the size prefix): member `member` joins
/// KIP-848 group `group` subscribed to `topic`.
fn kip848_join(group: &str, member: &str, topic: &str) -> bytes::Bytes {
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, RequestHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, Request, StrBytes};
    let mut header = RequestHeader::default();
    header.request_api_key = ConsumerGroupHeartbeatRequest::KEY;
    header.request_api_version = 1;
    header.correlation_id = 1;
    header.client_id = Some(StrBytes::from_static_str("kip848"));
    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.group_id = kafka_protocol::messages::GroupId(StrBytes::from_string(group.to_owned()));
    request.member_id = StrBytes::from_string(member.to_owned());
    request.member_epoch = 0;
    request.rebalance_timeout_ms = 5_000;
    request.subscribed_topic_names = Some(vec![TopicName(StrBytes::from_string(topic.to_owned()))]);
    request.topic_partitions = Some(Vec::new());
    let mut frame = bytes::BytesMut::new();
    header
        .encode(&mut frame, ConsumerGroupHeartbeatRequest::header_version(1))
        .unwrap();
    request.encode(&mut frame, 1).unwrap();
    frame.freeze()
}

/// One group table: a group id held by a KIP-848 group with a member is that group's,
/// so a native simple commit to it is refused by the group (UNKNOWN_MEMBER_ID: the
/// group has members, as a Kafka simple commit is) instead of making a native group of
/// the same id beside it.
#[test]
fn a_native_commit_to_a_kip848_group_with_members_is_refused_by_that_group() {
    let mut w = World::new(test_config(), Params::fixed(), 7);
    w.set_topics(&[("orders", 2)]);
    let kafka = w.raw_conn();
    w.raw_bytes(kafka, kip848_join("k", "m1", "orders"));
    w.run_for(100);
    let native = w.raw_conn();
    w.raw_request(native, 1, &native_simple_commit("k", 0, 5));
    w.run_for(1_000);
    let answers = w.raw_decoded(native, ApiKey::CommitOffset);
    let [(1, NativeResponse::CommitOffset(r))] = answers.as_slice() else {
        panic!("{answers:?}")
    };
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    assert!(w.coord.group("k").is_none(), "no native group beside it");
    assert_eq!(
        w.store
            .get(&(drover_coordinator::GroupId::new("k"), tp("orders", 0))),
        None
    );
}

/// A native CommitOffset of no consumer (a reset tool's simple commit, generation −1)
/// of `offset` for partition `partition` of topic `orders` in group `group`.
fn native_simple_commit(group: &str, partition: i32, offset: i64) -> NativeRequest {
    NativeRequest::CommitOffset(proto::CommitOffsetRequest {
        group_id: group.into(),
        consumer_id: String::new(),
        generation: -1,
        topics: vec![proto::TopicOffsets {
            topic: "orders".into(),
            partitions: vec![proto::PartitionOffset {
                partition,
                offset,
                metadata: None,
            }],
        }],
    })
}

/// An empty native group whose own batch (a native reset commit) waits behind a Kafka
/// commit in flight: the group holds an accepted offset and a CommitOffset request
/// waiting for it. Returns the native client's connection.
fn a_native_commit_waiting_behind_a_kafka_commit(w: &mut World) -> drover_coordinator::ConnId {
    w.set_topics(&[("orders", 2)]);
    w.join(static_spec("c1", &["orders"]));
    w.run_for(3_000);
    w.leave("c1");
    w.run_for(1_000);
    assert!(w.coord.group("g").is_some_and(|g| g.members.is_empty()));
    let kafka = w.raw_conn();
    w.raw_bytes(kafka, kafka_simple_commit("g", "orders", 1, 100_000));
    w.run_for(20);
    let native = w.raw_conn();
    w.raw_request(native, 1, &native_simple_commit("g", 0, 100_005));
    w.run_for(20);
    native
}

/// The native commit waiting behind the Kafka one was answered NONE and landed.
fn assert_native_commit_landed(w: &World, native: drover_coordinator::ConnId) {
    let answers = w.raw_decoded(native, ApiKey::CommitOffset);
    let [(1, NativeResponse::CommitOffset(r))] = answers.as_slice() else {
        panic!("the native CommitOffset is answered once: {answers:?}")
    };
    assert_eq!(r.topics[0].partitions[0].error_code, ErrorCode::NONE);
    assert_eq!(
        w.store
            .get(&(drover_coordinator::GroupId::new("g"), tp("orders", 0)))
            .map(|v| v.0),
        Some(100_005),
        "the accepted native offset landed"
    );
}

/// A classic JoinGroup for the id of an empty native group that still holds an
/// accepted offset and a CommitOffset request waiting for it does not take the id:
/// the group stays until its batch is written (the request is answered NONE, the offset
/// lands); the JoinGroup is refused meanwhile (INCONSISTENT_GROUP_PROTOCOL, as for any
/// group of another protocol that holds the id).
#[test]
fn a_classic_join_does_not_drop_a_native_group_with_a_commit_waiting() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
    use kafka_protocol::protocol::StrBytes;
    let mut params = Params::fixed();
    params.store_delay = (400, 400);
    let mut w = World::new(test_config(), params, 8);
    let native = a_native_commit_waiting_behind_a_kafka_commit(&mut w);
    let mut join = JoinGroupRequest::default();
    join.group_id = kafka_protocol::messages::GroupId(StrBytes::from_static_str("g"));
    join.session_timeout_ms = 10_000;
    join.rebalance_timeout_ms = 10_000;
    join.member_id = StrBytes::from_static_str("");
    join.protocol_type = StrBytes::from_static_str("consumer");
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    join.protocols = vec![protocol];
    let joiner = w.raw_conn();
    w.raw_bytes(joiner, kafka_frame(&join, 5));
    w.run_for(2_000);
    w.assert_clean();
    assert_native_commit_landed(&w, native);
    let answer: JoinGroupResponse = kafka_answer(&w, joiner, 5);
    assert_eq!(
        answer.error_code,
        kafka_protocol::ResponseError::InconsistentGroupProtocol.code()
    );
}

/// DeleteGroups of an empty native group that still holds an accepted offset and a
/// CommitOffset request waiting for it is refused with NON_EMPTY_GROUP (as Kafka
/// refuses a group still in use) instead of forgetting the group with the request
/// unanswered and its offset unwritten.
#[test]
fn delete_groups_does_not_drop_a_native_group_with_a_commit_waiting() {
    use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
    use kafka_protocol::protocol::StrBytes;
    let mut params = Params::fixed();
    params.store_delay = (400, 400);
    let mut w = World::new(test_config(), params, 9);
    let native = a_native_commit_waiting_behind_a_kafka_commit(&mut w);
    let mut delete = DeleteGroupsRequest::default();
    delete.groups_names = vec![kafka_protocol::messages::GroupId(
        StrBytes::from_static_str("g"),
    )];
    let admin = w.raw_conn();
    w.raw_bytes(admin, kafka_frame(&delete, 2));
    w.run_for(2_000);
    w.assert_clean();
    assert_native_commit_landed(&w, native);
    let answer: DeleteGroupsResponse = kafka_answer(&w, admin, 2);
    assert_eq!(
        answer.results[0].error_code,
        kafka_protocol::ResponseError::NonEmptyGroup.code()
    );
}

/// A rebalance starts every member in the same millisecond; their next pings are
/// spread over the second half of the ping interval (by member id), not all sent in
/// one millisecond, so the pings of a large group do not come as one burst every
/// interval from then on.
#[test]
fn pings_after_a_rebalance_are_spread_over_the_interval() {
    let mut w = world();
    w.set_topics(&[("orders", 40)]);
    let ids: Vec<String> = (0..20).map(|k| format!("c{k:02}")).collect();
    for id in &ids {
        w.join(static_spec(id, &["orders"]));
    }
    w.run_for(3 * ST as u64);
    balanced(&w, &ids.iter().map(String::as_str).collect::<Vec<_>>(), 40);
    let interval = ST as u64 / 3;
    let mut first_pings = std::collections::BTreeSet::new();
    for c in w.consumers.values() {
        let started = c.starts.last().expect("started").0;
        let next = *c
            .pings_at
            .iter()
            .find(|t| **t > started)
            .expect("pinged after its start");
        let delay = next - started;
        assert!(
            (interval / 2..=interval).contains(&delay),
            "{}: first ping {delay} ms after its start",
            c.spec.id
        );
        first_pings.insert(next);
    }
    assert!(
        first_pings.len() >= 15,
        "20 members' first pings fell on {} distinct ms",
        first_pings.len()
    );
}
