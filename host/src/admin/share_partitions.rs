//! A share group's share-partitions in `GET /v1/groups/{group}` (`share_partitions`;
//! issue 31 item 5): per share-partition the start and end offsets, the records in
//! flight, the delivery-count histogram and the archived count.
//!
//! Two sources, merged by (topic, partition): the offset store's saved state of the
//! group (every share-partition with state, at most [`MAX_LISTED`]; the window's
//! counts read from the saved runs), and the share-partitions in this broker's memory
//! ([`crate::share::SharePartitions::stats`]), which are at least as new and add what
//! happened since they were loaded (`loaded: true`). In cluster mode a share-partition
//! is in the memory of the broker that served its fetches, so another broker's view of
//! it comes from the store.

use std::collections::BTreeMap;

use drover_share::{ShareCounters, ShareStats, WindowCounts};
use serde::Serialize;

use crate::broker::Broker;

/// The most share-partitions one group's view lists.
pub const MAX_LISTED: usize = 10_000;

/// One share-partition in [`crate::admin::groups::GroupDetail::share_partitions`].
#[derive(Debug, Serialize)]
pub struct SharePartitionView {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Share-partition start offset (SPSO): every record below is acknowledged or
    /// archived.
    pub start_offset: i64,
    /// Share-partition end offset (SPEO): one past the last offset fetched.
    pub end_offset: i64,
    /// The partition's log end offset, when the partition exists on this broker.
    pub log_end_offset: Option<i64>,
    /// Records acquired by members now, under a lock (from the saved state when not
    /// loaded: those acquired when it was last written).
    pub in_flight: u64,
    /// Records between the start and end offsets available to the next fetch.
    pub available: u64,
    /// Records between the start and end offsets acknowledged / archived (an earlier
    /// offset is still open, so the start offset has not passed them).
    pub acknowledged_in_window: u64,
    /// See `acknowledged_in_window`.
    pub archived_in_window: u64,
    /// Whether this broker holds it in memory: the fields below are then counts since
    /// it was loaded; `null` otherwise.
    pub loaded: bool,
    /// Deliveries by delivery count since loaded: `[0]` first deliveries, `[1]` second
    /// ones, …, `[9]` the tenth and later.
    pub delivery_counts: Option<Vec<u64>>,
    /// Records archived since loaded (rejected, gaps, aborted, or at the delivery-count
    /// limit).
    pub archived: Option<u64>,
    /// Records acknowledged (Accept) since loaded.
    pub acknowledged: Option<u64>,
}

/// `group`'s share-partitions (module docs), in (topic, partition) order; on the
/// blocking pool (it reads the store). `Err` with the store's error.
pub fn view(broker: &Broker, group: &str) -> Result<Vec<SharePartitionView>, String> {
    let mut out: BTreeMap<(String, i32), SharePartitionView> = BTreeMap::new();
    if let Some(stores) = broker.offsets().filter(|s| s.share_state_supported()) {
        let saved = stores
            .group_share_state(group, MAX_LISTED)
            .map_err(|e| e.to_string())?;
        for r in saved {
            let Some(snapshot) = crate::share::partitions::snapshot_of(&r) else {
                continue;
            };
            let stats = ShareStats {
                start_offset: snapshot.start_offset,
                end_offset: snapshot.end_offset(),
                window: WindowCounts::of_runs(&snapshot.runs),
                counters: ShareCounters::default(),
            };
            let (topic, partition) = (r.topic.to_string(), r.partition);
            out.insert(
                (topic.clone(), partition),
                entry(broker, topic, partition, &stats, false),
            );
        }
    }
    for (key, stats) in broker.share.partitions.stats(Some(group)) {
        if out.len() >= MAX_LISTED && !out.contains_key(&(key.topic.to_string(), key.partition)) {
            continue;
        }
        let topic = key.topic.to_string();
        out.insert(
            (topic.clone(), key.partition),
            entry(broker, topic, key.partition, &stats, true),
        );
    }
    Ok(out.into_values().collect())
}

fn entry(
    broker: &Broker,
    topic: String,
    partition: i32,
    s: &ShareStats,
    loaded: bool,
) -> SharePartitionView {
    let log_end_offset = broker.topics.get(&topic).and_then(|t| {
        usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
            .map(|p| p.lock_log().log_end_offset())
    });
    SharePartitionView {
        topic,
        partition,
        start_offset: s.start_offset,
        end_offset: s.end_offset,
        log_end_offset,
        in_flight: s.window.acquired,
        available: s.window.available,
        acknowledged_in_window: s.window.acknowledged,
        archived_in_window: s.window.archived,
        loaded,
        delivery_counts: loaded.then(|| s.counters.deliveries.to_vec()),
        archived: loaded.then_some(s.counters.archived),
        acknowledged: loaded.then_some(s.counters.acknowledged),
    }
}
