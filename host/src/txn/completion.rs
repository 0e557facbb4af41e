//! The completion driver: for each transaction whose outcome is decided (Prepare*),
//! writes its markers to every partition ([`MarkerWriter`]), completes its group
//! offsets ([`GroupOffsetsCompleter`]), then records it as Complete*. Each transaction
//! completes in its own task, so a failing partition delays only its own transaction;
//! failures are retried with a backoff from [`FIRST_BACKOFF_MS`] doubling up to
//! [`MAX_BACKOFF_MS`], without limit on the number of tries (Kafka's marker channel
//! retries until the transaction completes, too).

use std::{
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use super::{
    coordinator::TxnCoordinator,
    ports::{MarkerRequest, Ports},
    types::{TransactionalId, TxnState},
};

/// First retry delay after a failure, ms.
pub const FIRST_BACKOFF_MS: u64 = 100;
/// Longest retry delay, ms.
pub const MAX_BACKOFF_MS: u64 = 5_000;

/// Completes every transaction queued by `coordinator` until the queue closes (never,
/// while the coordinator lives) or it was taken already.
pub async fn run(coordinator: Arc<TxnCoordinator>, ports: Ports) {
    let Some(mut queue) = coordinator.take_queue() else {
        return;
    };
    while let Some(id) = queue.recv().await {
        tokio::spawn(complete_one(Arc::clone(&coordinator), ports.clone(), id));
    }
}

struct Backoff(u64);

impl Backoff {
    async fn wait(&mut self) {
        tokio::time::sleep(Duration::from_millis(self.0)).await;
        self.0 = (self.0 * 2).min(MAX_BACKOFF_MS);
    }
}

async fn complete_one(coordinator: Arc<TxnCoordinator>, ports: Ports, id: TransactionalId) {
    let Some(meta) = coordinator.get(&id) else {
        return;
    };
    if !meta.state.is_prepare() {
        return;
    }
    let committed = meta.state == TxnState::PrepareCommit;
    let mut backoff = Backoff(FIRST_BACKOFF_MS);
    let mut pending: Vec<_> = meta.partitions.iter().cloned().collect();
    while !pending.is_empty() {
        let request = MarkerRequest {
            producer: meta.producer,
            committed,
            coordinator_epoch: 0,
            timestamp_ms: crate::clock::now_ms(),
            partitions: pending.clone(),
        };
        let failed = ports.markers.write_markers(request).await;
        coordinator.counters.markers_written.fetch_add(
            (pending.len() - failed.len().min(pending.len())) as u64,
            Ordering::Relaxed,
        );
        if failed.is_empty() {
            break;
        }
        crate::warn_limited!(
            "txn.markers_failed",
            transactional_id = %id,
            "transaction markers not written to {} partition(s) yet; retrying",
            failed.len()
        );
        pending = failed;
        backoff.wait().await;
    }
    if !meta.groups.is_empty() {
        let mut backoff = Backoff(FIRST_BACKOFF_MS);
        while let Err(e) = ports.offsets.complete(meta.producer, committed).await {
            crate::warn_limited!("txn.offsets_failed", transactional_id = %id, "{e}; retrying");
            backoff.wait().await;
        }
    }
    let mut backoff = Backoff(FIRST_BACKOFF_MS);
    loop {
        let c = Arc::clone(&coordinator);
        let id2 = id.clone();
        let done =
            tokio::task::spawn_blocking(move || c.complete(crate::clock::now_ms(), &id2)).await;
        if matches!(done, Ok(Ok(()))) {
            return;
        }
        backoff.wait().await;
    }
}
