//! Core events handled per second: the CPU time of `Coordinator::handle` for the
//! inputs of a formed group in its steady state.
//!
//! The group (built once, untimed): 1,000 consumers over 10 topics × 1,000 partitions
//! (10 each, by the real `sticky` assignor plugin loaded from its `.so`), session
//! timeout 30 s, so one Heartbeat per consumer every 10 s. The consumers' Heartbeat
//! phases are spread 10 ms apart, as consumers that joined at different times would
//! be, so each Heartbeat goes out on its own timer. Consumers and the offset store answer at once; their
//! answers are real encoded frames, built outside the clock. Each iteration is one
//! `handle` call (one element), on one long-lived coordinator whose virtual time keeps
//! running:
//!
//! - `core_events/steady_mix`: every input in order: the `Timer` that sends a
//!   consumer's Heartbeat, its answer carrying the offsets of its 10 partitions, and,
//!   every second, the commit tick (it falls on a Heartbeat's `Timer`, which then also
//!   writes the ~1,000 offsets accepted since the last tick) and its `OffsetsCommitted`;
//! - `core_events/heartbeat_answer`: only the Heartbeat answers of that mix are timed;
//! - `core_events/timer`: only its `Timer` inputs are timed;
//! - `core_events/commit_offset_pair` (2 elements per iteration): a consumer's
//!   CommitOffset request for its 10 partitions (on its second connection), then the
//!   `OffsetsCommitted` of the batch it causes, which sends the answer.
//!
//! The bench prints the clock's cost per timed call (two `Instant` reads) and the mix
//! it ran.
//!
//! ```text
//! cargo bench -p drover-coordinator --bench core_events
//! ```

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use drover_coordinator::{ConnId, Input};
use drover_protocol as proto;
use proto::NativeRequest;

use support::{
    plugin, request_frame, Driver, Kind, FORMED_AT, GROUP, HEARTBEAT_INTERVAL_MS, MEMBERS,
};

/// A formed group whose consumers' Heartbeats are spread over the interval.
///
/// After formation every consumer's Heartbeat goes out at 10,300. Consumer `i` answers
/// it at `20,300 + 10·i` ms (within its session timeout); as the interval has passed
/// by then, the coordinator sends the next Heartbeat at once, so consumer `i`'s
/// Heartbeats follow at that phase from then on.
fn steady_group() -> Driver {
    let (name, sticky) = plugin("drover_assignor_sticky");
    let mut d = Driver::new(sticky, &name);
    d.form();
    for m in &mut d.members {
        m.hold = true;
    }
    d.run_until(FORMED_AT + HEARTBEAT_INTERVAL_MS);
    let spacing = HEARTBEAT_INTERVAL_MS / MEMBERS as u64;
    for i in 0..MEMBERS {
        d.run_until(FORMED_AT + 2 * HEARTBEAT_INTERVAL_MS + i as u64 * spacing);
        d.release(i);
    }
    // One whole interval in the steady state.
    d.run_until(d.now + HEARTBEAT_INTERVAL_MS);
    assert!(d.failed.is_empty(), "{:?}", d.failed);
    d.check_balanced();
    d
}

/// Consumer `i` consumed one more record of each partition and commits its positions
/// with CommitOffset on its second connection (correlation id `corr`).
fn commit_request(d: &mut Driver, i: usize, corr: i32) -> (ConnId, bytes::Bytes) {
    let m = &mut d.members[i];
    for offset in m.positions.values_mut() {
        *offset += 1;
    }
    let request = NativeRequest::CommitOffset(proto::CommitOffsetRequest {
        group_id: GROUP.into(),
        consumer_id: m.id.clone(),
        generation: m.generation,
        topics: m.offsets(),
    });
    (m.other, request_frame(corr, &m.id, &request))
}

/// The cost of the two clock reads around each timed call.
fn clock_overhead() -> Duration {
    const N: u32 = 1_000_000;
    let start = Instant::now();
    let mut sum = Duration::ZERO;
    for _ in 0..N {
        let t = Instant::now();
        sum += black_box(t.elapsed());
    }
    black_box(sum);
    start.elapsed() / N
}

fn core_events(c: &mut Criterion) {
    eprintln!(
        "clock overhead per timed handle() call: {:?}",
        clock_overhead()
    );
    let mut d = steady_group();
    d.stats.clear();
    let virtual_start = d.now;

    let mut g = c.benchmark_group("core_events");
    g.throughput(Throughput::Elements(1));
    for (name, only) in [
        ("steady_mix", None),
        ("heartbeat_answer", Some(Kind::HeartbeatAnswer)),
        ("timer", Some(Kind::Timer)),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut timed = 0;
                while timed < iters {
                    let (kind, took) = d.step();
                    if only.is_none_or(|k| k == kind) {
                        total += took;
                        timed += 1;
                    }
                }
                total
            })
        });
    }
    d.drain();
    assert!(d.failed.is_empty(), "{:?}", d.failed);
    eprintln!(
        "steady state ran {:.0} virtual s; handle() calls by kind (count, mean):",
        (d.now - virtual_start) as f64 / 1000.0
    );
    for (kind, (n, t)) in &d.stats {
        eprintln!("  {kind:?}: {n}, {:.2?}", *t / (*n).max(1) as u32);
    }

    g.throughput(Throughput::Elements(2));
    d.stats.clear();
    let mut pairs: u64 = 0;
    g.bench_function("commit_offset_pair", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let i = (pairs % MEMBERS as u64) as usize;
                let (conn, bytes) = commit_request(&mut d, i, pairs as i32);
                pairs += 1;
                total += d.deliver(Kind::Request, Input::Frame { conn, bytes });
                total += d.drain();
            }
            total
        })
    });
    g.finish();
    // Every CommitOffset was answered, after exactly one OffsetsCommitted.
    assert_eq!(d.commit_answers as u64, pairs);
    assert_eq!(d.stats[&Kind::OffsetsCommitted].0, pairs);
    eprintln!("commit_offset_pair: {pairs} pairs, every CommitOffset answered NONE");
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default()
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        targets = core_events
    }
}
criterion_main!(group::benches);
