//! Cluster-mode storage: the bindings in ZooKeeper, over the broker's session
//! (`HostServices.zookeeper`; paths below the broker's chroot).
//!
//! Layout, below `zk_root` (default `/drover-acls`):
//!
//! ```text
//! <root>/change                          the change counter: its data version counts changes
//! <root>/<TYPE>/<PATTERN>/<name>         one node per resource pattern: a JSON array of its
//!                                        entries (principal, host, operation, permission)
//! ```
//!
//! `<TYPE>` is `TOPIC`, `GROUP`, `CLUSTER` or `TRANSACTIONAL_ID`, `<PATTERN>` `LITERAL` or
//! `PREFIXED`, and `<name>` the resource name with every byte outside `[A-Za-z0-9._*-]`
//! (and a leading `.`) written `%XX`.
//!
//! Every change is one ZooKeeper `multi`: the counter's `set_data` conditional on the
//! version the writer's view was read at, plus the creates, sets and deletes of the
//! pattern nodes that change. Two brokers changing ACLs at once cannot both succeed on
//! the same counter version: the loser re-reads and retries, so nothing is lost. Readers
//! (each broker's poller) read the counter's version, every node, then the counter's
//! version again, and keep the read only if nothing changed in between.

use std::collections::{BTreeMap, BTreeSet};

use drover_abi::{
    authorizer::{AccessControlEntry, AclBinding, PatternType, ResourcePattern},
    host::{ZkCreateMode, ZkOp, ZkSessionArc},
    std_types::{RSlice, RStr, RString, RVec},
    PluginError,
};

use crate::acl::{stored_pattern, StoredEntry, SUPPORTED_TYPES};

/// ZooKeeper's NoNode, NodeExists and BadVersion codes: a concurrent change.
const NO_NODE: i32 = -101;
const NODE_EXISTS: i32 = -110;
const BAD_VERSION: i32 = -103;

/// The largest change written in one `multi` (ZooKeeper refuses requests over
/// `jute.maxbuffer`, 1 MiB by default).
pub const MAX_MULTI_BYTES: usize = 900_000;

/// How many times a read is retried when the counter moves under it.
const READ_ATTEMPTS: usize = 20;

/// Reads per thread below which a load stays on the calling thread.
const READS_PER_THREAD: usize = 64;
/// Threads reading nodes at once during a load.
const READ_THREADS: usize = 8;

/// The ACLs in ZooKeeper.
pub struct ZkStore {
    session: ZkSessionArc,
    root: String,
}

fn zk_error(what: &str, e: PluginError) -> PluginError {
    PluginError {
        message: RString::from(format!("authorizer `acl`: ZooKeeper {what}: {}", e.message)),
        ..e
    }
}

fn pattern_dir(pattern_type: PatternType) -> &'static str {
    if pattern_type == PatternType::Prefixed {
        "PREFIXED"
    } else {
        "LITERAL"
    }
}

/// A resource name as a node name.
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let safe = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*' | b'.');
        if safe && !(i == 0 && b == b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The resource name of a node name, or `None` if it is not one [`escape`] writes.
pub fn unescape(node: &str) -> Option<String> {
    let bytes = node.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = node.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let name = String::from_utf8(out).ok()?;
    (escape(&name) == node).then_some(name)
}

/// The entries of each pattern of `acls`.
fn by_pattern(acls: &BTreeSet<AclBinding>) -> BTreeMap<&ResourcePattern, Vec<&AccessControlEntry>> {
    let mut map: BTreeMap<&ResourcePattern, Vec<&AccessControlEntry>> = BTreeMap::new();
    for b in acls {
        map.entry(&b.pattern).or_default().push(&b.entry);
    }
    map
}

fn encode_entries(entries: &[&AccessControlEntry]) -> Vec<u8> {
    let stored: Vec<StoredEntry> = entries.iter().map(|e| StoredEntry::from_entry(e)).collect();
    serde_json::to_vec(&stored).expect("entries serialize")
}

impl ZkStore {
    /// The store under `root` on `session`.
    pub fn new(session: ZkSessionArc, root: String) -> ZkStore {
        ZkStore { session, root }
    }

    fn counter_path(&self) -> String {
        format!("{}/change", self.root)
    }

    fn dir(&self, resource_type: &str, pattern_type: &str) -> String {
        format!("{}/{resource_type}/{pattern_type}", self.root)
    }

    fn node_path(&self, pattern: &ResourcePattern) -> String {
        format!(
            "{}/{}",
            self.dir(
                &pattern.resource_type.to_string(),
                pattern_dir(pattern.pattern_type)
            ),
            escape(&pattern.name)
        )
    }

    fn create_if_absent(&self, path: &str, data: &[u8]) -> Result<(), PluginError> {
        match self
            .session
            .create(
                RStr::from_str(path),
                RSlice::from_slice(data),
                ZkCreateMode::Persistent,
            )
            .into_result()
        {
            Ok(_) => Ok(()),
            Err(e) if e.code == NODE_EXISTS => Ok(()),
            Err(e) => Err(zk_error(&format!("cannot create {path}"), e)),
        }
    }

    /// Creates the root, the counter and the directories when missing.
    pub fn init(&self) -> Result<(), PluginError> {
        let mut path = String::new();
        for part in self.root.split('/').skip(1) {
            path.push('/');
            path.push_str(part);
            self.create_if_absent(&path, b"")?;
        }
        self.create_if_absent(&self.counter_path(), b"")?;
        for t in SUPPORTED_TYPES {
            let t = t.to_string();
            self.create_if_absent(&format!("{}/{t}", self.root), b"")?;
            for p in ["LITERAL", "PREFIXED"] {
                self.create_if_absent(&self.dir(&t, p), b"")?;
            }
        }
        Ok(())
    }

    /// The counter's version: changes since the counter was created.
    pub fn version(&self) -> Result<i32, PluginError> {
        let path = self.counter_path();
        match self.session.get(RStr::from_str(&path)).into_result() {
            Ok(found) => found.into_option().map(|d| d.version).ok_or_else(|| {
                PluginError::unavailable(format!("authorizer `acl`: {path} is missing"))
            }),
            Err(e) => Err(zk_error(&format!("cannot read {path}"), e)),
        }
    }

    /// Every binding and the counter version they were read at. Errors: `Unavailable`
    /// (ZooKeeper unreachable, or changes kept coming during the read), `InvalidConfig`
    /// for a node this build cannot read (named).
    pub fn load(&self) -> Result<(BTreeSet<AclBinding>, i32), PluginError> {
        for attempt in 0..READ_ATTEMPTS {
            let before = self.version()?;
            let acls = self.read_all()?;
            if self.version()? == before {
                return Ok((acls, before));
            }
            // Writers are busy: let them finish before reading again (1, 2, 4 … 64 ms,
            // with a little of the clock's noise so brokers do not retry in step).
            let jitter = u64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos())
                    % 1_000,
            );
            let backoff_us = (1_000u64 << attempt.min(6)) + jitter;
            std::thread::sleep(std::time::Duration::from_micros(backoff_us));
        }
        Err(PluginError::unavailable(
            "authorizer `acl`: the ACLs in ZooKeeper kept changing during the read",
        ))
    }

    fn read_all(&self) -> Result<BTreeSet<AclBinding>, PluginError> {
        let mut nodes: Vec<(ResourcePattern, String)> = Vec::new();
        for t in SUPPORTED_TYPES {
            let t = t.to_string();
            for p in ["LITERAL", "PREFIXED"] {
                let dir = self.dir(&t, p);
                let children = match self.session.children(RStr::from_str(&dir)).into_result() {
                    Ok(c) => c,
                    Err(e) if e.code == NO_NODE => RVec::new(),
                    Err(e) => return Err(zk_error(&format!("cannot list {dir}"), e)),
                };
                for child in children {
                    let path = format!("{dir}/{child}");
                    let pattern = unescape(&child)
                        .ok_or_else(|| format!("`{child}` is not an escaped resource name"))
                        .and_then(|name| stored_pattern(&t, p, &name))
                        .map_err(|why| corrupt(&path, &why))?;
                    nodes.push((pattern, path));
                }
            }
        }
        let read = |chunk: &[(ResourcePattern, String)]| -> Result<Vec<AclBinding>, PluginError> {
            let mut out = Vec::new();
            for (pattern, path) in chunk {
                let data = match self.session.get(RStr::from_str(path)).into_result() {
                    Ok(found) => match found.into_option() {
                        Some(d) => d.data,
                        None => continue, // deleted since listed: the counter moved
                    },
                    Err(e) => return Err(zk_error(&format!("cannot read {path}"), e)),
                };
                let stored: Vec<StoredEntry> =
                    serde_json::from_slice(&data).map_err(|e| corrupt(path, &e.to_string()))?;
                for s in stored {
                    let entry = s.to_entry().map_err(|why| corrupt(path, &why))?;
                    out.push(AclBinding {
                        pattern: pattern.clone(),
                        entry,
                    });
                }
            }
            Ok(out)
        };
        let threads = (nodes.len() / READS_PER_THREAD).clamp(1, READ_THREADS);
        let chunk = nodes.len().div_ceil(threads).max(1);
        let parts: Vec<Result<Vec<AclBinding>, PluginError>> = std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .chunks(chunk)
                .map(|c| s.spawn(move || read(c)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(PluginError::internal("ACL read thread panicked")))
                })
                .collect()
        });
        let mut acls = BTreeSet::new();
        for part in parts {
            acls.extend(part?);
        }
        Ok(acls)
    }

    /// Writes the change from `old` (read at counter version `version`) to `new` in one
    /// `multi`. `Ok(Some(v))`: written, the counter is now at `v`; `Ok(None)`: another
    /// broker changed the ACLs since `version` (nothing written; re-read and retry).
    pub fn write(
        &self,
        version: i32,
        old: &BTreeSet<AclBinding>,
        new: &BTreeSet<AclBinding>,
    ) -> Result<Option<i32>, PluginError> {
        let before = by_pattern(old);
        let after = by_pattern(new);
        let mut ops: Vec<ZkOp> = vec![ZkOp::SetData {
            path: RString::from(self.counter_path()),
            data: RVec::new(),
            version,
        }];
        let mut bytes = 0usize;
        let patterns: BTreeSet<&ResourcePattern> =
            before.keys().chain(after.keys()).copied().collect();
        for pattern in patterns {
            let (was, is) = (before.get(pattern), after.get(pattern));
            if was == is {
                continue;
            }
            let path = self.node_path(pattern);
            bytes += path.len() + 16;
            let op = match (was, is) {
                (_, None) => ZkOp::Delete {
                    path: RString::from(path),
                    version: -1,
                },
                (None, Some(entries)) => {
                    let data = encode_entries(entries);
                    bytes += data.len();
                    ZkOp::Create {
                        path: RString::from(path),
                        data: RVec::from(data),
                        mode: ZkCreateMode::Persistent,
                    }
                }
                (Some(_), Some(entries)) => {
                    let data = encode_entries(entries);
                    bytes += data.len();
                    ZkOp::SetData {
                        path: RString::from(path),
                        data: RVec::from(data),
                        version: -1,
                    }
                }
            };
            ops.push(op);
        }
        if bytes > MAX_MULTI_BYTES {
            return Err(PluginError::invalid_input(format!(
                "authorizer `acl`: the change is {bytes} bytes, over the {MAX_MULTI_BYTES} \
                 one ZooKeeper transaction may carry; create or delete fewer ACLs at once"
            )));
        }
        match self.session.multi(RVec::from(ops)).into_result() {
            Ok(()) => Ok(Some(version + 1)),
            Err(e) if [BAD_VERSION, NO_NODE, NODE_EXISTS].contains(&e.code) => Ok(None),
            Err(e) => Err(zk_error("cannot write the ACL change", e)),
        }
    }
}

fn corrupt(path: &str, why: &str) -> PluginError {
    PluginError::invalid_config(format!(
        "authorizer `acl`: ZooKeeper node {path} is not a valid ACL node ({why}); fix or \
         delete it (the ACLs are not loaded without it)"
    ))
}

#[cfg(test)]
mod tests {
    use super::{escape, unescape};

    #[test]
    fn names_round_trip_as_node_names() {
        for name in [
            "orders",
            "a.b-c_d*",
            ".",
            "..",
            ".hidden",
            "a/b",
            "x y%",
            "na\u{ef}ve",
            "*",
        ] {
            let node = escape(name);
            assert!(!node.contains('/') && node != "." && node != "..", "{node}");
            assert_eq!(unescape(&node).as_deref(), Some(name), "{node}");
        }
        assert_eq!(escape("a/b"), "a%2Fb");
        // Only what `escape` writes reads back: no lower-case or needless escapes.
        for node in ["a%2fb", "%61", "%", "%G1", "a/b", ".x"] {
            assert_eq!(unescape(node), None, "{node}");
        }
    }
}
