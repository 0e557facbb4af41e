//! The on-disk layout: one redb table, `offsets`, keyed by `(group, topic, partition)`.
//!
//! The key is redb's native tuple key `(&str, &str, i32)`. redb compares tuple keys
//! element by element with each element's own order: strings by their UTF-8 bytes (the
//! same order as `str`/`RString`, hence as [`OffsetKey`]'s derived `Ord`), the partition
//! as a signed integer. So the table's order *is* the ABI's key order and
//! [`OffsetStore::scan`](drover_abi::offset_store::OffsetStore::scan) is a range query.
//! The tuple encoding length-prefixes the strings, so no group or topic name (NUL bytes
//! included) can bleed into the next field.
//!
//! The value is `(offset: i64, commit_time_ms: i64, metadata: &str)`. A second table,
//! `share_state`, keeps share-partition states under the same key (offset-store ABI 3.2).

use std::ops::Bound;

use drover_abi::{OffsetKey, OffsetRecord};
use redb::TableDefinition;

/// A stored key: group, topic, partition.
pub type Key<'a> = (&'a str, &'a str, i32);
/// A stored value: offset, commit time (ms since the epoch), metadata.
pub type Val<'a> = (i64, i64, &'a str);

/// The one table of an embedded store.
pub const OFFSETS: TableDefinition<'static, Key<'static>, Val<'static>> =
    TableDefinition::new("offsets");

/// Share-group state (offset-store ABI 3.2): the same key, the value
/// `drover_offsets_common::share_codec`'s bytes.
pub const SHARE_STATE: TableDefinition<'static, Key<'static>, &'static [u8]> =
    TableDefinition::new("share_state");

/// The smallest key of `group`: every key of the group is `>=` it.
pub fn group_start(group: &str) -> Key<'_> {
    (group, "", i32::MIN)
}

/// The key range holding every offset of `group`, and nothing else.
///
/// `group + "\0"` is the smallest string greater than `group`, so every key of a later
/// group is `>=` `(group + "\0", "", i32::MIN)`. The caller owns the successor string.
pub fn group_range<'a>(group: &'a str, successor: &'a str) -> (Bound<Key<'a>>, Bound<Key<'a>>) {
    (
        Bound::Included(group_start(group)),
        Bound::Excluded(group_start(successor)),
    )
}

/// The smallest string greater than `s` in byte order.
pub fn successor(s: &str) -> String {
    let mut next = String::with_capacity(s.len() + 1);
    next.push_str(s);
    next.push('\0');
    next
}

/// The stored key of an ABI key.
pub fn key_of(key: &OffsetKey) -> Key<'_> {
    (key.group.as_str(), key.topic.as_str(), key.partition)
}

/// The stored key and value of a record.
pub fn encode(record: &OffsetRecord) -> (Key<'_>, Val<'_>) {
    (
        (
            record.group.as_str(),
            record.topic.as_str(),
            record.partition,
        ),
        (
            record.offset,
            record.commit_time_ms,
            record.metadata.as_str(),
        ),
    )
}

/// Rebuilds a record from a stored key and value.
pub fn decode(key: Key<'_>, value: Val<'_>) -> OffsetRecord {
    let (group, topic, partition) = key;
    let (offset, commit_time_ms, metadata) = value;
    OffsetRecord {
        group: group.into(),
        topic: topic.into(),
        partition,
        offset,
        metadata: metadata.into(),
        commit_time_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_is_the_next_string() {
        assert!(successor("g").as_str() > "g");
        assert!(successor("g").as_str() < "g\u{1}");
        assert!(successor("g").as_str() < "ga");
        assert!(successor("").as_str() > "");
    }

    #[test]
    fn encode_decode_round_trip() {
        let r = OffsetRecord {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
            offset: 42,
            metadata: "m".into(),
            commit_time_ms: 1_700_000_000_000,
        };
        let (k, v) = encode(&r);
        assert_eq!(decode(k, v), r);
        assert_eq!(key_of(&r.key()), k);
    }
}
