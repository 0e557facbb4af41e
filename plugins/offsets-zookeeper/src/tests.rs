//! Store-specific tests through the plugin type (the rlib), against a real ZooKeeper
//! server started by the testkit (the `.so` runs the shared conformance suite in
//! tests/conformance). What they add: names that need escaping, batches split into
//! several multis, values written by Kafka 0.8 and nodes of other tools, commits racing
//! deletes, and ZooKeeper going down and coming back under an open store.
//!
//! Most run twice: with the store's own session, and over a lent session (the ABI's
//! `ZkSession`, as the broker lends it in cluster mode; here a small test
//! implementation over a chrooted client standing for the broker's; the host's real
//! one is exercised in host/tests/all/zookeeper_lent_session.rs).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use abi_stable::sabi_trait::TD_Opaque;
use drover_abi::{
    host::{ZkCreateMode, ZkData, ZkOp, ZkSession, ZkSessionArc, ZkSession_TO},
    sdk::{OffsetStorePlugin, PluginContext},
    std_types::{RArc, ROption, RResult, RSlice, RStr, RString, RVec},
    ErrorKind, OffsetKey, OffsetRecord, PluginError, TopicPartitions,
};
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, MultiWriteError};

use crate::ZookeeperStore;

/// The testkit's ZooKeeper server (self-contained; shared with tests/conformance).
#[allow(dead_code)]
#[path = "../../../tests/conformance/src/services/zookeeper.rs"]
mod zk_server;

use zk_server::{unique_chroot, ZkServer};

fn open_on(server: &ZkServer, extra: &str) -> (ZookeeperStore, String) {
    let chroot = unique_chroot("zk-unit");
    let config = format!(
        "connect = '{}'\nchroot = '{chroot}'\n{extra}",
        server.connect()
    );
    let ctx = PluginContext {
        config,
        zookeeper: None,
    };
    (ZookeeperStore::open(&ctx).expect("open"), chroot)
}

fn open(extra: &str) -> (ZookeeperStore, String) {
    open_on(ZkServer::shared(), extra)
}

/// Which session a store under test uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Its own, from `connect`.
    Own,
    /// A lent one ([`TestSession`]), as in cluster mode.
    Lent,
}

const MODES: [Mode; 2] = [Mode::Own, Mode::Lent];

/// A store on the shared server in a chroot of its own, with `mode`'s session. Returns
/// the absolute path below which `consumers` lives.
fn open_in(mode: Mode, extra: &str) -> (ZookeeperStore, String) {
    match mode {
        Mode::Own => open(extra),
        Mode::Lent => {
            // The "broker's chroot"; the store's root defaults to it.
            let chroot = unique_chroot("zk-lent");
            let session = TestSession::connect(&ZkServer::shared().connect(), &chroot);
            let ctx = PluginContext {
                config: extra.to_owned(),
                zookeeper: Some(session),
            };
            (ZookeeperStore::open(&ctx).expect("open"), chroot)
        }
    }
}

/// A `ZkSession` over a chrooted client with a runtime of its own, mapping errors as
/// the host does (ZooKeeper's code; `Unavailable` for connection problems, else
/// `InvalidInput`).
struct TestSession {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl TestSession {
    fn connect(connect: &str, chroot: &str) -> ZkSessionArc {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let root = Client::connect(connect).await.unwrap();
            root.mkdir(
                chroot,
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap();
            root.chroot(chroot.to_owned()).unwrap()
        });
        RArc::new(ZkSession_TO::from_value(
            TestSession { runtime, client },
            TD_Opaque,
        ))
    }

    fn run<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, ZkError>>,
    ) -> RResult<T, PluginError> {
        self.runtime
            .block_on(request)
            .map_err(|e| {
                let kind = if crate::errors::is_unavailable(&e) {
                    ErrorKind::Unavailable
                } else {
                    ErrorKind::InvalidInput
                };
                PluginError::new(kind, format!("ZooKeeper: {e}"))
                    .with_code(crate::errors::zk_code(&e))
            })
            .into()
    }
}

fn opts(mode: ZkCreateMode) -> zookeeper_client::CreateOptions<'static> {
    let mode = match mode {
        ZkCreateMode::Persistent => CreateMode::Persistent,
        ZkCreateMode::Ephemeral => CreateMode::Ephemeral,
        ZkCreateMode::PersistentSequential => CreateMode::PersistentSequential,
        ZkCreateMode::EphemeralSequential => CreateMode::EphemeralSequential,
    };
    mode.with_acls(Acls::anyone_all())
}

fn version(v: i32) -> Option<i32> {
    (v >= 0).then_some(v)
}

impl ZkSession for TestSession {
    fn session_id(&self) -> i64 {
        self.client.session_id().0
    }

    fn get(&self, path: RStr<'_>) -> RResult<ROption<ZkData>, PluginError> {
        self.run(async {
            match self.client.get_data(path.as_str()).await {
                Ok((data, stat)) => Ok(ROption::RSome(ZkData {
                    data: data.into(),
                    version: stat.version,
                })),
                Err(ZkError::NoNode) => Ok(ROption::RNone),
                Err(e) => Err(e),
            }
        })
    }

    fn children(&self, path: RStr<'_>) -> RResult<RVec<RString>, PluginError> {
        self.run(async {
            let children = self.client.list_children(path.as_str()).await?;
            Ok(children.into_iter().map(RString::from).collect())
        })
    }

    fn create(
        &self,
        path: RStr<'_>,
        data: RSlice<'_, u8>,
        mode: ZkCreateMode,
    ) -> RResult<RString, PluginError> {
        self.run(async {
            let (_, sequence) = self
                .client
                .create(path.as_str(), data.as_slice(), &opts(mode))
                .await?;
            Ok(match mode {
                ZkCreateMode::PersistentSequential | ZkCreateMode::EphemeralSequential => {
                    format!("{path}{sequence}").into()
                }
                _ => path.as_str().into(),
            })
        })
    }

    fn set_data(&self, path: RStr<'_>, data: RSlice<'_, u8>, v: i32) -> RResult<i32, PluginError> {
        self.run(async {
            let stat = self
                .client
                .set_data(path.as_str(), data.as_slice(), version(v))
                .await?;
            Ok(stat.version)
        })
    }

    fn delete(&self, path: RStr<'_>, v: i32) -> RResult<(), PluginError> {
        self.run(self.client.delete(path.as_str(), version(v)))
    }

    fn multi(&self, ops: RVec<ZkOp>) -> RResult<(), PluginError> {
        self.run(async {
            let mut writer = self.client.new_multi_writer();
            for op in &ops {
                match op {
                    ZkOp::Create { path, data, mode } => {
                        writer.add_create(path.as_str(), data.as_slice(), &opts(*mode))?
                    }
                    ZkOp::SetData {
                        path,
                        data,
                        version: v,
                    } => writer.add_set_data(path.as_str(), data.as_slice(), version(*v))?,
                    ZkOp::Delete { path, version: v } => {
                        writer.add_delete(path.as_str(), version(*v))?
                    }
                    ZkOp::Check { path, version: v } => {
                        writer.add_check_version(path.as_str(), *v)?
                    }
                }
            }
            writer.commit().await.map(drop).map_err(|e| match e {
                MultiWriteError::RequestFailed { source } => source,
                MultiWriteError::OperationFailed { source, .. } => source,
            })
        })
    }
}

fn rec(group: &str, topic: &str, partition: i32, offset: i64, metadata: &str) -> OffsetRecord {
    OffsetRecord {
        group: group.into(),
        topic: topic.into(),
        partition,
        offset,
        metadata: metadata.into(),
        commit_time_ms: 1_700_000_000_000 + offset,
    }
}

fn scan_all(store: &ZookeeperStore, page: u32) -> Vec<OffsetRecord> {
    let mut out: Vec<OffsetRecord> = Vec::new();
    loop {
        let after = out.last().map(OffsetRecord::key);
        let got = store.scan(after.as_ref(), page).unwrap();
        if got.is_empty() {
            return out;
        }
        assert!(got.len() <= page as usize);
        out.extend(got);
    }
}

/// Runs `f` with a raw ZooKeeper client on `connect` (to look at or plant nodes).
fn raw<T>(connect: &str, f: impl AsyncFnOnce(&Client) -> T) -> T {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = Client::connect(connect).await.unwrap();
        f(&client).await
    })
}

fn assert_kind<T: std::fmt::Debug>(result: Result<T, PluginError>, kind: ErrorKind) -> PluginError {
    let err = result.unwrap_err();
    assert_eq!(err.kind, kind, "{err}");
    err
}

#[test]
fn names_that_need_escaping_round_trip_in_key_order() {
    for mode in MODES {
        let (store, chroot) = open_in(mode, "");
        let names = [
            "",
            ".",
            "..",
            "a/b",
            "50%",
            "ünï",
            "with space",
            "%2F",
            "\u{1}",
        ];
        let mut batch = Vec::new();
        for (i, g) in names.iter().enumerate() {
            for (j, t) in names.iter().enumerate() {
                batch.push(rec(g, t, (i * j) as i32 % 3, (i * 10 + j) as i64, t));
            }
        }
        store.commit(&batch).unwrap();
        let mut expected: Vec<OffsetRecord> = batch.clone();
        expected.sort_by_key(OffsetRecord::key);
        assert_eq!(scan_all(&store, 7), expected);
        let mut groups: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        groups.sort();
        assert_eq!(store.list_groups().unwrap(), groups);
        let group_a: Vec<_> = expected
            .iter()
            .filter(|r| r.group == "a/b")
            .cloned()
            .collect();
        assert_eq!(store.fetch_group("a/b").unwrap(), group_a);
        assert_eq!(store.delete_group("..").unwrap(), names.len() as u64);
        assert!(store.fetch_group("..").unwrap().is_empty());
        assert_eq!(store.fetch_group(".").unwrap().len(), names.len());

        // The plain names are stored as they are, as in Kafka's layout.
        store
            .commit(&[rec("plain-group", "orders", 3, 9, "")])
            .unwrap();
        let value = raw(&ZkServer::shared().connect(), async |c: &Client| {
            c.get_data(&format!("{chroot}/consumers/plain-group/offsets/orders/3"))
                .await
                .unwrap()
                .0
        });
        assert_eq!(
            String::from_utf8(value).unwrap(),
            r#"{"version":1,"offset":9,"metadata":"","commit_time_ms":1700000000009}"#
        );
        store.close().unwrap();
    }
}

#[test]
fn a_batch_larger_than_one_multi_is_split_and_fully_written() {
    for mode in MODES {
        // 4 KiB multis hold about 20 of these records: the batch needs dozens of multis.
        let (store, _) = open_in(mode, "max_multi_bytes = 4096\nmax_metadata_bytes = 100\n");
        let batch: Vec<OffsetRecord> = (0..1500)
            .map(|i| {
                rec(
                    &format!("g{}", i % 3),
                    &format!("t{}", i % 7),
                    i,
                    i64::from(i),
                    "m",
                )
            })
            .collect();
        // A later record for a key wins, also across multis.
        let mut with_rewrite = batch.clone();
        with_rewrite.push(rec("g0", "t0", 0, 4242, "last"));
        store.commit(&with_rewrite).unwrap();
        let got = scan_all(&store, 1000);
        assert_eq!(got.len(), batch.len());
        let by_key: BTreeMap<OffsetKey, i64> = got.iter().map(|r| (r.key(), r.offset)).collect();
        assert_eq!(by_key[&rec("g0", "t0", 0, 0, "").key()], 4242);
        assert_eq!(by_key[&rec("g2", "t1", 1499, 0, "").key()], 1499);
        // Committing again overwrites (setData instead of create) in multis too.
        let bumped: Vec<OffsetRecord> = batch
            .iter()
            .map(|r| OffsetRecord {
                offset: r.offset + 1,
                ..r.clone()
            })
            .collect();
        store.commit(&bumped).unwrap();
        assert!(scan_all(&store, 500)
            .iter()
            .all(|r| r.offset == i64::from(r.partition) + 1));
        assert_eq!(store.delete_group("g1").unwrap(), 500);
        assert_eq!(store.list_groups().unwrap(), vec!["g0", "g2"]);
        store.close().unwrap();
    }
}

#[test]
fn kafka_08_values_and_other_tools_nodes() {
    for mode in MODES {
        let server = ZkServer::shared();
        let (store, chroot) = open_in(mode, "");
        let mtime = raw(&server.connect(), async |c: &Client| {
            let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
            let group = format!("{chroot}/consumers/legacy");
            c.mkdir(&format!("{group}/offsets/orders"), &opts)
                .await
                .unwrap();
            c.mkdir(&format!("{group}/ids"), &opts).await.unwrap();
            // A foreign node name and a foreign topic-level node are ignored.
            c.mkdir(&format!("{group}/offsets/%zz"), &opts)
                .await
                .unwrap();
            c.create(
                &format!("{group}/offsets/orders/notapartition"),
                b"1",
                &opts,
            )
            .await
            .unwrap();
            let (stat, _) = c
                .create(&format!("{group}/offsets/orders/0"), b"1234", &opts)
                .await
                .unwrap();
            stat.mtime
        });
        let got = store
            .fetch("legacy", &[TopicPartitions::new("orders", vec![0, 1])])
            .unwrap();
        assert_eq!(
            got,
            vec![OffsetRecord {
                group: "legacy".into(),
                topic: "orders".into(),
                partition: 0,
                offset: 1234,
                metadata: "".into(),
                // The ABI's ZkSession gives no node times.
                commit_time_ms: if mode == Mode::Own { mtime } else { 0 },
            }]
        );
        assert_eq!(store.fetch_group("legacy").unwrap(), got);
        assert_eq!(store.list_groups().unwrap(), vec!["legacy"]);
        assert_eq!(scan_all(&store, 10), got);
        // Overwriting a legacy node writes the JSON value.
        store
            .commit(&[rec("legacy", "orders", 0, 1300, "new")])
            .unwrap();
        assert_eq!(
            store.fetch_group("legacy").unwrap()[0].metadata.as_str(),
            "new"
        );
        // Deleting the group removes the offsets subtree but keeps the group node, which
        // still has the old consumer's `ids`.
        assert_eq!(store.delete_group("legacy").unwrap(), 1);
        let children = raw(&server.connect(), async |c: &Client| {
            c.list_children(&format!("{chroot}/consumers/legacy"))
                .await
                .unwrap()
        });
        assert_eq!(children, vec!["ids"]);
        assert!(store.list_groups().unwrap().is_empty());

        // A value that is not an offset is reported, naming the node.
        raw(&server.connect(), async |c: &Client| {
            let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
            c.mkdir(&format!("{chroot}/consumers/bad/offsets/t"), &opts)
                .await
                .unwrap();
            c.create(
                &format!("{chroot}/consumers/bad/offsets/t/0"),
                b"{oops",
                &opts,
            )
            .await
            .unwrap();
        });
        let err = assert_kind(store.fetch_group("bad"), ErrorKind::Internal);
        assert!(err.message.contains("/consumers/bad/offsets/t/0"), "{err}");
        store.close().unwrap();
    }
}

#[test]
fn invalid_input_refuses_the_whole_batch() {
    for mode in MODES {
        let (store, _) = open_in(mode, "max_metadata_bytes = 10\n");
        let err = assert_kind(
            store.commit(&[rec("g", "t", 0, 1, ""), rec("g", "t", 1, 1, "01234567890")]),
            ErrorKind::InvalidInput,
        );
        assert!(err.message.contains("max_metadata_bytes = 10"), "{err}");
        assert_kind(
            store.commit(&[rec("g", "t", 0, 1, ""), rec("g", "t", -1, 1, "")]),
            ErrorKind::InvalidInput,
        );
        let long = "x".repeat(200_000);
        let err = assert_kind(
            store.commit(&[rec("g", &long, 0, 1, "")]),
            ErrorKind::InvalidInput,
        );
        assert!(err.message.contains("max_multi_bytes"), "{err}");
        assert!(
            store.list_groups().unwrap().is_empty(),
            "nothing was written"
        );
        assert_kind(store.scan(None, 0), ErrorKind::InvalidInput);
        store.commit(&[rec("g", "t", 0, 1, "0123456789")]).unwrap();
        store.commit(&[]).unwrap();
        store.close().unwrap();
        assert_kind(store.fetch_group("g"), ErrorKind::Closed);
        assert_kind(store.flush(), ErrorKind::Closed);
        store.close().unwrap();
    }
}

#[test]
fn commits_racing_deletes_of_the_same_group_all_succeed() {
    for mode in MODES {
        let (store, _) = open_in(mode, "");
        let store = &store;
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for round in 0..40i64 {
                        let batch: Vec<_> = (0..5)
                            .map(|p| rec("race", &format!("t{t}"), p, round, ""))
                            .collect();
                        store.commit(&batch).unwrap();
                    }
                });
            }
            s.spawn(move || {
                for _ in 0..40 {
                    store.delete_group("race").unwrap();
                }
            });
        });
        // Whatever survived the deletes is whole partitions of the last rounds.
        for r in store.fetch_group("race").unwrap() {
            assert!((0..40).contains(&r.offset), "{r:?}");
        }
        store.close().unwrap();
    }
}

#[test]
fn open_with_zookeeper_down_is_unavailable_within_the_timeout() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let ctx = PluginContext {
        config: format!("connect = '127.0.0.1:{port}'\nrequest_timeout_ms = 1000\n"),
        zookeeper: None,
    };
    let err = assert_kind(
        ZookeeperStore::open(&ctx).map(|_| ()),
        ErrorKind::Unavailable,
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(err.message.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.message.contains("1000 ms"), "{err}");
}

/// Every call of the store fails with `Unavailable`, each within the timeout. The calls
/// run at once, as they would from the host's pool.
fn assert_all_unavailable(store: &ZookeeperStore, timeout: Duration) {
    let bound = timeout + Duration::from_secs(2);
    type Call<'a> = Box<dyn Fn() -> Result<(), PluginError> + Send + Sync + 'a>;
    let calls: [(&str, Call<'_>); 6] = [
        // A commit that timed out may still be applied when the session comes back
        // (as with any ZooKeeper client), so it goes to a group of its own.
        (
            "commit",
            Box::new(|| store.commit(&[rec("outage", "t", 0, 99, "")])),
        ),
        (
            "fetch",
            Box::new(|| {
                store
                    .fetch("g", &[TopicPartitions::new("t", vec![0])])
                    .map(drop)
            }),
        ),
        ("fetch_group", Box::new(|| store.fetch_group("g").map(drop))),
        ("list_groups", Box::new(|| store.list_groups().map(drop))),
        (
            "delete_group",
            Box::new(|| store.delete_group("other").map(drop)),
        ),
        ("scan", Box::new(|| store.scan(None, 10).map(drop))),
    ];
    std::thread::scope(|s| {
        for (name, call) in &calls {
            s.spawn(move || {
                let started = Instant::now();
                let err = assert_kind(call(), ErrorKind::Unavailable);
                let took = started.elapsed();
                assert!(took <= bound, "{name} took {took:?}: {err}");
                assert!(
                    err.message.contains("ZooKeeper at 127.0.0.1:"),
                    "{name}: {err}"
                );
            });
        }
    });
}

/// Retries `commit` until ZooKeeper is back (at most 30 s); every failure must be
/// `Unavailable`.
fn commit_when_back(store: &ZookeeperStore, batch: &[OffsetRecord]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match store.commit(batch) {
            Ok(()) => return,
            Err(e) if e.kind == ErrorKind::Unavailable && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("commit after restart: {e}"),
        }
    }
}

#[test]
fn zookeeper_stopped_under_the_store_then_restarted() {
    let server = ZkServer::start();
    let timeout = Duration::from_millis(1500);
    let (store, _) = open_on(
        &server,
        "request_timeout_ms = 1500\nsession_timeout_ms = 2000\n",
    );
    store.commit(&[rec("g", "t", 0, 1, "before")]).unwrap();

    // A short outage: the session survives it.
    server.stop();
    assert_all_unavailable(&store, timeout);
    server.restart();
    commit_when_back(&store, &[rec("g", "t", 1, 2, "after short outage")]);

    // A long outage: the session expires (the client gives up on it after 7/5 of the
    // session timeout) and the store opens a new one when ZooKeeper is back.
    server.stop();
    assert_all_unavailable(&store, timeout);
    std::thread::sleep(Duration::from_secs(4));
    assert_all_unavailable(&store, timeout);
    server.restart();
    commit_when_back(&store, &[rec("g", "t", 2, 3, "after long outage")]);

    let got = store.fetch_group("g").unwrap();
    let offsets: Vec<(i32, i64)> = got.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(offsets, vec![(0, 1), (1, 2), (2, 3)], "{got:?}");
    assert!(store.list_groups().unwrap().contains(&"g".to_owned()));
    store.close().unwrap();
}
