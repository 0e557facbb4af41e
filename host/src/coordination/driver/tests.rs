//! The driver run on its own thread with a scripted coordinator, real flume channels
//! and real connection queues ([`ConnSink`]): what reaches which connection, what is
//! closed and counted, what goes to the store worker's queue, timers and shutdown.

use std::{sync::atomic::AtomicBool, sync::atomic::Ordering, time::Duration};

use abi_stable::std_types::{RResult, RString, RVec};
use bytes::Bytes;
use drover_abi::coordinator::{CoordinatorInput, CoordinatorOutput, TopicId};
use drover_protocol::ApiKey;
use tokio::sync::{mpsc, oneshot, watch};

use super::*;
use crate::server::{
    conn_id::ConnId,
    queue::{ConnSink, Pending},
};

/// What the scripted coordinator answers to one input.
type Script = Box<dyn FnMut(&CoordinatorInput) -> Vec<CoordinatorOutput> + Send>;

/// A coordinator that reports every input it is fed and answers from a script.
struct Scripted {
    seen: flume::Sender<CoordinatorInput>,
    script: Script,
    /// `poll_timeout`; cleared once the timer fired.
    deadline: Option<u64>,
    /// What `shutdown` returns.
    last_words: Vec<CoordinatorOutput>,
    /// The ABI it claims to be built against.
    abi: drover_abi::KindVersion,
}

impl Coordinator for Scripted {
    fn handle(
        &mut self,
        _now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, CallError> {
        let outputs = (self.script)(&input);
        if matches!(input, CoordinatorInput::TimerFired) {
            self.deadline = None;
        }
        let _ = self.seen.send(input);
        Ok(outputs)
    }
    fn poll_timeout(&self) -> Option<u64> {
        self.deadline
    }
    fn slot_gained(&mut self, _: u64, _: u32, _: u64) -> Result<Vec<CoordinatorOutput>, CallError> {
        Ok(Vec::new())
    }
    fn slot_lost(&mut self, _: u64, _: u32) -> Result<Vec<CoordinatorOutput>, CallError> {
        Ok(Vec::new())
    }
    fn shutdown(&mut self, _: u64) -> Result<Vec<CoordinatorOutput>, CallError> {
        Ok(std::mem::take(&mut self.last_words))
    }
    fn is_out_of_service(&self) -> bool {
        false
    }
    fn name(&self) -> String {
        "scripted".into()
    }
    fn abi(&self) -> drover_abi::KindVersion {
        self.abi
    }
}

/// A running driver and what the test watches.
struct Harness {
    client: CoordinatorClient,
    seen: flume::Receiver<CoordinatorInput>,
    metrics: Arc<Metrics>,
    /// The store worker's queue (`None`: the worker is gone).
    store: Option<flume::Receiver<StoreOp>>,
    thread: JoinHandle<()>,
}

/// The options of [`start`].
#[derive(Default)]
struct Setup {
    deadline: Option<u64>,
    last_words: Vec<CoordinatorOutput>,
    store_gone: bool,
    topic_ids: Vec<TopicId>,
    /// The coordinator's ABI minor (default: this host's).
    abi_minor: Option<u32>,
    /// The transactional offset ledger.
    txn_ledger: Option<Arc<dyn crate::coordination::txn_ledger::TxnOffsetLedger>>,
    /// `assignor_timeout_ms` (default 60,000).
    assignor_timeout_ms: Option<u64>,
}

fn start(setup: Setup, script: Script) -> Harness {
    let (seen_tx, seen) = flume::unbounded();
    let coordinator = Scripted {
        seen: seen_tx,
        script,
        deadline: setup.deadline,
        last_words: setup.last_words,
        abi: drover_abi::KindVersion {
            major: 3,
            minor: setup.abi_minor.unwrap_or(drover_abi::COORDINATOR_ABI.minor),
        },
    };
    let metrics = Arc::new(Metrics::new());
    let deps = DriverDeps {
        metrics: Arc::clone(&metrics),
        owner: GroupOwner::All,
        topic_ids: setup.topic_ids.into_iter().collect(),
        txn_ledger: setup.txn_ledger,
        assignor_timeout_ms: setup.assignor_timeout_ms.unwrap_or(60_000),
    };
    let (ops, store) = flume::unbounded();
    let store = (!setup.store_gone).then_some(store);
    let (client, thread) = spawn(
        coordinator,
        deps,
        StoreQueue { ops, worker: None },
        flume::bounded(16),
    )
    .unwrap();
    Harness {
        client,
        seen,
        metrics,
        store,
        thread,
    }
}

impl Harness {
    fn send(&self, msg: Msg) {
        self.client.tx.send(msg).unwrap();
    }

    /// The next input the coordinator was fed that matches `want` (earlier ones are
    /// skipped). Panics if the driver stops feeding it (a hang guard, not a timing).
    fn wait_for(&self, want: impl Fn(&CoordinatorInput) -> bool) -> CoordinatorInput {
        loop {
            let input = self
                .seen
                .recv_timeout(Duration::from_secs(30))
                .expect("the coordinator was fed nothing more");
            if want(&input) {
                return input;
            }
        }
    }

    fn attach(&self, conn: ConnId, capacity: usize) -> Conn {
        self.attach_as(conn, capacity, crate::authz::RequestAuthz::allow_all())
    }

    /// [`Self::attach`] with the connection's authorization context.
    fn attach_as(&self, conn: ConnId, capacity: usize, scope: crate::authz::RequestAuthz) -> Conn {
        let (queue, pending) = mpsc::channel(capacity);
        let (close, closed) = watch::channel(false);
        let channel = Arc::new(AtomicBool::new(false));
        self.send(Msg::Attach {
            conn,
            sink: ConnSink {
                queue,
                channel: Arc::clone(&channel),
                close: Arc::new(close),
                peer: ([127, 0, 0, 1], 9092).into(),
            },
            scope,
        });
        Conn {
            pending,
            closed,
            channel,
        }
    }

    fn request(
        &self,
        conn: ConnId,
        api_key: i16,
        tag: &'static [u8],
    ) -> oneshot::Receiver<Outcome> {
        let (reply, answer) = oneshot::channel();
        self.send(Msg::Request {
            conn,
            api_key,
            bytes: frame(api_key, tag),
            reply,
        });
        answer
    }

    /// Returns once the driver executed everything sent before (the coordinator sees
    /// a connection attached after it).
    fn settle(&self) {
        let marker = crate::server::conn_id::next_conn_id() + 1_000_000;
        let _conn = self.attach(marker, 1);
        self.wait_for(|input| {
            matches!(input, CoordinatorInput::ConnectionOpened { conn, .. } if *conn == marker)
        });
    }

    fn shutdown(self) {
        let (done, finished) = oneshot::channel();
        self.send(Msg::Shutdown(done));
        finished.blocking_recv().unwrap();
        self.thread.join().unwrap();
    }

    fn metrics(&self) -> String {
        self.metrics.render(&[])
    }
}

/// The connection side of an attached sink.
struct Conn {
    pending: mpsc::Receiver<Pending>,
    closed: watch::Receiver<bool>,
    channel: Arc<AtomicBool>,
}

/// A request frame: API key, version 0, correlation id 1, then `tag`.
fn frame(api_key: i16, tag: &[u8]) -> Bytes {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&api_key.to_be_bytes());
    bytes.extend_from_slice(&0i16.to_be_bytes());
    bytes.extend_from_slice(&1i32.to_be_bytes());
    bytes.extend_from_slice(tag);
    Bytes::from(bytes)
}

fn tag_of(input: &CoordinatorInput) -> Option<(ConnId, Vec<u8>)> {
    match input {
        CoordinatorInput::Frame { conn, bytes } => Some((*conn, bytes[8..].to_vec())),
        _ => None,
    }
}

fn answer(conn: ConnId, bytes: &[u8]) -> CoordinatorOutput {
    CoordinatorOutput::Answer {
        conn,
        bytes: RVec::from(bytes),
    }
}

fn answered(answer: oneshot::Receiver<Outcome>) -> Vec<u8> {
    match answer.blocking_recv() {
        Ok(Outcome::Respond(bytes)) => bytes.to_vec(),
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn closed_conn(conn: ConnId) -> impl Fn(&CoordinatorInput) -> bool {
    move |input| matches!(input, CoordinatorInput::ConnectionClosed { conn: c } if *c == conn)
}

#[test]
fn answers_reach_their_connection_in_request_order() {
    let register = ApiKey::RegisterConsumer.code();
    // Holds conn 1's first request, then answers both at once; answers conn 2 at once.
    let h = start(
        Setup::default(),
        Box::new(|input| match tag_of(input) {
            Some((1, tag)) if tag == b"second" => vec![answer(1, b"first"), answer(1, b"second")],
            Some((2, _)) => vec![answer(2, b"other")],
            _ => Vec::new(),
        }),
    );
    let _one = h.attach(1, 4);
    let _two = h.attach(2, 4);
    let first = h.request(1, register, b"first");
    let other = h.request(2, register, b"other");
    let second = h.request(1, register, b"second");
    assert_eq!(answered(other), b"other");
    assert_eq!(answered(first), b"first");
    assert_eq!(answered(second), b"second");
    h.settle();
    assert!(
        h.metrics().contains(
            "drover_native_requests_total{api=\"RegisterConsumer\",error=\"UnknownServerError\"} 3"
        ),
        "{}",
        h.metrics()
    );
    h.shutdown();
}

#[test]
fn a_push_to_a_consumer_that_does_not_read_closes_its_channel() {
    let h = start(
        Setup::default(),
        Box::new(|input| match input {
            CoordinatorInput::Frame { conn, .. } => vec![
                CoordinatorOutput::ChannelOpened { conn: *conn },
                answer(*conn, b"registered"),
                CoordinatorOutput::Push {
                    conn: *conn,
                    bytes: RVec::from(&b"ping"[..]),
                },
                CoordinatorOutput::Push {
                    conn: *conn,
                    bytes: RVec::from(&b"ping again"[..]),
                },
            ],
            _ => Vec::new(),
        }),
    );
    let mut conn = h.attach(5, 1);
    let registered = h.request(5, ApiKey::RegisterConsumer.code(), b"register");
    h.wait_for(closed_conn(5));
    assert_eq!(answered(registered), b"registered");
    assert!(conn.channel.load(Ordering::Acquire), "opened as a channel");
    assert!(*conn.closed.borrow(), "told to close");
    assert!(matches!(
        conn.pending.try_recv(),
        Ok(Pending::Now(Outcome::Respond(b))) if b == "ping"
    ));
    assert!(
        conn.pending.try_recv().is_err(),
        "the second push overflowed"
    );
    h.shutdown();
}

#[test]
fn a_contract_violation_closes_the_connection_and_is_counted() {
    // An answer on a connection with no request waiting.
    let h = start(
        Setup::default(),
        Box::new(|input| match input {
            CoordinatorInput::ConnectionOpened { conn, .. } => vec![answer(*conn, b"unasked")],
            _ => Vec::new(),
        }),
    );
    let conn = h.attach(3, 4);
    h.wait_for(closed_conn(3));
    assert!(*conn.closed.borrow());
    assert!(
        h.metrics()
            .contains("drover_coordinator_events_total{name=\"contract_violations\"} 1"),
        "{}",
        h.metrics()
    );
    assert!(h.metrics().contains(
        "drover_connections_closed_by_broker_total{reason=\"coordinator_contract_violation\"} 1"
    ));
    // Frames still arriving from the closed connection are dropped.
    let late = h.request(3, ApiKey::Heartbeat.code(), b"late");
    assert!(late.blocking_recv().is_err(), "no answer after the close");
    h.shutdown();
}

#[test]
fn store_operations_go_to_the_store_queue() {
    let h = start(
        Setup {
            topic_ids: vec![TopicId {
                name: RString::from("gone"),
                id: [7; 16],
            }],
            ..Setup::default()
        },
        Box::new(|input| match input {
            CoordinatorInput::ConnectionOpened { .. } => vec![CoordinatorOutput::CommitOffsets {
                op: 7,
                records: RVec::new(),
            }],
            _ => Vec::new(),
        }),
    );
    let _conn = h.attach(1, 4);
    let store = h.store.as_ref().unwrap();
    let op = store.recv().unwrap();
    assert!(matches!(op, StoreOp::Commit { op: 7, .. }), "{op:?}");
    // A topic list that lost a topic queues the removal of its offsets, after the
    // coordinator saw the list.
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    let op = store.recv().unwrap();
    assert!(
        matches!(&op, StoreOp::DeleteTopics { topics, .. } if topics.contains("gone")),
        "{op:?}"
    );
    h.wait_for(|input| matches!(input, CoordinatorInput::TopicsChanged { .. }));
    h.shutdown();
}

#[test]
fn a_gone_store_worker_feeds_back_an_error_result() {
    let h = start(
        Setup {
            store_gone: true,
            ..Setup::default()
        },
        Box::new(|input| match input {
            CoordinatorInput::ConnectionOpened { .. } => vec![CoordinatorOutput::FetchOffsets {
                op: 9,
                group: RString::from("g"),
                partitions: RVec::new(),
            }],
            _ => Vec::new(),
        }),
    );
    let _conn = h.attach(1, 4);
    let result = h.wait_for(|input| matches!(input, CoordinatorInput::OffsetsFetched { .. }));
    assert!(
        matches!(
            result,
            CoordinatorInput::OffsetsFetched {
                op: 9,
                result: RResult::RErr(_)
            }
        ),
        "{result:?}"
    );
    h.shutdown();
}

#[test]
fn timers_fire_at_poll_timeout() {
    let h = start(
        Setup {
            deadline: Some(0),
            ..Setup::default()
        },
        Box::new(|_| Vec::new()),
    );
    h.wait_for(|input| matches!(input, CoordinatorInput::TimerFired));
    h.shutdown();
}

#[test]
fn shutdown_runs_the_final_outputs_then_closes_connections() {
    let h = start(
        Setup {
            last_words: vec![CoordinatorOutput::CommitOffsets {
                op: 1,
                records: RVec::new(),
            }],
            ..Setup::default()
        },
        Box::new(|_| Vec::new()),
    );
    let conn = h.attach(1, 4);
    h.wait_for(|input| matches!(input, CoordinatorInput::ConnectionOpened { .. }));
    let store = h.store.clone().unwrap();
    h.shutdown();
    assert!(matches!(
        store.try_recv(),
        Ok(StoreOp::Commit { op: 1, .. })
    ));
    assert!(*conn.closed.borrow());
}

#[test]
fn kafka_answers_count_their_error_codes_and_closes_their_reason() {
    use kafka_protocol::{
        messages::{HeartbeatResponse, ResponseHeader},
        protocol::Encodable,
    };
    let heartbeat = kafka_protocol::messages::ApiKey::Heartbeat;
    let mut frame = bytes::BytesMut::new();
    ResponseHeader::default()
        .encode(&mut frame, heartbeat.response_header_version(0))
        .unwrap();
    let mut response = HeartbeatResponse::default();
    response.error_code = 25; // UNKNOWN_MEMBER_ID
    response.encode(&mut frame, 0).unwrap(); // the request helper sends v0
    let frame = frame.to_vec();
    // Answers "known" with the heartbeat answer; closes the connection otherwise
    // (as the coordinator does for a version it does not serve).
    let h = start(
        Setup::default(),
        Box::new(move |input| match tag_of(input) {
            Some((conn, tag)) if tag == b"known" => vec![answer(conn, &frame)],
            Some((conn, _)) => vec![CoordinatorOutput::CloseConnection { conn }],
            None => Vec::new(),
        }),
    );
    let _one = h.attach(1, 4);
    let known = h.request(1, heartbeat as i16, b"known");
    assert!(!answered(known).is_empty());
    let refused = h.request(1, heartbeat as i16, b"unsupported");
    assert!(refused.blocking_recv().is_err(), "closed without an answer");
    h.wait_for(closed_conn(1));
    let metrics = h.metrics();
    assert!(
        metrics.contains("drover_requests_total{api=\"Heartbeat\",error=\"UnknownMemberId\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("drover_connections_closed_by_broker_total{reason=\"coordinator_closed\"} 1"),
        "{metrics}"
    );
    h.shutdown();
}

/// The partition table reaches a coordinator of ABI 3.3 or later; an older one is not
/// sent it (messages are handled in order, so the topic list after it proves it was
/// dropped, not delayed).
#[test]
fn partition_stats_go_only_to_coordinators_that_know_them() {
    for (minor, expected) in [(2, false), (3, true)] {
        let h = start(
            Setup {
                abi_minor: Some(minor),
                ..Setup::default()
            },
            Box::new(|_| Vec::new()),
        );
        let topics: RVec<drover_abi::assignor::TopicContext> =
            vec![drover_abi::assignor::TopicContext {
                topic: "t".into(),
                partitions: vec![drover_abi::assignor::PartitionContext::unknown(0)].into(),
            }]
            .into();
        h.send(Msg::PartitionStats(RVec::new(), topics));
        h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
        let mut stats_seen = false;
        loop {
            let input = h.seen.recv_timeout(Duration::from_secs(30)).unwrap();
            match input {
                CoordinatorInput::PartitionStats { topics, .. } => {
                    assert_eq!(topics[0].topic.as_str(), "t");
                    stats_seen = true;
                }
                CoordinatorInput::TopicsChanged { .. } => break,
                _ => {}
            }
        }
        assert_eq!(stats_seen, expected, "coordinator ABI 3.{minor}");
        h.shutdown();
    }
}

/// A ledger that records what it is asked to stage and answers `code` for group "g",
/// INVALID_PRODUCER_EPOCH (47) for any other.
struct ScriptedLedger {
    staged: std::sync::Mutex<Vec<drover_abi::coordinator::PendingTxnOffsets>>,
}

impl crate::coordination::txn_ledger::TxnOffsetLedger for ScriptedLedger {
    fn stage(
        &self,
        staging: crate::coordination::txn_ledger::Staging,
    ) -> crate::coordination::txn_ledger::BoxFuture<'static, i16> {
        let pending = staging.pending;
        let code = if pending.group.as_str() == "g" { 0 } else { 47 };
        self.staged.lock().unwrap().push(pending);
        Box::pin(async move {
            tokio::task::yield_now().await;
            code
        })
    }
}

fn pending(group: &str, producer_id: i64) -> drover_abi::coordinator::PendingTxnOffsets {
    drover_abi::coordinator::PendingTxnOffsets {
        group: group.into(),
        producer_id,
        producer_epoch: 0,
        offsets: vec![drover_abi::OffsetRecord {
            group: group.into(),
            topic: "t".into(),
            partition: 0,
            offset: 5,
            metadata: "".into(),
            commit_time_ms: 0,
        }]
        .into(),
    }
}

/// A script that stages `g` and `h` on the first topic list, and applies every
/// transaction completion at once.
fn staging_script() -> Script {
    Box::new(|input| match input {
        CoordinatorInput::TopicsChanged { .. } => vec![
            CoordinatorOutput::StageTxnOffsets {
                op: 1,
                pending: pending("g", 7),
            },
            CoordinatorOutput::StageTxnOffsets {
                op: 2,
                pending: pending("h", 8),
            },
        ],
        CoordinatorInput::TxnCompleted { op, .. } => {
            vec![CoordinatorOutput::TxnCompletionApplied { op: *op }]
        }
        _ => Vec::new(),
    })
}

fn staged_codes(h: &Harness) -> Vec<(u64, i16)> {
    let mut codes: Vec<(u64, i16)> = (0..2)
        .map(
            |_| match h.wait_for(|i| matches!(i, CoordinatorInput::TxnOffsetsStaged { .. })) {
                CoordinatorInput::TxnOffsetsStaged { op, error_code } => (op, error_code),
                _ => unreachable!(),
            },
        )
        .collect();
    codes.sort();
    codes
}

/// Stagings go to the ledger, and its codes come back to the coordinator as
/// `TxnOffsetsStaged`; a completion resolves `complete_txn` once applied, and the
/// metrics follow.
#[test]
fn stagings_go_through_the_ledger_and_completions_resolve_when_applied() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let ledger = Arc::new(ScriptedLedger {
        staged: std::sync::Mutex::new(Vec::new()),
    });
    let h = start(
        Setup {
            txn_ledger: Some(ledger.clone()),
            ..Setup::default()
        },
        staging_script(),
    );
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    assert_eq!(staged_codes(&h), vec![(1, 0), (2, 47)]);
    assert_eq!(ledger.staged.lock().unwrap().len(), 2);
    assert!(h
        .metrics()
        .contains("drover_coordinator_txn_pending_offsets 1\n"));
    runtime.block_on(h.client.complete_txn(7, 0, true)).unwrap();
    let text = h.metrics();
    assert!(
        text.contains("drover_coordinator_txn_pending_offsets 0\n"),
        "{text}"
    );
    assert!(
        text.contains(r#"drover_coordinator_txn_completions_total{outcome="committed"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"drover_coordinator_txn_offset_stages_total{outcome="refused"} 1"#));
    // Restored offsets reach the coordinator as they are.
    runtime
        .block_on(h.client.restore_txn_offsets(vec![pending("g", 9)]))
        .unwrap();
    match h.wait_for(|i| matches!(i, CoordinatorInput::TxnOffsetsPending { .. })) {
        CoordinatorInput::TxnOffsetsPending { pending } => {
            assert_eq!(pending[0].producer_id, 9)
        }
        _ => unreachable!(),
    }
    h.shutdown();
}

/// Without a ledger (no transaction coordinator), a staging is answered
/// COORDINATOR_NOT_AVAILABLE (15) at once.
#[test]
fn without_a_ledger_stagings_are_answered_coordinator_not_available() {
    let h = start(Setup::default(), staging_script());
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    assert_eq!(staged_codes(&h), vec![(1, 15), (2, 15)]);
    assert!(h
        .metrics()
        .contains(r#"drover_coordinator_txn_offset_stages_total{outcome="refused"} 2"#));
    h.shutdown();
}

/// ShareGroupHeartbeat (76) and ShareGroupDescribe (77) go only to a coordinator of
/// ABI 3.7 or later that lists them (the host authorizes them first).
#[test]
fn share_group_apis_go_only_to_coordinators_of_abi_3_7() {
    use kafka_protocol::messages::ApiKey;
    let keys = [
        ApiKey::ShareGroupHeartbeat as i16,
        ApiKey::ShareGroupDescribe as i16,
    ];
    for (minor, expected) in [(6, false), (7, true)] {
        let h = start(
            Setup {
                abi_minor: Some(minor),
                ..Setup::default()
            },
            Box::new(|_| Vec::new()),
        );
        let client = h
            .client
            .clone()
            .with_kafka_apis(keys.iter().map(|k| (*k, 1, 1)).collect());
        for key in keys {
            assert_eq!(client.serves(key), expected, "API {key}, ABI 3.{minor}");
        }
        // Not listed by the coordinator: not routed, whatever its ABI.
        assert!(!h.client.serves(keys[0]));
        h.shutdown();
    }
}

/// A coordinator older than ABI 3.4 is sent no transaction input and is not routed
/// TxnOffsetCommit; a completion resolves at once (it holds no offsets).
#[test]
fn older_coordinators_get_no_transactional_inputs_or_requests() {
    let txn_key = kafka_protocol::messages::ApiKey::TxnOffsetCommit as i16;
    for (minor, expected) in [(3, false), (4, true)] {
        let h = start(
            Setup {
                abi_minor: Some(minor),
                ..Setup::default()
            },
            staging_script(),
        );
        let client = h.client.clone().with_kafka_apis(vec![(txn_key, 0, 5)]);
        assert_eq!(client.serves(txn_key), expected, "ABI 3.{minor}");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(h.client.restore_txn_offsets(vec![pending("g", 1)]))
            .unwrap();
        rt.block_on(h.client.complete_txn(1, 0, false)).unwrap();
        h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
        let mut txn_inputs = 0;
        loop {
            match h.seen.recv_timeout(Duration::from_secs(30)).unwrap() {
                CoordinatorInput::TxnOffsetsPending { .. }
                | CoordinatorInput::TxnCompleted { .. } => txn_inputs += 1,
                CoordinatorInput::TopicsChanged { .. } => break,
                _ => {}
            }
        }
        assert_eq!(txn_inputs > 0, expected, "ABI 3.{minor}");
        h.shutdown();
    }
}

/// A ledger whose stagings resolve (0) only when the test opens its gate.
struct GatedLedger {
    gate: Arc<tokio::sync::Notify>,
}

impl crate::coordination::txn_ledger::TxnOffsetLedger for GatedLedger {
    fn stage(
        &self,
        _staging: crate::coordination::txn_ledger::Staging,
    ) -> crate::coordination::txn_ledger::BoxFuture<'static, i16> {
        let gate = Arc::clone(&self.gate);
        Box::pin(async move {
            gate.notified().await;
            0
        })
    }
}

/// A transaction's completion that arrives while one of its producer's stagings is
/// still with the ledger reaches the coordinator only after that staging's answer, so
/// a late staging cannot leave offsets pending that no outcome resolves (cluster mode,
/// where the outcome comes from another broker: txn::group_offsets).
#[test]
fn a_completion_waits_for_the_producers_staging_in_flight() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let gate = Arc::new(tokio::sync::Notify::new());
    let h = start(
        Setup {
            txn_ledger: Some(Arc::new(GatedLedger {
                gate: Arc::clone(&gate),
            })),
            ..Setup::default()
        },
        Box::new(|input| match input {
            CoordinatorInput::TopicsChanged { .. } => vec![CoordinatorOutput::StageTxnOffsets {
                op: 1,
                pending: pending("g", 7),
            }],
            CoordinatorInput::TxnCompleted { op, .. } => {
                vec![CoordinatorOutput::TxnCompletionApplied { op: *op }]
            }
            _ => Vec::new(),
        }),
    );
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    h.wait_for(|i| matches!(i, CoordinatorInput::TopicsChanged { .. }));
    let client = h.client.clone();
    let completed = runtime.spawn(async move { client.complete_txn(7, 0, true).await });
    // A message sent after the completion: once the coordinator sees it, the driver
    // has taken the completion (and, with the staging in flight, held it back).
    runtime
        .block_on(h.client.restore_txn_offsets(vec![pending("h", 9)]))
        .unwrap();
    let mut order = Vec::new();
    loop {
        match h.seen.recv_timeout(Duration::from_secs(30)).unwrap() {
            CoordinatorInput::TxnOffsetsPending { .. } => break,
            CoordinatorInput::TxnCompleted { .. } => order.push("completed"),
            _ => {}
        }
    }
    gate.notify_one();
    while order.len() < 2 {
        match h.seen.recv_timeout(Duration::from_secs(30)).unwrap() {
            CoordinatorInput::TxnOffsetsStaged { .. } => order.push("staged"),
            CoordinatorInput::TxnCompleted { .. } => order.push("completed"),
            _ => {}
        }
    }
    assert_eq!(order, vec!["staged", "completed"]);
    runtime.block_on(completed).unwrap().unwrap();
    h.shutdown();
}

/// Cluster mode: a slot's staged offsets come with the slot, in one message, so the
/// coordinator holds them before any request of the slot can reach it.
#[test]
fn a_gained_slot_brings_its_staged_offsets() {
    let h = start(Setup::default(), Box::new(|_| Vec::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(h.client.slot_gained(3, 0, vec![pending("g", 5)]))
        .unwrap();
    match h.seen.recv_timeout(Duration::from_secs(30)).unwrap() {
        CoordinatorInput::TxnOffsetsPending { pending } => {
            assert_eq!(pending[0].producer_id, 5)
        }
        other => panic!("expected the staged offsets first, got {other:?}"),
    }
    h.shutdown();
}

/// An assignor call that returns once the test opens its gate.
struct GatedJob(flume::Receiver<()>);

impl drover_abi::coordinator::AssignorJob for GatedJob {
    fn run(&self) -> RResult<drover_abi::Assignment, drover_abi::PluginError> {
        let _ = self.0.recv();
        RResult::ROk(drover_abi::Assignment::default())
    }
    fn group(&self) -> RString {
        "g".into()
    }
    fn assignor(&self) -> RString {
        "gated".into()
    }
}

/// An assignor call handed out (`RunAssignor`, coordinator ABI 3.6) runs on a thread of
/// its own: while it runs, the coordinator keeps being fed (here a second topic list),
/// and its result comes back as `AssignorDone` with the call's id once it returns.
#[test]
fn assignor_calls_run_off_the_coordinator_thread_and_their_results_come_back() {
    let (open, gate) = flume::unbounded::<()>();
    let mut gate = Some(gate);
    let h = start(
        Setup::default(),
        Box::new(move |input| match (input, &gate) {
            (CoordinatorInput::TopicsChanged { .. }, Some(_)) => {
                let gate = gate.take().expect("checked");
                let job = drover_abi::coordinator::AssignorJob_TO::from_value(
                    GatedJob(gate),
                    abi_stable::sabi_trait::TD_Opaque,
                );
                vec![CoordinatorOutput::RunAssignor {
                    op: 41,
                    job: abi_stable::std_types::RArc::new(job),
                }]
            }
            _ => Vec::new(),
        }),
    );
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    h.wait_for(|i| matches!(i, CoordinatorInput::TopicsChanged { .. }));
    // The call is blocked; the coordinator thread is not.
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    h.wait_for(|i| matches!(i, CoordinatorInput::TopicsChanged { .. }));
    open.send(()).unwrap();
    match h.wait_for(|i| matches!(i, CoordinatorInput::AssignorDone { .. })) {
        CoordinatorInput::AssignorDone { op, result } => {
            assert_eq!(op, 41);
            assert!(result.is_ok(), "{result:?}");
        }
        _ => unreachable!(),
    }
}

/// Calls of one assignor run on at most four threads; a call that waited longer than
/// the budget for one is answered `Unavailable` without running, so groups behind a
/// slow strategy fall back instead of waiting for every call before theirs.
#[test]
fn a_call_that_waits_past_the_budget_for_a_thread_is_answered_unrun() {
    let (open, gate) = flume::unbounded::<()>();
    let mut calls = 0u64;
    let h = start(
        Setup {
            assignor_timeout_ms: Some(100),
            ..Setup::default()
        },
        Box::new(move |input| match input {
            CoordinatorInput::TopicsChanged { .. } => (0..5)
                .map(|_| {
                    calls += 1;
                    let job = drover_abi::coordinator::AssignorJob_TO::from_value(
                        GatedJob(gate.clone()),
                        abi_stable::sabi_trait::TD_Opaque,
                    );
                    CoordinatorOutput::RunAssignor {
                        op: calls,
                        job: abi_stable::std_types::RArc::new(job),
                    }
                })
                .collect(),
            _ => Vec::new(),
        }),
    );
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    h.wait_for(|i| matches!(i, CoordinatorInput::TopicsChanged { .. }));
    // Four calls hold the four threads; the fifth waits past its 100 ms budget.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        open.send(()).unwrap();
    }
    let mut results: Vec<(u64, bool)> = (0..5)
        .map(
            |_| match h.wait_for(|i| matches!(i, CoordinatorInput::AssignorDone { .. })) {
                CoordinatorInput::AssignorDone { op, result } => (op, result.is_ok()),
                _ => unreachable!(),
            },
        )
        .collect();
    results.sort();
    assert_eq!(
        results,
        [(1, true), (2, true), (3, true), (4, true), (5, false)],
        "four calls ran, the fifth was answered unrun"
    );
}

fn topic_id(name: &str, n: u8) -> TopicId {
    TopicId {
        name: name.into(),
        id: [n; 16],
    }
}

impl Harness {
    /// Whether the coordinator was fed a topic scope among what the driver did so far.
    fn scope_seen(&self) -> bool {
        self.settle();
        self.seen
            .try_iter()
            .any(|i| matches!(i, CoordinatorInput::TopicScope { .. }))
    }
}

fn scope_of(input: &CoordinatorInput) -> Vec<String> {
    match input {
        CoordinatorInput::TopicScope { topics, .. } => {
            topics.iter().map(|t| t.to_string()).collect()
        }
        other => panic!("not a topic scope: {other:?}"),
    }
}

/// With an authorizer, an attaching connection's topic scope (the topics its principal
/// may describe; the fake allows names starting with `ok`) reaches a coordinator of ABI
/// 3.9 right after `ConnectionOpened`, before any frame; `WantTopicScope` is answered
/// with a fresh one over the topics as they are now, and ignored once the connection
/// closed.
#[test]
fn topic_scopes_follow_the_connections_principal() {
    let want = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asked = std::sync::Arc::clone(&want);
    let h = start(
        Setup {
            topic_ids: vec![topic_id("ok-a", 1), topic_id("secret", 2)],
            ..Setup::default()
        },
        Box::new(move |input| match input {
            CoordinatorInput::TimerFired | CoordinatorInput::TopicsChanged { .. }
                if asked.load(Ordering::SeqCst) =>
            {
                vec![CoordinatorOutput::WantTopicScope { conn: 7 }]
            }
            _ => Vec::new(),
        }),
    );
    let _conn = h.attach_as(7, 4, crate::authz::tests::ok_prefix_checks());
    h.wait_for(|i| matches!(i, CoordinatorInput::ConnectionOpened { conn: 7, .. }));
    let first = h.seen.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(matches!(
        first,
        CoordinatorInput::TopicScope { conn: 7, .. }
    ));
    assert_eq!(scope_of(&first), ["ok-a"]);

    want.store(true, Ordering::SeqCst);
    h.send(Msg::TopicsChanged(
        RVec::new(),
        vec![
            topic_id("ok-a", 1),
            topic_id("ok-b", 3),
            topic_id("secret", 2),
        ]
        .into(),
    ));
    let again = h.wait_for(|i| matches!(i, CoordinatorInput::TopicScope { conn: 7, .. }));
    assert_eq!(scope_of(&again), ["ok-a", "ok-b"]);

    h.send(Msg::Closed { conn: 7 });
    h.send(Msg::TopicsChanged(RVec::new(), RVec::new()));
    assert!(!h.scope_seen(), "no scope for a closed connection");
    h.shutdown();
}

/// Without an authorizer, or to a coordinator before ABI 3.9, no scope is sent.
#[test]
fn no_topic_scopes_without_an_authorizer_or_for_older_coordinators() {
    for (minor, authz) in [
        (None, crate::authz::RequestAuthz::allow_all()),
        (Some(8), crate::authz::tests::ok_prefix_checks()),
    ] {
        let h = start(
            Setup {
                topic_ids: vec![topic_id("ok-a", 1)],
                abi_minor: minor,
                ..Setup::default()
            },
            Box::new(|_| vec![CoordinatorOutput::WantTopicScope { conn: 7 }]),
        );
        let _conn = h.attach_as(7, 4, authz);
        assert!(!h.scope_seen(), "ABI minor {minor:?}");
        h.shutdown();
    }
}
