//! A deadline queue: at most one deadline per key, ordered by time then key, so the
//! coordinator's behaviour does not depend on hash order.

use std::collections::{BTreeMap, BTreeSet};

/// Deadlines by key.
#[derive(Debug)]
pub(crate) struct Timers<K: Ord + Clone> {
    queue: BTreeSet<(u64, K)>,
    by_key: BTreeMap<K, u64>,
}

impl<K: Ord + Clone> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            queue: BTreeSet::new(),
            by_key: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> Timers<K> {
    /// Sets (or replaces, or with `None` removes) the deadline of `key`.
    pub(crate) fn set(&mut self, key: K, at: Option<u64>) {
        if let Some(old) = self.by_key.remove(&key) {
            self.queue.remove(&(old, key.clone()));
        }
        if let Some(at) = at {
            self.by_key.insert(key.clone(), at);
            self.queue.insert((at, key));
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
