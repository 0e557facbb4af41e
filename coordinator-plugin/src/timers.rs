//! A deadline queue: at most one deadline per key, ordered by time then key, so the
//! coordinator's behaviour does not depend on hash order.
//!
//! Costs, with n deadlines: [`Timers::set`] hashes its key once; setting a key to the
//! deadline it already has is that one lookup and no change to the queue; a moved
//! deadline is that lookup, a removal and an insertion in the ordered queue, O(log n)
//! key comparisons; [`Timers::pop_due`] takes the queue's first entry and one hash
//! removal (issue 19, docs/benchmarks.md "100,000 members on one coordinator core").

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

/// Deadlines by key.
#[derive(Debug)]
pub(crate) struct Timers<K: Ord + Hash + Clone> {
    /// (deadline, key): the order deadlines fire in.
    queue: BTreeSet<(u64, K)>,
    /// Each key's deadline (its entry in `queue`).
    by_key: HashMap<K, u64>,
}

impl<K: Ord + Hash + Clone> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            queue: BTreeSet::new(),
            by_key: HashMap::new(),
        }
    }
}

impl<K: Ord + Hash + Clone> Timers<K> {
    /// Sets (or replaces, or with `None` removes) the deadline of `key`. Setting the
    /// deadline a key already has changes nothing.
    pub(crate) fn set(&mut self, key: K, at: Option<u64>) {
        match at {
            // One hash of the key, whatever the case.
            Some(at) => match self.by_key.entry(key) {
                Entry::Occupied(mut e) => {
                    if *e.get() == at {
                        return;
                    }
                    let old = e.insert(at);
                    let key = e.key().clone();
                    self.queue.remove(&(old, key.clone()));
                    self.queue.insert((at, key));
                }
                Entry::Vacant(e) => {
                    let key = e.key().clone();
                    e.insert(at);
                    self.queue.insert((at, key));
                }
            },
            None => {
                if let Some(old) = self.by_key.remove(&key) {
                    self.queue.remove(&(old, key));
                }
            }
        }
    }

    /// Whether `key` has a deadline.
    pub(crate) fn is_set(&self, key: &K) -> bool {
        self.by_key.contains_key(key)
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<u64> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Removes and returns the key of the earliest deadline if it is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<K> {
        let (at, _) = self.queue.first()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.queue.pop_first()?;
        self.by_key.remove(&key);
        Some(key)
    }

    /// Number of deadlines.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_remove_and_pop_in_order() {
        let mut t: Timers<&str> = Timers::default();
        t.set("a", Some(10));
        t.set("b", Some(5));
        t.set("a", Some(3));
        assert_eq!(t.next(), Some(3));
        assert_eq!(t.len(), 2);
        assert_eq!(t.pop_due(2), None);
        assert_eq!(t.pop_due(5), Some("a"));
        assert_eq!(t.pop_due(5), Some("b"));
        assert_eq!(t.pop_due(100), None);
        t.set("c", Some(1));
        t.set("c", None);
        assert_eq!(t.next(), None);
    }
}
