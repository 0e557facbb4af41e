//! Loading, snapshotting and trimming a partition's producer state
//! ([`crate::producer_state`]).
//!
//! On open (and after a recovery from a storage error) the newest readable snapshot at
//! or below the log end offset is loaded and the batch headers from its offset to the
//! log end are replayed. Snapshots are written at every segment roll and at a clean
//! shutdown, so after a clean shutdown nothing is replayed and after a `kill -9` only
//! the active segment is (its headers only, one positioned read per batch). Without a
//! usable snapshot (none yet, or every one corrupt, which is logged) the state is
//! rebuilt from the last [`SEGMENTS_WITHOUT_SNAPSHOT`] segments, as Kafka bounds the
//! same rebuild; producers whose last batch is older are unknown afterwards, which a
//! Kafka 4.x producer survives (an unknown producer's batch is accepted). A snapshot
//! holding more producers than `max_producer_ids_per_partition` (written before the cap
//! was lowered) is loaded, and the producers idle longest are evicted down to the cap;
//! they are counted in `drover_producer_ids_evicted_total` with the partition's next
//! append (reported in its `AppendInfo::producers_evicted`).

use std::path::Path;

use tracing::{info, warn};

use super::{sync_dir, PartitionLog};
use crate::{
    config::MAX_PRODUCER_IDS_PER_PARTITION,
    producer_state::{snapshot, ProducerLimits, ProducerStates},
    segment::Segment,
    txn_index::AbortedTxn,
    txn_marker::{self, TxnResult},
    LogConfig, LogError,
};

/// How many of the newest segments are replayed when no snapshot can be used.
pub const SEGMENTS_WITHOUT_SNAPSHOT: usize = 2;

/// How many snapshot files a partition keeps (the newest); older ones are deleted
/// after each new one.
pub const SNAPSHOTS_KEPT: usize = 2;

/// The producer limits of `config`.
pub(super) fn limits(config: &LogConfig) -> ProducerLimits {
    ProducerLimits {
        expiration_ms: config.producer_id_expiration_ms,
        max_producer_ids: config.max_producer_ids_per_partition,
        min_idle_for_eviction_ms: config.producer_id_eviction_min_idle_ms,
    }
}

/// The producer state of the log in `dir` whose segments are `segments` (loaded and
/// recovered), as of its end: the newest usable snapshot plus the batches after it.
/// A producer rebuilt from a batch header counts as written at the batch's max
/// timestamp clamped to `now_ms` (ms since the Unix epoch; a timestamp in the future
/// counts as now), as Kafka's `ProducerStateManager` keeps each producer's last
/// timestamp from its batches: producers that wrote long ago stay older than those that
/// wrote last, so eviction at the cap after a crash still picks the one idle longest.
///
/// The transactions aborted by the markers replayed come back too, for the
/// aborted-transactions index (which a crash may have left without them).
///
/// Errors: [`LogError::Io`] reading the directory or a segment, [`LogError::Corrupt`]
/// for a batch header that does not parse (recovery has checked them).
pub(super) fn load(
    dir: &Path,
    segments: &[Segment],
    limits: ProducerLimits,
    now_ms: i64,
) -> Result<(ProducerStates, Vec<AbortedTxn>), LogError> {
    let start = segments.first().map_or(0, |s| s.base_offset);
    let end = segments.last().map_or(0, |s| s.next_offset);
    let mut states = None;
    let mut from = None;
    snapshot::remove_temporaries(dir).map_err(LogError::io(dir))?;
    let files = snapshot::list(dir).map_err(LogError::io(dir))?;
    for (offset, path) in files.iter().rev() {
        if *offset > end {
            warn!(file = %path.display(), end, "deleting a producer snapshot past the log end");
            std::fs::remove_file(path).map_err(LogError::io(path))?;
            continue;
        }
        let decoded = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                snapshot::decode(&b, MAX_PRODUCER_IDS_PER_PARTITION).map_err(|e| e.to_string())
            });
        match decoded {
            Ok(s) if s.offset == *offset => {
                let loaded = ProducerStates::with_entries(limits, s.producers);
                if loaded.evicted() > 0 {
                    info!(
                        file = %path.display(),
                        evicted = loaded.evicted(),
                        max = limits.max_producer_ids,
                        "producer snapshot holds more producers than \
                         max_producer_ids_per_partition: the ones idle longest are forgotten"
                    );
                }
                states = Some(loaded);
                from = Some(*offset);
                break;
            }
            Ok(s) => warn!(
                file = %path.display(),
                "producer snapshot names offset {}, not its file's; ignored", s.offset
            ),
            Err(e) => warn!(
                file = %path.display(),
                "producer snapshot refused: {e}; rebuilding from the log instead"
            ),
        }
    }
    let from = from.unwrap_or_else(|| {
        let first = segments.len().saturating_sub(SEGMENTS_WITHOUT_SNAPSHOT);
        let from = segments.get(first).map_or(0, |s| s.base_offset);
        if first > 0 {
            info!(
                dir = %dir.display(),
                from,
                "no producer snapshot: producer state rebuilt from the last segments only"
            );
        }
        from
    });
    let mut states = states.unwrap_or_else(|| ProducerStates::new(limits));
    let aborted = replay(segments, from, &mut states, now_ms)?;
    states.truncate_head(start);
    Ok((states, aborted))
}

/// Records every batch with a producer id whose last offset is at or after `from`;
/// returns the transactions the abort markers among them ended.
fn replay(
    segments: &[Segment],
    from: i64,
    states: &mut ProducerStates,
    now_ms: i64,
) -> Result<Vec<AbortedTxn>, LogError> {
    let mut aborted = Vec::new();
    let first = segments
        .partition_point(|s| s.base_offset <= from)
        .saturating_sub(1);
    for segment in &segments[first..] {
        let mut position = 0;
        while position < segment.size {
            let header = segment.header_at(position)?;
            if header.producer_id >= 0 && header.last_offset() >= from {
                let abort_of = if header.is_control() {
                    let bytes = segment.bytes_at(position, header.size())?;
                    (txn_marker::decode_result(&header, &bytes) == Some(TxnResult::Abort))
                        .then(|| {
                            states
                                .get(header.producer_id, now_ms)
                                .and_then(|e| e.txn_first_offset)
                        })
                        .flatten()
                } else {
                    None
                };
                states.record(
                    &header,
                    header.base_offset,
                    header.max_timestamp.min(now_ms),
                );
                if let Some(first_offset) = abort_of {
                    aborted.push(AbortedTxn {
                        producer_id: header.producer_id,
                        first_offset,
                        last_offset: header.base_offset,
                        last_stable_offset: states
                            .first_unstable_offset()
                            .unwrap_or_else(|| header.next_offset()),
                    });
                }
            }
            position += header.size() as u64;
        }
    }
    Ok(aborted)
}

impl PartitionLog {
    /// Writes the producer state as of the log end offset to a snapshot file and
    /// deletes all but the newest [`SNAPSHOTS_KEPT`]. A failure is logged, not
    /// returned: without the snapshot, the next open replays more of the log.
    pub(super) fn write_producer_snapshot(&self) {
        let offset = self.log_end_offset();
        let bytes = snapshot::encode(offset, self.producers.entries());
        let written = snapshot::write(&self.dir, offset, &bytes)
            .map_err(|e| e.to_string())
            .and_then(|_| self.trim_snapshots(i64::MIN).map_err(|e| e.to_string()))
            .and_then(|()| sync_dir(&self.dir).map_err(|e| e.to_string()));
        if let Err(e) = written {
            warn!(dir = %self.dir.display(), offset, "writing a producer snapshot: {e}");
        }
    }

    /// Deletes snapshots below `below` and all but the newest [`SNAPSHOTS_KEPT`].
    pub(super) fn trim_snapshots(&self, below: i64) -> Result<(), LogError> {
        let files = snapshot::list(&self.dir).map_err(LogError::io(&self.dir))?;
        let keep_from = files.len().saturating_sub(SNAPSHOTS_KEPT);
        for (i, (offset, path)) in files.iter().enumerate() {
            if i < keep_from || *offset < below {
                std::fs::remove_file(path).map_err(LogError::io(path))?;
            }
        }
        Ok(())
    }

    /// Reloads the producer state from the snapshots and the log, after the active
    /// segment was recovered from disk.
    pub(super) fn reload_producers(&mut self) -> Result<(), LogError> {
        let (states, aborted) = load(
            &self.dir,
            &self.segments,
            self.producers.limits(),
            crate::clock::now_ms(),
        )?;
        self.producers = states;
        // The new table counts its evictions from 0; all of them are still to report.
        self.producers_evicted_reported = 0;
        self.merge_aborted(aborted)
    }

    /// The producer state, for tests and the admin view.
    pub fn producer_states(&self) -> &ProducerStates {
        &self.producers
    }
}

#[cfg(test)]
#[path = "producers_tests.rs"]
mod tests;
