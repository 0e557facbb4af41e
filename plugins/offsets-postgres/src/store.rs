//! The store proper: a connection [`Pool`] behind an open/closed switch, and the offset
//! operations on it.
//!
//! Every operation holds a read lock on the switch for its whole duration, so
//! [`Store::close`] (which takes the write lock) waits for calls in flight (each bounded
//! by its deadline), then ends the sessions and stops the plugin's runtime; later calls
//! find the switch empty and return `Closed`.

use std::{
    collections::BTreeMap,
    sync::{PoisonError, RwLock, RwLockReadGuard},
};

use drover_abi::{OffsetKey, OffsetRecord, PluginError, TopicPartitions};
use tokio_postgres::Row;

use drover_offsets_common::GroupCommit;

use crate::{
    config::Config,
    errors::closed,
    layout::{ScanFrom, UPSERT_CHUNK},
    pool::Pool,
};

/// An open PostgreSQL offset store.
pub struct Store {
    pool: RwLock<Option<Pool>>,
    committer: GroupCommit,
    config: Config,
    /// Set once the share-state table is known to exist (made at first use).
    pub(crate) share_table_ready: std::sync::atomic::AtomicBool,
}

impl Store {
    /// Connects, checks the server, and creates the schema and table when missing; see
    /// [`Pool::open`] for the errors.
    pub fn open(config: Config) -> Result<Store, PluginError> {
        let pool = Pool::open(config.clone())?;
        tracing::info!(
            server = %config.target,
            table = %crate::layout::qualified(config.schema.as_deref(), &config.table),
            pool_size = config.pool_size,
            statement_timeout_ms = config.statement_timeout.as_millis() as u64,
            max_metadata_bytes = config.max_metadata_bytes,
            "postgres offset store opened"
        );
        Ok(Store {
            pool: RwLock::new(Some(pool)),
            committer: GroupCommit::new("postgres"),
            config,
            share_table_ready: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Writes `batch` in one transaction (shared with concurrent callers), durable when
    /// it returns. Refuses the whole batch when a record has a negative partition,
    /// metadata longer than `max_metadata_bytes`, or a NUL character in its group, topic
    /// or metadata.
    pub fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        self.validate(batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        self.committer
            .commit(batch, |slices| write_batches(pool, slices))
    }

    /// The committed offsets of `group` for `partitions`, in request order; absent ones
    /// are left out.
    pub fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        let mut topics: Vec<&str> = Vec::new();
        let mut indexes: Vec<i32> = Vec::new();
        for tp in partitions.iter().filter(|tp| !tp.topic.contains('\0')) {
            for &partition in tp.partitions.iter() {
                topics.push(tp.topic.as_str());
                indexes.push(partition);
            }
        }
        if group.contains('\0') || topics.is_empty() {
            return Ok(Vec::new()); // no stored key has a NUL
        }
        pool.run(&format!("fetch offsets of group `{group}`"), async |c| {
            let rows = c
                .client
                .query(&c.stmts.fetch, &[&group, &topics, &indexes])
                .await?;
            decode_all(&rows)
        })
    }

    /// Every committed offset of `group`, in key order (empty for an unknown group).
    pub fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        if group.contains('\0') {
            return Ok(Vec::new());
        }
        pool.run(&format!("fetch offsets of group `{group}`"), async |c| {
            let rows = c.client.query(&c.stmts.fetch_group, &[&group]).await?;
            decode_all(&rows)
        })
    }

    /// Every group with at least one committed offset, sorted, each once.
    pub fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        pool.run("list groups", async |c| {
            let rows = c.client.query(&c.stmts.list_groups, &[]).await?;
            rows.iter().map(|row| row.try_get(0)).collect()
        })
    }

    /// Deletes every offset of `group` (durable on return); returns how many there were.
    pub fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        if group.contains('\0') {
            return Ok(0);
        }
        pool.run(&format!("delete group `{group}`"), async |c| {
            c.client.execute(&c.stmts.delete_group, &[&group]).await
        })
    }

    /// Up to `limit` records strictly after `after` (from the start when `None`), in key
    /// order. `limit` 0 is refused: an empty page means "the end" to the caller.
    pub fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let guard = self.read();
        let pool = guard.as_ref().ok_or_else(closed)?;
        if limit == 0 {
            return Err(PluginError::invalid_input(
                "offset store `postgres`: scan with limit 0 (an empty page would mean the end)",
            ));
        }
        let limit = i64::from(limit);
        let from = ScanFrom::new(after);
        pool.run("scan offsets", async |c| {
            let s = &c.stmts;
            let rows = match from {
                ScanFrom::Start => c.client.query(&s.scan_first, &[&limit]).await?,
                ScanFrom::AfterKey(group, topic, partition) => {
                    c.client
                        .query(&s.scan_after_key, &[&group, &topic, &partition, &limit])
                        .await?
                }
                ScanFrom::AfterTopic(group, topic) => {
                    c.client
                        .query(&s.scan_after_topic, &[&group, &topic, &limit])
                        .await?
                }
                ScanFrom::AfterGroup(group) => {
                    c.client
                        .query(&s.scan_after_group, &[&group, &limit])
                        .await?
                }
            };
            decode_all(&rows)
        })
    }

    /// Every acknowledged commit is already durable (committed transactions, with
    /// `synchronous_commit` never `off`), so this only checks that the store is open.
    pub fn flush(&self) -> Result<(), PluginError> {
        let guard = self.read();
        guard.as_ref().map(|_| ()).ok_or_else(closed)
    }

    /// Waits for calls in flight, then ends the sessions and stops the plugin's runtime.
    /// Later calls return `Closed`; closing again is a no-op.
    pub fn close(&self) -> Result<(), PluginError> {
        let pool = self
            .pool
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(pool) = pool {
            pool.shutdown();
            tracing::info!(server = %self.config.target, "postgres offset store closed");
        }
        Ok(())
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The open/closed switch, read-locked for the duration of one call.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Option<Pool>> {
        self.pool.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn validate(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        let max = self.config.max_metadata_bytes;
        let refuse = |r: &OffsetRecord, why: String| {
            PluginError::invalid_input(format!(
                "offset store `postgres`: group `{}` topic `{}` partition {}: {why}; batch \
                 refused",
                r.group.as_str().escape_debug(),
                r.topic.as_str().escape_debug(),
                r.partition
            ))
        };
        for r in batch {
            if r.partition < 0 {
                return Err(refuse(r, "negative partition".into()));
            }
            if r.metadata.len() > max {
                return Err(refuse(
                    r,
                    format!(
                        "metadata is {} bytes, more than max_metadata_bytes = {max}",
                        r.metadata.len()
                    ),
                ));
            }
            for (what, value) in [
                ("group", &r.group),
                ("topic", &r.topic),
                ("metadata", &r.metadata),
            ] {
                if value.contains('\0') {
                    return Err(refuse(
                        r,
                        format!(
                            "the {what} contains a NUL character, which PostgreSQL text \
                             cannot hold"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Six parallel columns of an upsert statement.
struct Columns<'a> {
    groups: Vec<&'a str>,
    topics: Vec<&'a str>,
    partitions: Vec<i32>,
    offsets: Vec<i64>,
    metadata: Vec<&'a str>,
    times: Vec<i64>,
}

impl<'a> Columns<'a> {
    fn new(records: &[&'a OffsetRecord]) -> Self {
        Columns {
            groups: records.iter().map(|r| r.group.as_str()).collect(),
            topics: records.iter().map(|r| r.topic.as_str()).collect(),
            partitions: records.iter().map(|r| r.partition).collect(),
            offsets: records.iter().map(|r| r.offset).collect(),
            metadata: records.iter().map(|r| r.metadata.as_str()).collect(),
            times: records.iter().map(|r| r.commit_time_ms).collect(),
        }
    }
}

/// Applies `slices` in order in one transaction: the last record of each key, in key
/// order (one lock order for every transaction), [`UPSERT_CHUNK`] rows per statement.
fn write_batches(pool: &Pool, slices: &[&[OffsetRecord]]) -> Result<(), PluginError> {
    let mut latest: BTreeMap<(&str, &str, i32), &OffsetRecord> = BTreeMap::new();
    for r in slices.iter().flat_map(|s| s.iter()) {
        latest.insert((r.group.as_str(), r.topic.as_str(), r.partition), r);
    }
    let rows: Vec<&OffsetRecord> = latest.into_values().collect();
    let chunks: Vec<Columns<'_>> = rows.chunks(UPSERT_CHUNK).map(Columns::new).collect();
    pool.run(&format!("commit {} offsets", rows.len()), async |c| {
        let tx = c.client.transaction().await?;
        for chunk in &chunks {
            tx.execute(
                &c.stmts.upsert,
                &[
                    &chunk.groups,
                    &chunk.topics,
                    &chunk.partitions,
                    &chunk.offsets,
                    &chunk.metadata,
                    &chunk.times,
                ],
            )
            .await?;
        }
        tx.commit().await
    })
}

/// Rows of [`crate::layout::COLUMNS`] as records.
fn decode_all(rows: &[Row]) -> Result<Vec<OffsetRecord>, tokio_postgres::Error> {
    rows.iter().map(decode).collect()
}

fn decode(row: &Row) -> Result<OffsetRecord, tokio_postgres::Error> {
    Ok(OffsetRecord {
        group: row.try_get::<_, &str>(0)?.into(),
        topic: row.try_get::<_, &str>(1)?.into(),
        partition: row.try_get(2)?,
        offset: row.try_get(3)?,
        metadata: row.try_get::<_, &str>(4)?.into(),
        commit_time_ms: row.try_get(5)?,
    })
}
