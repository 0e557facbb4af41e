//! The plugin author's side of the ABI.
//!
//! Implement [`PluginInfo`] and one of [`AssignorPlugin`], [`OffsetStorePlugin`],
//! [`CoordinatorPlugin`] or [`AuthorizerPlugin`] on a plain Rust type, then export it:
//!
//! ```ignore
//! struct Mine;
//! impl drover_abi::sdk::PluginInfo for Mine {
//!     const NAME: &'static str = "mine";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!     const DESCRIPTION: &'static str = "my rebalance policy";
//! }
//! impl drover_abi::sdk::AssignorPlugin for Mine { /* new, assign */ }
//! drover_abi::export_assignor!(Mine);
//! ```
//!
//! The export macro generates the `abi_stable` library header and root module. Every
//! call into the plugin, and dropping an instance, then runs inside a panic guard (a
//! panic becomes a [`crate::ErrorKind::Panicked`] error instead of aborting the broker;
//! after one, every later call of that instance returns `Panicked` without running) and
//! the plugin's `tracing` events are forwarded to the host's log (see [`log_bridge`]).
//!
//! The guard relies on unwinding: a plugin built with `panic = "abort"` aborts the
//! broker on its first panic. To log, depend on `tracing` yourself.
//!
//! Helpers: [`assignor`] validates an assignor's input into a [`assignor::GroupView`]
//! and builds the sorted output from an owner table; [`in_process`] makes an instance
//! of a plugin type without a `.so`, for tests (`drover-plugin-testkit` runs the
//! conformance suites against it).

mod adapters;
pub mod assignor;
pub mod in_process;
pub mod log_bridge;
mod panic_guard;

pub use adapters::{
    assignor_root_module, authorizer_root_module, coordinator_root_module, offset_store_root_module,
};
pub use panic_guard::guard;

use abi_stable::std_types::RStr;

use crate::{
    assignor::{AssignInput, Assignment},
    authorizer::{
        AclBinding, AclBindingFilter, AclCreateResult, AclDeleteResult, AclOperation, Action,
        Decision, RequestContext, ResourceType,
    },
    coordinator::{
        CoordinatorInput, CoordinatorInputNE, CoordinatorOutput, CoordinatorStartup,
        ZkCoordinatorStartup,
    },
    error::PluginError,
    host::ZkSessionArc,
    manifest::{Manifest, ManifestKind, OpenManifest, PluginKind},
    offset_store::{OffsetKey, OffsetRecord, ShareStateRecord},
    types::TopicPartitions,
};

/// The exported symbol abi_stable looks up in every plugin library
/// (`abi_stable::library::ROOT_MODULE_LOADER_NAME`; a unit test keeps them equal).
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Static facts about a plugin, turned into its [`Manifest`].
pub trait PluginInfo {
    /// The name configs and groups select the plugin by. Unique across all kinds in a
    /// broker: the host refuses a second plugin with a name already taken by any plugin.
    const NAME: &'static str;
    /// The plugin's version; usually `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    /// One line for `drover plugins list`.
    const DESCRIPTION: &'static str;
}

/// The manifest of plugin `T` of one of the three original kinds, stamped with the
/// version of `kind`'s interface this crate serves ([`PluginKind::abi_version`]).
pub fn manifest<T: PluginInfo>(kind: ManifestKind) -> Manifest {
    let version = PluginKind::from(kind).abi_version();
    Manifest {
        kind,
        name: RStr::from_str(T::NAME),
        version: RStr::from_str(T::VERSION),
        abi_major: version.major,
        abi_minor: version.minor,
        description: RStr::from_str(T::DESCRIPTION),
    }
}

/// The manifest of plugin `T` of a kind added after the first three (its root module
/// starts with an [`OpenManifest`]), stamped with the version of `kind`'s interface this
/// crate serves.
pub fn open_manifest<T: PluginInfo>(kind: PluginKind) -> OpenManifest {
    let version = kind.abi_version();
    OpenManifest {
        kind: kind.id(),
        name: RStr::from_str(T::NAME),
        version: RStr::from_str(T::VERSION),
        abi_major: version.major,
        abi_minor: version.minor,
        description: RStr::from_str(T::DESCRIPTION),
    }
}

/// What a plugin instance receives when it is created.
#[derive(Clone, Default)]
pub struct PluginContext {
    /// The plugin's config string (TOML from the operator's `[plugins.config.<name>]`),
    /// empty when the operator gave none.
    pub config: String,
    /// The broker's ZooKeeper session in cluster mode.
    pub zookeeper: Option<ZkSessionArc>,
}

/// A rebalance policy. Must be deterministic: equal inputs give equal outputs.
pub trait AssignorPlugin: PluginInfo + Send + Sync + Sized + 'static {
    /// Creates an instance. Errors: [`crate::ErrorKind::InvalidConfig`].
    fn new(ctx: &PluginContext) -> Result<Self, PluginError>;
    /// Computes an assignment meeting the contract in [`crate::assignor`].
    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError>;

    /// Computes an assignment knowing `context` (member labels, per-partition data;
    /// assignor ABI 3.1). The host calls this one; the default ignores the context and
    /// calls [`assign`](Self::assign), so a policy that needs no context implements
    /// only `assign`. The contract is the same, and so must be the result for an empty
    /// context.
    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: &assignor::Context<'_>,
    ) -> Result<Assignment, PluginError> {
        let _ = context;
        self.assign(input)
    }

    /// Whether this policy serves share groups (KIP-932; assignor ABI 3.3). The default,
    /// `false`, keeps it away from share groups; a share assignor answers `true` and
    /// implements [`assign_share`](Self::assign_share).
    fn share_groups_supported(&self) -> bool {
        false
    }

    /// Computes a share group's target meeting the share-assignor contract in
    /// [`crate::assignor`] (every subscribed partition to at least one subscriber, a
    /// partition possibly to several; deterministic). `input.members[i].owned` is the
    /// member's part of the target in force. [`assignor::run_share`] and
    /// [`assignor::Context`] help. The default answers `Unsupported`.
    fn assign_share(
        &self,
        input: &AssignInput,
        context: &assignor::Context<'_>,
    ) -> Result<Assignment, PluginError> {
        let _ = (input, context);
        Err(PluginError::unsupported(format!(
            "assignor `{}` does not serve share groups",
            Self::NAME
        )))
    }
}

/// An offset store; see [`crate::offset_store::OffsetStore`] for each method's contract.
/// Methods are called concurrently from several host threads.
pub trait OffsetStorePlugin: PluginInfo + Send + Sync + Sized + 'static {
    /// Opens the store. Errors: `InvalidConfig`, `Unavailable`.
    fn open(ctx: &PluginContext) -> Result<Self, PluginError>;
    /// Durably writes a batch, all or nothing.
    fn commit(&self, batch: &[OffsetRecord]) -> Result<(), PluginError>;
    /// Committed offsets of `group` for `partitions`; absent ones are left out.
    fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, PluginError>;
    /// Every committed offset of `group`.
    fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, PluginError>;
    /// Every group with a committed offset, sorted.
    fn list_groups(&self) -> Result<Vec<String>, PluginError>;
    /// Deletes a group's offsets; returns how many.
    fn delete_group(&self, group: &str) -> Result<u64, PluginError>;
    /// Up to `limit` records strictly after `after`, in key order.
    fn scan(&self, after: Option<&OffsetKey>, limit: u32)
        -> Result<Vec<OffsetRecord>, PluginError>;
    /// Makes acknowledged commits durable.
    fn flush(&self) -> Result<(), PluginError>;
    /// Flushes and releases the backend.
    fn close(&self) -> Result<(), PluginError>;
    /// Deletes `group`'s committed offsets of `partitions` durably and all together;
    /// returns how many existed (offset-store ABI 3.1). Optional: the default reports
    /// [`crate::ErrorKind::Unsupported`], and the host falls back to reading the group,
    /// deleting it and committing back the rest (not atomic across a crash).
    fn delete_partitions(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        let _ = (group, partitions);
        Err(PluginError::unsupported(format!(
            "offset store `{}` does not implement delete_partitions",
            Self::NAME
        )))
    }
    /// Whether the store keeps share-group state (offset-store ABI 3.2). A store that
    /// implements the four share-state methods below answers `true`; the default,
    /// `false`, makes the host refuse it as a share-state target.
    fn share_state_supported(&self) -> bool {
        false
    }
    /// Durably writes share-partition states, all together, each replacing its key's.
    fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), PluginError> {
        let _ = batch;
        Err(share_state_unsupported(Self::NAME))
    }
    /// `group`'s share-partition states of `partitions`; absent ones are left out.
    fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let _ = (group, partitions);
        Err(share_state_unsupported(Self::NAME))
    }
    /// Deletes `group`'s share-partition states of `partitions` (all of the group's when
    /// empty); returns how many existed.
    fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, PluginError> {
        let _ = (group, partitions);
        Err(share_state_unsupported(Self::NAME))
    }
    /// Up to `limit` share-partition states strictly after `after`, in key order.
    fn scan_share_state(
        &self,
        after: Option<&OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, PluginError> {
        let _ = (after, limit);
        Err(share_state_unsupported(Self::NAME))
    }
}

fn share_state_unsupported(name: &str) -> PluginError {
    PluginError::unsupported(format!("offset store `{name}` keeps no share-group state"))
}

/// An authorizer; see [`crate::authorizer`] for the contract. Methods are called
/// concurrently from several host threads, on the request path: answer from memory.
pub trait AuthorizerPlugin: PluginInfo + Send + Sync + Sized + 'static {
    /// Creates an instance (reading its ACLs, if it keeps any). Errors: `InvalidConfig`,
    /// `Unavailable`.
    fn new(ctx: &PluginContext) -> Result<Self, PluginError>;

    /// One decision per action, in order.
    fn authorize(
        &self,
        context: &RequestContext,
        actions: &[Action],
    ) -> Result<Vec<Decision>, PluginError>;

    /// Whether the principal may do `operation` on some resource of `resource_type`
    /// (KIP-679). The default asks [`authorize`](Self::authorize) about the wildcard
    /// resource `*` of the type, which is right for an authorizer without prefixes or
    /// per-name rules and conservative otherwise.
    fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> Result<Decision, PluginError> {
        let action = Action {
            resource_type,
            resource_name: crate::authorizer::WILDCARD.into(),
            pattern_type: crate::authorizer::PatternType::Literal,
            operation,
            reference_count: 1,
            log_if_allowed: false,
            log_if_denied: false,
        };
        let decisions = self.authorize(context, std::slice::from_ref(&action))?;
        Ok(decisions.first().copied().unwrap_or(Decision::DENIED))
    }

    /// The bindings `filter` selects. The default: `Unsupported` (no ACLs kept).
    fn acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, PluginError> {
        let _ = filter;
        Err(no_acls::<Self>())
    }

    /// Creates bindings durably; one result per binding. The default: `Unsupported`.
    fn create_acls(&self, bindings: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, PluginError> {
        let _ = bindings;
        Err(no_acls::<Self>())
    }

    /// Deletes what each filter selects, durably; one result per filter. The default:
    /// `Unsupported`.
    fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<AclDeleteResult>, PluginError> {
        let _ = filters;
        Err(no_acls::<Self>())
    }
}

fn no_acls<T: PluginInfo>() -> PluginError {
    PluginError::unsupported(format!("authorizer `{}` keeps no ACLs", T::NAME))
}

/// A group coordinator as a sans-IO state machine; see [`crate::coordinator`].
pub trait CoordinatorPlugin: PluginInfo + Send + Sized + 'static {
    /// Starts a standalone coordinator.
    fn startup(ctx: &PluginContext, startup: CoordinatorStartup) -> Result<Self, PluginError>;
    /// Starts a coordinator in cluster mode. The default refuses: a coordinator that
    /// supports ZooKeeper mode overrides it.
    fn startup_zookeeper(
        ctx: &PluginContext,
        startup: ZkCoordinatorStartup,
    ) -> Result<Self, PluginError> {
        let _ = (ctx, startup);
        Err(PluginError::invalid_config(format!(
            "coordinator plugin `{}` does not support ZooKeeper mode",
            Self::NAME
        )))
    }
    /// Feeds one input; returns the outputs.
    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, PluginError>;
    /// An input of a variant added by a later coordinator ABI minor than this plugin was
    /// built against (the host may send it before it knows the plugin ignores it). The
    /// default logs it once per call at debug level and returns no outputs; override it
    /// to refuse instead.
    fn unknown_input(
        &mut self,
        now_ms: u64,
        input: &CoordinatorInputNE,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        let _ = now_ms;
        tracing::debug!(
            ?input,
            "skipping a coordinator input this plugin does not know"
        );
        Ok(Vec::new())
    }
    /// The next deadline (ms), if any.
    fn poll_timeout(&self) -> Option<u64>;
    /// Slot gained (cluster mode); its previous owner has not coordinated it for at
    /// least `stopped_ms` ms.
    fn slot_gained(
        &mut self,
        now_ms: u64,
        slot: u32,
        stopped_ms: u64,
    ) -> Result<Vec<CoordinatorOutput>, PluginError>;
    /// Slot lost (cluster mode).
    fn slot_lost(&mut self, now_ms: u64, slot: u32) -> Result<Vec<CoordinatorOutput>, PluginError>;
    /// Broker stopping.
    fn shutdown(&mut self, now_ms: u64) -> Result<Vec<CoordinatorOutput>, PluginError>;
}

/// Generates the `abi_stable` library header exporting `$root` (a function returning a
/// root-module reference). Used by the `export_*` macros.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_root_module {
    ($module:ty, $root:expr) => {
        /// The `abi_stable` library header of this plugin (generated by drover-abi).
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static _1as_0lib_1header_0root_bmodule_bloader:
            $crate::__private::abi_stable::library::LibHeader = {
            extern "C" fn __drover_root_module(
            ) -> $crate::__private::abi_stable::library::RootModuleResult {
                $crate::__private::abi_stable::library::__call_root_module_loader($root)
            }
            // SAFETY: `__drover_root_module` returns a root module of type `$module`,
            // which is what the header declares.
            unsafe {
                $crate::__private::abi_stable::library::LibHeader::from_constructor::<$module>(
                    __drover_root_module,
                    $crate::__private::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

/// Exports `$ty` (an [`AssignorPlugin`]) as this library's assignor root module.
/// Use once per `cdylib`.
#[macro_export]
macro_rules! export_assignor {
    ($ty:ty) => {
        $crate::__export_root_module!(
            $crate::assignor::AssignorModRef,
            $crate::sdk::assignor_root_module::<$ty>
        );
    };
}

/// Exports `$ty` (an [`OffsetStorePlugin`]) as this library's offset-store root module.
#[macro_export]
macro_rules! export_offset_store {
    ($ty:ty) => {
        $crate::__export_root_module!(
            $crate::offset_store::OffsetStoreModRef,
            $crate::sdk::offset_store_root_module::<$ty>
        );
    };
}

/// Exports `$ty` (an [`AuthorizerPlugin`]) as this library's authorizer root module.
#[macro_export]
macro_rules! export_authorizer {
    ($ty:ty) => {
        $crate::__export_root_module!(
            $crate::authorizer::AuthorizerModRef,
            $crate::sdk::authorizer_root_module::<$ty>
        );
    };
}

/// Exports `$ty` (a [`CoordinatorPlugin`]) as this library's coordinator root module.
#[macro_export]
macro_rules! export_coordinator {
    ($ty:ty) => {
        $crate::__export_root_module!(
            $crate::coordinator::CoordinatorModRef,
            $crate::sdk::coordinator_root_module::<$ty>
        );
    };
}
