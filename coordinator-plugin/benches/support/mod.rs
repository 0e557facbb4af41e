//! What the coordinator benches share: a minimal host that drives one [`Coordinator`]
//! on virtual time, with conforming consumers and an offset store that answer
//! instantly, and the real assignor plugins, loaded from their built `.so` as the host
//! loads them ([`plugin`]).
//!
//! The group: [`MEMBERS`] consumers in group [`GROUP`], each subscribed statically to
//! [`TOPICS`] topics of [`PARTITIONS_PER_TOPIC`] partitions (10,000 in all), session
//! timeout [`SESSION_TIMEOUT_MS`] (a Heartbeat every 10 s), the coordinator's default
//! config otherwise (incremental rebalances, 300 ms debounce, commits every 1 s).
//!
//! Every frame is a real encoded frame (`drover_protocol::encode_*_frame`, after the
//! 4-byte size prefix). [`Driver::deliver`] times the `Coordinator::handle` call alone:
//! decoding the coordinator's requests and building the consumers' answers happen
//! outside the clock.
//!
//! (`tests/all/common/mod.rs` is not reused: its `World` calls `handle` inside private
//! methods, so the call cannot be timed apart from the simulation, and its per-step
//! safety check and linear store scans make a 1,000 × 10,000 group far too slow to
//! build once per sample.)

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RBox, RNone, RStr, RString};
use bytes::{Bytes, BytesMut};
use drover_abi::host::{LogSink, LogSink_TO};
use drover_abi::{AssignorModRef, HostServices, LogLevel};
use drover_coordinator::{
    AssignorSet, Assignors, ConnId, Coordinator, CoordinatorConfig, Event, FetchScope, Input,
    OffsetEntry, Output, TopicName, TopicPartition,
};
use drover_protocol as proto;
use proto::{ApiKey, ErrorCode, NativeRequest, NativeResponse};

/// The group's id.
pub const GROUP: &str = "bench";
/// Consumers in the group.
pub const MEMBERS: usize = 1_000;
/// Topics every consumer subscribes to.
pub const TOPICS: usize = 10;
/// Partitions per topic.
pub const PARTITIONS_PER_TOPIC: u32 = 1_000;
/// Every consumer's session timeout; the coordinator sends a Heartbeat every third.
pub const SESSION_TIMEOUT_MS: u64 = 30_000;
/// The Heartbeat interval the coordinator derives from the session timeout.
pub const HEARTBEAT_INTERVAL_MS: u64 = SESSION_TIMEOUT_MS / 3;
/// Everyone registers at 0; the debounced first rebalance runs at 300 (the default
/// `rebalance_delay_ms`), and generation 1 is in force from then on.
pub const FORMED_AT: u64 = 300;
/// How far a consumer's positions advance between two Heartbeats, so every Heartbeat
/// answer carries new offsets (unchanged offsets are not committed again).
const CONSUMED_PER_HEARTBEAT: i64 = 100;
/// How far the positions of stopped partitions advanced since the last Heartbeat, so
/// StopFetcher answers carry new final offsets, which the coordinator commits at once.
const CONSUMED_SINCE_HEARTBEAT: i64 = 10;

/// Loads the built assignor plugin `lib<lib_name>.so` (next to the bench binary, in
/// `<target>/<profile>/deps`, where cargo puts the cdylibs of this crate's
/// dev-dependencies) the way the host's loader does, and creates an instance. Returns
/// its name and a set holding it: the coordinator then calls it through the plugin ABI,
/// as in the broker.
///
/// (The plugins' rlibs cannot be linked into a bench instead: they and this crate's
/// rlib all export the same `abi_stable` root-module symbol.)
pub fn plugin(lib_name: &str) -> (String, AssignorSet) {
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe.with_file_name(format!("lib{lib_name}.so"));
    assert!(
        path.is_file(),
        "{path:?} is not built (cargo builds it as a dev-dependency of this crate)"
    );
    let header = abi_stable::library::lib_header_from_path(&path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let module = header
        .init_root_module::<AssignorModRef>()
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let name = module.manifest().name.to_string();
    let services = HostServices {
        log: RArc::new(LogSink_TO::from_ptr(RBox::new(Quiet), TD_Opaque)),
        config: RString::new(),
        zookeeper: RNone,
    };
    let assignor = (module.new())(services)
        .into_result()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut set = AssignorSet::new();
    set.insert(name.clone(), assignor);
    (name, set)
}

/// The plugins' log sink: errors only, to stderr.
struct Quiet;

impl LogSink for Quiet {
    fn log(&self, level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
        eprintln!("{level:?} {target}: {message}");
    }

    fn max_level(&self) -> LogLevel {
        LogLevel::Error
    }
}

/// The coordinator config of the benches: the defaults, with `assignor` as the default
/// assignor.
pub fn config(assignor: &str) -> CoordinatorConfig {
    CoordinatorConfig {
        default_assignor: assignor.into(),
        ..CoordinatorConfig::default()
    }
}

/// What an input is, for per-kind timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// [`Input::Timer`].
    Timer,
    /// A consumer's answer to a Heartbeat.
    HeartbeatAnswer,
    /// A consumer's answer to a StopFetcher.
    StopAnswer,
    /// A consumer's answer to a StartFetcher.
    StartAnswer,
    /// [`Input::OffsetsCommitted`].
    OffsetsCommitted,
    /// [`Input::OffsetsFetched`].
    OffsetsFetched,
    /// [`Input::ConnectionClosed`].
    #[allow(dead_code)] // only the rebalance benches close a channel
    ConnectionClosed,
    /// A request from a client (RegisterConsumer, CommitOffset).
    Request,
    /// [`Input::AssignorDone`]: the result of an assignor call, which the host runs
    /// off the coordinator's thread (here: at once, on the driver's thread).
    AssignorDone,
}

/// A fake consumer: it answers every coordinator request at once, as
/// docs/protocol.md asks.
pub struct Member {
    /// Its consumer id.
    pub id: String,
    /// Its coordinator channel (the connection it registered on).
    pub channel: ConnId,
    /// Its other connection, for CommitOffset.
    pub other: ConnId,
    /// Whether the RegisterConsumer answer arrived.
    pub registered: bool,
    /// Its generation.
    pub generation: i32,
    /// Owned partitions and the next offset to consume.
    pub positions: BTreeMap<TopicPartition, i64>,
    /// While set, answers are kept in `held` instead of delivered.
    pub hold: bool,
    /// An answer kept back while `hold` is set.
    pub held: Option<(Kind, Input)>,
    /// Its channel closed: it answers nothing more.
    pub closed: bool,
}

impl Member {
    /// Its positions, grouped by topic as on the wire.
    pub fn offsets(&self) -> Vec<proto::TopicOffsets> {
        offsets_to_wire(&self.positions)
    }
}

/// Offsets grouped by topic as on the wire.
fn offsets_to_wire(positions: &BTreeMap<TopicPartition, i64>) -> Vec<proto::TopicOffsets> {
    let mut out: Vec<proto::TopicOffsets> = Vec::new();
    for (tp, &offset) in positions {
        let p = proto::PartitionOffset {
            partition: tp.partition,
            offset,
            metadata: None,
        };
        match out.last_mut() {
            Some(last) if last.topic == tp.topic.as_str() => last.partitions.push(p),
            _ => out.push(proto::TopicOffsets {
                topic: tp.topic.to_string(),
                partitions: vec![p],
            }),
        }
    }
    out
}

/// One coordinator and its world.
pub struct Driver {
    /// The coordinator under test.
    pub coord: Coordinator,
    /// Virtual time, ms.
    pub now: u64,
    /// The consumers, by index.
    pub members: Vec<Member>,
    conns: HashMap<ConnId, (usize, bool)>,
    /// The offset store.
    pub store: HashMap<TopicPartition, i64>,
    /// Inputs ready for the coordinator (answers of consumers and of the store).
    ready: VecDeque<(Kind, Input)>,
    /// RebalanceCompleted events: (generation, members).
    pub completed: Vec<(i32, usize)>,
    /// Consumers the coordinator failed.
    pub failed: Vec<String>,
    /// Answers to CommitOffset requests received.
    pub commit_answers: usize,
    /// `handle` calls and their time, per kind of input, since the last reset.
    pub stats: BTreeMap<Kind, (u64, Duration)>,
}

impl Driver {
    /// A coordinator with the topics and [`MEMBERS`] consumers not registered yet.
    pub fn new(assignors: impl Assignors + Send + 'static, name: &str) -> Driver {
        let mut coord = Coordinator::new(config(name), assignors).expect("valid config");
        let topics: BTreeMap<TopicName, u32> = (0..TOPICS)
            .map(|t| (TopicName::new(topic_name(t)), PARTITIONS_PER_TOPIC))
            .collect();
        let out = coord.handle(0, Input::TopicsChanged { topics });
        assert!(out.is_empty(), "{out:?}");
        let members = (0..MEMBERS)
            .map(|i| Member {
                id: format!("consumer-{i:04}"),
                channel: ConnId(2 * i as u64 + 1),
                other: ConnId(2 * i as u64 + 2),
                registered: false,
                generation: 0,
                positions: BTreeMap::new(),
                hold: false,
                held: None,
                closed: false,
            })
            .collect::<Vec<_>>();
        let conns = members
            .iter()
            .enumerate()
            .flat_map(|(i, m)| [(m.channel, (i, true)), (m.other, (i, false))])
            .collect();
        Driver {
            coord,
            now: 0,
            members,
            conns,
            store: HashMap::new(),
            ready: VecDeque::new(),
            completed: Vec::new(),
            failed: Vec::new(),
            commit_answers: 0,
            stats: BTreeMap::new(),
        }
    }

    /// Hands one input to the coordinator at `now`, times the `handle` call alone, and
    /// carries out the outputs (consumers' and store's answers become ready inputs).
    pub fn deliver(&mut self, kind: Kind, input: Input) -> Duration {
        let start = Instant::now();
        let outputs = self.coord.handle(self.now, input);
        let took = start.elapsed();
        let entry = self.stats.entry(kind).or_default();
        entry.0 += 1;
        entry.1 += took;
        self.apply(outputs);
        took
    }

    /// Delivers the next input: a ready answer, else [`Input::Timer`] at the
    /// coordinator's deadline (virtual time jumps there).
    pub fn step(&mut self) -> (Kind, Duration) {
        let (kind, input) = match self.ready.pop_front() {
            Some(ready) => ready,
            None => {
                let at = self
                    .coord
                    .poll_timeout()
                    .expect("the coordinator wants a timer");
                self.now = self.now.max(at);
                (Kind::Timer, Input::Timer)
            }
        };
        (kind, self.deliver(kind, input))
    }

    /// Delivers every ready input (and what they lead to) without advancing time;
    /// returns the time spent in `handle`.
    pub fn drain(&mut self) -> Duration {
        let mut total = Duration::ZERO;
        while !self.ready.is_empty() {
            total += self.step().1;
        }
        total
    }

    /// Runs everything up to virtual time `t` (timers due at `t` included).
    pub fn run_until(&mut self, t: u64) {
        loop {
            if self.ready.is_empty() && self.coord.poll_timeout().is_none_or(|at| at > t) {
                break;
            }
            self.step();
        }
        self.now = self.now.max(t);
    }

    /// Delivers member `i`'s held answer (at the current time) and stops holding.
    pub fn release(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.hold = false;
        if let Some(held) = m.held.take() {
            self.ready.push_back(held);
        }
        self.drain();
    }

    /// Registers every consumer at time 0 and runs the first rebalance: at
    /// [`FORMED_AT`] the group is stable in generation 1, every consumer owning its
    /// share.
    pub fn form(&mut self) {
        assert_eq!(self.now, 0);
        for i in 0..self.members.len() {
            let m = &self.members[i];
            let request = NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
                group_id: GROUP.into(),
                consumer_id: m.id.clone(),
                host: "bench-host".into(),
                session_timeout_ms: SESSION_TIMEOUT_MS as i32,
                subscription: proto::Subscription::static_topics(
                    (0..TOPICS).map(|t| (topic_name(t), 1)),
                ),
                auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
                assignor: None,
                member: proto::MemberData::default(),
            });
            let bytes = request_frame(1, &m.id, &request);
            let conn = m.channel;
            self.deliver(Kind::Request, Input::Frame { conn, bytes });
        }
        self.run_until(FORMED_AT);
        assert_eq!(self.completed, [(1, self.members.len())]);
        self.check_balanced();
    }

    /// Panics unless every live consumer owns 10 or 11 partitions and all 10,000 are
    /// owned.
    pub fn check_balanced(&self) {
        let live = self.members.iter().filter(|m| !m.closed);
        let mut total = 0;
        for m in live {
            let n = m.positions.len();
            assert!((10..=11).contains(&n), "{} owns {n}", m.id);
            total += n;
        }
        assert_eq!(total, TOPICS * PARTITIONS_PER_TOPIC as usize);
    }

    fn apply(&mut self, outputs: Vec<Output>) {
        for output in outputs {
            match output {
                Output::ChannelOpened { .. } => {}
                Output::Answer { conn, bytes } | Output::Push { conn, bytes } => {
                    self.on_frame(conn, bytes)
                }
                Output::CommitOffsets { op, records } => {
                    for r in records {
                        self.store.insert(r.tp, r.offset);
                    }
                    let input = Input::OffsetsCommitted { op, result: Ok(()) };
                    self.ready.push_back((Kind::OffsetsCommitted, input));
                }
                Output::FetchOffsets { op, group, scope } => {
                    let entry = |(tp, offset): (&TopicPartition, &i64)| OffsetEntry {
                        group: group.clone(),
                        tp: tp.clone(),
                        offset: *offset,
                        metadata: None,
                    };
                    let found = match &scope {
                        FetchScope::WholeGroup => self.store.iter().map(entry).collect(),
                        FetchScope::Partitions(list) => list
                            .iter()
                            .filter_map(|tp| self.store.get_key_value(tp))
                            .map(entry)
                            .collect(),
                    };
                    let input = Input::OffsetsFetched {
                        op,
                        result: Ok(found),
                    };
                    self.ready.push_back((Kind::OffsetsFetched, input));
                }
                Output::CloseConnection { conn } => {
                    panic!("the coordinator closed {conn} at {}", self.now)
                }
                Output::RunAssignor(job) => {
                    let input = Input::AssignorDone {
                        call: job.id(),
                        result: job.run(),
                    };
                    self.ready.push_back((Kind::AssignorDone, input));
                }
                Output::Event(event) => self.on_event(event),
                Output::Metric { .. } => {}
                Output::DeleteOffsets { .. } => panic!("native groups delete no offsets"),
                Output::StageTxnOffsets { .. } | Output::TxnCompletionApplied { .. } => {
                    panic!("native groups stage no transactional offsets")
                }
            }
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::RebalanceCompleted {
                generation,
                members,
                ..
            } => self.completed.push((generation.0, members)),
            Event::MemberFailed { consumer, .. } => self.failed.push(consumer.to_string()),
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

    /// A frame from the coordinator to a consumer.
    fn on_frame(&mut self, conn: ConnId, bytes: Bytes) {
        let (i, is_channel) = self.conns[&conn];
        let m = &mut self.members[i];
        assert!(!m.closed, "frame to {} after its channel closed", m.id);
        if !is_channel {
            // The answer to a CommitOffset.
            let (_, response) =
                proto::decode_response_frame(bytes, ApiKey::CommitOffset, 0).unwrap();
            let NativeResponse::CommitOffset(r) = response else {
                panic!("{response:?}")
            };
            for t in &r.topics {
                for p in &t.partitions {
                    assert_eq!(p.error_code, ErrorCode::NONE, "{t:?}");
                }
            }
            self.commit_answers += 1;
            return;
        }
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
        let (header, request) = proto::decode_request_frame(bytes).unwrap();
        let (kind, response) = match request {
            NativeRequest::Heartbeat(_) => {
                for offset in m.positions.values_mut() {
                    *offset += CONSUMED_PER_HEARTBEAT;
                }
                let response = NativeResponse::Heartbeat(proto::HeartbeatResponse {
                    error_code: ErrorCode::NONE,
                    fetchers_healthy: true,
                    offsets: m.offsets(),
                });
                (Kind::HeartbeatAnswer, response)
            }
            NativeRequest::StopFetcher(s) => {
                assert_eq!(s.generation, m.generation);
                let stopped: Vec<TopicPartition> = if s.stop_all {
                    m.positions.keys().cloned().collect()
                } else {
                    s.partitions
                        .iter()
                        .flat_map(|t| {
                            t.partitions
                                .iter()
                                .map(|&p| TopicPartition::new(t.topic.as_str(), p))
                        })
                        .collect()
                };
                // Final offsets: what it consumed since its last Heartbeat answer.
                let mut finals = BTreeMap::new();
                for tp in stopped {
                    let offset = m.positions.remove(&tp).expect("stops an owned partition");
                    finals.insert(tp, offset + CONSUMED_SINCE_HEARTBEAT);
                }
                let response = NativeResponse::StopFetcher(proto::StopFetcherResponse {
                    error_code: ErrorCode::NONE,
                    offsets: offsets_to_wire(&finals),
                });
                (Kind::StopAnswer, response)
            }
            NativeRequest::StartFetcher(s) => {
                assert!(s.generation > m.generation);
                let mut next = BTreeMap::new();
                for t in &s.assignment {
                    for p in &t.partitions {
                        let tp = TopicPartition::new(t.topic.as_str(), p.partition);
                        let position = match p.start_offset {
                            proto::PartitionStart::KEEP_POSITION => {
                                *m.positions.get(&tp).expect("keeps an owned partition")
                            }
                            proto::PartitionStart::NO_COMMITTED_OFFSET => 0,
                            offset => offset,
                        };
                        next.insert(tp, position);
                    }
                }
                m.positions = next;
                m.generation = s.generation;
                let response = NativeResponse::StartFetcher(proto::StartFetcherResponse {
                    error_code: ErrorCode::NONE,
                });
                (Kind::StartAnswer, response)
            }
            other => panic!("unexpected request on the channel: {other:?}"),
        };
        let input = Input::Frame {
            conn,
            bytes: response_frame(header.correlation_id, &response),
        };
        if m.hold {
            assert!(m.held.is_none());
            m.held = Some((kind, input));
        } else {
            self.ready.push_back((kind, input));
        }
    }
}

/// The name of topic `t`.
pub fn topic_name(t: usize) -> String {
    format!("topic-{t:02}")
}

/// A request frame as the coordinator receives it (after the size prefix).
pub fn request_frame(corr: i32, client: &str, request: &NativeRequest) -> Bytes {
    let mut buf = BytesMut::new();
    proto::encode_request_frame(&mut buf, corr, Some(client), request).unwrap();
    buf.freeze().slice(4..)
}

/// A response frame as the coordinator receives it (after the size prefix).
pub fn response_frame(corr: i32, response: &NativeResponse) -> Bytes {
    let mut buf = BytesMut::new();
    proto::encode_response_frame(&mut buf, corr, response).unwrap();
    buf.freeze().slice(4..)
}
