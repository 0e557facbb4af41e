//! The manifest: the first field of every root module, read by the host before it uses
//! anything else a plugin exports.

use abi_stable::{std_types::RStr, StableAbi};

/// The three plugin kinds of docs/design.md.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// The consumer group coordinator: exactly one is active in a broker.
    Coordinator = 0,
    /// A partition assignor (rebalance policy), selected per group by name.
    Assignor = 1,
    /// An offset store: any number loaded, one active, hot-swappable.
    OffsetStore = 2,
}

impl PluginKind {
    /// Every kind, in a stable order.
    pub const ALL: [PluginKind; 3] = [
        PluginKind::Coordinator,
        PluginKind::Assignor,
        PluginKind::OffsetStore,
    ];

    /// The kind's name as operators write it in configs and as `drover plugins list`
    /// prints it: `coordinator`, `assignor`, `offset-store`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PluginKind::Coordinator => "coordinator",
            PluginKind::Assignor => "assignor",
            PluginKind::OffsetStore => "offset-store",
        }
    }

    /// The `abi_stable` root-module name that identifies this kind in a library header
    /// (`RootModule::NAME`). The host reads it before initialising the module.
    pub const fn root_module_name(self) -> &'static str {
        match self {
            PluginKind::Coordinator => "drover_coordinator",
            PluginKind::Assignor => "drover_assignor",
            PluginKind::OffsetStore => "drover_offset_store",
        }
    }

    /// The kind whose root module carries `name`, if any.
    pub fn from_root_module_name(name: &str) -> Option<PluginKind> {
        Self::ALL.into_iter().find(|k| k.root_module_name() == name)
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a plugin says about itself. Built by the SDK from the plugin's trait constants;
/// the strings live in the plugin library, which is never unloaded.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest {
    /// Must equal the kind of the root module it sits in.
    pub kind: PluginKind,
    /// The plugin's name: how configs and groups select it (`range`, `sticky`, `embedded`).
    /// Unique across all plugin kinds within one broker (the host refuses a second
    /// plugin with a name already taken).
    pub name: RStr<'static>,
    /// The plugin's own version (semver of its crate, by convention).
    pub version: RStr<'static>,
    /// The major of its kind's interface version the plugin was built against
    /// ([`crate::version`]); equal to the one in the library header.
    pub abi_major: u32,
    /// The minor of its kind's interface version the plugin was built against.
    pub abi_minor: u32,
    /// One line for `drover plugins list` and the admin API.
    pub description: RStr<'static>,
}
