//! The store proper: a redb [`Database`] behind an open/closed switch, and the offset
//! operations on it.
//!
//! Every operation holds a read lock on the switch for its whole duration, so
//! [`Store::close`] (which takes the write lock) waits for calls in flight, then drops the
//! database and releases its file lock; later calls find the switch empty and return
//! `Closed`.

use std::{
    ops::Bound,
    path::Path,
    sync::{PoisonError, RwLock, RwLockReadGuard},
};

use drover_abi::{OffsetKey, OffsetRecord, PluginError, TopicPartitions};
use redb::{Database, Durability, ReadableTable, TableError};

use drover_offsets_common::GroupCommit;

use crate::{
    config::Config,
    errors::{closed, from_create_dir, from_open, from_redb},
    layout::{self, Key, OFFSETS},
};

/// An open embedded offset store.
pub struct Store {
    db: RwLock<Option<Database>>,
    committer: GroupCommit,
    config: Config,
}

impl Store {
    /// Opens (creating when missing) the database at `config.path`, creating its parent
    /// directory, and makes sure it holds the offsets table. A database left by a crash
    /// is repaired by redb first. Errors: `Unavailable` for I/O errors and a file locked
    /// by another instance; `InvalidConfig` for a file that is not an offset store and
    /// for a `path` that cannot work (a directory, a file as parent, permission denied).
    pub fn open(config: Config) -> Result<Store, PluginError> {
        let path = config.path.clone();
        let shown = path.display();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| from_create_dir(parent, &path, e))?;
        }
        let db = Database::create(&path).map_err(|e| from_open(&path, e))?;
        create_table(&db, &path)?;
        tracing::info!(
            path = %shown,
            max_metadata_bytes = config.max_metadata_bytes,
            "embedded offset store opened"
        );
        Ok(Store {
            db: RwLock::new(Some(db)),
            committer: GroupCommit::new("embedded"),
            config,
        })
    }

    /// Durably writes `batch` in one transaction (shared with concurrent callers).
    /// Refuses the whole batch when a record has a negative partition or metadata longer
    /// than `max_metadata_bytes`.
    pub fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        self.validate(batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        self.committer
            .commit(batch, |slices| write_batches(db, slices))
    }

    /// The committed offsets of `group` for `partitions`; absent ones are left out.
    pub fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = || format!("fetch offsets of group `{group}`");
        let txn = db.begin_read().map_err(|e| from_redb(&context(), e))?;
        let table = txn
            .open_table(OFFSETS)
            .map_err(|e| from_redb(&context(), e))?;
        let mut out = Vec::new();
        for tp in partitions {
            for &partition in tp.partitions.iter() {
                let key: Key = (group, tp.topic.as_str(), partition);
                if let Some(value) = table.get(key).map_err(|e| from_redb(&context(), e))? {
                    out.push(layout::decode(key, value.value()));
                }
            }
        }
        Ok(out)
    }

    /// Deletes `group`'s offsets of `partitions` in one durable transaction; returns how
    /// many existed (OffsetDelete; offset-store ABI 3.1).
    pub fn delete_partitions(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = || format!("delete offsets of group `{group}`");
        let mut txn = db.begin_write().map_err(|e| from_redb(&context(), e))?;
        txn.set_durability(Durability::Immediate);
        let mut deleted = 0u64;
        {
            let mut table = txn
                .open_table(OFFSETS)
                .map_err(|e| from_redb(&context(), e))?;
            for tp in partitions {
                for &partition in tp.partitions.iter() {
                    let key: Key = (group, tp.topic.as_str(), partition);
                    if table
                        .remove(key)
                        .map_err(|e| from_redb(&context(), e))?
                        .is_some()
                    {
                        deleted += 1;
                    }
                }
            }
        }
        if deleted == 0 {
            txn.abort().map_err(|e| from_redb(&context(), e))?;
        } else {
            txn.commit().map_err(|e| from_redb(&context(), e))?;
        }
        Ok(deleted)
    }

    /// Every committed offset of `group`, in key order (empty for an unknown group).
    pub fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = || format!("fetch offsets of group `{group}`");
        let txn = db.begin_read().map_err(|e| from_redb(&context(), e))?;
        let table = txn
            .open_table(OFFSETS)
            .map_err(|e| from_redb(&context(), e))?;
        let successor = layout::successor(group);
        let mut out = Vec::new();
        for entry in table
            .range(layout::group_range(group, &successor))
            .map_err(|e| from_redb(&context(), e))?
        {
            let (key, value) = entry.map_err(|e| from_redb(&context(), e))?;
            out.push(layout::decode(key.value(), value.value()));
        }
        Ok(out)
    }

    /// Every group with at least one committed offset, sorted, each once. Seeks from
    /// group to group instead of reading every offset.
    pub fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = "list groups";
        let txn = db.begin_read().map_err(|e| from_redb(context, e))?;
        let table = txn.open_table(OFFSETS).map_err(|e| from_redb(context, e))?;
        let mut groups: Vec<String> = Vec::new();
        loop {
            let next = match groups.last() {
                None => table.first(),
                Some(last) => {
                    let successor = layout::successor(last);
                    let from = layout::group_start(&successor);
                    table
                        .range::<Key>((Bound::Included(from), Bound::Unbounded))
                        .and_then(|mut range| range.next().transpose())
                }
            }
            .map_err(|e| from_redb(context, e))?;
            match next {
                Some((key, _)) => groups.push(key.value().0.to_owned()),
                None => return Ok(groups),
            }
        }
    }

    /// Durably deletes every offset of `group`; returns how many there were.
    pub fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = || format!("delete group `{group}`");
        let mut txn = db.begin_write().map_err(|e| from_redb(&context(), e))?;
        txn.set_durability(Durability::Immediate);
        let mut deleted = 0u64;
        {
            let mut table = txn
                .open_table(OFFSETS)
                .map_err(|e| from_redb(&context(), e))?;
            let successor = layout::successor(group);
            let extracted = table
                .extract_from_if(layout::group_range(group, &successor), |_, _| true)
                .map_err(|e| from_redb(&context(), e))?;
            for entry in extracted {
                entry.map_err(|e| from_redb(&context(), e))?;
                deleted += 1;
            }
        }
        if deleted == 0 {
            txn.abort().map_err(|e| from_redb(&context(), e))?;
        } else {
            txn.commit().map_err(|e| from_redb(&context(), e))?;
        }
        Ok(deleted)
    }

    /// Up to `limit` records strictly after `after` (from the start when `None`), in key
    /// order. `limit` 0 is refused: an empty page means "the end" to the caller.
    pub fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        if limit == 0 {
            return Err(PluginError::invalid_input(
                "offset store `embedded`: scan with limit 0 (an empty page would mean the end)",
            ));
        }
        let context = "scan offsets";
        let txn = db.begin_read().map_err(|e| from_redb(context, e))?;
        let table = txn.open_table(OFFSETS).map_err(|e| from_redb(context, e))?;
        let start = match after {
            Some(key) => Bound::Excluded(layout::key_of(key)),
            None => Bound::Unbounded,
        };
        let range = table
            .range::<Key>((start, Bound::Unbounded))
            .map_err(|e| from_redb(context, e))?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(limit.min(4096));
        for entry in range.take(limit) {
            let (key, value) = entry.map_err(|e| from_redb(context, e))?;
            out.push(layout::decode(key.value(), value.value()));
        }
        Ok(out)
    }

    /// Every acknowledged commit is already durable (commits use
    /// [`Durability::Immediate`]), so this only checks that the store is open.
    pub fn flush(&self) -> Result<(), PluginError> {
        let guard = self.read();
        guard.as_ref().map(|_| ()).ok_or_else(closed)
    }

    /// Waits for calls in flight, then closes the database (releasing its file lock).
    /// Later calls return `Closed`; closing again is a no-op.
    pub fn close(&self) -> Result<(), PluginError> {
        let mut db = self.db.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(db) = db.take() {
            drop(db);
            tracing::info!(path = %self.config.path.display(), "embedded offset store closed");
        }
        Ok(())
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The open/closed switch, read-locked for the duration of one call.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Option<Database>> {
        // A panic while holding the write lock (in `close`) leaves `None` or the database
        // intact; either state is consistent.
        self.db.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn validate(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        let max = self.config.max_metadata_bytes;
        for r in batch {
            if r.partition < 0 {
                return Err(PluginError::invalid_input(format!(
                    "offset store `embedded`: group `{}` topic `{}` partition {}: \
                     negative partition; batch refused",
                    r.group, r.topic, r.partition
                )));
            }
            if r.metadata.len() > max {
                return Err(PluginError::invalid_input(format!(
                    "offset store `embedded`: group `{}` topic `{}` partition {}: metadata is \
                     {} bytes, more than max_metadata_bytes = {max}; batch refused",
                    r.group,
                    r.topic,
                    r.partition,
                    r.metadata.len()
                )));
            }
        }
        Ok(())
    }
}

/// Creates the offsets table when missing, checking an existing one has our layout.
fn create_table(db: &Database, path: &Path) -> Result<(), PluginError> {
    let context = format!("cannot initialise database {}", path.display());
    let txn = db.begin_write().map_err(|e| from_redb(&context, e))?;
    let tables = txn
        .open_table(OFFSETS)
        .map(drop)
        .and_then(|()| txn.open_table(layout::SHARE_STATE).map(drop));
    match tables {
        Ok(()) => {}
        Err(
            e @ (TableError::TableTypeMismatch { .. } | TableError::TypeDefinitionChanged { .. }),
        ) => {
            return Err(PluginError::invalid_config(format!(
                "offset store `embedded`: {} is a redb database but not an offset store \
                 of this layout: {e}",
                path.display()
            )))
        }
        Err(e) => return Err(from_redb(&context, e)),
    }
    txn.commit().map_err(|e| from_redb(&context, e))
}

/// Applies `slices` in order in one durable write transaction.
fn write_batches(db: &Database, slices: &[&[OffsetRecord]]) -> Result<(), PluginError> {
    let context = "commit";
    let mut txn = db.begin_write().map_err(|e| from_redb(context, e))?;
    txn.set_durability(Durability::Immediate);
    {
        let mut table = txn.open_table(OFFSETS).map_err(|e| from_redb(context, e))?;
        for record in slices.iter().flat_map(|s| s.iter()) {
            let (key, value) = layout::encode(record);
            table
                .insert(key, value)
                .map_err(|e| from_redb(context, e))?;
        }
    }
    txn.commit().map_err(|e| from_redb(context, e))
}
