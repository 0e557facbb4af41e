//! # drover-abi — the stable plugin ABI of Drover
//!
//! Drover loads four kinds of plugins from `cdylib` files: the consumer group
//! **coordinator** (exactly one active), partition **assignors** (rebalance policies,
//! selected per group by name), **offset stores** (one active, hot-swappable) and
//! **authorizers** (at most one active: what each principal may do).
//! This crate is everything a plugin and the host share:
//!
//! - [`manifest`]: what every plugin says about itself (kind, name, version, ABI version);
//!   the three original kinds carry the frozen [`Manifest`], kinds added since an
//!   [`OpenManifest`] whose kind is an open value, so adding a kind breaks no plugin;
//! - [`assignor`], [`offset_store`], [`coordinator`], [`authorizer`]: for each kind, its
//!   root module (an `abi_stable` prefix type whose first field is its manifest), its
//!   boundary types and its `#[sabi_trait]` interface;
//! - [`host`]: [`HostServices`], what the host hands every plugin instance (log sink,
//!   the plugin's own config string, the ZooKeeper session in cluster mode);
//! - [`sdk`]: the plugin author's side — implement a plain Rust trait and call
//!   [`export_assignor!`], [`export_offset_store!`], [`export_coordinator!`] or
//!   [`export_authorizer!`] to get the
//!   exported root module, panic catching and the `tracing` log bridge for free.
//!
//! ## Versioning
//! Each kind has its own interface version ([`version`]: [`COORDINATOR_ABI`],
//! [`ASSIGNOR_ABI`], [`OFFSET_STORE_ABI`], [`AUTHORIZER_ABI`]). A plugin built against `X.Y` of its kind loads
//! into every host serving `X.Z` with `Z ≥ Y`: minors only add, and what they add is
//! optional to older plugins (trait methods after `#[sabi(last_prefix_field)]` with a
//! default, variants of the non-exhaustive [`coordinator::CoordinatorInput`] /
//! [`coordinator::CoordinatorOutput`], values of the open [`ErrorKind`]). The host checks
//! layouts with the plugin as the older side (docs/plugins.md, "Compatibility").

#![allow(non_local_definitions)]

pub mod assignor;
pub mod authorizer;
pub mod coordinator;
pub mod error;
pub mod host;
pub mod manifest;
pub mod offset_store;
pub mod sdk;
pub mod types;
pub mod version;

pub use assignor::{AssignInput, Assignment, AssignorMember, AssignorModRef, MemberAssignment};
pub use error::{ErrorKind, PluginError};
pub use host::{HostServices, LogLevel};
pub use manifest::{KindId, Manifest, ManifestKind, OpenManifest, PluginKind};
pub use offset_store::{
    OffsetKey, OffsetRecord, OffsetStoreModRef, ShareStateRecord, ShareStateRun,
    MAX_SHARE_STATE_RUNS,
};
pub use types::{TopicInfo, TopicPartitions};
pub use version::{KindVersion, ASSIGNOR_ABI, AUTHORIZER_ABI, COORDINATOR_ABI, OFFSET_STORE_ABI};

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

#[cfg(test)]
mod tests {
    #[test]
    fn export_symbol_matches_abi_stable() {
        assert_eq!(
            crate::sdk::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
