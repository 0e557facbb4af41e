//! Offset-store load benchmark (issue 6), through the loaded `.so` of each store:
//!
//! 1. **Commits**: K committer threads call `commit` with batches of B records for a few
//!    seconds; prints offsets and commit calls per second and the p50/p99 latency of
//!    one commit call, per store, K and B.
//! 2. **Swap copy**: the broker's swap copy loop (host/src/offsets/swap.rs `copy`: a
//!    count pass of `scan` pages, then one `commit` into the new store per `scan` page
//!    of the old one, pages of 1,000, then `flush`) over N stored offsets, along
//!    embedded → zookeeper → postgres → embedded; prints each pass's duration.
//!
//! The ZooKeeper and PostgreSQL servers are the test kit's, dedicated to the run and
//! durable: ZooKeeper with its default `forceSync` (the transaction log is fsynced
//! before a write is acknowledged) and a 2 GiB heap (`--zk-heap`) for a million nodes,
//! PostgreSQL with `fsync`, `full_page_writes` and `synchronous_commit` on (the test
//! defaults turn the first two off). The embedded store commits with
//! `Durability::Immediate`. Store files and server data live in temporary directories
//! removed at exit.
//!
//! ```text
//! cargo bench -p drover-tests --bench offset_store_load -- [--stores embedded,zookeeper,postgres]
//!     [--threads 1,8] [--batches 1,100,10000] [--seconds 3] [--warmup 0.5]
//!     [--swap-groups 1000] [--swap-partitions 1000] [--zk-heap 2g]
//!     [--no-commits] [--no-swap]
//! ```
//!
//! `--stores` selects the stores of the commit part; the swap part always runs the chain
//! of all three. Figures go in docs/benchmarks.md.

use std::{
    io::{Read, Write},
    net::TcpStream,
    sync::{
        atomic::{AtomicU64, Ordering},
        Barrier, Mutex,
    },
    time::{Duration, Instant},
};

use drover_abi::{std_types::RString, OffsetKey, OffsetRecord};
use drover_host::plugins::OffsetStoreHandle;
use drover_tests::{
    built_library, open_store,
    services::{postgres::PgServer, zookeeper::ZkServer},
    PluginDir, OFFSET_STORES,
};

/// Offsets per page of the swap copy (host/src/offsets/swap.rs `PAGE`).
const SWAP_PAGE: u32 = 1_000;
/// Records per `commit` when seeding the first store of the swap chain.
const SEED_BATCH: usize = 10_000;
/// A measurement goes on past `--seconds` until it has this many commit calls...
const MIN_CALLS: u64 = 20;
/// ... but not past this.
const MAX_SECONDS: f64 = 30.0;

struct Options {
    stores: Vec<String>,
    threads: Vec<usize>,
    batches: Vec<usize>,
    seconds: f64,
    warmup: f64,
    swap_groups: usize,
    swap_partitions: usize,
    zk_heap: String,
    commits: bool,
    swap: bool,
}

fn list<T: std::str::FromStr>(arg: &str, value: &str) -> Vec<T> {
    value
        .split(',')
        .map(|v| {
            v.trim()
                .replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{arg}: cannot parse {v:?}"))
        })
        .collect()
}

fn options() -> Options {
    let mut o = Options {
        stores: OFFSET_STORES.iter().map(|(_, n)| n.to_string()).collect(),
        threads: vec![1, 8],
        batches: vec![1, 100, 10_000],
        seconds: 3.0,
        warmup: 0.5,
        swap_groups: 1_000,
        swap_partitions: 1_000,
        zk_heap: "2g".into(),
        commits: true,
        swap: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--stores" => o.stores = list(&arg, &value()),
            "--threads" => o.threads = list(&arg, &value()),
            "--batches" => o.batches = list(&arg, &value()),
            "--seconds" => o.seconds = value().parse().expect("--seconds S"),
            "--warmup" => o.warmup = value().parse().expect("--warmup S"),
            "--swap-groups" => o.swap_groups = value().parse().expect("--swap-groups N"),
            "--swap-partitions" => {
                o.swap_partitions = value().parse().expect("--swap-partitions N")
            }
            "--zk-heap" => o.zk_heap = value(),
            "--no-commits" => o.commits = false,
            "--no-swap" => o.swap = false,
            other => panic!("unknown argument {other}"),
        }
    }
    for s in &o.stores {
        assert!(
            OFFSET_STORES.iter().any(|(_, n)| n == s),
            "unknown store {s:?}"
        );
    }
    o
}

/// The dedicated servers of the run, started on first use.
struct Servers {
    zk_heap: String,
    zk: Option<ZkServer>,
    pg: Option<PgServer>,
}

impl Servers {
    fn zk(&mut self) -> &ZkServer {
        let heap = format!("-Xmx{}", self.zk_heap);
        self.zk.get_or_insert_with(|| {
            // The full JIT (the test default stops at C1 for a faster start).
            ZkServer::start_with_java_options(&[&heap, "-XX:TieredStopAtLevel=4"])
        })
    }

    fn pg(&mut self) -> &PgServer {
        self.pg.get_or_insert_with(|| {
            PgServer::start_with_settings(&[
                ("fsync", "on"),
                ("full_page_writes", "on"),
                ("synchronous_commit", "on"),
                ("shared_buffers", "128MB"),
            ])
        })
    }
}

/// An open store with the plugin directory it was loaded from (and, for `embedded`,
/// its database file).
struct Open {
    name: String,
    store: OffsetStoreHandle,
    _dir: PluginDir,
}

impl Open {
    fn new(servers: &mut Servers, name: &str) -> Open {
        let (lib, _) = OFFSET_STORES
            .iter()
            .find(|(_, n)| *n == name)
            .expect("known store");
        let dir = PluginDir::new();
        let config = match name {
            "embedded" => format!(
                "path = {:?}\n",
                dir.scratch("offsets.redb").display().to_string()
            ),
            "zookeeper" => servers.zk().store_config(),
            "postgres" => servers.pg().store_config(),
            other => panic!("no config for {other}"),
        };
        let store = open_store(&dir, lib, &config);
        Open {
            name: name.to_owned(),
            store,
            _dir: dir,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Err(e) = self.store.close() {
            eprintln!("closing {}: {e}", self.name);
        }
    }
}

fn record(group: String, partition: i32, offset: i64) -> OffsetRecord {
    OffsetRecord {
        group: RString::from(group),
        topic: RString::from("orders"),
        partition,
        offset,
        metadata: RString::new(),
        commit_time_ms: 1_764_000_000_000 + offset,
    }
}

struct Measurement {
    calls: u64,
    records: u64,
    elapsed: Duration,
    /// Latency of every counted call, sorted.
    latencies: Vec<Duration>,
}

impl Measurement {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((self.latencies.len() as f64) * p / 100.0).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }
}

/// `threads` threads commit batches of `batch` records (thread `t` owns the groups
/// `k<threads>-b<batch>-t<t>-g<0..100>`, topic `orders`, partitions `0..batch/100`;
/// every call commits the next offset for all of them). Calls that complete after the
/// warm-up count; each thread stops calling once `seconds` have passed (and at least
/// [`MIN_CALLS`] calls were counted). Throughput is over the span from the end of the
/// warm-up to the last call's return.
fn measure(store: &OffsetStoreHandle, threads: usize, batch: usize, o: &Options) -> Measurement {
    let barrier = Barrier::new(threads);
    let counted = AtomicU64::new(0);
    let results = Mutex::new((0u64, 0u64, Vec::new(), Vec::new()));
    let origin = Instant::now();
    let warmup = Duration::from_secs_f64(o.warmup);
    let run = Duration::from_secs_f64(o.seconds);
    let max = Duration::from_secs_f64(MAX_SECONDS.max(o.seconds));
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, counted, results) = (&barrier, &counted, &results);
            s.spawn(move || {
                let mut records: Vec<OffsetRecord> = (0..batch)
                    .map(|i| {
                        record(
                            format!("k{threads}-b{batch}-t{t}-g{:03}", i % 100),
                            (i / 100) as i32,
                            0,
                        )
                    })
                    .collect();
                let mut offset = 0i64;
                let (mut calls, mut committed) = (0u64, 0u64);
                let mut latencies = Vec::new();
                barrier.wait();
                let start = Instant::now();
                let mut last = start;
                loop {
                    let now = start.elapsed();
                    if now >= max
                        || (now >= warmup + run && counted.load(Ordering::Relaxed) >= MIN_CALLS)
                    {
                        break;
                    }
                    offset += 1;
                    for r in &mut records {
                        r.offset = offset;
                        r.commit_time_ms = offset;
                    }
                    let called = Instant::now();
                    store
                        .commit(&records)
                        .unwrap_or_else(|e| panic!("commit: {e}"));
                    last = Instant::now();
                    if last - start >= warmup {
                        calls += 1;
                        committed += batch as u64;
                        counted.fetch_add(1, Ordering::Relaxed);
                        latencies.push(last - called);
                    }
                }
                let mut r = results.lock().unwrap();
                r.0 += calls;
                r.1 += committed;
                r.2.extend(latencies);
                r.3.push((start, last));
            });
        }
    });
    let (calls, records, mut latencies, spans) = results.into_inner().unwrap();
    latencies.sort_unstable();
    let from = spans.iter().map(|(s, _)| *s).min().unwrap_or(origin) + warmup;
    let to = spans.iter().map(|(_, l)| *l).max().unwrap_or(from);
    Measurement {
        calls,
        records,
        elapsed: to.saturating_duration_since(from),
        latencies,
    }
}

fn per_second(n: u64, d: Duration) -> String {
    if d.is_zero() {
        return "-".into();
    }
    thousands((n as f64 / d.as_secs_f64()).round() as u64)
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn commits(servers: &mut Servers, o: &Options) {
    println!(
        "## Commits (durable), {} s per row after {} s warm-up",
        o.seconds, o.warmup
    );
    println!();
    println!(
        "| store | threads | batch | offsets/s | commit calls/s | p50 call | p99 call | calls |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for name in &o.stores {
        let open = Open::new(servers, name);
        for &threads in &o.threads {
            for &batch in &o.batches {
                let m = measure(&open.store, threads, batch, o);
                println!(
                    "| {name} | {threads} | {} | {} | {} | {} | {} | {} |",
                    thousands(batch as u64),
                    per_second(m.records, m.elapsed),
                    per_second(m.calls, m.elapsed),
                    ms(m.percentile(50.0)),
                    ms(m.percentile(99.0)),
                    m.calls,
                );
            }
        }
    }
    println!();
}

/// What one copy found: offsets, and a checksum of keys and offsets (order-independent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Tally {
    offsets: u64,
    checksum: u64,
}

impl Tally {
    fn add(&mut self, r: &OffsetRecord) {
        use std::{
            collections::hash_map::DefaultHasher,
            hash::{BuildHasher, BuildHasherDefault},
        };
        let key = (r.group.as_str(), r.topic.as_str(), r.partition, r.offset);
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        self.offsets += 1;
        self.checksum = self.checksum.wrapping_add(hash);
    }
}

struct CopyTimes {
    count: Duration,
    copy: Duration,
    /// Of `copy`: in `scan` of the old store, and in `commit` to the new one.
    copy_scans: Duration,
    copy_commits: Duration,
    flush: Duration,
    tally: Tally,
}

/// The swap's copy (host/src/offsets/swap.rs `copy`, without the dual-write gate): a
/// count pass, then page by page scan `old` and commit into `new`, then flush `new`.
fn copy(old: &OffsetStoreHandle, new: &OffsetStoreHandle) -> CopyTimes {
    let started = Instant::now();
    let mut total = 0u64;
    let mut after: Option<OffsetKey> = None;
    loop {
        let page = old.scan(after.take(), SWAP_PAGE).expect("count scan");
        let Some(last) = page.last() else { break };
        total += page.len() as u64;
        after = Some(last.key());
    }
    let count = started.elapsed();
    let started = Instant::now();
    let mut tally = Tally::default();
    let (mut copy_scans, mut copy_commits) = (Duration::ZERO, Duration::ZERO);
    let mut after: Option<OffsetKey> = None;
    loop {
        let scanned = Instant::now();
        let page = old.scan(after.take(), SWAP_PAGE).expect("copy scan");
        copy_scans += scanned.elapsed();
        let Some(last) = page.last() else { break };
        after = Some(last.key());
        let committed = Instant::now();
        new.commit(&page).expect("copy commit");
        copy_commits += committed.elapsed();
        page.iter().for_each(|r| tally.add(r));
    }
    let copy = started.elapsed();
    let started = Instant::now();
    new.flush().expect("flush");
    let flush = started.elapsed();
    assert_eq!(total, tally.offsets, "count pass and copy pass disagree");
    CopyTimes {
        count,
        copy,
        copy_scans,
        copy_commits,
        flush,
        tally,
    }
}

/// ZooKeeper's `mntr` figures (znode count, approximate data size), when it answers.
fn zk_mntr(zk: &ZkServer) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", zk.port())) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut answer = String::new();
    if stream.write_all(b"mntr").is_err() || stream.read_to_string(&mut answer).is_err() {
        return String::new();
    }
    answer
        .lines()
        .filter(|l| l.starts_with("zk_znode_count") || l.starts_with("zk_approximate_data_size"))
        .map(|l| l.replace('\t', " = "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resident memory of processes whose command line mentions `needle` (the server's
/// data directory), in MiB.
fn rss_mib(needle: &str) -> u64 {
    let mut kib = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(needle) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        kib += status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    kib / 1024
}

fn swap(servers: &mut Servers, o: &Options) {
    let n = (o.swap_groups * o.swap_partitions) as u64;
    println!(
        "## Swap copy of {} offsets ({} groups x {} partitions of one topic), pages of {}",
        thousands(n),
        thousands(o.swap_groups as u64),
        thousands(o.swap_partitions as u64),
        SWAP_PAGE
    );
    println!();
    let chain = ["embedded", "zookeeper", "postgres", "embedded"];
    let seed = Open::new(servers, chain[0]);
    let started = Instant::now();
    let mut expected = Tally::default();
    let mut batch = Vec::with_capacity(SEED_BATCH);
    for g in 0..o.swap_groups {
        for p in 0..o.swap_partitions {
            let r = record(
                format!("swap-g{g:05}"),
                p as i32,
                (g * o.swap_partitions + p) as i64 * 7 + 1,
            );
            expected.add(&r);
            batch.push(r);
            if batch.len() == SEED_BATCH {
                seed.store.commit(&batch).expect("seed commit");
                batch.clear();
            }
        }
    }
    if !batch.is_empty() {
        seed.store.commit(&batch).expect("seed commit");
    }
    println!(
        "seeded `embedded` with {} offsets in commits of {}: {:.1} s",
        thousands(n),
        thousands(SEED_BATCH as u64),
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| from → to | count pass | copy pass (scans + commits) | flush | total | offsets/s \
         (copy) |"
    );
    println!("|---|---|---|---|---|---|");
    let mut old = seed;
    let mut notes = Vec::new();
    for to in &chain[1..] {
        let new = Open::new(servers, to);
        let t = copy(&old.store, &new.store);
        assert_eq!(
            t.tally, expected,
            "{} → {to}: copied data differs",
            old.name
        );
        let total = t.count + t.copy + t.flush;
        println!(
            "| {} → {to} | {:.1} s | {:.1} s ({:.1} + {:.1}) | {} | {:.1} s | {} |",
            old.name,
            t.count.as_secs_f64(),
            t.copy.as_secs_f64(),
            t.copy_scans.as_secs_f64(),
            t.copy_commits.as_secs_f64(),
            ms(t.flush),
            total.as_secs_f64(),
            per_second(t.tally.offsets, t.copy),
        );
        if *to == "zookeeper" {
            let zk = servers.zk();
            notes.push(format!(
                "zookeeper after the copy: {}; server RSS {} MiB",
                zk_mntr(zk),
                rss_mib(&zk.dir().display().to_string())
            ));
        }
        old = new;
    }
    println!();
    for note in notes {
        println!("{note}");
    }
    println!("every hop copied the seeded offsets exactly (count and checksum)");
    println!();
}

/// Copies the built store plugins into a private directory and points the test kit at
/// it (`DROVER_PLUGIN_BUILD_DIR`), so that a build running meanwhile in the shared target
/// directory cannot replace or remove them under the bench.
fn pin_plugins() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (lib, _) in OFFSET_STORES {
        let file = format!("lib{lib}.so");
        std::fs::copy(built_library(lib), dir.path().join(&file)).expect("copy plugin");
    }
    std::env::set_var("DROVER_PLUGIN_BUILD_DIR", dir.path());
    dir
}

/// Latency of a 4 KiB write plus `fdatasync` on the disk holding the temp directory
/// (where the embedded store and the servers keep their files): p50 and p99 of 200.
fn fsync_probe() -> (Duration, Duration) {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = std::fs::File::create(dir.path().join("probe")).expect("probe file");
    let block = [7u8; 4096];
    let mut times: Vec<Duration> = (0..200u64)
        .map(|i| {
            let t = Instant::now();
            file.write_all_at(&block, (i % 16) * 4096).expect("write");
            file.sync_data().expect("fdatasync");
            t.elapsed()
        })
        .collect();
    times.sort_unstable();
    (times[99], times[197])
}

fn main() {
    let o = options();
    let _plugins = pin_plugins();
    let (p50, p99) = fsync_probe();
    println!(
        "fsync probe (4 KiB write + fdatasync in the temp dir): p50 {}, p99 {}",
        ms(p50),
        ms(p99)
    );
    println!();
    let mut servers = Servers {
        zk_heap: o.zk_heap.clone(),
        zk: None,
        pg: None,
    };
    if o.commits {
        commits(&mut servers, &o);
    }
    if o.swap {
        swap(&mut servers, &o);
    }
}
