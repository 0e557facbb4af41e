//! Adapts the SDK's plain traits to the `#[sabi_trait]` interfaces and builds the root
//! modules the export macros publish.
//!
//! Every call goes through [`guard`], and so does dropping the instance: the adapter
//! holds it in a [`ManuallyDrop`] and drops it inside `catch_unwind` in its own `Drop`,
//! since a panic unwinding out of abi_stable's `extern "C"` drop functions would abort
//! the host. After any panic the adapter is *poisoned*: every later call returns an
//! [`ErrorKind::Panicked`] error without entering the plugin, so the host takes the
//! instance out of service even when the panic happened in a method that cannot return
//! an error (the coordinator's `poll_timeout`).

use std::{
    mem::ManuallyDrop,
    panic::{catch_unwind, AssertUnwindSafe},
    sync::atomic::{AtomicBool, Ordering},
};

use abi_stable::{
    nonexhaustive_enum::NonExhaustive,
    prefix_type::PrefixTypeTrait,
    sabi_trait::TD_Opaque,
    std_types::{RArc, RBox, ROption, RResult, RSlice, RStr, RString, RVec},
};

use super::{
    guard, log_bridge, manifest, open_manifest, AssignorPlugin, AuthorizerPlugin,
    CoordinatorPlugin, OffsetStorePlugin, PluginContext,
};
use crate::{
    assignor::{
        AssignContextRef, AssignInput, Assignment, Assignor, AssignorArc, AssignorMod,
        AssignorModRef, Assignor_TO,
    },
    authorizer::{
        AclBinding, AclBindingFilter, AclCreateResult, AclDeleteResult, AclOperation, Action,
        Authorizer, AuthorizerArc, AuthorizerMod, AuthorizerModRef, Authorizer_TO, Decision,
        RequestContext, ResourceType,
    },
    coordinator::{
        Coordinator, CoordinatorBox, CoordinatorInputNE, CoordinatorMod, CoordinatorModRef,
        CoordinatorOutput, CoordinatorOutputNE, CoordinatorStartup, Coordinator_TO,
        ZkCoordinatorStartup,
    },
    error::{ErrorKind, PluginError},
    host::HostServices,
    manifest::{ManifestKind, PluginKind},
    offset_store::{
        OffsetKey, OffsetRecord, OffsetStore, OffsetStoreArc, OffsetStoreMod, OffsetStoreModRef,
        OffsetStore_TO, ShareStateRecord,
    },
    types::TopicPartitions,
};

fn context(host: HostServices) -> PluginContext {
    log_bridge::install(&host.log);
    PluginContext {
        config: host.config.into_string(),
        zookeeper: host.zookeeper.into_option(),
    }
}

/// One plugin instance as the host sees it: the plugin's value, dropped under a panic
/// guard, and whether a call into it has panicked.
struct Adapter<T> {
    inner: ManuallyDrop<T>,
    poisoned: AtomicBool,
}

impl<T> Adapter<T> {
    fn new(inner: T) -> Self {
        Adapter {
            inner: ManuallyDrop::new(inner),
            poisoned: AtomicBool::new(false),
        }
    }

    fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Runs `result` (a guarded call); a `Panicked` error poisons the instance.
    fn record<R>(&self, result: Result<R, PluginError>) -> RResult<R, PluginError> {
        if let Err(e) = &result {
            if e.kind == ErrorKind::Panicked {
                self.poisoned.store(true, Ordering::Release);
            }
        }
        result.into()
    }

    /// Calls `f` with the instance, unless it is poisoned.
    fn call<R>(&self, f: impl FnOnce(&T) -> Result<R, PluginError>) -> RResult<R, PluginError> {
        if self.is_poisoned() {
            return RResult::RErr(poisoned());
        }
        self.record(guard(|| f(&self.inner)))
    }

    /// Calls `f` with the instance mutably, unless it is poisoned.
    fn call_mut<R>(
        &mut self,
        f: impl FnOnce(&mut T) -> Result<R, PluginError>,
    ) -> RResult<R, PluginError> {
        if self.is_poisoned() {
            return RResult::RErr(poisoned());
        }
        let result = guard(|| f(&mut self.inner));
        self.record(result)
    }
}

impl<T> Drop for Adapter<T> {
    fn drop(&mut self) {
        let inner = &mut self.inner;
        let dropped = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `inner` is dropped exactly once, here, and never used again: this is
            // the adapter's own destructor.
            unsafe { ManuallyDrop::drop(inner) }
        }));
        if dropped.is_err() {
            tracing::error!(
                "plugin instance panicked while being dropped; the panic was contained"
            );
        }
    }
}

/// The error of every call after a panic.
fn poisoned() -> PluginError {
    PluginError::new(
        ErrorKind::Panicked,
        "plugin instance is out of service: an earlier call panicked",
    )
}

/// The root module of assignor `T` (called by [`crate::export_assignor!`]).
pub fn assignor_root_module<T: AssignorPlugin>() -> AssignorModRef {
    AssignorMod {
        manifest: manifest::<T>(ManifestKind::Assignor),
        new: new_assignor::<T>,
    }
    .leak_into_prefix()
}

extern "C" fn new_assignor<T: AssignorPlugin>(
    host: HostServices,
) -> RResult<AssignorArc, PluginError> {
    guard(|| {
        let ctx = context(host);
        let inner = T::new(&ctx)?;
        Ok(RArc::new(Assignor_TO::from_ptr(
            RBox::new(Adapter::new(inner)),
            TD_Opaque,
        )))
    })
    .into()
}

impl<T: AssignorPlugin> Assignor for Adapter<T> {
    fn assign(&self, input: &AssignInput) -> RResult<Assignment, PluginError> {
        self.call(|t| t.assign(input))
    }

    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> RResult<Assignment, PluginError> {
        self.call(|t| t.assign_with_context(input, &super::assignor::Context::new(context)))
    }

    fn share_groups_supported(&self) -> bool {
        self.call(|t| Ok(t.share_groups_supported()))
            .into_result()
            .unwrap_or(false)
    }

    fn assign_share(
        &self,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> RResult<Assignment, PluginError> {
        self.call(|t| t.assign_share(input, &super::assignor::Context::new(context)))
    }
}

/// The root module of offset store `T` (called by [`crate::export_offset_store!`]).
pub fn offset_store_root_module<T: OffsetStorePlugin>() -> OffsetStoreModRef {
    OffsetStoreMod {
        manifest: manifest::<T>(ManifestKind::OffsetStore),
        open: open_offset_store::<T>,
    }
    .leak_into_prefix()
}

extern "C" fn open_offset_store<T: OffsetStorePlugin>(
    host: HostServices,
) -> RResult<OffsetStoreArc, PluginError> {
    guard(|| {
        let ctx = context(host);
        let inner = T::open(&ctx)?;
        Ok(RArc::new(OffsetStore_TO::from_ptr(
            RBox::new(Adapter::new(inner)),
            TD_Opaque,
        )))
    })
    .into()
}

impl<T: OffsetStorePlugin> OffsetStore for Adapter<T> {
    fn commit(&self, batch: RSlice<'_, OffsetRecord>) -> RResult<(), PluginError> {
        self.call(|t| t.commit(batch.as_slice()))
    }

    fn fetch(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<RVec<OffsetRecord>, PluginError> {
        self.call(|t| {
            t.fetch(group.as_str(), partitions.as_slice())
                .map(RVec::from)
        })
    }

    fn fetch_group(&self, group: RStr<'_>) -> RResult<RVec<OffsetRecord>, PluginError> {
        self.call(|t| t.fetch_group(group.as_str()).map(RVec::from))
    }

    fn list_groups(&self) -> RResult<RVec<RString>, PluginError> {
        self.call(|t| {
            t.list_groups()
                .map(|groups| groups.into_iter().map(RString::from).collect())
        })
    }

    fn delete_group(&self, group: RStr<'_>) -> RResult<u64, PluginError> {
        self.call(|t| t.delete_group(group.as_str()))
    }

    fn scan(
        &self,
        after: ROption<OffsetKey>,
        limit: u32,
    ) -> RResult<RVec<OffsetRecord>, PluginError> {
        self.call(|t| t.scan(after.as_ref().into_option(), limit).map(RVec::from))
    }

    fn flush(&self) -> RResult<(), PluginError> {
        self.call(|t| t.flush())
    }

    fn close(&self) -> RResult<(), PluginError> {
        self.call(|t| t.close())
    }

    fn delete_partitions(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<u64, PluginError> {
        self.call(|t| t.delete_partitions(group.as_str(), partitions.as_slice()))
    }

    fn share_state_supported(&self) -> bool {
        self.call(|t| Ok(t.share_state_supported()))
            .into_result()
            .unwrap_or(false)
    }

    fn write_share_state(&self, batch: RSlice<'_, ShareStateRecord>) -> RResult<(), PluginError> {
        self.call(|t| t.write_share_state(batch.as_slice()))
    }

    fn read_share_state(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<RVec<ShareStateRecord>, PluginError> {
        self.call(|t| {
            t.read_share_state(group.as_str(), partitions.as_slice())
                .map(RVec::from)
        })
    }

    fn delete_share_state(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<u64, PluginError> {
        self.call(|t| t.delete_share_state(group.as_str(), partitions.as_slice()))
    }

    fn scan_share_state(
        &self,
        after: ROption<OffsetKey>,
        limit: u32,
    ) -> RResult<RVec<ShareStateRecord>, PluginError> {
        self.call(|t| {
            t.scan_share_state(after.as_ref().into_option(), limit)
                .map(RVec::from)
        })
    }
}

/// The root module of coordinator `T` (called by [`crate::export_coordinator!`]).
pub fn coordinator_root_module<T: CoordinatorPlugin>() -> CoordinatorModRef {
    CoordinatorMod {
        manifest: manifest::<T>(ManifestKind::Coordinator),
        startup: startup::<T>,
        startup_zookeeper: startup_zookeeper::<T>,
    }
    .leak_into_prefix()
}

extern "C" fn startup<T: CoordinatorPlugin>(
    host: HostServices,
    startup: CoordinatorStartup,
) -> RResult<CoordinatorBox, PluginError> {
    guard(|| {
        let ctx = context(host);
        let inner = T::startup(&ctx, startup)?;
        Ok(Coordinator_TO::from_ptr(
            RBox::new(Adapter::new(inner)),
            TD_Opaque,
        ))
    })
    .into()
}

extern "C" fn startup_zookeeper<T: CoordinatorPlugin>(
    host: HostServices,
    startup: ZkCoordinatorStartup,
) -> RResult<CoordinatorBox, PluginError> {
    guard(|| {
        let ctx = context(host);
        let inner = T::startup_zookeeper(&ctx, startup)?;
        Ok(Coordinator_TO::from_ptr(
            RBox::new(Adapter::new(inner)),
            TD_Opaque,
        ))
    })
    .into()
}

type Outputs = RResult<RVec<CoordinatorOutputNE>, PluginError>;

/// Wraps the plugin's outputs for the boundary.
fn wrap(outputs: Vec<CoordinatorOutput>) -> RVec<CoordinatorOutputNE> {
    outputs.into_iter().map(NonExhaustive::new).collect()
}

impl<T: CoordinatorPlugin> Coordinator for Adapter<T> {
    fn handle(&mut self, now_ms: u64, input: CoordinatorInputNE) -> Outputs {
        self.call_mut(|t| {
            match input.into_enum() {
                Ok(input) => t.handle(now_ms, input),
                Err(unknown) => t.unknown_input(now_ms, &unknown.into_inner()),
            }
            .map(wrap)
        })
    }

    /// A panic here cannot be returned as an error: it is recorded, `RNone` is returned,
    /// and every later call fails with `Panicked`.
    fn poll_timeout(&self) -> ROption<u64> {
        if self.is_poisoned() {
            return ROption::RNone;
        }
        match self.call(|t| Ok(t.poll_timeout())) {
            RResult::ROk(deadline) => deadline.into(),
            RResult::RErr(e) => {
                tracing::error!(
                    "poll_timeout failed ({e}); every later call of this coordinator fails"
                );
                ROption::RNone
            }
        }
    }

    fn slot_gained(&mut self, now_ms: u64, slot: u32, stopped_ms: u64) -> Outputs {
        self.call_mut(|t| t.slot_gained(now_ms, slot, stopped_ms).map(wrap))
    }

    fn slot_lost(&mut self, now_ms: u64, slot: u32) -> Outputs {
        self.call_mut(|t| t.slot_lost(now_ms, slot).map(wrap))
    }

    fn shutdown(&mut self, now_ms: u64) -> Outputs {
        self.call_mut(|t| t.shutdown(now_ms).map(wrap))
    }
}

/// The root module of authorizer `T` (called by [`crate::export_authorizer!`]).
pub fn authorizer_root_module<T: AuthorizerPlugin>() -> AuthorizerModRef {
    AuthorizerMod {
        manifest: open_manifest::<T>(PluginKind::Authorizer),
        new: new_authorizer::<T>,
    }
    .leak_into_prefix()
}

extern "C" fn new_authorizer<T: AuthorizerPlugin>(
    host: HostServices,
) -> RResult<AuthorizerArc, PluginError> {
    guard(|| {
        let ctx = context(host);
        let inner = T::new(&ctx)?;
        Ok(RArc::new(Authorizer_TO::from_ptr(
            RBox::new(Adapter::new(inner)),
            TD_Opaque,
        )))
    })
    .into()
}

impl<T: AuthorizerPlugin> Authorizer for Adapter<T> {
    fn authorize(
        &self,
        context: &RequestContext,
        actions: RSlice<'_, Action>,
    ) -> RResult<RVec<Decision>, PluginError> {
        self.call(|t| t.authorize(context, actions.as_slice()).map(RVec::from))
    }

    fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> RResult<Decision, PluginError> {
        self.call(|t| t.authorize_any(context, resource_type, operation))
    }

    fn acls(&self, filter: &AclBindingFilter) -> RResult<RVec<AclBinding>, PluginError> {
        self.call(|t| t.acls(filter).map(RVec::from))
    }

    fn create_acls(
        &self,
        bindings: RVec<AclBinding>,
    ) -> RResult<RVec<AclCreateResult>, PluginError> {
        self.call(|t| t.create_acls(bindings.into_vec()).map(RVec::from))
    }

    fn delete_acls(
        &self,
        filters: RVec<AclBindingFilter>,
    ) -> RResult<RVec<AclDeleteResult>, PluginError> {
        self.call(|t| t.delete_acls(filters.into_vec()).map(RVec::from))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use abi_stable::std_types::RNone;

    use super::*;
    use crate::coordinator::CoordinatorInput;
    use crate::{
        host::{LogLevel, LogSink, LogSink_TO},
        sdk::PluginInfo,
    };

    /// Prints forwarded events, so test diagnostics stay visible once the SDK's panic
    /// hook is installed.
    struct StderrSink;

    impl LogSink for StderrSink {
        fn log(&self, level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
            eprintln!("[{level:?} {target}] {message}");
        }
        fn max_level(&self) -> LogLevel {
            LogLevel::Info
        }
    }

    fn services(config: &str) -> HostServices {
        HostServices {
            log: RArc::new(LogSink_TO::from_ptr(RBox::new(StderrSink), TD_Opaque)),
            config: RString::from(config),
            zookeeper: RNone,
        }
    }

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    /// Panics in `poll_timeout`, and in `Drop` when its config says `panic_on_drop`.
    struct Fragile {
        panic_on_drop: bool,
    }

    impl Drop for Fragile {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
            if self.panic_on_drop {
                panic!("fragile dropped");
            }
        }
    }

    impl PluginInfo for Fragile {
        const NAME: &'static str = "fragile";
        const VERSION: &'static str = "0.0.0";
        const DESCRIPTION: &'static str = "test";
    }

    impl CoordinatorPlugin for Fragile {
        fn startup(ctx: &PluginContext, _: CoordinatorStartup) -> Result<Self, PluginError> {
            Ok(Fragile {
                panic_on_drop: ctx.config.contains("panic_on_drop"),
            })
        }
        fn handle(
            &mut self,
            _: u64,
            _: CoordinatorInput,
        ) -> Result<Vec<CoordinatorOutput>, PluginError> {
            Ok(Vec::new())
        }
        fn poll_timeout(&self) -> Option<u64> {
            panic!("poll_timeout exploded")
        }
        fn slot_gained(
            &mut self,
            _: u64,
            _: u32,
            _: u64,
        ) -> Result<Vec<CoordinatorOutput>, PluginError> {
            Ok(Vec::new())
        }
        fn slot_lost(&mut self, _: u64, _: u32) -> Result<Vec<CoordinatorOutput>, PluginError> {
            Ok(Vec::new())
        }
        fn shutdown(&mut self, _: u64) -> Result<Vec<CoordinatorOutput>, PluginError> {
            Ok(Vec::new())
        }
    }

    impl AssignorPlugin for Fragile {
        fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
            Ok(Fragile {
                panic_on_drop: ctx.config.contains("panic_on_drop"),
            })
        }
        fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
            if input.group.as_str() == "panic" {
                panic!("assign exploded");
            }
            Ok(Assignment::default())
        }
    }

    fn startup_input() -> CoordinatorStartup {
        CoordinatorStartup {
            broker_id: 0,
            assignors: RVec::new(),
            default_assignor: RString::new(),
            topics: RVec::new(),
        }
    }

    #[test]
    fn a_panic_in_poll_timeout_poisons_the_coordinator() {
        let module = coordinator_root_module::<Fragile>();
        let mut coordinator = (module.startup())(services(""), startup_input()).unwrap();
        coordinator
            .handle(1, NonExhaustive::new(CoordinatorInput::TimerFired))
            .into_result()
            .expect("works before the panic");
        assert_eq!(coordinator.poll_timeout(), ROption::RNone);
        for result in [
            coordinator.handle(2, NonExhaustive::new(CoordinatorInput::TimerFired)),
            coordinator.slot_gained(2, 0, 0),
            coordinator.slot_lost(2, 0),
            coordinator.shutdown(2),
        ] {
            let e = result.into_result().unwrap_err();
            assert_eq!(e.kind, ErrorKind::Panicked, "{e}");
        }
        assert_eq!(coordinator.poll_timeout(), ROption::RNone);
    }

    #[test]
    fn a_panic_in_drop_is_contained() {
        let before = DROPS.load(Ordering::SeqCst);
        let module = coordinator_root_module::<Fragile>();
        let coordinator = (module.startup())(services("panic_on_drop"), startup_input()).unwrap();
        drop(coordinator); // would abort the test binary if the panic escaped

        let module = assignor_root_module::<Fragile>();
        let assignor = (module.new())(services("panic_on_drop")).unwrap();
        let input = AssignInput {
            group: RString::from("g"),
            members: RVec::new(),
            topics: RVec::new(),
        };
        assignor.assign(&input).into_result().unwrap();
        drop(assignor);
        assert!(DROPS.load(Ordering::SeqCst) >= before + 2);
    }

    #[test]
    fn after_a_panic_an_assignor_fails_every_call_without_running() {
        let module = assignor_root_module::<Fragile>();
        let assignor = (module.new())(services("")).unwrap();
        let mut input = AssignInput {
            group: RString::from("panic"),
            members: RVec::new(),
            topics: RVec::new(),
        };
        let e = assignor.assign(&input).into_result().unwrap_err();
        assert!(e.message.contains("assign exploded"), "{e}");
        input.group = RString::from("calm");
        let e = assignor.assign(&input).into_result().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Panicked);
        assert!(e.message.contains("out of service"), "{e}");
    }
}
