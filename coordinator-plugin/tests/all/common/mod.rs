//! Test harness: one coordinator, fake consumers speaking the real codec, a network
//! with delays and cuts, and an offset store, all on virtual time.
//!
//! The fake consumers follow docs/protocol.md's consumer rules, including the lease of
//! §6.2: each keeps the time it started writing its latest channel frame, and when a
//! coordinator frame arrives its lease deadline becomes that time plus its session
//! timeout. A consumer "delivers" a partition while it owns it and the lease has not
//! passed. The safety check uses exactly that view: no partition is delivered by two
//! consumers of a group at any instant.

#![allow(dead_code)]

pub mod assignors;

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Bytes, BytesMut};
use drover_coordinator::{
    ConnId, Coordinator, CoordinatorConfig, Event, FetchScope, GroupId, Input, OffsetEntry, OpId,
    Output, StoreError, TopicName, TopicPartition,
};
use drover_protocol as proto;
use drover_protocol::{ApiKey, ErrorCode, NativeRequest, NativeResponse};

pub use assignors::TestAssignors;

// ---------------------------------------------------------------------------- rng

/// SplitMix64: small, seedable, deterministic.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, (lo, hi): (u64, u64)) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

// ---------------------------------------------------------------------------- params

/// Delays and failure rates of the simulated environment.
#[derive(Debug, Clone)]
pub struct Params {
    /// One-way network delay, ms.
    pub net_delay: (u64, u64),
    /// How long a consumer takes to answer a coordinator request, ms.
    pub answer_delay: (u64, u64),
    /// Offset store latency, ms.
    pub store_delay: (u64, u64),
    /// Probability that a commit batch fails (retriable).
    pub commit_fail_rate: f64,
    /// Probability that an offset fetch fails.
    pub fetch_fail_rate: f64,
    /// A consumer advances its positions this often, ms.
    pub consume_every: u64,
    /// A consumer sends an explicit CommitOffset this often, ms (none if `None`).
    pub commit_every: Option<u64>,
    /// Consumer backoff before re-registering, ms.
    pub backoff: u64,
    /// How long an assignor call handed to the host takes, ms (with threaded
    /// assignors: `TestAssignors::threaded`).
    pub assignor_delay: (u64, u64),
}

impl Params {
    /// Fixed 1 ms network and store, instant answers.
    pub fn fixed() -> Self {
        Params {
            net_delay: (1, 1),
            answer_delay: (0, 0),
            store_delay: (1, 1),
            commit_fail_rate: 0.0,
            fetch_fail_rate: 0.0,
            consume_every: 50,
            commit_every: None,
            backoff: 100,
            assignor_delay: (0, 0),
        }
    }
}

/// A coordinator config for tests: small session timeouts allowed, short debounce.
pub fn test_config() -> CoordinatorConfig {
    CoordinatorConfig {
        default_assignor: "sticky".into(),
        rebalance_delay_ms: 50,
        rebalance_max_delay_ms: 500,
        min_session_timeout_ms: 30,
        max_session_timeout_ms: 60_000,
        commit_interval_ms: 100,
        retry_backoff_ms: 100,
        ..CoordinatorConfig::default()
    }
}

// ---------------------------------------------------------------------------- consumers

/// What a fake consumer registers with.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub id: String,
    pub group: String,
    pub subscription: proto::Subscription,
    pub session_timeout_ms: i32,
    pub assignor: Option<String>,
    /// What it declares for the assignor (RegisterConsumer v1 when not the default).
    pub member: proto::MemberData,
}

impl ConsumerSpec {
    pub fn new(id: &str, group: &str, subscription: proto::Subscription, st: i32) -> Self {
        ConsumerSpec {
            id: id.into(),
            group: group.into(),
            subscription,
            session_timeout_ms: st,
            assignor: None,
            member: proto::MemberData::default(),
        }
    }
}

/// A StartFetcher a consumer accepted: (time, generation, partitions with starts).
pub type StartSeen = (u64, i32, Vec<(TopicPartition, i64)>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Not running, or gave up.
    Down,
    /// Waiting to re-register.
    Backoff,
    Registering(ConnId),
    Member(ConnId),
    /// Sent LeaveGroup; ignores coordinator requests.
    Leaving(ConnId),
}

#[derive(Debug, Clone)]
enum Pending {
    Commit(BTreeMap<TopicPartition, i64>),
    Leave,
    Fetch,
}

#[derive(Debug)]
pub struct FakeConsumer {
    pub spec: ConsumerSpec,
    pub running: bool,
    /// Wants to be in the group (false after leaving).
    pub wants: bool,
    pub phase: Phase,
    pub generation: i32,
    /// Owned partitions and the consumed offset (next to deliver).
    pub owned: BTreeMap<TopicPartition, i64>,
    /// When it started writing its latest frame on the channel.
    pub last_sent_start: u64,
    pub lease_deadline: u64,
    proc_epoch: u64,
    chan_epoch: u64,
    answering: bool,
    other_conn: Option<ConnId>,
    next_corr: i32,
    pending: BTreeMap<i32, Pending>,
    /// A fetcher died: the next Heartbeat answers `fetchers_healthy` false.
    pub unhealthy: bool,
    pub registrations: u32,
    pub register_errors: Vec<ErrorCode>,
    pub commit_results: Vec<Vec<(TopicPartition, i64, ErrorCode)>>,
    pub fetch_results: Vec<proto::FetchOffsetsResponse>,
    pub requests_seen: Vec<ApiKey>,
    /// When each Heartbeat (ping) from the coordinator arrived.
    pub pings_at: Vec<u64>,
    /// StartFetcher assignments received: (time, generation, partitions with starts).
    pub starts: Vec<StartSeen>,
    pub stops: Vec<(u64, bool, Vec<TopicPartition>)>,
}

impl FakeConsumer {
    fn new(spec: ConsumerSpec) -> Self {
        FakeConsumer {
            spec,
            running: false,
            wants: false,
            phase: Phase::Down,
            generation: 0,
            owned: BTreeMap::new(),
            last_sent_start: 0,
            lease_deadline: 0,
            proc_epoch: 0,
            chan_epoch: 0,
            answering: false,
            other_conn: None,
            next_corr: 0,
            pending: BTreeMap::new(),
            unhealthy: false,
            registrations: 0,
            register_errors: Vec::new(),
            commit_results: Vec::new(),
            fetch_results: Vec::new(),
            requests_seen: Vec::new(),
            pings_at: Vec::new(),
            starts: Vec::new(),
            stops: Vec::new(),
        }
    }

    /// The partitions it delivers at `now` (its own view).
    pub fn delivering(&self, now: u64) -> impl Iterator<Item = &TopicPartition> {
        let live = self.running && now < self.lease_deadline;
        self.owned.keys().filter(move |_| live)
    }

    pub fn is_member(&self) -> bool {
        matches!(self.phase, Phase::Member(_))
    }

    fn offsets(&self) -> Vec<proto::TopicOffsets> {
        offsets_to_wire(self.owned.iter().map(|(tp, o)| (tp, *o)))
    }
}

fn offsets_to_wire<'a>(
    items: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
) -> Vec<proto::TopicOffsets> {
    let mut out: Vec<proto::TopicOffsets> = Vec::new();
    for (tp, offset) in items {
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

/// The partitions a subscription covers given the topics.
pub fn resolve(
    sub: &proto::Subscription,
    topics: &BTreeMap<TopicName, u32>,
) -> BTreeSet<TopicPartition> {
    let names: Vec<&TopicName> = match sub.kind {
        proto::SubscriptionKind::STATIC => topics
            .keys()
            .filter(|t| sub.topics.iter().any(|s| s.topic == t.as_str()))
            .collect(),
        kind => {
            let re = regex::Regex::new(&format!("^(?:{})$", sub.pattern.as_deref().unwrap_or("")))
                .unwrap();
            let black = kind == proto::SubscriptionKind::BLACKLIST;
            topics
                .keys()
                .filter(|t| !t.as_str().starts_with("__"))
                .filter(|t| re.is_match(t.as_str()) != black)
                .collect()
        }
    };
    let mut out = BTreeSet::new();
    for t in names {
        for p in 0..topics[t] as i32 {
            out.insert(TopicPartition::new(t.clone(), p));
        }
    }
    out
}

// ---------------------------------------------------------------------------- world

#[derive(Debug)]
struct Link {
    /// The consumer at the other end ("" for a raw test client).
    consumer: String,
    cut: bool,
    coord_open: bool,
    consumer_open: bool,
    coord_notified: bool,
    last_to_coord: u64,
    last_to_consumer: u64,
}

#[derive(Debug)]
enum CEv {
    LeaseCheck,
    Retry,
    Consume,
    Commit,
    Answer {
        conn: ConnId,
        bytes: Bytes,
        then_lost: bool,
    },
}

#[derive(Debug)]
enum Ev {
    ToCoord {
        conn: ConnId,
        bytes: Bytes,
    },
    ToConsumer {
        conn: ConnId,
        bytes: Bytes,
    },
    ClosedAtCoord {
        conn: ConnId,
    },
    ClosedAtConsumer {
        conn: ConnId,
    },
    CommitDone {
        op: OpId,
        records: Vec<OffsetEntry>,
        ok: bool,
    },
    AssignorDone {
        call: u64,
        result: Result<drover_abi::assignor::Assignment, drover_abi::PluginError>,
    },
    FetchDone {
        op: OpId,
        group: GroupId,
        scope: FetchScope,
        ok: bool,
    },
    Consumer {
        id: String,
        proc_epoch: u64,
        chan_epoch: Option<u64>,
        what: CEv,
    },
}

pub struct World {
    pub now: u64,
    pub coord: Coordinator,
    pub params: Params,
    pub rng: Rng,
    queue: BTreeMap<(u64, u64), Ev>,
    seq: u64,
    links: BTreeMap<ConnId, Link>,
    next_conn: u64,
    pub consumers: BTreeMap<String, FakeConsumer>,
    pub topics: BTreeMap<TopicName, u32>,
    pub store: BTreeMap<(GroupId, TopicPartition), (i64, Option<String>)>,
    /// Coordinator events, with their time.
    pub events: Vec<(u64, Event)>,
    /// Broken invariants.
    pub violations: Vec<String>,
    /// Coordinator behaviour a conforming consumer would reject.
    pub anomalies: Vec<String>,
    /// Frames received by raw test clients: (conn, frame).
    pub raw_responses: Vec<(ConnId, Bytes)>,
    pub trace_hash: u64,
    pub steps: u64,
    /// Record every delivery for debugging (off by default).
    pub log: Option<Vec<String>>,
    /// When each slot was last lost (cluster mode).
    slot_lost_at: BTreeMap<u32, u64>,
    /// Sum of every `Output::Metric` value, by name.
    pub metrics: BTreeMap<&'static str, i64>,
    /// The commit batch in flight per group: the ABI promises the host at most one.
    commits_in_flight: BTreeMap<GroupId, drover_coordinator::OpId>,
}

fn fnv(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
}

impl World {
    pub fn new(config: CoordinatorConfig, params: Params, seed: u64) -> Self {
        Self::with_assignors(config, params, seed, TestAssignors::default())
    }

    pub fn with_assignors(
        config: CoordinatorConfig,
        params: Params,
        seed: u64,
        assignors: TestAssignors,
    ) -> Self {
        World {
            now: 0,
            coord: Coordinator::new(config, assignors).expect("valid config"),
            params,
            rng: Rng::new(seed),
            queue: BTreeMap::new(),
            seq: 0,
            links: BTreeMap::new(),
            next_conn: 0,
            consumers: BTreeMap::new(),
            topics: BTreeMap::new(),
            store: BTreeMap::new(),
            events: Vec::new(),
            violations: Vec::new(),
            anomalies: Vec::new(),
            raw_responses: Vec::new(),
            trace_hash: 0xcbf2_9ce4_8422_2325,
            metrics: BTreeMap::new(),
            commits_in_flight: BTreeMap::new(),
            steps: 0,
            log: None,
            slot_lost_at: BTreeMap::new(),
        }
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(log) = &mut self.log {
            log.push(format!("{:>7} {}", self.now, line()));
        }
    }

    // ------------------------------------------------------------------ coordinator io

    fn feed(&mut self, input: Input) {
        let outputs = self.coord.handle(self.now, input);
        self.apply(outputs);
    }

    fn apply(&mut self, outputs: Vec<Output>) {
        for out in outputs {
            let now = self.now;
            fnv(&mut self.trace_hash, &now.to_le_bytes());
            match out {
                Output::ChannelOpened { .. } => {}
                Output::Answer { conn, bytes } | Output::Push { conn, bytes } => {
                    fnv(&mut self.trace_hash, &conn.0.to_le_bytes());
                    fnv(&mut self.trace_hash, &bytes);
                    self.send_to_consumer(conn, bytes);
                }
                Output::CloseConnection { conn } => {
                    fnv(&mut self.trace_hash, b"close");
                    fnv(&mut self.trace_hash, &conn.0.to_le_bytes());
                    self.coord_close(conn);
                }
                Output::CommitOffsets { op, records } => {
                    fnv(&mut self.trace_hash, b"commit");
                    for r in &records {
                        fnv(&mut self.trace_hash, r.tp.topic.as_str().as_bytes());
                        fnv(&mut self.trace_hash, &r.tp.partition.to_le_bytes());
                        fnv(&mut self.trace_hash, &r.offset.to_le_bytes());
                    }
                    let ok = !self.rng.chance(self.params.commit_fail_rate);
                    let at = now + self.rng.between(self.params.store_delay);
                    self.note(|| format!("K commits {op} ok={ok} at {at}: {records:?}"));
                    for group in records.iter().map(|r| &r.group).collect::<BTreeSet<_>>() {
                        if let Some(other) = self.commits_in_flight.insert(group.clone(), op) {
                            self.violations.push(format!(
                                "t={now}: commit {op} of group {group} while {other} is in flight"
                            ));
                        }
                    }
                    self.push(at, Ev::CommitDone { op, records, ok });
                }
                Output::FetchOffsets { op, group, scope } => {
                    fnv(&mut self.trace_hash, b"fetch");
                    let ok = !self.rng.chance(self.params.fetch_fail_rate);
                    let at = now + self.rng.between(self.params.store_delay);
                    self.note(|| format!("K fetches {op} ok={ok} {scope:?}"));
                    self.push(
                        at,
                        Ev::FetchDone {
                            op,
                            group,
                            scope,
                            ok,
                        },
                    );
                }
                Output::Metric { counter, value } => {
                    *self.metrics.entry(counter.name()).or_default() += value as i64;
                }
                Output::DeleteOffsets { op, .. } => {
                    self.violations.push(format!(
                        "t={now}: {op}: native consumers never delete offsets"
                    ));
                }
                Output::StageTxnOffsets { .. } | Output::TxnCompletionApplied { .. } => {
                    self.violations.push(format!(
                        "t={now}: a transactional output, but native consumers send no TxnOffsetCommit"
                    ));
                }
                Output::RunAssignor(job) => {
                    // The host runs the call on a thread of its own; its result comes
                    // back later, interleaved with everything else.
                    fnv(&mut self.trace_hash, b"assign");
                    fnv(&mut self.trace_hash, job.group().as_str().as_bytes());
                    let at = now + self.rng.between(self.params.assignor_delay);
                    self.note(|| format!("K runs assignor call {} at {at}: {job:?}", job.id()));
                    let result = job.run();
                    self.push(
                        at,
                        Ev::AssignorDone {
                            call: job.id(),
                            result,
                        },
                    );
                }
                Output::Event(e) => {
                    // Events follow from the frames and operations hashed above.
                    if let Event::SafetyCheckFailed { message, .. } = &e {
                        self.violations
                            .push(format!("t={now}: coordinator safety check: {message}"));
                    }
                    self.note(|| format!("event {e:?}"));
                    self.events.push((now, e));
                }
            }
        }
    }

    /// Delivers the host's partition table (`Input::PartitionStats`) now.
    pub fn set_partition_stats(&mut self, stats: Input) {
        self.feed(stats);
    }

    /// Replaces the topic map and tells the coordinator.
    pub fn set_topic_map(&mut self, topics: BTreeMap<TopicName, u32>) {
        self.topics = topics.clone();
        self.feed(Input::TopicsChanged { topics });
    }

    /// Cluster mode: the coordinator gains slot `slot` now.
    pub fn slot_gained(&mut self, slot: u32) {
        self.slot_gained_after(slot, 0);
    }

    /// Cluster mode: the coordinator gains slot `slot` now, told that its previous
    /// owner stopped coordinating it at least `stopped_ms` ago.
    pub fn slot_gained_after(&mut self, slot: u32, stopped_ms: u64) {
        self.note(|| format!("K gains slot {slot} (previous owner stopped ≥ {stopped_ms} ms ago)"));
        self.feed(Input::SlotGained { slot, stopped_ms });
    }

    /// Cluster mode: the coordinator loses slot `slot` now.
    pub fn slot_lost(&mut self, slot: u32) {
        self.note(|| format!("K loses slot {slot}"));
        self.slot_lost_at.insert(slot, self.now);
        self.feed(Input::SlotLost { slot });
    }

    /// When slot `slot` was last lost, if ever.
    pub fn slot_lost_at(&self, slot: u32) -> Option<u64> {
        self.slot_lost_at.get(&slot).copied()
    }

    /// Sets the topics and tells the coordinator.
    pub fn set_topics(&mut self, topics: &[(&str, u32)]) {
        self.topics = topics
            .iter()
            .map(|(t, n)| (TopicName::new(t), *n))
            .collect();
        let topics = self.topics.clone();
        self.feed(Input::TopicsChanged { topics });
    }

    // ------------------------------------------------------------------ network

    fn new_link(&mut self, consumer: &str) -> ConnId {
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        self.links.insert(
            conn,
            Link {
                consumer: consumer.into(),
                cut: false,
                coord_open: true,
                consumer_open: true,
                coord_notified: false,
                last_to_coord: 0,
                last_to_consumer: 0,
            },
        );
        conn
    }

    fn send_to_coord(&mut self, conn: ConnId, bytes: Bytes) {
        let delay = self.rng.between(self.params.net_delay);
        let now = self.now;
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        if link.cut || !link.consumer_open {
            return;
        }
        let at = (now + delay).max(link.last_to_coord);
        link.last_to_coord = at;
        self.push(at, Ev::ToCoord { conn, bytes });
    }

    fn send_to_consumer(&mut self, conn: ConnId, bytes: Bytes) {
        let delay = self.rng.between(self.params.net_delay);
        let now = self.now;
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        if link.cut || !link.coord_open {
            return;
        }
        let at = (now + delay).max(link.last_to_consumer);
        link.last_to_consumer = at;
        self.push(at, Ev::ToConsumer { conn, bytes });
    }

    /// The consumer closes its end; the coordinator hears of it unless the link is cut.
    fn consumer_close(&mut self, conn: ConnId) {
        let delay = self.rng.between(self.params.net_delay);
        let now = self.now;
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        if !link.consumer_open {
            return;
        }
        link.consumer_open = false;
        if !link.cut && link.coord_open {
            let at = (now + delay).max(link.last_to_coord);
            link.last_to_coord = at;
            self.push(at, Ev::ClosedAtCoord { conn });
        }
    }

    /// The coordinator closed `conn`: the host reports it closed at once; the consumer
    /// sees end of stream unless the link is cut.
    fn coord_close(&mut self, conn: ConnId) {
        let delay = self.rng.between(self.params.net_delay);
        let now = self.now;
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        link.coord_open = false;
        let notify_consumer = !link.cut && link.consumer_open;
        let at = (now + delay).max(link.last_to_consumer);
        if notify_consumer {
            link.last_to_consumer = at;
        }
        self.push(now, Ev::ClosedAtCoord { conn });
        if notify_consumer {
            self.push(at, Ev::ClosedAtConsumer { conn });
        }
    }

    /// Cuts a consumer's channel: frames in flight and later are lost. Each side hears
    /// of it after the given delay, or never.
    pub fn cut_channel(
        &mut self,
        id: &str,
        coord_notice: Option<u64>,
        consumer_notice: Option<u64>,
    ) {
        let Some(conn) = self.consumers.get(id).and_then(|c| match c.phase {
            Phase::Member(conn) | Phase::Registering(conn) | Phase::Leaving(conn) => Some(conn),
            _ => None,
        }) else {
            return;
        };
        let now = self.now;
        if let Some(link) = self.links.get_mut(&conn) {
            if link.cut {
                return;
            }
            link.cut = true;
        }
        if let Some(d) = coord_notice {
            self.push(now + d, Ev::ClosedAtCoord { conn });
        }
        if let Some(d) = consumer_notice {
            self.push(now + d, Ev::ClosedAtConsumer { conn });
        }
    }

    // ------------------------------------------------------------------ raw clients

    /// Opens a connection for a raw test client.
    pub fn raw_conn(&mut self) -> ConnId {
        self.new_link("")
    }

    /// Sends a request from a raw client.
    pub fn raw_request(&mut self, conn: ConnId, corr: i32, request: &NativeRequest) {
        let mut buf = BytesMut::new();
        proto::encode_request_frame(&mut buf, corr, Some("test"), request).unwrap();
        self.send_to_coord(conn, buf.freeze().slice(4..));
    }

    /// Sends raw bytes (a frame after its size prefix) from a raw client.
    pub fn raw_bytes(&mut self, conn: ConnId, bytes: Bytes) {
        self.send_to_coord(conn, bytes);
    }

    /// Whether the coordinator closed `conn`.
    pub fn closed_by_coordinator(&self, conn: ConnId) -> bool {
        self.links.get(&conn).is_some_and(|l| !l.coord_open)
    }

    /// The decoded responses a raw client received, for requests of API `key` sent at
    /// its highest version (as `DescribeGroupsRequest::new` sends them; every other
    /// API answers the same in each version).
    pub fn raw_decoded(&self, conn: ConnId, key: ApiKey) -> Vec<(i32, NativeResponse)> {
        let version = key.versions().max;
        self.raw_responses
            .iter()
            .filter(|(c, _)| *c == conn)
            .filter_map(|(_, b)| proto::decode_response_frame(b.clone(), key, version).ok())
            .map(|(h, r)| (h.correlation_id, r))
            .collect()
    }

    // ------------------------------------------------------------------ consumers

    pub fn add_consumer(&mut self, spec: ConsumerSpec) {
        let id = spec.id.clone();
        self.consumers.insert(id, FakeConsumer::new(spec));
    }

    /// Starts (or restarts) a consumer process: it registers and starts consuming.
    pub fn start(&mut self, id: &str) {
        let mut c = self.consumers.remove(id).expect("known consumer");
        c.running = true;
        c.wants = true;
        c.proc_epoch += 1;
        c.unhealthy = false;
        self.register(&mut c);
        let at = self.now + self.params.consume_every;
        self.push(
            at,
            Ev::Consumer {
                id: id.into(),
                proc_epoch: c.proc_epoch,
                chan_epoch: None,
                what: CEv::Consume,
            },
        );
        if let Some(every) = self.params.commit_every {
            let at = self.now + 1 + self.rng.below(every);
            self.push(
                at,
                Ev::Consumer {
                    id: id.into(),
                    proc_epoch: c.proc_epoch,
                    chan_epoch: None,
                    what: CEv::Commit,
                },
            );
        }
        self.consumers.insert(id.into(), c);
    }

    /// Adds and starts a consumer.
    pub fn join(&mut self, spec: ConsumerSpec) {
        let id = spec.id.clone();
        self.add_consumer(spec);
        self.start(&id);
    }

    /// kill -9: the process stops delivering at once; its sockets close.
    pub fn crash(&mut self, id: &str) {
        let Some(mut c) = self.consumers.remove(id) else {
            return;
        };
        c.running = false;
        c.owned.clear();
        c.proc_epoch += 1;
        c.chan_epoch += 1;
        c.answering = false;
        c.pending.clear();
        if let Phase::Member(conn) | Phase::Registering(conn) | Phase::Leaving(conn) = c.phase {
            self.consumer_close(conn);
        }
        if let Some(conn) = c.other_conn.take() {
            self.consumer_close(conn);
        }
        c.phase = Phase::Down;
        self.consumers.insert(id.into(), c);
    }

    /// A clean leave (docs/protocol.md §6.7).
    pub fn leave(&mut self, id: &str) {
        let Some(mut c) = self.consumers.remove(id) else {
            return;
        };
        c.wants = false;
        if let Phase::Member(conn) = c.phase {
            c.owned.clear();
            c.phase = Phase::Leaving(conn);
            let request = NativeRequest::LeaveGroup(proto::LeaveGroupRequest {
                group_id: c.spec.group.clone(),
                consumer_id: c.spec.id.clone(),
            });
            self.other_request(&mut c, request, Pending::Leave);
        } else {
            c.phase = Phase::Down;
        }
        self.consumers.insert(id.into(), c);
    }

    /// Changes a consumer's subscription: it stops everything and registers again on a
    /// new connection, which replaces its registration (the coordinator closes the old
    /// channel).
    pub fn resubscribe(&mut self, id: &str, subscription: proto::Subscription) {
        let Some(mut c) = self.consumers.remove(id) else {
            return;
        };
        c.spec.subscription = subscription;
        if c.running && c.wants {
            c.owned.clear();
            self.register(&mut c);
        }
        self.consumers.insert(id.into(), c);
    }

    /// Marks a consumer's fetchers dead: its next Heartbeat answer says so.
    pub fn fetcher_dies(&mut self, id: &str) {
        if let Some(c) = self.consumers.get_mut(id) {
            c.unhealthy = true;
        }
    }

    /// Sends an explicit CommitOffset with the given generation and offsets.
    pub fn commit(&mut self, id: &str, generation: i32, offsets: &[(TopicPartition, i64)]) {
        let Some(mut c) = self.consumers.remove(id) else {
            return;
        };
        let request = NativeRequest::CommitOffset(proto::CommitOffsetRequest {
            group_id: c.spec.group.clone(),
            consumer_id: c.spec.id.clone(),
            generation,
            topics: offsets_to_wire(offsets.iter().map(|(tp, o)| (tp, *o))),
        });
        let sent = offsets.iter().cloned().collect();
        self.other_request(&mut c, request, Pending::Commit(sent));
        self.consumers.insert(id.into(), c);
    }

    /// Sends FetchOffsets for the consumer's group.
    pub fn fetch(&mut self, id: &str, topics: Option<Vec<proto::TopicPartitions>>) {
        let Some(mut c) = self.consumers.remove(id) else {
            return;
        };
        let request = NativeRequest::FetchOffsets(proto::FetchOffsetsRequest {
            group_id: c.spec.group.clone(),
            topics,
        });
        self.other_request(&mut c, request, Pending::Fetch);
        self.consumers.insert(id.into(), c);
    }

    fn other_request(&mut self, c: &mut FakeConsumer, request: NativeRequest, kind: Pending) {
        let conn = match c.other_conn {
            Some(conn) => conn,
            None => {
                let conn = self.new_link(&c.spec.id.clone());
                c.other_conn = Some(conn);
                conn
            }
        };
        c.next_corr += 1;
        let corr = c.next_corr;
        c.pending.insert(corr, kind);
        let mut buf = BytesMut::new();
        proto::encode_request_frame(&mut buf, corr, Some(&c.spec.id), &request).unwrap();
        self.send_to_coord(conn, buf.freeze().slice(4..));
    }

    fn register(&mut self, c: &mut FakeConsumer) {
        let conn = self.new_link(&c.spec.id.clone());
        c.chan_epoch += 1;
        c.answering = false;
        c.registrations += 1;
        // Fetchers are rebuilt from scratch for the new registration.
        c.unhealthy = false;
        let request = NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
            group_id: c.spec.group.clone(),
            consumer_id: c.spec.id.clone(),
            host: "test-host".into(),
            session_timeout_ms: c.spec.session_timeout_ms,
            subscription: c.spec.subscription.clone(),
            auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
            assignor: c.spec.assignor.clone(),
            member: c.spec.member.clone(),
        });
        let mut buf = BytesMut::new();
        proto::encode_request_frame(&mut buf, 1, Some(&c.spec.id), &request).unwrap();
        c.last_sent_start = self.now;
        c.phase = Phase::Registering(conn);
        let id = c.spec.id.clone();
        self.note(|| format!("{id} registers on {conn}"));
        self.send_to_coord(conn, buf.freeze().slice(4..));
    }

    /// Stops everything and closes the channel (§6.6); re-registers after a backoff when
    /// `retry`.
    fn lose_channel(&mut self, c: &mut FakeConsumer, retry: bool) {
        // §6.6 step 2: it MAY commit its final offsets with its old generation.
        if !c.owned.is_empty() && c.running && self.rng.chance(0.5) {
            let request = NativeRequest::CommitOffset(proto::CommitOffsetRequest {
                group_id: c.spec.group.clone(),
                consumer_id: c.spec.id.clone(),
                generation: c.generation,
                topics: c.offsets(),
            });
            let sent = c.owned.clone();
            self.other_request(c, request, Pending::Commit(sent));
        }
        c.owned.clear();
        c.answering = false;
        c.chan_epoch += 1;
        if let Phase::Member(conn) | Phase::Registering(conn) | Phase::Leaving(conn) = c.phase {
            self.consumer_close(conn);
        }
        let id = c.spec.id.clone();
        self.note(|| format!("{id} lost its channel"));
        if retry && c.running && c.wants {
            c.phase = Phase::Backoff;
            let at = self.now + self.params.backoff;
            self.push(
                at,
                Ev::Consumer {
                    id: c.spec.id.clone(),
                    proc_epoch: c.proc_epoch,
                    chan_epoch: Some(c.chan_epoch),
                    what: CEv::Retry,
                },
            );
        } else {
            c.phase = Phase::Down;
        }
    }

    fn anomaly(&mut self, c: &FakeConsumer, what: String) {
        self.anomalies
            .push(format!("t={} {}: {what}", self.now, c.spec.id));
    }

    fn on_consumer_frame(&mut self, c: &mut FakeConsumer, conn: ConnId, bytes: Bytes) {
        if c.other_conn == Some(conn) {
            return self.on_other_response(c, bytes);
        }
        match c.phase.clone() {
            Phase::Registering(ch) if ch == conn => {
                let decoded = proto::decode_response_frame(bytes, ApiKey::RegisterConsumer, 0);
                match decoded {
                    Ok((_, NativeResponse::RegisterConsumer(r))) if r.error_code.is_none() => {
                        c.phase = Phase::Member(conn);
                        c.generation = r.generation;
                        c.lease_deadline = c.last_sent_start + c.spec.session_timeout_ms as u64;
                        if r.heartbeat_interval_ms != c.spec.session_timeout_ms / 3 {
                            let m = format!("heartbeat interval {}", r.heartbeat_interval_ms);
                            self.anomaly(c, m);
                        }
                        self.schedule_lease_check(c);
                    }
                    Ok((_, NativeResponse::RegisterConsumer(r))) => {
                        c.register_errors.push(r.error_code);
                        self.consumer_close(conn);
                        // §6.6 step 5 and §7.2: retried after a backoff (and, for
                        // NOT_COORDINATOR, a rediscovery: here there is one coordinator).
                        if r.error_code == ErrorCode::GROUP_MAX_SIZE_REACHED
                            || r.error_code == ErrorCode::NOT_COORDINATOR
                            || r.error_code == ErrorCode::COORDINATOR_NOT_AVAILABLE
                        {
                            c.phase = Phase::Member(conn); // so lose_channel retries
                            self.lose_channel(c, true);
                        } else {
                            c.phase = Phase::Down;
                            c.wants = false;
                        }
                    }
                    other => {
                        self.anomaly(c, format!("bad registration answer {other:?}"));
                        self.lose_channel(c, true);
                    }
                }
            }
            Phase::Member(ch) if ch == conn => self.on_channel_request(c, conn, bytes),
            // Leaving: coordinator requests are not acted upon.
            _ => {}
        }
    }

    fn schedule_lease_check(&mut self, c: &FakeConsumer) {
        self.push(
            c.lease_deadline,
            Ev::Consumer {
                id: c.spec.id.clone(),
                proc_epoch: c.proc_epoch,
                chan_epoch: Some(c.chan_epoch),
                what: CEv::LeaseCheck,
            },
        );
    }

    fn on_channel_request(&mut self, c: &mut FakeConsumer, conn: ConnId, bytes: Bytes) {
        // The lease: anchored at the start of the consumer's previous frame.
        c.lease_deadline = c.last_sent_start + c.spec.session_timeout_ms as u64;
        self.schedule_lease_check(c);
        if c.answering {
            self.anomaly(c, "a request while another is unanswered".into());
        }
        let (header, request) = match proto::decode_request_frame(bytes) {
            Ok(x) => x,
            Err(e) => {
                self.anomaly(c, format!("malformed coordinator frame: {e}"));
                return self.lose_channel(c, true);
            }
        };
        c.requests_seen.push(request.api_key());
        if request.api_key() == ApiKey::Heartbeat {
            c.pings_at.push(self.now);
        }
        let corr = header.correlation_id;
        let group_ok = |g: &str| g == c.spec.group;
        let (response, lost) = match request {
            NativeRequest::Heartbeat(h) => {
                if !group_ok(&h.group_id) || h.generation != c.generation {
                    let m = format!("heartbeat {h:?} in generation {}", c.generation);
                    self.anomaly(c, m);
                    c.owned.clear();
                    (
                        NativeResponse::Heartbeat(proto::HeartbeatResponse {
                            error_code: ErrorCode::ILLEGAL_GENERATION,
                            fetchers_healthy: true,
                            offsets: vec![],
                        }),
                        true,
                    )
                } else if c.unhealthy {
                    let offsets = c.offsets();
                    c.owned.clear();
                    (
                        NativeResponse::Heartbeat(proto::HeartbeatResponse {
                            error_code: ErrorCode::NONE,
                            fetchers_healthy: false,
                            offsets,
                        }),
                        true,
                    )
                } else {
                    let id = c.spec.id.clone();
                    let owned = c.owned.clone();
                    self.note(|| format!("{id} heartbeat {owned:?}"));
                    (
                        NativeResponse::Heartbeat(proto::HeartbeatResponse {
                            error_code: ErrorCode::NONE,
                            fetchers_healthy: true,
                            offsets: c.offsets(),
                        }),
                        false,
                    )
                }
            }
            NativeRequest::StopFetcher(s) => {
                if !group_ok(&s.group_id) || s.generation != c.generation {
                    let m = format!("stop {s:?} in generation {}", c.generation);
                    self.anomaly(c, m);
                    c.owned.clear();
                    (
                        NativeResponse::StopFetcher(proto::StopFetcherResponse {
                            error_code: ErrorCode::ILLEGAL_GENERATION,
                            offsets: vec![],
                        }),
                        true,
                    )
                } else {
                    let stopped: Vec<TopicPartition> = if s.stop_all {
                        c.owned.keys().cloned().collect()
                    } else {
                        s.partitions
                            .iter()
                            .flat_map(|t| {
                                t.partitions
                                    .iter()
                                    .map(|p| TopicPartition::new(t.topic.as_str(), *p))
                            })
                            .filter(|tp| c.owned.contains_key(tp))
                            .collect()
                    };
                    let mut finals = Vec::new();
                    for tp in &stopped {
                        if let Some(o) = c.owned.remove(tp) {
                            finals.push((tp.clone(), o));
                        }
                    }
                    let id = c.spec.id.clone();
                    self.note(|| format!("{id} stops {finals:?}"));
                    c.stops.push((self.now, s.stop_all, stopped));
                    (
                        NativeResponse::StopFetcher(proto::StopFetcherResponse {
                            error_code: ErrorCode::NONE,
                            offsets: offsets_to_wire(finals.iter().map(|(t, o)| (t, *o))),
                        }),
                        false,
                    )
                }
            }
            NativeRequest::StartFetcher(s) => {
                let mut error = None;
                if !group_ok(&s.group_id) || s.generation <= c.generation {
                    error = Some(ErrorCode::ILLEGAL_GENERATION);
                }
                let mut next = BTreeMap::new();
                let mut log = Vec::new();
                for t in &s.assignment {
                    for p in &t.partitions {
                        let tp = TopicPartition::new(t.topic.as_str(), p.partition);
                        log.push((tp.clone(), p.start_offset));
                        let pos = match p.start_offset {
                            -1 => match c.owned.get(&tp) {
                                Some(o) => *o,
                                None => {
                                    error = Some(ErrorCode::INVALID_REQUEST);
                                    0
                                }
                            },
                            -2 => 0,
                            o if o >= 0 => o,
                            _ => {
                                error = Some(ErrorCode::INVALID_REQUEST);
                                0
                            }
                        };
                        next.insert(tp, pos);
                    }
                }
                if let Some(code) = error {
                    let m = format!("start {s:?} in generation {}: {code}", c.generation);
                    self.anomaly(c, m);
                    c.owned.clear();
                    (
                        NativeResponse::StartFetcher(proto::StartFetcherResponse {
                            error_code: code,
                        }),
                        true,
                    )
                } else {
                    let id = c.spec.id.clone();
                    self.note(|| format!("{id} starts gen {} {log:?}", s.generation));
                    c.starts.push((self.now, s.generation, log));
                    c.owned = next;
                    c.generation = s.generation;
                    (
                        NativeResponse::StartFetcher(proto::StartFetcherResponse {
                            error_code: ErrorCode::NONE,
                        }),
                        false,
                    )
                }
            }
            other => {
                self.anomaly(c, format!("unexpected request on the channel: {other:?}"));
                return self.lose_channel(c, true);
            }
        };
        let mut buf = BytesMut::new();
        proto::encode_response_frame(&mut buf, corr, &response).unwrap();
        let bytes = buf.freeze().slice(4..);
        c.answering = true;
        let at = self.now + self.rng.between(self.params.answer_delay);
        self.push(
            at,
            Ev::Consumer {
                id: c.spec.id.clone(),
                proc_epoch: c.proc_epoch,
                chan_epoch: Some(c.chan_epoch),
                what: CEv::Answer {
                    conn,
                    bytes,
                    then_lost: lost,
                },
            },
        );
    }

    fn on_other_response(&mut self, c: &mut FakeConsumer, bytes: Bytes) {
        let mut peek = bytes.clone();
        let Ok(header) = proto::ResponseHeader::decode(&mut peek) else {
            return self.anomaly(c, "undecodable response header".into());
        };
        let Some(kind) = c.pending.remove(&header.correlation_id) else {
            return self.anomaly(c, "response to no request".into());
        };
        let key = match &kind {
            Pending::Commit(_) => ApiKey::CommitOffset,
            Pending::Leave => ApiKey::LeaveGroup,
            Pending::Fetch => ApiKey::FetchOffsets,
        };
        match proto::decode_response_frame(bytes, key, 0) {
            Ok((_, NativeResponse::CommitOffset(r))) => {
                let Pending::Commit(sent) = kind else {
                    return;
                };
                let mut results = Vec::new();
                for t in r.topics {
                    for p in t.partitions {
                        let tp = TopicPartition::new(t.topic.as_str(), p.partition);
                        let offset = sent.get(&tp).copied().unwrap_or(-1);
                        if p.error_code.is_none() {
                            // NONE means durable: the store holds it, or a later
                            // offset of the same generation.
                            let key = (GroupId::new(&c.spec.group), tp.clone());
                            let stored = self.store.get(&key).map(|v| v.0);
                            if stored.is_none_or(|s| s < offset) {
                                self.violations.push(format!(
                                    "t={}: acknowledged commit {tp}={offset} by {} not in the store ({stored:?})",
                                    self.now, c.spec.id
                                ));
                            }
                        }
                        let id = c.spec.id.clone();
                        let code = p.error_code;
                        self.note(|| format!("{id} commit answer {tp}={offset}: {code}"));
                        results.push((tp, offset, p.error_code));
                    }
                }
                c.commit_results.push(results);
            }
            Ok((_, NativeResponse::LeaveGroup(_))) => {
                if let Phase::Leaving(conn) = c.phase {
                    self.consumer_close(conn);
                    c.phase = Phase::Down;
                }
            }
            Ok((_, NativeResponse::FetchOffsets(r))) => c.fetch_results.push(r),
            other => self.anomaly(c, format!("bad response {other:?}")),
        }
    }

    fn periodic_commit(&mut self, c: &mut FakeConsumer) {
        if !c.is_member() || c.owned.is_empty() || self.now >= c.lease_deadline {
            return;
        }
        let request = NativeRequest::CommitOffset(proto::CommitOffsetRequest {
            group_id: c.spec.group.clone(),
            consumer_id: c.spec.id.clone(),
            generation: c.generation,
            topics: c.offsets(),
        });
        let sent = c.owned.clone();
        let id = c.spec.id.clone();
        let generation = c.generation;
        self.note(|| format!("{id} CommitOffset gen {generation} {sent:?}"));
        self.other_request(c, request, Pending::Commit(sent));
    }

    fn on_consumer_event(&mut self, c: &mut FakeConsumer, chan_epoch: Option<u64>, what: CEv) {
        if let Some(e) = chan_epoch {
            if e != c.chan_epoch {
                return;
            }
        }
        match what {
            CEv::LeaseCheck => {
                if c.is_member() && self.now >= c.lease_deadline {
                    self.lose_channel(c, true);
                }
            }
            CEv::Retry => {
                if c.running && c.wants && c.phase == Phase::Backoff {
                    self.register(c);
                }
            }
            CEv::Consume => {
                if c.running {
                    let now = self.now;
                    let lease = c.lease_deadline;
                    for o in c.owned.values_mut() {
                        if now < lease {
                            *o += 1 + (self.rng.below(3) as i64);
                        }
                    }
                    let at = now + self.params.consume_every;
                    self.push(
                        at,
                        Ev::Consumer {
                            id: c.spec.id.clone(),
                            proc_epoch: c.proc_epoch,
                            chan_epoch: None,
                            what: CEv::Consume,
                        },
                    );
                }
            }
            CEv::Commit => {
                if c.running {
                    self.periodic_commit(c);
                    if let Some(every) = self.params.commit_every {
                        let at = self.now + every;
                        self.push(
                            at,
                            Ev::Consumer {
                                id: c.spec.id.clone(),
                                proc_epoch: c.proc_epoch,
                                chan_epoch: None,
                                what: CEv::Commit,
                            },
                        );
                    }
                }
            }
            CEv::Answer {
                conn,
                bytes,
                then_lost,
            } => {
                c.answering = false;
                c.last_sent_start = self.now;
                self.send_to_coord(conn, bytes);
                if then_lost {
                    self.lose_channel(c, true);
                }
            }
        }
    }

    // ------------------------------------------------------------------ the loop

    /// The time of the next thing that happens.
    pub fn next_time(&self) -> Option<u64> {
        let q = self.queue.first_key_value().map(|((t, _), _)| *t);
        let c = self.coord.poll_timeout();
        match (q, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes one event (or the coordinator's timer).
    pub fn step(&mut self) {
        let q = self.queue.first_key_value().map(|((t, _), _)| *t);
        let c = self.coord.poll_timeout();
        let timer_first = match (q, c) {
            (Some(q), Some(c)) => c <= q,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        self.steps += 1;
        if timer_first {
            self.now = self.now.max(c.unwrap_or(0));
            self.feed(Input::Timer);
        } else if let Some(((t, _), ev)) = self.queue.pop_first() {
            self.now = self.now.max(t);
            self.dispatch(ev);
        }
        self.check_safety();
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::ToCoord { conn, bytes } => {
                let Some(link) = self.links.get(&conn) else {
                    return;
                };
                if link.cut || !link.coord_open {
                    return;
                }
                self.note(|| format!("-> K {conn} {} bytes", bytes.len()));
                self.feed(Input::Frame { conn, bytes });
            }
            Ev::ClosedAtCoord { conn } => {
                let Some(link) = self.links.get_mut(&conn) else {
                    return;
                };
                if link.coord_notified {
                    return;
                }
                link.coord_notified = true;
                link.coord_open = false;
                self.note(|| format!("K sees {conn} closed"));
                self.feed(Input::ConnectionClosed { conn });
            }
            Ev::ToConsumer { conn, bytes } => {
                let Some(link) = self.links.get(&conn) else {
                    return;
                };
                if link.cut || !link.consumer_open {
                    return;
                }
                let id = link.consumer.clone();
                if id.is_empty() {
                    self.raw_responses.push((conn, bytes));
                    return;
                }
                let Some(mut c) = self.consumers.remove(&id) else {
                    return;
                };
                if c.running {
                    self.note(|| format!("<- {id} {conn} {} bytes", bytes.len()));
                    self.on_consumer_frame(&mut c, conn, bytes);
                }
                self.consumers.insert(id, c);
            }
            Ev::ClosedAtConsumer { conn } => {
                let Some(link) = self.links.get_mut(&conn) else {
                    return;
                };
                if !link.consumer_open {
                    return;
                }
                link.consumer_open = false;
                let id = link.consumer.clone();
                let Some(mut c) = self.consumers.remove(&id) else {
                    return;
                };
                if c.other_conn == Some(conn) {
                    c.other_conn = None;
                    c.pending.clear();
                } else {
                    match c.phase {
                        Phase::Member(ch) | Phase::Registering(ch) if ch == conn => {
                            self.lose_channel(&mut c, true)
                        }
                        Phase::Leaving(ch) if ch == conn => c.phase = Phase::Down,
                        _ => {}
                    }
                }
                self.consumers.insert(id, c);
            }
            Ev::AssignorDone { call, result } => {
                self.note(|| format!("K assignor call {call} done: ok={}", result.is_ok()));
                self.feed(Input::AssignorDone { call, result });
            }
            Ev::CommitDone { op, records, ok } => {
                self.commits_in_flight.retain(|_, o| *o != op);
                if ok {
                    for r in &records {
                        let key = (r.group.clone(), r.tp.clone());
                        if let Some((old, _)) = self.store.get(&key) {
                            if r.offset < *old {
                                self.violations.push(format!(
                                    "t={}: committed offset of {} went back from {old} to {}",
                                    self.now, r.tp, r.offset
                                ));
                            }
                        }
                        self.store.insert(key, (r.offset, r.metadata.clone()));
                    }
                    self.feed(Input::OffsetsCommitted { op, result: Ok(()) });
                } else {
                    self.feed(Input::OffsetsCommitted {
                        op,
                        result: Err(StoreError::unavailable("simulated store failure")),
                    });
                }
            }
            Ev::FetchDone {
                op,
                group,
                scope,
                ok,
            } => {
                let result = if ok {
                    let found = self
                        .store
                        .iter()
                        .filter(|((g, tp), _)| {
                            *g == group
                                && match &scope {
                                    FetchScope::WholeGroup => true,
                                    FetchScope::Partitions(list) => list.contains(tp),
                                }
                        })
                        .map(|((g, tp), (offset, metadata))| OffsetEntry {
                            group: g.clone(),
                            tp: tp.clone(),
                            offset: *offset,
                            metadata: metadata.clone(),
                        })
                        .collect();
                    Ok(found)
                } else {
                    Err(StoreError::unavailable("simulated fetch failure"))
                };
                self.feed(Input::OffsetsFetched { op, result });
            }
            Ev::Consumer {
                id,
                proc_epoch,
                chan_epoch,
                what,
            } => {
                let Some(mut c) = self.consumers.remove(&id) else {
                    return;
                };
                if c.proc_epoch == proc_epoch {
                    self.on_consumer_event(&mut c, chan_epoch, what);
                }
                self.consumers.insert(id, c);
            }
        }
    }

    /// Runs until virtual time `t` (events at `t` included).
    pub fn run_until(&mut self, t: u64) {
        let mut same_time = 0u32;
        let mut last = self.now;
        while let Some(next) = self.next_time() {
            if next > t {
                break;
            }
            self.step();
            if self.now == last {
                same_time += 1;
                assert!(
                    same_time < 100_000,
                    "livelock at t={}: the coordinator keeps asking for a timer now",
                    self.now
                );
            } else {
                same_time = 0;
                last = self.now;
            }
        }
        self.now = self.now.max(t);
    }

    /// Steps until `cond` holds (panics after `limit` steps).
    pub fn step_until(&mut self, limit: u64, mut cond: impl FnMut(&World) -> bool) {
        for _ in 0..limit {
            if cond(self) {
                return;
            }
            self.step();
        }
        panic!("condition not reached in {limit} steps (t={})", self.now);
    }

    pub fn run_for(&mut self, ms: u64) {
        let t = self.now + ms;
        self.run_until(t);
    }

    // ------------------------------------------------------------------ invariants

    /// No partition is delivered by two consumers of a group at this instant (each
    /// consumer's own view: owned, and its lease not passed). Acknowledged commits and
    /// store monotonicity are checked where they happen.
    pub fn check_safety(&mut self) {
        let now = self.now;
        let mut seen: Vec<(&str, &TopicPartition, &str)> = Vec::with_capacity(64);
        for c in self.consumers.values() {
            for tp in c.delivering(now) {
                seen.push((c.spec.group.as_str(), tp, c.spec.id.as_str()));
            }
        }
        seen.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let mut found = Vec::new();
        for pair in seen.windows(2) {
            if pair[0].0 == pair[1].0 && pair[0].1 == pair[1].1 {
                found.push(format!(
                    "t={now}: {} of group {} delivered by {} and {}",
                    pair[0].1, pair[0].0, pair[0].2, pair[1].2
                ));
            }
        }
        self.violations.extend(found);
    }

    /// Full coverage: every live consumer is a member, and every partition its
    /// group subscribes to is delivered by exactly one consumer subscribed to it.
    pub fn check_coverage(&self) -> Result<(), String> {
        let mut groups: BTreeMap<&str, Vec<&FakeConsumer>> = BTreeMap::new();
        for c in self.consumers.values().filter(|c| c.running && c.wants) {
            groups.entry(c.spec.group.as_str()).or_default().push(c);
        }
        for (group, members) in groups {
            let mut owner: BTreeMap<TopicPartition, &str> = BTreeMap::new();
            for c in &members {
                if !c.is_member() {
                    return Err(format!("t={}: {} is not registered", self.now, c.spec.id));
                }
                let mine = resolve(&c.spec.subscription, &self.topics);
                for tp in c.delivering(self.now) {
                    if !mine.contains(tp) {
                        return Err(format!(
                            "t={}: {} delivers {tp}, outside its subscription",
                            self.now, c.spec.id
                        ));
                    }
                    owner.insert(tp.clone(), c.spec.id.as_str());
                }
            }
            for c in &members {
                for tp in resolve(&c.spec.subscription, &self.topics) {
                    if !owner.contains_key(&tp) {
                        return Err(format!(
                            "t={}: {tp} of group {group} (subscribed by {}) is delivered by no one",
                            self.now, c.spec.id
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Owned partitions of a consumer (its own view).
    pub fn owned(&self, id: &str) -> BTreeSet<TopicPartition> {
        self.consumers[id].owned.keys().cloned().collect()
    }

    /// Coordinator events matching a predicate.
    /// The sum of the values of metric `name` so far.
    pub fn metric_total(&self, name: &str) -> i64 {
        self.metrics.get(name).copied().unwrap_or(0)
    }

    pub fn count_events(&self, f: impl Fn(&Event) -> bool) -> usize {
        self.events.iter().filter(|(_, e)| f(e)).count()
    }

    /// Panics with details if an invariant broke or the coordinator misbehaved.
    pub fn assert_clean(&self) {
        assert!(
            self.violations.is_empty(),
            "invariant violations:\n{}",
            self.violations.join("\n")
        );
        assert!(
            self.anomalies.is_empty(),
            "coordinator misbehaviour seen by consumers:\n{}",
            self.anomalies.join("\n")
        );
    }
}

/// A Kafka OffsetCommit v8 frame (after the size prefix): a simple commit (generation
/// −1, no member) of `offset` for `topic`-`partition` in `group`.
pub fn kafka_simple_commit(group: &str, topic: &str, partition: i32, offset: i64) -> Bytes {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{OffsetCommitRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = partition;
    p.committed_offset = offset;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = vec![p];
    let mut request = OffsetCommitRequest::default();
    request.group_id = kafka_protocol::messages::GroupId(StrBytes::from_string(group.to_owned()));
    request.generation_id_or_member_epoch = -1;
    request.member_id = StrBytes::from_static_str("");
    request.topics = vec![t];
    kafka_frame(&request, 8)
}

/// A Kafka request frame (after the size prefix) of `request` at `version`, correlation
/// id 1.
pub fn kafka_frame<R>(request: &R, version: i16) -> Bytes
where
    R: kafka_protocol::protocol::Request + kafka_protocol::protocol::Encodable,
{
    use kafka_protocol::messages::RequestHeader;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = 1;
    header.client_id = Some(StrBytes::from_static_str("kafka"));
    let mut frame = BytesMut::new();
    header
        .encode(&mut frame, R::header_version(version))
        .unwrap();
    request.encode(&mut frame, version).unwrap();
    frame.freeze()
}

/// The one Kafka response `conn` received, decoded as `R` at `version`.
pub fn kafka_answer<R>(w: &World, conn: ConnId, version: i16) -> R
where
    R: kafka_protocol::protocol::Decodable + kafka_protocol::protocol::HeaderVersion,
{
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Decodable;
    let answers: Vec<&Bytes> = w
        .raw_responses
        .iter()
        .filter(|(c, _)| *c == conn)
        .map(|(_, b)| b)
        .collect();
    let [bytes] = answers.as_slice() else {
        panic!("{} answers on {conn}", answers.len())
    };
    let mut b = (*bytes).clone();
    ResponseHeader::decode(&mut b, R::header_version(version)).unwrap();
    R::decode(&mut b, version).unwrap()
}

pub fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

pub fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter().map(|(t, p)| tp(t, *p)).collect()
}
