//! A deadline queue: at most one deadline per key, ordered by time, then by when the
//! deadline was set (earlier first), so the coordinator's behaviour depends on its
//! inputs only, never on hash order or on how keys compare.
//!
//! Costs, with n deadlines: [`Timers::set`] hashes its key once; setting a key to the
//! deadline it already has is that one lookup and no change to the queue; a moved
//! deadline is that lookup, a removal and an insertion in the ordered queue, O(log n)
//! comparisons of two integers; [`Timers::pop_due`] takes the queue's first entry and
//! one hash removal. The queue compares integers only: ordering by key compared the
//! group and member ids as strings, a pointer chase and a `memcmp` at every step, and
//! at 100,000 members most pings share their millisecond with about 100 others
//! (issue 19, docs/benchmarks.md "100,000 members on one coordinator core").

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Deadlines by key.
#[derive(Debug)]
pub(crate) struct Timers<K: Hash + Eq + Clone> {
    /// (deadline, sequence number) to key: the order deadlines fire in.
    queue: BTreeMap<(u64, u64), K>,
    /// Each key's entry in `queue`.
    by_key: HashMap<K, (u64, u64)>,
    /// The sequence number of the next deadline set.
    next_seq: u64,
}

impl<K: Hash + Eq + Clone> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            queue: BTreeMap::new(),
            by_key: HashMap::new(),
            next_seq: 0,
        }
    }
}

impl<K: Hash + Eq + Clone> Timers<K> {
    /// Sets (or replaces, or with `None` removes) the deadline of `key`. Setting the
    /// deadline a key already has changes nothing (it keeps its place among the
    /// deadlines of the same millisecond).
    pub(crate) fn set(&mut self, key: K, at: Option<u64>) {
        match at {
            // One hash of the key, whatever the case.
            Some(at) => {
                let seq = self.next_seq;
                match self.by_key.entry(key) {
                    Entry::Occupied(mut e) => {
                        if e.get().0 == at {
                            return;
                        }
                        let old = e.insert((at, seq));
                        let key = self.queue.remove(&old).unwrap_or_else(|| e.key().clone());
                        self.queue.insert((at, seq), key);
                    }
                    Entry::Vacant(e) => {
                        let key = e.key().clone();
                        e.insert((at, seq));
                        self.queue.insert((at, seq), key);
                    }
                }
                self.next_seq += 1;
            }
            None => {
                if let Some(old) = self.by_key.remove(&key) {
                    self.queue.remove(&old);
                    crate::shrink::map(&mut self.by_key);
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
        self.queue.first_key_value().map(|((at, _), _)| *at)
    }

    /// Removes and returns the key of the earliest deadline if it is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<K> {
        let ((at, _), _) = self.queue.first_key_value()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.queue.pop_first()?;
        self.by_key.remove(&key);
        crate::shrink::map(&mut self.by_key);
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
        t.set("a", Some(5));
        assert_eq!(t.next(), Some(5));
        assert_eq!(t.len(), 2);
        assert_eq!(t.pop_due(2), None);
        assert_eq!(t.pop_due(5), Some("b"));
        assert_eq!(t.pop_due(5), Some("a"));
        assert_eq!(t.pop_due(100), None);
        t.set("c", Some(1));
        t.set("c", None);
        assert_eq!(t.next(), None);
    }
}
