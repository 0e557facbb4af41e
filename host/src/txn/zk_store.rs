//! The durable transaction state in cluster mode: ZooKeeper, below the broker chroot.
//!
//! ```text
//! /transactions/<slot>                 the slot node; its data version is the slot's
//!                                      coordinator epoch
//! /transactions/<slot>/<escaped id>    one transactional id's record (super::codec)
//! ```
//!
//! A transactional id belongs to coordinator slot `fnv1a32(id) mod zookeeper.slots`
//! (the groups' slot table, `drover_protocol::coordinator_slot`), so it is coordinated
//! by that slot's owner and fails over with it. A broker that gains a slot
//! [takes it over](ZkTxnStore::take_over): it bumps the slot node's version — the new
//! coordinator epoch — and only then reads the slot's records. Every later write is a
//! ZooKeeper multi that first checks the slot node still has that version, so once a
//! successor has taken the slot over, a stale owner's write fails
//! ([`StoreError::Fenced`]) and nothing it decides is acknowledged.
//!
//! Sizes: a record must fit one node (ZooKeeper's `jute.maxbuffer`, 1 MiB by default,
//! bounds a request): records above [`MAX_RECORD_BYTES`] are refused
//! ([`StoreError::TooLarge`], POLICY_VIOLATION to the client). The per-transaction
//! caps alone do not guarantee it (10000 partitions of 249-byte topic names encode to
//! 2.5 MB), so the bound is checked on the encoded record.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use zookeeper_client as zk;

use super::{
    codec,
    store::{StoreError, TxnStore},
    types::{TransactionalId, TxnMetadata},
};
use crate::cluster::Cluster;

/// The root of the transaction records below the chroot.
pub const ROOT: &str = "/transactions";

/// Largest encoded record written, bytes: under ZooKeeper's default 1 MiB
/// `jute.maxbuffer` with room for the node path (an escaped id is at most 6 KiB) and
/// the multi's other operation.
pub const MAX_RECORD_BYTES: usize = 1_000_000;

/// Most records one slot may hold for a takeover to read them all (one children list
/// must fit a ZooKeeper response).
const MAX_RECORDS_PER_SLOT: usize = 100_000;

/// The slot node of `slot`.
pub fn slot_path(slot: u32) -> String {
    format!("{ROOT}/{slot}")
}

/// The node of transactional id `id` in `slot`.
pub fn record_path(slot: u32, id: &TransactionalId) -> String {
    format!("{ROOT}/{slot}/{}", escape(id.as_str()))
}

/// `id` as a ZooKeeper node name: every byte outside `[A-Za-z0-9_-]` as `%XX` (so
/// `/`, `.` and `..` and characters ZooKeeper refuses never appear). At most three
/// times the id's length.
pub fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The transaction store in ZooKeeper, for the slots this broker has taken over.
pub struct ZkTxnStore {
    cluster: Arc<Cluster>,
    /// Slot → its coordinator epoch, for every slot taken over and not given up.
    epochs: Mutex<BTreeMap<u32, i32>>,
    /// Slots given up whose in-memory state the coordinator has not dropped yet.
    dropped: Mutex<BTreeSet<u32>>,
    /// Where each group slot stands for transactional offsets
    /// (`super::group_offsets`).
    pub offsets_slots: super::group_offsets::slot_states::SlotStates,
}

fn zk_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Zk(e.to_string())
}

impl ZkTxnStore {
    /// The store of `cluster`'s broker; no slot is taken over yet.
    pub fn new(cluster: Arc<Cluster>) -> ZkTxnStore {
        ZkTxnStore {
            cluster,
            epochs: Mutex::new(BTreeMap::new()),
            dropped: Mutex::new(BTreeSet::new()),
            offsets_slots: Default::default(),
        }
    }

    /// The slot of `id` (`zookeeper.slots` slots).
    pub fn slot_of(&self, id: &TransactionalId) -> u32 {
        drover_protocol::coordinator_slot(id.as_str(), self.cluster.settings.slots)
    }

    /// The coordinator epoch of `slot` if this broker has taken it over.
    pub fn epoch(&self, slot: u32) -> Option<i32> {
        self.lock().get(&slot).copied()
    }

    /// The slots taken over.
    pub fn slots(&self) -> BTreeSet<u32> {
        self.lock().keys().copied().collect()
    }

    /// Whether the cluster task says this broker owns `slot` (after the slot guard).
    pub fn owns(&self, slot: u32) -> bool {
        self.cluster
            .owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&slot)
    }

    /// The broker's cluster membership.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, i32>> {
        self.epochs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the broker's ZooKeeper client, within the session timeout.
    /// Blocking: call from a blocking thread (or inside `block_in_place`).
    fn call<T, Fut>(&self, f: impl FnOnce(zk::Client) -> Fut) -> Result<T, StoreError>
    where
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let client = self.cluster.client().map_err(zk_error)?;
        let bound = Duration::from_millis(self.cluster.settings.session_timeout_ms.max(1));
        self.cluster.block_on(async {
            tokio::time::timeout(bound, f(client))
                .await
                .unwrap_or_else(|_| Err(StoreError::Zk(format!("no answer within {bound:?}"))))
        })
    }

    /// Takes `slot` over: makes its node's version the next coordinator epoch (every
    /// write of a previous owner fails from then on) and reads its records. The slot
    /// counts as taken over only after [`ZkTxnStore::adopt`]. Blocking.
    ///
    /// Errors: [`StoreError::Zk`]; a record that does not decode is skipped with a
    /// warning (it cannot be served; its node stays for an operator to look at).
    pub fn take_over(&self, slot: u32) -> Result<(i32, Vec<TxnMetadata>), StoreError> {
        let path = slot_path(slot);
        self.call(|client| async move {
            match client
                .mkdir(
                    &path,
                    &zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes()),
                )
                .await
            {
                Ok(()) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(zk_error(e)),
            }
            let epoch = client
                .set_data(&path, b"", None)
                .await
                .map_err(zk_error)?
                .version;
            let children = client.list_children(&path).await.map_err(zk_error)?;
            let mut records = Vec::with_capacity(children.len().min(MAX_RECORDS_PER_SLOT));
            for name in children.into_iter().take(MAX_RECORDS_PER_SLOT) {
                let child = format!("{path}/{name}");
                match client.get_data(&child).await {
                    Ok((data, _)) => match codec::decode(&data) {
                        Ok(meta) => records.push(meta),
                        Err(e) => tracing::warn!(node = %child, "transaction record skipped: {e}"),
                    },
                    Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(zk_error(e)),
                }
            }
            Ok((epoch, records))
        })
    }

    /// Records `slot` as taken over at `epoch` if this broker still owns it: writes to
    /// it are accepted from now on. Returns whether it was adopted. The ownership check
    /// and the record are one step under this store's lock, which
    /// [`ZkTxnStore::give_up`] takes after the cluster task removed the slot from the
    /// owned ones, so a slot lost meanwhile is never adopted.
    pub fn adopt(&self, slot: u32, epoch: i32) -> bool {
        let mut epochs = self.lock();
        if !self.owns(slot) {
            return false;
        }
        epochs.insert(slot, epoch);
        drop(epochs);
        self.dropped_lock().remove(&slot);
        true
    }

    /// Forgets `slot` at once: writes to it fail with [`StoreError::Fenced`] and the
    /// coordinator answers `NOT_COORDINATOR` for its ids from now on. Cheap and
    /// non-blocking (the cluster task calls it when the slot is lost); the slot is
    /// remembered until [`ZkTxnStore::take_dropped`].
    pub fn give_up(&self, slot: u32) {
        if self.lock().remove(&slot).is_some() {
            self.dropped_lock().insert(slot);
        }
    }

    /// The slots given up since the last call.
    pub fn take_dropped(&self) -> BTreeSet<u32> {
        std::mem::take(&mut *self.dropped_lock())
    }

    fn dropped_lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.dropped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads `id`'s record as ZooKeeper has it now (after a `sync`, so a record its
    /// coordinator wrote before answering is seen), with the slot's coordinator epoch.
    /// Blocking. For the KIP-890 check of a partition led here for a transaction
    /// coordinated elsewhere.
    ///
    /// Errors: [`StoreError::Zk`], [`StoreError::Record`].
    pub fn read(&self, id: &TransactionalId) -> Result<Option<TxnMetadata>, StoreError> {
        let path = record_path(self.slot_of(id), id);
        let id_text = id.to_string();
        self.call(|client| async move {
            client.sync(&path).await.map_err(zk_error)?;
            match client.get_data(&path).await {
                Ok((data, _)) => {
                    codec::decode(&data)
                        .map(Some)
                        .map_err(|source| StoreError::Record {
                            path: path.clone().into(),
                            id: id_text.chars().take(100).collect(),
                            source,
                        })
                }
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(zk_error(e)),
            }
        })
    }

    /// Writes one record: a multi of the slot's epoch check and the record's write.
    fn put_one(&self, meta: &TxnMetadata) -> Result<(), StoreError> {
        let slot = self.slot_of(&meta.id);
        let epoch = self.epoch(slot).ok_or(StoreError::Fenced { slot })?;
        let data = codec::encode(meta);
        if data.len() > MAX_RECORD_BYTES {
            return Err(StoreError::TooLarge {
                bytes: data.len(),
                max: MAX_RECORD_BYTES,
            });
        }
        let slot_node = slot_path(slot);
        let path = record_path(slot, &meta.id);
        self.call(|client| async move {
            // Usually the node exists (set); a new id's does not (create). A lost race
            // of the two is retried once the other way round.
            let mut create = false;
            for _ in 0..3 {
                let mut multi = client.new_multi_writer();
                multi
                    .add_check_version(&slot_node, epoch)
                    .map_err(zk_error)?;
                if create {
                    multi
                        .add_create(
                            &path,
                            &data,
                            &zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes()),
                        )
                        .map_err(zk_error)?;
                } else {
                    multi.add_set_data(&path, &data, None).map_err(zk_error)?;
                }
                match multi.commit().await {
                    Ok(_) => return Ok(()),
                    Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                        return Err(StoreError::Fenced { slot })
                    }
                    Err(zk::MultiWriteError::OperationFailed {
                        source: zk::Error::NoNode,
                        ..
                    }) if !create => create = true,
                    Err(zk::MultiWriteError::OperationFailed {
                        source: zk::Error::NodeExists,
                        ..
                    }) if create => create = false,
                    Err(e) => return Err(zk_error(e)),
                }
            }
            Err(StoreError::Zk(format!(
                "{path}: created and deleted concurrently"
            )))
        })
    }

    fn remove_one(&self, id: &TransactionalId) -> Result<(), StoreError> {
        let slot = self.slot_of(id);
        let epoch = self.epoch(slot).ok_or(StoreError::Fenced { slot })?;
        let slot_node = slot_path(slot);
        let path = record_path(slot, id);
        self.call(|client| async move {
            let mut multi = client.new_multi_writer();
            multi
                .add_check_version(&slot_node, epoch)
                .map_err(zk_error)?;
            multi.add_delete(&path, None).map_err(zk_error)?;
            match multi.commit().await {
                Ok(_)
                | Err(zk::MultiWriteError::OperationFailed {
                    index: 1,
                    source: zk::Error::NoNode,
                }) => Ok(()),
                Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                    Err(StoreError::Fenced { slot })
                }
                Err(e) => Err(zk_error(e)),
            }
        })
    }
}

impl TxnStore for ZkTxnStore {
    /// Writes each record conditionally on its slot's coordinator epoch.
    ///
    /// Errors: [`StoreError::Fenced`], [`StoreError::TooLarge`], [`StoreError::Zk`].
    fn put(&self, metas: &[TxnMetadata]) -> Result<(), StoreError> {
        metas.iter().try_for_each(|m| self.put_one(m))
    }

    /// Deletes each record conditionally on its slot's coordinator epoch.
    ///
    /// Errors: [`StoreError::Fenced`], [`StoreError::Zk`].
    fn remove(&self, ids: &[TransactionalId]) -> Result<(), StoreError> {
        ids.iter().try_for_each(|id| self.remove_one(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_ids_are_node_names() {
        assert_eq!(escape("app-1_x"), "app-1_x");
        assert_eq!(escape("a/b.c"), "a%2Fb%2Ec");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape("é"), "%C3%A9");
        let long = "/".repeat(super::super::types::MAX_TRANSACTIONAL_ID_BYTES);
        assert_eq!(escape(&long).len(), 3 * long.len());
        let id = TransactionalId::new("x/y").unwrap();
        assert_eq!(record_path(3, &id), "/transactions/3/x%2Fy");
    }
}
