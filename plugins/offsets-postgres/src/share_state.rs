//! Share-group state in PostgreSQL (offset-store ABI 3.2): a second table beside the
//! offsets', `<table>_share_state`, made at first use:
//!
//! ```sql
//! CREATE TABLE drover_offsets_share_state (
//!     group_id  text COLLATE "C" NOT NULL,
//!     topic     text COLLATE "C" NOT NULL,
//!     partition integer NOT NULL,
//!     state     bytea NOT NULL,   -- drover_offsets_common::share_codec
//!     PRIMARY KEY (group_id, topic, partition)
//! );
//! ```
//!
//! A write is one transaction of upserts (in key order, so concurrent writers lock rows
//! in one order), durable when it commits. Names with a NUL are refused on write and
//! found nowhere on read, as for offsets.

use std::sync::atomic::Ordering;

use drover_abi::{OffsetKey, PluginError, ShareStateRecord, TopicPartitions};
use drover_offsets_common::share_codec;
use tokio_postgres::Row;

use crate::{errors::closed, layout, store::Store};

const NAME: &str = "postgres";

impl Store {
    fn share_table(&self) -> String {
        let config = self.config();
        layout::qualified(
            config.schema.as_deref(),
            &format!("{}_share_state", config.table),
        )
    }

    /// Makes the table once per store.
    fn ensure_share_table(&self, pool: &crate::pool::Pool) -> Result<(), PluginError> {
        if self.share_table_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let table = self.share_table();
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {table} (\n\
             group_id text COLLATE \"C\" NOT NULL,\n\
             topic text COLLATE \"C\" NOT NULL,\n\
             partition integer NOT NULL,\n\
             state bytea NOT NULL,\n\
             PRIMARY KEY (group_id, topic, partition))"
        );
        pool.run("create the share-state table", async |c| {
            c.client.batch_execute(&sql).await
        })?;
        self.share_table_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Writes `batch` in one transaction, each record replacing its key's.
    pub fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        for record in batch {
            share_codec::validate(record, NAME)?;
            if record.group.contains('\0') || record.topic.contains('\0') {
                return Err(PluginError::invalid_input(
                    "offset store `postgres`: a group or topic with a NUL character",
                ));
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.ensure_share_table(pool)?;
        let mut rows: Vec<(&str, &str, i32, Vec<u8>)> = batch
            .iter()
            .map(|r| {
                (
                    r.group.as_str(),
                    r.topic.as_str(),
                    r.partition,
                    share_codec::encode(r),
                )
            })
            .collect();
        rows.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        rows.dedup_by(|later, earlier| {
            let same = (later.0, later.1, later.2) == (earlier.0, earlier.1, earlier.2);
            if same {
                std::mem::swap(&mut earlier.3, &mut later.3);
            }
            same
        });
        let sql = format!(
            "INSERT INTO {} (group_id, topic, partition, state) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (group_id, topic, partition) DO UPDATE SET state = EXCLUDED.state",
            self.share_table()
        );
        pool.run(&format!("write {} share states", rows.len()), async |c| {
            let tx = c.client.transaction().await?;
            let stmt = tx.prepare(&sql).await?;
            for (group, topic, partition, state) in &rows {
                tx.execute(&stmt, &[group, topic, partition, state]).await?;
            }
            tx.commit().await
        })
    }

    /// `group`'s share-partition states of `partitions`; absent ones are left out.
    pub fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        if group.contains('\0') {
            return Ok(Vec::new());
        }
        self.ensure_share_table(pool)?;
        let sql = format!(
            "SELECT group_id, topic, partition, state FROM {} \
             WHERE group_id = $1 AND topic = $2 AND partition = $3",
            self.share_table()
        );
        let keys: Vec<(&str, i32)> = partitions
            .iter()
            .filter(|tp| !tp.topic.contains('\0'))
            .flat_map(|tp| tp.partitions.iter().map(move |&p| (tp.topic.as_str(), p)))
            .collect();
        let rows = pool.run(&format!("read share state of `{group}`"), async |c| {
            let mut out = Vec::new();
            for (topic, partition) in &keys {
                out.extend(c.client.query(&sql, &[&group, topic, partition]).await?);
            }
            Ok(out)
        })?;
        rows.iter().map(decode).collect()
    }

    /// Deletes `group`'s share-partition states of `partitions` (all of the group's when
    /// empty) in one transaction; returns how many existed.
    pub fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        if group.contains('\0') {
            return Ok(0);
        }
        self.ensure_share_table(pool)?;
        let table = self.share_table();
        let all = format!("DELETE FROM {table} WHERE group_id = $1");
        let one =
            format!("DELETE FROM {table} WHERE group_id = $1 AND topic = $2 AND partition = $3");
        let keys: Vec<(&str, i32)> = partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(move |&p| (tp.topic.as_str(), p)))
            .collect();
        pool.run(&format!("delete share state of `{group}`"), async |c| {
            let tx = c.client.transaction().await?;
            let mut deleted = 0;
            if keys.is_empty() {
                deleted = tx.execute(&all, &[&group]).await?;
            }
            for (topic, partition) in &keys {
                deleted += tx.execute(&one, &[&group, topic, partition]).await?;
            }
            tx.commit().await?;
            Ok(deleted)
        })
    }

    /// Up to `limit` share-partition states strictly after `after`, in key order.
    pub fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        if limit == 0 {
            return Err(PluginError::invalid_input(
                "offset store `postgres`: share-state scan with limit 0",
            ));
        }
        self.ensure_share_table(pool)?;
        let table = self.share_table();
        let limit = i64::from(limit);
        let rows = match after {
            // No stored key holds a NUL (writes refuse it) and the host only passes keys
            // it read; PostgreSQL text cannot carry one, so it is replaced.
            Some(key) => {
                let sql = format!(
                    "SELECT group_id, topic, partition, state FROM {table} \
                     WHERE (group_id, topic, partition) > ($1, $2, $3) \
                     ORDER BY group_id, topic, partition LIMIT $4"
                );
                let group = key.group.replace('\0', "\u{1}");
                let topic = key.topic.replace('\0', "\u{1}");
                let partition = key.partition;
                pool.run("scan share state", async |c| {
                    c.client
                        .query(&sql, &[&group, &topic, &partition, &limit])
                        .await
                })?
            }
            None => {
                let sql = format!(
                    "SELECT group_id, topic, partition, state FROM {table} \
                     ORDER BY group_id, topic, partition LIMIT $1"
                );
                pool.run("scan share state", async |c| {
                    c.client.query(&sql, &[&limit]).await
                })?
            }
        };
        rows.iter().map(decode).collect()
    }
}

fn decode(row: &Row) -> Result<ShareStateRecord, PluginError> {
    let get = || -> Result<(String, String, i32, Vec<u8>), tokio_postgres::Error> {
        Ok((
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        ))
    };
    let (group, topic, partition, state) = get().map_err(|e| {
        PluginError::new(
            drover_abi::ErrorKind::Internal,
            format!("offset store `postgres`: reading a share-state row: {e}"),
        )
    })?;
    share_codec::decode(&group, &topic, partition, &state)
        .ok_or_else(|| share_codec::damaged(NAME, &group, &topic, partition))
}
