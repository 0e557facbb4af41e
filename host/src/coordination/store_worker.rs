//! Executes the coordinator's offset-store operations, batched, on a thread of its own.
//!
//! The coordinator asks for commits and fetches as outputs (docs/design.md: "Offset-store
//! operations are outputs executed by the host on a blocking pool (batched), whose
//! results come back as inputs"). The worker takes every operation waiting in its
//! queue (up to `coordinator.max_store_batch`), writes all commits among them in
//! **one** store call (one durable transaction for the embedded store), runs the
//! fetches, and sends every result back to the driver in one message. While a batch is
//! being written, new operations queue up and form the next batch: group commit.
//! The store is whichever [`OffsetStores`] routes to, so a swap happens underneath.
//! A [`StoreOp::DeleteTopics`] (a topic this broker's view lost) splits its batch: the
//! operations queued before it run first, the ones queued after it afterwards.

use std::{collections::BTreeSet, sync::Arc};

use abi_stable::std_types::{RResult, RString, RVec};
use drover_abi::{
    coordinator::CoordinatorInput, ErrorKind, OffsetRecord, PluginError, TopicPartitions,
};

use super::topic_deletion::{self, GroupOwner};
use crate::{offsets::OffsetStores, plugins::CallError};

/// One operation from the coordinator.
#[derive(Debug)]
pub enum StoreOp {
    /// Write `records` durably; answered with `OffsetsCommitted { op }`.
    Commit {
        /// The coordinator's operation id.
        op: u64,
        /// The records.
        records: RVec<OffsetRecord>,
    },
    /// Read committed offsets (every offset of the group when `partitions` is empty);
    /// answered with `OffsetsFetched { op }`.
    Fetch {
        /// The coordinator's operation id.
        op: u64,
        /// The group.
        group: RString,
        /// The partitions, or empty for the whole group.
        partitions: RVec<TopicPartitions>,
    },
    /// Delete committed offsets (the whole group when `partitions` is empty); answered
    /// with `OffsetsDeleted { op }`.
    Delete {
        /// The coordinator's operation id.
        op: u64,
        /// The group.
        group: RString,
        /// The partitions, or empty for the whole group.
        partitions: RVec<TopicPartitions>,
    },
    /// Remove every committed offset of `topics` (deleted, or re-created with a new
    /// id) from the groups `owner` allows ([`topic_deletion`]); no answer. Ordered:
    /// after every operation queued before it, before every one queued after it.
    DeleteTopics {
        /// The lost topics' names.
        topics: BTreeSet<String>,
        /// Which groups this broker may rewrite.
        owner: GroupOwner,
    },
}

/// Runs the worker until `ops` is closed. `deliver` sends a batch of results to the
/// driver; it returns false when the driver is gone, which stops the worker.
pub fn run(
    store: Arc<OffsetStores>,
    ops: flume::Receiver<StoreOp>,
    max_batch: usize,
    deliver: impl Fn(Vec<CoordinatorInput>) -> bool,
) {
    while let Ok(first) = ops.recv() {
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match ops.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        if !deliver(execute(&store, batch)) {
            return;
        }
    }
}

/// Executes one batch: each run of operations between two [`StoreOp::DeleteTopics`]
/// as below, each topic deletion where it was queued.
pub fn execute(store: &OffsetStores, batch: Vec<StoreOp>) -> Vec<CoordinatorInput> {
    let mut results = Vec::new();
    let mut run = Vec::new();
    for op in batch {
        match op {
            StoreOp::DeleteTopics { topics, owner } => {
                results.extend(execute_run(store, std::mem::take(&mut run)));
                delete_topics(store, &topics, &owner);
            }
            other => run.push(other),
        }
    }
    results.extend(execute_run(store, run));
    results
}

/// Attempts at reading the store for a topic deletion, and the pause between two.
const SWEEP_ATTEMPTS: u32 = 3;
const SWEEP_RETRY_MS: u64 = 500;

/// Removes the committed offsets of lost topics, logging what it did. A store that
/// cannot be read is tried [`SWEEP_ATTEMPTS`] times, [`SWEEP_RETRY_MS`] ms apart, in
/// place: later operations must not run before it.
fn delete_topics(store: &OffsetStores, topics: &BTreeSet<String>, owner: &GroupOwner) {
    let mut attempt = 1;
    let outcome = loop {
        match topic_deletion::sweep(store, topics, owner) {
            Err(e) if attempt < SWEEP_ATTEMPTS => {
                tracing::warn!(topics = ?topics, attempt, "reading the offset store to remove the committed offsets of deleted topics: {e}; retrying");
                std::thread::sleep(std::time::Duration::from_millis(SWEEP_RETRY_MS));
                attempt += 1;
            }
            other => break other,
        }
    };
    match outcome {
        Ok(swept) => tracing::info!(
            topics = ?topics,
            groups = swept.groups,
            offsets = swept.offsets,
            "committed offsets of deleted topics removed"
        ),
        Err(e) => tracing::error!(
            topics = ?topics,
            "reading the offset store to remove the committed offsets of deleted topics: {e}; \
             they stay (OffsetDelete or DeleteGroups removes them)"
        ),
    }
}

/// Executes operations without topic deletions: all commits in one store call, then
/// the fetches, then the deletes (an OffsetDelete or DeleteGroups accepted after a
/// commit of the same batch still comes after it).
fn execute_run(store: &OffsetStores, batch: Vec<StoreOp>) -> Vec<CoordinatorInput> {
    let mut commit_ops = Vec::new();
    let mut records = Vec::new();
    let mut fetches = Vec::new();
    let mut deletes = Vec::new();
    for op in batch {
        match op {
            StoreOp::Delete {
                op,
                group,
                partitions,
            } => deletes.push((op, group, partitions)),
            StoreOp::Commit { op, records: r } => {
                commit_ops.push(op);
                records.extend(r);
            }
            StoreOp::Fetch {
                op,
                group,
                partitions,
            } => fetches.push((op, group, partitions)),
            // Not reached: `execute` runs them between runs.
            StoreOp::DeleteTopics { topics, owner } => delete_topics(store, &topics, &owner),
        }
    }
    let mut results = Vec::with_capacity(commit_ops.len() + fetches.len());
    if !commit_ops.is_empty() {
        let outcome: RResult<(), PluginError> = store.commit(&records).map_err(to_abi).into();
        if let RResult::RErr(e) = &outcome {
            tracing::warn!(
                records = records.len(),
                operations = commit_ops.len(),
                "offset commit failed: {e}"
            );
        }
        results.extend(
            commit_ops
                .into_iter()
                .map(|op| CoordinatorInput::OffsetsCommitted {
                    op,
                    result: outcome.clone(),
                }),
        );
    }
    for (op, group, partitions) in fetches {
        let fetched = if partitions.is_empty() {
            store.fetch_group(&group)
        } else {
            store.fetch(&group, &partitions)
        };
        results.push(CoordinatorInput::OffsetsFetched {
            op,
            result: fetched.map(RVec::from).map_err(to_abi).into(),
        });
    }
    for (op, group, partitions) in deletes {
        let deleted = delete(store, &group, &partitions);
        results.push(CoordinatorInput::OffsetsDeleted {
            op,
            result: deleted.map_err(to_abi).into(),
        });
    }
    results
}

/// Deletes a group's offsets, or those of `partitions`: in one step where the store has
/// `delete_partitions` (offset-store ABI 3.1); otherwise the group's other offsets are
/// read, the group deleted and the others committed back (not atomic: a crash in between
/// loses them; the log says which were being rewritten).
pub(super) fn delete(
    store: &OffsetStores,
    group: &str,
    partitions: &[TopicPartitions],
) -> Result<u64, CallError> {
    if partitions.is_empty() {
        return store.delete_group(group);
    }
    if let Some(deleted) = store.delete_partitions(group, partitions)? {
        return Ok(deleted);
    }
    let all = store.fetch_group(group)?;
    let doomed = |r: &OffsetRecord| {
        partitions
            .iter()
            .any(|t| t.topic == r.topic && t.partitions.contains(&r.partition))
    };
    let (gone, keep): (Vec<OffsetRecord>, Vec<OffsetRecord>) = all.into_iter().partition(doomed);
    if gone.is_empty() {
        return Ok(0);
    }
    store.delete_group(group)?;
    if !keep.is_empty() {
        if let Err(e) = store.commit(&keep) {
            tracing::error!(group, kept = ?keep.iter().map(|r| format!("{}-{}@{}", r.topic, r.partition, r.offset)).collect::<Vec<_>>(),
                "deleting some of a group's offsets (OffsetDelete, a deleted topic): rewriting the group's other offsets failed: {e}");
            return Err(e);
        }
    }
    Ok(gone.len() as u64)
}

/// A host-side call error as the plugin error the coordinator receives.
fn to_abi(e: CallError) -> PluginError {
    match e {
        CallError::Plugin { error, .. } => error,
        // Out of service (`CallError` is non-exhaustive: so is any kind added later).
        other => PluginError::new(ErrorKind::Unavailable, other.to_string()),
    }
}
