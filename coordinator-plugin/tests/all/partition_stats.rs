//! The host's partition table (`Input::PartitionStats`, coordinator ABI 3.3) reaches
//! assignors: the context of a native group's and a KIP-848 group's assignment carries
//! each subscribed partition's leader, log offsets and produce rates, and the leaders'
//! racks; committed offsets the group accepted are laid over the host's data.

use crate::common;
use crate::kafka;

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

/// A KIP-848 join (ConsumerGroupHeartbeat v1, epoch 0) of `member` in `group`,
/// subscribing to `topics`, in rack `rack`: a Kafka frame without its size prefix.
fn kip848_join(group: &str, member: &str, topics: &[&str], rack: &str) -> bytes::Bytes {
    use kafka_protocol::messages::{RequestHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, Request};
    let mut header = RequestHeader::default();
    header.request_api_key = ConsumerGroupHeartbeatRequest::KEY;
    header.request_api_version = 1;
    header.correlation_id = 1;
    header.client_id = Some(StrBytes::from_static_str("kip848"));
    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.group_id = StrBytes::from_string(group.to_owned()).into();
    request.member_id = StrBytes::from_string(member.to_owned());
    request.member_epoch = 0;
    request.rebalance_timeout_ms = 5_000;
    request.rack_id = Some(StrBytes::from_string(rack.to_owned()));
    request.subscribed_topic_names = Some(
        topics
            .iter()
            .map(|t| TopicName(StrBytes::from_string((*t).to_owned())))
            .collect(),
    );
    request.topic_partitions = Some(Vec::new());
    let mut frame = bytes::BytesMut::new();
    header
        .encode(&mut frame, ConsumerGroupHeartbeatRequest::header_version(1))
        .unwrap();
    request.encode(&mut frame, 1).unwrap();
    frame.freeze()
}

/// Asks the coordinator of `w` to describe `groups` at `version` on a connection of its
/// own, and returns its answer.
fn describe_at(
    w: &mut World,
    version: i16,
    groups: Option<Vec<String>>,
) -> Vec<proto::DescribedGroup> {
    let conn = w.raw_conn();
    let request = proto::DescribeGroupsRequest { groups, version };
    w.raw_request(conn, 9, &NativeRequest::DescribeGroups(request));
    w.run_for(5);
    let frames: Vec<bytes::Bytes> = w
        .raw_responses
        .iter()
        .filter(|(c, _)| *c == conn)
        .map(|(_, b)| b.clone())
        .collect();
    let [frame] = frames.as_slice() else {
        panic!("{} answers to one DescribeGroups", frames.len())
    };
    let Ok((_, NativeResponse::DescribeGroups(r))) =
        proto::decode_response_frame(frame.clone(), ApiKey::DescribeGroups, version)
    else {
        panic!("no DescribeGroups v{version} answer")
    };
    assert_eq!(r.version, version);
    r.groups
}

/// Issue 16 item 5 for KIP-848 groups: native DescribeGroups v2 describes a KIP-848
/// group in the model native groups use — its protocol, Kafka's state name, the group
/// epoch, each member's session timeout (the coordinator's
/// `consumer_session_timeout_ms`), rack and partitions — with the partition loads its
/// target's assignor saw; a later target (a second member joins, after a newer table)
/// replaces them. v1 and v0 readers see no change: such a group is not theirs to
/// describe (GROUP_ID_NOT_FOUND, absent from a null request).
#[test]
fn describe_groups_v2_shows_a_kip848_groups_members_and_the_loads_its_assignor_saw() {
    let config = test_config();
    let session = config.consumer_session_timeout_ms;
    let mut w = World::with_assignors(config, Params::fixed(), 1, TestAssignors::default());
    w.set_topics(&[("orders", 6), ("payments", 3)]);
    w.set_partition_stats(stats());
    let kafka = w.raw_conn();
    w.raw_bytes(kafka, kip848_join("k", "m1", &["orders"], "rack-a"));
    w.run_for(100);

    let [g] = describe_at(&mut w, 2, Some(vec!["k".into()]))
        .try_into()
        .unwrap();
    assert!(g.error_code.is_none(), "{g:?}");
    assert_eq!(g.group_type, proto::DescribedGroup::CONSUMER);
    assert_eq!(g.state, "Stable", "a lone member takes its target at once");
    assert_eq!(g.generation, 1, "the group epoch");
    assert_eq!(g.assignor.as_deref(), Some("sticky"));
    assert_eq!(g.rebalance_mode, proto::DescribedGroup::INCREMENTAL);
    let [m] = g.members.as_slice() else {
        panic!("{:?}", g.members)
    };
    assert_eq!(m.consumer_id, "m1");
    assert_eq!(m.session_timeout_ms, i32::try_from(session).unwrap());
    assert_eq!(m.subscription, "orders");
    assert_eq!(m.topics, ["orders"]);
    assert_eq!(m.member.rack.as_deref(), Some("rack-a"));
    assert_eq!(m.member.weight, 1);
    assert_eq!(
        m.partitions,
        [proto::TopicPartitions::new(
            "orders",
            vec![0, 1, 2, 3, 4, 5]
        )]
    );
    // What the assignor was given: orders-0 and -1 have rates (payments is not
    // subscribed); nothing is committed, so the lag is unknown.
    let [orders] = g.partition_loads.as_slice() else {
        panic!("{:?}", g.partition_loads)
    };
    assert_eq!(orders.topic, "orders");
    assert_eq!(
        orders.partitions,
        [
            proto::PartitionLoad {
                partition: 0,
                bytes_per_sec: 2000,
                records_per_sec: 20,
                lag: -1,
            },
            proto::PartitionLoad {
                partition: 1,
                bytes_per_sec: 10,
                records_per_sec: 0,
                lag: -1,
            },
        ]
    );

    // Every group at v2 includes it; v1 and v0 keep describing native groups only.
    let all = describe_at(&mut w, 2, None);
    assert_eq!(
        all.iter()
            .map(|g| (g.group_id.as_str(), g.group_type.as_str()))
            .collect::<Vec<_>>(),
        [("k", "consumer")]
    );
    for version in [0, 1] {
        let [g] = describe_at(&mut w, version, Some(vec!["k".into()]))
            .try_into()
            .unwrap();
        assert_eq!(g.error_code, proto::ErrorCode::GROUP_ID_NOT_FOUND);
        assert!(describe_at(&mut w, version, None).is_empty());
    }

    // A newer table, then a second member: the new target's assignor saw the new
    // rates, and the describe shows them.
    let part = |p: i32, rate: f64| {
        let mut c = PartitionContext::unknown(p);
        c.produce_bytes_per_sec = RSome(rate);
        c
    };
    w.set_partition_stats(Input::PartitionStats(PartitionStats::new(
        [],
        [TopicContext {
            topic: "orders".into(),
            partitions: vec![part(3, 700.0)].into(),
        }],
    )));
    w.raw_bytes(kafka, kip848_join("k", "m2", &["orders"], "rack-b"));
    w.run_for(100);
    let [g] = describe_at(&mut w, 2, Some(vec!["k".into()]))
        .try_into()
        .unwrap();
    assert_eq!(g.generation, 2);
    assert_eq!(g.members.len(), 2);
    assert_eq!(
        g.partition_loads,
        [proto::TopicLoads {
            topic: "orders".into(),
            partitions: vec![proto::PartitionLoad {
                partition: 3,
                bytes_per_sec: 700,
                records_per_sec: -1,
                lag: -1,
            }],
        }]
    );
}
