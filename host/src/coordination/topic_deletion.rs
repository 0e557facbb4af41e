//! Committed offsets die with their topic, as in Kafka (its group coordinator's
//! `onPartitionsDeleted`): when this broker's topic view loses a topic — deleted, or
//! deleted and re-created under the same name with a new topic id — the committed
//! offsets of its partitions are removed from the active offset store, for every group
//! the store holds, not only the groups the coordinator has in memory.
//!
//! - **Trigger**: the coordinator thread compares each topic-id list it forwards with
//!   the previous one ([`lost_topics`]). In cluster mode every broker learns topic
//!   changes from ZooKeeper, so a DeleteTopics made on another broker reaches this one
//!   the same way.
//! - **Order**: the sweep is an operation of the offset-store worker's queue
//!   (`StoreOp::DeleteTopics`), queued after the coordinator was told, so it runs after
//!   every commit the coordinator issued before (a commit in flight for the old topic is
//!   removed with the rest) and before every commit issued after (those name only topics
//!   that exist now).
//! - **Which groups**: standalone, all; in cluster mode only the groups of the slots this
//!   broker coordinates when the sweep runs ([`GroupOwner`]): their commits go through
//!   this broker's worker, so the per-group rewrite below cannot race with one. The
//!   broker that coordinates the other groups sweeps them on its own.
//! - **How**: pages through every offset ([`OffsetStores::scan`], as a swap copies),
//!   then deletes the doomed partitions group by group as OffsetDelete does (read the
//!   group, delete it, commit the others back). Through [`OffsetStores`], so during a
//!   swap both stores lose them.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use drover_abi::{coordinator::TopicId, OffsetKey, TopicPartitions};

use super::store_worker;
use crate::{cluster::Cluster, offsets::OffsetStores, plugins::CallError};

/// Offsets read per page while looking for the deleted topics' offsets.
const PAGE: u32 = 1_000;

/// The names of the topics in `before` that `after` no longer has under the same id:
/// deleted, or deleted and re-created (KIP-516 topic ids tell them apart).
pub fn lost_topics(
    before: &BTreeMap<String, [u8; 16]>,
    after: &BTreeMap<String, [u8; 16]>,
) -> BTreeSet<String> {
    before
        .iter()
        .filter(|(name, id)| after.get(*name) != Some(*id))
        .map(|(name, _)| name.clone())
        .collect()
}

/// A topic-id list as a map by name.
pub fn id_map(ids: &[TopicId]) -> BTreeMap<String, [u8; 16]> {
    ids.iter().map(|t| (t.name.to_string(), t.id)).collect()
}

/// Which groups' offsets a sweep may rewrite.
#[derive(Clone)]
pub enum GroupOwner {
    /// Standalone: every group.
    All,
    /// Cluster mode: the groups of the slots this broker owns when the sweep runs.
    Slots(Arc<Cluster>),
}

impl std::fmt::Debug for GroupOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupOwner::All => f.write_str("All"),
            GroupOwner::Slots(_) => f.write_str("Slots"),
        }
    }
}

impl GroupOwner {
    /// A predicate over group ids, fixed for one sweep.
    fn snapshot(&self) -> impl Fn(&str) -> bool {
        let slots = match self {
            GroupOwner::All => None,
            GroupOwner::Slots(cluster) => Some((
                cluster.settings.slots,
                cluster
                    .owned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
            )),
        };
        move |group: &str| match &slots {
            None => true,
            Some((count, owned)) => {
                owned.contains(&drover_protocol::coordinator_slot(group, *count))
            }
        }
    }
}

/// What a sweep removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Groups that had offsets of the topics.
    pub groups: usize,
    /// Committed offsets removed.
    pub offsets: u64,
}

/// Removes every committed offset of `topics` from `store`, for the groups `owner`
/// allows. A group whose rewrite fails is logged and skipped; a failed scan ends the
/// sweep with its error (nothing was removed then).
pub fn sweep(
    store: &OffsetStores,
    topics: &BTreeSet<String>,
    owner: &GroupOwner,
) -> Result<Swept, CallError> {
    let owns = owner.snapshot();
    let mut doomed: BTreeMap<String, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    let mut after: Option<OffsetKey> = None;
    loop {
        let page = store.scan(after.take(), PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.key());
        for r in &page {
            if topics.contains(r.topic.as_str()) && owns(&r.group) {
                doomed
                    .entry(r.group.to_string())
                    .or_default()
                    .entry(r.topic.to_string())
                    .or_default()
                    .push(r.partition);
            }
        }
    }
    let mut swept = Swept::default();
    for (group, by_topic) in doomed {
        let partitions: Vec<TopicPartitions> = by_topic
            .into_iter()
            .map(|(topic, partitions)| TopicPartitions {
                topic: topic.into(),
                partitions: partitions.into(),
            })
            .collect();
        match store_worker::delete(store, &group, &partitions) {
            Ok(n) => {
                swept.groups += 1;
                swept.offsets += n;
            }
            Err(e) => tracing::error!(
                %group,
                topics = ?topics,
                "removing the committed offsets of deleted topics failed: {e}; \
                 OffsetDelete can remove them"
            ),
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[(&str, u8)]) -> BTreeMap<String, [u8; 16]> {
        list.iter()
            .map(|(n, b)| (n.to_string(), [*b; 16]))
            .collect()
    }

    #[test]
    fn a_topic_deleted_or_recreated_with_a_new_id_is_lost() {
        let before = ids(&[("a", 1), ("b", 2), ("c", 3)]);
        let after = ids(&[("a", 1), ("c", 9), ("d", 4)]);
        let lost: Vec<String> = lost_topics(&before, &after).into_iter().collect();
        assert_eq!(lost, ["b", "c"]);
        assert!(lost_topics(&after, &after).is_empty());
    }
}
