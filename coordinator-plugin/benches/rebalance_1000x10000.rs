//! Assignment plus rebalance bookkeeping for 1,000 members × 10,000 partitions: the CPU
//! time of the `Coordinator::handle` calls of one complete rebalance, and of the
//! assignor call alone for comparison. The assignors are the real `sticky` and `range`
//! plugins, loaded from their `.so` and called through the plugin ABI as in the broker.
//!
//! - `rebalance_1000x10000/sticky`: in a stable group of 1,000 consumers over 10 topics
//!   × 1,000 partitions (generation 1, every offset committed), one consumer's channel
//!   closes. Timed, in virtual time (ms):
//!   - 15,000 `ConnectionClosed` (the member fails; its partitions stay held for its
//!     lease);
//!   - 15,300 the debounce `Timer`: the assignor over the 999 live members, the check
//!     of its output, the target, the StopFetcher plans (sticky moves only the
//!     leaver's 10 partitions, so nothing is stopped);
//!   - 40,305 the `Timer` at the end of the lease (the victim's last frame came at
//!     10,305, its session timeout is 30 s), `OffsetsFetched` for the 10 released
//!     partitions (generation 2: a StartFetcher encoded for each of the 999 members),
//!     and the 999 StartFetcher answers, the last of which completes the rebalance.
//!
//!   The lease wait in between is run but not timed: the other consumers' Heartbeats
//!   and the periodic commits are the steady state that `core_events` measures.
//!   Nothing else happens at the timed instants. Each sample builds a fresh group
//!   (untimed) and runs one rebalance; before measuring, the bench prints one run's
//!   time per phase and kind of input. Criterion's "Unable to complete 10 samples"
//!   warning is expected: its estimate counts the untimed setup (`iter_custom`).
//! - `rebalance_1000x10000/range`: the same with `range`, which is not sticky: the
//!   members before the leaver in id order each move one partition per topic, so the
//!   debounce `Timer` also sends ~500 StopFetchers, whose answers and the commit of
//!   their final offsets are timed with it, and ~5,000 partitions get start offsets.
//!
//!   The assignor is called inside `handle` ([`Inline`], as a coordinator before ABI
//!   3.6 calls it), so the timed calls include it: the coordinator's whole work per
//!   rebalance, comparable with the figures before 3.6. The broker hands the call out
//!   instead (`RunAssignor`); `tests/conformance/benches/assignor_handoff.rs` measures
//!   that hand-off.
//! - `assignor_1000x10000/{sticky,range}/{fresh,one-left}`: the assignor call alone,
//!   through the plugin ABI, on the very inputs the coordinator built for the group's
//!   first rebalance (1,000 members, nothing owned) and for the rebalance above (999
//!   members owning their partitions).
//!
//! ```text
//! cargo bench -p drover-coordinator --bench rebalance_1000x10000
//! ```

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use drover_abi::{AssignInput, Assignment, PluginError};
use drover_coordinator::{AssignorSet, Assignors, Input};

use support::{
    plugin, Driver, Kind, FORMED_AT, HEARTBEAT_INTERVAL_MS, MEMBERS, PARTITIONS_PER_TOPIC,
    SESSION_TIMEOUT_MS, TOPICS,
};

/// The libraries of the assignor plugins.
const PLUGINS: [&str; 2] = ["drover_assignor_sticky", "drover_assignor_range"];

/// The consumer whose channel closes (`consumer-0500`).
const VICTIM: usize = 500;
/// Its last frame: the answer to the Heartbeat of 10,300, 5 ms late, so that its lease
/// does not end on one of the other consumers' Heartbeat rounds (…, 40,300).
const VICTIM_LAST_FRAME: u64 = FORMED_AT + HEARTBEAT_INTERVAL_MS + 5;
/// When its channel closes.
const CLOSED_AT: u64 = 15_000;
/// The debounced rebalance start (the default `rebalance_delay_ms` of 300).
const DEBOUNCE_DUE: u64 = CLOSED_AT + 300;
/// When its partitions are released (docs/protocol.md §6.2 (d)).
const RELEASE_AT: u64 = VICTIM_LAST_FRAME + SESSION_TIMEOUT_MS;

/// A stable group of [`MEMBERS`] at [`CLOSED_AT`]: generation 1, every offset
/// committed, the victim's last frame at [`VICTIM_LAST_FRAME`].
fn stable_group(assignors: impl Assignors + Send + 'static, name: &str) -> Driver {
    let mut d = Driver::new(assignors, name);
    d.form();
    d.members[VICTIM].hold = true;
    d.run_until(FORMED_AT + HEARTBEAT_INTERVAL_MS);
    d.run_until(VICTIM_LAST_FRAME);
    d.release(VICTIM);
    d.run_until(CLOSED_AT);
    assert!(d.failed.is_empty(), "{:?}", d.failed);
    d
}

/// `handle` calls and their time, per kind of input.
type Calls = BTreeMap<Kind, (u64, Duration)>;

/// The timed work of one rebalance.
struct Report {
    /// Time in `handle`, in all.
    total: Duration,
    /// Per timed phase: its name and its calls.
    phases: Vec<(&'static str, Calls)>,
}

/// Closes the victim's channel in a group from [`stable_group`] and runs the rebalance
/// to its end; times the `handle` calls of the rebalance (see the module docs).
fn rebalance(d: &mut Driver) -> Report {
    assert_eq!(d.now, CLOSED_AT);
    let mut report = Report {
        total: Duration::ZERO,
        phases: Vec::new(),
    };
    let mut timed = |d: &mut Driver, phase, work: &mut dyn FnMut(&mut Driver) -> Duration| {
        d.stats.clear();
        report.total += work(d);
        report.phases.push((phase, std::mem::take(&mut d.stats)));
    };

    timed(d, "channel closed", &mut |d| {
        let victim = &mut d.members[VICTIM];
        victim.closed = true;
        let conn = victim.channel;
        d.deliver(Kind::ConnectionClosed, Input::ConnectionClosed { conn }) + d.drain()
    });
    assert_eq!(d.failed, [d.members[VICTIM].id.clone()]);

    d.run_until(DEBOUNCE_DUE - 1);
    assert_eq!(d.coord.poll_timeout(), Some(DEBOUNCE_DUE));
    timed(d, "debounce timer", &mut |d| d.step().1 + d.drain());

    d.run_until(RELEASE_AT - 1);
    assert_eq!(d.coord.poll_timeout(), Some(RELEASE_AT));
    assert_eq!(
        d.completed.len(),
        1,
        "a rebalance completed during the lease"
    );
    timed(d, "lease end", &mut |d| d.step().1 + d.drain());

    assert_eq!(d.completed.last(), Some(&(2, MEMBERS - 1)));
    check_covered(d);
    report
}

/// Panics unless the live consumers, all in generation 2, own every partition once.
fn check_covered(d: &Driver) {
    let mut seen = HashSet::new();
    for m in d.members.iter().filter(|m| !m.closed) {
        assert_eq!(m.generation, 2);
        for tp in m.positions.keys() {
            assert!(seen.insert(tp.clone()), "{tp} owned twice");
        }
    }
    assert_eq!(seen.len(), TOPICS * PARTITIONS_PER_TOPIC as usize);
}

/// Prints a report: per phase, the calls and their time per kind of input.
fn print_report(assignor: &str, report: &Report) {
    eprintln!(
        "rebalance_1000x10000/{assignor}, one run: {:.2?} in handle()",
        report.total
    );
    for (phase, calls) in &report.phases {
        let calls: Vec<String> = calls
            .iter()
            .map(|(kind, (n, t))| format!("{n} × {kind:?} {t:.2?}"))
            .collect();
        eprintln!("  {phase:<15} {}", calls.join(", "));
    }
}

/// `rebalance_1000x10000/<plugin>`.
fn bench_rebalance(c: &mut Criterion) {
    let mut g = c.benchmark_group("rebalance_1000x10000");
    // One rebalance takes milliseconds but its group takes longer to build: few
    // samples, one rebalance each.
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(100));
    for lib in PLUGINS {
        let (name, set) = plugin(lib);
        let mut d = stable_group(Inline(set.clone()), &name);
        print_report(&name, &rebalance(&mut d));
        drop(d);
        g.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut d = stable_group(Inline(set.clone()), &name);
                    total += rebalance(&mut d).total;
                }
                total
            })
        });
    }
    g.finish();
}

/// The plugins called inside `handle`, on the coordinator's thread, as a coordinator
/// before ABI 3.6 calls them (no runner: `Assignors::runner` is `None`).
struct Inline(AssignorSet);

impl Assignors for Inline {
    fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.0.assign(name, input)
    }

    fn assign_with_context(
        &self,
        name: &str,
        input: &AssignInput,
        context: drover_abi::assignor::AssignContextRef<'_>,
    ) -> Result<Assignment, PluginError> {
        self.0.assign_with_context(name, input, context)
    }
}

/// The plugins, recording the inputs the coordinator passes them.
struct Recording {
    inner: AssignorSet,
    inputs: Arc<Mutex<Vec<AssignInput>>>,
}

impl Assignors for Recording {
    fn contains(&self, name: &str) -> bool {
        self.inner.contains(name)
    }

    fn assign(&self, name: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.inputs.lock().unwrap().push(input.clone());
        self.inner.assign(name, input)
    }
}

/// `assignor_1000x10000/<plugin>/{fresh,one-left}`.
fn bench_assignor(c: &mut Criterion) {
    let mut g = c.benchmark_group("assignor_1000x10000");
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    for lib in PLUGINS {
        let (name, set) = plugin(lib);
        let inputs = Arc::new(Mutex::new(Vec::new()));
        let recording = Recording {
            inner: set.clone(),
            inputs: inputs.clone(),
        };
        rebalance(&mut stable_group(recording, &name));
        let inputs = std::mem::take(&mut *inputs.lock().unwrap());
        let [fresh, one_left] = <[AssignInput; 2]>::try_from(inputs).expect("two assignments");
        assert_eq!(fresh.members.len(), MEMBERS);
        assert_eq!(one_left.members.len(), MEMBERS - 1);
        for (case, input) in [("fresh", &fresh), ("one-left", &one_left)] {
            g.bench_with_input(BenchmarkId::new(&name, case), input, |b, input| {
                b.iter(|| set.assign(&name, input).unwrap())
            });
        }
    }
    g.finish();
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, bench_rebalance, bench_assignor);
}
criterion_main!(group::benches);
