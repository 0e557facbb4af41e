//! End-to-end coordinator benchmark: M light consumers (`drover_tests::native`) speak
//! the native protocol over loopback to a `drover serve` that this bench starts with
//! the coordinator, sticky assignor and embedded offset-store plugins. It prints:
//!
//! - **join**: time from the first connect until all M consumers hold the complete
//!   assignment of one generation (every partition owned exactly once), the
//!   rebalance debounce included;
//! - **heartbeats**: for `--hold` seconds at a 1 s ping interval (session timeout
//!   3 s), the intervals between pings each consumer saw, and how late they were;
//! - **request RTT under load**: FetchOffsets round trips on a separate connection;
//! - **rebalance after LeaveGroup**: from sending LeaveGroup until every consumer
//!   acknowledged the new generation's StartFetcher and the leaver's partitions are
//!   owned again (the partitions are released at once, docs/protocol.md §6.2 (c));
//! - **rebalance after a channel closes**: the same after the consumer's connection
//!   drops without a word, which includes the lease wait of §6.2 (d) (up to one
//!   session timeout since its last frame), printed separately.
//!
//! ```text
//! cargo build --release -p drover-host
//! cargo bench -p drover-tests --bench coordinator_e2e -- [--members M] [--partitions P]
//!     [--hold SECONDS] [--delay-ms DEBOUNCE]
//! ```

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use bytes::BytesMut;
use drover_protocol::{
    decode_response_frame, encode_request_frame, ApiKey, FetchOffsetsRequest, NativeRequest,
    TopicPartitions,
};
use drover_tests::{
    native::{ChannelEvent, ConsumerSpec, LightConsumer},
    PluginDir,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const SESSION_TIMEOUT_MS: i32 = 3_000;

struct Options {
    members: usize,
    partitions: i32,
    hold_s: u64,
    delay_ms: u64,
}

fn options() -> Options {
    let mut o = Options {
        members: 1_000,
        partitions: 10_000,
        hold_s: 10,
        delay_ms: 100,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--members" => o.members = value().parse().expect("--members M"),
            "--partitions" => o.partitions = value().parse().expect("--partitions P"),
            "--hold" => o.hold_s = value().parse().expect("--hold SECONDS"),
            "--delay-ms" => o.delay_ms = value().parse().expect("--delay-ms MS"),
            other => panic!("unknown argument {other}"),
        }
    }
    o
}

/// The broker process, killed on drop.
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

fn start_drover(dir: &PluginDir, o: &Options) -> (Broker, SocketAddr) {
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
             max_connections = {conns}\n\
             [plugins]\ndir = {plugins:?}\ncache_dir = {cache:?}\n\
             [coordinator]\ndefault_assignor = \"sticky\"\n\
             [plugins.config.drover-coordinator]\nmin_session_timeout_ms = 3000\n\
             rebalance_delay_ms = {delay}\nrebalance_max_delay_ms = {max_delay}\n",
            data = dir.scratch("data"),
            admin = free_port(),
            conns = o.members + 1_000,
            plugins = dir.path(),
            cache = dir.cache_dir(),
            delay = o.delay_ms,
            max_delay = (o.delay_ms * 10).max(1_000),
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
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let started = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "drover did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (Broker(child), addr)
}

/// Raises this process's open-file limit to the hard limit (one socket per consumer).
fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
    limit.rlim_cur
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Whether every consumer acknowledged the same generation and together they own every
/// partition exactly once; returns that generation.
fn complete(consumers: &[LightConsumer], partitions: i32) -> Option<i32> {
    let mut generation = None;
    let mut owned = 0usize;
    let mut seen = BTreeSet::new();
    for c in consumers {
        let state = c.state.lock().unwrap_or_else(|e| e.into_inner());
        match generation {
            None => generation = Some(state.generation),
            Some(g) if g != state.generation => return None,
            Some(_) => {}
        }
        owned += state.positions.len();
        seen.extend(state.positions.keys().cloned());
    }
    (owned == partitions as usize && seen.len() == owned)
        .then_some(generation.unwrap_or(0))
        .filter(|g| *g > 0)
}

async fn wait_complete(
    consumers: &[LightConsumer],
    partitions: i32,
    after_generation: i32,
    limit: Duration,
) -> (i32, Instant) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(g) = complete(consumers, partitions) {
            if g > after_generation {
                return (g, Instant::now());
            }
        }
        assert!(
            Instant::now() < deadline,
            "no complete assignment within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn drain(consumers: &mut [LightConsumer]) -> Vec<(usize, ChannelEvent)> {
    let mut out = Vec::new();
    for (i, c) in consumers.iter_mut().enumerate() {
        while let Ok(event) = c.events.try_recv() {
            if let ChannelEvent::Closed { reason } = &event {
                panic!("consumer {i} lost its channel: {reason}");
            }
            out.push((i, event));
        }
    }
    out
}

/// Removes a consumer that owns partitions (with more consumers than partitions, most
/// own none, and their departure moves nothing).
fn take_owner(consumers: &mut Vec<LightConsumer>) -> LightConsumer {
    let i = consumers
        .iter()
        .rposition(|c| !c.owned().is_empty())
        .expect("a consumer owning partitions");
    consumers.swap_remove(i)
}

async fn create_topic(addr: SocketAddr, topic: &str, partitions: i32) {
    let client = rskafka::client::ClientBuilder::new(vec![addr.to_string()])
        .build()
        .await
        .expect("kafka client");
    client
        .controller_client()
        .expect("controller")
        .create_topic(topic, partitions, 1, 30_000)
        .await
        .expect("create topic");
}

async fn fetch_offsets_rtt(addr: SocketAddr, group: &str, samples: usize) -> Vec<Duration> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let request = NativeRequest::FetchOffsets(FetchOffsetsRequest {
            group_id: group.into(),
            topics: Some(vec![TopicPartitions::new("bench", vec![0])]),
        });
        let mut frame = BytesMut::new();
        encode_request_frame(&mut frame, i as i32, Some("bench"), &request).expect("encode");
        let start = Instant::now();
        stream.write_all(&frame).await.expect("send");
        let size = stream.read_i32().await.expect("size");
        let mut buf = vec![0; size as usize];
        stream.read_exact(&mut buf).await.expect("answer");
        out.push(start.elapsed());
        decode_response_frame(buf.into(), ApiKey::FetchOffsets, 0).expect("decode");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out.sort();
    out
}

#[tokio::main]
async fn main() {
    let o = options();
    let files = raise_open_files();
    assert!(
        files as usize > o.members + 100,
        "open-file limit {files} is too low for {} consumers",
        o.members
    );
    let dir = PluginDir::new();
    let (_broker, addr) = start_drover(&dir, &o);
    create_topic(addr, "bench", o.partitions).await;
    println!(
        "coordinator e2e: {} consumers, {} partitions, session timeout {SESSION_TIMEOUT_MS} ms, \
         debounce {} ms, sticky assignor, incremental rebalances",
        o.members, o.partitions, o.delay_ms
    );

    // Join.
    let start = Instant::now();
    let mut consumers = Vec::with_capacity(o.members);
    for i in 0..o.members {
        let spec = ConsumerSpec {
            group: "bench".into(),
            consumer_id: format!("consumer-{i:05}"),
            topics: vec![("bench".into(), 1)],
            session_timeout_ms: SESSION_TIMEOUT_MS,
            assignor: None,
        };
        consumers.push(LightConsumer::start(addr, spec).await.expect("connect"));
    }
    let connected = start.elapsed();
    let (generation, done) =
        wait_complete(&consumers, o.partitions, 0, Duration::from_secs(120)).await;
    println!(
        "join: all {} consumers connected and registered-sent in {}; complete assignment \
         (generation {generation}) after {}",
        o.members,
        ms(connected),
        ms(done - start)
    );
    drain(&mut consumers);

    // Heartbeats at a 1 s interval.
    tokio::time::sleep(Duration::from_secs(o.hold_s)).await;
    let mut last = vec![None::<Instant>; consumers.len()];
    let mut intervals = Vec::new();
    for (i, event) in drain(&mut consumers) {
        if let ChannelEvent::Heartbeat { at } = event {
            if let Some(prev) = last[i] {
                intervals.push(at - prev);
            }
            last[i] = Some(at);
        }
    }
    intervals.sort();
    let expected = Duration::from_millis(SESSION_TIMEOUT_MS as u64 / 3);
    let late: Vec<Duration> = intervals
        .iter()
        .map(|d| d.saturating_sub(expected))
        .collect();
    println!(
        "heartbeats over {} s: {} pings ({:.0}/s); interval p50 {} p99 {} max {}; \
         lateness p99 {}",
        o.hold_s,
        intervals.len(),
        intervals.len() as f64 / o.hold_s as f64,
        ms(percentile(&intervals, 0.5)),
        ms(percentile(&intervals, 0.99)),
        ms(percentile(&intervals, 1.0)),
        ms(percentile(&late, 0.99)),
    );
    let rtt = fetch_offsets_rtt(addr, "bench", 100).await;
    println!(
        "FetchOffsets RTT under heartbeat load: p50 {} p99 {}",
        ms(percentile(&rtt, 0.5)),
        ms(percentile(&rtt, 0.99))
    );

    // Rebalance after LeaveGroup.
    drain(&mut consumers);
    let leaver = take_owner(&mut consumers);
    let start = Instant::now();
    let code = leaver.leave(addr).await.expect("leave");
    assert!(code.is_none(), "LeaveGroup answered {code:?}");
    let (generation, done) = wait_complete(
        &consumers,
        o.partitions,
        generation,
        Duration::from_secs(60),
    )
    .await;
    println!(
        "rebalance after LeaveGroup: generation {generation} complete after {}",
        ms(done - start)
    );

    // Rebalance after a channel closes (lease wait included).
    tokio::time::sleep(Duration::from_secs(2)).await;
    drain(&mut consumers);
    let victim = take_owner(&mut consumers);
    let start = Instant::now();
    let last_answer = victim
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .last_answer
        .unwrap_or(start);
    victim.kill();
    let (generation, done) = wait_complete(
        &consumers,
        o.partitions,
        generation,
        Duration::from_secs(60),
    )
    .await;
    // The coordinator may hand the partitions over only a session timeout after the
    // consumer's last frame (rule (d)); that frame left at about `last_answer`.
    let released = last_answer + Duration::from_millis(SESSION_TIMEOUT_MS as u64);
    println!(
        "rebalance after a channel closed: generation {generation} complete {} after the \
         close, of which the lease wait (rule (d)) is {}; after the release: {}",
        ms(done - start),
        ms(released.saturating_duration_since(start)),
        ms(done.saturating_duration_since(released))
    );
}
