//! End-to-end broker benchmark: produce N messages of S bytes with a native Rust Kafka
//! client (rskafka), then consume them back, and print MB/s and produce latency
//! percentiles. It runs against a Drover it starts itself (`target/release/drover`)
//! or, with `--bootstrap`, against any Kafka-compatible broker (the figures in
//! docs/benchmarks.md compare Drover with tansu this way).
//!
//! ```text
//! cargo build --release -p drover-host
//! cargo bench -p drover-tests --bench e2e -- [--bootstrap HOST:PORT] [--messages N]
//!     [--size BYTES] [--batch RECORDS] [--partitions P] [--in-flight K]
//!     [--flush-messages N] [--broker-pid PID] [--broker-bin PATH]
//!     [--compression none|gzip|snappy|lz4|zstd]
//! ```
//!
//! `--broker-bin` starts another `drover` binary than `target/release/drover` (to
//! compare two builds in one run); `--compression` is the codec of the produced batches
//! (default none).
//!
//! Besides throughput it prints the CPU seconds the client (this process) and the broker
//! used in each phase: the Drover it starts, or the process `--broker-pid` names.

use std::{
    collections::BTreeMap,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use drover_tests::proc_stat::process_cpu;
use rskafka::{
    client::{
        partition::{Compression, UnknownTopicHandling},
        ClientBuilder,
    },
    record::Record,
};

/// The client's allocator. With glibc's, the client spent a quarter of its CPU in page
/// faults of freshly mapped request buffers, which made the client, not the broker, the
/// bottleneck on a 2-core machine.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Options {
    bootstrap: Option<String>,
    messages: usize,
    size: usize,
    batch: usize,
    partitions: i32,
    in_flight: usize,
    /// For the Drover the bench starts: `[log] flush_messages` (default 1: fsync every
    /// append before acknowledging it).
    flush_messages: u64,
    /// The broker process whose CPU time is reported when `--bootstrap` is given.
    broker_pid: Option<u32>,
    /// The `drover` binary to start (default `target/release/drover`).
    broker_bin: Option<std::path::PathBuf>,
    /// Codec of the produced batches.
    compression: Compression,
}

fn options() -> Options {
    let mut o = Options {
        bootstrap: None,
        messages: 200_000,
        size: 1024,
        batch: 100,
        partitions: 4,
        in_flight: 4,
        flush_messages: 1,
        broker_pid: None,
        broker_bin: None,
        compression: Compression::NoCompression,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--bootstrap" => o.bootstrap = Some(value()),
            "--messages" => o.messages = value().parse().expect("--messages N"),
            "--size" => o.size = value().parse().expect("--size BYTES"),
            "--batch" => o.batch = value().parse().expect("--batch RECORDS"),
            "--partitions" => o.partitions = value().parse().expect("--partitions P"),
            "--in-flight" => o.in_flight = value().parse().expect("--in-flight K"),
            "--flush-messages" => o.flush_messages = value().parse().expect("--flush-messages N"),
            "--broker-pid" => o.broker_pid = Some(value().parse().expect("--broker-pid PID")),
            "--broker-bin" => o.broker_bin = Some(value().into()),
            "--compression" => {
                o.compression = match value().as_str() {
                    "none" => Compression::NoCompression,
                    "gzip" => Compression::Gzip,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    c => panic!("unknown codec {c}"),
                }
            }
            other => panic!("unknown argument {other}"),
        }
    }
    o
}

/// A Drover started for the run, killed on drop.
/// The temp dir holds its data and is removed when the broker is gone.
struct Broker(Child, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_drover(flush_messages: u64, bin: Option<&std::path::Path>) -> (Broker, String) {
    let exe = std::env::current_exe().expect("exe");
    let release = exe.ancestors().nth(2).expect("target/release").to_owned();
    let drover = bin.map_or_else(|| release.join("drover"), ToOwned::to_owned);
    assert!(
        drover.is_file(),
        "{} not found: run `cargo build --release -p drover-host` first",
        drover.display()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    let admin = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    std::fs::create_dir(dir.path().join("plugins")).expect("mkdir");
    let config = dir.path().join("drover.toml");
    std::fs::write(
        &config,
        format!("[log]\nflush_messages = {flush_messages}\n"),
    )
    .expect("config");
    let child = Command::new(drover)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--config")
        .arg(&config)
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--plugin-dir")
        .arg(dir.path().join("plugins"))
        .stderr(Stdio::null())
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
    (Broker(child, dir), addr)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// CPU seconds used so far by the client (this process) and by the broker, if known.
fn cpu(broker_pid: Option<u32>) -> (f64, Option<f64>) {
    let client = process_cpu(std::process::id()).unwrap_or(0.0);
    (client, broker_pid.and_then(process_cpu))
}

/// "client X s, broker Y s" for the CPU used between two `cpu` readings.
fn cpu_used(before: (f64, Option<f64>), after: (f64, Option<f64>)) -> String {
    let broker = match (before.1, after.1) {
        (Some(b), Some(a)) => format!("{:.2} s", a - b),
        _ => "unknown (pass --broker-pid)".to_owned(),
    };
    format!("client {:.2} s, broker {broker}", after.0 - before.0)
}

#[tokio::main]
async fn main() {
    let o = options();
    let (_broker, bootstrap, broker_pid) = match &o.bootstrap {
        Some(b) => (None, b.clone(), o.broker_pid),
        None => {
            let (broker, addr) = start_drover(o.flush_messages, o.broker_bin.as_deref());
            let pid = broker.0.id();
            (Some(broker), addr, Some(pid))
        }
    };
    let client = Arc::new(
        ClientBuilder::new(vec![bootstrap.clone()])
            .max_message_size(64 * 1024 * 1024)
            .build()
            .await
            .expect("connect"),
    );
    let topic = format!("bench-{}", std::process::id());
    client
        .controller_client()
        .expect("controller")
        .create_topic(&topic, o.partitions, 1, 10_000)
        .await
        .expect("create topic");
    let payload = vec![b'x'; o.size];
    let per_partition = o.messages / o.partitions as usize;
    let total_bytes = (per_partition * o.partitions as usize * o.size) as f64;

    // The records are built before the clock starts: the bench measures the broker and
    // the client's encoding, not the making of test data.
    let batches_per_partition = per_partition.div_ceil(o.batch);
    let mut prepared: Vec<Vec<Vec<Record>>> = (0..o.partitions)
        .map(|p| {
            (0..batches_per_partition)
                .map(|b| {
                    let n = o.batch.min(per_partition - b * o.batch);
                    (0..n)
                        .map(|i| Record {
                            key: Some(format!("{p}-{b}-{i}").into_bytes()),
                            value: Some(payload.clone()),
                            headers: BTreeMap::new(),
                            timestamp: chrono::Utc::now(),
                        })
                        .collect()
                })
                .collect()
        })
        .collect();

    // Produce: each partition gets its share in batches, `in_flight` batches at a time.
    let cpu_before = cpu(broker_pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (p, batches) in (0..o.partitions).zip(prepared.drain(..)) {
        let client = Arc::clone(&client);
        let topic = topic.clone();
        let in_flight = o.in_flight;
        let compression = o.compression;
        tasks.push(tokio::spawn(async move {
            let pc = Arc::new(
                client
                    .partition_client(topic, p, UnknownTopicHandling::Retry)
                    .await
                    .expect("partition client"),
            );
            let mut latencies = Vec::with_capacity(batches.len());
            let mut pending = tokio::task::JoinSet::new();
            for records in batches {
                let pc = Arc::clone(&pc);
                pending.spawn(async move {
                    let t = Instant::now();
                    pc.produce(records, compression).await.expect("produce");
                    t.elapsed()
                });
                while pending.len() >= in_flight {
                    latencies.push(pending.join_next().await.expect("task").expect("join"));
                }
            }
            while let Some(l) = pending.join_next().await {
                latencies.push(l.expect("join"));
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.expect("producer"));
    }
    let produce_secs = started.elapsed().as_secs_f64();
    let produce_cpu = cpu_used(cpu_before, cpu(broker_pid));
    latencies.sort();

    // Consume everything back from offset 0.
    let cpu_before = cpu(broker_pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..o.partitions {
        let client = Arc::clone(&client);
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            let pc = client
                .partition_client(topic, p, UnknownTopicHandling::Retry)
                .await
                .expect("partition client");
            let mut offset = 0i64;
            let mut seen = 0usize;
            while seen < per_partition {
                let (records, _hwm) = pc
                    .fetch_records(offset, 1..8 * 1024 * 1024, 1_000)
                    .await
                    .expect("fetch");
                for r in &records {
                    offset = r.offset + 1;
                }
                seen += records.len();
            }
            seen
        }));
    }
    let mut consumed = 0;
    for t in tasks {
        consumed += t.await.expect("consumer");
    }
    let consume_secs = started.elapsed().as_secs_f64();
    let consume_cpu = cpu_used(cpu_before, cpu(broker_pid));
    assert_eq!(consumed, per_partition * o.partitions as usize);

    let mb = total_bytes / 1e6;
    println!(
        "broker {bootstrap}: {} messages x {} B, batch {}, {} partitions, {} in flight per partition",
        consumed, o.size, o.batch, o.partitions, o.in_flight
    );
    println!(
        "produce: {:.1} MB/s ({:.0} msg/s); latency per batch p50 {:.2} ms, p99 {:.2} ms; cpu {produce_cpu}",
        mb / produce_secs,
        consumed as f64 / produce_secs,
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );
    println!(
        "consume: {:.1} MB/s ({:.0} msg/s); cpu {consume_cpu}",
        mb / consume_secs,
        consumed as f64 / consume_secs
    );
}
