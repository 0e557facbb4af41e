//! The store proper: a [`Backend`] (the store's own session, or the broker's) behind an
//! open/closed switch, and the offset operations on the [`crate::layout`]. The logic
//! here — planning commits into multi-operations within `max_multi_bytes`, re-planning
//! after concurrent changes, batched reads, scans and deletes — is the same over both
//! backends; only the primitives in [`crate::backend`] differ.
//!
//! Every operation holds a read lock on the switch for its whole duration, so
//! [`Store::close`] (which takes the write lock) waits for calls in flight, then
//! releases the backend (closing the store's own session and stopping its runtime;
//! the broker's session is left open); later calls find the switch empty and return
//! `Closed`.
//!
//! Reads are batched: [`READ_BATCH`] nodes are read with one ZooKeeper multi-read, and
//! [`READS_IN_FLIGHT`] multi-reads are in flight at once on the store's own session
//! (over the broker's session, single reads from that many threads), so fetching
//! thousands of offsets costs a few round trips, not thousands.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{PoisonError, RwLock, RwLockReadGuard},
};

use drover_abi::{host::ZkSessionArc, OffsetKey, OffsetRecord, PluginError, TopicPartitions};
use zookeeper_client::Error as ZkError;

pub use crate::backend::{READS_IN_FLIGHT, READ_BATCH};
use crate::{
    backend::{Backend, Fault, Found, MultiOutcome, Read},
    config::{Config, SessionSource},
    connection::Connection,
    errors::{closed, ErrorContext},
    layout::{self, Layout},
};

mod share_state;

/// How many times one commit or delete re-plans after a concurrent change (a node
/// created or deleted by another writer between planning and writing) before giving up
/// with `Unavailable`.
pub const MAX_CONFLICTS: usize = 16;
/// Estimated encoded size of one operation in a multi besides its path and data
/// (operation header, ACL, flags, version, length prefixes), rounded up.
const OP_OVERHEAD: usize = 64;

/// A node's data and its modification time (ms since the epoch; 0 when unknown).
type NodeData = (Vec<u8>, i64);

/// An open ZooKeeper offset store.
pub struct Store {
    inner: RwLock<Option<Inner>>,
    config: Config,
}

/// What an open store has: the backend, the paths and how errors are described.
struct Inner {
    backend: Backend,
    layout: Layout,
    config: Config,
    errors: ErrorContext,
}

/// One write in a multi-operation (paths below the session's chroot).
pub enum Op {
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
    /// The node the operation writes.
    pub fn path(&self) -> &str {
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

impl Store {
    /// Opens a store with its own session ([`SessionSource::Own`]): connects to
    /// ZooKeeper and creates `<chroot>/consumers` (and the chroot) when missing.
    /// Errors: `Unavailable` when ZooKeeper cannot be reached within
    /// `request_timeout_ms`; `InvalidConfig` when the chroot cannot be created for lack
    /// of permission.
    pub fn open(config: Config) -> Result<Store, PluginError> {
        let conn = Connection::open(&config)?;
        let layout = Layout::new(&config.chroot);
        let errors = ErrorContext::for_config(&config);
        let backend = Backend::Own(Box::new(conn));
        if let Err(fault) = backend.mkdir(layout.consumers()) {
            let what = format!("cannot create {}", layout.consumers());
            let err = describe(&errors, &what, fault.clone());
            backend.shutdown();
            return Err(if fault.is_no_auth() {
                PluginError::invalid_config(err.message.to_string()).with_code(err.code)
            } else {
                err
            });
        }
        tracing::info!(
            session = "own",
            connect = %config.connect,
            chroot = %config.chroot,
            max_metadata_bytes = config.max_metadata_bytes,
            "zookeeper offset store opened with its own ZooKeeper session"
        );
        Ok(Store::with_backend(backend, layout, errors, config))
    }

    /// Opens a store over the broker's ZooKeeper `session` ([`SessionSource::Broker`],
    /// cluster mode): paths are below the broker's chroot, so the offsets live at
    /// `<broker chroot><config.chroot>/consumers/...`. Makes no ZooKeeper request (the
    /// broker may not be connected yet): `<chroot>/consumers` is created by the first
    /// commit. Never fails; `config.connect`, if any, is ignored.
    pub fn open_with_session(config: Config, session: ZkSessionArc) -> Store {
        let config = Config {
            session: SessionSource::Broker,
            ..config
        };
        let layout = Layout::new(&config.chroot);
        let errors = ErrorContext::for_config(&config);
        let backend = Backend::broker(session);
        let session_id = match &backend {
            Backend::Broker(b) => b.session_id(),
            Backend::Own(_) => 0,
        };
        if !config.connect.is_empty() {
            tracing::info!(
                connect = %config.connect,
                "`connect` is ignored: the zookeeper offset store uses the broker's session"
            );
        }
        tracing::info!(
            session = "broker",
            broker_session_id = format_args!("{session_id:#x}"),
            root = %config.chroot,
            max_metadata_bytes = config.max_metadata_bytes,
            "zookeeper offset store opened over the broker's ZooKeeper session; offsets \
             under <broker chroot>{}",
            layout.consumers()
        );
        Store::with_backend(backend, layout, errors, config)
    }

    fn with_backend(
        backend: Backend,
        layout: Layout,
        errors: ErrorContext,
        config: Config,
    ) -> Store {
        Store {
            inner: RwLock::new(Some(Inner {
                backend,
                layout,
                config: config.clone(),
                errors,
            })),
            config,
        }
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
            inner.commit(batch)
        })
    }

    /// The committed offsets of `group` for `partitions`, in request order; absent ones
    /// are left out.
    pub fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        self.with(|inner| inner.fetch(group, partitions))
    }

    /// Every committed offset of `group`, in key order (empty for an unknown group).
    pub fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        self.with(|inner| inner.fetch_group(group))
    }

    /// Every group with at least one committed offset, sorted.
    pub fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        self.with(|inner| inner.list_groups())
    }

    /// Deletes every offset of `group`; returns how many there were.
    pub fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        self.with(|inner| inner.delete_group(group))
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
            inner.scan(after, limit)
        })
    }

    /// ZooKeeper acknowledges a write only once it is in the transaction log of a
    /// quorum, so this only checks that the store is open.
    pub fn flush(&self) -> Result<(), PluginError> {
        self.with(|_| Ok(()))
    }

    /// Waits for calls in flight, then releases the backend: closes the store's own
    /// session and stops its runtime (the broker's session stays open). Later calls
    /// return `Closed`; closing again is a no-op.
    pub fn close(&self) -> Result<(), PluginError> {
        let taken = self
            .inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(inner) = taken {
            inner.backend.shutdown();
            tracing::info!(
                connect = %self.config.connect,
                chroot = %self.config.chroot,
                session = match self.config.session {
                    SessionSource::Own => "own",
                    SessionSource::Broker => "broker",
                },
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

/// The [`PluginError`] for `fault` while doing `what`.
fn describe(errors: &ErrorContext, what: &str, fault: Fault) -> PluginError {
    match fault {
        Fault::Zk(e) => errors.from_zk(what, e),
        Fault::Broker(e) => errors.from_broker(what, &e),
        Fault::Described(e) => e,
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

/// The children a batched read found, or an error if it found data.
fn expect_children(found: Option<Found>) -> Result<Option<Vec<String>>, Fault> {
    match found {
        None => Ok(None),
        Some(Found::Children(children)) => Ok(Some(children)),
        Some(other) => Err(unexpected("children", &other)),
    }
}

/// A batched read that answered the wrong kind of result.
fn unexpected(expected: &str, got: &Found) -> Fault {
    let got = match got {
        Found::Data { .. } => "data",
        Found::Children(_) => "children",
    };
    Fault::Zk(ZkError::UnexpectedError(format!(
        "batched read: expected {expected}, got {got}"
    )))
}

impl Inner {
    fn err(&self, what: &str, fault: Fault) -> PluginError {
        describe(&self.errors, what, fault)
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

    fn children(&self, path: &str) -> Result<Option<Vec<String>>, Fault> {
        self.backend.children(path)
    }

    /// The data and modification time of each of `paths` (`None`: no such node), with
    /// batched reads.
    fn get_many(&self, paths: &[String]) -> Result<Vec<Option<NodeData>>, Fault> {
        let reads: Vec<Read<'_>> = paths.iter().map(|p| Read::Data(p)).collect();
        self.backend
            .read_many(&reads)?
            .into_iter()
            .map(|found| match found {
                None => Ok(None),
                Some(Found::Data { data, mtime_ms }) => Ok(Some((data, mtime_ms))),
                Some(other) => Err(unexpected("data", &other)),
            })
            .collect()
    }

    /// The children of each of `paths` (`None`: no such node), with batched reads.
    fn children_many(&self, paths: &[String]) -> Result<Vec<Option<Vec<String>>>, Fault> {
        let reads: Vec<Read<'_>> = paths.iter().map(|p| Read::Children(p)).collect();
        self.backend
            .read_many(&reads)?
            .into_iter()
            .map(expect_children)
            .collect()
    }

    /// Reads the partition nodes of `keys`; absent ones are left out.
    fn read_records(&self, keys: Vec<(&str, &str, i32)>) -> Result<Vec<OffsetRecord>, PluginError> {
        let paths: Vec<String> = keys
            .iter()
            .map(|&(g, t, p)| self.layout.partition(g, t, p))
            .collect();
        let found = self
            .get_many(&paths)
            .map_err(|e| self.err("read offsets", e))?;
        let mut out = Vec::with_capacity(found.len());
        for (((group, topic, partition), path), found) in keys.into_iter().zip(&paths).zip(found) {
            let Some((data, mtime_ms)) = found else {
                continue;
            };
            let value = layout::decode_value(&data, mtime_ms)
                .map_err(|why| self.errors.bad_value(path, &why))?;
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

    fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError> {
        // Later records for a key win; key order keeps each group's records together.
        let mut latest: BTreeMap<(&str, &str, i32), &OffsetRecord> = BTreeMap::new();
        for r in batch {
            latest.insert((r.group.as_str(), r.topic.as_str(), r.partition), r);
        }
        let records: Vec<&OffsetRecord> = latest.into_values().collect();
        let mut done = 0;
        let mut conflicts = 0;
        'plan: while done < records.len() {
            let chunks = self
                .plan(&records[done..])
                .map_err(|e| self.err("commit", e))?;
            for chunk in chunks {
                match self.multi(&chunk.ops, "commit")? {
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

    fn too_many_conflicts(&self, what: &str, path: &str, e: Fault) -> PluginError {
        PluginError::unavailable(format!(
            "offset store `zookeeper`: {what}: gave up after {MAX_CONFLICTS} concurrent changes \
             by other writers (last: {e} at {path}); retry"
        ))
        .with_code(e.code())
    }

    /// Finds which nodes `records` need created and which exist, and turns them into
    /// multis: parent nodes created before their children, one group per multi when
    /// it fits.
    fn plan(&self, records: &[&OffsetRecord]) -> Result<Vec<Chunk>, Fault> {
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
        // Both kinds of reads in one batch: one round trip for a small batch.
        let reads: Vec<Read<'_>> = paths
            .iter()
            .map(|p| Read::Data(p))
            .chain(topic_paths.iter().map(|p| Read::Children(p)))
            .collect();
        let mut found = self.backend.read_many(&reads)?;
        let topic_lists = found
            .split_off(paths.len())
            .into_iter()
            .map(expect_children)
            .collect::<Result<Vec<_>, Fault>>()?;
        if found[0].is_none() {
            // Not created yet (over the broker's session, the first commit creates it),
            // or removed behind our back: create it (idempotent).
            self.backend.mkdir(self.layout.consumers())?;
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
    fn multi(&self, ops: &[Op], what: &str) -> Result<MultiOutcome, PluginError> {
        self.backend.multi(ops).map_err(|e| self.err(what, e))
    }

    fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let keys = partitions
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .filter(|p| **p >= 0)
                    .map(move |&p| (group, tp.topic.as_str(), p))
            })
            .collect();
        self.read_records(keys)
    }

    /// The topics of `group` (decoded, sorted) with their partitions (sorted).
    fn group_partitions(&self, group: &str) -> Result<Vec<(String, Vec<i32>)>, Fault> {
        let offsets = self.layout.offsets(group);
        let Some(children) = self.children(&offsets)? else {
            return Ok(Vec::new());
        };
        let topics = decode_names(&offsets, children);
        let paths: Vec<String> = topics
            .iter()
            .map(|(topic, _)| self.layout.topic(group, topic))
            .collect();
        let lists = self.children_many(&paths)?;
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

    fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError> {
        let topics = self
            .group_partitions(group)
            .map_err(|e| self.err(&format!("fetch offsets of group `{group}`"), e))?;
        let keys = topics
            .iter()
            .flat_map(|(topic, ps)| ps.iter().map(move |&p| (group, topic.as_str(), p)))
            .collect();
        self.read_records(keys)
    }

    fn list_groups(&self) -> Result<Vec<String>, PluginError> {
        self.groups_with_offsets()
            .map_err(|e| self.err("list groups", e))
    }

    /// The groups (sorted) with at least one partition node. Looks at one topic of
    /// every group at a time, with multi-reads: usually the first topic settles it.
    fn groups_with_offsets(&self) -> Result<Vec<String>, Fault> {
        let consumers = self.layout.consumers();
        let children = self.children(consumers)?.unwrap_or_default();
        let groups: Vec<String> = decode_names(consumers, children)
            .into_iter()
            .map(|(g, _)| g)
            .collect();
        let offsets: Vec<String> = groups.iter().map(|g| self.layout.offsets(g)).collect();
        let topic_lists = self.children_many(&offsets)?;
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
            let lists = self.children_many(&paths)?;
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

    fn delete_group(&self, group: &str) -> Result<u64, PluginError> {
        let what = format!("delete group `{group}`");
        let mut deleted = 0u64;
        let mut conflicts = 0;
        'plan: loop {
            let Some(chunks) = self.plan_delete(group).map_err(|e| self.err(&what, e))? else {
                return Ok(deleted);
            };
            for chunk in chunks {
                match self.multi(&chunk.ops, &what)? {
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
    fn plan_delete(&self, group: &str) -> Result<Option<Vec<Chunk>>, Fault> {
        let offsets = self.layout.offsets(group);
        let Some(topic_nodes) = self.children(&offsets)? else {
            return Ok(None);
        };
        let group_children = self
            .children(&self.layout.group(group))?
            .unwrap_or_default();
        let topic_paths: Vec<String> = topic_nodes
            .iter()
            .map(|node| format!("{offsets}/{node}"))
            .collect();
        let lists = self.children_many(&topic_paths)?;
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

    fn scan(
        &self,
        after: Option<&OffsetKey>,
        limit: usize,
    ) -> Result<Vec<OffsetRecord>, PluginError> {
        let mut cursor = after.cloned();
        loop {
            let keys = self
                .scan_keys(cursor.as_ref(), limit)
                .map_err(|e| self.err("scan offsets", e))?;
            let Some((g, t, p)) = keys.last() else {
                return Ok(Vec::new());
            };
            let last = OffsetKey {
                group: g.as_str().into(),
                topic: t.as_str().into(),
                partition: *p,
            };
            let records = self.read_records(
                keys.iter()
                    .map(|(g, t, p)| (g.as_str(), t.as_str(), *p))
                    .collect(),
            )?;
            if !records.is_empty() {
                return Ok(records);
            }
            // Every listed node was deleted before it was read: go on after them, so
            // an empty page still means the end.
            cursor = Some(last);
        }
    }

    /// Up to `limit` keys strictly after `after`, in key order, from the listings.
    fn scan_keys(
        &self,
        after: Option<&OffsetKey>,
        limit: usize,
    ) -> Result<Vec<(String, String, i32)>, Fault> {
        let mut keys = Vec::new();
        let consumers = self.layout.consumers();
        let groups = decode_names(consumers, self.children(consumers)?.unwrap_or_default());
        for (group, _) in groups {
            if after.is_some_and(|a| group.as_str() < a.group.as_str()) {
                continue;
            }
            let same_group = after.filter(|a| a.group.as_str() == group);
            let offsets = self.layout.offsets(&group);
            let Some(topics) = self.children(&offsets)? else {
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
                let lists = self.children_many(&paths)?;
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
