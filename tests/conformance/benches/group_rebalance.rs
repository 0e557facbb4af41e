//! Group rebalance with real clients (issue 8): how long M consumers take to reach a
//! stable assignment, and how long the survivors take to hold every partition again
//! after one member leaves cleanly. Classic Kafka groups (confluent-kafka,
//! `group.protocol=classic`, cooperative-sticky and range) and KIP-848 groups
//! (`group.protocol=consumer`) on Drover, beside native connector consumers
//! (`drover-client`) on Drover and classic confluent-kafka consumers on tansu, in the
//! same run.
//!
//! Every member is its own process: confluent-kafka members run
//! `benches/group_member.py` on `target/test-venv/bin/python` (which
//! `scripts/install-test-deps.sh` creates); native members are this bench binary
//! re-executed with `--native-member`. A member prepares (imports, creates its client),
//! says `ready`, and subscribes only when the bench writes `go` to its stdin; it prints
//! every assignment change (the client's rebalance callbacks, the connector's
//! `Assigned`/`Stopped`/`Lost` events) as a JSON line with a CLOCK_MONOTONIC timestamp
//! taken in the member when the callback ran. The bench replays these lines into the
//! partitions each member holds.
//!
//! Each run: a fresh group of M members over one topic of `--partitions-per-member` × M
//! partitions (2M by default; the topic is empty, nothing is fetched or committed).
//!
//! - **All owned**: from the bench writing `go` (every member already started and
//!   ready) until every partition is first held by exactly one member.
//! - **Stable**: from `go` until the last assignment change, once every partition is
//!   held by exactly one member, the members' counts differ by at most one, and no
//!   change followed for `--quiet-ms`.
//! - Then the last member (index M − 1) is told to close, `--quiet-ms` plus
//!   (r + ½) / R × `--leave-jitter-ms` after the last change in round r of R (the
//!   members' heartbeats started together, so a fixed wait would always meet them at
//!   the same phase; the rounds spread the leave over it). **Recovered**: from the
//!   leaving member's `close()` starting (its own timestamp) until the survivors first
//!   hold every partition exactly once; **settled**: until their last assignment change
//!   (balanced, then quiet for `--quiet-ms`).
//!
//! Per run it also prints the most assignment callbacks of one member, the broker's CPU
//! seconds from `go` to the end of the recovery, the heartbeats per second per member
//! while joining (from `go` until stable), in the steady state (from 1 s after stable
//! until the leave) and while recovering (Drover's classic and KIP-848 groups: its
//! `/metrics` counters of Heartbeat and ConsumerGroupHeartbeat, sampled every 50 ms;
//! native members are pinged by the coordinator every session timeout / 3), and any
//! double ownership: the history
//! replayed in member-time order, a partition held by two members at once (none for a
//! protocol that revokes before it assigns elsewhere). Without `--bench` (as `cargo test
//! --benches` runs it) the binary does nothing.
//!
//! Variants (`--only`, comma-separated keys): `classic-coop`, `classic-range` (Drover,
//! coordinator defaults: `initial_rebalance_delay_ms` 3000 like Kafka's
//! `group.initial.rebalance.delay.ms`, ended by `initial_rebalance_quiet_ms` 300 once
//! no JoinGroup comes), `classic-coop-d0`, `classic-range-d0` (a second
//! Drover with `initial_rebalance_delay_ms = 0` and `rebalance_delay_ms = 0`), `kip848`
//! (`group.protocol=consumer`, no remote assignor named: the coordinator's default,
//! sticky; heartbeat interval at most 5000 ms, Kafka's `group.consumer.heartbeat.interval.ms`,
//! 1000 ms while the coordinator's KIP-848 members are few,
//! `consumer_heartbeat_budget_per_s`; 200 ms while a member reconciles,
//! `consumer_reconcile_heartbeat_interval_ms`;
//! no initial delay), `native` (`drover-client` defaults, the coordinator's adaptive
//! rebalance debounce: `rebalance_quiet_ms` 50, `rebalance_delay_ms` 300 the cap), `native-d0` (the second Drover: debounce 0), `tansu-coop`,
//! `tansu-range` (tansu 0.6.0, classic); `classic-coop-kt`, `kip848-kt`, `native-kt`
//! (a third Drover with the timers of Kafka and of earlier versions:
//! `initial_rebalance_quiet_ms = 3000`, `consumer_reconcile_heartbeat_interval_ms =
//! 5000`, `consumer_heartbeat_budget_per_s = 0`, `rebalance_quiet_ms = 300`). Both Drovers have the `sticky` default
//! assignor and otherwise the coordinator's defaults. Client settings are the
//! libraries' defaults (librdkafka: `session.timeout.ms` 45000, `heartbeat.interval.ms`
//! 3000; drover-client: session 10 s). The runs interleave: each round runs every
//! variant for each M, and all brokers stay up for the whole bench.
//!
//! ```text
//! cargo build --release -p drover-host
//! scripts/install-test-deps.sh
//! cargo bench -p drover-tests --bench group_rebalance -- [--members 10,50]
//!     [--repeat 3] [--partitions-per-member 2] [--quiet-ms 5000]
//!     [--leave-jitter-ms 5000] [--timeout-s 120]
//!     [--only KEY,...] [--tansu PATH | --no-tansu] [--ck-set key=value]...
//!     [--coordinator-set key=value]... [--keep-logs]
//! ```
//!
//! tansu: `--tansu PATH`, else `$DROVER_BENCH_TANSU`, else
//! `/work/tansu-install/bin/tansu` (`cargo install tansu --version 0.6.0 --locked
//! --no-default-features --features dynostore --root /work/tansu-install`); without
//! one the tansu variants are skipped with a message. It listens on 127.0.0.1:29092 with
//! the memory storage engine. Environment: `DROVER_BENCH_PYTHON` (another Python with
//! confluent-kafka), `DROVER_BENCH_LOG` (Drover's `RUST_LOG`, default `info`: a few lines
//! per rebalance), `DROVER_BENCH_TANSU_LOG` (tansu's, default `warn`: at `info` tansu logs
//! every span, hundreds of thousands of lines per run, which costs it CPU).
//! `DROVER_BENCH_DROVER` (another `drover` binary) with `DROVER_PLUGIN_BUILD_DIR` (where
//! its plugins are: the two must come from one build, the broker refuses plugins of
//! another ABI). Broker and member logs go to a temporary directory, kept (and named)
//! when a run fails or with `--keep-logs`.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use drover_tests::PluginDir;
use serde_json::Value;

/// CLOCK_MONOTONIC in seconds: the clock the members stamp their events with
/// (Python's `time.CLOCK_MONOTONIC`).
fn mono() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the struct passed to it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

// ------------------------------------------------------------------------------------
// Native member (this binary re-executed with --native-member)
// ------------------------------------------------------------------------------------

fn emit(line: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn partitions_of(parts: &[drover_client::TopicPartition]) -> Vec<i32> {
    let mut v: Vec<i32> = parts.iter().map(|(_, p)| *p).collect();
    v.sort_unstable();
    v
}

/// One `drover-client` group member, speaking the same line protocol as
/// `group_member.py`. Its "assignment callback" is the connector's `Assigned` event
/// (a StartFetcher applied: the complete assignment), `Stopped` its revocation.
fn native_member(args: &[String]) {
    use drover_client::{Consumer, ConsumerConfig, ConsumerEvent};
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| panic!("--native-member needs {name}"))
            .clone()
    };
    let (bootstrap, topic, group, id) = (
        arg("--bootstrap"),
        arg("--topic"),
        arg("--group"),
        arg("--client-id"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (cmd_tx, mut cmd_rx) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("go") => {
                    let _ = cmd_tx.send("go");
                }
                Ok("close") | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = cmd_tx.send("close");
    });
    emit(serde_json::json!({"ev": "ready", "t": mono()}));
    runtime.block_on(async move {
        if cmd_rx.recv().await != Some("go") {
            return;
        }
        emit(serde_json::json!({"ev": "subscribed", "t": mono()}));
        let mut config = ConsumerConfig::new([bootstrap], &group);
        config.consumer_id = id;
        let (consumer, streams) = Consumer::create_message_streams(config, [(topic, 1)])
            .await
            .expect("create_message_streams");
        let mut events = consumer.events();
        // Registration returned before we could listen: an assignment applied in between
        // would be missed, so report what is owned now (the coordinator's debounce makes
        // this rare).
        let (generation, owned) = consumer.assignment();
        if !owned.is_empty() {
            emit(serde_json::json!({"ev": "set", "t": mono(), "partitions": partitions_of(&owned),
                "generation": generation, "late": true}));
        }
        loop {
            tokio::select! {
                cmd = cmd_rx.recv() => if cmd != Some("go") { break },
                event = events.recv() => {
                    let t = mono();
                    match event {
                        Ok(ConsumerEvent::Assigned { generation, partitions }) => emit(serde_json::json!(
                            {"ev": "set", "t": t, "partitions": partitions_of(&partitions),
                             "generation": generation})),
                        Ok(ConsumerEvent::Stopped { partitions }) => emit(serde_json::json!(
                            {"ev": "revoked", "t": t, "partitions": partitions_of(&partitions)})),
                        Ok(ConsumerEvent::Lost { reason }) => emit(serde_json::json!(
                            {"ev": "lost", "t": t, "reason": reason})),
                        Ok(ConsumerEvent::Registered { generation }) => emit(serde_json::json!(
                            {"ev": "registered", "t": t, "generation": generation})),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            let (generation, owned) = consumer.assignment();
                            emit(serde_json::json!({"ev": "set", "t": t,
                                "partitions": partitions_of(&owned), "generation": generation,
                                "lagged": true}));
                        }
                        Ok(other) => emit(serde_json::json!(
                            {"ev": "other", "t": t, "event": format!("{other:?}")})),
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    }
                }
            }
        }
        let t = mono();
        emit(serde_json::json!({"ev": "closing", "t": t}));
        // Like librdkafka's revocation at close(): from here the member delivers nothing.
        let (_, owned) = consumer.assignment();
        emit(serde_json::json!({"ev": "revoked", "t": t, "partitions": partitions_of(&owned)}));
        let result = consumer.shutdown().await;
        drop(streams);
        match result {
            Ok(()) => emit(serde_json::json!({"ev": "closed", "t": mono()})),
            Err(e) => emit(serde_json::json!({"ev": "closed", "t": mono(), "error": e.to_string()})),
        }
    });
}

// ------------------------------------------------------------------------------------
// Options and variants
// ------------------------------------------------------------------------------------

struct Options {
    members: Vec<usize>,
    repeat: usize,
    partitions_per_member: usize,
    quiet: Duration,
    leave_jitter_ms: u64,
    timeout: Duration,
    only: Option<Vec<String>>,
    tansu: Option<PathBuf>,
    ck_set: Vec<String>,
    coordinator_set: Vec<String>,
    keep_logs: bool,
}

fn options(args: &[String]) -> Options {
    let mut o = Options {
        members: vec![10, 50],
        repeat: 3,
        partitions_per_member: 2,
        quiet: Duration::from_millis(5000),
        leave_jitter_ms: 5000,
        timeout: Duration::from_secs(120),
        only: None,
        tansu: std::env::var_os("DROVER_BENCH_TANSU")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from("/work/tansu-install/bin/tansu"))),
        ck_set: Vec::new(),
        coordinator_set: Vec::new(),
        keep_logs: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{arg} needs a value"))
                .clone()
        };
        match arg.as_str() {
            "--bench" => {}
            "--members" => {
                o.members = value()
                    .split(',')
                    .map(|m| m.parse().expect("--members M,M"))
                    .collect()
            }
            "--repeat" => o.repeat = value().parse().expect("--repeat R"),
            "--partitions-per-member" => {
                o.partitions_per_member = value().parse().expect("--partitions-per-member N")
            }
            "--quiet-ms" => o.quiet = Duration::from_millis(value().parse().expect("--quiet-ms")),
            "--leave-jitter-ms" => {
                o.leave_jitter_ms = value().parse().expect("--leave-jitter-ms MS")
            }
            "--timeout-s" => o.timeout = Duration::from_secs(value().parse().expect("--timeout-s")),
            "--only" => o.only = Some(value().split(',').map(str::to_owned).collect()),
            "--tansu" => o.tansu = Some(PathBuf::from(value())),
            "--no-tansu" => o.tansu = None,
            "--ck-set" => o.ck_set.push(value()),
            "--coordinator-set" => o.coordinator_set.push(value()),
            "--keep-logs" => o.keep_logs = true,
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        o.members.iter().all(|m| *m >= 2),
        "--members: at least 2 (one leaves)"
    );
    assert!(o.partitions_per_member >= 1 && o.repeat >= 1);
    o
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum BrokerKind {
    /// Drover, coordinator defaults (initial_rebalance_delay_ms 3000).
    Drover,
    /// Drover with the timers of Kafka and of earlier Drover versions: the initial
    /// delay not ended by a quiet time (`initial_rebalance_quiet_ms` 3000), KIP-848
    /// members told the 5 s interval while they reconcile too, a fixed 300 ms native
    /// debounce (`rebalance_quiet_ms` 300); the "before" of issue 19 in the same run.
    DroverKafkaTimers,
    /// Drover with initial_rebalance_delay_ms = 0 (classic groups) and
    /// rebalance_delay_ms = 0 (native groups).
    DroverNoDelay,
    Tansu,
}

#[derive(Clone, Copy)]
enum ClientKind {
    Classic(&'static str),
    Kip848,
    Native,
}

struct Variant {
    key: &'static str,
    label: &'static str,
    broker: BrokerKind,
    client: ClientKind,
}

const VARIANTS: &[Variant] = &[
    Variant {
        key: "classic-coop",
        label: "Drover, classic, cooperative-sticky, initial delay 3000 ms, quiet 300 ms",
        broker: BrokerKind::Drover,
        client: ClientKind::Classic("cooperative-sticky"),
    },
    Variant {
        key: "classic-range",
        label: "Drover, classic, range, initial delay 3000 ms, quiet 300 ms",
        broker: BrokerKind::Drover,
        client: ClientKind::Classic("range"),
    },
    Variant {
        key: "classic-coop-d0",
        label: "Drover, classic, cooperative-sticky, initial delay 0",
        broker: BrokerKind::DroverNoDelay,
        client: ClientKind::Classic("cooperative-sticky"),
    },
    Variant {
        key: "classic-range-d0",
        label: "Drover, classic, range, initial delay 0",
        broker: BrokerKind::DroverNoDelay,
        client: ClientKind::Classic("range"),
    },
    Variant {
        key: "kip848",
        label: "Drover, KIP-848 (group.protocol=consumer), reconcile interval 200 ms",
        broker: BrokerKind::Drover,
        client: ClientKind::Kip848,
    },
    Variant {
        key: "native",
        label: "Drover, native connector (drover-client), debounce quiet 50 ms",
        broker: BrokerKind::Drover,
        client: ClientKind::Native,
    },
    Variant {
        key: "classic-coop-kt",
        label: "Drover with Kafka's timers, classic, cooperative-sticky, delay 3000 ms",
        broker: BrokerKind::DroverKafkaTimers,
        client: ClientKind::Classic("cooperative-sticky"),
    },
    Variant {
        key: "kip848-kt",
        label: "Drover with Kafka's timers, KIP-848, interval 5000 ms throughout",
        broker: BrokerKind::DroverKafkaTimers,
        client: ClientKind::Kip848,
    },
    Variant {
        key: "native-kt",
        label: "Drover with earlier timers, native connector, fixed debounce 300 ms",
        broker: BrokerKind::DroverKafkaTimers,
        client: ClientKind::Native,
    },
    Variant {
        key: "native-d0",
        label: "Drover, native connector, rebalance debounce 0",
        broker: BrokerKind::DroverNoDelay,
        client: ClientKind::Native,
    },
    Variant {
        key: "tansu-coop",
        label: "tansu 0.6.0, classic, cooperative-sticky",
        broker: BrokerKind::Tansu,
        client: ClientKind::Classic("cooperative-sticky"),
    },
    Variant {
        key: "tansu-range",
        label: "tansu 0.6.0, classic, range",
        broker: BrokerKind::Tansu,
        client: ClientKind::Classic("range"),
    },
];

// ------------------------------------------------------------------------------------
// Brokers
// ------------------------------------------------------------------------------------

/// A broker process, killed on drop.
struct Broker {
    child: Child,
    addr: String,
    log: PathBuf,
    /// Drover's admin API (host:port), for its heartbeat counters; `None` for tansu.
    admin: Option<String>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

fn wait_listening(addr: &str, child: &mut Child, what: &str, log: &Path) {
    let started = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} exited ({status}); log {}:\n{}",
                log.display(),
                tail(log, 40)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what} did not listen on {addr} within 30 s; log {}:\n{}",
            log.display(),
            tail(log, 40)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last `n` lines of a file.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Spawns `command` with PR_SET_PDEATHSIG(SIGKILL), so that no child outlives the bench
/// (the main thread, which spawns every child, lives until the end).
fn spawn_tied(command: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

fn start_drover(dir: &PluginDir, logs: &Path, name: &str, coordinator: &str) -> Broker {
    let drover = match std::env::var_os("DROVER_BENCH_DROVER") {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .expect("exe")
            .ancestors()
            .nth(2)
            .expect("target/release")
            .join("drover"),
    };
    assert!(
        drover.is_file(),
        "{} not found: run `cargo build --release -p drover-host` first",
        drover.display()
    );
    let port = free_port();
    let admin = free_port();
    let config = logs.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\n\
             [server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n\
             [plugins]\ndir = {plugins:?}\ncache_dir = {cache:?}\n\
             [coordinator]\ndefault_assignor = \"sticky\"\n\
             [plugins.config.drover-coordinator]\n{coordinator}",
            data = dir.scratch(&format!("data-{name}")),
            plugins = dir.path(),
            cache = dir.cache_dir(),
        ),
    )
    .expect("config");
    let log = logs.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).expect("log file");
    let mut child = spawn_tied(
        Command::new(drover)
            .args(["serve", "--config"])
            .arg(&config)
            .env(
                "RUST_LOG",
                std::env::var("DROVER_BENCH_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(file.try_clone().expect("log file"))
            .stderr(file),
    )
    .expect("start drover");
    let addr = format!("127.0.0.1:{port}");
    wait_listening(&addr, &mut child, name, &log);
    // The plugins must have loaded (an ABI mismatch between the broker binary and the
    // plugins `cargo bench` built only logs a warning, and the broker runs on without a
    // coordinator).
    let started = Instant::now();
    let mut text = String::new();
    while !text.contains("drover ready") && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
        text = std::fs::read_to_string(&log).unwrap_or_default();
    }
    assert!(
        text.contains("coordinator started"),
        "{name} runs without the coordinator plugin (rebuild both: `cargo build --release -p \
         drover-host`, then `cargo bench`); log {}:\n{}",
        log.display(),
        tail(&log, 20)
    );
    Broker {
        child,
        addr,
        log,
        admin: Some(format!("127.0.0.1:{admin}")),
    }
}

const TANSU_ADDR: &str = "127.0.0.1:29092";

fn start_tansu(path: &Path, logs: &Path) -> Result<Broker, String> {
    if std::net::TcpStream::connect(TANSU_ADDR).is_ok() {
        return Err(format!("{TANSU_ADDR} is already in use"));
    }
    let log = logs.join("tansu.log");
    let file = std::fs::File::create(&log).expect("log file");
    let url = format!("tcp://{TANSU_ADDR}");
    let mut child = spawn_tied(
        Command::new(path)
            .args(["--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "memory://tansu/"])
            .env(
                "RUST_LOG",
                std::env::var("DROVER_BENCH_TANSU_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(file.try_clone().expect("log file"))
            .stderr(file),
    )
    .map_err(|e| format!("cannot start {}: {e}", path.display()))?;
    let started = Instant::now();
    while std::net::TcpStream::connect(TANSU_ADDR).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("tansu exited ({status}):\n{}", tail(&log, 40)));
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            return Err(format!(
                "tansu did not listen within 30 s:\n{}",
                tail(&log, 40)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Broker {
        child,
        addr: TANSU_ADDR.to_owned(),
        log,
        admin: None,
    })
}

/// The heartbeats a Drover broker has answered so far, from its admin API's
/// `/metrics`: classic Heartbeat and KIP-848 ConsumerGroupHeartbeat requests
/// (`drover_requests_total`, one per request for these APIs). Native pings go the
/// other way (the coordinator sends them, every session timeout / 3) and are not
/// counted there. `None` when the scrape fails.
fn heartbeats_answered(admin: &str) -> Option<f64> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(admin).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    const FAMILIES: [&str; 2] = [
        "drover_requests_total{api=\"Heartbeat\"",
        "drover_requests_total{api=\"ConsumerGroupHeartbeat\"",
    ];
    Some(
        text.lines()
            .filter(|l| FAMILIES.iter().any(|f| l.starts_with(f)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// Samples a Drover broker's heartbeat count every 50 ms in a thread, stamped with
/// [`mono`], until dropped.
struct HeartbeatSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    samples: std::sync::Arc<std::sync::Mutex<Vec<(f64, f64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HeartbeatSampler {
    fn start(admin: &str) -> HeartbeatSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (admin, stop2, samples2) = (admin.to_owned(), stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(n) = heartbeats_answered(&admin) {
                    samples2.lock().expect("samples").push((mono(), n));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        HeartbeatSampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// The count at time `t` (linear between the samples around it).
    fn at(&self, t: f64) -> f64 {
        let samples = self.samples.lock().expect("samples");
        let i = samples.partition_point(|(at, _)| *at <= t);
        match (i.checked_sub(1).map(|j| samples[j]), samples.get(i)) {
            (Some((t0, n0)), Some(&(t1, n1))) if t1 > t0 => n0 + (n1 - n0) * (t - t0) / (t1 - t0),
            (Some((_, n0)), _) => n0,
            (None, Some(&(_, n1))) => n1,
            (None, None) => f64::NAN,
        }
    }

    /// Heartbeats per second per member between `from` and `to`.
    fn rate(&self, from: f64, to: f64, members: usize) -> f64 {
        if to <= from || members == 0 {
            return f64::NAN;
        }
        (self.at(to) - self.at(from)) / (to - from) / members as f64
    }
}

impl Drop for HeartbeatSampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// CPU seconds (user + system) used so far by process `pid` (f64::NAN once it is gone).
fn process_cpu(pid: u32) -> f64 {
    drover_tests::proc_stat::process_cpu(pid).unwrap_or(f64::NAN)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_owned()
}

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("DROVER_BENCH_PYTHON") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("exe");
    // <target>/release/deps/<bench>
    let venv = exe
        .ancestors()
        .nth(3)
        .expect("target dir")
        .join("test-venv/bin/python");
    assert!(
        venv.is_file(),
        "{} missing: run scripts/install-test-deps.sh (or set DROVER_BENCH_PYTHON)",
        venv.display()
    );
    venv
}

const MEMBER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/group_member.py");

fn create_topic(python: &Path, addr: &str, topic: &str, partitions: usize) -> Result<(), String> {
    let out = Command::new(python)
        .arg(MEMBER_SCRIPT)
        .args(["--create-topic", "--bootstrap", addr, "--topic", topic])
        .args(["--partitions", &partitions.to_string()])
        .output()
        .map_err(|e| format!("run {MEMBER_SCRIPT}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "creating {topic} ({partitions} partitions) on {addr} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

// ------------------------------------------------------------------------------------
// Members and the group as the bench sees it
// ------------------------------------------------------------------------------------

struct Member {
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: PathBuf,
}

impl Member {
    fn send(&mut self, line: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }
}

/// A line from member `.0` (`None` at the end of its output).
type Msg = (usize, Option<Value>);

#[allow(clippy::too_many_arguments)]
fn spawn_member(
    index: usize,
    variant: &Variant,
    python: &Path,
    addr: &str,
    topic: &str,
    group: &str,
    run_dir: &Path,
    ck_set: &[String],
    tx: &mpsc::Sender<Msg>,
) -> Member {
    let id = format!("{group}-{index}");
    let mut command = match variant.client {
        ClientKind::Native => {
            let mut c = Command::new(std::env::current_exe().expect("exe"));
            c.arg("--native-member");
            c
        }
        ClientKind::Classic(_) | ClientKind::Kip848 => {
            let mut c = Command::new(python);
            c.arg(MEMBER_SCRIPT);
            match variant.client {
                ClientKind::Classic(assignor) => {
                    c.args(["--protocol", "classic", "--assignor", assignor]);
                }
                _ => {
                    c.args(["--protocol", "consumer"]);
                }
            }
            for kv in ck_set {
                c.args(["--set", kv]);
            }
            c
        }
    };
    command
        .args(["--bootstrap", addr, "--topic", topic, "--group", group])
        .args(["--client-id", &id]);
    let stderr = run_dir.join(format!("member-{index}.stderr"));
    let file = std::fs::File::create(&stderr).expect("stderr file");
    let mut child = spawn_tied(
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .env("RUST_LOG", "warn"),
    )
    .expect("spawn member");
    let stdout = child.stdout.take().expect("stdout");
    let tx = tx.clone();
    let mut events =
        std::fs::File::create(run_dir.join(format!("member-{index}.events"))).expect("events");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(events, "{line}");
            match serde_json::from_str::<Value>(&line) {
                Ok(v) => {
                    if tx.send((index, Some(v))).is_err() {
                        return;
                    }
                }
                Err(_) => eprintln!("member {index}: unparsable line {line:?}"),
            }
        }
        let _ = tx.send((index, None));
    });
    Member {
        stdin: child.stdin.take(),
        child,
        stderr,
    }
}

/// The partitions each member holds, replayed from its events.
struct Group {
    partitions: usize,
    held: Vec<BTreeSet<i32>>,
    active: Vec<bool>,
    exited: Vec<bool>,
    /// Assignment events (assigned/revoked/lost/set) per member.
    callbacks: Vec<usize>,
    /// Named events ("ready", "closing", "closed", ...) per member: the first time each.
    marks: Vec<BTreeMap<String, f64>>,
    errors: Vec<String>,
    /// Every assignment change, as (member time, member, partitions held after it).
    history: Vec<(f64, usize, BTreeSet<i32>)>,
}

impl Group {
    fn new(members: usize, partitions: usize) -> Group {
        Group {
            partitions,
            held: vec![BTreeSet::new(); members],
            active: vec![true; members],
            exited: vec![false; members],
            callbacks: vec![0; members],
            marks: vec![BTreeMap::new(); members],
            errors: Vec::new(),
            history: Vec::new(),
        }
    }

    /// Applies one line; returns the event time when it changed what member `m` holds.
    fn apply(&mut self, m: usize, v: &Value) -> Option<f64> {
        let ev = v["ev"].as_str().unwrap_or("");
        let t = v["t"].as_f64().unwrap_or_else(mono);
        let parts: BTreeSet<i32> = v["partitions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_i64())
                    .map(|p| p as i32)
                    .collect()
            })
            .unwrap_or_default();
        let before = self.held[m].clone();
        match ev {
            "assigned" => {
                self.callbacks[m] += 1;
                self.held[m].extend(parts);
            }
            "revoked" => {
                self.callbacks[m] += 1;
                self.held[m].retain(|p| !parts.contains(p));
            }
            "lost" => {
                self.callbacks[m] += 1;
                self.held[m].clear();
            }
            "set" => {
                self.callbacks[m] += 1;
                self.held[m] = parts;
            }
            "error" => {
                if self.errors.len() < 20 {
                    self.errors
                        .push(format!("member {m}: {}", v["msg"].as_str().unwrap_or("?")));
                }
                return None;
            }
            other => {
                self.marks[m].entry(other.to_owned()).or_insert(t);
                return None;
            }
        }
        if self.held[m] == before {
            return None;
        }
        self.history.push((t, m, self.held[m].clone()));
        Some(t)
    }

    /// Replays the history in member-time order (every member counted, the leaver
    /// until its own revocation at close): the longest time any partition was held by
    /// two members at once, in seconds, and how many partitions ever were. Zero for a
    /// protocol that revokes before it assigns elsewhere.
    fn double_ownership(&self) -> (f64, usize) {
        let mut history = self.history.clone();
        history.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut held = vec![BTreeSet::new(); self.held.len()];
        let mut owners = vec![0usize; self.partitions];
        let mut since: BTreeMap<i32, f64> = BTreeMap::new();
        let mut longest = 0f64;
        let mut affected = BTreeSet::new();
        for (t, m, now) in history {
            for p in held[m].difference(&now) {
                if let Some(o) = owners.get_mut(*p as usize) {
                    *o -= 1;
                    if *o <= 1 {
                        if let Some(start) = since.remove(p) {
                            longest = longest.max(t - start);
                        }
                    }
                }
            }
            for p in now.difference(&held[m]) {
                if let Some(o) = owners.get_mut(*p as usize) {
                    *o += 1;
                    if *o == 2 {
                        since.insert(*p, t);
                        affected.insert(*p);
                    }
                }
            }
            held[m] = now;
        }
        let end = self.history.iter().map(|h| h.0).fold(f64::MIN, f64::max);
        for start in since.values() {
            longest = longest.max(end - start);
        }
        (longest, affected.len())
    }

    /// Owner count of every partition, over the active members.
    fn owners(&self) -> Vec<usize> {
        let mut owners = vec![0usize; self.partitions];
        for (m, held) in self.held.iter().enumerate() {
            if self.active[m] {
                for p in held {
                    if let Some(o) = owners.get_mut(*p as usize) {
                        *o += 1;
                    }
                }
            }
        }
        owners
    }

    /// Every partition held by exactly one active member.
    fn complete(&self) -> bool {
        self.owners().iter().all(|o| *o == 1)
    }

    /// Complete, and the active members' counts differ by at most one.
    fn balanced(&self) -> bool {
        let counts: Vec<usize> = (0..self.held.len())
            .filter(|m| self.active[*m])
            .map(|m| self.held[m].len())
            .collect();
        let (min, max) = (
            counts.iter().min().copied().unwrap_or(0),
            counts.iter().max().copied().unwrap_or(0),
        );
        self.complete() && max - min <= 1
    }

    fn describe(&self) -> String {
        let owners = self.owners();
        let unowned = owners.iter().filter(|o| **o == 0).count();
        let shared = owners.iter().filter(|o| **o > 1).count();
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for m in 0..self.held.len() {
            if self.active[m] {
                *counts.entry(self.held[m].len()).or_default() += 1;
            }
        }
        let exited: Vec<usize> = (0..self.exited.len()).filter(|m| self.exited[*m]).collect();
        format!(
            "{unowned} of {} partitions unowned, {shared} owned twice; members by \
             partitions held {counts:?}; exited members {exited:?}; callbacks per member \
             {:?}",
            self.partitions, self.callbacks
        )
    }
}

/// The outcome of watching the group until it is quiet in the wanted state.
struct Watched {
    /// The member time at which every partition was first held exactly once.
    first_complete: Option<f64>,
    /// The member time of the last change (the state is then balanced and quiet).
    last_change: Option<f64>,
}

/// Reads member lines until the group has been balanced (complete, counts within one)
/// for `quiet` since its last change, or `deadline`.
fn watch(
    group: &mut Group,
    members: &[Member],
    rx: &mpsc::Receiver<Msg>,
    quiet: Duration,
    deadline: Instant,
    allow_exit: Option<usize>,
) -> Result<Watched, String> {
    let mut out = Watched {
        first_complete: group.complete().then(mono),
        last_change: None,
    };
    let mut quiet_until = Instant::now() + quiet;
    loop {
        let now = Instant::now();
        let balanced = group.balanced();
        if balanced && now >= quiet_until {
            return Ok(out);
        }
        if now >= deadline {
            let mut text = format!("not stable before the deadline: {}", group.describe());
            if !group.errors.is_empty() {
                text += &format!("; client errors: {}", group.errors.join(" | "));
            }
            return Err(text);
        }
        let until = if balanced {
            quiet_until.min(deadline)
        } else {
            deadline.min(now + Duration::from_millis(500))
        };
        match rx.recv_timeout(until.saturating_duration_since(now)) {
            Ok((m, Some(v))) => {
                if let Some(t) = group.apply(m, &v) {
                    if group.active[m] {
                        // Lines of different members may arrive out of order: the state
                        // holds from the latest change applied so far.
                        let latest = out.last_change.map_or(t, |l: f64| l.max(t));
                        out.last_change = Some(latest);
                        quiet_until = Instant::now() + quiet;
                        if out.first_complete.is_none() && group.complete() {
                            out.first_complete = Some(latest);
                        }
                    }
                }
            }
            Ok((m, None)) => {
                group.exited[m] = true;
                if allow_exit != Some(m) {
                    return Err(format!(
                        "member {m} exited ({:?}); stderr:\n{}",
                        group.marks[m],
                        tail(&members[m].stderr, 20)
                    ));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err("channel closed".into()),
        }
    }
}

// ------------------------------------------------------------------------------------
// One run
// ------------------------------------------------------------------------------------

struct RunResult {
    stable: f64,
    first_complete: f64,
    recovered: f64,
    settled: f64,
    leave_close: f64,
    jitter: Duration,
    max_callbacks: usize,
    /// Longest double ownership of a partition (s) and partitions affected.
    double: (f64, usize),
    broker_cpu: f64,
    load: String,
    /// Heartbeats per second per member from `go` until stable (the join's
    /// rebalance), NaN on tansu and for native members (pinged by the coordinator).
    hb_rebalance: f64,
    /// Heartbeats per second per member in the steady state: from 1 s after stable
    /// until the leave, NaN on tansu.
    hb_steady: f64,
    /// Heartbeats per second per survivor from the leave until recovered, NaN on tansu.
    hb_recovery: f64,
}

struct Ctx<'a> {
    o: &'a Options,
    python: PathBuf,
    logs: PathBuf,
}

fn stop_members(members: &mut [Member], rx: &mpsc::Receiver<Msg>) {
    for m in members.iter_mut() {
        m.send("close");
        m.stdin = None;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for m in members.iter_mut() {
        loop {
            match m.child.try_wait() {
                Ok(Some(_)) => break,
                _ if Instant::now() > deadline => {
                    let _ = m.child.kill();
                    let _ = m.child.wait();
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    while rx.try_recv().is_ok() {}
}

#[allow(clippy::too_many_arguments)]
fn run_once(
    ctx: &Ctx,
    variant: &Variant,
    broker: &Broker,
    topic: &str,
    members_n: usize,
    partitions: usize,
    round: usize,
) -> Result<RunResult, String> {
    let o = ctx.o;
    let group_id = format!("rb-{}-m{members_n}-r{round}", variant.key);
    let run_dir = ctx.logs.join(&group_id);
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let (tx, rx) = mpsc::channel();
    let mut members: Vec<Member> = (0..members_n)
        .map(|i| {
            spawn_member(
                i,
                variant,
                &ctx.python,
                &broker.addr,
                topic,
                &group_id,
                &run_dir,
                &o.ck_set,
                &tx,
            )
        })
        .collect();
    drop(tx);
    let mut group = Group::new(members_n, partitions);
    let result = (|| {
        // Every member prepared (Python imported, client created).
        let ready_by = Instant::now() + Duration::from_secs(180);
        let mut ready = 0;
        while ready < members_n {
            let wait = ready_by.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok((m, Some(v))) => {
                    if v["ev"] == "ready" {
                        ready += 1;
                    }
                    group.apply(m, &v);
                }
                Ok((m, None)) => {
                    return Err(format!(
                        "member {m} exited before ready:\n{}",
                        tail(&members[m].stderr, 20)
                    ))
                }
                Err(_) => return Err(format!("only {ready} of {members_n} members ready")),
            }
        }
        // Let the start-up burst of the member processes pass.
        std::thread::sleep(Duration::from_millis(1500));
        let load = load_average();
        let pid = broker.child.id();
        let cpu0 = process_cpu(pid);
        let sampler = match variant.client {
            ClientKind::Native => None,
            _ => broker.admin.as_deref().map(HeartbeatSampler::start),
        };
        std::thread::sleep(Duration::from_millis(100));
        let go = mono();
        for m in members.iter_mut() {
            m.send("go");
        }
        let stable = watch(
            &mut group,
            &members,
            &rx,
            o.quiet,
            Instant::now() + o.timeout,
            None,
        )
        .map_err(|e| format!("joining: {e}"))?;
        let stable_at = stable.last_change.ok_or("no assignment at all")?;
        let first_complete = stable.first_complete.unwrap_or(stable_at);
        // The last member leaves cleanly. The members' heartbeats started together, so
        // a leave a fixed time after the last change would always meet them at the same
        // phase: round r waits (r + 1/2) / rounds of the jitter on top of the quiet time.
        let jitter = Duration::from_millis(
            ((round as f64 + 0.5) / o.repeat as f64 * o.leave_jitter_ms as f64) as u64,
        );
        std::thread::sleep(jitter);
        let leaver = members_n - 1;
        group.active[leaver] = false;
        let sent = mono();
        members[leaver].send("close");
        let recovery = watch(
            &mut group,
            &members,
            &rx,
            o.quiet,
            Instant::now() + o.timeout,
            Some(leaver),
        )
        .map_err(|e| format!("after member {leaver} left: {e}"))?;
        let cpu1 = process_cpu(pid);
        let closing = group.marks[leaver].get("closing").copied().unwrap_or(sent);
        let closed = group.marks[leaver].get("closed").copied();
        let recovered_at = recovery
            .first_complete
            .ok_or("the survivors never held every partition")?;
        let settled_at = recovery.last_change.unwrap_or(recovered_at);
        // The last samples must cover the recovery.
        std::thread::sleep(Duration::from_millis(100));
        let rate = |from: f64, to: f64, n: usize| {
            sampler.as_ref().map_or(f64::NAN, |s| s.rate(from, to, n))
        };
        let hb_rebalance = rate(go, stable_at, members_n);
        let hb_steady = rate(stable_at + 1.0, sent, members_n);
        let hb_recovery = rate(closing, recovered_at, members_n - 1);
        Ok(RunResult {
            stable: stable_at - go,
            first_complete: first_complete - go,
            recovered: recovered_at - closing,
            settled: settled_at - closing,
            leave_close: closed.map_or(f64::NAN, |c| c - closing),
            jitter,
            max_callbacks: group.callbacks.iter().copied().max().unwrap_or(0),
            double: group.double_ownership(),
            broker_cpu: cpu1 - cpu0,
            load,
            hb_rebalance,
            hb_steady,
            hb_recovery,
        })
    })();
    stop_members(&mut members, &rx);
    if result.is_ok() && !o.keep_logs {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    result
}

// ------------------------------------------------------------------------------------
// Report
// ------------------------------------------------------------------------------------

/// "median (min–max)" of `values` (seconds) in milliseconds, or in seconds with two
/// decimals when `seconds`.
fn median_range(values: &[f64], seconds: bool) -> String {
    if values.is_empty() {
        return "-".into();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    let f = |s: f64| {
        if seconds {
            format!("{s:.2}")
        } else {
            format!("{:.0}", s * 1e3)
        }
    };
    if v.len() == 1 {
        f(median)
    } else {
        format!("{} ({}–{})", f(median), f(v[0]), f(v[v.len() - 1]))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--native-member") {
        native_member(&args);
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // `cargo test --benches` / `--all-targets` runs bench binaries without `--bench`:
        // this one starts brokers and a hundred processes for half an hour, so only
        // `cargo bench` (or `--bench` by hand) runs it.
        println!("group_rebalance: skipped (run it with `cargo bench`)");
        return;
    }
    let o = options(&args);
    let python = python();
    let wants = |key: &str| o.only.as_ref().is_none_or(|l| l.iter().any(|x| x == key));
    let variants: Vec<&Variant> = VARIANTS.iter().filter(|v| wants(v.key)).collect();
    let logs = tempfile::Builder::new()
        .prefix("drover-group-rebalance-")
        .tempdir()
        .expect("log dir")
        .keep();
    let ctx = Ctx {
        o: &o,
        python,
        logs: logs.clone(),
    };
    println!(
        "group rebalance bench: members {:?}, {} partitions per member, {} rounds, quiet \
         {} ms, logs in {}",
        o.members,
        o.partitions_per_member,
        o.repeat,
        o.quiet.as_millis(),
        logs.display()
    );

    // Brokers: every one the chosen variants need, all up for the whole run.
    let dir = PluginDir::new();
    for lib in [
        "drover_coordinator",
        "drover_assignor_sticky",
        "drover_assignor_range",
        "drover_assignor_round_robin",
        "drover_offsets_embedded",
    ] {
        dir.add_built(lib);
    }
    let extra: String = o
        .coordinator_set
        .iter()
        .map(|kv| format!("{kv}\n"))
        .collect();
    let mut brokers: BTreeMap<BrokerKind, Broker> = BTreeMap::new();
    let mut skipped: Vec<String> = Vec::new();
    let kinds: BTreeSet<BrokerKind> = variants.iter().map(|v| v.broker).collect();
    for kind in kinds {
        match kind {
            BrokerKind::Drover => {
                let b = start_drover(&dir, &logs, "drover", &extra);
                println!("drover (coordinator defaults) on {}", b.addr);
                brokers.insert(kind, b);
            }
            BrokerKind::DroverKafkaTimers => {
                let timers = "initial_rebalance_quiet_ms = 3000\n\
                              consumer_reconcile_heartbeat_interval_ms = 5000\n\
                              consumer_heartbeat_budget_per_s = 0\n\
                              rebalance_quiet_ms = 300\n";
                let b = start_drover(
                    &dir,
                    &logs,
                    "drover-kafka-timers",
                    &format!("{timers}{extra}"),
                );
                println!(
                    "drover (Kafka's timers: {}) on {}",
                    timers.replace('\n', ", "),
                    b.addr
                );
                brokers.insert(kind, b);
            }
            BrokerKind::DroverNoDelay => {
                let b = start_drover(
                    &dir,
                    &logs,
                    "drover-delay0",
                    &format!("initial_rebalance_delay_ms = 0\nrebalance_delay_ms = 0\n{extra}"),
                );
                println!(
                    "drover (initial_rebalance_delay_ms = 0, rebalance_delay_ms = 0) on {}",
                    b.addr
                );
                brokers.insert(kind, b);
            }
            BrokerKind::Tansu => match &o.tansu {
                Some(path) if path.is_file() => match start_tansu(path, &logs) {
                    Ok(b) => {
                        println!("tansu ({}) on {}", path.display(), b.addr);
                        brokers.insert(kind, b);
                    }
                    Err(e) => skipped.push(format!("tansu: {e}")),
                },
                Some(path) => skipped.push(format!(
                    "tansu: {} not found (install it, or pass --tansu PATH)",
                    path.display()
                )),
                None => skipped.push("tansu: --no-tansu".into()),
            },
        }
    }
    for s in &skipped {
        println!("skipped: {s}");
    }

    // Topics: one per broker and group size, of partitions_per_member * M partitions.
    let mut topics: BTreeMap<(BrokerKind, usize), Result<String, String>> = BTreeMap::new();
    for (kind, broker) in &brokers {
        for &m in &o.members {
            let topic = format!("rebalance-{m}");
            let created = create_topic(
                &ctx.python,
                &broker.addr,
                &topic,
                m * o.partitions_per_member,
            )
            .map(|()| topic);
            if let Err(e) = &created {
                println!("{kind:?}: {e}");
            }
            topics.insert((*kind, m), created);
        }
    }

    let mut results: BTreeMap<(usize, usize), Vec<RunResult>> = BTreeMap::new();
    let mut failures: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
    for round in 0..o.repeat {
        for &m in &o.members {
            for (vi, variant) in variants.iter().enumerate() {
                let Some(broker) = brokers.get(&variant.broker) else {
                    continue;
                };
                let topic = match &topics[&(variant.broker, m)] {
                    Ok(t) => t.clone(),
                    Err(e) => {
                        failures.entry((vi, m)).or_default().push(e.clone());
                        continue;
                    }
                };
                let p = m * o.partitions_per_member;
                match run_once(&ctx, variant, broker, &topic, m, p, round) {
                    Ok(r) => {
                        println!(
                            "round {round} M={m} {}: stable {:.0} ms (all owned {:.0}), \
                             leave {} ms later: recovered {:.0} ms, settled {:.0} ms, leaver's \
                             close() {:.0} ms, max callbacks/member {}, double ownership {} \
                             partitions (longest {:.0} ms), broker CPU {:.2} s, heartbeats/s per \
                             member: joining {:.2}, steady {:.2}, recovering {:.2}, load {}",
                            variant.key,
                            r.stable * 1e3,
                            r.first_complete * 1e3,
                            (o.quiet + r.jitter).as_millis(),
                            r.recovered * 1e3,
                            r.settled * 1e3,
                            r.leave_close * 1e3,
                            r.max_callbacks,
                            r.double.1,
                            r.double.0 * 1e3,
                            r.broker_cpu,
                            r.hb_rebalance,
                            r.hb_steady,
                            r.hb_recovery,
                            r.load
                        );
                        results.entry((vi, m)).or_default().push(r);
                    }
                    Err(e) => {
                        println!("round {round} M={m} {}: FAILED: {e}", variant.key);
                        failures.entry((vi, m)).or_default().push(e);
                    }
                }
                std::thread::sleep(Duration::from_secs(2));
            }
        }
    }

    println!(
        "\nmilliseconds, median (min–max) of the successful rounds; P = {} × M partitions",
        o.partitions_per_member
    );
    println!(
        "{:<60} {:>4} {:>20} {:>20} {:>20} {:>20} {:>14} {:>5}",
        "variant", "M", "all owned", "stable", "recovered", "settled", "leaver close()", "fails"
    );
    for &m in &o.members {
        for (vi, variant) in variants.iter().enumerate() {
            let rs = results.get(&(vi, m)).map(Vec::as_slice).unwrap_or(&[]);
            let fails = failures.get(&(vi, m)).map_or(0, Vec::len);
            if rs.is_empty() && fails == 0 {
                continue;
            }
            let col = |f: fn(&RunResult) -> f64| {
                median_range(&rs.iter().map(f).collect::<Vec<_>>(), false)
            };
            println!(
                "{:<60} {:>4} {:>20} {:>20} {:>20} {:>20} {:>14} {:>5}",
                variant.label,
                m,
                col(|r| r.first_complete),
                col(|r| r.stable),
                col(|r| r.recovered),
                col(|r| r.settled),
                col(|r| r.leave_close),
                fails
            );
        }
    }
    let mut any_failure = false;
    for ((vi, m), errors) in &failures {
        any_failure = true;
        for e in errors {
            println!("FAILED {} M={m}: {e}", variants[*vi].key);
        }
    }
    let cpu: Vec<String> = results
        .iter()
        .map(|((vi, m), rs)| {
            format!(
                "{} M={m}: broker CPU {}",
                variants[*vi].key,
                median_range(&rs.iter().map(|r| r.broker_cpu).collect::<Vec<_>>(), true)
            )
        })
        .collect();
    println!("\ndouble ownership (a partition held by two members at once, member clocks):");
    for ((vi, m), rs) in &results {
        let runs = rs.iter().filter(|r| r.double.1 > 0).count();
        if runs > 0 {
            let longest = rs.iter().map(|r| r.double.0).fold(0.0, f64::max);
            let most = rs.iter().map(|r| r.double.1).max().unwrap_or(0);
            println!(
                "  {} M={m}: in {runs} of {} rounds, up to {most} partitions, longest {:.0} ms",
                variants[*vi].key,
                rs.len(),
                longest * 1e3
            );
        }
    }
    println!(
        "\nheartbeats per second per member (Drover), median (min–max): joining (go to \
         stable), steady (stable + 1 s to the leave), recovering (leave to recovered):"
    );
    for ((vi, m), rs) in &results {
        let col = |f: fn(&RunResult) -> f64| {
            let v: Vec<f64> = rs.iter().map(f).filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                return "-".to_owned();
            }
            // Two decimals: reuse median_range's seconds format.
            median_range(&v, true)
        };
        println!(
            "  {} M={m}: joining {}, steady {}, recovering {}",
            variants[*vi].key,
            col(|r| r.hb_rebalance),
            col(|r| r.hb_steady),
            col(|r| r.hb_recovery)
        );
    }
    println!("\nbroker CPU seconds from go to the end of the recovery, median (min–max):");
    for c in cpu {
        println!("  {c}");
    }
    println!("load average at the end: {}", load_average());
    for (kind, broker) in &brokers {
        println!("{kind:?} log: {}", broker.log.display());
    }
    drop(brokers);
    if any_failure || o.keep_logs {
        println!("logs kept in {}", logs.display());
    } else {
        let _ = std::fs::remove_dir_all(&logs);
    }
}
