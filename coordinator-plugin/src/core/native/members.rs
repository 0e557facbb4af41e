//! A native group's members: found by consumer id in one hash lookup, listed in
//! consumer-id order.
//!
//! Every ping and every answer finds its member by id. In a `BTreeMap` of 100,000
//! members that was about 17 string comparisons, each a pointer chase to a key's bytes
//! far from the last one; here it is one hash and, as a rule, one comparison of two
//! clones of the same `Arc` (issue 19, docs/benchmarks.md "100,000 members on one
//! coordinator core"). The ordered id set is touched only when members come and go and
//! when a rebalance lists them, so everything the group decides still follows
//! consumer-id order, never hash order.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

use super::group::Member;
use crate::types::ConsumerId;

/// The members of one native group, by consumer id.
#[derive(Debug, Default)]
pub(crate) struct Members {
    by_id: HashMap<ConsumerId, Member>,
    /// The same ids, in order.
    order: BTreeSet<ConsumerId>,
}

impl Members {
    /// The member with this id.
    pub(crate) fn get<Q>(&self, id: &Q) -> Option<&Member>
    where
        ConsumerId: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_id.get(id)
    }

    /// The member with this id, to change.
    pub(crate) fn get_mut(&mut self, id: &ConsumerId) -> Option<&mut Member> {
        self.by_id.get_mut(id)
    }

    /// Whether a member has this id.
    pub(crate) fn contains_key<Q>(&self, id: &Q) -> bool
    where
        ConsumerId: Borrow<Q>,
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
    pub(crate) fn insert(&mut self, id: ConsumerId, member: Member) -> Option<Member> {
        let old = self.by_id.insert(id.clone(), member);
        if old.is_none() {
            self.order.insert(id);
        }
        old
    }

    /// Removes the member with this id.
    pub(crate) fn remove(&mut self, id: &ConsumerId) -> Option<Member> {
        let member = self.by_id.remove(id)?;
        self.order.remove(id);
        Some(member)
    }

    /// The consumer ids, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &ConsumerId> + '_ {
        self.order.iter()
    }

    /// The members with their ids, in consumer-id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ConsumerId, &Member)> + '_ {
        self.order.iter().map(|id| (id, &self.by_id[id]))
    }

    /// The members, in consumer-id order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Member> + '_ {
        self.order.iter().map(|id| &self.by_id[id])
    }

    /// The members to change, in no set order: for changes that do not depend on each
    /// other or on their order.
    pub(crate) fn values_mut_unordered(&mut self) -> impl Iterator<Item = &mut Member> + '_ {
        self.by_id.values_mut()
    }
}

impl std::ops::Index<&ConsumerId> for Members {
    type Output = Member;

    /// The member with this id; panics when there is none (tests).
    fn index(&self, id: &ConsumerId) -> &Member {
        &self.by_id[id]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::native::group::test_member;

    #[test]
    fn lists_in_id_order_and_keeps_both_views_together() {
        let mut members = Members::default();
        for id in ["c", "a", "b"] {
            assert!(members
                .insert(ConsumerId::new(id), test_member(id))
                .is_none());
        }
        assert!(members
            .insert(ConsumerId::new("a"), test_member("a"))
            .is_some());
        let ids: Vec<&str> = members.keys().map(|k| k.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(members.len(), 3);
        assert!(members.remove(&ConsumerId::new("b")).is_some());
        assert!(members.remove(&ConsumerId::new("b")).is_none());
        let ids: Vec<&str> = members.values().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert!(members.contains_key(&ConsumerId::new("c")));
        assert_eq!(members[&ConsumerId::new("c")].id.as_str(), "c");
    }
}
