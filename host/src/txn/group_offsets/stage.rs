//! Staging at the group's coordinator in cluster mode: the [`TxnOffsetLedger`] that
//! records a validated TxnOffsetCommit's offsets in the (group, producer id) staged
//! node, verified against the transaction's record in ZooKeeper (module docs of
//! [`super`]).

use std::{sync::Arc, time::Duration};

use zookeeper_client as zk;

use super::{
    codec::{decode_staged, encode_staged, StagedNode},
    staged_dir, staged_path, MAX_NODE_BYTES,
};
use crate::{
    coordination::{txn_ledger::BoxFuture, Staging, TxnOffsetLedger},
    txn::{
        broker_ports::{staged_offsets, staging_code},
        codec as record_codec,
        types::{ProducerIdEpoch, StagedOffset, TopicPartition, TransactionalId, TxnState},
        zk_store::{record_path, slot_path, ZkTxnStore},
        TxnError,
    },
};

/// How often a staging re-reads the transaction's record when it changed between the
/// read and the write (the producer adding partitions meanwhile) before it answers
/// COORDINATOR_NOT_AVAILABLE (retriable).
const MAX_ATTEMPTS: usize = 8;

/// The group coordinator's ledger of transactional offsets in cluster mode.
pub struct ZkTxnLedger {
    /// This broker's transaction store: the slots taken over and their epochs.
    pub store: Arc<ZkTxnStore>,
    /// `transactions.max_offsets_per_transaction`: most offsets one staged node holds.
    pub max_offsets: usize,
}

impl TxnOffsetLedger for ZkTxnLedger {
    fn stage(&self, staging: Staging) -> BoxFuture<'static, i16> {
        let store = Arc::clone(&self.store);
        let max_offsets = self.max_offsets;
        Box::pin(async move {
            match stage(&store, max_offsets, staging).await {
                Ok(()) => 0,
                Err(e) => staging_code(&e),
            }
        })
    }
}

fn storage(e: impl std::fmt::Display) -> TxnError {
    crate::warn_limited!("txn.offsets_stage_zk", "staging transactional offsets: {e}");
    TxnError::Storage
}

/// Verifies and writes one staging. Errors: [`TxnError::InvalidState`] (no id, no
/// open transaction of the producer with the group added), [`TxnError::UnknownMapping`]
/// (the id is unknown or another producer's), [`TxnError::Fenced`],
/// [`TxnError::TooLarge`], [`TxnError::NotCoordinator`] / [`TxnError::LoadInProgress`]
/// (the group's slot is not, or not yet, this broker's), [`TxnError::Storage`].
async fn stage(store: &ZkTxnStore, max_offsets: usize, staging: Staging) -> Result<(), TxnError> {
    let pending = staging.pending;
    let id = staging
        .transactional_id
        .as_deref()
        .and_then(TransactionalId::new)
        .ok_or(TxnError::InvalidState)?;
    if pending.offsets.len() > max_offsets {
        return Err(TxnError::TooLarge);
    }
    let cluster = store.cluster();
    let group = pending.group.to_string();
    let gslot = drover_protocol::coordinator_slot(&group, cluster.settings.slots);
    let restored = store.offsets_slots.is_restored(gslot);
    let Some(gepoch) = store.epoch(gslot).filter(|_| restored) else {
        return Err(if store.owns(gslot) {
            TxnError::LoadInProgress
        } else {
            TxnError::NotCoordinator
        });
    };
    let producer = ProducerIdEpoch {
        id: pending.producer_id,
        epoch: pending.producer_epoch,
    };
    let offsets = staged_offsets(&pending);
    let client = cluster.client().map_err(storage)?;
    let bound = Duration::from_millis(cluster.settings.session_timeout_ms.max(1));
    let write = Write {
        client: &client,
        id: &id,
        record: record_path(store.slot_of(&id), &id),
        slot_node: slot_path(gslot),
        gepoch,
        dir: staged_dir(gslot),
        path: staged_path(gslot, &group, producer.id),
        group: &group,
        producer,
        max_offsets,
    };
    tokio::time::timeout(bound, write.run(&offsets))
        .await
        .unwrap_or_else(|_| Err(storage(format!("no answer within {bound:?}"))))
}

/// One staging's paths and checks.
struct Write<'a> {
    client: &'a zk::Client,
    id: &'a TransactionalId,
    /// The transaction's record.
    record: String,
    /// The group slot's node, whose version is its coordinator epoch.
    slot_node: String,
    gepoch: i32,
    dir: String,
    path: String,
    group: &'a str,
    producer: ProducerIdEpoch,
    max_offsets: usize,
}

impl Write<'_> {
    async fn run(&self, offsets: &[(TopicPartition, StagedOffset)]) -> Result<(), TxnError> {
        for _ in 0..MAX_ATTEMPTS {
            let record_version = self.verify().await?;
            let (mut node, version) = self.existing().await?;
            node.producer.epoch = self.producer.epoch;
            for (tp, o) in offsets {
                node.offsets.insert(tp.clone(), o.clone());
            }
            if node.offsets.len() > self.max_offsets {
                return Err(TxnError::TooLarge);
            }
            let data = encode_staged(&node);
            if data.len() > MAX_NODE_BYTES {
                return Err(TxnError::TooLarge);
            }
            let mut multi = self.client.new_multi_writer();
            multi
                .add_check_version(&self.slot_node, self.gepoch)
                .map_err(storage)?;
            multi
                .add_check_version(&self.record, record_version)
                .map_err(storage)?;
            match version {
                Some(v) => multi.add_set_data(&self.path, &data, Some(v)),
                None => multi.add_create(
                    &self.path,
                    &data,
                    &zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes()),
                ),
            }
            .map_err(storage)?;
            match multi.commit().await {
                Ok(_) => return Ok(()),
                Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                    return Err(TxnError::NotCoordinator)
                }
                // The record changed since it was read: verify again.
                Err(zk::MultiWriteError::OperationFailed { index: 1, .. }) => {}
                Err(zk::MultiWriteError::OperationFailed {
                    index: 2,
                    source: zk::Error::NoNode,
                }) if version.is_none() => {
                    match self
                        .client
                        .mkdir(
                            &self.dir,
                            &zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes()),
                        )
                        .await
                    {
                        Ok(()) | Err(zk::Error::NodeExists) => {}
                        Err(e) => return Err(storage(e)),
                    }
                }
                // The staged node changed or appeared meanwhile: read it again.
                Err(zk::MultiWriteError::OperationFailed { index: 2, .. }) => {}
                Err(e) => return Err(storage(e)),
            }
        }
        Err(storage(format!(
            "{}: changed under {MAX_ATTEMPTS} attempts",
            self.path
        )))
    }

    /// Reads the transaction's record (after a `sync`, so what its coordinator wrote
    /// before answering is seen) and checks that the producer's transaction is open
    /// with the group added; returns the record's version.
    async fn verify(&self) -> Result<i32, TxnError> {
        self.client.sync(&self.record).await.map_err(storage)?;
        let (data, stat) = match self.client.get_data(&self.record).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => return Err(TxnError::UnknownMapping),
            Err(e) => return Err(storage(e)),
        };
        let meta = record_codec::decode(&data).map_err(storage)?;
        if meta.producer.id != self.producer.id {
            return Err(TxnError::UnknownMapping);
        }
        if meta.producer.epoch != self.producer.epoch {
            return Err(TxnError::Fenced);
        }
        if meta.state != TxnState::Ongoing || !meta.groups.contains_key(self.group) {
            return Err(TxnError::InvalidState);
        }
        Ok(stat.version)
    }

    /// The staged node as it is (a node of another transactional id, left by nothing
    /// this broker writes, is replaced), with its version; a new one if none.
    async fn existing(&self) -> Result<(StagedNode, Option<i32>), TxnError> {
        let fresh = StagedNode {
            transactional_id: self.id.as_str().to_owned(),
            producer: self.producer,
            group: self.group.to_owned(),
            offsets: Default::default(),
        };
        match self.client.get_data(&self.path).await {
            Ok((data, stat)) => Ok(match decode_staged(&data) {
                Ok(node)
                    if node.transactional_id == self.id.as_str()
                        && node.producer.id == self.producer.id =>
                {
                    (node, Some(stat.version))
                }
                _ => (fresh, Some(stat.version)),
            }),
            Err(zk::Error::NoNode) => Ok((fresh, None)),
            Err(e) => Err(storage(e)),
        }
    }
}
