//! Harness for Kafka's group APIs: one [`Coordinator`] on virtual time, fake Kafka
//! clients that encode requests with the `kafka-protocol` crate and decode the answers,
//! and an in-memory offset store that executes the coordinator's CommitOffsets /
//! FetchOffsets / DeleteOffsets outputs (at once, after a delay, held until released,
//! or failing).
//!
//! Checks made on every step, whatever the test: a frame is only ever sent on an open
//! connection, answers a request that is still outstanding on it, in request order
//! (its correlation id is the oldest outstanding one); and after every input
//! `poll_timeout()` is in the future.

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::marker::PhantomData;

use bytes::{BufMut, Bytes, BytesMut};
use drover_coordinator::{
    ConnId, Coordinator, CoordinatorConfig, FetchScope, GroupId, Input, OffsetEntry, OpId, Output,
    PendingTxnOffsets, StoreError, TopicName, TopicPartition,
};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, HeartbeatRequest,
    JoinGroupRequest, RequestHeader, ResponseHeader, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use crate::common::TestAssignors;

/// Topic ids the host would report.
pub const ORDERS_ID: [u8; 16] = [1; 16];
pub const PAYMENTS_ID: [u8; 16] = [2; 16];
pub const AUDIT_ID: [u8; 16] = [3; 16];

/// The topics: orders (6 partitions), payments (3), audit (2).
pub fn topics() -> Vec<(&'static str, u32, [u8; 16])> {
    vec![
        ("orders", 6, ORDERS_ID),
        ("payments", 3, PAYMENTS_ID),
        ("audit", 2, AUDIT_ID),
    ]
}

/// A config for these tests: short session timeouts allowed, the default initial
/// rebalance delay of 3 s, and no KIP-848 settle time (the tests of the heartbeat
/// interval rules read the reconciled interval right after a target change; the settle
/// time has its own unit test).
pub fn config() -> CoordinatorConfig {
    CoordinatorConfig {
        default_assignor: "sticky".into(),
        min_session_timeout_ms: 100,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay_ms: 3_000,
        consumer_heartbeat_interval_ms: 1_000,
        consumer_session_timeout_ms: 10_000,
        consumer_rebalance_settle_ms: 0,
        ..CoordinatorConfig::default()
    }
}

pub fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

// ---------------------------------------------------------------------------- store

/// The in-memory offset store.
#[derive(Debug, Default)]
pub struct Store {
    /// Committed offsets.
    pub offsets: BTreeMap<(GroupId, TopicPartition), OffsetEntry>,
    /// Answer this long after the request (0: at once).
    pub delay_ms: u64,
    /// Keep operations until [`Harness::release_store`].
    pub hold: bool,
    /// Fail this many of the next commits / fetches / deletes (retriable errors).
    pub fail_commits: u32,
    pub fail_fetches: u32,
    pub fail_deletes: u32,
    /// Every operation the coordinator asked for, in order.
    pub log: Vec<Output>,
}

impl Store {
    fn execute(&mut self, op: &Output) -> Input {
        match op {
            Output::CommitOffsets { op, records } => {
                let result = if self.fail_commits > 0 {
                    self.fail_commits -= 1;
                    Err(StoreError::unavailable("store down (test)"))
                } else {
                    for r in records {
                        self.offsets
                            .insert((r.group.clone(), r.tp.clone()), r.clone());
                    }
                    Ok(())
                };
                Input::OffsetsCommitted { op: *op, result }
            }
            Output::FetchOffsets { op, group, scope } => {
                let result = if self.fail_fetches > 0 {
                    self.fail_fetches -= 1;
                    Err(StoreError::unavailable("store down (test)"))
                } else {
                    Ok(self
                        .offsets
                        .iter()
                        .filter(|((g, tp), _)| g == group && in_scope(scope, tp))
                        .map(|(_, e)| e.clone())
                        .collect())
                };
                Input::OffsetsFetched { op: *op, result }
            }
            Output::DeleteOffsets { op, group, scope } => {
                let result = if self.fail_deletes > 0 {
                    self.fail_deletes -= 1;
                    Err(StoreError::unavailable("store down (test)"))
                } else {
                    let before = self.offsets.len();
                    self.offsets
                        .retain(|(g, tp), _| !(g == group && in_scope(scope, tp)));
                    Ok((before - self.offsets.len()) as u64)
                };
                Input::OffsetsDeleted { op: *op, result }
            }
            other => unreachable!("not a store operation: {other:?}"),
        }
    }

    /// The committed offset of `group` on `tp`.
    pub fn get(&self, group: &str, tp: &TopicPartition) -> Option<i64> {
        self.offsets
            .get(&(GroupId::new(group), tp.clone()))
            .map(|e| e.offset)
    }

    /// Puts an offset in the store directly.
    pub fn put(&mut self, group: &str, tp: TopicPartition, offset: i64) {
        let group = GroupId::new(group);
        self.offsets.insert(
            (group.clone(), tp.clone()),
            OffsetEntry {
                group,
                tp,
                offset,
                metadata: None,
            },
        );
    }
}

fn in_scope(scope: &FetchScope, tp: &TopicPartition) -> bool {
    match scope {
        FetchScope::WholeGroup => true,
        FetchScope::Partitions(ps) => ps.contains(tp),
    }
}

// ---------------------------------------------------------------------------- ledger

/// The host's transactional offset ledger (the transaction coordinator's durable
/// record): answers `StageTxnOffsets` with `code` at once, or holds them.
#[derive(Debug, Default)]
pub struct Ledger {
    /// The Kafka error code staging answers (0: recorded).
    pub code: i16,
    /// Keep stagings until [`Harness::release_ledger`].
    pub hold: bool,
    /// Stagings held.
    pub held: Vec<(OpId, PendingTxnOffsets)>,
    /// Every offset set recorded (answered 0), in order.
    pub recorded: Vec<PendingTxnOffsets>,
    /// `TxnCompletionApplied` operation ids, in order.
    pub applied: Vec<u64>,
}

// ---------------------------------------------------------------------------- connections

/// A request sent and not yet answered.
#[derive(Debug, Clone)]
struct Outstanding {
    corr: i32,
    key: ApiKey,
    version: i16,
}

#[derive(Debug, Default)]
struct Conn {
    open: bool,
    closed_by_coordinator: bool,
    next_corr: i32,
    outstanding: VecDeque<Outstanding>,
    /// Response bodies (after the header) by correlation id, not yet taken.
    answers: BTreeMap<i32, (ApiKey, i16, Bytes)>,
    /// Every answer received: (correlation id, key).
    received: Vec<(i32, ApiKey)>,
}

/// A request in flight: where its answer will be.
#[derive(Debug)]
pub struct Call<T> {
    pub conn: ConnId,
    pub corr: i32,
    pub key: ApiKey,
    pub version: i16,
    _t: PhantomData<T>,
}

impl<T> Clone for Call<T> {
    fn clone(&self) -> Self {
        Call {
            conn: self.conn,
            corr: self.corr,
            key: self.key,
            version: self.version,
            _t: PhantomData,
        }
    }
}

/// One coordinator, its clients and its offset store, on virtual time.
pub struct Harness {
    pub coord: Coordinator,
    pub now: u64,
    pub store: Store,
    /// Store operations held ([`Store::hold`]).
    held: Vec<Output>,
    /// Store operations answered later: (time, sequence) → operation.
    scheduled: BTreeMap<(u64, u64), Output>,
    seq: u64,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    /// Events and metrics, in order.
    pub events: Vec<Output>,
    /// Inputs waiting to be fed (the host's answers to outputs).
    queue: VecDeque<Input>,
    /// The transactional offset ledger.
    pub ledger: Ledger,
    /// Whether assignor calls handed to the host (threaded `TestAssignors`) wait for
    /// [`Harness::release_assignors`] instead of running at once.
    pub hold_assignors: bool,
    held_assignors: Vec<std::sync::Arc<drover_coordinator::AssignorJob>>,
}

impl Harness {
    /// A standalone coordinator with [`config`].
    pub fn new() -> Self {
        Harness::with_config(config())
    }

    /// A coordinator with `config`, told the topics and their ids (ids first, as the
    /// host does).
    pub fn with_config(config: CoordinatorConfig) -> Self {
        Harness::with_assignors(config, TestAssignors::default())
    }

    /// [`Harness::with_config`] with `assignors`.
    pub fn with_assignors(config: CoordinatorConfig, assignors: TestAssignors) -> Self {
        let coord = Coordinator::new(config, assignors).expect("valid config");
        let mut h = Harness {
            coord,
            now: 0,
            store: Store::default(),
            held: Vec::new(),
            scheduled: BTreeMap::new(),
            seq: 0,
            conns: BTreeMap::new(),
            next_conn: 1,
            events: Vec::new(),
            queue: VecDeque::new(),
            ledger: Ledger::default(),
            hold_assignors: false,
            held_assignors: Vec::new(),
        };
        let ids = topics()
            .into_iter()
            .map(|(n, _, id)| (TopicName::new(n), id))
            .collect();
        h.feed(Input::TopicIds { ids });
        let topics = topics()
            .into_iter()
            .map(|(n, p, _)| (TopicName::new(n), p))
            .collect();
        h.feed(Input::TopicsChanged { topics });
        h
    }

    /// Feeds one input (and then the host's answers it causes, such as
    /// ConnectionClosed after a CloseConnection and immediate store results).
    pub fn feed(&mut self, input: Input) {
        self.queue.push_back(input);
        while let Some(input) = self.queue.pop_front() {
            let outputs = self.coord.handle(self.now, input);
            if let Some(t) = self.coord.poll_timeout() {
                assert!(
                    t > self.now,
                    "poll_timeout {t} is not after now {}",
                    self.now
                );
            }
            for o in outputs {
                self.apply(o);
            }
        }
    }

    fn apply(&mut self, output: Output) {
        match output {
            Output::ChannelOpened { .. } => {}
            Output::Answer { conn, bytes } | Output::Push { conn, bytes } => {
                self.on_frame(conn, bytes)
            }
            Output::CloseConnection { conn } => {
                let c = self.conns.get_mut(&conn).expect("close of an unknown conn");
                assert!(c.open, "{conn} closed twice");
                c.open = false;
                c.closed_by_coordinator = true;
                c.outstanding.clear();
                self.queue.push_back(Input::ConnectionClosed { conn });
            }
            op @ (Output::CommitOffsets { .. }
            | Output::FetchOffsets { .. }
            | Output::DeleteOffsets { .. }) => {
                self.store.log.push(op.clone());
                if self.store.hold {
                    self.held.push(op);
                } else if self.store.delay_ms == 0 {
                    let input = self.store.execute(&op);
                    self.queue.push_back(input);
                } else {
                    self.seq += 1;
                    self.scheduled
                        .insert((self.now + self.store.delay_ms, self.seq), op);
                }
            }
            other @ (Output::Event(_) | Output::Metric { .. }) => self.events.push(other),
            Output::StageTxnOffsets { op, pending } => {
                if self.ledger.hold {
                    self.ledger.held.push((op, pending));
                } else {
                    let input = self.ledger_answer(op, pending);
                    self.queue.push_back(input);
                }
            }
            Output::TxnCompletionApplied { op } => self.ledger.applied.push(op),
            Output::RunAssignor(job) => {
                if self.hold_assignors {
                    self.held_assignors.push(job);
                } else {
                    let (call, result) = (job.id(), job.run());
                    self.queue.push_back(Input::AssignorDone { call, result });
                }
            }
        }
    }

    /// Runs the assignor calls held (`hold_assignors`), in the order they were made,
    /// and delivers their results.
    pub fn release_assignors(&mut self) {
        for job in std::mem::take(&mut self.held_assignors) {
            let (call, result) = (job.id(), job.run());
            self.feed(Input::AssignorDone { call, result });
        }
    }

    fn ledger_answer(&mut self, op: OpId, pending: PendingTxnOffsets) -> Input {
        let code = self.ledger.code;
        if code == 0 {
            self.ledger.recorded.push(pending);
        }
        Input::TxnOffsetsStaged {
            op,
            result: match code {
                0 => Ok(()),
                c => Err(kafka_protocol::ResponseError::try_from_code(c).expect("a Kafka code")),
            },
        }
    }

    /// Answers every held staging with the ledger's current code.
    pub fn release_ledger(&mut self) {
        for (op, pending) in std::mem::take(&mut self.ledger.held) {
            let input = self.ledger_answer(op, pending);
            self.feed(input);
        }
    }

    fn on_frame(&mut self, conn: ConnId, mut bytes: Bytes) {
        let c = self
            .conns
            .get_mut(&conn)
            .unwrap_or_else(|| panic!("frame for unknown {conn}"));
        assert!(c.open, "frame sent on closed {conn}");
        let expected = c
            .outstanding
            .pop_front()
            .unwrap_or_else(|| panic!("frame on {conn} with no request outstanding"));
        let header = ResponseHeader::decode(
            &mut bytes,
            expected.key.response_header_version(expected.version),
        )
        .expect("response header");
        assert_eq!(
            header.correlation_id, expected.corr,
            "{conn}: answer out of order (expected the answer to {:?} #{})",
            expected.key, expected.corr
        );
        c.received.push((expected.corr, expected.key));
        c.answers
            .insert(expected.corr, (expected.key, expected.version, bytes));
    }

    // ------------------------------------------------------------------ time

    /// Advances virtual time to `t`, delivering timers and delayed store answers due
    /// on the way, in time order.
    pub fn advance_to(&mut self, t: u64) {
        loop {
            let timer = self.coord.poll_timeout().filter(|&x| x <= t);
            let store = self
                .scheduled
                .keys()
                .next()
                .map(|&(at, _)| at)
                .filter(|&x| x <= t);
            match (timer, store) {
                (None, None) => break,
                (Some(a), Some(b)) if b <= a => self.deliver_store(b),
                (None, Some(b)) => self.deliver_store(b),
                (Some(a), _) => {
                    self.now = self.now.max(a);
                    self.feed(Input::Timer);
                }
            }
        }
        self.now = self.now.max(t);
    }

    fn deliver_store(&mut self, at: u64) {
        self.now = self.now.max(at);
        let key = *self.scheduled.keys().next().expect("scheduled");
        let op = self.scheduled.remove(&key).expect("scheduled");
        let input = self.store.execute(&op);
        self.feed(input);
    }

    /// Advances virtual time by `ms`.
    pub fn advance(&mut self, ms: u64) {
        self.advance_to(self.now + ms);
    }

    /// Answers every held store operation (in order), with the store's current
    /// failure settings.
    pub fn release_store(&mut self) {
        for op in std::mem::take(&mut self.held) {
            let input = self.store.execute(&op);
            self.feed(input);
        }
    }

    /// A crash of the broker: store operations not yet answered either all land in
    /// the store (`land`) or none does; their results reach no coordinator.
    pub fn crash_store_ops(&mut self, land: bool) {
        let ops: Vec<Output> = std::mem::take(&mut self.held)
            .into_iter()
            .chain(std::mem::take(&mut self.scheduled).into_values())
            .collect();
        if land {
            for op in ops {
                let _ = self.store.execute(&op);
            }
        }
        self.queue.clear();
    }

    /// Store operations held so far.
    pub fn held(&self) -> &[Output] {
        &self.held
    }

    // ------------------------------------------------------------------ clients

    /// Opens a client connection (the host reports its peer address).
    pub fn connect(&mut self) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                open: true,
                next_corr: 1,
                ..Conn::default()
            },
        );
        let peer = format!("10.0.0.{}", conn.0);
        self.feed(Input::ConnectionOpened { conn, peer });
        conn
    }

    /// The client closes `conn`; its outstanding requests will never be answered.
    pub fn close(&mut self, conn: ConnId) {
        let c = self.conns.get_mut(&conn).expect("known conn");
        if !c.open {
            return;
        }
        c.open = false;
        c.outstanding.clear();
        self.feed(Input::ConnectionClosed { conn });
    }

    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.open)
    }

    pub fn closed_by_coordinator(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.closed_by_coordinator)
    }

    /// Encodes `request` at `version` (header + body, no size prefix) and sends it on
    /// `conn`.
    pub fn send<R: Request>(
        &mut self,
        conn: ConnId,
        version: i16,
        request: R,
    ) -> Call<R::Response> {
        let key = ApiKey::try_from(R::KEY).expect("known key");
        let c = self.conns.get_mut(&conn).expect("known conn");
        assert!(c.open, "send on closed {conn}");
        let corr = c.next_corr;
        c.next_corr += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = corr;
        header.client_id = Some(s(format!("client-{}", conn.0)));
        let mut frame = BytesMut::new();
        header
            .encode(&mut frame, R::header_version(version))
            .expect("request header encodes");
        request
            .encode(&mut frame, version)
            .expect("request encodes");
        c.outstanding.push_back(Outstanding { corr, key, version });
        self.feed(Input::Frame {
            conn,
            bytes: frame.freeze(),
        });
        Call {
            conn,
            corr,
            key,
            version,
            _t: PhantomData,
        }
    }

    /// Sends raw bytes as a frame (no tracking).
    pub fn send_raw(&mut self, conn: ConnId, bytes: Bytes) {
        self.feed(Input::Frame { conn, bytes });
    }

    /// Whether `call` has been answered (and the answer not taken yet).
    pub fn answered<T>(&self, call: &Call<T>) -> bool {
        self.conns
            .get(&call.conn)
            .is_some_and(|c| c.answers.contains_key(&call.corr))
    }

    /// Whether `call` is still waiting for its answer.
    pub fn waiting<T>(&self, call: &Call<T>) -> bool {
        self.conns
            .get(&call.conn)
            .is_some_and(|c| c.outstanding.iter().any(|o| o.corr == call.corr))
    }

    /// The answer to `call`, decoded, if it came.
    pub fn try_take<T: Decodable>(&mut self, call: &Call<T>) -> Option<T> {
        let (key, version, mut body) =
            self.conns.get_mut(&call.conn)?.answers.remove(&call.corr)?;
        assert_eq!(key, call.key);
        let decoded = T::decode(&mut body, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version} answer does not decode: {e}"));
        assert!(
            body.is_empty(),
            "{key:?} v{version}: {} bytes left after the body",
            body.len()
        );
        Some(decoded)
    }

    /// The answer to `call`; panics if it has not come.
    pub fn take<T: Decodable>(&mut self, call: &Call<T>) -> T {
        self.try_take(call).unwrap_or_else(|| {
            panic!(
                "no answer to {:?} #{} on {} at {}",
                call.key, call.corr, call.conn, self.now
            )
        })
    }

    /// Sends `request` and returns its answer, which must come at once.
    pub fn call<R: Request>(&mut self, conn: ConnId, version: i16, request: R) -> R::Response {
        let call = self.send(conn, version, request);
        self.take(&call)
    }

    /// Sends `request` on a fresh connection and returns its immediate answer.
    pub fn admin<R: Request>(&mut self, version: i16, request: R) -> R::Response {
        let conn = self.connect();
        let answer = self.call(conn, version, request);
        self.close(conn);
        answer
    }

    /// Every answer `conn` received: (correlation id, key), in order.
    pub fn received(&self, conn: ConnId) -> Vec<(i32, ApiKey)> {
        self.conns
            .get(&conn)
            .map(|c| c.received.clone())
            .unwrap_or_default()
    }

    /// Requests still outstanding on `conn`: (correlation id, key).
    pub fn outstanding(&self, conn: ConnId) -> Vec<(i32, ApiKey)> {
        self.conns
            .get(&conn)
            .map(|c| c.outstanding.iter().map(|o| (o.corr, o.key)).collect())
            .unwrap_or_default()
    }

    /// Store operations of a kind, from the log.
    pub fn store_ops(&self, f: impl Fn(&Output) -> bool) -> Vec<Output> {
        self.store.log.iter().filter(|o| f(o)).cloned().collect()
    }
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

// ---------------------------------------------------------------------------- consumer protocol

/// Kafka's `consumer` protocol subscription (a version, then the message) for
/// `topics`, at `version` (0–3).
pub fn subscription_at(version: i16, topics: &[&str]) -> Bytes {
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = topics.iter().map(|t| s(*t)).collect();
    let mut out = BytesMut::new();
    out.put_i16(version);
    sub.encode(&mut out, version).expect("subscription encodes");
    out.freeze()
}

/// A v3 subscription, as current Java clients send.
pub fn subscription(topics: &[&str]) -> Bytes {
    subscription_at(3, topics)
}

/// Decodes `consumer` protocol subscription metadata.
pub fn decode_subscription(mut bytes: Bytes) -> Vec<String> {
    let version = bytes::Buf::get_i16(&mut bytes);
    let sub = ConsumerProtocolSubscription::decode(&mut bytes, version).expect("subscription");
    sub.topics.iter().map(|t| t.to_string()).collect()
}

/// Kafka's `consumer` protocol assignment (v0) of `partitions`, with `user_data`.
pub fn assignment(partitions: &[(&str, i32)], user_data: &str) -> Bytes {
    let mut a = ConsumerProtocolAssignment::default();
    for (t, p) in partitions {
        match a.assigned_partitions.last_mut() {
            Some(last) if last.topic.as_str() == *t => last.partitions.push(*p),
            _ => {
                let mut x = AssignedPartitions::default();
                x.topic = s(*t).into();
                x.partitions.push(*p);
                a.assigned_partitions.push(x);
            }
        }
    }
    a.user_data = Some(Bytes::from(user_data.to_owned()));
    let mut out = BytesMut::new();
    out.put_i16(0);
    a.encode(&mut out, 0).expect("assignment encodes");
    out.freeze()
}

/// Decodes a `consumer` protocol assignment: (partitions, user data).
pub fn decode_assignment(mut bytes: Bytes) -> (Vec<(String, i32)>, String) {
    if bytes.is_empty() {
        return (Vec::new(), String::new());
    }
    let version = bytes::Buf::get_i16(&mut bytes);
    let a = ConsumerProtocolAssignment::decode(&mut bytes, version).expect("assignment");
    let parts = a
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p)))
        .collect();
    let user = a
        .user_data
        .map(|u| String::from_utf8_lossy(&u).into_owned())
        .unwrap_or_default();
    (parts, user)
}

// ---------------------------------------------------------------------------- requests

/// A JoinGroup of the `consumer` protocol type offering `range` and `roundrobin` with
/// a subscription to `topics`.
pub fn join_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    topics: &[&str],
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
) -> JoinGroupRequest {
    let metadata = subscription(topics);
    let protocols = ["range", "roundrobin"]
        .into_iter()
        .map(|name| {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = s(name);
            p.metadata = metadata.clone();
            p
        })
        .collect();
    let mut r = JoinGroupRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member_id);
    r.group_instance_id = instance.map(s);
    r.session_timeout_ms = session_timeout_ms;
    r.rebalance_timeout_ms = rebalance_timeout_ms;
    r.protocol_type = s("consumer");
    r.protocols = protocols;
    r
}

/// A SyncGroup; `assignments` only for the leader.
pub fn sync_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncGroupRequest {
    let mut r = SyncGroupRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member_id);
    r.group_instance_id = instance.map(s);
    r.generation_id = generation;
    r.assignments = assignments
        .into_iter()
        .map(|(m, a)| {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = s(m);
            x.assignment = a;
            x
        })
        .collect();
    r
}

pub fn heartbeat_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> HeartbeatRequest {
    let mut r = HeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member_id);
    r.group_instance_id = instance.map(s);
    r.generation_id = generation;
    r
}
