//! The durable transaction state: the [`TxnStore`] abstraction the coordinator writes
//! through, and its standalone implementation, [`RedbStore`]: one redb database,
//! `<data_dir>/transactions.redb`, with one table from transactional id to its record
//! ([`super::codec`]). Every state change is one redb write transaction, committed
//! (fsynced) before the change is applied in memory and acknowledged. redb gives
//! atomic, checksummed commits and crash recovery, which an append-only log would
//! need compaction and its own recovery for; the offset store already relies on it.
//! In cluster mode the records live in ZooKeeper instead ([`super::zk_store`]).

use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, TableDefinition};

use super::{
    codec,
    types::{TransactionalId, TxnMetadata},
};

/// The database file in the data directory.
pub const FILE: &str = "transactions.redb";

const TXNS: TableDefinition<'static, &'static str, &'static [u8]> =
    TableDefinition::new("transactions");

/// The store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// redb refused (IO error, corruption, …).
    #[error("transaction store {path}: {detail}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// redb's error.
        detail: String,
    },
    /// This broker no longer coordinates the record's slot (cluster mode): the slot is
    /// not loaded here, or its coordinator epoch moved on (a conditional write failed
    /// because another broker took the slot over).
    #[error("transaction slot {slot} is not coordinated by this broker")]
    Fenced {
        /// The coordinator slot.
        slot: u32,
    },
    /// The encoded record would exceed what one ZooKeeper node may hold.
    #[error("transaction record of {bytes} bytes exceeds the {max} bytes a node may hold")]
    TooLarge {
        /// The encoded size, bytes.
        bytes: usize,
        /// The bound, bytes.
        max: usize,
    },
    /// ZooKeeper could not be reached or refused the request (cluster mode).
    #[error("transaction store in ZooKeeper: {0}")]
    Zk(String),
    /// A record does not decode.
    #[error("transaction store {path}: record of `{id}`: {source}")]
    Record {
        /// The database file.
        path: PathBuf,
        /// The key (at most 100 characters).
        id: String,
        /// Why it does not decode.
        source: codec::CodecError,
    },
}

/// Where the transaction coordinator writes each change before applying it. Both
/// calls block until the change is durable (an fsync, or ZooKeeper's acknowledgement).
pub trait TxnStore: Send + Sync {
    /// Writes `metas` durably.
    ///
    /// Errors: [`StoreError`] (nothing written when it fails, for one record).
    fn put(&self, metas: &[TxnMetadata]) -> Result<(), StoreError>;

    /// Removes `ids` durably.
    ///
    /// Errors: [`StoreError`].
    fn remove(&self, ids: &[TransactionalId]) -> Result<(), StoreError>;
}

impl<T: TxnStore + ?Sized> TxnStore for std::sync::Arc<T> {
    fn put(&self, metas: &[TxnMetadata]) -> Result<(), StoreError> {
        (**self).put(metas)
    }

    fn remove(&self, ids: &[TransactionalId]) -> Result<(), StoreError> {
        (**self).remove(ids)
    }
}

/// The standalone store: redb in the data directory.
pub struct RedbStore {
    path: PathBuf,
    db: Database,
}

impl RedbStore {
    /// Opens (creating if needed) the store in `data_dir`.
    ///
    /// Errors: [`StoreError::Db`].
    pub fn open(data_dir: &Path) -> Result<RedbStore, StoreError> {
        let path = data_dir.join(FILE);
        let db = Database::create(&path).map_err(|e| db_error(&path, e))?;
        let store = RedbStore { path, db };
        // The table exists from the first open on, so reads never miss it.
        store.write(|_| Ok(()))?;
        Ok(store)
    }

    /// Every record.
    ///
    /// Errors: [`StoreError`].
    pub fn load(&self) -> Result<Vec<TxnMetadata>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| db_error(&self.path, e))?;
        let table = txn.open_table(TXNS).map_err(|e| db_error(&self.path, e))?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| db_error(&self.path, e))? {
            let (key, value) = entry.map_err(|e| db_error(&self.path, e))?;
            let meta = codec::decode(value.value()).map_err(|source| StoreError::Record {
                path: self.path.clone(),
                id: key.value().chars().take(100).collect(),
                source,
            })?;
            out.push(meta);
        }
        Ok(out)
    }

    fn write(
        &self,
        f: impl FnOnce(
            &mut redb::Table<'_, &'static str, &'static [u8]>,
        ) -> Result<(), redb::StorageError>,
    ) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(|e| db_error(&self.path, e))?;
        {
            let mut table = txn.open_table(TXNS).map_err(|e| db_error(&self.path, e))?;
            f(&mut table).map_err(|e| db_error(&self.path, e))?;
        }
        txn.commit().map_err(|e| db_error(&self.path, e))
    }
}

impl TxnStore for RedbStore {
    /// Writes `metas` durably, in one commit.
    ///
    /// Errors: [`StoreError::Db`].
    fn put(&self, metas: &[TxnMetadata]) -> Result<(), StoreError> {
        self.write(|table| {
            for meta in metas {
                table.insert(meta.id.as_str(), codec::encode(meta).as_slice())?;
            }
            Ok(())
        })
    }

    /// Removes `ids` durably, in one commit.
    ///
    /// Errors: [`StoreError::Db`].
    fn remove(&self, ids: &[TransactionalId]) -> Result<(), StoreError> {
        self.write(|table| {
            for id in ids {
                table.remove(id.as_str())?;
            }
            Ok(())
        })
    }
}

fn db_error(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Db {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::txn::types::{ProducerIdEpoch, TxnState};

    fn meta(id: &str, state: TxnState) -> TxnMetadata {
        TxnMetadata {
            id: TransactionalId::new(id).unwrap(),
            producer: ProducerIdEpoch { id: 1, epoch: 0 },
            last_producer: ProducerIdEpoch::NONE,
            timeout_ms: 1000,
            state,
            partitions: BTreeSet::new(),
            groups: BTreeMap::new(),
            start_ms: -1,
            last_update_ms: 5,
            timed_out: false,
            ever_opened: state != TxnState::Empty,
        }
    }

    #[test]
    fn records_survive_reopening_and_removal_sticks() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        store
            .put(&[meta("a", TxnState::Ongoing), meta("b", TxnState::Empty)])
            .unwrap();
        store.put(&[meta("a", TxnState::PrepareCommit)]).unwrap();
        store.remove(&[TransactionalId::new("b").unwrap()]).unwrap();
        drop(store);
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(
            store.load().unwrap(),
            vec![meta("a", TxnState::PrepareCommit)]
        );
    }
}
