//! Share-group state in ZooKeeper (offset-store ABI 3.2), beside the offsets:
//!
//! ```text
//! <chroot>/share_state/<group>/<topic>/<partition>
//! ```
//!
//! names escaped as the offsets' ([`layout::encode_name`]), each partition node holding
//! `drover_offsets_common::share_codec`'s bytes. A write creates the parent nodes it
//! needs, then sets or creates the partition nodes in one multi-operation (re-planned
//! when a concurrent writer created or deleted one), so a batch that fits in
//! `max_multi_bytes` is written all together; a larger batch (a swap's copy) is written
//! in several multis. Deleting a whole group removes its nodes, topic and group nodes
//! too.

use drover_abi::{OffsetKey, PluginError, ShareStateRecord, TopicPartitions};
use drover_offsets_common::share_codec;

use super::{
    decode_names, decode_partitions, pack, Inner, Op, Store, Unit, MAX_CONFLICTS, OP_OVERHEAD,
};
use crate::{backend::MultiOutcome, layout};

const NAME: &str = "zookeeper";

impl Inner {
    fn share_root(&self) -> String {
        let consumers = self.layout.consumers();
        let chroot = consumers
            .strip_suffix(&format!("/{}", layout::CONSUMERS))
            .unwrap_or("");
        format!("{chroot}/share_state")
    }

    fn share_group(&self, group: &str) -> String {
        format!("{}/{}", self.share_root(), layout::encode_name(group))
    }

    fn share_topic(&self, group: &str, topic: &str) -> String {
        format!("{}/{}", self.share_group(group), layout::encode_name(topic))
    }

    fn share_node(&self, group: &str, topic: &str, partition: i32) -> String {
        format!("{}/{partition}", self.share_topic(group, topic))
    }

    fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), PluginError> {
        let mut latest = std::collections::BTreeMap::new();
        for r in batch {
            share_codec::validate(r, NAME)?;
            let path = self.share_node(&r.group, &r.topic, r.partition);
            let value = share_codec::encode(r);
            if path.len() + value.len() + OP_OVERHEAD > self.config.max_multi_bytes {
                return Err(PluginError::invalid_input(format!(
                    "offset store `zookeeper`: the share state of `{}` {}-{} needs more than max_multi_bytes = {}",
                    r.group, r.topic, r.partition, self.config.max_multi_bytes
                )));
            }
            latest.insert(path, (r.group.as_str(), r.topic.as_str(), value));
        }
        let mut dirs: Vec<String> = latest
            .values()
            .map(|(g, t, _)| self.share_topic(g, t))
            .collect();
        dirs.dedup();
        for dir in dirs {
            self.backend
                .mkdir(&dir)
                .map_err(|e| self.err("write share state", e))?;
        }
        let paths: Vec<String> = latest.keys().cloned().collect();
        for _ in 0..=MAX_CONFLICTS {
            let found = self
                .get_many(&paths)
                .map_err(|e| self.err("write share state", e))?;
            let units: Vec<Unit> = latest
                .iter()
                .zip(found)
                .map(|((path, (_, _, value)), found)| {
                    let op = if found.is_some() {
                        Op::Set(path.clone(), value.clone())
                    } else {
                        Op::Create(path.clone(), value.clone())
                    };
                    let mut unit = Unit::default();
                    unit.push(op, true);
                    unit
                })
                .collect();
            let mut conflict = false;
            for chunk in pack(units, self.config.max_multi_bytes) {
                if let MultiOutcome::Conflict(..) = self.multi(&chunk.ops, "write share state")? {
                    conflict = true;
                    break;
                }
            }
            if !conflict {
                return Ok(());
            }
        }
        Err(PluginError::unavailable(
            "offset store `zookeeper`: write share state: too many concurrent changes; retry",
        ))
    }

    fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let keys: Vec<(String, i32)> = partitions
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .filter(|p| **p >= 0)
                    .map(move |&p| (tp.topic.to_string(), p))
            })
            .collect();
        self.read_share_keys(group, &keys)
    }

    fn read_share_keys(
        &self,
        group: &str,
        keys: &[(String, i32)],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let paths: Vec<String> = keys
            .iter()
            .map(|(t, p)| self.share_node(group, t, *p))
            .collect();
        let found = self
            .get_many(&paths)
            .map_err(|e| self.err("read share state", e))?;
        let mut out = Vec::new();
        for ((topic, partition), found) in keys.iter().zip(found) {
            let Some((data, _)) = found else { continue };
            out.push(
                share_codec::decode(group, topic, *partition, &data)
                    .ok_or_else(|| share_codec::damaged(NAME, group, topic, *partition))?,
            );
        }
        Ok(out)
    }

    /// The (topic, partition) of every share state of `group`, in key order.
    fn share_keys(&self, group: &str) -> Result<Vec<(String, i32)>, PluginError> {
        let what = "list share state";
        let dir = self.share_group(group);
        let Some(children) = self.children(&dir).map_err(|e| self.err(what, e))? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (topic, _) in decode_names(&dir, children) {
            let path = self.share_topic(group, &topic);
            let partitions = self
                .children(&path)
                .map_err(|e| self.err(what, e))?
                .map(|c| decode_partitions(&path, c))
                .unwrap_or_default();
            out.extend(partitions.into_iter().map(|p| (topic.clone(), p)));
        }
        Ok(out)
    }

    fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        for _ in 0..=MAX_CONFLICTS {
            let whole = partitions.is_empty();
            let keys: Vec<(String, i32)> = if whole {
                self.share_keys(group)?
            } else {
                partitions
                    .iter()
                    .flat_map(|tp| {
                        tp.partitions
                            .iter()
                            .map(move |&p| (tp.topic.to_string(), p))
                    })
                    .collect()
            };
            let paths: Vec<String> = keys
                .iter()
                .map(|(t, p)| self.share_node(group, t, *p))
                .collect();
            let found = self
                .get_many(&paths)
                .map_err(|e| self.err("delete share state", e))?;
            let mut ops: Vec<Op> = paths
                .into_iter()
                .zip(found)
                .filter(|(_, f)| f.is_some())
                .map(|(p, _)| Op::Delete(p))
                .collect();
            let deleted = ops.len() as u64;
            if whole {
                let mut topics: Vec<&String> = keys.iter().map(|(t, _)| t).collect();
                topics.dedup();
                ops.extend(
                    topics
                        .into_iter()
                        .map(|t| Op::Delete(self.share_topic(group, t))),
                );
                if self
                    .children(&self.share_group(group))
                    .map_err(|e| self.err("delete share state", e))?
                    .is_some()
                {
                    ops.push(Op::Delete(self.share_group(group)));
                }
            }
            if ops.is_empty() {
                return Ok(0);
            }
            match self.multi(&ops, "delete share state")? {
                MultiOutcome::Done => return Ok(deleted),
                MultiOutcome::Conflict(..) => continue,
            }
        }
        Err(PluginError::unavailable(
            "offset store `zookeeper`: delete share state: too many concurrent changes; retry",
        ))
    }

    fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: usize,
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let root = self.share_root();
        let groups = match self
            .children(&root)
            .map_err(|e| self.err("scan share state", e))?
        {
            Some(children) => decode_names(&root, children),
            None => Vec::new(),
        };
        let mut out = Vec::new();
        for (group, _) in groups {
            if after.is_some_and(|a| group.as_str() < a.group.as_str()) {
                continue;
            }
            let keys: Vec<(String, i32)> = self
                .share_keys(&group)?
                .into_iter()
                .filter(|(t, p)| {
                    after.is_none_or(|a| {
                        (group.as_str(), t.as_str(), *p)
                            > (a.group.as_str(), a.topic.as_str(), a.partition)
                    })
                })
                .take(limit - out.len())
                .collect();
            out.extend(self.read_share_keys(&group, &keys)?);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }
}

impl Store {
    /// Writes share-partition states (module docs).
    pub fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), PluginError> {
        self.with(|inner| {
            if batch.is_empty() {
                return Ok(());
            }
            inner.write_share_state(batch)
        })
    }

    /// `group`'s share-partition states of `partitions`; absent ones are left out.
    pub fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        self.with(|inner| inner.read_share_state(group, partitions))
    }

    /// Deletes `group`'s share-partition states of `partitions` (all when empty).
    pub fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        self.with(|inner| inner.delete_share_state(group, partitions))
    }

    /// Up to `limit` share-partition states strictly after `after`, in key order.
    pub fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        self.with(|inner| {
            if limit == 0 {
                return Err(PluginError::invalid_input(
                    "offset store `zookeeper`: share-state scan with limit 0",
                ));
            }
            inner.scan_share_state(after, usize::try_from(limit).unwrap_or(usize::MAX))
        })
    }
}
