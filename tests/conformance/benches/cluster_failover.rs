//! Cluster fail-over benchmark (issue 7): the time from killing a group's coordinator
//! broker to the group consuming again, for a group of 100 consumers.
//!
//! Each run starts a fresh cluster: one ZooKeeper server (the testkit's, shared by the
//! runs, a unique chroot per run) and three `target/release/drover` brokers in cluster
//! mode with the coordinator, sticky, range and `zookeeper` offset-store plugins. It
//! creates one topic (`--partitions`, placed round robin over the brokers), starts a
//! producer writing one record to every partition every `--interval-ms` (rskafka), and
//! 100 `drover-client` consumers in one group, in this process, each draining its one
//! stream. Once every partition flows and the group has been stable for `--hold`
//! seconds, the broker owning the group's coordinator slot is killed with SIGKILL.
//!
//! The killed broker's own partitions stop until it returns (there is no replication);
//! the producer skips them. "The group consuming again" is every partition led by a
//! live broker delivering again. Times after the kill:
//!
//! - **expired**: the killed broker's ZooKeeper session expired (its ephemeral nodes
//!   gone: ZooKeeper's `mntr` `zk_ephemerals_count` drops, polled every 10 ms);
//! - **claimed**: a live broker created the slot's node in ZooKeeper and is telling its
//!   coordinator (its `coordinator slot gained` log line; the brokers run with
//!   `RUST_LOG=info` unless `DROVER_BENCH_LOG` says otherwise);
//! - **gained**: the new owner's coordinator took the slot (the plugin's `coordinator
//!   slot gained` line, with its takeover deadline): its takeover wait
//!   (docs/protocol.md §6.8) starts here. Without the log lines both come from polling
//!   `GET /v1/cluster` of the survivors every 20 ms (also used for **seen**: the
//!   victim gone from a survivor's view);
//! - **lost**: every consumer saw its channel close (`ConsumerEvent::Lost`);
//! - **registered**: every consumer registered again (`ConsumerEvent::Registered`);
//! - **assigned**: every consumer applied the new generation's StartFetcher
//!   (`ConsumerEvent::Assigned`);
//! - **consuming**: every live partition delivered a record again (its first delivery
//!   by a consumer after that consumer lost its old channel), p50 and last.
//!
//! ```text
//! cargo build --release -p drover-host -p drover-coordinator -p drover-assignor-sticky \
//!     -p drover-assignor-range -p drover-offsets-zookeeper
//! cargo bench -p drover-tests --bench cluster_failover -- [--consumers N]
//!     [--partitions P] [--slots S] [--interval-ms MS] [--hold S] [--delay-ms DEBOUNCE]
//!     [--claim-delay-ms MS] [--repeat R] [--config ZK_SESSION,SESSION,TAKEOVER]...
//!     [--keep-logs]
//! ```
//!
//! `--config` (repeatable; default `3000,3000,3000` and `2000,2000,2000`): the brokers'
//! ZooKeeper session timeout, the consumers' session timeout (also the coordinator's
//! `max_session_timeout_ms`) and the coordinator's `slot_takeover_wait_ms`, in ms.

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use drover_client::{Consumer, ConsumerConfig, ConsumerEvent, MessageStream};
use drover_tests::{
    services::zookeeper::{unique_chroot, ZkServer},
    PluginDir,
};
use rskafka::{
    client::{
        partition::{Compression, PartitionClient, UnknownTopicHandling},
        ClientBuilder,
    },
    record::Record,
};
use serde_json::Value;

const TOPIC: &str = "failover";

/// One configuration of the timeouts, ms.
#[derive(Debug, Clone, Copy)]
struct Setting {
    zk_session_ms: u64,
    session_ms: u64,
    takeover_ms: u64,
}

struct Options {
    consumers: usize,
    partitions: i32,
    slots: u32,
    interval_ms: u64,
    hold_s: u64,
    delay_ms: u64,
    claim_delay_ms: u64,
    repeat: usize,
    settings: Vec<Setting>,
    keep_logs: bool,
}

fn options() -> Options {
    let mut o = Options {
        consumers: 100,
        partitions: 120,
        slots: 16,
        interval_ms: 100,
        hold_s: 3,
        delay_ms: 300,
        claim_delay_ms: 2_000,
        repeat: 3,
        settings: Vec::new(),
        keep_logs: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--consumers" => o.consumers = value().parse().expect("--consumers N"),
            "--partitions" => o.partitions = value().parse().expect("--partitions P"),
            "--slots" => o.slots = value().parse().expect("--slots S"),
            "--interval-ms" => o.interval_ms = value().parse().expect("--interval-ms MS"),
            "--hold" => o.hold_s = value().parse().expect("--hold SECONDS"),
            "--delay-ms" => o.delay_ms = value().parse().expect("--delay-ms MS"),
            "--claim-delay-ms" => o.claim_delay_ms = value().parse().expect("--claim-delay-ms"),
            "--repeat" => o.repeat = value().parse().expect("--repeat R"),
            "--keep-logs" => o.keep_logs = true,
            "--config" => {
                let v: Vec<u64> = value()
                    .split(',')
                    .map(|x| x.trim().parse().expect("--config ZK,SESSION,TAKEOVER (ms)"))
                    .collect();
                assert_eq!(v.len(), 3, "--config ZK_SESSION,SESSION,TAKEOVER (ms)");
                assert!(
                    v[2] >= v[1],
                    "the takeover wait may not be below the session timeout"
                );
                o.settings.push(Setting {
                    zk_session_ms: v[0],
                    session_ms: v[1],
                    takeover_ms: v[2],
                });
            }
            other => panic!("unknown argument {other}"),
        }
    }
    if o.settings.is_empty() {
        o.settings = vec![
            Setting {
                zk_session_ms: 3_000,
                session_ms: 3_000,
                takeover_ms: 3_000,
            },
            Setting {
                zk_session_ms: 2_000,
                session_ms: 2_000,
                takeover_ms: 2_000,
            },
        ];
    }
    assert!(o.partitions >= 3 && o.consumers >= 1 && o.slots >= 1);
    o
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

/// One broker process, killed on drop.
struct Broker {
    id: i32,
    child: Child,
    addr: String,
    admin: String,
    log: PathBuf,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn drover_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("exe");
    let drover = exe
        .ancestors()
        .nth(2)
        .expect("target/release")
        .join("drover");
    assert!(
        drover.is_file(),
        "{} not found: run `cargo build --release -p drover-host` first",
        drover.display()
    );
    drover
}

fn start_broker(
    dir: &PluginDir,
    zk: &ZkServer,
    chroot: &str,
    id: i32,
    o: &Options,
    s: &Setting,
) -> Broker {
    let port = free_port();
    let admin_port = free_port();
    let config = dir.scratch(&format!("broker-{id}.toml"));
    let zk_connect = zk.connect();
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\n\
             [server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin_port}\"\n\
             broker_id = {id}\nmax_connections = 4096\n\
             [log]\nflush_messages = 1000000000\n\
             [zookeeper]\nenabled = true\nconnect = {zk_connect:?}\nchroot = {chroot:?}\n\
             session_timeout_ms = {zk_session}\nslots = {slots}\n\
             slot_claim_delay_ms = {claim}\n\
             [plugins]\ndir = {plugins:?}\ncache_dir = {cache:?}\n\
             required = [\"drover-coordinator\", \"range\", \"sticky\", \"zookeeper\"]\n\
             [coordinator]\ndefault_assignor = \"sticky\"\noffset_store = \"zookeeper\"\n\
             [plugins.config.zookeeper]\nconnect = {zk_connect:?}\nchroot = {chroot:?}\n\
             [plugins.config.drover-coordinator]\nmin_session_timeout_ms = {min_session}\n\
             max_session_timeout_ms = {session}\nslot_takeover_wait_ms = {takeover}\n\
             rebalance_delay_ms = {delay}\n",
            data = dir.scratch(&format!("data-{id}")),
            zk_session = s.zk_session_ms,
            slots = o.slots,
            claim = o.claim_delay_ms,
            plugins = dir.path(),
            cache = dir.scratch(&format!("cache-{id}")),
            min_session = s.session_ms.min(1_000),
            session = s.session_ms,
            takeover = s.takeover_ms,
            delay = o.delay_ms,
        ),
    )
    .expect("config");
    let log = dir.scratch(&format!("broker-{id}.log"));
    let child = Command::new(drover_binary())
        .args(["serve", "--config"])
        .arg(&config)
        .env(
            "RUST_LOG",
            std::env::var("DROVER_BENCH_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stderr(std::fs::File::create(&log).expect("log file"))
        .stdout(Stdio::null())
        .spawn()
        .expect("start drover");
    Broker {
        id,
        child,
        addr: format!("127.0.0.1:{port}"),
        admin: format!("127.0.0.1:{admin_port}"),
        log,
    }
}

/// `GET path` on the admin listener `addr`; the body as JSON.
fn http_json(addr: &str, path: &str) -> Option<Value> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    serde_json::from_str(body).ok()
}

/// A broker's `/v1/cluster`, reduced to what the bench needs.
#[derive(Debug, Default, Clone)]
struct View {
    brokers: Vec<i32>,
    slots: BTreeMap<u32, i32>,
    owned: Vec<u32>,
    leaders: Option<Vec<i32>>,
}

fn cluster_view(broker: &Broker) -> Option<View> {
    let v = http_json(&broker.admin, "/v1/cluster")?;
    let view = &v["view"];
    let brokers = view["brokers"]
        .as_object()?
        .keys()
        .filter_map(|k| k.parse().ok())
        .collect();
    let slots = view["slots"]
        .as_object()?
        .iter()
        .filter_map(|(k, o)| Some((k.parse().ok()?, o.as_i64()? as i32)))
        .collect();
    let owned = v["owned_slots"]
        .as_array()?
        .iter()
        .filter_map(|s| s.as_u64().map(|s| s as u32))
        .collect();
    let leaders = view["topics"][TOPIC]["leaders"]
        .as_array()
        .map(|l| l.iter().map(|x| x.as_i64().unwrap_or(-1) as i32).collect());
    Some(View {
        brokers,
        slots,
        owned,
        leaders,
    })
}

/// The count of ephemeral nodes of the ZooKeeper server on `port` (`mntr`).
fn zk_ephemerals(port: u16) -> Option<u64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"mntr").ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    out.lines()
        .find_map(|l| l.strip_prefix("zk_ephemerals_count"))
        .and_then(|n| n.trim().parse().ok())
}

fn wait_until<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every broker sees all three, and every slot is owned by its preferred owner (slot
/// mod live brokers, in id order): the slots have spread and stay put.
fn settled(brokers: &[Broker], slots: u32) -> Option<()> {
    for b in brokers {
        let v = cluster_view(b)?;
        if v.brokers.len() != brokers.len() {
            return None;
        }
        for slot in 0..slots {
            let preferred = v.brokers[slot as usize % v.brokers.len()];
            if v.slots.get(&slot) != Some(&preferred) {
                return None;
            }
        }
        let mine: Vec<u32> = v
            .slots
            .iter()
            .filter(|(_, o)| **o == b.id)
            .map(|(s, _)| *s)
            .collect();
        if v.owned != mine {
            return None;
        }
    }
    Some(())
}

/// One record delivered to the application.
#[derive(Debug, Clone, Copy)]
struct Delivery {
    at: Instant,
    consumer: usize,
    partition: i32,
    offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Registered,
    Assigned,
    Lost,
}

/// What the consumers did, with the time this process saw it.
#[derive(Default)]
struct Recorder {
    deliveries: Mutex<Vec<Delivery>>,
    events: Mutex<Vec<(Instant, usize, Kind)>>,
}

fn drain(
    mut stream: MessageStream,
    consumer: usize,
    rec: Arc<Recorder>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(message) = stream.next().await {
            let Ok(m) = message else { continue };
            let d = Delivery {
                at: Instant::now(),
                consumer,
                partition: m.partition,
                offset: m.offset,
            };
            rec.deliveries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(d);
        }
    })
}

fn watch_events(
    consumer: &Consumer,
    index: usize,
    rec: Arc<Recorder>,
) -> tokio::task::JoinHandle<()> {
    let mut events = consumer.events();
    tokio::spawn(async move {
        loop {
            let kind = match events.recv().await {
                Ok(ConsumerEvent::Registered { .. }) => Kind::Registered,
                Ok(ConsumerEvent::Assigned { .. }) => Kind::Assigned,
                Ok(ConsumerEvent::Lost { .. }) => Kind::Lost,
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            };
            rec.events.lock().unwrap_or_else(|e| e.into_inner()).push((
                Instant::now(),
                index,
                kind,
            ));
        }
    })
}

/// Writes one record to every partition every `interval` until `stop`, skipping the
/// partitions marked down.
async fn produce(
    clients: Vec<Arc<PartitionClient>>,
    interval: Duration,
    down: Arc<Vec<AtomicBool>>,
    stop: Arc<AtomicBool>,
    errors: Arc<AtomicU64>,
) {
    let mut tasks = tokio::task::JoinSet::new();
    for (p, pc) in clients.into_iter().enumerate() {
        let (down, stop, errors) = (Arc::clone(&down), Arc::clone(&stop), Arc::clone(&errors));
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                if down[p].load(Ordering::Relaxed) {
                    continue;
                }
                n += 1;
                let record = Record {
                    key: None,
                    value: Some(format!("p{p}-{n}").into_bytes()),
                    headers: BTreeMap::new(),
                    timestamp: chrono::Utc::now(),
                };
                let sent = tokio::time::timeout(
                    Duration::from_secs(2),
                    pc.produce(vec![record], Compression::NoCompression),
                )
                .await;
                if !matches!(sent, Ok(Ok(_))) && !down[p].load(Ordering::Relaxed) {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// The first times the survivors' cluster views and ZooKeeper showed each step.
#[derive(Debug, Default, Clone, Copy)]
struct Watched {
    expired_seen: Option<Instant>,
    claimed: Option<Instant>,
    claimed_by: Option<i32>,
    gained: Option<Instant>,
}

/// Polls ZooKeeper (`mntr`, every 10 ms) and the survivors' `/v1/cluster` (every
/// 20 ms) from threads, until `stop`.
fn watch_cluster(
    zk: &ZkServer,
    survivors: Vec<(i32, String)>,
    victim: i32,
    slot: u32,
    baseline: u64,
    stop: Arc<AtomicBool>,
) -> (
    std::thread::JoinHandle<Option<Instant>>,
    std::thread::JoinHandle<Watched>,
) {
    let zk_port = zk.port();
    let stop_zk = Arc::clone(&stop);
    let zk_thread = std::thread::spawn(move || {
        while !stop_zk.load(Ordering::Relaxed) {
            if zk_ephemerals(zk_port).is_some_and(|c| c < baseline) {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    });
    let views = std::thread::spawn(move || {
        let mut w = Watched::default();
        while !stop.load(Ordering::Relaxed) && w.gained.is_none() {
            for (id, admin) in &survivors {
                let Some(v) = http_json(admin, "/v1/cluster") else {
                    continue;
                };
                let now = Instant::now();
                let brokers = v["view"]["brokers"].as_object();
                if w.expired_seen.is_none()
                    && brokers.is_some_and(|b| !b.contains_key(&victim.to_string()))
                {
                    w.expired_seen = Some(now);
                }
                let owner = v["view"]["slots"][slot.to_string()]
                    .as_i64()
                    .map(|o| o as i32);
                if w.claimed.is_none() && owner.is_some_and(|o| o != victim) {
                    w.claimed = Some(now);
                    w.claimed_by = owner;
                }
                let owned = v["owned_slots"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|s| s.as_u64() == Some(slot as u64)));
                if owned && w.gained.is_none() {
                    w.gained = Some(now);
                    w.claimed_by.get_or_insert(*id);
                    w.claimed.get_or_insert(now);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        w
    });
    (zk_thread, views)
}

/// One run's figures, in ms after the kill.
#[derive(Debug, Default, Clone)]
struct Figures {
    expired: f64,
    expired_seen: f64,
    claimed: f64,
    gained: f64,
    /// The host's bound of how long the old owner had not served the slot (the slot
    /// guard, docs/protocol.md §6.8): the takeover wait after the gain is that much
    /// shorter.
    stopped_ms: f64,
    lost_all: f64,
    registered_all: f64,
    assigned_first: f64,
    assigned_all: f64,
    consuming_p50: f64,
    consuming_all: f64,
    stragglers: usize,
    /// Cores used by this process before the kill and after the group consumes again.
    client_cpu: (f64, f64),
    /// Cores used by a surviving broker (the mean of the two), before and after.
    broker_cpu: (f64, f64),
    lost_events: usize,
    assigned_events: usize,
    redelivered: i64,
    gaps: usize,
    produce_errors: u64,
}

/// The first time after `kill` (a wall-clock time), in ms, that one of the survivors'
/// logs has a line containing `needle` (`RUST_LOG=info`, the default here; `None`
/// without it).
fn logged_after(
    logs: &[PathBuf],
    needle: &str,
    kill: chrono::DateTime<chrono::Utc>,
) -> Option<f64> {
    let mut first: Option<f64> = None;
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        // Lines keep their newline, so a needle may end with one.
        for line in text.split_inclusive('\n').filter(|l| l.contains(needle)) {
            let Some(at) = line
                .split_whitespace()
                .next()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            else {
                continue;
            };
            let after = (at.with_timezone(&chrono::Utc) - kill).num_microseconds()? as f64 / 1e3;
            if after >= 0.0 {
                first = Some(first.map_or(after, |f| f.min(after)));
            }
        }
    }
    first
}

/// The number after `field` on the first log line after `kill` containing `needle`
/// (lines start with an RFC 3339 time).
fn logged_field(
    logs: &[PathBuf],
    needle: &str,
    field: &str,
    kill: chrono::DateTime<chrono::Utc>,
) -> Option<f64> {
    let mut first: Option<(chrono::DateTime<chrono::Utc>, f64)> = None;
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains(needle)) {
            let Some(at) = line
                .split_whitespace()
                .next()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&chrono::Utc))
                .filter(|t| *t >= kill)
            else {
                continue;
            };
            let value = line.split(field).nth(1).and_then(|rest| {
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse::<f64>().ok())
            });
            if let Some(v) = value {
                if first.is_none_or(|(t, _)| at < t) {
                    first = Some((at, v));
                }
            }
        }
    }
    first.map(|(_, v)| v)
}

fn ms_after(t: Option<Instant>, kill: Instant) -> f64 {
    t.map_or(f64::NAN, |t| {
        t.saturating_duration_since(kill).as_secs_f64() * 1e3
    })
}

async fn run_once(zk: &ZkServer, o: &Options, s: &Setting, run: usize) -> Figures {
    let dir = PluginDir::new();
    for lib in [
        "drover_coordinator",
        "drover_assignor_sticky",
        "drover_assignor_range",
        "drover_offsets_zookeeper",
    ] {
        dir.add_built(lib);
    }
    let chroot = unique_chroot("drover-failover");
    let mut brokers: Vec<Broker> = (1..=3)
        .map(|id| start_broker(&dir, zk, &chroot, id, o, s))
        .collect();
    let logs: Vec<PathBuf> = brokers.iter().map(|b| b.log.clone()).collect();
    if o.keep_logs {
        println!("  broker logs: {logs:?}");
    }
    wait_until(
        "3 brokers with spread slots",
        Duration::from_secs(60),
        || settled(&brokers, o.slots),
    );

    // The topic, placed round robin.
    let kafka = ClientBuilder::new(brokers.iter().map(|b| b.addr.clone()).collect())
        .build()
        .await
        .expect("kafka client");
    kafka
        .controller_client()
        .expect("controller")
        .create_topic(TOPIC, o.partitions, 1, 30_000)
        .await
        .expect("create topic");
    let leaders = wait_until("the topic's placement", Duration::from_secs(30), || {
        let views: Option<Vec<View>> = brokers.iter().map(cluster_view).collect();
        let views = views?;
        let l = views[0].leaders.clone()?;
        views
            .iter()
            .all(|v| v.leaders.as_ref() == Some(&l))
            .then_some(l)
    });

    // A group whose coordinator is broker (run mod 3) + 1.
    let want = (run % 3) as i32 + 1;
    let view = cluster_view(&brokers[0]).expect("view");
    let group = (0..)
        .map(|i| format!("failover-{run}-{i}"))
        .find(|g| {
            view.slots
                .get(&drover_protocol::coordinator_slot(g, o.slots))
                == Some(&want)
        })
        .expect("a group");
    let slot = drover_protocol::coordinator_slot(&group, o.slots);
    let victim = want;
    let dead: Vec<bool> = leaders.iter().map(|l| *l == victim).collect();
    let live_partitions = dead.iter().filter(|d| !**d).count();

    // The producer.
    let kafka = Arc::new(kafka);
    let mut clients = Vec::new();
    for p in 0..o.partitions {
        clients.push(Arc::new(
            kafka
                .partition_client(TOPIC, p, UnknownTopicHandling::Retry)
                .await
                .expect("partition client"),
        ));
    }
    let down: Arc<Vec<AtomicBool>> =
        Arc::new((0..o.partitions).map(|_| AtomicBool::new(false)).collect());
    let stop_producer = Arc::new(AtomicBool::new(false));
    let produce_errors = Arc::new(AtomicU64::new(0));
    let producer = tokio::spawn(produce(
        clients,
        Duration::from_millis(o.interval_ms),
        Arc::clone(&down),
        Arc::clone(&stop_producer),
        Arc::clone(&produce_errors),
    ));

    // The group.
    let rec = Arc::new(Recorder::default());
    let addrs: Vec<String> = brokers.iter().map(|b| b.addr.clone()).collect();
    let mut joins = Vec::new();
    for i in 0..o.consumers {
        let mut boot = addrs.clone();
        boot.rotate_left(i % addrs.len());
        let mut config = ConsumerConfig::new(boot, &group);
        config.consumer_id = format!("{group}-c{i:03}");
        config.session_timeout_ms = s.session_ms as i32;
        config.auto_commit_interval_ms = 1_000;
        joins.push(tokio::spawn(async move {
            Consumer::create_message_streams(config, [(TOPIC, 1)])
                .await
                .expect("create_message_streams")
        }));
    }
    let mut consumers = Vec::new();
    let mut tasks = Vec::new();
    for (i, join) in joins.into_iter().enumerate() {
        let (consumer, mut by_topic) = join.await.expect("join");
        for stream in by_topic.remove(TOPIC).expect("streams") {
            tasks.push(drain(stream, i, Arc::clone(&rec)));
        }
        tasks.push(watch_events(&consumer, i, Arc::clone(&rec)));
        consumers.push(consumer);
    }

    // Steady: one generation owning every partition, and every partition flowing.
    let started = Instant::now();
    loop {
        let generations: Vec<i32> = consumers.iter().map(|c| c.assignment().0).collect();
        let owned: usize = consumers.iter().map(|c| c.assignment().1.len()).sum();
        let recent = {
            let d = rec.deliveries.lock().unwrap_or_else(|e| e.into_inner());
            let since = Instant::now() - Duration::from_secs(1);
            let mut seen = vec![false; o.partitions as usize];
            for x in d.iter().rev().take_while(|x| x.at >= since) {
                seen[x.partition as usize] = true;
            }
            seen.iter().all(|s| *s)
        };
        if generations.iter().all(|g| *g > 0 && *g == generations[0])
            && owned == o.partitions as usize
            && recent
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the group did not settle: generations {generations:?}, {owned} partitions owned \
             (logs {logs:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let joined = started.elapsed();
    let pids: Vec<(i32, u32)> = brokers.iter().map(|b| (b.id, b.child.id())).collect();
    let cpu_before = Usage::now(&pids);
    tokio::time::sleep(Duration::from_secs(o.hold_s)).await;
    let cpu_before = cpu_before.rates(&Usage::now(&pids), victim);

    // Kill the coordinator.
    let baseline = zk_ephemerals(zk.port()).expect("mntr zk_ephemerals_count");
    let survivors: Vec<(i32, String)> = brokers
        .iter()
        .filter(|b| b.id != victim)
        .map(|b| (b.id, b.admin.clone()))
        .collect();
    let stop_watch = Arc::new(AtomicBool::new(false));
    let victim_index = brokers.iter().position(|b| b.id == victim).expect("victim");
    let kill = Instant::now();
    let kill_wall = chrono::Utc::now();
    let mut killed = brokers.remove(victim_index);
    let survivor_logs: Vec<PathBuf> = brokers.iter().map(|b| b.log.clone()).collect();
    killed.child.kill().expect("kill -9");
    for (p, d) in dead.iter().enumerate() {
        down[p].store(*d, Ordering::Relaxed);
    }
    let (zk_thread, view_thread) = watch_cluster(
        zk,
        survivors,
        victim,
        slot,
        baseline,
        Arc::clone(&stop_watch),
    );
    let _ = killed.child.wait();

    // Until every live partition delivered again after its consumer lost its channel.
    let limit = Duration::from_secs(90);
    let first_after = loop {
        let lost: BTreeMap<usize, Instant> = {
            let events = rec.events.lock().unwrap_or_else(|e| e.into_inner());
            let mut lost = BTreeMap::new();
            for (at, i, kind) in events.iter() {
                if *kind == Kind::Lost && *at >= kill {
                    lost.entry(*i).or_insert(*at);
                }
            }
            lost
        };
        let mut first: BTreeMap<i32, Delivery> = BTreeMap::new();
        {
            let d = rec.deliveries.lock().unwrap_or_else(|e| e.into_inner());
            for x in d.iter().filter(|x| x.at >= kill) {
                if lost.get(&x.consumer).is_some_and(|l| x.at > *l) {
                    first.entry(x.partition).or_insert(*x);
                }
            }
        }
        if (0..o.partitions).all(|p| dead[p as usize] || first.contains_key(&p)) {
            break first;
        }
        assert!(
            kill.elapsed() < limit,
            "the group did not consume again within {limit:?}: {} of {live_partitions} live \
             partitions flowing (logs {logs:?})",
            first.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Let the watchers finish (the slot is gained long before the group consumes).
    stop_watch.store(true, Ordering::Relaxed);
    let expired = zk_thread.join().expect("zk watcher");
    let watched = view_thread.join().expect("view watcher");
    // CPU while consuming on the live partitions, with the dead ones still assigned.
    let cpu_after = Usage::now(&pids);
    tokio::time::sleep(Duration::from_secs(o.hold_s)).await;
    let cpu_after = cpu_after.rates(&Usage::now(&pids), victim);
    stop_producer.store(true, Ordering::Relaxed);

    // Figures.
    let events = rec.events.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let deliveries = rec
        .deliveries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let first_of = |kind: Kind| -> BTreeMap<usize, Instant> {
        let mut m = BTreeMap::new();
        for (at, i, k) in &events {
            if *k == kind && *at >= kill {
                m.entry(*i).or_insert(*at);
            }
        }
        m
    };
    let count = |kind: Kind| {
        events
            .iter()
            .filter(|(at, _, k)| *k == kind && *at >= kill)
            .count()
    };
    let lost = first_of(Kind::Lost);
    let registered = first_of(Kind::Registered);
    let assigned = first_of(Kind::Assigned);
    let all = |m: &BTreeMap<usize, Instant>| {
        (m.len() == o.consumers).then(|| *m.values().max().expect("consumers"))
    };
    let mut consuming: Vec<Instant> = first_after.values().map(|d| d.at).collect();
    consuming.sort();
    let stragglers = deliveries
        .iter()
        .filter(|d| d.at >= kill && lost.get(&d.consumer).is_none_or(|l| d.at <= *l))
        .count();
    let mut before: BTreeMap<i32, i64> = BTreeMap::new();
    for d in deliveries.iter().filter(|d| d.at < kill) {
        let e = before.entry(d.partition).or_insert(-1);
        *e = (*e).max(d.offset);
    }
    let (mut redelivered, mut gaps) = (0, 0);
    for (p, d) in &first_after {
        let last = before.get(p).copied().unwrap_or(-1);
        if d.offset <= last {
            redelivered += last + 1 - d.offset;
        } else if d.offset > last + 1 {
            gaps += 1;
        }
    }
    let f = Figures {
        expired: ms_after(expired, kill),
        expired_seen: ms_after(watched.expired_seen, kill),
        // The broker logs `coordinator slot gained` once it created the slot's node
        // and is about to tell its coordinator, which logs the same with its takeover
        // deadline; the 20 ms polls of /v1/cluster are the fallback.
        claimed: logged_after(
            &survivor_logs,
            &format!("drover_host::cluster::sync: coordinator slot gained slot={slot} "),
            kill_wall,
        )
        .unwrap_or_else(|| ms_after(watched.claimed, kill)),
        gained: logged_after(
            &survivor_logs,
            &format!("plugin: coordinator slot gained slot={slot} "),
            kill_wall,
        )
        .unwrap_or_else(|| ms_after(watched.gained, kill)),
        stopped_ms: logged_field(
            &survivor_logs,
            &format!("drover_host::cluster::sync: coordinator slot gained slot={slot} "),
            "previous_owner_stopped_ms=",
            kill_wall,
        )
        .unwrap_or(0.0),
        lost_all: ms_after(all(&lost), kill),
        registered_all: ms_after(all(&registered), kill),
        assigned_first: ms_after(assigned.values().min().copied(), kill),
        assigned_all: ms_after(all(&assigned), kill),
        consuming_p50: ms_after(consuming.get(consuming.len() / 2).copied(), kill),
        consuming_all: ms_after(consuming.last().copied(), kill),
        stragglers,
        client_cpu: (cpu_before.0, cpu_after.0),
        broker_cpu: (cpu_before.1, cpu_after.1),
        lost_events: count(Kind::Lost),
        assigned_events: count(Kind::Assigned),
        redelivered,
        gaps,
        produce_errors: produce_errors.load(Ordering::Relaxed),
    };
    println!(
        "  run {run}: group {group} (slot {slot}) joined in {:.1} s; killed broker {victim} \
         (coordinator, leader of {} partitions); slot to broker {}",
        joined.as_secs_f64(),
        o.partitions as usize - live_partitions,
        watched.claimed_by.unwrap_or(-1)
    );
    println!(
        "    ms after the kill: ZK session expired {:.0} (seen by a broker {:.0}); slot \
         claimed {:.0}; gained {:.0}; channels lost {:.0}; registered {:.0}; assigned \
         {:.0}..{:.0}; consuming p50 {:.0}, all {live_partitions} live partitions {:.0}",
        f.expired,
        f.expired_seen,
        f.claimed,
        f.gained,
        f.lost_all,
        f.registered_all,
        f.assigned_first,
        f.assigned_all,
        f.consuming_p50,
        f.consuming_all
    );
    println!(
        "    {} deliveries between the kill and the consumer noticing; {} records \
         redelivered (at least once), {} gaps; {} produce errors on live partitions; \
         events after the kill: {} Lost, {} Assigned; CPU (cores) before / after: \
         consumers {:.2} / {:.2}, a surviving broker {:.2} / {:.2}",
        f.stragglers,
        f.redelivered,
        f.gaps,
        f.produce_errors,
        f.lost_events,
        f.assigned_events,
        f.client_cpu.0,
        f.client_cpu.1,
        f.broker_cpu.0,
        f.broker_cpu.1
    );

    for t in tasks {
        t.abort();
    }
    drop(consumers);
    let _ = producer.await;
    drop(brokers);
    if o.keep_logs {
        std::mem::forget(dir);
    }
    f
}

/// CPU seconds used so far by this process and by each broker, at a time.
struct Usage {
    at: Instant,
    own: f64,
    brokers: Vec<(i32, f64)>,
}

impl Usage {
    fn now(pids: &[(i32, u32)]) -> Usage {
        Usage {
            at: Instant::now(),
            own: own_cpu(),
            brokers: pids
                .iter()
                .map(|(id, pid)| (*id, process_cpu(*pid)))
                .collect(),
        }
    }

    /// Cores used between `self` and `later`: this process, and the mean of the
    /// brokers other than `victim`.
    fn rates(&self, later: &Usage, victim: i32) -> (f64, f64) {
        let secs = (later.at - self.at).as_secs_f64();
        let used: Vec<f64> = self
            .brokers
            .iter()
            .zip(&later.brokers)
            .filter(|((id, _), _)| *id != victim)
            .map(|((_, a), (_, b))| (b - a) / secs)
            .collect();
        (
            (later.own - self.own) / secs,
            used.iter().sum::<f64>() / used.len().max(1) as f64,
        )
    }
}

/// CPU seconds (user + system) used so far by this process.
fn own_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct passed to it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU seconds (user + system) used so far by process `pid` (0.0 once it is gone).
fn process_cpu(pid: u32) -> f64 {
    drover_tests::proc_stat::process_cpu(pid).unwrap_or(0.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn summary(v: &[f64]) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:>6.0} ({:.0}–{:.0})", median(v.to_vec()), min, max)
}

#[tokio::main]
async fn main() {
    let o = options();
    let zk = ZkServer::start();
    println!(
        "cluster fail-over: 3 brokers, ZooKeeper {} (tick {} ms), {} consumers (one \
         process), topic of {} partitions, {} slots, one record per partition every {} \
         ms, sticky, debounce {} ms, claim delay {} ms",
        zk.connect(),
        drover_tests::services::zookeeper::TICK_MS,
        o.consumers,
        o.partitions,
        o.slots,
        o.interval_ms,
        o.delay_ms,
        o.claim_delay_ms
    );
    let mut table = Vec::new();
    for s in &o.settings {
        println!(
            "config: ZooKeeper session {} ms, consumer session {} ms (coordinator max), \
             takeover wait {} ms",
            s.zk_session_ms, s.session_ms, s.takeover_ms
        );
        let mut runs = Vec::new();
        for run in 0..o.repeat {
            runs.push(run_once(&zk, &o, s, run).await);
        }
        table.push((*s, runs));
    }
    println!(
        "\nmedian (min–max) ms after the kill; target = consumer session + 1 s\n\
         {:<16} {:>18} {:>18} {:>18} {:>18} {:>18} {:>18} {:>18}  target",
        "zk/session/wait",
        "ZK expired",
        "slot claimed",
        "slot gained",
        "registered",
        "assigned (all)",
        "consuming p50",
        "consuming (all)"
    );
    for (s, runs) in &table {
        let col = |f: fn(&Figures) -> f64| summary(&runs.iter().map(f).collect::<Vec<_>>());
        let target = (s.session_ms + 1_000) as f64;
        let met = runs.iter().filter(|r| r.consuming_all <= target).count();
        println!(
            "{:<16} {:>18} {:>18} {:>18} {:>18} {:>18} {:>18} {:>18}  {target:.0}: met {met}/{}",
            format!("{}/{}/{}", s.zk_session_ms, s.session_ms, s.takeover_ms),
            col(|r| r.expired),
            col(|r| r.claimed),
            col(|r| r.gained),
            col(|r| r.registered_all),
            col(|r| r.assigned_all),
            col(|r| r.consuming_p50),
            col(|r| r.consuming_all),
            runs.len()
        );
    }
    println!("\nbreakdown, median (min–max) of each run's step, ms:");
    for (s, runs) in &table {
        let step = |f: &dyn Fn(&Figures) -> f64| summary(&runs.iter().map(f).collect::<Vec<_>>());
        let takeover = s.takeover_ms as f64;
        println!(
            "{}/{}/{}: ZK session expiry {}; slot claimed {}; coordinator told {}; \
             takeover wait after the gain {} (configured {takeover:.0} less the slot guard's \
             bound); rebalance to the first StartFetcher {}; until every live partition \
             flows {}; total {}",
            s.zk_session_ms,
            s.session_ms,
            s.takeover_ms,
            step(&|r| r.expired).trim(),
            step(&|r| r.claimed - r.expired).trim(),
            step(&|r| r.gained - r.claimed).trim(),
            step(&|r| (takeover - r.stopped_ms).max(0.0)).trim(),
            step(&|r| r.assigned_first - r.gained - (takeover - r.stopped_ms).max(0.0)).trim(),
            step(&|r| r.consuming_all - r.assigned_first).trim(),
            step(&|r| r.consuming_all).trim(),
        );
        let cpu = |f: &dyn Fn(&Figures) -> f64| median(runs.iter().map(f).collect());
        println!(
            "  CPU (cores), before the kill / after the group consumes again: consumers' \
             process {:.2} / {:.2}; each surviving broker {:.2} / {:.2}",
            cpu(&|r| r.client_cpu.0),
            cpu(&|r| r.client_cpu.1),
            cpu(&|r| r.broker_cpu.0),
            cpu(&|r| r.broker_cpu.1),
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.trim());
}
