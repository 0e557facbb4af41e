//! ABI versions, one per plugin kind.
//!
//! Each kind's interface (its root module, its `#[sabi_trait]`, the boundary types only
//! it uses) carries its own `major.minor`, independent of the other kinds: a change to
//! the coordinator interface never touches an assignor or an offset store. A plugin's
//! library header and manifest carry the version of *its* kind it was built against.
//!
//! The host (docs/plugins.md, "Compatibility") loads a plugin of kind K when
//! - the plugin's K major equals the host's K major, and
//! - the plugin's K minor is at most the host's K minor: a plugin built against X.Y
//!   loads into every host X.Z with Z ≥ Y. What a later minor added is optional to it
//!   (trait methods after `last_prefix_field` fall back to their default; enums that
//!   cross the boundary are non-exhaustive). A plugin newer than the host is refused,
//!   since it may call or expect what the host does not have.
//!
//! A kind added later starts at 1.0 (the authorizer); the three original kinds started
//! at 3.0, from drover-abi 2.0.
//!
//! The crate's own semver moves with the union of the kinds (its minor goes up when any
//! kind gains something). Its major is fixed at 3: abi_stable compares the major of the
//! crate that defined every boundary type, so changing it would break every kind at
//! once. A deliberate break of one kind bumps only that kind's major below.

use abi_stable::sabi_types::VersionStrings;

use crate::manifest::PluginKind;

/// A kind's interface version: `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KindVersion {
    /// Incompatible changes of the kind's interface.
    pub major: u32,
    /// Additions a plugin built against an earlier minor does not need to know about.
    pub minor: u32,
}

impl KindVersion {
    /// Whether a plugin built against `plugin` loads into a host serving `self`: same
    /// major, and the plugin's minor not newer than the host's.
    pub const fn accepts(self, plugin: KindVersion) -> bool {
        self.major == plugin.major && plugin.minor <= self.minor
    }
}

impl std::fmt::Display for KindVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The coordinator interface's version, `major.minor.patch` (the patch is always 0).
///
/// History: 3.0 — first per-kind version: `CoordinatorInput`/`CoordinatorOutput` are
/// non-exhaustive; answers, pushes and channel openings are outputs of their own.
/// 3.1 — input `AssignorsChanged` (the plugin directory was rescanned). 3.2 — the
/// assignor instances it is handed have `Assignor::assign_with_context` (assignor ABI
/// 3.1; the `Assignor` vtable is reachable from the coordinator's interface, so a
/// coordinator built against it is refused by name, not by layout, in a 3.1 broker).
/// 3.3 — input `PartitionStats` (leaders, racks, log offsets, produce rates per
/// partition); the host sends it only to coordinators of 3.3 or later. 3.4 —
/// transactional offset commits: the host routes TxnOffsetCommit (API 28) to it; output
/// `StageTxnOffsets` and its result `TxnOffsetsStaged`, inputs `TxnOffsetsPending` and
/// `TxnCompleted` with the output `TxnCompletionApplied`; sent only to coordinators of
/// 3.4 or later. 3.5 — the `AssignContext` it hands assignors has
/// `partition_data_age_ms` (assignor ABI 3.2; the context is reachable from the
/// coordinator's interface, so a coordinator built against it is refused by name in an
/// older broker). 3.6 — asynchronous assignor calls: output `RunAssignor` (a job the
/// host runs off the coordinator thread) and its result input `AssignorDone`. 3.7 —
/// share groups' membership (KIP-932): the host routes ShareGroupHeartbeat (API 76)
/// and ShareGroupDescribe (77) to it when it lists them in its ApiVersions answer,
/// after checking Read (heartbeat) or Describe (describe) on the group; a host
/// before 3.7 forwarded unknown group APIs unauthorized, so it refuses such a
/// coordinator by version. No layout changed. 3.8 — the assignor instances it is
/// handed have `Assignor::share_groups_supported` and `Assignor::assign_share`
/// (assignor ABI 3.3; the `Assignor` vtable is reachable from the coordinator's
/// interface, so a coordinator built against it is refused by name in an older broker).
/// 3.9 — topic scopes (KAFKA-18813: a pattern subscription matches only topics the
/// member's principal may describe): input `TopicScope` per connection and output
/// `WantTopicScope`; the host sends scopes only to coordinators of 3.9 or later, and
/// only with an authorizer; it checks native pattern subscriptions against the group
/// alone for them.
const COORDINATOR_VERSION: &str = "3.9.0";
/// The assignor interface's version.
///
/// History: 3.0 — first per-kind version (from drover-abi 2.0: `ErrorKind` became an
/// open set). 3.1 — optional method `Assignor::assign_with_context` with an
/// `AssignContext` (member labels, per-partition data); assignors without it get the
/// default, which forwards to `assign`. 3.2 — `AssignContext::partition_data_age_ms`
/// (how old the partition data is; committed offsets are current), after
/// `last_prefix_field`: an assignor built before never reads it, one built after reads
/// `None` from an older coordinator. 3.3 — share groups (KIP-932): optional methods
/// `Assignor::share_groups_supported` (default `false`) and `Assignor::assign_share`
/// (default `Unsupported`), after `assign_with_context`: an assignor built before
/// answers `false` and is never offered a share group.
const ASSIGNOR_VERSION: &str = "3.3.0";
/// The offset-store interface's version.
///
/// History: 3.0 — first per-kind version (from drover-abi 2.0: `ErrorKind` became an
/// open set). 3.1 — optional method `OffsetStore::delete_partitions` (OffsetDelete in
/// one atomic step; stores without it get `Unsupported` and the host's fallback). 3.2 —
/// share-group state (KIP-932, issue 31): `share_state_supported`,
/// `write_share_state`, `read_share_state`, `delete_share_state`, `scan_share_state`
/// and the `ShareStateRecord`/`ShareStateRun` types, after `last_prefix_field`: a store
/// built before answers `false`/`Unsupported` and is refused as a share-state target.
const OFFSET_STORE_VERSION: &str = "3.2.0";
/// The authorizer interface's version.
///
/// History: 1.0 — the kind's first version (drover-abi 3.7): `authorize`,
/// `authorize_any`, `acls`, `create_acls`, `delete_acls`; its root module starts with
/// an [`crate::manifest::OpenManifest`].
const AUTHORIZER_VERSION: &str = "1.0.0";

/// Version of the coordinator interface ([`crate::coordinator`]); history above
/// `COORDINATOR_VERSION` in this file.
pub const COORDINATOR_ABI: KindVersion = parse(COORDINATOR_VERSION);
/// Version of the assignor interface ([`crate::assignor`]).
pub const ASSIGNOR_ABI: KindVersion = parse(ASSIGNOR_VERSION);
/// Version of the offset-store interface ([`crate::offset_store`]).
pub const OFFSET_STORE_ABI: KindVersion = parse(OFFSET_STORE_VERSION);

/// Version of the authorizer interface ([`crate::authorizer`]).
pub const AUTHORIZER_ABI: KindVersion = parse(AUTHORIZER_VERSION);

/// [`COORDINATOR_ABI`] as the coordinator root module's library header carries it.
pub const COORDINATOR_VERSION_STRINGS: VersionStrings = VersionStrings::new(COORDINATOR_VERSION);
/// [`ASSIGNOR_ABI`] as the assignor root module's library header carries it.
pub const ASSIGNOR_VERSION_STRINGS: VersionStrings = VersionStrings::new(ASSIGNOR_VERSION);
/// [`OFFSET_STORE_ABI`] as the offset-store root module's library header carries it.
pub const OFFSET_STORE_VERSION_STRINGS: VersionStrings = VersionStrings::new(OFFSET_STORE_VERSION);
/// [`AUTHORIZER_ABI`] as the authorizer root module's library header carries it.
pub const AUTHORIZER_VERSION_STRINGS: VersionStrings = VersionStrings::new(AUTHORIZER_VERSION);

impl PluginKind {
    /// The interface version of this kind that this build of drover-abi serves.
    pub const fn abi_version(self) -> KindVersion {
        match self {
            PluginKind::Coordinator => COORDINATOR_ABI,
            PluginKind::Assignor => ASSIGNOR_ABI,
            PluginKind::OffsetStore => OFFSET_STORE_ABI,
            PluginKind::Authorizer => AUTHORIZER_ABI,
        }
    }
}

/// Parses `major.minor.patch` at compile time (the patch is ignored).
const fn parse(v: &str) -> KindVersion {
    let b = v.as_bytes();
    let mut parts = [0u32; 3];
    let (mut i, mut part) = (0, 0);
    while i < b.len() {
        if b[i] == b'.' {
            part += 1;
        } else {
            assert!(b[i].is_ascii_digit(), "version strings are decimal");
            parts[part] = parts[part] * 10 + (b[i] - b'0') as u32;
        }
        i += 1;
    }
    assert!(part == 2, "version strings are major.minor.patch");
    KindVersion {
        major: parts[0],
        minor: parts[1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_minors_load_newer_ones_and_other_majors_do_not() {
        let host = KindVersion { major: 3, minor: 2 };
        assert!(host.accepts(KindVersion { major: 3, minor: 0 }));
        assert!(host.accepts(KindVersion { major: 3, minor: 2 }));
        assert!(!host.accepts(KindVersion { major: 3, minor: 3 }));
        assert!(!host.accepts(KindVersion { major: 2, minor: 9 }));
        assert!(!host.accepts(KindVersion { major: 4, minor: 0 }));
    }

    #[test]
    fn the_crate_minor_covers_every_kind() {
        let crate_minor: u32 = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap();
        let crate_major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap();
        assert_eq!(crate_major, 3, "the crate major is fixed (module docs)");
        for kind in PluginKind::ALL {
            assert!(kind.abi_version().minor <= crate_minor, "{kind}");
        }
    }
}
