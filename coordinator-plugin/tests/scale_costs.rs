//! What one steady input costs the core must not grow with parts of the coordinator's
//! state the input does not touch (issue 19 item 4: 100,000 members on one core). The
//! cost is counted, never timed: the heap allocations of one `Coordinator::handle` call,
//! by a global allocator that counts the allocations of the thread that asks.
//!
//! A KIP-848 member's steady ConsumerGroupHeartbeat once rebuilt the whole topic-id
//! table to read the ids of its owned partitions (one allocation per few topics of the
//! cluster, on every heartbeat of every member), and copied the member's assignment to
//! learn whether reconciling changed it (one allocation per few partitions it owns).

#[path = "all/common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use common::TestAssignors;
use drover_coordinator::{ConnId, Coordinator, CoordinatorConfig, Input, Output, TopicName};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopic;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, RequestHeader,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Counts the allocations of a thread while its counting is on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The allocations `f` makes on this thread.
fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCATIONS.with(Cell::get))
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn topic_id(t: usize) -> uuid::Uuid {
    uuid::Uuid::from_u128(0xd7 << 120 | (t as u128 + 1))
}

/// A ConsumerGroupHeartbeat v1 frame (after the size prefix).
fn heartbeat_frame(corr: i32, request: &ConsumerGroupHeartbeatRequest) -> Bytes {
    let mut header = RequestHeader::default();
    header.request_api_key = ConsumerGroupHeartbeatRequest::KEY;
    header.request_api_version = 1;
    header.correlation_id = corr;
    header.client_id = Some(s("client"));
    let mut frame = BytesMut::new();
    header
        .encode(&mut frame, ConsumerGroupHeartbeatRequest::header_version(1))
        .unwrap();
    request.encode(&mut frame, 1).unwrap();
    frame.freeze()
}

/// The one ConsumerGroupHeartbeat answer among `outputs`.
fn answer(outputs: Vec<Output>) -> ConsumerGroupHeartbeatResponse {
    let mut answers = outputs.into_iter().filter_map(|o| match o {
        Output::Answer { bytes, .. } => Some(bytes),
        _ => None,
    });
    let mut bytes = answers.next().expect("an answer");
    assert!(answers.next().is_none());
    ResponseHeader::decode(
        &mut bytes,
        ConsumerGroupHeartbeatResponse::header_version(1),
    )
    .unwrap();
    let r = ConsumerGroupHeartbeatResponse::decode(&mut bytes, 1).unwrap();
    assert_eq!(r.error_code, 0, "{r:?}");
    r
}

/// The allocations of one steady heartbeat (reconciled; its owned partitions sent with
/// `send_owned`, else left out as unchanged) of the only member of a KIP-848 group
/// subscribed to one topic of `partitions` partitions, on a coordinator that knows
/// `topics` topics of that size.
fn steady_heartbeat_allocations(topics: usize, partitions: i32, send_owned: bool) -> u64 {
    let config = CoordinatorConfig {
        default_assignor: "sticky".into(),
        consumer_heartbeat_interval_ms: 1_000,
        // The acknowledgement right after the join reads the reconciled interval, not
        // the settle time's short one.
        consumer_rebalance_settle_ms: 0,
        ..CoordinatorConfig::default()
    };
    let mut coord = Coordinator::new(config, TestAssignors::default()).unwrap();
    let names: Vec<TopicName> = (0..topics)
        .map(|t| TopicName::new(format!("topic-{t:05}")))
        .collect();
    let ids = names
        .iter()
        .enumerate()
        .map(|(t, n)| (n.clone(), *topic_id(t).as_bytes()))
        .collect::<BTreeMap<_, _>>();
    coord.handle(0, Input::TopicIds { ids });
    let counts = names
        .iter()
        .map(|n| (n.clone(), partitions as u32))
        .collect();
    coord.handle(0, Input::TopicsChanged { topics: counts });
    let conn = ConnId(1);
    coord.handle(
        0,
        Input::ConnectionOpened {
            conn,
            peer: "10.0.0.1".into(),
        },
    );

    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.group_id = GroupId(s("g"));
    request.member_id = s("member-1");
    request.member_epoch = 0;
    request.rebalance_timeout_ms = 60_000;
    request.subscribed_topic_names = Some(vec![kafka_protocol::messages::TopicName(s(
        names[0].as_str()
    ))]);
    request.topic_partitions = Some(Vec::new());
    let joined = answer(coord.handle(
        10,
        Input::Frame {
            conn,
            bytes: heartbeat_frame(1, &request),
        },
    ));
    let assignment = joined.assignment.expect("an assignment");
    assert_eq!(assignment.topic_partitions.len(), 1);
    let mut owned = OwnedTopic::default();
    owned.topic_id = topic_id(0);
    owned.partitions = assignment.topic_partitions[0].partitions.clone();
    assert_eq!(owned.partitions.len(), partitions as usize);

    // Acknowledge the assignment, then heartbeat in the steady state.
    let mut steady = ConsumerGroupHeartbeatRequest::default();
    steady.group_id = GroupId(s("g"));
    steady.member_id = s("member-1");
    steady.member_epoch = joined.member_epoch;
    steady.rebalance_timeout_ms = -1;
    steady.topic_partitions = Some(vec![owned]);
    let acked = answer(coord.handle(
        20,
        Input::Frame {
            conn,
            bytes: heartbeat_frame(2, &steady),
        },
    ));
    assert_eq!(acked.heartbeat_interval_ms, 1_000, "reconciled");

    if !send_owned {
        steady.topic_partitions = None;
    }
    let frame = heartbeat_frame(3, &steady);
    let (outputs, n) = allocations(|| coord.handle(1_020, Input::Frame { conn, bytes: frame }));
    let r = answer(outputs);
    assert_eq!(r.member_epoch, joined.member_epoch);
    assert_eq!(r.heartbeat_interval_ms, 1_000);
    n
}

/// Before the fix (the table rebuilt per heartbeat): 25 allocations with 20 topics,
/// 207 with 2,000.
#[test]
fn a_steady_kip848_heartbeat_allocates_the_same_however_many_topics_exist() {
    let few = steady_heartbeat_allocations(20, 4, true);
    let many = steady_heartbeat_allocations(2_000, 4, true);
    assert_eq!(
        few, many,
        "allocations per heartbeat with 20 and 2,000 topics"
    );
}

/// Before the fix (the assignment copied per heartbeat): 15 allocations for a member of
/// 4 partitions, 348 for one of 2,000.
#[test]
fn a_steady_kip848_heartbeat_allocates_the_same_however_many_partitions_the_member_owns() {
    let few = steady_heartbeat_allocations(20, 4, false);
    let many = steady_heartbeat_allocations(20, 2_000, false);
    assert_eq!(
        few, many,
        "allocations per heartbeat owning 4 and 2,000 partitions"
    );
}
