//! Share-group state in the embedded store (offset-store ABI 3.2): the `share_state`
//! table ([`layout::SHARE_STATE`]), written in durable transactions like commits.

use std::ops::Bound;

use drover_abi::{OffsetKey, PluginError, ShareStateRecord, TopicPartitions};
use drover_offsets_common::share_codec;
use redb::{Durability, ReadableTable};

use crate::{
    errors::{closed, from_redb},
    layout::{self, Key, SHARE_STATE},
    store::Store,
};

const NAME: &str = "embedded";

impl Store {
    /// Writes `batch` in one durable transaction, each record replacing its key's.
    pub fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        for record in batch {
            share_codec::validate(record, NAME)?;
        }
        if batch.is_empty() {
            return Ok(());
        }
        let context = "write share state";
        let mut txn = db.begin_write().map_err(|e| from_redb(context, e))?;
        txn.set_durability(Durability::Immediate);
        {
            let mut table = txn
                .open_table(SHARE_STATE)
                .map_err(|e| from_redb(context, e))?;
            for record in batch {
                let key: Key = (
                    record.group.as_str(),
                    record.topic.as_str(),
                    record.partition,
                );
                table
                    .insert(key, share_codec::encode(record).as_slice())
                    .map_err(|e| from_redb(context, e))?;
            }
        }
        txn.commit().map_err(|e| from_redb(context, e))
    }

    /// `group`'s share-partition states of `partitions`; absent ones are left out.
    pub fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = || format!("read share state of group `{group}`");
        let txn = db.begin_read().map_err(|e| from_redb(&context(), e))?;
        let table = txn
            .open_table(SHARE_STATE)
            .map_err(|e| from_redb(&context(), e))?;
        let mut out = Vec::new();
        for tp in partitions {
            for &partition in tp.partitions.iter() {
                let key: Key = (group, tp.topic.as_str(), partition);
                if let Some(value) = table.get(key).map_err(|e| from_redb(&context(), e))? {
                    out.push(
                        share_codec::decode(group, &tp.topic, partition, value.value())
                            .ok_or_else(|| {
                                share_codec::damaged(NAME, group, &tp.topic, partition)
                            })?,
                    );
                }
            }
        }
        Ok(out)
    }

    /// Deletes `group`'s share-partition states of `partitions` (all of the group's when
    /// empty) in one durable transaction; returns how many existed.
    pub fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        let context = || format!("delete share state of group `{group}`");
        let mut txn = db.begin_write().map_err(|e| from_redb(&context(), e))?;
        txn.set_durability(Durability::Immediate);
        let mut deleted = 0u64;
        {
            let mut table = txn
                .open_table(SHARE_STATE)
                .map_err(|e| from_redb(&context(), e))?;
            let keys: Vec<(String, i32)> = if partitions.is_empty() {
                let successor = layout::successor(group);
                let range = table
                    .range::<Key>(layout::group_range(group, &successor))
                    .map_err(|e| from_redb(&context(), e))?;
                let mut keys = Vec::new();
                for entry in range {
                    let (k, _) = entry.map_err(|e| from_redb(&context(), e))?;
                    let (_, topic, partition) = k.value();
                    keys.push((topic.to_owned(), partition));
                }
                keys
            } else {
                partitions
                    .iter()
                    .flat_map(|tp| tp.partitions.iter().map(|&p| (tp.topic.to_string(), p)))
                    .collect()
            };
            for (topic, partition) in keys {
                let key: Key = (group, topic.as_str(), partition);
                if table
                    .remove(key)
                    .map_err(|e| from_redb(&context(), e))?
                    .is_some()
                {
                    deleted += 1;
                }
            }
        }
        txn.commit().map_err(|e| from_redb(&context(), e))?;
        Ok(deleted)
    }

    /// Up to `limit` share-partition states strictly after `after`, in key order.
    pub fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let guard = self.read();
        let db = guard.as_ref().ok_or_else(closed)?;
        if limit == 0 {
            return Err(PluginError::invalid_input(
                "offset store `embedded`: share-state scan with limit 0",
            ));
        }
        let context = "scan share state";
        let txn = db.begin_read().map_err(|e| from_redb(context, e))?;
        let table = txn
            .open_table(SHARE_STATE)
            .map_err(|e| from_redb(context, e))?;
        let start = match after {
            Some(key) => Bound::Excluded(layout::key_of(key)),
            None => Bound::Unbounded,
        };
        let range = table
            .range::<Key>((start, Bound::Unbounded))
            .map_err(|e| from_redb(context, e))?;
        let mut out = Vec::new();
        for entry in range.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
            let (k, v) = entry.map_err(|e| from_redb(context, e))?;
            let (group, topic, partition) = k.value();
            out.push(
                share_codec::decode(group, topic, partition, v.value())
                    .ok_or_else(|| share_codec::damaged(NAME, group, topic, partition))?,
            );
        }
        Ok(out)
    }
}
