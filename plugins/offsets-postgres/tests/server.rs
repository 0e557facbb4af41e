//! The `postgres` store against real PostgreSQL servers started by the test kit's
//! service (tests/conformance/src/services/postgres.rs): key order and NUL handling,
//! limits, concurrency, two stores on one table, a server stopped, restarted or frozen
//! under the store, and what `open` says about bad credentials, unknown databases,
//! missing privileges and foreign tables. (The cross-store conformance suite runs the
//! same plugin through its loaded `.so`.)

#[path = "../../../tests/conformance/src/services/postgres.rs"]
#[allow(dead_code)]
mod pg;

use std::{
    collections::BTreeMap,
    io::Read,
    net::{Ipv4Addr, TcpListener},
    sync::Barrier,
    thread,
    time::{Duration, Instant},
};

use drover_abi::{sdk::OffsetStorePlugin, ErrorKind, OffsetKey, OffsetRecord, TopicPartitions};
use drover_offsets_postgres::PostgresStore;
use pg::{unique_name, PgServer};

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

fn key(group: &str, topic: &str, partition: i32) -> OffsetKey {
    OffsetKey {
        group: group.into(),
        topic: topic.into(),
        partition,
    }
}

fn tp(topic: &str, partitions: &[i32]) -> TopicPartitions {
    TopicPartitions::new(topic, partitions.to_vec())
}

/// A fresh store (own table) on the shared server, with `extra` config lines.
fn open_with(extra: &str) -> PostgresStore {
    let config = format!("{}{extra}", PgServer::shared().store_config());
    PostgresStore::open_with_config(&config).unwrap_or_else(|e| panic!("open: {e}"))
}

fn open() -> PostgresStore {
    open_with("")
}

/// Every record, by paging through `scan` with `limit`.
fn scan_all(store: &PostgresStore, limit: u32) -> Vec<OffsetRecord> {
    let mut seen = Vec::new();
    let mut after: Option<OffsetKey> = None;
    loop {
        let page = store.scan(after.as_ref(), limit).unwrap();
        if page.is_empty() {
            return seen;
        }
        assert!(page.len() <= limit as usize);
        after = Some(page.last().unwrap().key());
        seen.extend(page);
    }
}

#[test]
fn round_trip_in_request_order_and_overwrite() {
    let store = open();
    let batch = vec![
        rec("g", "orders", 0, 10, "host-a; ünïcødé"),
        rec("g", "orders", 1, 11, ""),
        rec("g", "payments", 0, 12, "m"),
    ];
    store.commit(&batch).unwrap();
    let fetched = store
        .fetch(
            "g",
            &[
                tp("payments", &[0]),
                tp("orders", &[2, 1, 0]),
                tp("nope", &[0]),
            ],
        )
        .unwrap();
    assert_eq!(
        fetched,
        vec![batch[2].clone(), batch[1].clone(), batch[0].clone()],
        "request order; absent partitions left out"
    );
    assert_eq!(store.fetch_group("g").unwrap(), batch, "key order");

    // A later batch overwrites offset, metadata and commit time.
    let newer = rec("g", "orders", 1, 99, "newer");
    store.commit(std::slice::from_ref(&newer)).unwrap();
    assert_eq!(
        store.fetch("g", &[tp("orders", &[1])]).unwrap(),
        vec![newer]
    );
    // Within a batch the later record wins.
    store
        .commit(&[rec("g", "t", 0, 1, "a"), rec("g", "t", 0, 2, "b")])
        .unwrap();
    assert_eq!(
        store.fetch("g", &[tp("t", &[0])]).unwrap(),
        vec![rec("g", "t", 0, 2, "b")]
    );
    // Extreme values round-trip.
    let extreme = OffsetRecord {
        offset: i64::MAX,
        commit_time_ms: i64::MIN,
        ..rec("x", "y", i32::MAX, 0, "")
    };
    store.commit(std::slice::from_ref(&extreme)).unwrap();
    assert_eq!(store.fetch_group("x").unwrap(), vec![extreme]);
    store.commit(&[]).unwrap();
    store.close().unwrap();
}

#[test]
fn scan_and_list_groups_follow_rust_byte_order() {
    let store = open();
    // Mixed case, accents, other scripts and prefixes: a locale-aware collation would
    // order these differently from Rust's byte order.
    let names = [
        "", "A", "B", "Z", "a", "b", "e", "z", "é", "ä", "Ω", "日本", "🎉", "g", "g\u{1}", "g!",
        "g1", "gA", "ga", "g a", "~",
    ];
    let topics = ["", "t", "T", "té", "t\u{7f}", "t-1", "t_1"];
    let partitions = [0, 1, 9, 10, 255, 256, i32::MAX];
    let mut all = Vec::new();
    for g in names {
        for t in topics {
            for p in partitions {
                all.push(rec(g, t, p, i64::from(p), g));
            }
        }
    }
    for chunk in all.rchunks(101) {
        store.commit(chunk).unwrap();
    }
    let mut expected = all.clone();
    expected.sort_by_key(OffsetRecord::key);
    for limit in [1, 7, 100, 5000, u32::MAX] {
        assert_eq!(scan_all(&store, limit), expected, "limit {limit}");
    }
    let mut groups: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    groups.sort();
    assert_eq!(store.list_groups().unwrap(), groups);
    let mut sorted_topics: Vec<&str> = topics.to_vec();
    sorted_topics.sort();
    let got: Vec<String> = store
        .fetch_group("é")
        .unwrap()
        .iter()
        .filter(|r| r.partition == 0)
        .map(|r| r.topic.to_string())
        .collect();
    assert_eq!(got, sorted_topics);

    // `after` need not exist: the page starts at the next key.
    let page = store.scan(Some(&key("g", "t", 3)), 2).unwrap();
    assert_eq!(
        page,
        vec![rec("g", "t", 9, 9, "g"), rec("g", "t", 10, 10, "g")]
    );
    let page = store.scan(Some(&key("g", "t", i32::MAX)), 1).unwrap();
    assert_eq!(page, vec![rec("g", "t-1", 0, 0, "g")]);
    let last = expected.last().unwrap().key();
    assert!(store.scan(Some(&last), 10).unwrap().is_empty());
    assert_eq!(
        store.scan(None, 0).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
}

#[test]
fn nul_characters_are_refused_in_writes_and_handled_in_reads() {
    let store = open();
    let good = rec("g", "t", 0, 1, "");
    store.commit(std::slice::from_ref(&good)).unwrap();
    for (bad, what) in [
        (rec("g\0", "t", 1, 1, ""), "group"),
        (rec("g", "t\0", 1, 1, ""), "topic"),
        (rec("g", "t", 1, 1, "m\0"), "metadata"),
    ] {
        let err = store.commit(&[rec("g", "t", 0, 5, ""), bad]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{err}");
        assert!(
            err.message.contains(&format!("the {what} contains a NUL")),
            "{err}"
        );
        assert!(err.message.contains("partition 1"), "{err}");
    }
    assert_eq!(
        store.fetch_group("g").unwrap(),
        vec![good.clone()],
        "nothing written"
    );
    assert!(store.fetch_group("g\0").unwrap().is_empty());
    assert!(store.fetch("g\0", &[tp("t", &[0])]).unwrap().is_empty());
    assert_eq!(
        store.fetch("g", &[tp("t\0", &[0]), tp("t", &[0])]).unwrap(),
        vec![good.clone()]
    );
    assert_eq!(store.delete_group("g\0").unwrap(), 0);

    // Scans after keys holding NUL start where they would in byte order.
    store
        .commit(&[
            rec("g", "u", 0, 2, ""),
            rec("g1", "t", 0, 3, ""),
            rec("f", "t", 0, 4, ""),
        ])
        .unwrap();
    let firsts = |after: OffsetKey| -> Vec<(String, String)> {
        store
            .scan(Some(&after), 10)
            .unwrap()
            .iter()
            .map(|r| (r.group.to_string(), r.topic.to_string()))
            .collect()
    };
    let pair = |g: &str, t: &str| (g.to_owned(), t.to_owned());
    assert_eq!(
        firsts(key("g\0", "", 0)),
        vec![pair("g1", "t")],
        "after group `g\\0`: groups greater than `g`"
    );
    assert_eq!(
        firsts(key("f\0zz", "zz", 9)),
        vec![pair("g", "t"), pair("g", "u"), pair("g1", "t")]
    );
    assert_eq!(
        firsts(key("g", "t\0", -5)),
        vec![pair("g", "u"), pair("g1", "t")],
        "after topic `t\\0` of `g`"
    );
}

#[test]
fn metadata_limit_refuses_the_whole_batch() {
    let store = open_with("max_metadata_bytes = 8\n");
    store.commit(&[rec("g", "t", 0, 1, "12345678")]).unwrap();
    store.commit(&[rec("g", "t", 0, 1, "ééé")]).unwrap(); // 6 bytes
    let err = store
        .commit(&[rec("g", "t", 1, 1, "ok"), rec("g", "t", 2, 1, "123456789")])
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    for part in ["`g`", "`t`", "partition 2", "9 bytes", "8"] {
        assert!(err.message.contains(part), "{part} in {err}");
    }
    assert_eq!(
        store.fetch_group("g").unwrap(),
        vec![rec("g", "t", 0, 1, "ééé")]
    );
    let err = store.commit(&[rec("g", "t", -1, 1, "")]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(err.message.contains("negative partition"), "{err}");

    // The default is Kafka's 4096 bytes, counted in UTF-8 bytes.
    let store = open();
    let max = "ü".repeat(2048);
    store.commit(&[rec("g", "t", 0, 1, &max)]).unwrap();
    assert_eq!(store.fetch_group("g").unwrap()[0].metadata.as_str(), max);
    let err = store
        .commit(&[rec("g", "t", 0, 1, &"x".repeat(4097))])
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

#[test]
fn delete_and_list_groups() {
    let store = open();
    assert!(store.list_groups().unwrap().is_empty());
    let mut batch = Vec::new();
    for g in ["c", "a", "b"] {
        for p in 0..5 {
            batch.push(rec(g, "t1", p, 1, ""));
            batch.push(rec(g, "t2", p, 1, ""));
        }
    }
    store.commit(&batch).unwrap();
    assert_eq!(store.list_groups().unwrap(), ["a", "b", "c"]);
    assert_eq!(store.delete_group("b").unwrap(), 10);
    assert_eq!(store.list_groups().unwrap(), ["a", "c"]);
    assert!(store.fetch_group("b").unwrap().is_empty());
    assert_eq!(store.delete_group("b").unwrap(), 0);
    assert_eq!(store.delete_group("a").unwrap(), 10);
    assert_eq!(store.delete_group("c").unwrap(), 10);
    assert!(store.list_groups().unwrap().is_empty());
    assert!(store.scan(None, 100).unwrap().is_empty());
}

#[test]
fn concurrent_committers_and_readers() {
    const THREADS: i32 = 8;
    const COMMITS: i64 = 40;
    let store = open_with("pool_size = 3\n");
    let barrier = Barrier::new(THREADS as usize + 1);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (store, barrier) = (&store, &barrier);
            s.spawn(move || {
                let group = format!("g{t}");
                barrier.wait();
                for i in 0..COMMITS {
                    // The thread's 4 partitions move together, plus a key every thread
                    // writes.
                    let mut batch: Vec<OffsetRecord> =
                        (0..4).map(|p| rec(&group, "t", p, i, "x")).collect();
                    batch.push(rec("shared", "t", 0, i, &group));
                    store.commit(&batch).unwrap();
                    let got = store.fetch(&group, &[tp("t", &[0, 1, 2, 3])]).unwrap();
                    assert!(
                        got.iter().all(|r| r.offset == i),
                        "read your writes: {got:?}"
                    );
                }
            });
        }
        let (store, barrier) = (&store, &barrier);
        s.spawn(move || {
            barrier.wait();
            for _ in 0..50 {
                for t in 0..THREADS {
                    let got = store.fetch_group(&format!("g{t}")).unwrap();
                    if let Some(first) = got.first() {
                        assert_eq!(got.len(), 4);
                        assert!(got.iter().all(|r| r.offset == first.offset), "{got:?}");
                    }
                }
            }
        });
    });
    for t in 0..THREADS {
        let got = store.fetch_group(&format!("g{t}")).unwrap();
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|r| r.offset == COMMITS - 1));
    }
    assert_eq!(store.fetch_group("shared").unwrap()[0].offset, COMMITS - 1);
}

#[test]
fn two_stores_share_one_table_without_deadlocks() {
    // Two brokers on one table, writing overlapping keys in opposite orders at once.
    let config = PgServer::shared().store_config();
    let a = PostgresStore::open_with_config(&config).unwrap();
    let b = PostgresStore::open_with_config(&config).unwrap();
    thread::scope(|s| {
        for (store, reverse) in [(&a, false), (&b, true)] {
            s.spawn(move || {
                for round in 0..30 {
                    let mut batch: Vec<OffsetRecord> =
                        (0..50).map(|p| rec("g", "t", p, round, "")).collect();
                    if reverse {
                        batch.reverse();
                    }
                    store.commit(&batch).unwrap();
                }
            });
        }
    });
    let got = a.fetch_group("g").unwrap();
    assert_eq!(got.len(), 50);
    assert!(got.iter().all(|r| r.offset == 29));
    assert_eq!(b.fetch_group("g").unwrap(), got);
}

#[test]
fn closed_store_errors() {
    let store = open();
    store.commit(&[rec("g", "t", 0, 1, "")]).unwrap();
    store.flush().unwrap();
    store.close().unwrap();
    store.close().unwrap();
    let kinds = [
        store.commit(&[rec("g", "t", 0, 2, "")]).unwrap_err().kind,
        store.commit(&[]).unwrap_err().kind,
        store.fetch("g", &[tp("t", &[0])]).unwrap_err().kind,
        store.fetch_group("g").unwrap_err().kind,
        store.list_groups().unwrap_err().kind,
        store.delete_group("g").unwrap_err().kind,
        store.scan(None, 10).unwrap_err().kind,
        store.flush().unwrap_err().kind,
    ];
    assert!(kinds.iter().all(|k| *k == ErrorKind::Closed), "{kinds:?}");
}

#[test]
fn reopen_sees_the_data_and_the_table_layout_is_checked() {
    let server = PgServer::shared();
    let config = server.store_config();
    let table = config
        .lines()
        .find_map(|l| l.strip_prefix("table = "))
        .unwrap()
        .trim_matches('"')
        .to_owned();
    {
        let store = PostgresStore::open_with_config(&config).unwrap();
        store.commit(&[rec("g", "t", 0, 5, "m")]).unwrap();
    } // dropped without close
    let store = PostgresStore::open_with_config(&config).unwrap();
    assert_eq!(
        store.fetch_group("g").unwrap(),
        vec![rec("g", "t", 0, 5, "m")]
    );
    store.close().unwrap();
    let collations = server.psql(
        "postgres",
        &format!(
            "SELECT string_agg(collation_name, ',' ORDER BY ordinal_position) \
             FROM information_schema.columns WHERE table_name = '{table}' \
             AND data_type = 'text'"
        ),
    );
    // string_agg skips metadata's NULL (database default) collation.
    assert_eq!(collations, "C,C", "group_id and topic use \"C\"");

    // A table of another layout is refused, naming the table and the problem.
    let url = server.superuser_url();
    for (ddl, needle) in [
        (
            "(group_id text, topic text, partition int)",
            "committed_offset",
        ),
        (
            "(group_id text, topic text, partition int, committed_offset bigint, \
             metadata text, commit_time_ms bigint)",
            "no unique or exclusion constraint",
        ),
        (
            "(group_id text, topic text COLLATE \"C\", partition int, committed_offset bigint, \
             metadata text, commit_time_ms bigint, PRIMARY KEY (group_id, topic, partition))",
            "column group_id has collation \"default\"",
        ),
        (
            "(group_id text COLLATE \"C\", topic text COLLATE \"C\", partition int, \
             committed_offset int, metadata text, commit_time_ms bigint, \
             PRIMARY KEY (group_id, topic, partition))",
            "have types (text, text, int4, int4, text, int8)",
        ),
    ] {
        let table = unique_name("foreign");
        server.psql("postgres", &format!("CREATE TABLE {table} {ddl}"));
        let err = PostgresStore::open_with_config(&format!("url = {url:?}\ntable = {table:?}"))
            .err()
            .expect("refused");
        assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err}");
        assert!(err.message.contains(&table), "{err}");
        assert!(err.message.contains(needle), "{needle} in {err}");
        assert!(err.message.contains("hint: set `table`"), "{err}");
    }
}

#[test]
fn schema_and_odd_table_names_are_quoted() {
    let server = PgServer::shared();
    let schema = format!("Drover {}", unique_name("s"));
    let table = "we\"ird; DROP TABLE x; --";
    let config = format!(
        "url = {:?}\nschema = {schema:?}\ntable = {table:?}\n",
        server.superuser_url()
    );
    let store = PostgresStore::open_with_config(&config).unwrap();
    store.commit(&[rec("g", "t", 0, 7, "")]).unwrap();
    let count = server.psql(
        "postgres",
        &format!("SELECT count(*) FROM \"{schema}\".\"we\"\"ird; DROP TABLE x; --\""),
    );
    assert_eq!(count, "1");
    store.close().unwrap();
    // Reopening finds the schema and table.
    let store = PostgresStore::open_with_config(&config).unwrap();
    assert_eq!(store.fetch_group("g").unwrap().len(), 1);
}

#[test]
fn bad_credentials_unknown_database_and_missing_privileges() {
    let server = PgServer::shared();
    let role = unique_name("drover_user");
    server.create_role(&role, "right");
    let table = unique_name("offsets");
    let config = |password: &str, database: &str| {
        format!(
            "url = {:?}\ntable = {table:?}\n",
            server.url(&role, Some(password), database)
        )
    };

    let err = PostgresStore::open_with_config(&config("wrong", "postgres"))
        .err()
        .expect("wrong password refused");
    assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err}");
    assert!(
        err.message.contains("password authentication failed"),
        "{err}"
    );
    assert!(err.message.contains("28P01"), "{err}");
    assert!(
        err.message.contains("hint: check `user` and `password`"),
        "{err}"
    );
    assert!(
        !err.message.contains("wrong"),
        "the password is not shown: {err}"
    );

    let err = PostgresStore::open_with_config(&format!(
        "url = {:?}",
        server.url(&role, None, "postgres")
    ))
    .err()
    .expect("no password refused");
    assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err}");
    assert!(err.message.contains("password missing"), "{err}");

    let err = PostgresStore::open_with_config(&format!(
        "url = {:?}",
        server.url(pg::SUPERUSER, None, "no_such_db")
    ))
    .err()
    .expect("unknown database refused");
    assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err}");
    assert!(
        err.message
            .contains("database \"no_such_db\" does not exist"),
        "{err}"
    );
    assert!(err.message.contains("hint: create the database"), "{err}");

    // Right password, but (PostgreSQL 15+) no CREATE on schema public.
    match PostgresStore::open_with_config(&config("right", "postgres")) {
        Err(err) => {
            assert_eq!(err.kind, ErrorKind::InvalidConfig, "{err}");
            assert!(err.message.contains("permission denied"), "{err}");
            assert!(err.message.contains("42501"), "{err}");
        }
        Ok(_) => eprintln!("this server lets every user create tables in public"),
    }
    // Once the table exists and the role may use it, it works without CREATE.
    let owner_config = format!("url = {:?}\ntable = {table:?}\n", server.superuser_url());
    PostgresStore::open_with_config(&owner_config)
        .unwrap()
        .close()
        .unwrap();
    server.psql(
        "postgres",
        &format!("GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO \"{role}\""),
    );
    let store = PostgresStore::open_with_config(&config("right", "postgres")).unwrap();
    store.commit(&[rec("g", "t", 0, 1, "")]).unwrap();
    assert_eq!(store.list_groups().unwrap(), ["g"]);
}

#[test]
fn a_server_that_is_down_at_open_is_unavailable() {
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // closed again: nothing listens there
    let started = Instant::now();
    let err = PostgresStore::open_with_config(&format!(
        "url = \"postgres://u@127.0.0.1:{port}/d\"\nconnect_timeout_ms = 2000"
    ))
    .err()
    .expect("refused");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(err.message.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.message.contains("is PostgreSQL running"), "{err}");
    assert_eq!(err.code, libc::ECONNREFUSED, "{err}");
}

#[test]
fn a_server_that_never_answers_times_out_at_open() {
    // Accepts connections and reads, but never answers the startup message.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 64];
            let _ = stream.read(&mut buf);
            held.push(stream);
        }
    });
    let started = Instant::now();
    let err = PostgresStore::open_with_config(&format!(
        "url = \"postgres://u@127.0.0.1:{port}/d\"\nconnect_timeout_ms = 300"
    ))
    .err()
    .expect("times out");
    let took = started.elapsed();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(err.message.contains("no answer"), "{err}");
    assert!(err.message.contains("within 300 ms"), "{err}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

/// Checks that `call` fails with `Unavailable` well within the call deadline.
fn assert_unavailable_within<T: std::fmt::Debug>(
    what: &str,
    deadline: Duration,
    call: impl FnOnce() -> Result<T, drover_abi::PluginError>,
) -> String {
    let started = Instant::now();
    let err = call().expect_err(what);
    let took = started.elapsed();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{what}: {err}");
    assert!(
        took < deadline + Duration::from_millis(750),
        "{what} took {took:?} (deadline {deadline:?}): {err}"
    );
    err.message.to_string()
}

#[test]
fn a_stopped_server_gives_unavailable_then_service_resumes() {
    let server = PgServer::start();
    let config = format!(
        "url = {:?}\ntable = \"offsets\"\nconnect_timeout_ms = 1000\nstatement_timeout_ms = 2000\n",
        server.superuser_url()
    );
    let store = PostgresStore::open_with_config(&config).unwrap();
    store.commit(&[rec("g", "t", 0, 1, "")]).unwrap();
    // Fill the pool, so several connections go stale at once.
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| store.fetch_group("g").unwrap());
        }
    });

    server.stop();
    let deadline = Duration::from_millis(3000);
    let message = assert_unavailable_within("commit", deadline, || {
        store.commit(&[rec("g", "t", 0, 2, "")])
    });
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port())),
        "{message}"
    );
    assert_unavailable_within("fetch", deadline, || store.fetch("g", &[tp("t", &[0])]));
    assert_unavailable_within("fetch_group", deadline, || store.fetch_group("g"));
    assert_unavailable_within("list_groups", deadline, || store.list_groups());
    assert_unavailable_within("delete_group", deadline, || store.delete_group("g"));
    assert_unavailable_within("scan", deadline, || store.scan(None, 10));
    let err = PostgresStore::open_with_config(&config).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Unavailable, "open while down: {err}");

    server.restart();
    // The first call after the restart already works: dead pooled connections are
    // replaced.
    store.commit(&[rec("g", "t", 0, 3, "")]).unwrap();
    assert_eq!(
        store.fetch_group("g").unwrap(),
        vec![rec("g", "t", 0, 3, "")]
    );
    assert_eq!(store.list_groups().unwrap(), ["g"]);

    // Again, this time restarting while calls keep failing and retrying.
    server.stop();
    assert_unavailable_within("commit", deadline, || {
        store.commit(&[rec("g", "t", 0, 4, "")])
    });
    server.restart();
    store.commit(&[rec("g", "t", 0, 5, "")]).unwrap();
    assert_eq!(store.fetch_group("g").unwrap()[0].offset, 5);
    store.close().unwrap();
}

#[test]
fn a_frozen_server_gives_unavailable_within_the_deadline() {
    let server = PgServer::start();
    let config = format!(
        "url = {:?}\ntable = \"offsets\"\nconnect_timeout_ms = 500\nstatement_timeout_ms = 1000\n",
        server.superuser_url()
    );
    let store = PostgresStore::open_with_config(&config).unwrap();
    store.commit(&[rec("g", "t", 0, 1, "")]).unwrap();

    server.freeze(); // connections stay open; nothing answers
    let deadline = Duration::from_millis(1500);
    let message = assert_unavailable_within("commit", deadline, || {
        store.commit(&[rec("g", "t", 0, 2, "")])
    });
    assert!(message.contains("no answer from PostgreSQL"), "{message}");
    assert_unavailable_within("fetch_group", deadline, || store.fetch_group("g"));
    assert_unavailable_within("scan", deadline, || store.scan(None, 10));
    let started = Instant::now();
    let err = PostgresStore::open_with_config(&config).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );

    server.thaw();
    store.commit(&[rec("g", "t", 0, 3, "")]).unwrap();
    assert_eq!(store.fetch_group("g").unwrap()[0].offset, 3);
    store.close().unwrap();
}

#[test]
fn a_statement_blocked_on_a_lock_hits_statement_timeout() {
    let server = PgServer::shared();
    let table = unique_name("locked");
    let url = server.superuser_url();
    let store = PostgresStore::open_with_config(&format!(
        "url = {url:?}\ntable = {table:?}\nstatement_timeout_ms = 300\nconnect_timeout_ms = 2000\n"
    ))
    .unwrap();
    store.commit(&[rec("g", "t", 0, 1, "")]).unwrap();
    // Another session holds an exclusive lock on the table for 3 s.
    let holder = {
        let mut psql = server.psql_command(
            "postgres",
            &format!("BEGIN; LOCK TABLE {table}; SELECT pg_sleep(3); COMMIT;"),
        );
        thread::spawn(move || psql.output().expect("run psql"))
    };
    let locked = Instant::now();
    while server.psql(
        "postgres",
        &format!(
            "SELECT count(*) FROM pg_locks WHERE relation = '{table}'::regclass \
             AND mode = 'AccessExclusiveLock' AND granted"
        ),
    ) != "1"
    {
        assert!(
            locked.elapsed() < Duration::from_secs(10),
            "lock never taken"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let err = store.commit(&[rec("g", "t", 0, 2, "")]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(err.message.contains("statement timeout"), "{err}");
    assert!(err.message.contains("57014"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let out = holder.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    store.commit(&[rec("g", "t", 0, 3, "")]).unwrap();
    assert_eq!(store.fetch_group("g").unwrap()[0].offset, 3);
}

#[test]
fn works_from_the_blocking_pool_of_another_tokio_runtime() {
    // The host calls stores from tokio's blocking pool (its own tokio; here even the
    // same copy), never from async code.
    let store = std::sync::Arc::new(open());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..4 {
            let store = store.clone();
            tasks.push(tokio::task::spawn_blocking(move || {
                for i in 0..10 {
                    store
                        .commit(&[rec(&format!("g{t}"), "t", 0, i, "")])
                        .unwrap();
                }
                store.fetch_group(&format!("g{t}")).unwrap()
            }));
        }
        for task in tasks {
            assert_eq!(task.await.unwrap()[0].offset, 9);
        }
    });
    store.close().unwrap();
}

#[test]
fn a_large_batch_and_paged_scan() {
    let store = open();
    let batch: Vec<OffsetRecord> = (0..100_000)
        .map(|i| {
            rec(
                &format!("group-{}", i % 100),
                "topic",
                i / 100,
                i64::from(i),
                "meta",
            )
        })
        .collect();
    let started = Instant::now();
    store.commit(&batch).unwrap();
    eprintln!("100,000 offsets committed in {:?}", started.elapsed());
    assert_eq!(store.list_groups().unwrap().len(), 100);
    assert_eq!(store.fetch_group("group-42").unwrap().len(), 1000);
    let started = Instant::now();
    let all = scan_all(&store, 10_000);
    eprintln!("scanned in {:?}", started.elapsed());
    let expected: BTreeMap<OffsetKey, i64> = batch.iter().map(|r| (r.key(), r.offset)).collect();
    let got: BTreeMap<OffsetKey, i64> = all.iter().map(|r| (r.key(), r.offset)).collect();
    assert_eq!(all.len(), 100_000);
    assert_eq!(got, expected);
}
