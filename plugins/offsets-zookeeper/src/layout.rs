//! The ZooKeeper layout: node paths, how names are escaped into them, and the node value.
//!
//! # Paths
//!
//! The layout of the original design (and of Kafka's ZooKeeper offset storage):
//!
//! ```text
//! <chroot>/consumers/<group>/offsets/<topic>/<partition>
//! ```
//!
//! `<partition>` is the partition index in decimal (`0`, `1`, ... no leading zeros).
//! `<group>` and `<topic>` are the names, escaped so that any string is a valid and
//! distinct node name ([`encode_name`]): bytes outside ASCII `!`..`~`, and `/` and `%`,
//! are written `%XX` (upper-case hex of each UTF-8 byte); the names `.` and `..` are
//! written `%2E` and `%2E%2E`; the empty name is written `%`. Kafka topic names
//! (`[a-zA-Z0-9._-]`) and ordinary group ids are therefore written as they are, as in
//! Kafka's layout. Nodes whose names do not decode (not written by this store) are
//! ignored.
//!
//! ZooKeeper returns children unordered, so listings are decoded and sorted by the
//! decoded names (byte order, the ABI's key order) and partitions numerically.
//!
//! # Value
//!
//! A partition node holds a UTF-8 JSON object, for example
//!
//! ```json
//! {"version":1,"offset":42,"metadata":"host-a","commit_time_ms":1700000000000}
//! ```
//!
//! `version` is 1; `offset` and `commit_time_ms` (ms since the Unix epoch) are JSON
//! integers holding any `i64`; `metadata` is the commit metadata as a JSON string. On
//! read, fields other than these are ignored, and a value that is a plain decimal number
//! (Kafka 0.8's ZooKeeper offset storage) reads as that offset, with empty metadata and
//! the node's modification time as commit time, so offsets written by old Kafka
//! consumers can be read and migrated.

use drover_abi::{OffsetKey, OffsetRecord};
use serde::{Deserialize, Serialize};

/// The child of the chroot that holds every group.
pub const CONSUMERS: &str = "consumers";
/// The child of a group node that holds its offsets.
pub const OFFSETS: &str = "offsets";
/// The value version written.
pub const VALUE_VERSION: i64 = 1;

/// Whether ZooKeeper refuses character `c` in a path (its `PathUtils.validatePath`).
pub fn is_forbidden_in_path(c: char) -> bool {
    let u = u32::from(c);
    [
        0x0000..=0x001f,
        0x007f..=0x009f,
        0xd800..=0xf8ff,
        0xfff0..=0xffff,
    ]
    .into_iter()
    .any(|r| r.contains(&u))
}

/// Whether byte `b` is written as it is in a node name.
fn is_plain(b: u8) -> bool {
    b.is_ascii_graphic() && b != b'/' && b != b'%'
}

/// The node name of `name` (see the module docs).
pub fn encode_name(name: &str) -> String {
    match name {
        "" => return "%".to_owned(),
        "." => return "%2E".to_owned(),
        ".." => return "%2E%2E".to_owned(),
        _ => {}
    }
    let mut out = String::with_capacity(name.len());
    for &b in name.as_bytes() {
        if is_plain(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The name a node name stands for; `None` for a node name [`encode_name`] never makes.
pub fn decode_name(node: &str) -> Option<String> {
    if node == "%" {
        return Some(String::new());
    }
    let bytes = node.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = node.get(i + 1..i + 3)?;
            if hex.bytes().any(|h| h.is_ascii_lowercase()) {
                return None;
            }
            let v = u8::from_str_radix(hex, 16).ok()?;
            if is_plain(v) && v != b'.' {
                return None; // never escaped: not canonical
            }
            out.push(v);
            i += 3;
        } else if is_plain(b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    let name = String::from_utf8(out).ok()?;
    // Only `.` and `..` themselves have escaped dots.
    (encode_name(&name) == node).then_some(name)
}

/// The partition a node name stands for: canonical non-negative decimal only.
pub fn decode_partition(node: &str) -> Option<i32> {
    let p: i32 = node.parse().ok()?;
    (p >= 0 && p.to_string() == node).then_some(p)
}

/// The paths of one store, below its chroot.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `<chroot>/consumers`.
    consumers: String,
}

impl Layout {
    /// The layout below `chroot` (as normalized by [`crate::config::Config`]).
    pub fn new(chroot: &str) -> Layout {
        let base = chroot.trim_end_matches('/');
        Layout {
            consumers: format!("{base}/{CONSUMERS}"),
        }
    }

    /// `<chroot>/consumers`: the parent of every group.
    pub fn consumers(&self) -> &str {
        &self.consumers
    }

    /// `<chroot>/consumers/<group>`.
    pub fn group(&self, group: &str) -> String {
        format!("{}/{}", self.consumers, encode_name(group))
    }

    /// `<chroot>/consumers/<group>/offsets`.
    pub fn offsets(&self, group: &str) -> String {
        format!("{}/{OFFSETS}", self.group(group))
    }

    /// `<chroot>/consumers/<group>/offsets/<topic>`.
    pub fn topic(&self, group: &str, topic: &str) -> String {
        format!("{}/{}", self.offsets(group), encode_name(topic))
    }

    /// `<chroot>/consumers/<group>/offsets/<topic>/<partition>`.
    pub fn partition(&self, group: &str, topic: &str, partition: i32) -> String {
        format!("{}/{partition}", self.topic(group, topic))
    }

    /// The node of `key`.
    pub fn key(&self, key: &OffsetKey) -> String {
        self.partition(&key.group, &key.topic, key.partition)
    }
}

#[derive(Serialize)]
struct ValueOut<'a> {
    version: i64,
    offset: i64,
    metadata: &'a str,
    commit_time_ms: i64,
}

#[derive(Deserialize)]
struct ValueIn {
    version: i64,
    offset: i64,
    #[serde(default)]
    metadata: String,
    commit_time_ms: Option<i64>,
}

/// The node value of `record` (see the module docs).
pub fn encode_value(record: &OffsetRecord) -> Vec<u8> {
    serde_json::to_vec(&ValueOut {
        version: VALUE_VERSION,
        offset: record.offset,
        metadata: &record.metadata,
        commit_time_ms: record.commit_time_ms,
    })
    .expect("a struct of integers and a string always serializes")
}

/// A decoded node value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The committed offset.
    pub offset: i64,
    /// The commit metadata.
    pub metadata: String,
    /// The commit time, ms since the Unix epoch.
    pub commit_time_ms: i64,
}

/// Decodes a node value; `mtime_ms` (the node's modification time) stands in for a
/// missing commit time. The error says what is wrong, for a message naming the node.
pub fn decode_value(data: &[u8], mtime_ms: i64) -> Result<Value, String> {
    let text = std::str::from_utf8(data).map_err(|_| "the value is not UTF-8".to_owned())?;
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let offset = trimmed
            .parse()
            .map_err(|_| format!("offset {trimmed} is out of range"))?;
        return Ok(Value {
            offset,
            metadata: String::new(),
            commit_time_ms: mtime_ms,
        });
    }
    let value: ValueIn = serde_json::from_str(text)
        .map_err(|e| format!("the value is not an offset object ({e})"))?;
    if value.version != VALUE_VERSION {
        return Err(format!(
            "value version {} is not supported (this store reads version {VALUE_VERSION}; \
             written by a newer Drover?)",
            value.version
        ));
    }
    Ok(Value {
        offset: value.offset,
        metadata: value.metadata,
        commit_time_ms: value.commit_time_ms.unwrap_or(mtime_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_kept() {
        for name in [
            "orders",
            "my-group_1.v2",
            "a:b@c",
            "__consumer_offsets",
            ".x",
            "x.",
        ] {
            assert_eq!(encode_name(name), name);
            assert_eq!(decode_name(name).as_deref(), Some(name));
        }
    }

    #[test]
    fn escaped_names_round_trip() {
        for name in [
            "",
            ".",
            "..",
            "...",
            "a/b",
            "50%",
            "%",
            "%25",
            "with space",
            "ünïcødé",
            "\0",
            "\u{1}x",
            "tab\there",
            "\u{FFFF}",
            "/",
            "../..",
        ] {
            let node = encode_name(name);
            assert!(
                !node.is_empty() && node != "." && node != ".." && !node.contains('/'),
                "{name:?} -> {node:?}"
            );
            assert!(
                !node.chars().any(is_forbidden_in_path),
                "{name:?} -> {node:?}"
            );
            assert_eq!(decode_name(&node).as_deref(), Some(name), "{node:?}");
        }
        assert_eq!(encode_name("a/b"), "a%2Fb");
        assert_eq!(encode_name("ü"), "%C3%BC");
    }

    #[test]
    fn foreign_node_names_do_not_decode() {
        for node in ["%2", "%zz", "%41", "%2f", "a%2Eb", "%FF", "é"] {
            assert_eq!(decode_name(node), None, "{node:?}");
        }
    }

    #[test]
    fn partitions() {
        assert_eq!(decode_partition("0"), Some(0));
        assert_eq!(decode_partition("2147483647"), Some(i32::MAX));
        for node in ["-1", "01", "+1", "x", "", "2147483648"] {
            assert_eq!(decode_partition(node), None, "{node:?}");
        }
    }

    #[test]
    fn paths() {
        let l = Layout::new("/drover");
        assert_eq!(l.consumers(), "/drover/consumers");
        assert_eq!(
            l.partition("g", "a/b", 3),
            "/drover/consumers/g/offsets/a%2Fb/3"
        );
        assert_eq!(Layout::new("/").group(""), "/consumers/%");
    }

    #[test]
    fn values_round_trip() {
        let r = OffsetRecord {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            offset: i64::MIN,
            metadata: "quote \" backslash \\ nul \0 ünï".into(),
            commit_time_ms: i64::MAX,
        };
        let data = encode_value(&r);
        let v = decode_value(&data, 5).unwrap();
        assert_eq!(v.offset, r.offset);
        assert_eq!(v.metadata, r.metadata.as_str());
        assert_eq!(v.commit_time_ms, r.commit_time_ms);
        assert_eq!(
            std::str::from_utf8(&encode_value(&OffsetRecord {
                metadata: "m".into(),
                offset: 42,
                commit_time_ms: 1_700_000_000_000,
                ..r
            }))
            .unwrap(),
            r#"{"version":1,"offset":42,"metadata":"m","commit_time_ms":1700000000000}"#
        );
    }

    #[test]
    fn legacy_and_bad_values() {
        assert_eq!(
            decode_value(b"1234", 99).unwrap(),
            Value {
                offset: 1234,
                metadata: String::new(),
                commit_time_ms: 99
            }
        );
        assert_eq!(
            decode_value(br#"{"version":1,"offset":7}"#, 3).unwrap(),
            Value {
                offset: 7,
                metadata: String::new(),
                commit_time_ms: 3
            }
        );
        for bad in [
            &b""[..],
            b"\xff",
            b"abc",
            b"99999999999999999999",
            br#"{"version":2,"offset":7}"#,
            br#"{"offset":7}"#,
        ] {
            assert!(decode_value(bad, 0).is_err(), "{bad:?}");
        }
    }
}
