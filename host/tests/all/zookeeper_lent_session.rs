//! The `zookeeper` offset store over the broker's own ZooKeeper session, as in cluster
//! mode: a real broker (`serve::start` with `[zookeeper] enabled`) against a real
//! ZooKeeper server from the testkit, its lent session
//! (`cluster::session::for_plugins`, what the host puts in `HostServices.zookeeper`),
//! and the store's `.so` loaded through the host's loader and opened with that session
//! and a config without `connect`.
//!
//! - the offset-store conformance checks (the cases of
//!   tests/conformance/tests/offset_store_conformance.rs: round trip with metadata up to
//!   the configured maximum, unknown group, delete and list groups, a 100,000-offset
//!   batch with a paginated full scan, 8 concurrent committers, calls after close) pass
//!   over the lent session;
//! - the nodes are where the docs say: `<broker chroot>/consumers/...` by default, and
//!   `<broker chroot><chroot>/consumers/...` with a `chroot`;
//! - a lent session whose broker is not connected (yet) fails calls with `Unavailable`
//!   within the broker's session timeout, without hanging;
//! - ZooKeeper stopped under the store: calls fail with `Unavailable`; after the
//!   session expired and ZooKeeper is back, the same store works again over the
//!   broker's new session.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use drover_abi::{
    host::ZkSessionArc, std_types::RString, ErrorKind, OffsetKey, OffsetRecord, PluginKind,
    TopicPartitions,
};
use drover_host::{
    cluster::{session, BrokerAddr, Cluster},
    config::ZookeeperSection,
    plugins::{CallError, OffsetStoreHandle},
    serve::Running,
};
use drover_tests::{
    cluster_broker,
    services::zookeeper::{unique_chroot, ZkServer},
    PluginDir,
};
use zookeeper_client as zk;

/// The broker's session timeout in the outage test, ms (the test server allows 1–10 s):
/// short, so the test waits little for the session to be given up.
const SESSION_TIMEOUT_MS: u64 = 2_000;
/// The broker's session timeout where nothing waits on it, ms: the client counts a
/// connection as lost after a fraction of the session timeout without a response, and
/// a 100,000-offset commit on two loaded cores took longer than 2 s's share (800 ms).
const RELAXED_SESSION_TIMEOUT_MS: u64 = 8_000;
/// The store's metadata limit in these tests.
const MAX_METADATA: usize = 1_000;

fn record(group: &str, topic: &str, partition: i32, offset: i64, metadata: &str) -> OffsetRecord {
    OffsetRecord {
        group: RString::from(group),
        topic: RString::from(topic),
        partition,
        offset,
        metadata: RString::from(metadata),
        commit_time_ms: 1_700_000_000_000 + offset,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A broker in cluster mode on `server`, in a chroot of its own, without plugins or
/// coordinator, with a ZooKeeper session of `session_timeout_ms`; returns it once its
/// session is up, with its chroot.
fn start_broker(
    rt: &tokio::runtime::Runtime,
    server: &ZkServer,
    root: &Path,
    session_timeout_ms: u64,
) -> (Running, String) {
    let chroot = unique_chroot("lent");
    let extra = format!("session_timeout_ms = {session_timeout_ms}\n");
    let running = cluster_broker::start(rt, &server.connect(), root, &chroot, 1, &extra);
    (running, chroot)
}

/// The broker's lent session.
fn lent_session(running: &Running) -> ZkSessionArc {
    session::for_plugins(running.broker.cluster().expect("cluster mode"))
}

/// Loads the built `zookeeper` store through the host loader and opens it with `config`
/// and the lent `session`.
fn open_lent(dir: &PluginDir, config: &str, session: &ZkSessionArc) -> OffsetStoreHandle {
    let path = dir.add_built("drover_offsets_zookeeper");
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::OffsetStore))
        .unwrap_or_else(|e| panic!("{e}"));
    plugin
        .open_offset_store_with(config, Some(session.clone()))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `f` with a raw client of `server` (to look at nodes by their absolute paths).
fn raw<T>(server: &ZkServer, f: impl AsyncFnOnce(&zk::Client) -> T) -> T {
    runtime().block_on(async {
        let client = zk::Client::connect(&server.connect()).await.unwrap();
        f(&client).await
    })
}

fn kind(err: &CallError) -> Option<ErrorKind> {
    match err {
        CallError::Plugin { error, .. } => Some(error.kind),
        _ => None,
    }
}

// The conformance checks, each against a fresh store (its own root below the chroot).

/// One conformance check.
type Check = fn(&OffsetStoreHandle);

fn round_trip_with_metadata(store: &OffsetStoreHandle) {
    let meta = "ünïcode metadata, and a long tail ".repeat(20);
    let longest = "m".repeat(MAX_METADATA);
    store
        .commit(&[
            record("g", "orders", 0, 42, &meta),
            record("g", "orders", 1, 7, ""),
            record("g", "orders", 0, 43, &meta), // a later record for the same key wins
            record("g", "orders", 3, 1, &longest),
        ])
        .unwrap();
    let got = store
        .fetch("g", &[TopicPartitions::new("orders", vec![0, 1, 2, 3])])
        .unwrap();
    assert_eq!(got.len(), 3, "partition 2 has no commit: {got:?}");
    assert_eq!(got[0], record("g", "orders", 0, 43, &meta));
    assert_eq!((got[1].offset, got[1].metadata.as_str()), (7, ""));
    assert_eq!(got[2], record("g", "orders", 3, 1, &longest));
    // One byte over the configured maximum refuses the whole batch.
    let err = store
        .commit(&[
            record("g", "orders", 4, 1, ""),
            record("g", "orders", 5, 1, &format!("{longest}x")),
        ])
        .unwrap_err();
    assert_eq!(kind(&err), Some(ErrorKind::InvalidInput), "{err}");
    assert!(store
        .fetch("g", &[TopicPartitions::new("orders", vec![4])])
        .unwrap()
        .is_empty());
}

fn unknown_group_is_empty(store: &OffsetStoreHandle) {
    store.commit(&[record("known", "t", 0, 1, "")]).unwrap();
    assert!(store.fetch_group("unknown").unwrap().is_empty());
    assert!(store
        .fetch("unknown", &[TopicPartitions::new("t", vec![0])])
        .unwrap()
        .is_empty());
}

fn delete_and_list_groups(store: &OffsetStoreHandle) {
    store
        .commit(&[
            record("b", "t", 0, 1, ""),
            record("a", "t", 0, 1, ""),
            record("a", "u", 3, 9, ""),
            record("c", "t", 1, 5, ""),
        ])
        .unwrap();
    assert_eq!(store.list_groups().unwrap(), vec!["a", "b", "c"]);
    assert_eq!(store.fetch_group("a").unwrap().len(), 2);
    assert_eq!(store.delete_group("a").unwrap(), 2);
    assert_eq!(store.list_groups().unwrap(), vec!["b", "c"]);
    assert!(store.fetch_group("a").unwrap().is_empty());
    assert_eq!(store.delete_group("a").unwrap(), 0);
}

fn a_100000_offset_batch_and_a_full_scan(store: &OffsetStoreHandle) {
    let batch: Vec<OffsetRecord> = (0..100_000)
        .map(|i| {
            record(
                &format!("g{:02}", i % 10),
                &format!("t{}", (i / 10) % 100),
                i / 1000,
                i64::from(i),
                "m",
            )
        })
        .collect();
    store.commit(&batch).unwrap();
    let expected: BTreeMap<OffsetKey, i64> = batch.iter().map(|r| (r.key(), r.offset)).collect();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store.scan(after.clone(), 7_777).unwrap();
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().key());
        seen.extend(page);
    }
    let keys: Vec<OffsetKey> = seen.iter().map(OffsetRecord::key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted, "scan is in key order without repeats");
    let got: BTreeMap<OffsetKey, i64> = seen.iter().map(|r| (r.key(), r.offset)).collect();
    assert_eq!(got, expected);
}

fn eight_threads_commit_concurrently(store: &OffsetStoreHandle) {
    std::thread::scope(|s| {
        for t in 0..8 {
            s.spawn(move || {
                for round in 1..=50i64 {
                    let batch: Vec<OffsetRecord> = (0..20)
                        .map(|p| record(&format!("group-{t}"), "t", p, round, ""))
                        .collect();
                    store.commit(&batch).unwrap();
                }
            });
        }
    });
    for t in 0..8 {
        let got = store.fetch_group(&format!("group-{t}")).unwrap();
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|r| r.offset == 50), "{got:?}");
    }
}

#[test]
fn conformance_over_the_brokers_session() {
    let server = ZkServer::shared();
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    let (running, chroot) = start_broker(&rt, server, root.path(), RELAXED_SESSION_TIMEOUT_MS);
    let session = lent_session(&running);
    assert_ne!(session.session_id(), 0, "the broker is connected");

    let checks: [(&str, Check); 5] = [
        ("round_trip_with_metadata", round_trip_with_metadata),
        ("unknown_group_is_empty", unknown_group_is_empty),
        ("delete_and_list_groups", delete_and_list_groups),
        (
            "a_100000_offset_batch_and_a_full_scan",
            a_100000_offset_batch_and_a_full_scan,
        ),
        (
            "eight_threads_commit_concurrently",
            eight_threads_commit_concurrently,
        ),
    ];
    for (name, check) in checks {
        let dir = PluginDir::new();
        // No `connect`: the store must use the broker's session.
        let config = format!("chroot = \"/{name}\"\nmax_metadata_bytes = {MAX_METADATA}\n");
        let store = open_lent(&dir, &config, &session);
        let started = Instant::now();
        check(&store);
        eprintln!("{name}: {:?}", started.elapsed());
        store.close().unwrap();
        // Calls after close fail cleanly; the broker's session stays open.
        let err = store.commit(&[record("g", "t", 0, 1, "")]).unwrap_err();
        assert_eq!(kind(&err), Some(ErrorKind::Closed), "{name}: {err}");
        assert_ne!(
            session.session_id(),
            0,
            "{name}: closing the store closed the session"
        );
    }

    // The nodes are below the broker's chroot: `<chroot>/<store root>/consumers/...`.
    let value = raw(server, async |c: &zk::Client| {
        c.get_data(&format!(
            "{chroot}/round_trip_with_metadata/consumers/g/offsets/orders/1"
        ))
        .await
        .map(|(data, _)| data)
    })
    .expect("the offset node below the broker's chroot");
    assert_eq!(
        String::from_utf8(value).unwrap(),
        r#"{"version":1,"offset":7,"metadata":"","commit_time_ms":1700000000007}"#
    );
    rt.block_on(running.stop());
}

#[test]
fn default_root_is_the_brokers_chroot_and_connect_is_ignored() {
    let server = ZkServer::shared();
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    let (running, chroot) = start_broker(&rt, server, root.path(), RELAXED_SESSION_TIMEOUT_MS);
    let session = lent_session(&running);
    let dir = PluginDir::new();
    // A `connect` naming nothing: ignored, the broker's session is used.
    let unreachable = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let store = open_lent(&dir, &format!("connect = \"{unreachable}\"\n"), &session);
    store
        .commit(&[record("orders-app", "orders", 2, 99, "meta")])
        .unwrap();
    let got = store.fetch_group("orders-app").unwrap();
    assert_eq!(got, vec![record("orders-app", "orders", 2, 99, "meta")]);
    let exists = raw(server, async |c: &zk::Client| {
        c.check_stat(&format!("{chroot}/consumers/orders-app/offsets/orders/2"))
            .await
            .unwrap()
            .is_some()
    });
    assert!(exists, "offsets at <broker chroot>/consumers/...");
    store.close().unwrap();
    rt.block_on(running.stop());
}

#[test]
fn a_session_not_connected_yet_fails_calls_within_the_session_timeout() {
    let rt = runtime();
    // A cluster member whose cluster task never runs: its lent session has no client.
    let cluster = {
        let _enter = rt.enter();
        Cluster::new(
            1,
            BrokerAddr {
                host: "127.0.0.1".into(),
                port: 9092,
                rack: None,
                endpoints: Default::default(),
            },
            ZookeeperSection {
                enabled: true,
                session_timeout_ms: 1_000,
                ..ZookeeperSection::default()
            },
        )
    };
    let session = session::for_plugins(&cluster);
    assert_eq!(session.session_id(), 0);
    let dir = PluginDir::new();
    // Opening makes no request: it succeeds before the broker is connected.
    let store = open_lent(&dir, "", &session);
    for call in ["commit", "fetch_group", "list_groups"] {
        let started = Instant::now();
        let result = match call {
            "commit" => store.commit(&[record("g", "t", 0, 1, "")]),
            "fetch_group" => store.fetch_group("g").map(drop),
            _ => store.list_groups().map(drop),
        };
        let took = started.elapsed();
        let err = result.unwrap_err();
        assert_eq!(kind(&err), Some(ErrorKind::Unavailable), "{call}: {err}");
        assert!(
            err.to_string().contains("no ZooKeeper session"),
            "{call}: {err}"
        );
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(4),
            "{call} took {took:?}"
        );
    }
    // Also from a runtime worker thread (the wait moves off the worker).
    let store = Arc::new(store);
    let on_worker = Arc::clone(&store);
    let err = rt
        .block_on(rt.spawn(async move { on_worker.list_groups() }))
        .unwrap()
        .unwrap_err();
    assert_eq!(kind(&err), Some(ErrorKind::Unavailable), "{err}");
    // And from a blocking-pool thread (where the admin API and retention call stores).
    let on_pool = Arc::clone(&store);
    let err = rt
        .block_on(rt.spawn_blocking(move || on_pool.fetch_group("g")))
        .unwrap()
        .unwrap_err();
    assert_eq!(kind(&err), Some(ErrorKind::Unavailable), "{err}");
    store.close().unwrap();
    drop(rt);
    // After the broker's runtime is gone, calls still fail cleanly.
    let store2 = open_lent(&dir, "", &session);
    let err = store2.list_groups().unwrap_err();
    assert_eq!(kind(&err), Some(ErrorKind::Unavailable), "{err}");
}

/// Retries `commit` until it succeeds (at most 45 s); every failure must be
/// `Unavailable`.
fn commit_when_back(store: &OffsetStoreHandle, batch: &[OffsetRecord]) {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        match store.commit(batch) {
            Ok(()) => return,
            Err(e) if kind(&e) == Some(ErrorKind::Unavailable) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("commit after ZooKeeper came back: {e}"),
        }
    }
}

#[test]
fn zookeeper_outage_and_session_expiry_under_the_store() {
    let server = ZkServer::start();
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    let (running, _chroot) = start_broker(&rt, &server, root.path(), SESSION_TIMEOUT_MS);
    let session = lent_session(&running);
    let dir = PluginDir::new();
    let store = open_lent(&dir, "", &session);
    store.commit(&[record("g", "t", 0, 1, "before")]).unwrap();
    let first_session = session.session_id();

    server.stop();
    let bound = Duration::from_millis(SESSION_TIMEOUT_MS) + Duration::from_secs(2);
    for _ in 0..2 {
        let started = Instant::now();
        let err = store
            .commit(&[record("outage", "t", 0, 9, "")])
            .unwrap_err();
        assert_eq!(kind(&err), Some(ErrorKind::Unavailable), "{err}");
        assert!(started.elapsed() <= bound, "took {:?}", started.elapsed());
        let err = store.fetch_group("g").unwrap_err();
        assert_eq!(kind(&err), Some(ErrorKind::Unavailable), "{err}");
    }
    // Long enough for the client to give the session up.
    std::thread::sleep(Duration::from_millis(SESSION_TIMEOUT_MS * 2));
    server.restart();
    commit_when_back(&store, &[record("g", "t", 1, 2, "after")]);
    let second_session = session.session_id();
    assert_ne!(second_session, 0);
    assert_ne!(
        second_session, first_session,
        "the broker registered again with a new session, and the lent object follows it"
    );
    let got: Vec<(i32, i64)> = store
        .fetch_group("g")
        .unwrap()
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect();
    assert_eq!(got, vec![(0, 1), (1, 2)]);
    store.close().unwrap();
    rt.block_on(running.stop());
}
