//! # drover-abi — the stable plugin ABI of Drover
//!
//! Drover loads three kinds of plugins from `cdylib` files: the consumer group
//! **coordinator** (exactly one active), partition **assignors** (rebalance policies,
//! selected per group by name) and **offset stores** (one active, hot-swappable).
//! This crate is everything a plugin and the host share:
//!
//! - [`manifest`]: what every plugin says about itself (kind, name, version, ABI version);
//! - [`assignor`], [`offset_store`], [`coordinator`]: for each kind, its root module
//!   (an `abi_stable` prefix type whose first field is the [`Manifest`]), its boundary
//!   types and its `#[sabi_trait]` interface;
//! - [`host`]: [`HostServices`], what the host hands every plugin instance (log sink,
//!   the plugin's own config string, the ZooKeeper session in cluster mode);
//! - [`sdk`]: the plugin author's side — implement a plain Rust trait and call
//!   [`export_assignor!`], [`export_offset_store!`] or [`export_coordinator!`] to get the
//!   exported root module, panic catching and the `tracing` log bridge for free.
//!
//! ## Versioning
//! The ABI version is this crate's version ([`ABI_MAJOR`].[`ABI_MINOR`]). The host refuses a
//! plugin whose ABI major differs from its own; within a major, root modules, boundary
//! types and trait vtables are frozen (abi_stable refuses a library whose vtables have
//! fewer methods than the host's), so any plugin of the major loads into any host of it.
//! `docs/plugins.md` spells out which change breaks which plugins.

#![allow(non_local_definitions)]

pub mod assignor;
pub mod coordinator;
pub mod error;
pub mod host;
pub mod manifest;
pub mod offset_store;
pub mod sdk;
pub mod types;

pub use assignor::{AssignInput, Assignment, AssignorMember, AssignorModRef, MemberAssignment};
pub use error::{ErrorKind, PluginError};
pub use host::{HostServices, LogLevel};
pub use manifest::{Manifest, PluginKind};
pub use offset_store::{OffsetKey, OffsetRecord, OffsetStoreModRef};
pub use types::{TopicInfo, TopicPartitions};

/// Re-exports used by the SDK macros; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use abi_stable;
}

/// Re-export of the `abi_stable` FFI-safe standard types plugins use in boundary values
/// (`RString`, `RVec`, `ROption`, `RResult`, `RStr`, `RSlice`).
pub mod std_types {
    pub use abi_stable::std_types::{
        RArc, RBox, RNone, ROption, RResult, RSlice, RSome, RStr, RString, RVec,
    };
}

/// Major version of the plugin ABI. A plugin built against another major is refused.
pub const ABI_MAJOR: u32 = parse_u32(env!("CARGO_PKG_VERSION_MAJOR"));
/// Minor version of the plugin ABI (additions that do not break older plugins).
pub const ABI_MINOR: u32 = parse_u32(env!("CARGO_PKG_VERSION_MINOR"));

/// The version strings every root module reports in its `abi_stable` library header.
/// abi_stable refuses a library whose major differs; the host checks it first to give a
/// clearer message.
pub const ABI_VERSION_STRINGS: abi_stable::sabi_types::VersionStrings =
    abi_stable::package_version_strings!();

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn abi_version_is_crate_version() {
        assert_eq!(
            format!("{}.{}", super::ABI_MAJOR, super::ABI_MINOR),
            env!("CARGO_PKG_VERSION").rsplit_once('.').unwrap().0
        );
    }

    #[test]
    fn export_symbol_matches_abi_stable() {
        assert_eq!(
            crate::sdk::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
