//! Giving back the room a table grew to at a peak (issue 28 item 7).
//!
//! A `HashMap` keeps its capacity when entries are removed. After 2,000 classic-group
//! members had joined and left for 60 s, the coordinator's connection table and its
//! timer index still had room for the 2,000 (about 0.7 MB between them, with nothing in
//! them; docs/benchmarks.md, "Classic-group churn"). The tables that grow with members
//! and connections call [`map`] or [`set`] after removing: once a table is less than a
//! quarter full it is shrunk to twice its length, so a table that fills and empties
//! again costs O(its peak) copies per cycle, as its growth did.

use std::{
    collections::{HashMap, HashSet},
    hash::{BuildHasher, Hash},
};

/// Tables this small are left as they are (entries).
const KEEP_CAPACITY: usize = 64;

/// Shrinks `map` if it is less than a quarter full (module docs).
pub(crate) fn map<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if map.capacity() > KEEP_CAPACITY && map.len() < map.capacity() / 4 {
        map.shrink_to(map.len() * 2);
    }
}

/// Shrinks `set` if it is less than a quarter full (module docs).
pub(crate) fn set<K: Eq + Hash, S: BuildHasher>(set: &mut HashSet<K, S>) {
    if set.capacity() > KEEP_CAPACITY && set.len() < set.capacity() / 4 {
        set.shrink_to(set.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_emptied_after_a_peak_gives_its_room_back() {
        let mut m: HashMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let peak = m.capacity();
        for i in 0..10_000 {
            m.remove(&i);
            map(&mut m);
        }
        assert!(
            m.capacity() <= KEEP_CAPACITY * 2,
            "{} of {peak}",
            m.capacity()
        );
        let mut s: HashSet<u32> = (0..10_000).collect();
        for i in 0..9_990 {
            s.remove(&i);
            set(&mut s);
        }
        assert_eq!(s.len(), 10);
        assert!(s.capacity() <= KEEP_CAPACITY * 2, "{}", s.capacity());
    }

    #[test]
    fn a_full_table_is_left_alone() {
        let mut m: HashMap<u32, u32> = (0..1_000).map(|i| (i, i)).collect();
        m.remove(&0);
        // Measured after the removal: a removal that leaves a tombstone lowers the
        // reported capacity by one (hashbrown's `capacity` is items + growth left), and
        // whether it does depends on the random hasher.
        let cap = m.capacity();
        map(&mut m);
        assert_eq!(m.capacity(), cap);
    }
}
