//! Removing the committed offsets of deleted topics from real offset stores (the
//! `embedded` store's `.so`, loaded through the host's loader), below the broker:
//!
//! - the store worker runs a topic deletion where it was queued in its batch: a commit
//!   queued before it (in flight for the old topic) is removed, one queued after it (for
//!   the re-created topic) stays;
//! - a sweep during an offset-store swap removes the offsets from both stores, whichever
//!   one reads come from, and keeps every other offset of the groups it rewrites.

use std::{collections::BTreeSet, sync::Arc};

use drover_abi::{coordinator::CoordinatorInput, std_types::RResult, OffsetRecord};
use drover_host::{
    coordination::{
        store_worker::{self, StoreOp},
        topic_deletion::{self, GroupOwner, Swept},
    },
    offsets::{NamedStore, OffsetStores},
};
use drover_tests::{open_store, PluginDir};

fn store(dir: &PluginDir, name: &str) -> NamedStore {
    let config = format!(
        "path = {:?}\n",
        dir.scratch(&format!("{name}.redb")).display().to_string()
    );
    NamedStore {
        name: name.into(),
        store: Arc::new(open_store(dir, "drover_offsets_embedded", &config)),
        config,
    }
}

fn record(group: &str, topic: &str, partition: i32, offset: i64) -> OffsetRecord {
    OffsetRecord {
        group: group.into(),
        topic: topic.into(),
        partition,
        offset,
        metadata: "".into(),
        commit_time_ms: 1,
    }
}

/// Every offset of a store as (group, topic, partition, offset).
fn contents(store: &NamedStore) -> Vec<(String, String, i32, i64)> {
    store
        .store
        .scan(None, 10_000)
        .expect("scan")
        .into_iter()
        .map(|r| (r.group.into(), r.topic.into(), r.partition, r.offset))
        .collect()
}

fn row(group: &str, topic: &str, partition: i32, offset: i64) -> (String, String, i32, i64) {
    (group.into(), topic.into(), partition, offset)
}

fn topics(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn a_topic_deletion_runs_where_it_was_queued_in_its_batch() {
    let dir = PluginDir::new();
    let one = store(&dir, "one");
    let stores = OffsetStores::new(one.clone());
    stores
        .commit(&[record("g", "t", 0, 60), record("g", "u", 0, 7)])
        .expect("commit");
    let results = store_worker::execute(
        &stores,
        vec![
            // In flight for the old topic when it was deleted.
            StoreOp::Commit {
                op: 1,
                records: vec![record("g", "t", 1, 61), record("h", "t", 0, 9)].into(),
            },
            StoreOp::DeleteTopics {
                topics: topics(&["t"]),
                owner: GroupOwner::All,
            },
            // Issued for the re-created topic.
            StoreOp::Commit {
                op: 2,
                records: vec![record("g", "t", 0, 3)].into(),
            },
        ],
    );
    let committed: Vec<(u64, bool)> = results
        .iter()
        .map(|r| match r {
            CoordinatorInput::OffsetsCommitted { op, result } => {
                (*op, matches!(result, RResult::ROk(())))
            }
            other => panic!("unexpected result {other:?}"),
        })
        .collect();
    assert_eq!(committed, [(1, true), (2, true)]);
    assert_eq!(
        contents(&one),
        [row("g", "t", 0, 3), row("g", "u", 0, 7)],
        "the old topic's offsets gone, the new topic's commit and the other topic kept"
    );
}

#[test]
fn a_sweep_during_a_swap_reaches_both_stores() {
    for switched in [false, true] {
        let dir = PluginDir::new();
        let (old, new) = (store(&dir, "old"), store(&dir, "new"));
        let stores = OffsetStores::swapping(old.clone(), new.clone(), switched);
        stores
            .commit(&[
                record("g1", "t", 0, 60),
                record("g1", "t", 1, 61),
                record("g1", "u", 0, 7),
                record("g2", "t", 0, 5),
                record("g3", "u", 0, 1),
            ])
            .expect("commit");
        let swept =
            topic_deletion::sweep(&stores, &topics(&["t"]), &GroupOwner::All).expect("sweep");
        assert_eq!(
            swept,
            Swept {
                groups: 2,
                offsets: 3
            }
        );
        let left = [row("g1", "u", 0, 7), row("g3", "u", 0, 1)];
        assert_eq!(contents(&old), left, "old store, switched = {switched}");
        assert_eq!(contents(&new), left, "new store, switched = {switched}");
        // Nothing left to remove: a second sweep changes nothing.
        let again =
            topic_deletion::sweep(&stores, &topics(&["t"]), &GroupOwner::All).expect("sweep");
        assert_eq!(again, Swept::default());
    }
}
