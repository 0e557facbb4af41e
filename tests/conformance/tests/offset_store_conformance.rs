//! The offset-store conformance suite, run against every built offset-store plugin
//! through its loaded `.so`: round trip with metadata, unknown group, delete and list
//! groups, scan pagination, a 100,000-offset batch, 8 concurrent committers, and no
//! acknowledged commit lost when the committing process is killed with SIGKILL.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use drover_abi::{std_types::RString, ErrorKind, OffsetKey, OffsetRecord, TopicPartitions};
use drover_host::plugins::{CallError, OffsetStoreHandle};
use drover_tests::{open_store, store_config, PluginDir, OFFSET_STORES};

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

/// Runs `check` against a fresh instance of every store.
fn each_store(check: impl Fn(&str, &OffsetStoreHandle, &PluginDir)) {
    for (lib, name) in OFFSET_STORES {
        let dir = PluginDir::new();
        let store = open_store(&dir, lib, &store_config(name, &dir));
        check(name, &store, &dir);
        store.close().unwrap();
    }
}

#[test]
fn round_trip_with_metadata() {
    each_store(|name, store, _| {
        let meta = "ünïcode metadata, and a long tail ".repeat(20);
        store
            .commit(&[
                record("g", "orders", 0, 42, &meta),
                record("g", "orders", 1, 7, ""),
                record("g", "orders", 0, 43, &meta), // later record for the same key wins
            ])
            .unwrap();
        let got = store
            .fetch("g", &[TopicPartitions::new("orders", vec![0, 1, 2])])
            .unwrap();
        assert_eq!(got.len(), 2, "{name}: partition 2 has no commit");
        let p0 = got.iter().find(|r| r.partition == 0).unwrap();
        assert_eq!(p0, &record("g", "orders", 0, 43, &meta), "{name}");
        let p1 = got.iter().find(|r| r.partition == 1).unwrap();
        assert_eq!(p1.offset, 7, "{name}");
        assert_eq!(p1.metadata.as_str(), "", "{name}");
    });
}

#[test]
fn unknown_group_is_empty() {
    each_store(|name, store, _| {
        store.commit(&[record("known", "t", 0, 1, "")]).unwrap();
        assert!(store.fetch_group("unknown").unwrap().is_empty(), "{name}");
        assert!(store
            .fetch("unknown", &[TopicPartitions::new("t", vec![0])])
            .unwrap()
            .is_empty());
    });
}

#[test]
fn delete_and_list_groups() {
    each_store(|name, store, _| {
        store
            .commit(&[
                record("b", "t", 0, 1, ""),
                record("a", "t", 0, 1, ""),
                record("a", "u", 3, 9, ""),
                record("c", "t", 1, 5, ""),
            ])
            .unwrap();
        assert_eq!(store.list_groups().unwrap(), vec!["a", "b", "c"], "{name}");
        assert_eq!(store.fetch_group("a").unwrap().len(), 2, "{name}");
        assert_eq!(store.delete_group("a").unwrap(), 2, "{name}");
        assert_eq!(store.list_groups().unwrap(), vec!["b", "c"], "{name}");
        assert!(store.fetch_group("a").unwrap().is_empty(), "{name}");
        assert_eq!(store.delete_group("a").unwrap(), 0, "{name}");
    });
}

#[test]
fn a_100000_offset_batch_and_a_full_scan() {
    each_store(|name, store, _| {
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
        let expected: BTreeMap<OffsetKey, i64> =
            batch.iter().map(|r| (r.key(), r.offset)).collect();

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
        assert_eq!(keys, sorted, "{name}: scan is in key order without repeats");
        let got: BTreeMap<OffsetKey, i64> = seen.iter().map(|r| (r.key(), r.offset)).collect();
        assert_eq!(got, expected, "{name}");
    });
}

#[test]
fn eight_threads_commit_concurrently() {
    each_store(|name, store, _| {
        let store: &OffsetStoreHandle = store;
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
            assert_eq!(got.len(), 20, "{name}");
            assert!(got.iter().all(|r| r.offset == 50), "{name}: {got:?}");
        }
    });
}

#[test]
fn calls_after_close_fail_cleanly() {
    for (lib, name) in OFFSET_STORES {
        let dir = PluginDir::new();
        let store = open_store(&dir, lib, &store_config(name, &dir));
        store.close().unwrap();
        let err = store.commit(&[record("g", "t", 0, 1, "")]).unwrap_err();
        assert!(
            matches!(&err, CallError::Plugin { error, .. } if error.kind == ErrorKind::Closed),
            "{name}: {err}"
        );
    }
}

#[test]
fn no_acknowledged_commit_is_lost_on_sigkill() {
    for (lib, name) in OFFSET_STORES {
        let dir = PluginDir::new();
        let config = store_config(name, &dir);
        let plugin = dir.add_built(lib);
        let keys = 16;
        let mut child = Command::new(env!("CARGO_BIN_EXE_drover-commit-load"))
            .arg(&plugin)
            .arg(dir.scratch("child-cache"))
            .arg(&config)
            .arg(keys.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut acked = 0i64;
        while acked < 300 {
            match lines.next() {
                Some(line) => acked = line.unwrap().parse().unwrap(),
                None => panic!("{name}: committer died after {acked} batches"),
            }
        }
        child.kill().unwrap(); // SIGKILL
        for line in lines {
            acked = line.unwrap().parse().unwrap();
        }
        child.wait().unwrap();

        let store = open_store(&dir, lib, &config);
        let got = store.fetch_group("crash").unwrap();
        assert_eq!(got.len(), keys, "{name}");
        for r in &got {
            assert!(
                r.offset >= acked && r.offset <= acked + 1,
                "{name}: partition {} has offset {}, last acknowledged batch {acked}",
                r.partition,
                r.offset
            );
        }
        store.close().unwrap();
    }
}
