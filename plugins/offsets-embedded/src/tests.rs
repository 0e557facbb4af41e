//! Unit tests of the store through the plugin type (the rlib; the `.so` has its own
//! conformance suite).

use std::{path::Path, sync::Barrier, thread};

use drover_abi::{
    sdk::{OffsetStorePlugin, PluginContext},
    ErrorKind, OffsetKey, OffsetRecord, TopicPartitions,
};
use tempfile::TempDir;

use crate::EmbeddedStore;

fn config(path: &Path) -> String {
    format!("path = '{}'", path.display())
}

fn db_path(dir: &TempDir) -> std::path::PathBuf {
    dir.path().join("nested/dir/offsets.redb")
}

fn open(dir: &TempDir) -> EmbeddedStore {
    let ctx = PluginContext {
        config: config(&db_path(dir)),
        zookeeper: None,
    };
    EmbeddedStore::open(&ctx).expect("open")
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

#[test]
fn round_trip_with_metadata() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    assert!(
        db_path(&dir).exists(),
        "parent directory and file are created"
    );
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
                tp("orders", &[0, 1, 2]),
                tp("payments", &[0]),
                tp("nope", &[0]),
            ],
        )
        .unwrap();
    assert_eq!(fetched, batch, "absent partitions are left out");
    assert_eq!(store.fetch_group("g").unwrap(), batch);

    // Overwrite one offset in a later batch; commit time and metadata follow.
    let newer = rec("g", "orders", 1, 99, "newer");
    store.commit(std::slice::from_ref(&newer)).unwrap();
    assert_eq!(
        store.fetch("g", &[tp("orders", &[1])]).unwrap(),
        vec![newer]
    );
}

#[test]
fn later_record_in_a_batch_wins() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    store
        .commit(&[
            rec("g", "t", 0, 1, "a"),
            rec("g", "t", 1, 5, ""),
            rec("g", "t", 0, 2, "b"),
        ])
        .unwrap();
    assert_eq!(
        store.fetch_group("g").unwrap(),
        vec![rec("g", "t", 0, 2, "b"), rec("g", "t", 1, 5, "")]
    );
}

#[test]
fn unknown_group_is_empty() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    assert!(store.fetch_group("nobody").unwrap().is_empty());
    assert!(store
        .fetch("nobody", &[tp("t", &[0, 1])])
        .unwrap()
        .is_empty());
    store.commit(&[rec("g", "t", 0, 1, "")]).unwrap();
    assert!(store.fetch_group("nobody").unwrap().is_empty());
    assert!(store.fetch_group("").unwrap().is_empty());
    assert!(store.fetch_group("g\0").unwrap().is_empty());
    assert!(store.fetch("g", &[tp("t", &[-1, 1])]).unwrap().is_empty());
    assert!(store.scan(None, 10).unwrap().len() == 1);
    assert!(store.list_groups().unwrap() == vec!["g".to_owned()]);
}

#[test]
fn groups_are_isolated_even_when_names_are_prefixes() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    let groups = ["", "g", "g\0", "g\0a", "g2", "ga", "h"];
    for (i, g) in groups.iter().enumerate() {
        store
            .commit(&[rec(g, "", 0, i as i64, ""), rec(g, "t", 3, 7, "")])
            .unwrap();
    }
    for (i, g) in groups.iter().enumerate() {
        let got = store.fetch_group(g).unwrap();
        assert_eq!(
            got,
            vec![rec(g, "", 0, i as i64, ""), rec(g, "t", 3, 7, "")],
            "{g:?}"
        );
    }
    assert_eq!(
        store.list_groups().unwrap(),
        groups.map(String::from).to_vec()
    );
}

#[test]
fn delete_and_list_groups() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
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
    assert_eq!(store.fetch_group("a").unwrap().len(), 10);
    assert_eq!(store.fetch_group("c").unwrap().len(), 10);

    assert_eq!(
        store.delete_group("b").unwrap(),
        0,
        "deleting again finds nothing"
    );
    assert_eq!(store.delete_group("unknown").unwrap(), 0);
    assert_eq!(store.delete_group("a").unwrap(), 10);
    assert_eq!(store.delete_group("c").unwrap(), 10);
    assert!(store.list_groups().unwrap().is_empty());
    assert!(store.scan(None, 100).unwrap().is_empty());
}

#[test]
fn scan_pages_cover_everything_once_in_order() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    let mut all = Vec::new();
    for g in ["", "g", "g\0", "g1", "group-b", "group-a"] {
        for t in ["", "t", "t\0", "topic"] {
            for p in [0, 1, 2, 9, 10, 255, 256, i32::MAX] {
                all.push(rec(g, t, p, i64::from(p), g));
            }
        }
    }
    // Commit in several batches, out of order.
    for chunk in all.rchunks(37) {
        store.commit(chunk).unwrap();
    }
    let mut expected = all.clone();
    expected.sort_by_key(OffsetRecord::key);

    for limit in [1, 7, 100, 1000, u32::MAX] {
        let mut seen = Vec::new();
        let mut after: Option<OffsetKey> = None;
        loop {
            let page = store.scan(after.as_ref(), limit).unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= limit as usize);
            after = Some(page.last().unwrap().key());
            seen.extend(page);
        }
        assert_eq!(seen, expected, "limit {limit}");
    }

    // `after` need not exist: the page starts at the next key.
    let page = store.scan(Some(&key("g", "t", 3)), 2).unwrap();
    assert_eq!(
        page,
        vec![rec("g", "t", 9, 9, "g"), rec("g", "t", 10, 10, "g")]
    );
    let page = store.scan(Some(&key("g", "t", i32::MAX)), 1).unwrap();
    assert_eq!(page, vec![rec("g", "t\0", 0, 0, "g")]);
    // After the last key: the end.
    let last = expected.last().unwrap().key();
    assert!(store.scan(Some(&last), 10).unwrap().is_empty());
    // Limit 0 is refused rather than answered with an (end-signalling) empty page.
    assert_eq!(
        store.scan(None, 0).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
}

#[test]
fn large_batch() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
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
    store.commit(&batch).unwrap();
    assert_eq!(store.list_groups().unwrap().len(), 100);
    assert_eq!(store.fetch_group("group-42").unwrap().len(), 1000);
    let mut count = 0;
    let mut after = None;
    loop {
        let page = store.scan(after.as_ref(), 10_000).unwrap();
        if page.is_empty() {
            break;
        }
        count += page.len();
        after = page.last().map(OffsetRecord::key);
    }
    assert_eq!(count, 100_000);
    let one = store.fetch("group-7", &[tp("topic", &[999])]).unwrap();
    assert_eq!(one, vec![rec("group-7", "topic", 999, 99_907, "meta")]);
}

#[test]
fn concurrent_committers() {
    const THREADS: i32 = 8;
    const COMMITS: i64 = 100;
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    let barrier = Barrier::new(THREADS as usize + 1);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (store, barrier) = (&store, &barrier);
            s.spawn(move || {
                let group = format!("g{t}");
                barrier.wait();
                for i in 0..COMMITS {
                    // Each batch moves the thread's 4 partitions forward together, and
                    // also writes a key every thread shares.
                    let mut batch: Vec<OffsetRecord> =
                        (0..4).map(|p| rec(&group, "t", p, i, "x")).collect();
                    batch.push(rec("shared", "t", 0, i, &group));
                    store.commit(&batch).unwrap();
                    // Read-your-writes once commit returned.
                    let got = store.fetch(&group, &[tp("t", &[0, 1, 2, 3])]).unwrap();
                    assert!(got.iter().all(|r| r.offset == i), "{got:?}");
                }
            });
        }
        // A concurrent reader only ever sees whole batches.
        let (store, barrier) = (&store, &barrier);
        s.spawn(move || {
            barrier.wait();
            for _ in 0..200 {
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
    let shared = store.fetch_group("shared").unwrap();
    assert_eq!(shared.len(), 1);
    assert_eq!(shared[0].offset, COMMITS - 1);
    assert_eq!(store.list_groups().unwrap().len(), THREADS as usize + 1);
}

#[test]
fn reopen_sees_the_data() {
    let dir = TempDir::new().unwrap();
    let batch = vec![rec("g", "t", 0, 5, "m"), rec("h", "t", 1, 6, "")];
    {
        let store = open(&dir);
        store.commit(&batch).unwrap();
        assert_eq!(store.delete_group("h").unwrap(), 1);
    } // dropped without close
    {
        let store = open(&dir);
        assert_eq!(store.scan(None, 10).unwrap(), batch[..1]);
        store.commit(&[rec("h", "t", 2, 7, "")]).unwrap();
        store.close().unwrap();
    }
    // After close the file lock is released: the same process can open it again.
    let store = open(&dir);
    assert_eq!(store.list_groups().unwrap(), ["g", "h"]);
}

#[test]
fn second_open_of_the_same_file_is_unavailable() {
    let dir = TempDir::new().unwrap();
    let _first = open(&dir);
    let err = EmbeddedStore::open_with_config(&config(&db_path(&dir)))
        .err()
        .expect("second open must fail");
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
}

#[test]
fn closed_store_errors() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
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
fn metadata_limit_refuses_the_whole_batch() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store =
        EmbeddedStore::open_with_config(&format!("{}\nmax_metadata_bytes = 8", config(&path)))
            .unwrap();
    store.commit(&[rec("g", "t", 0, 1, "12345678")]).unwrap();
    let err = store
        .commit(&[rec("g", "t", 1, 1, "ok"), rec("g", "t", 2, 1, "123456789")])
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    for part in ["`g`", "`t`", "partition 2", "9 bytes", "8"] {
        assert!(err.message.contains(part), "{part} in {err}");
    }
    assert_eq!(
        store.fetch_group("g").unwrap(),
        vec![rec("g", "t", 0, 1, "12345678")]
    );

    // The default is Kafka's 4096 bytes.
    drop(store);
    let store = open(&dir);
    store
        .commit(&[rec("g", "t", 0, 1, &"x".repeat(4096))])
        .unwrap();
    let err = store
        .commit(&[rec("g", "t", 0, 1, &"x".repeat(4097))])
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

#[test]
fn negative_partition_refuses_the_batch() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    let err = store
        .commit(&[rec("g", "t", 0, 1, ""), rec("g", "t", -1, 1, "")])
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(err.message.contains("partition -1"), "{err}");
    assert!(store.fetch_group("g").unwrap().is_empty());
}

#[test]
fn empty_batch_is_ok() {
    let dir = TempDir::new().unwrap();
    let store = open(&dir);
    store.commit(&[]).unwrap();
    assert!(store.list_groups().unwrap().is_empty());
}

#[test]
fn bad_configs_and_files() {
    let e = EmbeddedStore::open_with_config("").err().unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidConfig);
    assert!(e.message.contains("`path` is required"), "{e}");

    let e = EmbeddedStore::open_with_config("path = 'x'\nbogus = 1")
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidConfig);
    assert!(e.message.contains("bogus"), "{e}");

    // A file that is not a redb database is an error, not a panic.
    let dir = TempDir::new().unwrap();
    let junk = dir.path().join("junk.redb");
    std::fs::write(&junk, vec![0x5a; 100_000]).unwrap();
    let e = EmbeddedStore::open_with_config(&config(&junk))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidConfig, "{e}");
    assert!(e.message.contains("not a redb database"), "{e}");

    // A directory where the file should be: the operator's `path` is wrong.
    let e = EmbeddedStore::open_with_config(&config(dir.path()))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidConfig, "{e}");
    assert!(e.message.contains("it is a directory"), "{e}");
    assert!(e.message.contains("hint: set `path`"), "{e}");

    // A file where a parent directory should be (EEXIST), or above it (ENOTDIR).
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    for path in [file.join("o.redb"), file.join("sub/o.redb")] {
        let e = EmbeddedStore::open_with_config(&config(&path))
            .err()
            .unwrap();
        assert_eq!(e.kind, ErrorKind::InvalidConfig, "{}: {e}", path.display());
        assert!(e.message.contains("is a file, not a directory"), "{e}");
        assert!(e.message.contains("`path`"), "{e}");
    }
}

/// The test kit's offset-store suite, in-process, reopening the same file.
#[test]
fn passes_the_testkit_suite() {
    use drover_plugin_testkit::offset_store::{run, Options};
    let dir = TempDir::new().unwrap();
    let config = config(&db_path(&dir));
    let open = || drover_abi::sdk::in_process::offset_store::<EmbeddedStore>(&config);
    run(&open, &Options::default().scan_records(20_000)).assert_passed();
}
