//! Host-side handles of plugin instances.
//!
//! A handle forwards calls to the instance through the ABI and enforces docs/design.md's
//! rule for panics: the SDK turns a panic into an `ErrorKind::Panicked` error, and the
//! handle then takes the instance out of service — every later call fails with
//! [`CallError::OutOfService`] without entering the plugin — and logs it once.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use abi_stable::{
    nonexhaustive_enum::NonExhaustive,
    std_types::{ROption, RResult, RSlice, RStr, RString, RVec},
};
use drover_abi::{
    assignor::AssignorArc,
    authorizer::{
        AclBinding, AclBindingFilter, AclCreateResult, AclDeleteResult, AclOperation, Action,
        AuthorizerArc, Decision, RequestContext, ResourceType,
    },
    coordinator::{CoordinatorOutput, CoordinatorOutputNE},
    offset_store::OffsetStoreArc,
    AssignInput, Assignment, ErrorKind, OffsetKey, OffsetRecord, PluginError, ShareStateRecord,
    TopicPartitions,
};

use super::{error::CallError, loader::PluginSummary};

/// Shared out-of-service state and the plugin's identity.
struct Guard {
    summary: Arc<PluginSummary>,
    out_of_service: AtomicBool,
    /// An offset store's `close` has been called (it is called once).
    closed: AtomicBool,
}

impl Guard {
    fn call<T>(&self, f: impl FnOnce() -> RResult<T, PluginError>) -> Result<T, CallError> {
        if self.out_of_service.load(Ordering::Acquire) {
            return Err(CallError::OutOfService {
                plugin: self.summary.name.clone(),
            });
        }
        f().into_result().map_err(|error| {
            if error.kind == ErrorKind::Panicked
                && !self.out_of_service.swap(true, Ordering::AcqRel)
            {
                tracing::error!(
                    plugin = %self.summary.name,
                    kind = %self.summary.kind,
                    "{}; instance taken out of service",
                    error.message
                );
            }
            CallError::Plugin {
                plugin: self.summary.name.clone(),
                error,
            }
        })
    }
}

/// A plugin instance `I` behind its panic guard. The kind-specific methods are on
/// [`AssignorHandle`], [`OffsetStoreHandle`], [`CoordinatorHandle`] and
/// [`AuthorizerHandle`].
pub struct PluginHandle<I> {
    guard: Guard,
    inner: I,
}

impl<I> PluginHandle<I> {
    pub(super) fn new(summary: Arc<PluginSummary>, inner: I) -> Self {
        PluginHandle {
            guard: Guard {
                summary,
                out_of_service: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            },
            inner,
        }
    }

    /// The plugin's manifest.
    pub fn summary(&self) -> &PluginSummary {
        &self.guard.summary
    }

    /// Whether the instance panicked and was taken out of service.
    pub fn is_out_of_service(&self) -> bool {
        self.guard.out_of_service.load(Ordering::Acquire)
    }
}

/// An assignor instance.
pub type AssignorHandle = PluginHandle<AssignorArc>;

impl AssignorHandle {
    /// Computes an assignment (see `drover_abi::assignor` for the contract).
    pub fn assign(&self, input: &AssignInput) -> Result<Assignment, CallError> {
        self.guard.call(|| self.inner.assign(input))
    }

    /// Computes an assignment with `context` (assignor ABI 3.1); an assignor built
    /// against 3.0 gets a plain `assign` (the ABI's default drops the context).
    pub fn assign_with_context(
        &self,
        input: &AssignInput,
        context: drover_abi::assignor::AssignContextRef<'_>,
    ) -> Result<Assignment, CallError> {
        self.guard
            .call(|| self.inner.assign_with_context(input, context))
    }

    /// The instance itself, for handing to the coordinator plugin.
    pub fn instance(&self) -> AssignorArc {
        self.inner.clone()
    }
}

/// An authorizer instance. Methods may be called from several threads at once. The
/// handle passes errors on; the host denies on any of them (fails closed).
pub type AuthorizerHandle = PluginHandle<AuthorizerArc>;

impl AuthorizerHandle {
    /// One decision per action, in order (see `drover_abi::authorizer`). A plugin that
    /// answers with another number of decisions is an error here
    /// ([`ErrorKind::Internal`]), so callers can zip decisions with actions.
    pub fn authorize(
        &self,
        context: &RequestContext,
        actions: &[Action],
    ) -> Result<Vec<Decision>, CallError> {
        let decisions = self
            .guard
            .call(|| self.inner.authorize(context, RSlice::from_slice(actions)))?;
        if decisions.len() != actions.len() {
            return Err(CallError::Plugin {
                plugin: self.summary().name.clone(),
                error: PluginError::new(
                    ErrorKind::Internal,
                    format!(
                        "authorize answered {} decisions for {} actions",
                        decisions.len(),
                        actions.len()
                    ),
                ),
            });
        }
        Ok(decisions.into_vec())
    }

    /// Whether the principal may do `operation` on some resource of `resource_type`
    /// (KIP-679).
    pub fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> Result<Decision, CallError> {
        self.guard
            .call(|| self.inner.authorize_any(context, resource_type, operation))
    }

    /// The bindings `filter` selects (`Unsupported` from an authorizer without ACLs).
    pub fn acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, CallError> {
        self.guard
            .call(|| self.inner.acls(filter))
            .map(RVec::into_vec)
    }

    /// Creates bindings durably; one result per binding.
    pub fn create_acls(
        &self,
        bindings: Vec<AclBinding>,
    ) -> Result<Vec<AclCreateResult>, CallError> {
        self.guard
            .call(|| self.inner.create_acls(RVec::from(bindings)))
            .map(RVec::into_vec)
    }

    /// Deletes what each filter selects, durably; one result per filter.
    pub fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<AclDeleteResult>, CallError> {
        self.guard
            .call(|| self.inner.delete_acls(RVec::from(filters)))
            .map(RVec::into_vec)
    }

    /// The instance itself, without this handle's guard (for `drover plugins test`,
    /// which runs the test kit's suite against the ABI trait object).
    pub fn instance(&self) -> AuthorizerArc {
        self.inner.clone()
    }
}

/// An offset-store instance. Methods may be called from several threads at once.
pub type OffsetStoreHandle = PluginHandle<OffsetStoreArc>;

impl OffsetStoreHandle {
    /// Durably commits a batch (all or nothing).
    pub fn commit(&self, batch: &[OffsetRecord]) -> Result<(), CallError> {
        self.guard
            .call(|| self.inner.commit(RSlice::from_slice(batch)))
    }

    /// Committed offsets of `group` for `partitions`; absent ones are left out.
    pub fn fetch(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<OffsetRecord>, CallError> {
        self.guard
            .call(|| {
                self.inner
                    .fetch(RStr::from_str(group), RSlice::from_slice(partitions))
            })
            .map(RVec::into_vec)
    }

    /// Every committed offset of `group`.
    pub fn fetch_group(&self, group: &str) -> Result<Vec<OffsetRecord>, CallError> {
        self.guard
            .call(|| self.inner.fetch_group(RStr::from_str(group)))
            .map(RVec::into_vec)
    }

    /// Every group with a committed offset, sorted.
    pub fn list_groups(&self) -> Result<Vec<String>, CallError> {
        self.guard
            .call(|| self.inner.list_groups())
            .map(|v| v.into_iter().map(RString::into_string).collect())
    }

    /// Deletes a group's offsets; returns how many were deleted.
    pub fn delete_group(&self, group: &str) -> Result<u64, CallError> {
        self.guard
            .call(|| self.inner.delete_group(RStr::from_str(group)))
    }

    /// Deletes `group`'s offsets of `partitions` in one durable step; returns how many
    /// existed. A store built against offset-store ABI 3.0, or one that does not offer
    /// it, fails with [`ErrorKind::Unsupported`] (the interface's default, no call into
    /// the plugin for a 3.0 store).
    pub fn delete_partitions(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, CallError> {
        self.guard.call(|| {
            self.inner
                .delete_partitions(RStr::from_str(group), RSlice::from_slice(partitions))
        })
    }

    /// Up to `limit` records strictly after `after`, in (group, topic, partition) order.
    pub fn scan(
        &self,
        after: Option<OffsetKey>,
        limit: u32,
    ) -> Result<Vec<OffsetRecord>, CallError> {
        self.guard
            .call(|| self.inner.scan(ROption::from(after), limit))
            .map(RVec::into_vec)
    }

    /// Makes acknowledged commits durable.
    pub fn flush(&self) -> Result<(), CallError> {
        self.guard.call(|| self.inner.flush())
    }

    /// Flushes and releases the backend. Only the first call reaches the plugin (the
    /// broker may hold one instance in several places: as a required store and as the
    /// active one); later calls return `Ok` at once.
    pub fn close(&self) -> Result<(), CallError> {
        if self.guard.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.guard.call(|| self.inner.close())
    }

    /// Whether the store keeps share-group state (offset-store ABI 3.2). A store built
    /// against an older minor answers `false` without a call into it (the interface's
    /// default), as does one out of service.
    pub fn share_state_supported(&self) -> bool {
        self.guard
            .call(|| RResult::ROk(self.inner.share_state_supported()))
            .unwrap_or(false)
    }

    /// Durably writes share-partition states, all together (offset-store ABI 3.2;
    /// [`ErrorKind::Unsupported`] from an older store).
    pub fn write_share_state(&self, batch: &[ShareStateRecord]) -> Result<(), CallError> {
        self.guard
            .call(|| self.inner.write_share_state(RSlice::from_slice(batch)))
    }

    /// `group`'s share-partition states of `partitions`; absent ones are left out.
    pub fn read_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<Vec<ShareStateRecord>, CallError> {
        self.guard
            .call(|| {
                self.inner
                    .read_share_state(RStr::from_str(group), RSlice::from_slice(partitions))
            })
            .map(RVec::into_vec)
    }

    /// Deletes `group`'s share-partition states of `partitions` (all of the group's when
    /// empty); returns how many existed.
    pub fn delete_share_state(
        &self,
        group: &str,
        partitions: &[TopicPartitions],
    ) -> Result<u64, CallError> {
        self.guard.call(|| {
            self.inner
                .delete_share_state(RStr::from_str(group), RSlice::from_slice(partitions))
        })
    }

    /// Up to `limit` share-partition states strictly after `after`, in key order.
    pub fn scan_share_state(
        &self,
        after: Option<OffsetKey>,
        limit: u32,
    ) -> Result<Vec<ShareStateRecord>, CallError> {
        self.guard
            .call(|| self.inner.scan_share_state(ROption::from(after), limit))
            .map(RVec::into_vec)
    }

    /// Whether [`OffsetStoreHandle::close`] has been called.
    pub fn is_closed(&self) -> bool {
        self.guard.closed.load(Ordering::Acquire)
    }

    /// The instance itself, without this handle's guard (for `drover plugins test`,
    /// which runs the test kit's suite against the ABI trait object).
    pub fn instance(&self) -> OffsetStoreArc {
        self.inner.clone()
    }
}

/// The outputs this build knows; one of a variant added by a later coordinator ABI minor
/// (which the loader's minor check rules out, so a bug in the plugin) is logged and
/// skipped (docs/plugins.md, "The coordinator contract", rule 6).
fn known_outputs(outputs: RVec<CoordinatorOutputNE>) -> Vec<CoordinatorOutput> {
    outputs
        .into_iter()
        .filter_map(|output| match output.into_enum() {
            Ok(output) => Some(output),
            Err(unknown) => {
                drover_rate_limit::warn_limited!(
                    "coordinator-unknown-output",
                    "skipping a coordinator output of a variant this broker does not know: {:?}",
                    unknown.into_inner()
                );
                None
            }
        })
        .collect()
}

/// The coordinator instance. Called from one thread at a time (the host's coordinator
/// driver); `&mut self` enforces it.
pub type CoordinatorHandle = PluginHandle<drover_abi::coordinator::CoordinatorBox>;

impl CoordinatorHandle {
    /// Feeds one input at `now_ms` (monotonic ms); returns the outputs to execute.
    pub fn handle(
        &mut self,
        now_ms: u64,
        input: drover_abi::coordinator::CoordinatorInput,
    ) -> Result<Vec<drover_abi::coordinator::CoordinatorOutput>, CallError> {
        let inner = &mut self.inner;
        let input = NonExhaustive::new(input);
        self.guard
            .call(|| inner.handle(now_ms, input))
            .map(known_outputs)
    }

    /// Cluster mode: this broker now owns coordinator slot `slot`, whose previous owner
    /// has not coordinated it for at least `stopped_ms` ms.
    pub fn slot_gained(
        &mut self,
        now_ms: u64,
        slot: u32,
        stopped_ms: u64,
    ) -> Result<Vec<drover_abi::coordinator::CoordinatorOutput>, CallError> {
        let inner = &mut self.inner;
        self.guard
            .call(|| inner.slot_gained(now_ms, slot, stopped_ms))
            .map(known_outputs)
    }

    /// Cluster mode: this broker no longer owns coordinator slot `slot`.
    pub fn slot_lost(
        &mut self,
        now_ms: u64,
        slot: u32,
    ) -> Result<Vec<drover_abi::coordinator::CoordinatorOutput>, CallError> {
        let inner = &mut self.inner;
        self.guard
            .call(|| inner.slot_lost(now_ms, slot))
            .map(known_outputs)
    }

    /// The broker is stopping: the coordinator's final outputs. No call follows.
    pub fn shutdown(
        &mut self,
        now_ms: u64,
    ) -> Result<Vec<drover_abi::coordinator::CoordinatorOutput>, CallError> {
        let inner = &mut self.inner;
        self.guard
            .call(|| inner.shutdown(now_ms))
            .map(known_outputs)
    }

    /// The next deadline (monotonic ms), if any.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.is_out_of_service() {
            return None;
        }
        self.inner.poll_timeout().into_option()
    }
}
