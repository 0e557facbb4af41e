//! The host's partition table (`Input::PartitionStats`, coordinator ABI 3.3) reaches
//! assignors: the context of a native group's and a KIP-848 group's assignment carries
//! each subscribed partition's leader, log offsets and produce rates, and the leaders'
//! racks; committed offsets the group accepted are laid over the host's data.

mod common;
mod kafka;

use common::*;
use drover_abi::assignor::{BrokerContext, PartitionContext, TopicContext};
use drover_abi::std_types::{RNone, RSome};
use drover_coordinator::{Input, PartitionStats};
use drover_protocol as proto;
use drover_protocol::{ApiKey, NativeRequest, NativeResponse};
use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
use kafka_protocol::protocol::StrBytes;

/// Host data for `orders` partitions 0 and 1 (led by brokers 1 and 2) and `payments`
/// partition 0 (leader unknown: led by a broker that is down).
fn stats() -> Input {
    let part = |p: i32, leader: Option<i32>, end: i64, rate: f64| {
        let mut c = PartitionContext::unknown(p);
        c.leader = leader.into();
        c.log_start_offset = RSome(0);
        c.log_end_offset = RSome(end);
        c.produce_bytes_per_sec = RSome(rate);
        c.produce_records_per_sec = RSome(rate / 100.0);
        c
    };
    Input::PartitionStats(PartitionStats::new(
        [
            BrokerContext {
                broker_id: 1,
                rack: RSome("rack-a".into()),
            },
            BrokerContext {
                broker_id: 2,
                rack: RNone,
            },
            BrokerContext {
                broker_id: 7,
                rack: RSome("unused".into()),
            },
        ],
        [
            TopicContext {
                topic: "orders".into(),
                partitions: vec![part(1, Some(2), 50, 10.0), part(0, Some(1), 100, 2000.0)].into(),
            },
            TopicContext {
                topic: "payments".into(),
                partitions: vec![part(0, None, 5, 0.0)].into(),
            },
            TopicContext {
                topic: "audit".into(),
                partitions: vec![part(0, Some(7), 1, 1.0)].into(),
            },
        ],
    ))
}

#[test]
fn a_native_groups_assignor_sees_the_hosts_partition_data() {
    let assignors = TestAssignors::default();
    let seen = assignors.contexts.clone();
    let mut w = World::with_assignors(test_config(), Params::fixed(), 1, assignors);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    w.set_partition_stats(stats());
    w.join(ConsumerSpec::new(
        "c1",
        "g",
        proto::Subscription::static_topics([("orders", 1), ("payments", 1)]),
        3_000,
    ));
    w.run_for(2_000);
    w.assert_clean();
    let seen = seen.lock().unwrap();
    let ctx = seen.last().expect("the assignor ran");
    let p0 = ctx.partition("orders", 0).expect("orders-0 is known");
    assert_eq!(p0.leader, RSome(1));
    assert_eq!(p0.log_end_offset, RSome(100));
    assert_eq!(p0.produce_bytes_per_sec, RSome(2000.0));
    assert_eq!(p0.produce_records_per_sec, RSome(20.0));
    assert_eq!(p0.committed_offset, RNone, "nothing committed yet");
    assert_eq!(ctx.partition("orders", 1).unwrap().leader, RSome(2));
    assert_eq!(ctx.partition("payments", 0).unwrap().leader, RNone);
    assert!(
        ctx.partition("orders", 2).is_none(),
        "the host said nothing"
    );
    assert!(ctx.partition("audit", 0).is_none(), "not subscribed");
    // The leaders named, with their racks; broker 7 leads nothing in the context.
    let brokers: Vec<(i32, Option<&str>)> = ctx
        .brokers
        .iter()
        .map(|b| {
            (
                b.broker_id,
                b.rack.as_ref().map(|r| r.as_str()).into_option(),
            )
        })
        .collect();
    assert_eq!(brokers, [(1, Some("rack-a")), (2, None)]);
}

#[test]
fn a_newer_table_replaces_the_older_one() {
    let assignors = TestAssignors::default();
    let seen = assignors.contexts.clone();
    let mut w = World::with_assignors(test_config(), Params::fixed(), 1, assignors);
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    w.set_partition_stats(stats());
    w.set_partition_stats(Input::PartitionStats(PartitionStats::default()));
    w.join(ConsumerSpec::new(
        "c1",
        "g",
        proto::Subscription::static_topics([("orders", 1)]),
        3_000,
    ));
    w.run_for(2_000);
    let seen = seen.lock().unwrap();
    let ctx = seen.last().expect("the assignor ran");
    assert!(ctx.topics.is_empty(), "{ctx:?}");
    assert!(ctx.brokers.is_empty());
}

#[test]
fn a_kip848_groups_assignor_sees_the_hosts_partition_data() {
    let assignors = TestAssignors::default();
    let seen = assignors.contexts.clone();
    let mut h = kafka::Harness::with_assignors(kafka::config(), assignors);
    h.feed(stats());
    let conn = h.connect();
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = StrBytes::from_static_str("k").into();
    r.member_id = StrBytes::from_static_str("5Cq1X3ZpR1mGZtY9rG0y2A");
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 5_000;
    r.subscribed_topic_names = Some(vec![StrBytes::from_static_str("orders").into()]);
    r.topic_partitions = Some(Vec::new());
    let answer = h.call(conn, 1, r);
    assert_eq!(answer.error_code, 0, "{answer:?}");
    let seen = seen.lock().unwrap();
    let ctx = seen.last().expect("the assignor ran");
    let p0 = ctx.partition("orders", 0).expect("orders-0 is known");
    assert_eq!(p0.leader, RSome(1));
    assert_eq!(p0.log_end_offset, RSome(100));
    assert_eq!(p0.produce_bytes_per_sec, RSome(2000.0));
    assert!(ctx.partition("payments", 0).is_none(), "not subscribed");
    assert_eq!(ctx.brokers.len(), 2);
    assert_eq!(ctx.brokers[0].rack, RSome("rack-a".into()));
}

#[test]
fn describe_groups_v1_shows_member_data_and_the_loads_the_assignment_saw() {
    let mut w = World::with_assignors(test_config(), Params::fixed(), 1, TestAssignors::default());
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    w.set_partition_stats(stats());
    let mut spec = ConsumerSpec::new(
        "c1",
        "g",
        proto::Subscription::static_topics([("orders", 1), ("payments", 1)]),
        3_000,
    );
    spec.member = proto::MemberData {
        rack: Some("rack-a".into()),
        weight: 3,
        labels: vec![proto::Label {
            key: "zone".into(),
            value: "z1".into(),
        }],
    };
    w.join(spec.clone());
    w.run_for(2_000);
    w.assert_clean();

    let ask = |w: &mut World, version: i16| {
        let conn = w.raw_conn();
        let mut request = proto::DescribeGroupsRequest::new(Some(vec!["g".into()]));
        request.version = version;
        w.raw_request(conn, 5, &NativeRequest::DescribeGroups(request));
        w.run_for(5);
        let mut frames: Vec<bytes::Bytes> = w
            .raw_responses
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, b)| b.clone())
            .collect();
        assert_eq!(frames.len(), 1);
        let frame = frames.pop().unwrap();
        let Ok((_, NativeResponse::DescribeGroups(r))) =
            proto::decode_response_frame(frame, ApiKey::DescribeGroups, version)
        else {
            panic!("no DescribeGroups v{version} answer")
        };
        assert_eq!(r.version, version);
        r.groups.into_iter().next().unwrap()
    };
    let g = ask(&mut w, 1);
    assert_eq!(g.members[0].member, spec.member);
    // orders-0 and -1 have rates; the host gave log ends but nothing is committed.
    let orders = g
        .partition_loads
        .iter()
        .find(|t| t.topic == "orders")
        .expect("orders loads");
    assert_eq!(
        orders.partitions[0],
        proto::PartitionLoad {
            partition: 0,
            bytes_per_sec: 2000,
            records_per_sec: 20,
            lag: -1
        }
    );
    assert_eq!(orders.partitions[1].partition, 1);
    assert_eq!(orders.partitions[1].bytes_per_sec, 10);

    // v0 is still served, without the v1 fields.
    let g0 = ask(&mut w, 0);
    assert_eq!(g0.members[0].member, proto::MemberData::default());
    assert!(g0.partition_loads.is_empty());
    assert_eq!(g0.members[0].consumer_id, "c1");
}

/// After a restart (here: offsets already in the store, a fresh coordinator), a
/// KIP-848 group knows no committed offsets until it reads some: its first member's
/// OffsetFetch (which clients send right after their first assignment) fills them in,
/// so the next target — a second member joining — sees `orders-0`'s committed offset.
#[test]
fn a_kip848_groups_committed_offsets_are_refilled_from_an_offset_fetch() {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::OffsetFetchRequest;
    let assignors = TestAssignors::default();
    let seen = assignors.contexts.clone();
    let mut h = kafka::Harness::with_assignors(kafka::config(), assignors);
    h.store.put("k", kafka::tp("orders", 0), 42);
    h.feed(stats());
    let join = |h: &mut kafka::Harness, id: &'static str| {
        let conn = h.connect();
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = StrBytes::from_static_str("k").into();
        r.member_id = StrBytes::from_static_str(id);
        r.member_epoch = 0;
        r.rebalance_timeout_ms = 5_000;
        r.subscribed_topic_names = Some(vec![StrBytes::from_static_str("orders").into()]);
        r.topic_partitions = Some(Vec::new());
        let answer = h.call(conn, 1, r);
        assert_eq!(answer.error_code, 0, "{answer:?}");
        conn
    };
    let conn = join(&mut h, "5Cq1X3ZpR1mGZtY9rG0y2A");
    let first = seen
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("the assignor ran");
    let p0 = first.partition("orders", 0).expect("orders-0 is known");
    assert_eq!(p0.committed_offset, RNone, "nothing read yet");

    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = StrBytes::from_static_str("k").into();
    let mut t = OffsetFetchRequestTopic::default();
    t.name = StrBytes::from_static_str("orders").into();
    t.partition_indexes = vec![0, 1];
    fetch.topics = Some(vec![t]);
    let answer = h.call(conn, 7, fetch);
    assert_eq!(answer.topics[0].partitions[0].committed_offset, 42);

    join(&mut h, "mY0cS9P8T6yXbq2Nw1vUeA");
    let second = seen
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("the assignor ran");
    let p0 = second.partition("orders", 0).expect("orders-0 is known");
    assert_eq!(p0.committed_offset, RSome(42));
    let p1 = second.partition("orders", 1).expect("orders-1 is known");
    assert_eq!(p1.committed_offset, RNone, "never committed");
}
