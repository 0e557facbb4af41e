//! End-to-end consume benchmark of the consumer connector (`drover-client`, issue 5):
//! one connector, and a group of 3 in one process, each reading a whole topic from
//! offset 0 through the native group protocol, beside confluent-kafka's consumer
//! (librdkafka, from Python) on the same broker in the same run.
//!
//! The bench starts `target/release/drover` with the coordinator, sticky, range and
//! embedded plugins (sticky the default assignor), creates one topic of `--partitions`
//! partitions and produces `--messages` records of `--size` bytes with rskafka
//! (batched, `--in-flight` batches per partition; the produce phase is not measured,
//! so `[log] flush_messages` defaults to 10^9: the OS flushes). Then, each from
//! offset 0 and in a fresh group:
//!
//! - **1 connector**, with one stream, and with one stream per partition;
//! - **a group of 3 connectors** (three `Consumer`s, one process, same group), with
//!   one stream each, and with one stream per partition they own;
//! - **confluent-kafka** (`benches/ck_consume.py` on `target/test-venv/bin/python`,
//!   which `scripts/install-test-deps.sh` creates; skipped with a message if missing):
//!   `assign()` of every partition at offset 0, no group coordination (this bench
//!   measures fetch throughput; group rebalances are measured by `group_rebalance`).
//!
//! Connector time runs from `create_message_streams` until the last message is
//! delivered (registration and the coordinator's rebalance debounce included);
//! MB/s = payload bytes / time. The time to the first message and the rate after it
//! are printed too, and the CPU seconds of the client process and of the broker.
//!
//! ```text
//! cargo build --release -p drover-host
//! cargo bench -p drover-tests --bench connector_e2e -- [--messages N] [--size BYTES]
//!     [--partitions P] [--batch RECORDS] [--in-flight K] [--flush-messages N]
//!     [--repeat R] [--fetch-max-wait-ms MS] [--partition-max-bytes B]
//!     [--fetch-max-bytes B] [--max-buffered-bytes B] [--delay-ms DEBOUNCE]
//!     [--only single1,single-all,group1,group-all,ck,ck-queue,ck-custom]
//! ```
//!
//! Environment: `DROVER_BENCH_PYTHON` (another Python with confluent-kafka),
//! `DROVER_BENCH_CK_SET="key=value ..."` (an extra confluent-kafka row with these
//! librdkafka settings), `DROVER_BENCH_LOG` (the broker's `RUST_LOG`, default `warn`).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

use drover_client::{Consumer, ConsumerConfig, MessageStream};
use drover_tests::PluginDir;
use rskafka::{
    client::{
        partition::{Compression, OffsetAt, UnknownTopicHandling},
        ClientBuilder,
    },
    record::Record,
};
use tokio::sync::Notify;

const TOPIC: &str = "connector-bench";
const GROUP_SIZE: usize = 3;

struct Options {
    messages: usize,
    size: usize,
    partitions: i32,
    batch: usize,
    in_flight: usize,
    flush_messages: u64,
    repeat: usize,
    fetch_max_wait_ms: i32,
    partition_max_bytes: i32,
    fetch_max_bytes: i32,
    max_buffered_bytes: usize,
    delay_ms: u64,
    only: Option<Vec<String>>,
}

fn options() -> Options {
    let defaults = ConsumerConfig::new(["-"], "-");
    let mut o = Options {
        messages: 1_000_000,
        size: 1024,
        partitions: 6,
        batch: 200,
        in_flight: 4,
        flush_messages: 1_000_000_000,
        repeat: 1,
        fetch_max_wait_ms: defaults.fetch_max_wait_ms,
        partition_max_bytes: defaults.partition_max_bytes,
        fetch_max_bytes: defaults.fetch_max_bytes,
        max_buffered_bytes: defaults.max_buffered_bytes,
        delay_ms: 300,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--messages" => o.messages = value().parse().expect("--messages N"),
            "--size" => o.size = value().parse().expect("--size BYTES"),
            "--partitions" => o.partitions = value().parse().expect("--partitions P"),
            "--batch" => o.batch = value().parse().expect("--batch RECORDS"),
            "--in-flight" => o.in_flight = value().parse().expect("--in-flight K"),
            "--flush-messages" => o.flush_messages = value().parse().expect("--flush-messages N"),
            "--repeat" => o.repeat = value().parse().expect("--repeat R"),
            "--fetch-max-wait-ms" => {
                o.fetch_max_wait_ms = value().parse().expect("--fetch-max-wait-ms MS")
            }
            "--partition-max-bytes" => {
                o.partition_max_bytes = value().parse().expect("--partition-max-bytes B")
            }
            "--fetch-max-bytes" => {
                o.fetch_max_bytes = value().parse().expect("--fetch-max-bytes B")
            }
            "--max-buffered-bytes" => {
                o.max_buffered_bytes = value().parse().expect("--max-buffered-bytes B")
            }
            "--delay-ms" => o.delay_ms = value().parse().expect("--delay-ms MS"),
            "--only" => o.only = Some(value().split(',').map(str::to_owned).collect()),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        o.messages > 0 && o.size > 0,
        "--messages and --size must be positive"
    );
    assert!(
        o.partitions >= GROUP_SIZE as i32,
        "--partitions must be at least {GROUP_SIZE} (one per group member)"
    );
    o
}

/// The broker process, killed on drop (its data lives in the `PluginDir`, removed
/// after it).
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

fn start_drover(dir: &PluginDir, o: &Options) -> (Broker, String) {
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
    for lib in [
        "drover_coordinator",
        "drover_assignor_sticky",
        "drover_assignor_range",
        "drover_offsets_embedded",
    ] {
        dir.add_built(lib);
    }
    let port = free_port();
    let config = dir.scratch("drover.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\n\
             [server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n\
             [log]\nflush_messages = {flush}\n\
             [plugins]\ndir = {plugins:?}\ncache_dir = {cache:?}\n\
             [coordinator]\ndefault_assignor = \"sticky\"\n\
             [plugins.config.drover-coordinator]\nrebalance_delay_ms = {delay}\n\
             rebalance_max_delay_ms = {max_delay}\n",
            data = dir.scratch("data"),
            admin = free_port(),
            flush = o.flush_messages,
            plugins = dir.path(),
            cache = dir.cache_dir(),
            delay = o.delay_ms,
            max_delay = (o.delay_ms * 10).max(3_000),
        ),
    )
    .expect("config");
    let child = Command::new(drover)
        .args(["serve", "--config"])
        .arg(&config)
        .env(
            "RUST_LOG",
            std::env::var("DROVER_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stderr(Stdio::inherit())
        .stdout(Stdio::null())
        .spawn()
        .expect("start drover");
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "drover did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (Broker(child), addr)
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

/// CPU seconds (user + system) used so far by process `pid` (f64::NAN once it is gone).
fn process_cpu(pid: u32) -> f64 {
    drover_tests::proc_stat::process_cpu(pid).unwrap_or(f64::NAN)
}

/// Produces `ends[p]` records of `size` bytes to every partition.
async fn produce(addr: &str, o: &Options, ends: &[i64]) {
    let client = Arc::new(
        ClientBuilder::new(vec![addr.to_owned()])
            .max_message_size(64 * 1024 * 1024)
            .build()
            .await
            .expect("kafka client"),
    );
    client
        .controller_client()
        .expect("controller")
        .create_topic(TOPIC, o.partitions, 1, 30_000)
        .await
        .expect("create topic");
    let payload = vec![b'x'; o.size];
    let mut tasks = Vec::new();
    for (p, &count) in ends.iter().enumerate() {
        let client = Arc::clone(&client);
        let payload = payload.clone();
        let (batch, in_flight) = (o.batch, o.in_flight);
        tasks.push(tokio::spawn(async move {
            let pc = Arc::new(
                client
                    .partition_client(TOPIC, p as i32, UnknownTopicHandling::Retry)
                    .await
                    .expect("partition client"),
            );
            let count = count as usize;
            let mut pending = tokio::task::JoinSet::new();
            for b in 0..count.div_ceil(batch) {
                let n = batch.min(count - b * batch);
                let records: Vec<Record> = (0..n)
                    .map(|_| Record {
                        key: None,
                        value: Some(payload.clone()),
                        headers: BTreeMap::new(),
                        timestamp: chrono::Utc::now(),
                    })
                    .collect();
                let pc = Arc::clone(&pc);
                pending.spawn(async move {
                    pc.produce(records, Compression::NoCompression)
                        .await
                        .expect("produce");
                });
                while pending.len() >= in_flight {
                    pending.join_next().await.expect("task").expect("join");
                }
            }
            while let Some(r) = pending.join_next().await {
                r.expect("join");
            }
            let end = pc.get_offset(OffsetAt::Latest).await.expect("end offset");
            assert_eq!(end, count as i64, "partition {p} end offset");
        }));
    }
    for t in tasks {
        t.await.expect("producer");
    }
}

/// Progress of one run: the highest delivered offset of every partition, and when the
/// last partition reached its end.
struct Tracker {
    ends: Vec<i64>,
    next: Vec<AtomicI64>,
    remaining: AtomicUsize,
    deliveries: AtomicU64,
    payload: AtomicU64,
    first: OnceLock<Instant>,
    done_at: OnceLock<Instant>,
    done: Notify,
}

impl Tracker {
    fn new(ends: &[i64]) -> Arc<Tracker> {
        Arc::new(Tracker {
            ends: ends.to_vec(),
            next: ends.iter().map(|_| AtomicI64::new(0)).collect(),
            remaining: AtomicUsize::new(ends.iter().filter(|e| **e > 0).count()),
            deliveries: AtomicU64::new(0),
            payload: AtomicU64::new(0),
            first: OnceLock::new(),
            done_at: OnceLock::new(),
            done: Notify::new(),
        })
    }

    fn delivered(&self, partition: i32, offset: i64, bytes: usize) {
        self.first.get_or_init(Instant::now);
        self.deliveries.fetch_add(1, Ordering::Relaxed);
        let p = partition as usize;
        let prev = self.next[p].fetch_max(offset + 1, Ordering::Relaxed);
        if offset + 1 > prev {
            self.payload.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        let end = self.ends[p];
        if prev < end && offset + 1 >= end && self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.done_at.set(Instant::now());
            self.done.notify_one();
        }
    }
}

/// Reads `stream` into `tracker` until the stream ends (the task is aborted after the
/// run).
fn drain(mut stream: MessageStream, tracker: Arc<Tracker>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(message) = stream.next().await {
            let m = message.expect("message");
            tracker.delivered(
                m.partition,
                m.offset,
                m.value.as_ref().map_or(0, |v| v.len()),
            );
        }
    })
}

/// One measured run's figures.
struct Figures {
    name: String,
    seconds: f64,
    payload: u64,
    deliveries: u64,
    messages: u64,
    first: Option<f64>,
    client_cpu: f64,
    broker_cpu: f64,
    note: String,
}

impl Figures {
    fn mb_per_s(&self) -> f64 {
        self.payload as f64 / self.seconds / 1e6
    }
}

fn client_config(addr: &str, o: &Options, group: &str, id: &str) -> ConsumerConfig {
    let mut config = ConsumerConfig::new([addr], group);
    config.consumer_id = id.to_owned();
    config.fetch_max_wait_ms = o.fetch_max_wait_ms;
    config.partition_max_bytes = o.partition_max_bytes;
    config.fetch_max_bytes = o.fetch_max_bytes;
    config.max_buffered_bytes = o.max_buffered_bytes;
    config
}

/// What every run needs.
struct Bench {
    addr: String,
    o: Options,
    /// The end offset of every partition (its record count).
    ends: Vec<i64>,
    broker_pid: u32,
}

/// `members` connectors in one fresh group, `streams` streams each, until every
/// partition was delivered to its end.
async fn run_connectors(
    bench: &Bench,
    name: &str,
    members: usize,
    streams: usize,
    round: usize,
) -> Figures {
    let Bench {
        addr,
        o,
        ends,
        broker_pid,
    } = bench;
    let (ends, broker_pid) = (ends.as_slice(), *broker_pid);
    let group = format!("bench-{name}-{round}");
    let tracker = Tracker::new(ends);
    let (cpu0, broker0) = (own_cpu(), process_cpu(broker_pid));
    let start = Instant::now();
    let mut joins = Vec::new();
    for i in 0..members {
        let config = client_config(addr, o, &group, &format!("{group}-{i}"));
        joins.push(tokio::spawn(async move {
            Consumer::create_message_streams(config, [(TOPIC, streams)])
                .await
                .expect("create_message_streams")
        }));
    }
    let mut consumers = Vec::new();
    let mut readers = Vec::new();
    for join in joins {
        let (consumer, mut by_topic) = join.await.expect("join");
        for stream in by_topic.remove(TOPIC).expect("streams") {
            readers.push(drain(stream, Arc::clone(&tracker)));
        }
        consumers.push(consumer);
    }
    tokio::time::timeout(Duration::from_secs(600), tracker.done.notified())
        .await
        .unwrap_or_else(|_| {
            let next: Vec<i64> = tracker
                .next
                .iter()
                .map(|n| n.load(Ordering::Relaxed))
                .collect();
            panic!("{name}: not done after 600 s; positions {next:?}, ends {ends:?}")
        });
    let end = *tracker.done_at.get().expect("done");
    let (cpu1, broker1) = (own_cpu(), process_cpu(broker_pid));
    let generations: Vec<i32> = consumers.iter().map(|c| c.assignment().0).collect();
    let owned: Vec<usize> = consumers.iter().map(|c| c.assignment().1.len()).collect();
    // Outside the timing. A member leaving starts a rebalance, so the final commit of
    // the members still shutting down may be refused (ILLEGAL_GENERATION); that is
    // reported, not fatal: the run is already measured.
    let mut shutdown_errors = Vec::new();
    for (i, consumer) in consumers.into_iter().enumerate() {
        if let Err(e) = consumer.shutdown().await {
            shutdown_errors.push(format!("member {i}: {e}"));
        }
    }
    for reader in readers {
        reader.abort();
    }
    let first = tracker.first.get().map(|f| (*f - start).as_secs_f64());
    Figures {
        name: match (members, streams) {
            (1, 1) => "1 connector, 1 stream".to_owned(),
            (1, s) => format!("1 connector, {s} streams"),
            (m, 1) => format!("group of {m}, 1 stream each"),
            (m, s) => format!("group of {m}, {s} streams each"),
        },
        seconds: (end - start).as_secs_f64(),
        payload: tracker.payload.load(Ordering::Relaxed),
        deliveries: tracker.deliveries.load(Ordering::Relaxed),
        messages: ends.iter().sum::<i64>() as u64,
        first,
        client_cpu: cpu1 - cpu0,
        broker_cpu: broker1 - broker0,
        note: format!(
            "generation {generations:?}, partitions owned {owned:?}{}",
            if shutdown_errors.is_empty() {
                String::new()
            } else {
                format!("; shutdown errors: {}", shutdown_errors.join(", "))
            }
        ),
    }
}

fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("DROVER_BENCH_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().expect("exe");
    // <target>/release/deps/<bench>
    let venv = exe.ancestors().nth(3)?.join("test-venv/bin/python");
    venv.is_file().then_some(venv)
}

/// confluent-kafka's consumer, in a child process, with librdkafka settings `extra`
/// over Kafka's defaults; `None` when the venv is missing.
fn run_confluent(bench: &Bench, label: &str, extra: &[String]) -> Option<Figures> {
    let Bench {
        addr,
        o,
        ends,
        broker_pid,
    } = bench;
    let broker_pid = *broker_pid;
    let python = python()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/ck_consume.py");
    let broker0 = process_cpu(broker_pid);
    let mut command = Command::new(&python);
    command
        .arg(script)
        .args(["--bootstrap", addr.as_str(), "--topic", TOPIC])
        .args(["--partitions", &o.partitions.to_string()])
        .args(["--messages", &ends.iter().sum::<i64>().to_string()]);
    for kv in extra {
        command.args(["--set", kv]);
    }
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .expect("run ck_consume.py");
    let broker1 = process_cpu(broker_pid);
    assert!(out.status.success(), "ck_consume.py failed: {}", out.status);
    let line = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| -> String {
        // The script prints one flat JSON object (plus a nested "settings" object,
        // returned whole).
        let at = line
            .find(&format!("\"{key}\": "))
            .unwrap_or_else(|| panic!("{key} missing from {line}"));
        let rest = &line[at + key.len() + 4..];
        if rest.starts_with('{') {
            rest[..=rest.find('}').expect("}")].to_owned()
        } else if let Some(s) = rest.strip_prefix('"') {
            s[..s.find('"').expect("\"")].to_owned()
        } else {
            rest[..rest.find([',', '}']).expect(",")].trim().to_owned()
        }
    };
    let num = |key: &str| field(key).parse::<f64>().expect(key);
    let client = field("client");
    let (name, library) = client.split_once(" (").unwrap_or((&client, ")"));
    Some(Figures {
        name: format!("{name}, {label}"),
        seconds: num("seconds"),
        payload: num("payload_bytes") as u64,
        deliveries: num("messages") as u64,
        messages: ends.iter().sum::<i64>() as u64,
        first: Some(num("first_message_seconds")),
        client_cpu: num("cpu_seconds"),
        broker_cpu: broker1 - broker0,
        note: format!(
            "{}; settings {}",
            library.trim_end_matches(')'),
            field("settings")
        ),
    })
}

fn print_table(rows: &[Figures]) {
    println!(
        "\n{:<46} {:>8} {:>8} {:>10} {:>11} {:>14} {:>11} {:>11}",
        "consumer",
        "MB/s",
        "time s",
        "msg/s",
        "1st msg ms",
        "MB/s after 1st",
        "client CPU",
        "broker CPU"
    );
    for r in rows {
        let after = r
            .first
            .map(|f| format!("{:.1}", r.payload as f64 / (r.seconds - f) / 1e6))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<46} {:>8.1} {:>8.2} {:>10.0} {:>11} {:>14} {:>10.2}s {:>10.2}s",
            r.name,
            r.mb_per_s(),
            r.seconds,
            r.messages as f64 / r.seconds,
            r.first
                .map(|f| format!("{:.0}", f * 1e3))
                .unwrap_or_else(|| "-".into()),
            after,
            r.client_cpu,
            r.broker_cpu,
        );
    }
    println!();
    for r in rows {
        let dup = r.deliveries.saturating_sub(r.messages);
        println!(
            "{}: {} messages, {} duplicate deliveries; {}",
            r.name, r.messages, dup, r.note
        );
    }
}

#[tokio::main]
async fn main() {
    let o = options();
    let dir = PluginDir::new();
    let (broker, addr) = start_drover(&dir, &o);
    let broker_pid = broker.0.id();
    let p = o.partitions as usize;
    let ends: Vec<i64> = (0..p)
        .map(|i| (o.messages / p + usize::from(i < o.messages % p)) as i64)
        .collect();
    let started = Instant::now();
    produce(&addr, &o, &ends).await;
    println!(
        "connector e2e: broker {addr} (pid {broker_pid}), topic {TOPIC}: {} partitions, {} \
         messages x {} B produced in {:.1} s (rskafka, batches of {}, {} in flight per \
         partition, flush_messages {})",
        o.partitions,
        o.messages,
        o.size,
        started.elapsed().as_secs_f64(),
        o.batch,
        o.in_flight,
        o.flush_messages
    );
    println!(
        "drover-client settings: fetch_max_wait_ms {}, partition_max_bytes {}, \
         fetch_max_bytes {}, max_buffered_bytes {}; coordinator debounce {} ms, sticky",
        o.fetch_max_wait_ms,
        o.partition_max_bytes,
        o.fetch_max_bytes,
        o.max_buffered_bytes,
        o.delay_ms
    );
    let repeat = o.repeat;
    let bench = Bench {
        addr,
        o,
        ends,
        broker_pid,
    };
    let wants = |what: &str| {
        bench
            .o
            .only
            .as_ref()
            .is_none_or(|l| l.iter().any(|x| x == what))
    };
    let per_member = p.div_ceil(GROUP_SIZE);
    // confluent-kafka: Kafka's defaults, and a prefetch queue large enough that
    // librdkafka never pauses fetching (its default queue is 64 MiB, and a paused
    // partition is fetched again only after `fetch.queue.backoff.ms`, 1 s); plus any
    // settings in DROVER_BENCH_CK_SET ("key=value key=value").
    let mut ck_runs: Vec<(&str, String, Vec<String>)> = vec![
        ("ck", "defaults".into(), vec![]),
        (
            "ck-queue",
            "1 GiB prefetch queue".into(),
            vec![
                "queued.max.messages.kbytes=1048576".into(),
                "queued.min.messages=10000000".into(),
            ],
        ),
    ];
    if let Ok(set) = std::env::var("DROVER_BENCH_CK_SET") {
        ck_runs.push((
            "ck-custom",
            set.clone(),
            set.split_whitespace().map(str::to_owned).collect(),
        ));
    }
    let mut rows = Vec::new();
    let mut ck_missing = false;
    for round in 0..repeat {
        type Run = (&'static str, usize, usize);
        let runs: [Run; 4] = [
            ("single1", 1, 1),
            ("single-all", 1, p),
            ("group1", GROUP_SIZE, 1),
            ("group-all", GROUP_SIZE, per_member),
        ];
        for (name, members, streams) in runs {
            if wants(name) {
                let f = run_connectors(&bench, name, members, streams, round).await;
                println!("  {}: {:.1} MB/s", f.name, f.mb_per_s());
                rows.push(f);
            }
        }
        for (name, label, extra) in &ck_runs {
            if wants(name) {
                match run_confluent(&bench, label, extra) {
                    Some(f) => {
                        println!("  {}: {:.1} MB/s", f.name, f.mb_per_s());
                        rows.push(f);
                    }
                    None => ck_missing = true,
                }
            }
        }
    }
    print_table(&rows);
    if ck_missing {
        println!(
            "confluent-kafka skipped: no target/test-venv/bin/python (run \
             scripts/install-test-deps.sh, or set DROVER_BENCH_PYTHON)"
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.trim());
}
