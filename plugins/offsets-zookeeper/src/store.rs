//! The store proper: a [`Connection`] behind an open/closed switch, and the offset
//! operations on the [`crate::layout`].
//!
//! Every operation holds a read lock on the switch for its whole duration, so
//! [`Store::close`] (which takes the write lock) waits for calls in flight, then closes
//! the session and stops the runtime; later calls find the switch empty and return
//! `Closed`.
//!
//! Reads are batched and pipelined: [`READ_BATCH`] nodes are read with one ZooKeeper
//! multi-read, and [`READS_IN_FLIGHT`] multi-reads are in flight at once on the session,
//! so fetching thousands of offsets costs a few round trips, not thousands.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{PoisonError, RwLock, RwLockReadGuard},
};

use drover_abi::{OffsetKey, OffsetRecord, PluginError, TopicPartitions};
use futures_util::{stream, StreamExt, TryStreamExt};
use zookeeper_client::{
    Acls, Client, CreateMode, CreateOptions, Error as ZkError, MultiReadResult, MultiWriteError,
    Stat,
};

use crate::{
    config::Config,
    connection::Connection,
    errors::closed,
    layout::{self, Layout},
};

/// Reads batched into one ZooKeeper multi-read (`get_data` or `get_children` of this
/// many nodes in one request).
pub const READ_BATCH: usize = 256;
/// Multi-reads in flight at once (pipelined on the session).
pub const READS_IN_FLIGHT: usize = 8;
/// How many times one commit or delete re-plans after a concurrent change (a node
/// created or deleted by another writer between planning and writing) before giving up
/// with `Unavailable`.
pub const MAX_CONFLICTS: usize = 16;
/// Estimated encoded size of one operation in a multi besides its path and data
/// (operation header, ACL, flags, version, length prefixes), rounded up.
const OP_OVERHEAD: usize = 64;

/// Nodes are created persistent and open to everyone, like Kafka's ZooKeeper nodes
/// without `zookeeper.set.acl`; restrict access with ACLs on the chroot's parent or
/// network policy.
const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());

/// An open ZooKeeper offset store.
pub struct Store {
    inner: RwLock<Option<Inner>>,
    config: Config,
}

/// What an open store has: the session and the paths.
struct Inner {
    conn: Connection,
    layout: Layout,
    config: Config,
}

/// One write in a multi.
enum Op {
    /// Create a parent node (empty value).
    Dir(String),
    /// Create a partition node.
    Create(String, Vec<u8>),
    /// Overwrite a partition node.
    Set(String, Vec<u8>),
    /// Delete a node.
    Delete(String),
}

impl Op {
    fn path(&self) -> &str {
        match self {
            Op::Dir(p) | Op::Create(p, _) | Op::Set(p, _) | Op::Delete(p) => p,
        }
    }

    fn size(&self) -> usize {
        let data = match self {
            Op::Create(_, d) | Op::Set(_, d) => d.len(),
            Op::Dir(_) | Op::Delete(_) => 0,
        };
        self.path().len() + data + OP_OVERHEAD
    }
}

/// Operations sent as one multi, and how many batch records (or deleted partition
/// nodes) they carry.
#[derive(Default)]
struct Chunk {
    ops: Vec<Op>,
    bytes: usize,
    records: usize,
}

impl Chunk {
    fn push(&mut self, op: Op, is_record: bool) {
        self.bytes += op.size();
        self.records += usize::from(is_record);
        self.ops.push(op);
    }
}

/// A run of operations that should land in one multi when it fits (one group's).
#[derive(Default)]
struct Unit {
    ops: Vec<(Op, bool)>,
    bytes: usize,
}

impl Unit {
    fn push(&mut self, op: Op, is_record: bool) {
        self.bytes += op.size();
        self.ops.push((op, is_record));
    }
}

/// Packs `units` in order into chunks of at most `max` bytes. A unit goes whole into
/// one chunk whenever it fits in one (starting a new chunk if needed); a larger unit is
/// split between operations. A chunk holds at least one operation.
fn pack(units: Vec<Unit>, max: usize) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current = Chunk::default();
    for unit in units {
        if !current.ops.is_empty() && current.bytes + unit.bytes > max && unit.bytes <= max {
            chunks.push(std::mem::take(&mut current));
        }
        for (op, is_record) in unit.ops {
            if !current.ops.is_empty() && current.bytes + op.size() > max {
                chunks.push(std::mem::take(&mut current));
            }
            current.push(op, is_record);
        }
    }
    if !current.ops.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// How a multi ended.
enum MultiOutcome {
    Done,
    /// A node was created or deleted concurrently: plan again.
    Conflict(String, ZkError),
}

impl Store {
    /// Connects to ZooKeeper and creates `<chroot>/consumers` (and the chroot) when
    /// missing. Errors: `Unavailable` when ZooKeeper cannot be reached within
    /// `request_timeout_ms`; `InvalidConfig` when the chroot cannot be created for lack
    /// of permission.
    pub fn open(config: Config) -> Result<Store, PluginError> {
        let conn = Connection::open(&config)?;
        let layout = Layout::new(&config.chroot);
        conn.block_on(async {
            let client = conn.client().await?;
            conn.io(client.mkdir(layout.consumers(), &PERSISTENT))
                .await
                .map_err(|e| {
                    let what = format!("cannot create {}", layout.consumers());
                    let err = conn.errors().from_zk(&what, e.clone());
                    if matches!(e, ZkError::NoAuth) {
                        PluginError::invalid_config(err.message.to_string()).with_code(err.code)
                    } else {
                        err
                    }
                })
        })?;
        tracing::info!(
            connect = %config.connect,
            chroot = %config.chroot,
            max_metadata_bytes = config.max_metadata_bytes,
            "zookeeper offset store opened"
        );
        Ok(Store {
            inner: RwLock::new(Some(Inner {
                conn,
                layout,
                config: config.clone(),
            })),
            config,
        })
    }

    /// Writes `batch` with multi-operations (see the crate docs on atomicity). Refuses
    /// the whole batch when a record has a negative partition, metadata longer than
    /// `max_metadata_bytes`, or does not fit in one multi.
    pub fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        self.with(|inner| {
            inner.validate(batch)?;
            if batch.is_empty() {
                return Ok(());
            }
            inner.conn.block_on(inner.commit(batch))
        })
    }

    /// The committed offsets of `group` for `partitions`, in request order; absent ones
    /// are left out.
    pub fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        self.with(|inner| inner.conn.block_on(inner.fetch(group, partitions)))
    }

    /// Every committed offset of `group`, in key order (empty for an unknown group).
    pub fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        self.with(|inner| inner.conn.block_on(inner.fetch_group(group)))
    }

    /// Every group with at least one committed offset, sorted.
    pub fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        self.with(|inner| inner.conn.block_on(inner.list_groups()))
    }

    /// Deletes every offset of `group`; returns how many there were.
    pub fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        self.with(|inner| inner.conn.block_on(inner.delete_group(group)))
    }

    /// Up to `limit` records strictly after `after` (from the start when `None`), in key
    /// order. `limit` 0 is refused: an empty page means "the end" to the caller.
    pub fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        self.with(|inner| {
            if limit == 0 {
                return Err(PluginError::invalid_input(
                    "offset store `zookeeper`: scan with limit 0 (an empty page would mean \
                     the end)",
                ));
            }
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            inner.conn.block_on(inner.scan(after, limit))
        })
    }

    /// ZooKeeper acknowledges a write only once it is in the transaction log of a
    /// quorum, so this only checks that the store is open.
    pub fn flush(&self) -> Result<(), PluginError> {
        self.with(|_| Ok(()))
    }

    /// Waits for calls in flight, then closes the session and stops the runtime. Later
    /// calls return `Closed`; closing again is a no-op.
    pub fn close(&self) -> Result<(), PluginError> {
        let taken = self
            .inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(inner) = taken {
            inner.conn.shutdown();
            tracing::info!(
                connect = %self.config.connect,
                chroot = %self.config.chroot,
                "zookeeper offset store closed"
            );
        }
        Ok(())
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn with<T>(&self, f: impl FnOnce(&Inner) -> Result<T, PluginError>) -> Result<T, PluginError> {
        let guard = self.read();
        f(guard.as_ref().ok_or_else(closed)?)
    }

    /// The open/closed switch, read-locked for the duration of one call.
    fn read(&self) -> RwLockReadGuard<'_, Option<Inner>> {
        // A panic while holding the write lock (in `close`) leaves `None` or the store
        // intact; either state is consistent.
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Decodes and sorts child names; logs and skips names this store never writes.
fn decode_names(parent: &str, children: Vec<String>) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = children
        .into_iter()
        .filter_map(|node| match layout::decode_name(&node) {
            Some(name) => Some((name, node)),
            None => {
                tracing::warn!(parent, node, "ignoring a node not written by this store");
                None
            }
        })
        .collect();
    names.sort();
    names
}

/// Parses and sorts partition node names; logs and skips others.
fn decode_partitions(parent: &str, children: Vec<String>) -> Vec<i32> {
    let mut partitions: Vec<i32> = children
        .into_iter()
        .filter_map(|node| {
            let p = layout::decode_partition(&node);
            if p.is_none() {
                tracing::warn!(parent, node, "ignoring a node that is not a partition");
            }
            p
        })
        .collect();
    partitions.sort_unstable();
    partitions
}

impl Inner {
    fn err(&self, what: &str, e: ZkError) -> PluginError {
        self.conn.errors().from_zk(what, e)
    }

    fn validate(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        let max = self.config.max_metadata_bytes;
        for r in batch {
            let refuse = |why: String| {
                Err(PluginError::invalid_input(format!(
                    "offset store `zookeeper`: group `{}` topic `{}` partition {}: {why}; \
                     batch refused",
                    r.group, r.topic, r.partition
                )))
            };
            if r.partition < 0 {
                return refuse("negative partition".into());
            }
            if r.metadata.len() > max {
                return refuse(format!(
                    "metadata is {} bytes, more than max_metadata_bytes = {max}",
                    r.metadata.len()
                ));
            }
            // The record's partition node plus its three parent nodes in one multi.
            let path = self.layout.partition(&r.group, &r.topic, r.partition);
            let size = 4 * (path.len() + OP_OVERHEAD) + layout::encode_value(r).len();
            if size > self.config.max_multi_bytes {
                return refuse(format!(
                    "the record needs {size} bytes in a ZooKeeper multi-operation, more than \
                     max_multi_bytes = {} (group or topic name too long)",
                    self.config.max_multi_bytes
                ));
            }
        }
        Ok(())
    }

    async fn children(&self, client: &Client, path: &str) -> Result<Option<Vec<String>>, ZkError> {
        match self.conn.io(client.list_children(path)).await {
            Ok(children) => Ok(Some(children)),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads many nodes with batched, pipelined multi-reads: for each path in order,
    /// its data and stat (`get_children == false`) or its children, `None` when the
    /// node does not exist.
    async fn read_many(
        &self,
        client: &Client,
        paths: &[String],
        get_children: bool,
    ) -> Result<Vec<Option<MultiReadResult>>, ZkError> {
        let batches: Vec<Vec<Option<MultiReadResult>>> = stream::iter(paths.chunks(READ_BATCH))
            .map(|batch| async move {
                let mut reader = client.new_multi_reader();
                for path in batch {
                    if get_children {
                        reader.add_get_children(path)?;
                    } else {
                        reader.add_get_data(path)?;
                    }
                }
                let results = self.conn.io(reader.commit()).await?;
                if results.len() != batch.len() {
                    return Err(ZkError::UnexpectedError(format!(
                        "multi-read of {} nodes answered {} results",
                        batch.len(),
                        results.len()
                    )));
                }
                results
                    .into_iter()
                    .map(|r| match r {
                        MultiReadResult::Error {
                            err: ZkError::NoNode,
                        } => Ok(None),
                        MultiReadResult::Error { err } => Err(err),
                        found => Ok(Some(found)),
                    })
                    .collect()
            })
            .buffered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(batches.into_iter().flatten().collect())
    }

    /// The data and stat of each of `paths` (`None`: no such node).
    async fn get_many(
        &self,
        client: &Client,
        paths: &[String],
    ) -> Result<Vec<Option<(Vec<u8>, Stat)>>, ZkError> {
        let results = self.read_many(client, paths, false).await?;
        results
            .into_iter()
            .map(|r| match r {
                None => Ok(None),
                Some(MultiReadResult::Data { data, stat }) => Ok(Some((data, stat))),
                Some(other) => Err(ZkError::UnexpectedError(format!(
                    "multi-read: expected data, got {other:?}"
                ))),
            })
            .collect()
    }

    /// The children of each of `paths` (`None`: no such node).
    async fn children_many(
        &self,
        client: &Client,
        paths: &[String],
    ) -> Result<Vec<Option<Vec<String>>>, ZkError> {
        let results = self.read_many(client, paths, true).await?;
        results
            .into_iter()
            .map(|r| match r {
                None => Ok(None),
                Some(MultiReadResult::Children { children }) => Ok(Some(children)),
                Some(other) => Err(ZkError::UnexpectedError(format!(
                    "multi-read: expected children, got {other:?}"
                ))),
            })
            .collect()
    }

    /// Reads the partition nodes of `keys`; absent ones are left out.
    async fn read_records(
        &self,
        client: &Client,
        keys: Vec<(&str, &str, i32)>,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let paths: Vec<String> = keys
            .iter()
            .map(|&(g, t, p)| self.layout.partition(g, t, p))
            .collect();
        let found = self
            .get_many(client, &paths)
            .await
            .map_err(|e| self.err("read offsets", e))?;
        let mut out = Vec::with_capacity(found.len());
        for (((group, topic, partition), path), found) in keys.into_iter().zip(&paths).zip(found) {
            let Some((data, stat)) = found else {
                continue;
            };
            let value = layout::decode_value(&data, stat.mtime)
                .map_err(|why| self.conn.errors().bad_value(path, &why))?;
            out.push(OffsetRecord {
                group: group.into(),
                topic: topic.into(),
                partition,
                offset: value.offset,
                metadata: value.metadata.into(),
                commit_time_ms: value.commit_time_ms,
            });
        }
        Ok(out)
    }

    async fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        // Later records for a key win; key order keeps each group's records together.
        let mut latest: BTreeMap<(&str, &str, i32), &OffsetRecord> = BTreeMap::new();
        for r in batch {
            latest.insert((r.group.as_str(), r.topic.as_str(), r.partition), r);
        }
        let records: Vec<&OffsetRecord> = latest.into_values().collect();
        let mut done = 0;
        let mut conflicts = 0;
        'plan: while done < records.len() {
            let client = self.conn.client().await?;
            let chunks = self
                .plan(&client, &records[done..])
                .await
                .map_err(|e| self.err("commit", e))?;
            for chunk in chunks {
                match self.multi(&client, &chunk.ops, "commit").await? {
                    MultiOutcome::Done => done += chunk.records,
                    MultiOutcome::Conflict(path, e) => {
                        conflicts += 1;
                        if conflicts > MAX_CONFLICTS {
                            return Err(self.too_many_conflicts("commit", &path, e));
                        }
                        tracing::debug!(path, error = %e, "commit raced a concurrent change; re-planning");
                        continue 'plan;
                    }
                }
            }
        }
        Ok(())
    }

    fn too_many_conflicts(&self, what: &str, path: &str, e: ZkError) -> PluginError {
        PluginError::unavailable(format!(
            "offset store `zookeeper`: {what}: gave up after {MAX_CONFLICTS} concurrent changes \
             by other writers (last: {e} at {path}); retry"
        ))
        .with_code(crate::errors::zk_code(&e))
    }

    /// Finds which nodes `records` need created and which exist, and turns them into
    /// multis: parent nodes created before their children, one group per multi when
    /// it fits.
    async fn plan(
        &self,
        client: &Client,
        records: &[&OffsetRecord],
    ) -> Result<Vec<Chunk>, ZkError> {
        let mut groups: Vec<&str> = records.iter().map(|r| r.group.as_str()).collect();
        groups.dedup();
        let mut topics: Vec<(&str, &str)> = records
            .iter()
            .map(|r| (r.group.as_str(), r.topic.as_str()))
            .collect();
        topics.dedup();
        // `<chroot>/consumers`, then each group's node and its `offsets` node.
        let paths: Vec<String> = std::iter::once(self.layout.consumers().to_owned())
            .chain(
                groups
                    .iter()
                    .flat_map(|g| [self.layout.group(g), self.layout.offsets(g)]),
            )
            .collect();
        let topic_paths: Vec<String> = topics
            .iter()
            .map(|&(g, t)| self.layout.topic(g, t))
            .collect();
        // Both reads at once: one round trip for a small batch.
        let (found, topic_lists) = futures_util::future::try_join(
            self.read_many(client, &paths, false),
            self.children_many(client, &topic_paths),
        )
        .await?;
        if found[0].is_none() {
            // Removed behind our back: recreate it (idempotent).
            self.conn
                .io(client.mkdir(self.layout.consumers(), &PERSISTENT))
                .await?;
        }
        let group_nodes: Vec<(bool, bool)> = found[1..]
            .chunks(2)
            .map(|pair| (pair[0].is_some(), pair[1].is_some()))
            .collect();
        let topic_nodes: Vec<Option<HashSet<i32>>> = topic_lists
            .into_iter()
            .zip(&topic_paths)
            .map(|(children, path)| {
                children.map(|c| decode_partitions(path, c).into_iter().collect())
            })
            .collect();
        let group_nodes: HashMap<&str, (bool, bool)> =
            groups.into_iter().zip(group_nodes).collect();
        let mut topic_nodes: HashMap<(&str, &str), Option<HashSet<i32>>> =
            topics.into_iter().zip(topic_nodes).collect();

        let mut units: Vec<Unit> = Vec::new();
        let mut current_group = None;
        for r in records {
            let (g, t) = (r.group.as_str(), r.topic.as_str());
            if current_group != Some(g) {
                current_group = Some(g);
                let mut unit = Unit::default();
                let (group_exists, offsets_exist) = group_nodes[g];
                if !group_exists {
                    unit.push(Op::Dir(self.layout.group(g)), false);
                }
                if !offsets_exist {
                    unit.push(Op::Dir(self.layout.offsets(g)), false);
                }
                units.push(unit);
            }
            let unit = units.last_mut().expect("a unit per group");
            let existing = topic_nodes.get_mut(&(g, t)).expect("planned topic");
            let partitions = existing.get_or_insert_with(|| {
                unit.push(Op::Dir(self.layout.topic(g, t)), false);
                HashSet::new()
            });
            let path = self.layout.partition(g, t, r.partition);
            let value = layout::encode_value(r);
            if partitions.insert(r.partition) {
                unit.push(Op::Create(path, value), true);
            } else {
                unit.push(Op::Set(path, value), true);
            }
        }
        Ok(pack(units, self.config.max_multi_bytes))
    }

    /// Sends `ops` as one multi-operation.
    async fn multi(
        &self,
        client: &Client,
        ops: &[Op],
        what: &str,
    ) -> Result<MultiOutcome, PluginError> {
        let mut writer = client.new_multi_writer();
        for op in ops {
            let added = match op {
                Op::Dir(path) => writer.add_create(path, &[], &PERSISTENT),
                Op::Create(path, data) => writer.add_create(path, data, &PERSISTENT),
                Op::Set(path, data) => writer.add_set_data(path, data, None),
                Op::Delete(path) => writer.add_delete(path, None),
            };
            added.map_err(|e| self.err(&format!("{what} ({})", op.path()), e))?;
        }
        let result = self.conn.io(async { Ok(writer.commit().await) }).await;
        match result {
            Err(e) => Err(self.err(what, e)),
            Ok(Ok(_)) => Ok(MultiOutcome::Done),
            Ok(Err(MultiWriteError::OperationFailed { index, source })) => {
                let path = ops.get(index).map_or("?", Op::path).to_owned();
                match source {
                    ZkError::NodeExists | ZkError::NoNode | ZkError::NotEmpty => {
                        Ok(MultiOutcome::Conflict(path, source))
                    }
                    e => Err(self.err(&format!("{what} ({path})"), e)),
                }
            }
            Ok(Err(MultiWriteError::RequestFailed { source })) => Err(self.err(what, source)),
        }
    }

    async fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let client = self.conn.client().await?;
        let keys = partitions
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .filter(|p| **p >= 0)
                    .map(move |&p| (group, tp.topic.as_str(), p))
            })
            .collect();
        self.read_records(&client, keys).await
    }

    /// The topics of `group` (decoded, sorted) with their partitions (sorted).
    async fn group_partitions(
        &self,
        client: &Client,
        group: &str,
    ) -> Result<Vec<(String, Vec<i32>)>, ZkError> {
        let offsets = self.layout.offsets(group);
        let Some(children) = self.children(client, &offsets).await? else {
            return Ok(Vec::new());
        };
        let topics = decode_names(&offsets, children);
        let paths: Vec<String> = topics
            .iter()
            .map(|(topic, _)| self.layout.topic(group, topic))
            .collect();
        let lists = self.children_many(client, &paths).await?;
        Ok(topics
            .into_iter()
            .zip(paths.iter().zip(lists))
            .map(|((topic, _), (path, children))| {
                let partitions = children
                    .map(|c| decode_partitions(path, c))
                    .unwrap_or_default();
                (topic, partitions)
            })
            .collect())
    }

    async fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        let client = self.conn.client().await?;
        let topics = self
            .group_partitions(&client, group)
            .await
            .map_err(|e| self.err(&format!("fetch offsets of group `{group}`"), e))?;
        let keys = topics
            .iter()
            .flat_map(|(topic, ps)| ps.iter().map(move |&p| (group, topic.as_str(), p)))
            .collect();
        self.read_records(&client, keys).await
    }

    async fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        let client = self.conn.client().await?;
        self.groups_with_offsets(&client)
            .await
            .map_err(|e| self.err("list groups", e))
    }

    /// The groups (sorted) with at least one partition node. Looks at one topic of
    /// every group at a time, with multi-reads: usually the first topic settles it.
    async fn groups_with_offsets(&self, client: &Client) -> Result<Vec<String>, ZkError> {
        let consumers = self.layout.consumers();
        let children = self.children(client, consumers).await?.unwrap_or_default();
        let groups: Vec<String> = decode_names(consumers, children)
            .into_iter()
            .map(|(g, _)| g)
            .collect();
        let offsets: Vec<String> = groups.iter().map(|g| self.layout.offsets(g)).collect();
        let topic_lists = self.children_many(client, &offsets).await?;
        // Per group: its topics not looked at yet (in reverse, to pop the next).
        let mut pending: Vec<(usize, Vec<String>)> = topic_lists
            .into_iter()
            .zip(&offsets)
            .enumerate()
            .filter_map(|(i, (topics, path))| {
                let mut topics: Vec<String> = decode_names(path, topics?)
                    .into_iter()
                    .map(|(t, _)| t)
                    .collect();
                topics.reverse();
                Some((i, topics))
            })
            .collect();
        let mut has = vec![false; groups.len()];
        while !pending.is_empty() {
            let mut probes = Vec::new();
            pending.retain_mut(|(i, topics)| match topics.pop() {
                Some(topic) => {
                    probes.push((*i, self.layout.topic(&groups[*i], &topic)));
                    true
                }
                None => false,
            });
            let paths: Vec<String> = probes.iter().map(|(_, p)| p.clone()).collect();
            let lists = self.children_many(client, &paths).await?;
            for ((i, path), partitions) in probes.iter().zip(lists) {
                if partitions.is_some_and(|c| !decode_partitions(path, c).is_empty()) {
                    has[*i] = true;
                }
            }
            pending.retain(|(i, _)| !has[*i]);
        }
        Ok(groups
            .into_iter()
            .zip(has)
            .filter_map(|(g, has)| has.then_some(g))
            .collect())
    }

    async fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        let what = format!("delete group `{group}`");
        let mut deleted = 0u64;
        let mut conflicts = 0;
        'plan: loop {
            let client = self.conn.client().await?;
            let Some(chunks) = self
                .plan_delete(&client, group)
                .await
                .map_err(|e| self.err(&what, e))?
            else {
                return Ok(deleted);
            };
            for chunk in chunks {
                match self.multi(&client, &chunk.ops, &what).await? {
                    MultiOutcome::Done => deleted += chunk.records as u64,
                    MultiOutcome::Conflict(path, e) => {
                        conflicts += 1;
                        if conflicts > MAX_CONFLICTS {
                            return Err(self.too_many_conflicts(&what, &path, e));
                        }
                        tracing::debug!(path, error = %e, "delete raced a concurrent change; re-planning");
                        continue 'plan;
                    }
                }
            }
            return Ok(deleted);
        }
    }

    /// The multis that delete `group`'s offsets subtree: partition nodes first (in as
    /// many multis as needed), then in one last multi the topic nodes, `offsets`, and the
    /// group node itself unless it has other children (such as the `ids` and `owners`
    /// of Kafka's old consumers). `None` when the group has no `offsets` node.
    async fn plan_delete(
        &self,
        client: &Client,
        group: &str,
    ) -> Result<Option<Vec<Chunk>>, ZkError> {
        let offsets = self.layout.offsets(group);
        let Some(topic_nodes) = self.children(client, &offsets).await? else {
            return Ok(None);
        };
        let group_children = self
            .children(client, &self.layout.group(group))
            .await?
            .unwrap_or_default();
        let topic_paths: Vec<String> = topic_nodes
            .iter()
            .map(|node| format!("{offsets}/{node}"))
            .collect();
        let lists = self.children_many(client, &topic_paths).await?;
        let leaves: Vec<(String, Vec<String>)> = topic_paths
            .into_iter()
            .zip(lists)
            .map(|(path, children)| (path, children.unwrap_or_default()))
            .collect();
        let mut leaf_unit = Unit::default();
        let mut dir_unit = Unit::default();
        for (topic_path, children) in leaves {
            for child in children {
                let is_partition = layout::decode_partition(&child).is_some();
                leaf_unit.push(Op::Delete(format!("{topic_path}/{child}")), is_partition);
            }
            dir_unit.push(Op::Delete(topic_path), false);
        }
        dir_unit.push(Op::Delete(offsets), false);
        if group_children.iter().all(|c| c == layout::OFFSETS) {
            dir_unit.push(Op::Delete(self.layout.group(group)), false);
        }
        let mut chunks = pack(vec![leaf_unit], self.config.max_multi_bytes);
        chunks.extend(pack(vec![dir_unit], self.config.max_multi_bytes));
        Ok(Some(chunks))
    }

    async fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: usize,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let client = self.conn.client().await?;
        let mut cursor = after.cloned();
        loop {
            let keys = self
                .scan_keys(&client, cursor.as_ref(), limit)
                .await
                .map_err(|e| self.err("scan offsets", e))?;
            let Some((g, t, p)) = keys.last() else {
                return Ok(Vec::new());
            };
            let last = OffsetKey {
                group: g.as_str().into(),
                topic: t.as_str().into(),
                partition: *p,
            };
            let records = self
                .read_records(
                    &client,
                    keys.iter()
                        .map(|(g, t, p)| (g.as_str(), t.as_str(), *p))
                        .collect(),
                )
                .await?;
            if !records.is_empty() {
                return Ok(records);
            }
            // Every listed node was deleted before it was read: go on after them, so
            // an empty page still means the end.
            cursor = Some(last);
        }
    }

    /// Up to `limit` keys strictly after `after`, in key order, from the listings.
    async fn scan_keys(
        &self,
        client: &Client,
        after: Option<&OffsetKey>,
        limit: usize,
    ) -> Result<Vec<(String, String, i32)>, ZkError> {
        let mut keys = Vec::new();
        let consumers = self.layout.consumers();
        let groups = decode_names(
            consumers,
            self.children(client, consumers).await?.unwrap_or_default(),
        );
        for (group, _) in groups {
            if after.is_some_and(|a| group.as_str() < a.group.as_str()) {
                continue;
            }
            let same_group = after.filter(|a| a.group.as_str() == group);
            let offsets = self.layout.offsets(&group);
            let Some(topics) = self.children(client, &offsets).await? else {
                continue;
            };
            let topics: Vec<String> = decode_names(&offsets, topics)
                .into_iter()
                .map(|(t, _)| t)
                .filter(|t| same_group.is_none_or(|a| t.as_str() >= a.topic.as_str()))
                .collect();
            // List the partitions of a batch of topics at a time until the page is full.
            for batch in topics.chunks(READ_BATCH) {
                let paths: Vec<String> =
                    batch.iter().map(|t| self.layout.topic(&group, t)).collect();
                let lists = self.children_many(client, &paths).await?;
                for ((topic, path), partitions) in batch.iter().zip(&paths).zip(lists) {
                    let Some(partitions) = partitions else {
                        continue;
                    };
                    let same_topic = same_group.filter(|a| a.topic.as_str() == topic);
                    for p in decode_partitions(path, partitions) {
                        if same_topic.is_some_and(|a| p <= a.partition) {
                            continue;
                        }
                        keys.push((group.clone(), topic.clone(), p));
                        if keys.len() == limit {
                            return Ok(keys);
                        }
                    }
                }
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(sizes: &[usize]) -> Unit {
        let mut u = Unit::default();
        for &s in sizes {
            u.push(Op::Dir("x".repeat(s - OP_OVERHEAD)), true);
        }
        u
    }

    fn shape(chunks: &[Chunk]) -> Vec<usize> {
        chunks.iter().map(|c| c.ops.len()).collect()
    }

    #[test]
    fn packing_keeps_groups_whole_when_they_fit() {
        // Op sizes are path length + OP_OVERHEAD; these are 100 each.
        let chunks = pack(vec![unit(&[100; 3]), unit(&[100; 4]), unit(&[100; 2])], 500);
        assert_eq!(shape(&chunks), vec![3, 4, 2]);
        let chunks = pack(vec![unit(&[100; 2]), unit(&[100; 2]), unit(&[100; 1])], 500);
        assert_eq!(shape(&chunks), vec![5]);
        let chunks = pack(vec![unit(&[100; 2]), unit(&[100; 2]), unit(&[100; 2])], 500);
        assert_eq!(shape(&chunks), vec![4, 2]);
        // A group larger than a multi is split, filling the current multi first.
        let chunks = pack(vec![unit(&[100; 2]), unit(&[100; 9])], 500);
        assert_eq!(shape(&chunks), vec![5, 5, 1]);
        // An operation larger than a multi still goes (alone).
        let chunks = pack(vec![unit(&[100, 900, 100])], 500);
        assert_eq!(shape(&chunks), vec![1, 1, 1]);
        assert_eq!(chunks.iter().map(|c| c.records).sum::<usize>(), 3);
        assert!(pack(Vec::new(), 500).is_empty());
    }
}
