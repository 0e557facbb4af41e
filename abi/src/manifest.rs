//! The manifest: the first field of every root module, read by the host before it uses
//! anything else a plugin exports.
//!
//! Two shapes, because the first one cannot grow (docs/plugins.md, "Plugin kinds"):
//!
//! - [`Manifest`], in the root modules of the three original kinds (coordinator,
//!   assignor, offset store). Its `kind` is [`ManifestKind`], an exhaustive enum whose
//!   layout every plugin built against drover-abi 3.x carries; abi_stable refuses an
//!   exhaustive enum whose variant count differs, so that enum is **frozen** at three
//!   variants and `Manifest` never changes.
//! - [`OpenManifest`], in the root modules of every kind added since (the authorizer,
//!   and any later one). Its `kind` is a [`KindId`], an open value (as [`crate::ErrorKind`]
//!   is), so a new kind never changes a layout an existing plugin carries.
//!
//! Which kind a library holds is decided by its root module's *name* in the library
//! header ([`PluginKind::root_module_name`]), read before the module is initialised; the
//! manifest's kind must agree with it. A library whose root module names a kind this
//! host does not know is refused with that name in the message.

use abi_stable::{std_types::RStr, StableAbi};

/// The plugin kinds this build knows. Not itself part of the ABI: a plugin's kind is
/// its root module's name, and its manifest carries a [`ManifestKind`] (the three
/// original kinds) or a [`KindId`] (kinds added since).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PluginKind {
    /// The consumer group coordinator: exactly one is active in a broker.
    Coordinator,
    /// A partition assignor (rebalance policy), selected per group by name.
    Assignor,
    /// An offset store: any number loaded, one active, hot-swappable.
    OffsetStore,
    /// An authorizer: decides what an authenticated principal may do; at most one is
    /// active (`[authorizer]` in the broker's config). Added with authorizer ABI 1.0.
    Authorizer,
}

impl PluginKind {
    /// Every kind, in a stable order.
    pub const ALL: [PluginKind; 4] = [
        PluginKind::Coordinator,
        PluginKind::Assignor,
        PluginKind::OffsetStore,
        PluginKind::Authorizer,
    ];

    /// The kind's name as operators write it in configs and as `drover plugins list`
    /// prints it: `coordinator`, `assignor`, `offset-store`, `authorizer`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PluginKind::Coordinator => "coordinator",
            PluginKind::Assignor => "assignor",
            PluginKind::OffsetStore => "offset-store",
            PluginKind::Authorizer => "authorizer",
        }
    }

    /// The `abi_stable` root-module name that identifies this kind in a library header
    /// (`RootModule::NAME`). The host reads it before initialising the module.
    pub const fn root_module_name(self) -> &'static str {
        match self {
            PluginKind::Coordinator => "drover_coordinator",
            PluginKind::Assignor => "drover_assignor",
            PluginKind::OffsetStore => "drover_offset_store",
            PluginKind::Authorizer => "drover_authorizer",
        }
    }

    /// The kind whose root module carries `name`, if this build knows it.
    pub fn from_root_module_name(name: &str) -> Option<PluginKind> {
        Self::ALL.into_iter().find(|k| k.root_module_name() == name)
    }

    /// The open identifier of this kind, as an [`OpenManifest`] carries it.
    pub const fn id(self) -> KindId {
        match self {
            PluginKind::Coordinator => KindId::COORDINATOR,
            PluginKind::Assignor => KindId::ASSIGNOR,
            PluginKind::OffsetStore => KindId::OFFSET_STORE,
            PluginKind::Authorizer => KindId::AUTHORIZER,
        }
    }

    /// Whether this kind's root module starts with a frozen [`Manifest`] (the three
    /// original kinds) rather than an [`OpenManifest`].
    pub const fn has_frozen_manifest(self) -> bool {
        !matches!(self, PluginKind::Authorizer)
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ManifestKind> for PluginKind {
    fn from(kind: ManifestKind) -> Self {
        match kind {
            ManifestKind::Coordinator => PluginKind::Coordinator,
            ManifestKind::Assignor => PluginKind::Assignor,
            ManifestKind::OffsetStore => PluginKind::OffsetStore,
        }
    }
}

mod frozen {
    use abi_stable::StableAbi;

    /// The kind field of [`super::Manifest`]: the three original kinds. **Frozen**: its
    /// ABI name (`PluginKind`) and its three variants are in the layout of every plugin
    /// of these kinds ever built, and abi_stable refuses an exhaustive enum with another
    /// variant count. Kinds added later carry a [`super::KindId`] instead.
    #[repr(u8)]
    #[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum PluginKind {
        /// The consumer group coordinator.
        Coordinator = 0,
        /// A partition assignor.
        Assignor = 1,
        /// An offset store.
        OffsetStore = 2,
    }
}

/// The kind field of the frozen [`Manifest`] (its ABI name is `PluginKind`, which it
/// keeps forever; see the module docs).
pub use frozen::PluginKind as ManifestKind;

/// A plugin kind as an open value: the kind field of an [`OpenManifest`]. Codes 0–2 are
/// the three original kinds (equal to their [`ManifestKind`] discriminants), 3 the
/// authorizer; a later kind takes the next code. A host that does not know a code
/// refuses the plugin (it already refused it by its root module's name).
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindId(u16);

impl KindId {
    /// The coordinator kind.
    pub const COORDINATOR: KindId = KindId(0);
    /// The assignor kind.
    pub const ASSIGNOR: KindId = KindId(1);
    /// The offset-store kind.
    pub const OFFSET_STORE: KindId = KindId(2);
    /// The authorizer kind.
    pub const AUTHORIZER: KindId = KindId(3);

    /// The raw code, for messages.
    pub const fn code(self) -> u16 {
        self.0
    }

    /// The kind with this id, if this build knows it.
    pub fn kind(self) -> Option<PluginKind> {
        PluginKind::ALL.into_iter().find(|k| k.id() == self)
    }

    /// A kind id from its raw code; for fixtures of kinds a host does not know.
    pub const fn from_code(code: u16) -> KindId {
        KindId(code)
    }
}

impl std::fmt::Debug for KindId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind() {
            Some(kind) => write!(f, "{kind}"),
            None => write!(f, "unknown kind {}", self.0),
        }
    }
}

/// What a plugin of one of the three original kinds says about itself. Built by the SDK
/// from the plugin's trait constants; the strings live in the plugin library, which is
/// never unloaded. Frozen (module docs): kinds added later use [`OpenManifest`].
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest {
    /// Must equal the kind of the root module it sits in.
    pub kind: ManifestKind,
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

/// What a plugin of a kind added after the first three says about itself: the fields of
/// [`Manifest`] with the kind as an open [`KindId`].
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenManifest {
    /// Must equal the kind of the root module it sits in.
    pub kind: KindId,
    /// The plugin's name; unique across all plugin kinds within one broker.
    pub name: RStr<'static>,
    /// The plugin's own version (semver of its crate, by convention).
    pub version: RStr<'static>,
    /// The major of its kind's interface version the plugin was built against.
    pub abi_major: u32,
    /// The minor of its kind's interface version the plugin was built against.
    pub abi_minor: u32,
    /// One line for `drover plugins list` and the admin API.
    pub description: RStr<'static>,
}

/// A manifest of either shape, as the host reads it: the kind resolved to a
/// [`PluginKind`] where this build knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestView {
    /// The manifest's kind; `Err(code)` for a [`KindId`] this build does not know.
    pub kind: Result<PluginKind, u16>,
    /// See [`Manifest::name`].
    pub name: RStr<'static>,
    /// See [`Manifest::version`].
    pub version: RStr<'static>,
    /// See [`Manifest::abi_major`].
    pub abi_major: u32,
    /// See [`Manifest::abi_minor`].
    pub abi_minor: u32,
    /// See [`Manifest::description`].
    pub description: RStr<'static>,
}

impl From<Manifest> for ManifestView {
    fn from(m: Manifest) -> Self {
        ManifestView {
            kind: Ok(m.kind.into()),
            name: m.name,
            version: m.version,
            abi_major: m.abi_major,
            abi_minor: m.abi_minor,
            description: m.description,
        }
    }
}

impl From<OpenManifest> for ManifestView {
    fn from(m: OpenManifest) -> Self {
        ManifestView {
            kind: m.kind.kind().ok_or(m.kind.code()),
            name: m.name,
            version: m.version,
            abi_major: m.abi_major,
            abi_minor: m.abi_minor,
            description: m.description,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_ids_agree_with_the_frozen_discriminants() {
        for (frozen, kind) in [
            (ManifestKind::Coordinator, PluginKind::Coordinator),
            (ManifestKind::Assignor, PluginKind::Assignor),
            (ManifestKind::OffsetStore, PluginKind::OffsetStore),
        ] {
            assert_eq!(PluginKind::from(frozen), kind);
            assert_eq!(u16::from(frozen as u8), kind.id().code());
            assert!(kind.has_frozen_manifest());
        }
        for kind in PluginKind::ALL {
            assert_eq!(kind.id().kind(), Some(kind));
            assert_eq!(
                PluginKind::from_root_module_name(kind.root_module_name()),
                Some(kind)
            );
        }
        assert_eq!(KindId::from_code(4).kind(), None);
    }

    /// What freezing `ManifestKind` protects: a `Manifest` whose kind enum gained a
    /// fourth variant (the change adding the authorizer would have been without the
    /// `OpenManifest`) fails abi_stable's layout check — the check the loader runs on
    /// every plugin — against today's `Manifest` in both directions, while an unchanged
    /// copy passes. So an old plugin would be refused by a host with the grown enum, and
    /// a plugin built with it by every host before.
    #[test]
    fn a_manifest_whose_kind_enum_grew_is_refused_by_the_layout_check() {
        use abi_stable::{abi_stability::abi_checking::check_layout_compatibility, StableAbi};

        // Copies in this crate, named as the real ones (the check compares the names
        // and the package), differing from them in the kind's variants only.
        macro_rules! manifest_with {
            ($module:ident: $($variant:ident = $code:literal),*) => {
                mod $module {
                    use abi_stable::{std_types::RStr, StableAbi};
                    #[repr(u8)]
                    #[derive(StableAbi)]
                    #[allow(dead_code)]
                    pub enum PluginKind { $($variant = $code),* }
                    #[repr(C)]
                    #[derive(StableAbi)]
                    pub struct Manifest {
                        pub kind: PluginKind,
                        pub name: RStr<'static>,
                        pub version: RStr<'static>,
                        pub abi_major: u32,
                        pub abi_minor: u32,
                        pub description: RStr<'static>,
                    }
                }
            };
        }
        manifest_with!(same: Coordinator = 0, Assignor = 1, OffsetStore = 2);
        manifest_with!(grown: Coordinator = 0, Assignor = 1, OffsetStore = 2, Authorizer = 3);

        let today = <Manifest as StableAbi>::LAYOUT;
        let copy = <same::Manifest as StableAbi>::LAYOUT;
        let grown = <grown::Manifest as StableAbi>::LAYOUT;
        check_layout_compatibility(copy, today).expect("an unchanged copy passes");
        for (interface, implementation) in [(today, grown), (grown, today)] {
            let err = check_layout_compatibility(interface, implementation)
                .expect_err("another variant count is refused");
            assert!(err.to_string().contains("too many variants"), "{err}");
        }
    }

    #[test]
    fn the_frozen_kind_keeps_its_abi_name_and_three_variants() {
        use abi_stable::{type_layout::TLData, StableAbi};
        let layout = <ManifestKind as StableAbi>::LAYOUT;
        assert_eq!(layout.name(), "PluginKind");
        match layout.data() {
            TLData::Enum(e) => assert_eq!(e.variant_count(), 3),
            other => panic!("not an enum: {other:?}"),
        }
    }
}
