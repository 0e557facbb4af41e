//! A forged array count (2^31 − 1, −2^31, just above a cap, or at a cap with no bytes
//! behind it) is refused before anything is allocated for the array. A counting
//! allocator measures the bytes the decoding thread allocates.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use drover_protocol::*;

struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size()));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + new_size));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated by this thread while running `f`.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let out = f();
    (out, ALLOCATED.with(Cell::get) - before)
}

fn string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

/// Counts to forge, with a little padding behind them.
const FORGED: [i32; 4] = [
    i32::MAX,
    i32::MIN,
    MAX_TOPICS_PER_REQUEST as i32 + 1,
    MAX_PARTITIONS_PER_TOPIC as i32 + 1,
];

fn check(what: &str, result: Result<impl std::fmt::Debug, DecodeError>, allocated: usize) {
    assert!(result.is_err(), "{what}: forged count accepted: {result:?}");
    // The strings read before the array (a few bytes each) are all that may be
    // allocated; one element of any array is already more than this.
    assert!(allocated < 256, "{what}: {allocated} bytes allocated");
}

/// As [`check`], for an array nested in elements of outer arrays that were genuinely
/// decoded (one element each): their `outer` bytes are allowed on top.
fn check_nested(
    what: &str,
    result: Result<impl std::fmt::Debug, DecodeError>,
    allocated: usize,
    outer: usize,
) {
    check(what, result, allocated.saturating_sub(outer));
}

#[test]
fn the_meter_sees_array_allocations() {
    // Control: a genuine array of 64 partitions is allocated and counted.
    let mut b = BytesMut::new();
    string(&mut b, "g");
    b.put_i32(1);
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(64);
    for p in 0..64 {
        b.put_i32(p);
        b.put_i64(0);
    }
    let body = b.freeze();
    let (r, n) = allocated_by(|| decode_request(ApiKey::StartFetcher.code(), 0, body));
    assert!(r.is_ok());
    assert!(n >= 64 * 16, "only {n} bytes counted");
}

#[test]
fn forged_counts_are_refused_without_allocating() {
    for count in FORGED
        .into_iter()
        .chain([MAX_TOPICS_PER_REQUEST as i32, 1_000])
    {
        // CommitOffset: topic-level array.
        let mut b = BytesMut::new();
        string(&mut b, "g");
        string(&mut b, "c");
        b.put_i32(1);
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::CommitOffset.code(), 0, body));
        check(&format!("CommitOffset topics {count}"), r, n);

        // CommitOffset: partition-level array of a topic.
        let mut b = BytesMut::new();
        string(&mut b, "g");
        string(&mut b, "c");
        b.put_i32(1);
        b.put_i32(1);
        string(&mut b, "t");
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::CommitOffset.code(), 0, body));
        check(&format!("CommitOffset partitions {count}"), r, n);

        // RegisterConsumer: static topics.
        let mut b = BytesMut::new();
        string(&mut b, "g");
        string(&mut b, "c");
        string(&mut b, "h");
        b.put_i32(30_000);
        b.put_i8(0);
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::RegisterConsumer.code(), 0, body));
        check(&format!("RegisterConsumer topics {count}"), r, n);

        // RegisterConsumer v1: labels.
        let mut b = BytesMut::new();
        string(&mut b, "g");
        string(&mut b, "c");
        string(&mut b, "h");
        b.put_i32(30_000);
        b.put_i8(1);
        b.put_i32(0);
        string(&mut b, "p");
        b.put_i32(1);
        b.put_i8(0);
        b.put_i16(-1); // assignor
        b.put_i16(-1); // rack
        b.put_i32(1); // weight
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::RegisterConsumer.code(), 1, body));
        check(&format!("RegisterConsumer labels {count}"), r, n);

        // StartFetcher: assignment partitions.
        let mut b = BytesMut::new();
        string(&mut b, "g");
        b.put_i32(2);
        b.put_i32(1);
        string(&mut b, "t");
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::StartFetcher.code(), 0, body));
        check(&format!("StartFetcher partitions {count}"), r, n);

        // FetchOffsets (nullable topics) and its response.
        let mut b = BytesMut::new();
        string(&mut b, "g");
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::FetchOffsets.code(), 0, body));
        check(&format!("FetchOffsets topics {count}"), r, n);

        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_response(ApiKey::FetchOffsets, 0, body));
        check(&format!("FetchOffsetsResponse topics {count}"), r, n);

        // DescribeGroups: the (nullable) request list, the response's groups, a
        // group's members and a member's topics.
        let mut b = BytesMut::new();
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::DescribeGroups.code(), 0, body));
        check(&format!("DescribeGroups groups {count}"), r, n);

        let mut b = BytesMut::new();
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_response(ApiKey::DescribeGroups, 0, body));
        check(&format!("DescribeGroupsResponse groups {count}"), r, n);

        let described_group_head = |b: &mut BytesMut| {
            b.put_i32(1);
            string(b, "g");
            b.put_i16(0);
            string(b, "stable");
            b.put_i32(1);
            b.put_i16(-1);
            string(b, "eager");
        };
        let mut b = BytesMut::new();
        described_group_head(&mut b);
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_response(ApiKey::DescribeGroups, 0, body));
        let one_group = std::mem::size_of::<DescribedGroup>();
        check_nested(&format!("DescribedGroup members {count}"), r, n, one_group);

        let mut b = BytesMut::new();
        described_group_head(&mut b);
        b.put_i32(1);
        string(&mut b, "c");
        string(&mut b, "h");
        b.put_i32(30_000);
        b.put_i32(1);
        string(&mut b, "s");
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_response(ApiKey::DescribeGroups, 0, body));
        let one_member = std::mem::size_of::<DescribedMember>();
        check_nested(
            &format!("DescribedMember topics {count}"),
            r,
            n,
            one_group + one_member,
        );

        // v1: a group's partition_loads after empty members and held_by_failed.
        let mut b = BytesMut::new();
        described_group_head(&mut b);
        b.put_i32(0);
        b.put_i32(0);
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_response(ApiKey::DescribeGroups, 1, body));
        check_nested(
            &format!("DescribedGroup partition_loads {count}"),
            r,
            n,
            one_group,
        );

        // Heartbeat response offsets.
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_u8(1);
        b.put_i32(count);
        b.put_slice(&[0; 16]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_response(ApiKey::Heartbeat, 0, body));
        check(&format!("HeartbeatResponse offsets {count}"), r, n);
    }
}

#[test]
fn forged_string_lengths_are_refused_without_allocating() {
    for len in [i16::MAX, i16::MIN, -2, 100] {
        let mut b = BytesMut::new();
        b.put_i16(len);
        b.put_slice(&[b'a'; 8]);
        let body = b.freeze();
        let (r, n) = allocated_by(|| decode_request(ApiKey::LeaveGroup.code(), 0, body));
        check(&format!("LeaveGroup group_id length {len}"), r, n);
    }
    // A frame whose client id claims 32767 bytes.
    let mut b = BytesMut::new();
    b.put_i16(ApiKey::LeaveGroup.code());
    b.put_i16(0);
    b.put_i32(1);
    b.put_i16(i16::MAX);
    let frame: Bytes = b.freeze();
    let (r, n) = allocated_by(|| decode_request_frame(frame));
    check("client_id length", r, n);
}
