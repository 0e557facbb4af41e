//! The share-state properties (offset-store ABI 3.2), skipped for a store that answers
//! `share_state_supported() == false` (one built before 3.2 always does):
//!
//! | property | what |
//! |---|---|
//! | `share_state` | written states come back exactly from `read_share_state` (absent ones absent); a later write replaces the whole state; `scan_share_state` pages in key order; `delete_share_state` of partitions and of a whole group returns how many existed; a state with more than `MAX_SHARE_STATE_RUNS` runs is refused with `InvalidInput`, nothing of its batch written |
//! | `share_state_reopen` | a state written before `close` is there after opening again |

use drover_abi::{
    offset_store::OffsetStoreArc,
    std_types::{ROption, RSlice, RStr, RString},
    ErrorKind, OffsetKey, ShareStateRecord, ShareStateRun, TopicPartitions, MAX_SHARE_STATE_RUNS,
};

use crate::{Report, Verdict};

/// A share state of `group`/`topic`/`partition` with `runs` runs from `start`.
pub(super) fn state(
    group: &str,
    topic: &str,
    partition: i32,
    start: i64,
    runs: usize,
) -> ShareStateRecord {
    ShareStateRecord {
        group: RString::from(group),
        topic: RString::from(topic),
        partition,
        topic_id: [partition as u8; 16],
        state_epoch: 3,
        start_offset: start,
        runs: (0..runs as i64)
            .map(|i| ShareStateRun {
                first_offset: start + i,
                last_offset: start + i,
                state: [1u8, 2, 4, 0][i as usize % 4],
                delivery_count: (i % 5) as u16 + 1,
            })
            .collect(),
        write_time_ms: 1_700_000_000_000 + start,
    }
}

fn read(
    store: &OffsetStoreArc,
    group: &str,
    partitions: &[TopicPartitions],
) -> Result<Vec<ShareStateRecord>, String> {
    store
        .read_share_state(RStr::from_str(group), RSlice::from_slice(partitions))
        .into_result()
        .map(|v| v.into_vec())
        .map_err(|e| format!("read_share_state failed: {e}"))
}

fn write(store: &OffsetStoreArc, batch: &[ShareStateRecord]) -> Result<(), String> {
    store
        .write_share_state(RSlice::from_slice(batch))
        .into_result()
        .map_err(|e| format!("write_share_state failed: {e}"))
}

fn delete(
    store: &OffsetStoreArc,
    group: &str,
    partitions: &[TopicPartitions],
) -> Result<u64, String> {
    store
        .delete_share_state(RStr::from_str(group), RSlice::from_slice(partitions))
        .into_result()
        .map_err(|e| format!("delete_share_state failed: {e}"))
}

fn expect(what: &str, got: Vec<ShareStateRecord>, want: &[ShareStateRecord]) -> Result<(), String> {
    let mut got = got;
    got.sort_by_key(ShareStateRecord::key);
    let mut want = want.to_vec();
    want.sort_by_key(ShareStateRecord::key);
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{what}: got {} states {:?}, expected {} {:?}",
            got.len(),
            got.iter()
                .map(|r| (r.key(), r.start_offset, r.runs.len()))
                .collect::<Vec<_>>(),
            want.len(),
            want.iter()
                .map(|r| (r.key(), r.start_offset, r.runs.len()))
                .collect::<Vec<_>>()
        ))
    }
}

/// Records `share_state` in `report` for the store, on groups `group`-….
pub(super) fn run(report: &mut Report, store: &OffsetStoreArc, group: &str) {
    if !store.share_state_supported() {
        report.push(
            "share_state",
            Verdict::Skip("the store keeps no share-group state".into()),
        );
        return;
    }
    report.record("share_state", share_state(store, group));
}

fn share_state(store: &OffsetStoreArc, group: &str) -> Result<(), String> {
    let a = state(group, "orders", 0, 100, 3);
    let b = state(group, "orders", 1, 0, 0);
    let c = state(group, "payments", 2, 7, 40);
    write(store, &[a.clone(), b.clone(), c.clone()])?;
    let all = [
        TopicPartitions::new("orders", vec![0, 1, 5]),
        TopicPartitions::new("payments", vec![2]),
    ];
    expect(
        "read",
        read(store, group, &all)?,
        &[a.clone(), b.clone(), c.clone()],
    )?;
    // A later write replaces the whole state.
    let a2 = state(group, "orders", 0, 101, 1);
    write(store, std::slice::from_ref(&a2))?;
    expect(
        "read after a rewrite",
        read(store, group, &all)?,
        &[a2.clone(), b.clone(), c.clone()],
    )?;
    // Too many runs: refused, nothing of the batch written.
    let huge = state(group, "orders", 9, 0, MAX_SHARE_STATE_RUNS + 1);
    let fresh = state(group, "orders", 8, 0, 1);
    match store
        .write_share_state(RSlice::from_slice(&[fresh, huge]))
        .into_result()
    {
        Err(e) if e.kind == ErrorKind::InvalidInput => {}
        Err(e) => {
            return Err(format!(
                "a state of too many runs: {e}, expected InvalidInput"
            ))
        }
        Ok(()) => return Err("a state of too many runs was written".into()),
    }
    let refused = read(store, group, &[TopicPartitions::new("orders", vec![8, 9])])?;
    if !refused.is_empty() {
        return Err("part of a refused batch was written".into());
    }
    // Scan in key order, two at a time, from just before the group.
    let mut after = Some(OffsetKey {
        group: RString::from(group),
        topic: RString::new(),
        partition: i32::MIN,
    });
    let mut seen = Vec::new();
    loop {
        let page = store
            .scan_share_state(ROption::from(after.take()), 2)
            .into_result()
            .map_err(|e| format!("scan_share_state failed: {e}"))?
            .into_vec();
        let mine: Vec<_> = page
            .iter()
            .filter(|r| r.group.as_str() == group)
            .cloned()
            .collect();
        let done = page.len() < 2 || mine.len() < page.len();
        after = page.last().map(ShareStateRecord::key);
        seen.extend(mine);
        if done {
            break;
        }
    }
    if seen != [a2.clone(), b.clone(), c.clone()] {
        return Err(format!(
            "scan_share_state: {:?}, expected the group's three states in key order",
            seen.iter().map(ShareStateRecord::key).collect::<Vec<_>>()
        ));
    }
    // Delete one partition, then the group.
    let one = delete(store, group, &[TopicPartitions::new("orders", vec![1, 5])])?;
    if one != 1 {
        return Err(format!(
            "delete_share_state of one held partition returned {one}"
        ));
    }
    expect("read after a delete", read(store, group, &all)?, &[a2, c])?;
    let rest = delete(store, group, &[])?;
    if rest != 2 {
        return Err(format!(
            "delete_share_state of the group returned {rest}, expected 2"
        ));
    }
    expect(
        "read after deleting the group",
        read(store, group, &all)?,
        &[],
    )
}

/// Writes the state `share_state_reopen` checks, before the close.
pub(super) fn before_reopen(
    store: &OffsetStoreArc,
    group: &str,
) -> Option<Result<ShareStateRecord, String>> {
    store.share_state_supported().then(|| {
        let s = state(group, "kept", 0, 5, 4);
        write(store, std::slice::from_ref(&s)).map(|()| s)
    })
}

/// Records `share_state_reopen`: what [`before_reopen`] wrote is there.
pub(super) fn after_reopen(
    report: &mut Report,
    store: &OffsetStoreArc,
    group: &str,
    written: Option<Result<ShareStateRecord, String>>,
) {
    let Some(written) = written else {
        report.push(
            "share_state_reopen",
            Verdict::Skip("the store keeps no share-group state".into()),
        );
        return;
    };
    let result = written.and_then(|s| {
        let got = read(store, group, &[TopicPartitions::new("kept", vec![0])])?;
        expect(
            "after a close and a fresh open",
            got,
            std::slice::from_ref(&s),
        )
    });
    let _ = delete(store, group, &[]);
    report.record("share_state_reopen", result);
}
