//! The completion driver: for each transaction whose outcome is decided (Prepare*),
//! writes its markers to every partition (`MarkerWriter`), completes its group
//! offsets (`GroupOffsetsCompleter`), then records it as Complete*. Each transaction
//! completes in its own task, so a failing partition delays only its own transaction;
//! failures are retried with a backoff from [`FIRST_BACKOFF_MS`] doubling up to
//! [`MAX_BACKOFF_MS`], without limit on the number of tries (Kafka's marker channel
//! retries until the transaction completes, too) — while this coordinator still has
//! the transaction in that state (in cluster mode it may lose the slot meanwhile).

use std::{
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use super::{
    coordinator::TxnCoordinator,
    ports::{MarkerRequest, OffsetsCompletion, Ports},
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
    let still_ours = |coordinator: &TxnCoordinator| {
        coordinator
            .get(&id)
            .is_some_and(|now| now.state == meta.state && now.producer == meta.producer)
    };
    while !pending.is_empty() {
        // Cluster mode: a slot given up (or taken over by another broker) stops here;
        // its new owner completes the transaction.
        if !still_ours(&coordinator) {
            return;
        }
        let request = MarkerRequest {
            transactional_id: id.clone(),
            producer: meta.producer,
            committed,
            coordinator_epoch: coordinator.coordinator_epoch(&id),
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
        let completion = OffsetsCompletion {
            transactional_id: id.clone(),
            producer: meta.producer,
            committed,
            coordinator_epoch: coordinator.coordinator_epoch(&id),
            groups: meta.groups.keys().cloned().collect(),
        };
        while let Err(e) = ports.offsets.complete(completion.clone()).await {
            crate::warn_limited!("txn.offsets_failed", transactional_id = %id, "{e}; retrying");
            backoff.wait().await;
            if !still_ours(&coordinator) {
                return;
            }
        }
    }
    let mut backoff = Backoff(FIRST_BACKOFF_MS);
    loop {
        if !still_ours(&coordinator) {
            return;
        }
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

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    };

    use futures_util::future::BoxFuture;

    use super::*;
    use crate::txn::{
        ports::{CompleteError, GroupOffsetsCompleter, MarkerWriter},
        Caller, InitRequest, ProducerIdEpoch, TopicPartition,
    };

    use crate::txn::state::TEST_LIMITS as LIMITS;

    /// Fails each partition's first write, then records the markers it writes.
    #[derive(Default)]
    struct FlakyMarkers {
        written: Mutex<Vec<(TopicPartition, bool, i16)>>,
        failed_once: Mutex<Vec<TopicPartition>>,
    }

    impl MarkerWriter for Arc<FlakyMarkers> {
        fn write_markers(&self, request: MarkerRequest) -> BoxFuture<'static, Vec<TopicPartition>> {
            let mut failed = Vec::new();
            let mut once = self.failed_once.lock().unwrap();
            for p in request.partitions {
                if once.contains(&p) {
                    self.written.lock().unwrap().push((
                        p,
                        request.committed,
                        request.producer.epoch,
                    ));
                } else {
                    once.push(p.clone());
                    failed.push(p);
                }
            }
            Box::pin(async move { failed })
        }
    }

    #[derive(Default)]
    struct CountingOffsets(AtomicUsize);

    impl GroupOffsetsCompleter for Arc<CountingOffsets> {
        fn complete(
            &self,
            _completion: OffsetsCompletion,
        ) -> BoxFuture<'static, Result<(), CompleteError>> {
            // The first call fails, as a coordinator that is not there yet.
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n == 0 {
                    Err(CompleteError("not yet".into()))
                } else {
                    Ok(())
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_decided_transaction_is_completed_after_retries_also_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let tp = |p| TopicPartition {
            topic: "t".into(),
            partition: p,
        };
        let id = crate::txn::TransactionalId::new("x").unwrap();
        {
            let coordinator = TxnCoordinator::open(dir.path(), LIMITS).unwrap();
            let request = InitRequest {
                id: id.clone(),
                timeout_ms: 1000,
                expected: ProducerIdEpoch::NONE,
            };
            let producer = coordinator
                .init_producer_id(1, &request, &|| Ok(7), &|| true)
                .unwrap();
            let caller = Caller {
                id: id.clone(),
                producer,
            };
            coordinator
                .add_partitions(2, &caller, &[tp(0), tp(1)])
                .unwrap();
            coordinator.add_offsets(2, &caller, "g").unwrap();
            coordinator.end_txn(3, &caller, true).unwrap();
            // Dropped before anything completed it: as a crash after EndTxn's answer.
        }
        let coordinator = Arc::new(TxnCoordinator::open(dir.path(), LIMITS).unwrap());
        assert_eq!(coordinator.get(&id).unwrap().state, TxnState::PrepareCommit);
        let markers = Arc::new(FlakyMarkers::default());
        let offsets = Arc::new(CountingOffsets::default());
        let ports = Ports {
            markers: Arc::new(Arc::clone(&markers)),
            offsets: Arc::new(Arc::clone(&offsets)),
        };
        tokio::spawn(run(Arc::clone(&coordinator), ports));
        while coordinator.get(&id).unwrap().state != TxnState::CompleteCommit {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut written = markers.written.lock().unwrap().clone();
        written.sort_by_key(|w| w.0.partition);
        assert_eq!(written, vec![(tp(0), true, 0), (tp(1), true, 0)]);
        assert_eq!(offsets.0.load(Ordering::SeqCst), 2);
        assert_eq!(
            coordinator.counters.markers_written.load(Ordering::Relaxed),
            2
        );
        assert_eq!(coordinator.counters.committed.load(Ordering::Relaxed), 1);
        let meta = coordinator.get(&id).unwrap();
        assert!(meta.partitions.is_empty() && meta.groups.is_empty());
    }
}
