//! Values found by id in one hash lookup and listed in id order: the coordinator's
//! groups, and the members of each native and KIP-848 group.
//!
//! Every ping, Heartbeat answer and ConsumerGroupHeartbeat finds its group and its
//! member by id. In a `BTreeMap` of 100,000
//! members that was about 17 string comparisons, each a pointer chase to a key's bytes
//! far from the last one; here it is one hash and, as a rule, one comparison of two
//! clones of the same `Arc` (issue 19, docs/benchmarks.md "100,000 members on one
//! coordinator core"). The ordered id set is touched only when members come and go and
//! when a rebalance lists them, so everything the coordinator decides still follows
//! id order, never hash order.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

/// Values (`V`: groups, members) by id (`K`).
#[derive(Debug)]
pub(crate) struct IdMap<K, V> {
    by_id: HashMap<K, V>,
    /// The same ids, in order.
    order: BTreeSet<K>,
}

impl<K, V> Default for IdMap<K, V> {
    fn default() -> Self {
        IdMap {
            by_id: HashMap::new(),
            order: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Hash + Clone, V> IdMap<K, V> {
    /// The member with this id.
    pub(crate) fn get<Q>(&self, id: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_id.get(id)
    }

    /// The stored id equal to `id`, with its value: a caller holding a borrowed id gets
    /// a clone of the stored one (for `Arc`-backed ids, no allocation).
    pub(crate) fn get_key_value<Q>(&self, id: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_id.get_key_value(id)
    }

    /// The member with this id, to change.
    pub(crate) fn get_mut<Q>(&mut self, id: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_id.get_mut(id)
    }

    /// Whether a member has this id.
    pub(crate) fn contains_key<Q>(&self, id: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_id.contains_key(id)
    }

    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether the group has no member.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Adds a member, or replaces the one with the same id (returned).
    pub(crate) fn insert(&mut self, id: K, member: V) -> Option<V> {
        let old = self.by_id.insert(id.clone(), member);
        if old.is_none() {
            self.order.insert(id);
        }
        old
    }

    /// Removes the member with this id.
    pub(crate) fn remove<Q>(&mut self, id: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        let member = self.by_id.remove(id)?;
        self.order.remove(id);
        crate::shrink::map(&mut self.by_id);
        Some(member)
    }

    /// The consumer ids, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.order.iter()
    }

    /// The members with their ids, in consumer-id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.order.iter().map(|id| (id, &self.by_id[id]))
    }

    /// The members, in consumer-id order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.order.iter().map(|id| &self.by_id[id])
    }

    /// The values to change, in id order (sorted at each call: O(n log n), for the
    /// paths that visit every group, never per request).
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        let mut all: Vec<(&K, &mut V)> = self.by_id.iter_mut().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, v)| v)
    }

    /// The values to change, in no set order: for changes that do not depend on each
    /// other or on their order.
    pub(crate) fn values_mut_unordered(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.by_id.values_mut()
    }
}

impl<K, V, Q> std::ops::Index<&Q> for IdMap<K, V>
where
    K: Ord + Hash + Clone + Borrow<Q>,
    Q: Hash + Eq + ?Sized,
{
    type Output = V;

    /// The member with this id; panics when there is none (tests).
    fn index(&self, id: &Q) -> &V {
        &self.by_id[id]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ConsumerId;

    #[test]
    fn lists_in_id_order_and_keeps_both_views_together() {
        let mut members: IdMap<ConsumerId, u32> = IdMap::default();
        for (id, v) in [("c", 3), ("a", 1), ("b", 2)] {
            assert!(members.insert(ConsumerId::new(id), v).is_none());
        }
        assert_eq!(members.insert(ConsumerId::new("a"), 10), Some(1));
        let ids: Vec<&str> = members.keys().map(|k| k.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(members.len(), 3);
        assert_eq!(members.remove("b"), Some(2));
        assert_eq!(members.remove("b"), None);
        assert_eq!(members.values().copied().collect::<Vec<_>>(), [10, 3]);
        assert!(members.contains_key("c"));
        assert_eq!(members["c"], 3);
        for v in members.values_mut_unordered() {
            *v += 1;
        }
        assert_eq!(members.get("a"), Some(&11));
        let mut seen = Vec::new();
        for v in members.values_mut() {
            seen.push(*v);
        }
        assert_eq!(seen, [11, 4]);
    }
}
