//! The ports' implementations over this broker ([`super::ports`]), and the transaction
//! coordinator's side of TxnOffsetCommit ([`TxnLedger`], the group coordinator
//! driver's [`TxnOffsetLedger`]).
//!
//! - [`LogMarkers`]: a marker per partition through
//!   [`crate::log::PartitionLog::append_txn_marker`], each fsynced before it counts as
//!   written, so a transaction recorded Complete* never lacks a marker after a crash;
//!   in cluster mode only to partitions this broker leads (others fail, and are
//!   retried).
//! - [`CoordinatorOffsets`]: completes them with [`CoordinatorClient::complete_txn`].
//! - [`TxnLedger`]: records a validated TxnOffsetCommit's offsets with the producer's
//!   open transaction ([`TxnCoordinator::stage_offsets`]).
//! - [`restore_offsets`]: at startup, the staged offsets of every transaction not
//!   completed yet go back to the group coordinator
//!   ([`CoordinatorClient::restore_txn_offsets`]).

use std::sync::Arc;

use abi_stable::std_types::{RString, RVec};
use drover_abi::{coordinator::PendingTxnOffsets, offset_store::OffsetRecord};
use futures_util::future::BoxFuture;

use super::{
    coordinator::{StagedGroupOffsets, TxnCoordinator},
    ports::{CompleteError, GroupOffsetsCompleter, MarkerRequest, MarkerWriter, OffsetsCompletion},
    types::{ProducerIdEpoch, StagedOffset, TopicPartition},
};
use crate::{
    broker::topics::TopicRegistry,
    cluster::Cluster,
    coordination::{CoordinatorClient, Staging, TxnOffsetLedger},
    log::{producer_state::ProducerError, LogError, TxnMarker, TxnResult},
};

/// Transaction markers in the partition logs: the partitions of `topics` this broker
/// leads (every one standalone; in cluster mode those `cluster` says it leads), each
/// marker written forgetting the producer's verified partition in `transactions`.
#[derive(Clone)]
pub struct LogMarkers {
    /// The partition logs.
    pub topics: Arc<TopicRegistry>,
    /// Cluster membership, in cluster mode.
    pub cluster: Option<Arc<Cluster>>,
    /// The transaction coordinator whose verified partitions a marker ends.
    pub transactions: Arc<TxnCoordinator>,
}

impl LogMarkers {
    /// Whether this broker leads `tp` (always standalone).
    fn leads(&self, tp: &TopicPartition) -> bool {
        self.cluster
            .as_ref()
            .is_none_or(|c| c.leads(&tp.topic, tp.partition))
    }
}

impl MarkerWriter for LogMarkers {
    fn write_markers(&self, request: MarkerRequest) -> BoxFuture<'static, Vec<TopicPartition>> {
        let this = self.clone();
        Box::pin(async move {
            let marker = TxnMarker {
                producer_id: request.producer.id,
                producer_epoch: request.producer.epoch,
                coordinator_epoch: request.coordinator_epoch,
                result: if request.committed {
                    TxnResult::Commit
                } else {
                    TxnResult::Abort
                },
                timestamp_ms: request.timestamp_ms,
            };
            let mut failed = Vec::new();
            for tp in request.partitions {
                // A deleted topic or partition: nothing to end (Kafka skips it too).
                let Some(partition) = this.topics.get(&tp.topic).and_then(|t| {
                    usize::try_from(tp.partition)
                        .ok()
                        .and_then(|i| t.partitions.get(i).cloned())
                }) else {
                    continue;
                };
                // Cluster mode: only a partition's leader writes to it. A partition this
                // broker does not lead by its view (another broker's, or a view not
                // read yet after a restart) is not written here; retried.
                if !this.leads(&tp) {
                    failed.push(tp);
                    continue;
                }
                let p = Arc::clone(&partition);
                let appended = tokio::task::spawn_blocking(move || {
                    p.lock_log()
                        .append_txn_marker(&marker, crate::clock::now_ms())
                })
                .await;
                let written = match appended {
                    Ok(Ok(offset)) => partition.wait_durable(offset + 1).await.is_ok(),
                    // A newer epoch of the producer wrote there already: Kafka's marker
                    // channel drops such a marker, and so does this.
                    Ok(Err(LogError::Producer(ProducerError::FencedEpoch { .. }))) => true,
                    Ok(Err(e)) => {
                        crate::warn_limited!(
                            "txn.marker_failed",
                            topic = %tp.topic,
                            partition = tp.partition,
                            "transaction marker not written: {e}"
                        );
                        false
                    }
                    Err(_) => false,
                };
                if written {
                    // The transaction ended here: a later batch is verified again.
                    this.transactions.verified.forget(request.producer.id, &tp);
                } else {
                    failed.push(tp);
                }
            }
            failed
        })
    }
}

/// Transactional offsets in the group coordinator; with no coordinator running there
/// are none to complete.
pub struct CoordinatorOffsets(pub Option<CoordinatorClient>);

impl GroupOffsetsCompleter for CoordinatorOffsets {
    fn complete(
        &self,
        completion: OffsetsCompletion,
    ) -> BoxFuture<'static, Result<(), CompleteError>> {
        let (producer, committed) = (completion.producer, completion.committed);
        let client = self.0.clone();
        Box::pin(async move {
            match client {
                None => Ok(()),
                Some(c) => c
                    .complete_txn(producer.id, producer.epoch, committed)
                    .await
                    .map_err(|e| CompleteError(e.to_string())),
            }
        })
    }
}

/// The transaction coordinator as the group coordinator's ledger of transactional
/// offsets.
pub struct TxnLedger(pub Arc<TxnCoordinator>);

/// Most offsets one staging may carry (the group coordinator bounds them too; this
/// keeps a misbehaving one from handing over an unbounded list).
const MAX_OFFSETS_PER_STAGING: usize = 100_000;

impl TxnOffsetLedger for TxnLedger {
    fn stage(&self, staging: Staging) -> crate::coordination::txn_ledger::BoxFuture<'static, i16> {
        let pending = staging.pending;
        let coordinator = Arc::clone(&self.0);
        Box::pin(async move {
            if pending.offsets.len() > MAX_OFFSETS_PER_STAGING {
                return super::TxnError::TooLarge.kafka().code();
            }
            let producer = ProducerIdEpoch {
                id: pending.producer_id,
                epoch: pending.producer_epoch,
            };
            let group = pending.group.to_string();
            let offsets = staged_offsets(&pending);
            tokio::task::spawn_blocking(move || {
                coordinator
                    .stage_offsets(crate::clock::now_ms(), producer, &group, &offsets)
                    .map_or_else(|e| staging_code(&e), |()| 0)
            })
            .await
            .unwrap_or(kafka_protocol::error::ResponseError::UnknownServerError.code())
        })
    }
}

/// `pending`'s offsets as the transaction coordinator's domain types (one boundary
/// conversion, for standalone and cluster-mode staging).
pub(crate) fn staged_offsets(pending: &PendingTxnOffsets) -> Vec<(TopicPartition, StagedOffset)> {
    pending
        .offsets
        .iter()
        .map(|o| {
            (
                TopicPartition {
                    topic: o.topic.to_string(),
                    partition: o.partition,
                },
                StagedOffset {
                    offset: o.offset,
                    metadata: o.metadata.to_string(),
                    commit_time_ms: o.commit_time_ms,
                },
            )
        })
        .collect()
}

/// The code a refused staging answers the TxnOffsetCommit with: PRODUCER_FENCED for
/// another epoch, POLICY_VIOLATION over the bound, COORDINATOR_NOT_AVAILABLE when the
/// store failed, otherwise INVALID_TXN_STATE (no open transaction of this producer id
/// added the group: KIP-890 part 1's verification of offset commits).
pub(crate) fn staging_code(e: &super::TxnError) -> i16 {
    use super::TxnError;
    match e {
        TxnError::Fenced
        | TxnError::TooLarge
        | TxnError::Storage
        | TxnError::NotCoordinator
        | TxnError::LoadInProgress => e.kafka().code(),
        _ => TxnError::InvalidState.kafka().code(),
    }
}

/// The staged offsets of every transaction not completed yet, as the group
/// coordinator's `TxnOffsetsPending`.
pub fn pending_offsets(coordinator: &TxnCoordinator) -> Vec<PendingTxnOffsets> {
    coordinator
        .staged_offsets()
        .into_iter()
        .map(
            |StagedGroupOffsets {
                 producer,
                 group,
                 offsets,
             }| PendingTxnOffsets {
                group: RString::from(group.as_str()),
                producer_id: producer.id,
                producer_epoch: producer.epoch,
                offsets: offsets
                    .into_iter()
                    .map(|(p, o)| OffsetRecord {
                        group: RString::from(group.as_str()),
                        topic: RString::from(p.topic),
                        partition: p.partition,
                        offset: o.offset,
                        metadata: RString::from(o.metadata),
                        commit_time_ms: o.commit_time_ms,
                    })
                    .collect::<RVec<_>>(),
            },
        )
        .collect()
}

/// Hands the group coordinator the staged offsets of every transaction not completed
/// yet (at startup, before client traffic and before completions run).
pub async fn restore_offsets(coordinator: &TxnCoordinator, client: &CoordinatorClient) {
    let pending = pending_offsets(coordinator);
    if pending.is_empty() {
        return;
    }
    let n = pending.len();
    match client.restore_txn_offsets(pending).await {
        Ok(()) => tracing::info!(
            groups = n,
            "transactional offsets of open transactions restored"
        ),
        Err(e) => tracing::warn!("restoring transactional offsets: {e}"),
    }
}
