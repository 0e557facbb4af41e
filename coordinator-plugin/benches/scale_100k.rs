//! 100,000 simulated members on one sans-IO coordinator core (issue 19 item 4): core CPU
//! per second of virtual time, memory per member, the queue delay of a ping, and the
//! time one large group takes to a new stable assignment after a member leaves, while
//! every other member keeps pinging and committing.
//!
//! ```text
//! cargo bench -p drover-coordinator --bench scale_100k -- --protocol native \
//!     --layout 900x100,1x10000 [--steady-s 10] [--assignor drover_assignor_sticky]
//!     [--assignment-interval-ms N]   (KIP-848: `consumer_assignment_interval_ms`, 0 = off)
//! cargo bench -p drover-coordinator --bench scale_100k -- --protocol kip848 --layout 900x100,1x10000
//! cargo bench -p drover-coordinator --bench scale_100k -- --protocol native --layout 1x100000
//! ```
//!
//! **The world.** `--layout GxM,…` lists groups of M members (G of them). Group k
//! subscribes to its own topic of M partitions, so every member owns one partition once
//! the group is stable. The assignor plugin (`sticky` by default) is loaded from its
//! `.so` and called through the ABI, as in the broker. The offset store answers every
//! operation at once. Every frame is a real encoded frame, built and read outside the
//! measured calls.
//!
//! - `native`: members register with a 3 s session timeout, so the coordinator pings
//!   each one every second (session timeout / 3, docs/protocol.md §6.3); a member answers
//!   every ping with its position (one partition) and advances that position every fifth
//!   ping, so the coordinator commits each member's offset every 5 s (a Heartbeat answer's
//!   unchanged offsets are not written again). Each member answers its first ping late
//!   by a phase of its own (0–990 ms, within the session timeout), which spreads the
//!   pings of a group over the second, as members that joined at different times would
//!   be.
//! - `kip848`: members join (ConsumerGroupHeartbeat v1, epoch 0) at phases spread over
//!   the first second, heartbeat at the interval each answer gives
//!   (`consumer_heartbeat_interval_ms` = 1000 in the steady state, the reconciliation
//!   interval while reconciling; right away after an answer that changes their
//!   assignment, as librdkafka does after its assignment callback) and commit their
//!   position with OffsetCommit v9 every 5 s.
//!
//! **Phases.** Formation (until every group is stable), a warm-up of 6 virtual seconds
//! (so the commits are running), the steady window (`--steady-s`, 10 by default; a
//! multiple of 5 holds every member's commits equally often), then
//! the largest group loses one member (native: LeaveGroup; KIP-848: a heartbeat with
//! epoch −1) and the run goes on until that group is stable again at one member less
//! (native: the coordinator's RebalanceCompleted event; KIP-848: every remaining member's
//! latest answer at the group's newest epoch with the steady interval), plus 2 s.
//!
//! **What is measured.**
//! - *Core CPU*: the thread CPU time (`CLOCK_THREAD_CPUTIME_ID`) of each
//!   `Coordinator::handle` call, less the measured cost of the two clock reads. Summed
//!   over a window and divided by the window's virtual seconds: CPU-seconds per second
//!   of virtual time. The process's CPU time (`getrusage`) over the same window is
//!   printed too; it includes the simulated members and store, so it is an upper bound.
//! - *Memory*: the heap the coordinator holds, counted by this bench's global allocator
//!   (live bytes before and after dropping the coordinator at the end), divided by the
//!   members; and the process's RSS growth over formation (members and store included).
//! - *Allocations*: heap allocations (`alloc` and `realloc` calls) per `handle` call, by
//!   kind of input: the profile of the hot path, with the mean CPU per call.
//! - *Queue delay*: the core is modelled as one server that takes inputs in order of
//!   arrival on virtual time: an input that arrives at virtual time `a` (a member's
//!   frame: when it was sent; a timer: its deadline) starts when the core is free,
//!   `start = max(a, free)`, and is handled at `free = start + cpu`, its measured CPU
//!   time; its delay is `free − a` (Lindley's recursion over the measured service
//!   times). The simulation itself does not wait for the model (answers go out at the
//!   virtual time their input arrived), which is exact while the delays stay far below
//!   the protocol's intervals. Reported per kind: for native groups the timers (which
//!   send the pings that are due) and the ping answers, for KIP-848 the heartbeats;
//!   p50, p99 and max, over the steady window and over the rebalance.
//! - *Rebalance*: virtual time from the leave to the new stable assignment (checked every
//!   10 virtual ms), the same with the core's CPU counted (the queue model's time when
//!   the core had handled every input up to that point: the simulated members answer at
//!   once, so virtual time alone leaves the core's own work out), and the core CPU of
//!   that window. The queue model starts the steady window empty (formation's backlog
//!   is not steady state) and runs on through the rebalance.

#[allow(dead_code)] // this bench uses only `plugin`
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use bytes::{Bytes, BytesMut};
use drover_coordinator::{
    ConnId, Coordinator, CoordinatorConfig, Event, FetchScope, Input, OffsetEntry, Output,
    TopicName, TopicPartition,
};
use drover_protocol as proto;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, OffsetCommitRequest,
    OffsetCommitResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use proto::{ApiKey, ErrorCode, NativeRequest, NativeResponse};

// ---------------------------------------------------------------- measuring

/// Counts heap allocations and live bytes.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        LIVE.fetch_add(layout.size() as i64, Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The process's CPU time (user + system), s.
fn process_cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage to write.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The process's resident set, bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// The cost of the two clock reads around a measured call, ns.
fn clock_pair_ns() -> u64 {
    const N: u64 = 200_000;
    let start = thread_cpu_ns();
    let mut sink = 0;
    for _ in 0..N {
        let a = thread_cpu_ns();
        sink ^= thread_cpu_ns() - a;
    }
    std::hint::black_box(sink);
    (thread_cpu_ns() - start) / N
}

/// What an input is, for the per-kind figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    /// `Input::Timer` (native: sends the pings that are due).
    Timer,
    /// A native member's answer to a ping.
    PingAnswer,
    /// A native StopFetcher or StartFetcher answer.
    FetcherAnswer,
    /// A RegisterConsumer or LeaveGroup request.
    Membership,
    /// A KIP-848 ConsumerGroupHeartbeat.
    Heartbeat,
    /// A Kafka OffsetCommit.
    OffsetCommit,
    /// `Input::OffsetsCommitted`.
    Committed,
    /// `Input::OffsetsFetched`.
    Fetched,
    /// Setup inputs (topics, connections).
    Setup,
}

/// Per-kind totals of a window.
#[derive(Debug, Default, Clone)]
struct KindStats {
    calls: u64,
    cpu_ns: u64,
    allocs: u64,
    /// Queue delays, ns.
    delays: Vec<u64>,
}

/// The measurements of one window.
#[derive(Debug, Default)]
struct Window {
    kinds: BTreeMap<Kind, KindStats>,
}

impl Window {
    fn cpu_ns(&self) -> u64 {
        self.kinds.values().map(|k| k.cpu_ns).sum()
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

// ---------------------------------------------------------------- the world

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Native,
    Kip848,
}

/// One group of the layout.
struct GroupInfo {
    name: String,
    topic: String,
    /// Index of its topic (and its topic id's last bytes).
    topic_index: usize,
    /// Its members' indexes.
    members: std::ops::Range<usize>,
    /// Native: the latest RebalanceCompleted (generation, members).
    completed: Option<(i32, usize)>,
    /// KIP-848: the newest group epoch seen in an answer.
    max_epoch: i32,
}

/// A simulated member.
struct Member {
    id: String,
    group: usize,
    conn: ConnId,
    /// Spread of its pings or heartbeats over the second, ms.
    phase: u64,
    gone: bool,
    /// Native: its RegisterConsumer answer arrived.
    registered: bool,
    /// Native: its generation.
    generation: i32,
    /// Native: its first ping answer was held back by its phase.
    spread: bool,
    /// Native: an answer held back until its event.
    held: Option<(Kind, Input)>,
    /// Native: pings answered.
    pings: u64,
    /// Owned partitions (of the group's topic) and positions.
    positions: BTreeMap<i32, i64>,
    /// KIP-848: its epoch.
    epoch: i32,
    /// KIP-848: the interval of its latest answer, ms.
    interval: u64,
    /// KIP-848: its owned partitions changed since its last heartbeat.
    owned_dirty: bool,
    /// KIP-848: the API keys of its requests not answered yet, in order.
    outstanding: VecDeque<i16>,
    /// KIP-848: the correlation id of its next request.
    next_corr: i32,
    /// KIP-848: its next heartbeat comes a phase late (set once the groups are
    /// formed, to spread heartbeats that reconciliation lined up).
    skew: bool,
}

/// A member's action at a virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Native: register. KIP-848: join.
    Join(usize),
    /// KIP-848: heartbeat.
    Heartbeat(usize),
    /// KIP-848: commit.
    Commit(usize),
    /// Native: deliver the held answer.
    Release(usize),
}

struct Sim {
    protocol: Protocol,
    coord: Option<Coordinator>,
    now: u64,
    groups: Vec<GroupInfo>,
    members: Vec<Member>,
    /// Inputs ready at `now` (arrival time, ms), in order.
    ready: VecDeque<(Kind, u64, Input)>,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    /// Kafka topic id → topic index.
    topic_by_id: HashMap<[u8; 16], usize>,
    store: HashMap<(String, TopicPartition), i64>,
    /// The queue model: when the core is next free, virtual ns.
    free_at_ns: u64,
    clock_pair_ns: u64,
    window: Window,
    /// KIP-848 answers that were errors, by code.
    errors: BTreeMap<i16, u64>,
    /// The connection the native leaver's LeaveGroup goes on.
    leave_conn: ConnId,
    /// Offsets the coordinator handed to the store.
    offsets_written: u64,
}

const NATIVE_SESSION_TIMEOUT_MS: i32 = 3_000;
const KIP848_INTERVAL_MS: u32 = 1_000;
const COMMIT_EVERY_MS: u64 = 5_000;
const ADVANCE_PER_COMMIT: i64 = 100;

fn topic_id(index: usize) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[0] = 0xd7;
    id[8..].copy_from_slice(&(index as u64 + 1).to_be_bytes());
    id
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

impl Sim {
    fn new(
        protocol: Protocol,
        layout: &[(usize, usize)],
        assignor_lib: &str,
        assignment_interval_ms: Option<u32>,
    ) -> Sim {
        let (name, assignors) = support::plugin(assignor_lib);
        let config = CoordinatorConfig {
            default_assignor: name,
            min_session_timeout_ms: NATIVE_SESSION_TIMEOUT_MS,
            consumer_heartbeat_interval_ms: KIP848_INTERVAL_MS,
            // The figures in docs/benchmarks.md predate the settle time (every member
            // at the short interval for 1 s after each target change), which would
            // multiply the heartbeats of group formation here by up to five.
            consumer_rebalance_settle_ms: 0,
            consumer_assignment_interval_ms: assignment_interval_ms
                .unwrap_or(CoordinatorConfig::default().consumer_assignment_interval_ms),
            ..CoordinatorConfig::default()
        };
        let coord = Coordinator::new(config, assignors).expect("valid config");
        let mut groups = Vec::new();
        let mut members = Vec::new();
        for &(count, size) in layout {
            for _ in 0..count {
                let k = groups.len();
                let start = members.len();
                for j in 0..size {
                    let i = members.len();
                    members.push(Member {
                        id: format!("g{k}-m{j}-{:08x}", (i as u64).wrapping_mul(0x9e37_79b9)),
                        group: k,
                        conn: ConnId(i as u64 + 1),
                        // A spread that does not follow the index order.
                        phase: (i as u64 * 7_919) % 990,
                        gone: false,
                        registered: false,
                        generation: 0,
                        spread: false,
                        held: None,
                        pings: 0,
                        positions: BTreeMap::new(),
                        epoch: 0,
                        interval: 0,
                        owned_dirty: false,
                        outstanding: VecDeque::new(),
                        next_corr: 1,
                        skew: false,
                    });
                }
                groups.push(GroupInfo {
                    name: format!("group-{k}"),
                    topic: format!("topic-{k}"),
                    topic_index: k,
                    members: start..members.len(),
                    completed: None,
                    max_epoch: 0,
                });
            }
        }
        let leave_conn = ConnId(members.len() as u64 + 1);
        let mut sim = Sim {
            protocol,
            coord: Some(coord),
            now: 0,
            groups,
            members,
            ready: VecDeque::new(),
            events: BinaryHeap::new(),
            seq: 0,
            topic_by_id: HashMap::new(),
            store: HashMap::new(),
            free_at_ns: 0,
            clock_pair_ns: clock_pair_ns(),
            window: Window::default(),
            errors: BTreeMap::new(),
            leave_conn,
            offsets_written: 0,
        };
        let ids: BTreeMap<TopicName, [u8; 16]> = sim
            .groups
            .iter()
            .map(|g| (TopicName::new(&g.topic), topic_id(g.topic_index)))
            .collect();
        sim.topic_by_id = sim
            .groups
            .iter()
            .map(|g| (topic_id(g.topic_index), g.topic_index))
            .collect();
        sim.deliver(Kind::Setup, 0, Input::TopicIds { ids });
        let topics: BTreeMap<TopicName, u32> = sim
            .groups
            .iter()
            .map(|g| (TopicName::new(&g.topic), g.members.len() as u32))
            .collect();
        sim.deliver(Kind::Setup, 0, Input::TopicsChanged { topics });
        for i in 0..sim.members.len() {
            let conn = sim.members[i].conn;
            let peer = "10.0.0.1".to_owned();
            sim.deliver(Kind::Setup, 0, Input::ConnectionOpened { conn, peer });
            // Native members register at 0 (one first rebalance per group); KIP-848
            // members join at their phase.
            let at = match protocol {
                Protocol::Native => 0,
                Protocol::Kip848 => sim.members[i].phase,
            };
            sim.schedule(at, Ev::Join(i));
        }
        let conn = sim.leave_conn;
        sim.deliver(
            Kind::Setup,
            0,
            Input::ConnectionOpened {
                conn,
                peer: "10.0.0.2".into(),
            },
        );
        sim
    }

    fn coord(&mut self) -> &mut Coordinator {
        self.coord.as_mut().expect("the coordinator")
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    /// Hands one input that arrived at virtual `arrival` ms to the core, measures the
    /// call, advances the queue model and carries out the outputs.
    fn deliver(&mut self, kind: Kind, arrival: u64, input: Input) {
        let now = self.now;
        let allocs = ALLOCS.load(Relaxed);
        let cpu0 = thread_cpu_ns();
        let outputs = self.coord().handle(now, input);
        let cpu = (thread_cpu_ns() - cpu0).saturating_sub(self.clock_pair_ns);
        let allocs = ALLOCS.load(Relaxed) - allocs;
        let arrival_ns = arrival * 1_000_000;
        let start = arrival_ns.max(self.free_at_ns);
        self.free_at_ns = start + cpu;
        let k = self.window.kinds.entry(kind).or_default();
        k.calls += 1;
        k.cpu_ns += cpu;
        k.allocs += allocs;
        if matches!(kind, Kind::Timer | Kind::PingAnswer | Kind::Heartbeat) {
            k.delays.push(self.free_at_ns - arrival_ns);
        }
        for output in outputs {
            self.apply(output);
        }
    }

    /// Runs every input up to virtual time `t`; `until` is checked every `every` virtual
    /// ms and stops the run early when it holds (returns whether it did).
    fn run_until(&mut self, t: u64, every: u64, mut until: impl FnMut(&Sim) -> bool) -> bool {
        let mut next_check = self.now;
        loop {
            while let Some((kind, arrival, input)) = self.ready.pop_front() {
                self.deliver(kind, arrival, input);
            }
            if self.now >= next_check {
                if until(self) {
                    return true;
                }
                next_check = self.now + every;
            }
            let ev_at = self.events.peek().map(|Reverse((at, _, _))| *at);
            let timer_at = self.coord.as_ref().and_then(|c| c.poll_timeout());
            let next = match (ev_at, timer_at) {
                (None, None) => break,
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (Some(a), Some(b)) => a.min(b),
            };
            let next = next.max(self.now).min(next_check);
            if next > t {
                break;
            }
            self.now = next;
            if ev_at == Some(next) {
                let Reverse((_, _, ev)) = self.events.pop().expect("peeked");
                self.on_event(ev);
            } else if timer_at.is_some_and(|at| at <= next) {
                self.deliver(Kind::Timer, next, Input::Timer);
            }
        }
        self.now = self.now.max(t);
        until(self)
    }

    // ------------------------------------------------------------ outputs

    fn apply(&mut self, output: Output) {
        match output {
            Output::ChannelOpened { .. } | Output::Metric { .. } => {}
            Output::Answer { conn, bytes } | Output::Push { conn, bytes } => {
                self.on_frame(conn, bytes)
            }
            Output::CommitOffsets { op, records } => {
                self.offsets_written += records.len() as u64;
                for r in records {
                    self.store.insert((r.group.to_string(), r.tp), r.offset);
                }
                let input = Input::OffsetsCommitted { op, result: Ok(()) };
                self.ready.push_back((Kind::Committed, self.now, input));
            }
            Output::FetchOffsets { op, group, scope } => {
                let found = match &scope {
                    FetchScope::Partitions(list) => list
                        .iter()
                        .filter_map(|tp| {
                            let offset = self.store.get(&(group.to_string(), tp.clone()))?;
                            Some(OffsetEntry {
                                group: group.clone(),
                                tp: tp.clone(),
                                offset: *offset,
                                metadata: None,
                            })
                        })
                        .collect(),
                    FetchScope::WholeGroup => Vec::new(),
                };
                let input = Input::OffsetsFetched {
                    op,
                    result: Ok(found),
                };
                self.ready.push_back((Kind::Fetched, self.now, input));
            }
            Output::CloseConnection { conn } => {
                // Only the channel of a member that left is closed; the host then
                // reports it closed.
                let i = conn.0 as usize - 1;
                assert!(
                    conn != self.leave_conn && self.members[i].gone,
                    "the coordinator closed {conn} at {}",
                    self.now
                );
                let input = Input::ConnectionClosed { conn };
                self.ready.push_back((Kind::Membership, self.now, input));
            }
            Output::Event(event) => self.on_core_event(event),
            Output::RunAssignor(job) => {
                // The broker runs it on an assignor thread; here at once, untimed.
                let input = Input::AssignorDone {
                    call: job.id(),
                    result: job.run(),
                };
                self.ready.push_back((Kind::Membership, self.now, input));
            }
            other => panic!("unexpected output {other:?}"),
        }
    }

    fn on_core_event(&mut self, event: Event) {
        match event {
            Event::RebalanceCompleted {
                group,
                generation,
                members,
                ..
            } => {
                let k: usize = group.as_str()["group-".len()..].parse().expect("ours");
                self.groups[k].completed = Some((generation.0, members));
            }
            Event::MemberFailed {
                consumer, reason, ..
            } => panic!("t={}: {consumer} failed: {reason:?}", self.now),
            Event::SafetyCheckFailed { message, .. }
            | Event::AssignorFailed { message, .. }
            | Event::CommitFailed { message, .. }
            | Event::OffsetFetchFailed { message, .. }
            | Event::ConnectionRejected { message, .. } => {
                panic!("t={}: {message}", self.now)
            }
            _ => {}
        }
    }

    fn on_frame(&mut self, conn: ConnId, bytes: Bytes) {
        if conn == self.leave_conn {
            return;
        }
        let i = conn.0 as usize - 1;
        match self.protocol {
            Protocol::Native => self.native_frame(i, bytes),
            Protocol::Kip848 => self.kafka_answer(i, bytes),
        }
    }

    // ------------------------------------------------------------ native members

    fn native_frame(&mut self, i: usize, bytes: Bytes) {
        let now = self.now;
        let m = &mut self.members[i];
        assert!(!m.gone, "frame to {} after it left", m.id);
        if !m.registered {
            let (_, response) =
                proto::decode_response_frame(bytes, ApiKey::RegisterConsumer, 0).unwrap();
            let NativeResponse::RegisterConsumer(r) = response else {
                panic!("{response:?}")
            };
            assert_eq!(r.error_code, ErrorCode::NONE, "{r:?}");
            m.registered = true;
            return;
        }
        let topic = &self.groups[m.group].topic;
        let (header, request) = proto::decode_request_frame(bytes).unwrap();
        let (kind, response) = match request {
            NativeRequest::Heartbeat(_) => {
                m.pings += 1;
                if m.pings % (COMMIT_EVERY_MS / 1_000) == 0 {
                    for offset in m.positions.values_mut() {
                        *offset += ADVANCE_PER_COMMIT;
                    }
                }
                let offsets = native_offsets(topic, &m.positions);
                let response = NativeResponse::Heartbeat(proto::HeartbeatResponse {
                    error_code: ErrorCode::NONE,
                    fetchers_healthy: true,
                    offsets,
                });
                (Kind::PingAnswer, response)
            }
            NativeRequest::StopFetcher(stop) => {
                let stopped: Vec<i32> = if stop.stop_all {
                    m.positions.keys().copied().collect()
                } else {
                    stop.partitions
                        .iter()
                        .flat_map(|t| t.partitions.iter().copied())
                        .collect()
                };
                let mut finals = BTreeMap::new();
                for p in stopped {
                    let offset = m.positions.remove(&p).expect("stops an owned partition");
                    finals.insert(p, offset);
                }
                let response = NativeResponse::StopFetcher(proto::StopFetcherResponse {
                    error_code: ErrorCode::NONE,
                    offsets: native_offsets(topic, &finals),
                });
                (Kind::FetcherAnswer, response)
            }
            NativeRequest::StartFetcher(start) => {
                let mut next = BTreeMap::new();
                for t in &start.assignment {
                    for p in &t.partitions {
                        let position = match p.start_offset {
                            proto::PartitionStart::KEEP_POSITION => m.positions[&p.partition],
                            proto::PartitionStart::NO_COMMITTED_OFFSET => 0,
                            offset => offset,
                        };
                        next.insert(p.partition, position);
                    }
                }
                m.positions = next;
                m.generation = start.generation;
                let response = NativeResponse::StartFetcher(proto::StartFetcherResponse {
                    error_code: ErrorCode::NONE,
                });
                (Kind::FetcherAnswer, response)
            }
            other => panic!("unexpected request on the channel: {other:?}"),
        };
        let input = Input::Frame {
            conn: m.conn,
            bytes: support::response_frame(header.correlation_id, &response),
        };
        if kind == Kind::PingAnswer && !m.spread {
            // The first ping's answer comes a second and a phase later: the next ping
            // then goes out at once, at this member's phase.
            m.spread = true;
            m.held = Some((kind, input));
            let at = now + 1_000 + m.phase;
            self.schedule(at, Ev::Release(i));
        } else {
            self.ready.push_back((kind, now, input));
        }
    }

    fn native_register(&mut self, i: usize) {
        let m = &self.members[i];
        let g = &self.groups[m.group];
        let request = NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
            group_id: g.name.clone(),
            consumer_id: m.id.clone(),
            host: "bench-host".into(),
            session_timeout_ms: NATIVE_SESSION_TIMEOUT_MS,
            subscription: proto::Subscription::static_topics([(g.topic.clone(), 1)]),
            auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
            assignor: None,
            member: proto::MemberData::default(),
        });
        let bytes = support::request_frame(1, &m.id, &request);
        let conn = m.conn;
        self.ready
            .push_back((Kind::Membership, self.now, Input::Frame { conn, bytes }));
    }

    fn native_leave(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.gone = true;
        let request = NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
            group_id: self.groups[m.group].name.clone(),
            consumer_id: m.id.clone(),
        });
        let bytes = support::request_frame(1, &m.id, &request);
        let conn = self.leave_conn;
        self.ready
            .push_back((Kind::Membership, self.now, Input::Frame { conn, bytes }));
    }

    // ------------------------------------------------------------ KIP-848 members

    fn kafka_send<R: Request + Encodable>(
        &mut self,
        i: usize,
        kind: Kind,
        request: &R,
        version: i16,
    ) {
        let m = &mut self.members[i];
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = m.next_corr;
        header.client_id = Some(StrBytes::from_static_str("bench"));
        m.next_corr += 1;
        m.outstanding.push_back(R::KEY);
        let mut frame = BytesMut::new();
        header
            .encode(&mut frame, R::header_version(version))
            .unwrap();
        request.encode(&mut frame, version).unwrap();
        let conn = m.conn;
        self.ready.push_back((
            kind,
            self.now,
            Input::Frame {
                conn,
                bytes: frame.freeze(),
            },
        ));
    }

    fn kip848_heartbeat(&mut self, i: usize, epoch: i32) {
        let m = &mut self.members[i];
        let g = &self.groups[m.group];
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = kafka_protocol::messages::GroupId(s(g.name.clone()));
        r.member_id = s(m.id.clone());
        r.member_epoch = epoch;
        r.rebalance_timeout_ms = -1;
        if epoch == 0 {
            r.rebalance_timeout_ms = 300_000;
            r.subscribed_topic_names = Some(vec![kafka_protocol::messages::TopicName(s(g
                .topic
                .clone()))]);
            r.topic_partitions = Some(Vec::new());
        } else if m.owned_dirty && epoch > 0 {
            let mut t = OwnedTopic::default();
            t.topic_id = uuid::Uuid::from_bytes(topic_id(g.topic_index));
            t.partitions = m.positions.keys().copied().collect();
            r.topic_partitions = Some(if t.partitions.is_empty() {
                Vec::new()
            } else {
                vec![t]
            });
        }
        m.owned_dirty = false;
        self.kafka_send(i, Kind::Heartbeat, &r, 1);
    }

    fn kip848_commit(&mut self, i: usize) {
        let m = &mut self.members[i];
        if m.positions.is_empty() || m.epoch <= 0 {
            return;
        }
        let g = &self.groups[m.group];
        let mut t = OffsetCommitRequestTopic::default();
        t.name = kafka_protocol::messages::TopicName(s(g.topic.clone()));
        for (&p, offset) in m.positions.iter_mut() {
            *offset += ADVANCE_PER_COMMIT;
            let mut part = OffsetCommitRequestPartition::default();
            part.partition_index = p;
            part.committed_offset = *offset;
            t.partitions.push(part);
        }
        let mut r = OffsetCommitRequest::default();
        r.group_id = kafka_protocol::messages::GroupId(s(g.name.clone()));
        r.generation_id_or_member_epoch = m.epoch;
        r.member_id = s(m.id.clone());
        r.topics = vec![t];
        self.kafka_send(i, Kind::OffsetCommit, &r, 9);
    }

    fn kafka_answer(&mut self, i: usize, mut bytes: Bytes) {
        let now = self.now;
        let key = self.members[i]
            .outstanding
            .pop_front()
            .expect("an answer to a request");
        if key == OffsetCommitRequest::KEY {
            ResponseHeader::decode(&mut bytes, OffsetCommitResponse::header_version(9)).unwrap();
            let r = OffsetCommitResponse::decode(&mut bytes, 9).unwrap();
            for t in &r.topics {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        *self.errors.entry(p.error_code).or_default() += 1;
                    }
                }
            }
            return;
        }
        ResponseHeader::decode(
            &mut bytes,
            ConsumerGroupHeartbeatResponse::header_version(1),
        )
        .unwrap();
        let r = ConsumerGroupHeartbeatResponse::decode(&mut bytes, 1).unwrap();
        let m = &mut self.members[i];
        if r.error_code != 0 {
            *self.errors.entry(r.error_code).or_default() += 1;
            panic!(
                "t={now}: {} heartbeat refused: {} {:?}",
                m.id, r.error_code, r.error_message
            );
        }
        if m.gone {
            return;
        }
        m.epoch = r.member_epoch;
        m.interval = r.heartbeat_interval_ms as u64;
        let g = &mut self.groups[m.group];
        g.max_epoch = g.max_epoch.max(r.member_epoch);
        let mut changed = false;
        if let Some(a) = r.assignment {
            let mut next = BTreeMap::new();
            for t in &a.topic_partitions {
                assert_eq!(
                    self.topic_by_id.get(t.topic_id.as_bytes()),
                    Some(&g.topic_index)
                );
                for &p in &t.partitions {
                    next.insert(p, m.positions.get(&p).copied().unwrap_or(0));
                }
            }
            if next.keys().ne(m.positions.keys()) {
                m.positions = next;
                m.owned_dirty = true;
                changed = true;
            }
        }
        let at = if changed {
            now
        } else if std::mem::take(&mut m.skew) {
            now + m.interval + m.phase
        } else {
            now + m.interval
        };
        self.schedule(at, Ev::Heartbeat(i));
    }

    // ------------------------------------------------------------ member actions

    fn on_event(&mut self, ev: Ev) {
        match ev {
            Ev::Join(i) => match self.protocol {
                Protocol::Native => self.native_register(i),
                Protocol::Kip848 => {
                    self.kip848_heartbeat(i, 0);
                    let at = self.now + COMMIT_EVERY_MS;
                    self.schedule(at, Ev::Commit(i));
                }
            },
            Ev::Heartbeat(i) => {
                if !self.members[i].gone {
                    let epoch = self.members[i].epoch;
                    self.kip848_heartbeat(i, epoch);
                }
            }
            Ev::Commit(i) => {
                if !self.members[i].gone {
                    self.kip848_commit(i);
                    let at = self.now + COMMIT_EVERY_MS;
                    self.schedule(at, Ev::Commit(i));
                }
            }
            Ev::Release(i) => {
                if let Some((kind, input)) = self.members[i].held.take() {
                    self.ready.push_back((kind, self.now, input));
                }
            }
        }
    }

    /// Member `i` leaves its group.
    fn leave(&mut self, i: usize) {
        match self.protocol {
            Protocol::Native => self.native_leave(i),
            Protocol::Kip848 => {
                self.kip848_heartbeat(i, -1);
                self.members[i].gone = true;
            }
        }
    }

    /// Whether group `k` is stable with `size` members, KIP-848 members at an epoch
    /// above `epoch`.
    fn stable(&self, k: usize, size: usize, epoch: i32) -> bool {
        let g = &self.groups[k];
        match self.protocol {
            Protocol::Native => g.completed.is_some_and(|(_, n)| n == size),
            Protocol::Kip848 => self.members[g.members.clone()]
                .iter()
                .filter(|m| !m.gone)
                .all(|m| {
                    m.epoch == g.max_epoch
                        && m.epoch > epoch
                        && m.interval == u64::from(KIP848_INTERVAL_MS)
                        && !m.owned_dirty
                }),
        }
    }

    fn all_stable(&self) -> bool {
        (0..self.groups.len()).all(|k| self.stable(k, self.groups[k].members.len(), 0))
    }
}

/// A native member's offsets on the wire.
fn native_offsets(topic: &str, positions: &BTreeMap<i32, i64>) -> Vec<proto::TopicOffsets> {
    if positions.is_empty() {
        return Vec::new();
    }
    vec![proto::TopicOffsets {
        topic: topic.to_owned(),
        partitions: positions
            .iter()
            .map(|(&partition, &offset)| proto::PartitionOffset {
                partition,
                offset,
                metadata: None,
            })
            .collect(),
    }]
}

// ---------------------------------------------------------------- the run

struct Args {
    protocol: Protocol,
    layout: Vec<(usize, usize)>,
    steady_s: u64,
    assignor: String,
    /// `consumer_assignment_interval_ms` (KIP-848), `None`: the default.
    assignment_interval_ms: Option<u32>,
}

fn parse_args() -> Args {
    let mut args = Args {
        protocol: Protocol::Native,
        layout: vec![(900, 100), (1, 10_000)],
        steady_s: 10,
        assignor: "drover_assignor_sticky".into(),
        assignment_interval_ms: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--protocol" => {
                args.protocol = match value().as_str() {
                    "native" => Protocol::Native,
                    "kip848" => Protocol::Kip848,
                    other => panic!("--protocol native|kip848, not {other}"),
                }
            }
            "--layout" => {
                args.layout = value()
                    .split(',')
                    .map(|part| {
                        let (g, m) = part.split_once('x').expect("GxM");
                        (g.parse().expect("G"), m.parse().expect("M"))
                    })
                    .collect()
            }
            "--steady-s" => args.steady_s = value().parse().expect("seconds"),
            "--assignor" => args.assignor = value(),
            "--assignment-interval-ms" => {
                args.assignment_interval_ms = Some(value().parse().expect("ms"))
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn print_window(name: &str, w: &Window, virtual_s: f64, process_s: f64) {
    let cpu = w.cpu_ns() as f64 / 1e9;
    println!(
        "{name}: {virtual_s:.1} virtual s, core CPU {cpu:.3} s = {:.3} CPU-s per virtual s \
         (process, members and store included: {:.3})",
        cpu / virtual_s,
        process_s / virtual_s
    );
    println!(
        "  kind            calls  calls/vs   CPU µs/call  allocs/call  delay p50 / p99 / max ms"
    );
    for (kind, k) in &w.kinds {
        let mut d = k.delays.clone();
        d.sort_unstable();
        let delay = if d.is_empty() {
            String::new()
        } else {
            format!(
                "{:.3} / {:.3} / {:.3}",
                percentile(&d, 0.5) as f64 / 1e6,
                percentile(&d, 0.99) as f64 / 1e6,
                *d.last().unwrap() as f64 / 1e6
            )
        };
        println!(
            "  {:<14} {:>8} {:>9.0} {:>12.2} {:>12.1}  {delay}",
            format!("{kind:?}"),
            k.calls,
            k.calls as f64 / virtual_s,
            k.cpu_ns as f64 / k.calls.max(1) as f64 / 1e3,
            k.allocs as f64 / k.calls.max(1) as f64,
        );
    }
}

fn main() {
    let args = parse_args();
    let members: usize = args.layout.iter().map(|(g, m)| g * m).sum();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    println!(
        "scale_100k: {:?}, layout {:?} ({members} members), assignor {}; machine: {} CPUs, {cpu_model}",
        args.protocol,
        args.layout,
        args.assignor,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    println!(
        "command: {}",
        std::env::args().collect::<Vec<_>>().join(" ")
    );

    let rss0 = rss_bytes();
    let heap0 = LIVE.load(Relaxed);
    let wall = std::time::Instant::now();
    let mut sim = Sim::new(
        args.protocol,
        &args.layout,
        &args.assignor,
        args.assignment_interval_ms,
    );
    println!(
        "clock pair: {} ns (subtracted from each call)",
        sim.clock_pair_ns
    );

    // Formation.
    let p0 = process_cpu_s();
    let formed = sim.run_until(600_000, 100, |s| s.now >= 1_000 && s.all_stable());
    assert!(formed, "not stable by 600 s of virtual time");
    let formed_at = sim.now;
    let w = std::mem::take(&mut sim.window);
    print_window(
        &format!("formation (all groups stable at {formed_at} ms)"),
        &w,
        formed_at as f64 / 1e3,
        process_cpu_s() - p0,
    );

    // Warm-up, then the steady window.
    for m in &mut sim.members {
        m.skew = true;
    }
    let t = sim.now + 6_000;
    sim.run_until(t, 1_000, |_| false);
    let rss1 = rss_bytes();
    sim.window = Window::default();
    // The queue model starts the steady window empty: formation leaves a backlog (its
    // first assignments) that says nothing about the steady state.
    sim.free_at_ns = sim.now * 1_000_000;
    let p0 = process_cpu_s();
    let t0 = sim.now;
    let t = t0 + args.steady_s * 1_000;
    sim.run_until(t, 1_000, |_| false);
    let steady = std::mem::take(&mut sim.window);
    println!(
        "offsets written to the store so far: {} ({:.0} per member)",
        sim.offsets_written,
        sim.offsets_written as f64 / members as f64
    );
    print_window(
        "steady",
        &steady,
        (sim.now - t0) as f64 / 1e3,
        process_cpu_s() - p0,
    );

    // One rebalance of the largest group under that load.
    let k = (0..sim.groups.len())
        .max_by_key(|&k| (sim.groups[k].members.len(), Reverse(k)))
        .expect("a group");
    let size = sim.groups[k].members.len();
    let leaver = sim.groups[k].members.start + size / 2;
    let p0 = process_cpu_s();
    let t0 = sim.now;
    sim.leave(leaver);
    let epoch = sim.groups[k].max_epoch;
    let done = sim.run_until(t0 + 120_000, 10, |s| s.stable(k, size - 1, epoch));
    assert!(done, "group {k} not stable 120 s after the leave");
    let recovered = sim.now - t0;
    // In the queue model the core finished the inputs that led there at `free_at_ns`.
    let recovered_model = (sim.free_at_ns / 1_000_000).max(sim.now) - t0;
    if sim.protocol == Protocol::Kip848 {
        let g = &sim.groups[k];
        let epochs: BTreeMap<i32, usize> = sim.members[g.members.clone()]
            .iter()
            .filter(|m| !m.gone)
            .fold(BTreeMap::new(), |mut acc, m| {
                *acc.entry(m.epoch).or_default() += 1;
                acc
            });
        println!(
            "member epochs at stable: {epochs:?}, group max {}",
            g.max_epoch
        );
    }
    sim.run_until(sim.now + 2_000, 1_000, |_| false);
    let reb = std::mem::take(&mut sim.window);
    println!(
        "rebalance of {} ({size} members, one leaves): stable again after {recovered} ms of \
         virtual time (checked every 10 ms); {recovered_model} ms once the core's CPU is \
         counted (the queue model's time when it had handled the inputs that led there)",
        sim.groups[k].name
    );
    print_window(
        "rebalance window (leave to stable + 2 s)",
        &reb,
        (sim.now - t0) as f64 / 1e3,
        process_cpu_s() - p0,
    );
    if !sim.errors.is_empty() {
        println!("error answers by code: {:?}", sim.errors);
    }

    // Memory.
    let before = LIVE.load(Relaxed);
    drop(sim.coord.take());
    let core_heap = before - LIVE.load(Relaxed);
    println!(
        "memory: coordinator heap {:.1} MiB = {:.0} bytes/member; process RSS grew {:.1} MiB \
         over formation ({:.0} bytes/member, simulated members and store included); \
         heap at the start {:.1} MiB",
        core_heap as f64 / 1_048_576.0,
        core_heap as f64 / members as f64,
        (rss1 - rss0) as f64 / 1_048_576.0,
        (rss1 - rss0) as f64 / members as f64,
        heap0 as f64 / 1_048_576.0,
    );
    println!("wall time of the whole run: {:.1?}", wall.elapsed());
}
