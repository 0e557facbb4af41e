//! The offset-store properties (listed in the module docs of [`super`]).

use std::collections::BTreeMap;

use drover_abi::{
    offset_store::OffsetStoreArc,
    std_types::{ROption, RSlice, RStr, RString},
    ErrorKind, OffsetKey, OffsetRecord, PluginError, TopicPartitions,
};

use super::{unique_prefix, Opener, Options};
use crate::Report;

/// A record of `group` with a commit time derived from the offset.
pub(super) fn record(
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
    metadata: &str,
) -> OffsetRecord {
    OffsetRecord {
        group: RString::from(group),
        topic: RString::from(topic),
        partition,
        offset,
        metadata: RString::from(metadata),
        commit_time_ms: 1_700_000_000_000 + offset,
    }
}

/// The store's calls with errors as sentences naming the call.
pub(super) struct Store<'a>(pub(super) &'a OffsetStoreArc);

fn failed(call: &str, e: PluginError) -> String {
    format!("{call} failed: {e}")
}

impl Store<'_> {
    pub(super) fn commit(&self, batch: &[OffsetRecord]) -> Result<(), String> {
        self.0
            .commit(RSlice::from_slice(batch))
            .into_result()
            .map_err(|e| failed("commit", e))
    }

    fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, String> {
        self.0
            .fetch(RStr::from_str(group), RSlice::from_slice(partitions))
            .into_result()
            .map(|v| v.into_vec())
            .map_err(|e| failed("fetch", e))
    }

    pub(super) fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, String> {
        self.0
            .fetch_group(RStr::from_str(group))
            .into_result()
            .map(|v| v.into_vec())
            .map_err(|e| failed("fetch_group", e))
    }

    fn list_groups(&self) -> Result<Vec<String>, String> {
        self.0
            .list_groups()
            .into_result()
            .map(|v| v.into_iter().map(RString::into_string).collect())
            .map_err(|e| failed("list_groups", e))
    }

    pub(super) fn delete_group(&self, group: &str) -> Result<u64, String> {
        self.0
            .delete_group(RStr::from_str(group))
            .into_result()
            .map_err(|e| failed("delete_group", e))
    }

    fn scan(&self, after: Option<OffsetKey>, limit: u32) -> Result<Vec<OffsetRecord>, PluginError> {
        self.0
            .scan(ROption::from(after), limit)
            .into_result()
            .map(|v| v.into_vec())
    }
}

/// `records` sorted by key, for comparing sets of records.
fn sorted(mut records: Vec<OffsetRecord>) -> Vec<OffsetRecord> {
    records.sort_by_key(OffsetRecord::key);
    records
}

/// Compares what a store returned with what it should have, naming the first
/// difference.
fn expect_records(
    what: &str,
    got: Vec<OffsetRecord>,
    want: Vec<OffsetRecord>,
) -> Result<(), String> {
    let (got, want) = (sorted(got), sorted(want));
    if got == want {
        return Ok(());
    }
    let got_map: BTreeMap<OffsetKey, &OffsetRecord> = got.iter().map(|r| (r.key(), r)).collect();
    for w in &want {
        match got_map.get(&w.key()) {
            None => {
                return Err(format!(
                    "{what}: partition {} of `{}` in group `{}` is missing (offset {} was committed)",
                    w.partition, w.topic, w.group, w.offset
                ))
            }
            Some(g) if *g != w => {
                return Err(format!(
                    "{what}: partition {} of `{}` in group `{}` is offset {} (metadata {} bytes, time {}), expected offset {} (metadata {} bytes, time {})",
                    w.partition, w.topic, w.group, g.offset, g.metadata.len(), g.commit_time_ms,
                    w.offset, w.metadata.len(), w.commit_time_ms
                ))
            }
            Some(_) => {}
        }
    }
    Err(format!(
        "{what}: {} records returned, expected {} (extra or repeated records)",
        got.len(),
        want.len()
    ))
}

pub(super) fn run(open: &Opener<'_>, options: &Options) -> Report {
    let mut report = Report::new("offset-store");
    let prefix = unique_prefix();
    let group = |name: &str| format!("{prefix}-{name}");
    let store = match open() {
        Ok(store) => store,
        Err(e) => {
            report.record("open", Err(format!("the store did not open: {e}")));
            return report;
        }
    };
    report.record("open", Ok(()));
    let s = Store(&store);

    report.record("round_trip", round_trip(&s, &group("round-trip")));
    report.record("later_record_wins", later_record_wins(&s, &group("later")));
    report.record(
        "all_or_nothing",
        all_or_nothing(&s, &group("refused"), options.max_metadata_bytes),
    );
    report.record("fetch_group", fetch_group(&s, &group("fg")));
    report.record("list_groups", list_groups(&s, &group("list")));
    report.record("delete_group", delete_group(&s, &group("delete")));
    report.record(
        "scan_paging",
        scan_paging(&s, &group("scan"), options.scan_records),
    );
    report.record(
        "concurrent_commits",
        concurrent_commits(&s, &group("concurrent"), options.threads),
    );
    super::share_props::run(&mut report, &store, &group("share"));
    let shares = super::share_props::before_reopen(&store, &group("share-reopen"));
    let acknowledged = reopen_batches(&group("reopen"));
    let committed = acknowledged.iter().try_for_each(|batch| s.commit(batch));
    report.record("close", committed.clone().and_then(|()| close(&s)));
    drop(store);

    match open() {
        Ok(store) => {
            let s = Store(&store);
            let reopened = committed
                .map_err(|e| format!("could not commit the batches to check: {e}"))
                .and_then(|()| {
                    let want = latest(acknowledged.iter().flatten());
                    expect_records(
                        "after a close and a fresh open",
                        s.fetch_group(&group("reopen"))?,
                        want,
                    )
                });
            report.record("reopen", reopened);
            super::share_props::after_reopen(&mut report, &store, &group("share-reopen"), shares);
            clean_up(&s, &prefix);
            let _ = store.close();
        }
        Err(e) => report.record("reopen", Err(format!("the store did not open again: {e}"))),
    }
    report
}

/// The last record of each key among `records`.
fn latest<'a>(records: impl Iterator<Item = &'a OffsetRecord>) -> Vec<OffsetRecord> {
    let map: BTreeMap<OffsetKey, OffsetRecord> = records.map(|r| (r.key(), r.clone())).collect();
    map.into_values().collect()
}

fn round_trip(s: &Store<'_>, group: &str) -> Result<(), String> {
    let meta = "ünïcode metadata, and a long tail ".repeat(20);
    let records = vec![
        record(group, "orders", 0, 42, &meta),
        record(group, "orders", 1, 7, ""),
        record(group, "payments", 3, 0, "m"),
    ];
    s.commit(&records)?;
    let got = s.fetch(
        group,
        &[
            TopicPartitions::new("orders", vec![0, 1, 2]),
            TopicPartitions::new("payments", vec![3]),
            TopicPartitions::new("unknown", vec![0]),
        ],
    )?;
    expect_records("fetch", got, records)?;
    let other = format!("{group}-never-committed");
    let unknown = s.fetch(&other, &[TopicPartitions::new("orders", vec![0])])?;
    if !unknown.is_empty() || !s.fetch_group(&other)?.is_empty() {
        return Err("a group that never committed has offsets".to_owned());
    }
    Ok(())
}

fn later_record_wins(s: &Store<'_>, group: &str) -> Result<(), String> {
    s.commit(&[
        record(group, "t", 0, 5, "first"),
        record(group, "t", 1, 1, ""),
        record(group, "t", 0, 6, "second"),
    ])?;
    expect_records(
        "a batch with two records for one key",
        s.fetch_group(group)?,
        vec![
            record(group, "t", 0, 6, "second"),
            record(group, "t", 1, 1, ""),
        ],
    )
}

fn all_or_nothing(s: &Store<'_>, group: &str, max_metadata_bytes: usize) -> Result<(), String> {
    let before = vec![record(group, "t", 0, 10, "before")];
    s.commit(&before)?;
    let too_long = "x".repeat(max_metadata_bytes + 1);
    let batch = [
        record(group, "t", 0, 11, "after"),
        record(group, "t", 1, 11, &too_long),
        record(group, "t", 2, 11, "after"),
    ];
    match s.0.commit(RSlice::from_slice(&batch)).into_result() {
        Ok(()) => {
            return Err(format!(
                "a batch with {} bytes of metadata (limit {max_metadata_bytes}) was accepted",
                too_long.len()
            ))
        }
        Err(e) if e.kind != ErrorKind::InvalidInput => {
            return Err(format!(
                "a batch with over-long metadata was refused with {e}, expected kind InvalidInput"
            ))
        }
        Err(_) => {}
    }
    expect_records("after a refused batch", s.fetch_group(group)?, before)
}

fn fetch_group(s: &Store<'_>, group: &str) -> Result<(), String> {
    let mine: Vec<OffsetRecord> = (0..5)
        .map(|p| {
            record(
                group,
                if p % 2 == 0 { "a" } else { "b" },
                p,
                i64::from(p) * 3,
                "",
            )
        })
        .collect();
    let neighbour = format!("{group}x");
    s.commit(&mine)?;
    s.commit(&[record(&neighbour, "a", 0, 1, "")])?;
    expect_records("fetch_group", s.fetch_group(group)?, mine)
}

fn list_groups(s: &Store<'_>, group: &str) -> Result<(), String> {
    let names = [
        format!("{group}-b"),
        format!("{group}-a"),
        format!("{group}-c"),
    ];
    let batch: Vec<OffsetRecord> = names.iter().map(|g| record(g, "t", 0, 1, "")).collect();
    s.commit(&batch)?;
    s.commit(&[record(&names[1], "u", 3, 9, "")])?;
    let listed = s.list_groups()?;
    if listed.windows(2).any(|w| w[0] >= w[1]) {
        return Err("list_groups is not sorted without repeats".to_owned());
    }
    let mine: Vec<&String> = listed.iter().filter(|g| g.starts_with(group)).collect();
    let mut want: Vec<&String> = names.iter().collect();
    want.sort();
    if mine != want {
        return Err(format!("list_groups gave {mine:?}, expected {want:?}"));
    }
    Ok(())
}

fn delete_group(s: &Store<'_>, group: &str) -> Result<(), String> {
    let (gone, stays) = (format!("{group}-gone"), format!("{group}-stays"));
    s.commit(&[
        record(&gone, "t", 0, 1, ""),
        record(&gone, "u", 3, 9, ""),
        record(&stays, "t", 0, 5, ""),
    ])?;
    let deleted = s.delete_group(&gone)?;
    if deleted != 2 {
        return Err(format!("delete_group returned {deleted}, expected 2"));
    }
    if !s.fetch_group(&gone)?.is_empty() {
        return Err("a deleted group still has offsets".to_owned());
    }
    if s.list_groups()?.contains(&gone) {
        return Err("a deleted group is still listed".to_owned());
    }
    expect_records(
        "another group after delete_group",
        s.fetch_group(&stays)?,
        vec![record(&stays, "t", 0, 5, "")],
    )?;
    match s.delete_group(&gone)? {
        0 => Ok(()),
        n => Err(format!("deleting a deleted group returned {n}, expected 0")),
    }
}

fn scan_paging(s: &Store<'_>, group: &str, records: usize) -> Result<(), String> {
    let batch: Vec<OffsetRecord> = (0..records)
        .map(|i| {
            record(
                &format!("{group}-{:02}", i % 10),
                &format!("t{}", (i / 10) % 100),
                (i / 1000) as i32,
                i as i64,
                "m",
            )
        })
        .collect();
    s.commit(&batch)?;
    match s.scan(None, 0) {
        Err(e) if e.kind == ErrorKind::InvalidInput => {}
        Err(e) => {
            return Err(format!(
                "scan with limit 0 failed with {e}, expected InvalidInput"
            ))
        }
        Ok(_) => return Err("scan with limit 0 was accepted; expected InvalidInput".to_owned()),
    }
    // Start just before the first key of this property's groups.
    let mut after = Some(OffsetKey {
        group: RString::from(group),
        topic: RString::new(),
        partition: i32::MIN,
    });
    let mut seen: Vec<OffsetRecord> = Vec::new();
    'pages: loop {
        let page = s.scan(after.clone(), 997).map_err(|e| failed("scan", e))?;
        if page.len() > 997 {
            return Err(format!(
                "scan returned {} records for a limit of 997",
                page.len()
            ));
        }
        let Some(last) = page.last() else { break };
        let next = last.key();
        for r in page {
            if after.as_ref().is_some_and(|a| r.key() <= *a) {
                return Err(format!(
                    "scan returned {:?} after {:?}: not in key order",
                    r.key(),
                    after
                ));
            }
            if !r.group.starts_with(group) {
                break 'pages;
            }
            after = Some(r.key());
            seen.push(r);
        }
        after = Some(next);
    }
    expect_records("a full scan", seen, latest(batch.iter()))
}

fn concurrent_commits(s: &Store<'_>, group: &str, threads: usize) -> Result<(), String> {
    const ROUNDS: i64 = 50;
    const PARTITIONS: i32 = 20;
    let errors: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(), String> {
                    let group = format!("{group}-{t}");
                    for round in 1..=ROUNDS {
                        let batch: Vec<OffsetRecord> = (0..PARTITIONS)
                            .map(|p| record(&group, "t", p, round, ""))
                            .collect();
                        s.commit(&batch)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(result) => result.err(),
                Err(_) => Some("a committing thread panicked".to_owned()),
            })
            .collect()
    });
    if let Some(e) = errors.first() {
        return Err(format!("{threads} threads committing at once: {e}"));
    }
    for t in 0..threads {
        let group = format!("{group}-{t}");
        let want = (0..PARTITIONS)
            .map(|p| record(&group, "t", p, ROUNDS, ""))
            .collect();
        expect_records("after concurrent commits", s.fetch_group(&group)?, want)?;
    }
    Ok(())
}

/// Three acknowledged batches over the same keys; the last one is what must survive.
fn reopen_batches(group: &str) -> Vec<Vec<OffsetRecord>> {
    vec![
        (0..6).map(|p| record(group, "t", p, 1, "one")).collect(),
        (0..6).map(|p| record(group, "t", p, 2, "two")).collect(),
        (0..3)
            .map(|p| record(group, "t", p, 3, "three"))
            .chain([record(group, "u", 0, 3, "three")])
            .collect(),
    ]
}

fn close(s: &Store<'_>) -> Result<(), String> {
    s.0.close().into_result().map_err(|e| failed("close", e))?;
    let closed = |call: &str, result: Result<(), PluginError>| match result {
        Err(e) if e.kind == ErrorKind::Closed => Ok(()),
        Err(e) => Err(format!(
            "{call} after close failed with {e}, expected kind Closed"
        )),
        Ok(()) => Err(format!(
            "{call} after close succeeded, expected kind Closed"
        )),
    };
    let probe = [record("testkit-closed", "t", 0, 1, "")];
    closed(
        "commit",
        s.0.commit(RSlice::from_slice(&probe)).into_result(),
    )?;
    closed(
        "fetch_group",
        s.0.fetch_group(RStr::from_str("testkit-closed"))
            .into_result()
            .map(drop),
    )?;
    closed("list_groups", s.0.list_groups().into_result().map(drop))?;
    match s.0.close().into_result() {
        Ok(()) => Ok(()),
        Err(e) if e.kind == ErrorKind::Closed => Ok(()),
        Err(e) => Err(format!(
            "a second close failed with {e}, expected Ok or kind Closed"
        )),
    }
}

/// Deletes every group this run created (best effort).
fn clean_up(s: &Store<'_>, prefix: &str) {
    if let Ok(groups) = s.list_groups() {
        for g in groups.iter().filter(|g| g.starts_with(prefix)) {
            let _ = s.delete_group(g);
        }
    }
}
