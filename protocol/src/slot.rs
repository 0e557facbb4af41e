//! Which coordinator slot a group belongs to, in cluster mode (docs/design.md, "Cluster
//! mode"): `slot = fnv1a32(group id as UTF-8) mod slot_count`. The broker answering
//! FindCoordinator and the coordinator deciding whether it owns a group must agree, so
//! both use this function; other implementations of either side must use the same
//! hash (docs/protocol.md §4).

/// FNV-1a, 32 bits, over `bytes`.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in bytes {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The slot of `group` among `slot_count` slots (`slot_count` ≥ 1; 0 is treated as 1).
pub fn coordinator_slot(group: &str, slot_count: u32) -> u32 {
    fnv1a32(group.as_bytes()) % slot_count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // FNV-1a reference values.
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
        assert_eq!(coordinator_slot("anything", 1), 0);
        assert!(coordinator_slot("billing", 16) < 16);
    }
}
