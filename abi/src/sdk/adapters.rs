//! Adapts the SDK's plain traits to the `#[sabi_trait]` interfaces and builds the root
//! modules the export macros publish. Every call goes through [`guard`].

use abi_stable::{
    prefix_type::PrefixTypeTrait,
    sabi_trait::TD_Opaque,
    std_types::{RArc, RBox, ROption, RResult, RSlice, RStr, RString, RVec},
};

use super::{
    guard, log_bridge, manifest, AssignorPlugin, CoordinatorPlugin, OffsetStorePlugin,
    PluginContext,
};
use crate::{
    assignor::{
        AssignInput, Assignment, Assignor, AssignorArc, AssignorMod, AssignorModRef, Assignor_TO,
    },
    coordinator::{
        Coordinator, CoordinatorBox, CoordinatorInput, CoordinatorMod, CoordinatorModRef,
        CoordinatorOutput, CoordinatorStartup, Coordinator_TO, ZkCoordinatorStartup,
    },
    error::PluginError,
    host::HostServices,
    manifest::PluginKind,
    offset_store::{
        OffsetKey, OffsetRecord, OffsetStore, OffsetStoreArc, OffsetStoreMod, OffsetStoreModRef,
        OffsetStore_TO,
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

/// The root module of assignor `T` (called by [`crate::export_assignor!`]).
pub fn assignor_root_module<T: AssignorPlugin>() -> AssignorModRef {
    AssignorMod {
        manifest: manifest::<T>(PluginKind::Assignor),
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
            RBox::new(AssignorAdapter(inner)),
            TD_Opaque,
        )))
    })
    .into()
}

struct AssignorAdapter<T>(T);

impl<T: AssignorPlugin> Assignor for AssignorAdapter<T> {
    fn assign(&self, input: &AssignInput) -> RResult<Assignment, PluginError> {
        guard(|| self.0.assign(input)).into()
    }
}

/// The root module of offset store `T` (called by [`crate::export_offset_store!`]).
pub fn offset_store_root_module<T: OffsetStorePlugin>() -> OffsetStoreModRef {
    OffsetStoreMod {
        manifest: manifest::<T>(PluginKind::OffsetStore),
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
            RBox::new(StoreAdapter(inner)),
            TD_Opaque,
        )))
    })
    .into()
}

struct StoreAdapter<T>(T);

impl<T: OffsetStorePlugin> OffsetStore for StoreAdapter<T> {
    fn commit(&self, batch: RSlice<'_, OffsetRecord>) -> RResult<(), PluginError> {
        guard(|| self.0.commit(batch.as_slice())).into()
    }

    fn fetch(
        &self,
        group: RStr<'_>,
        partitions: RSlice<'_, TopicPartitions>,
    ) -> RResult<RVec<OffsetRecord>, PluginError> {
        guard(|| {
            self.0
                .fetch(group.as_str(), partitions.as_slice())
                .map(RVec::from)
        })
        .into()
    }

    fn fetch_group(&self, group: RStr<'_>) -> RResult<RVec<OffsetRecord>, PluginError> {
        guard(|| self.0.fetch_group(group.as_str()).map(RVec::from)).into()
    }

    fn list_groups(&self) -> RResult<RVec<RString>, PluginError> {
        guard(|| {
            self.0
                .list_groups()
                .map(|groups| groups.into_iter().map(RString::from).collect())
        })
        .into()
    }

    fn delete_group(&self, group: RStr<'_>) -> RResult<u64, PluginError> {
        guard(|| self.0.delete_group(group.as_str())).into()
    }

    fn scan(
        &self,
        after: ROption<OffsetKey>,
        limit: u32,
    ) -> RResult<RVec<OffsetRecord>, PluginError> {
        guard(|| {
            self.0
                .scan(after.as_ref().into_option(), limit)
                .map(RVec::from)
        })
        .into()
    }

    fn flush(&self) -> RResult<(), PluginError> {
        guard(|| self.0.flush()).into()
    }

    fn close(&self) -> RResult<(), PluginError> {
        guard(|| self.0.close()).into()
    }
}

/// The root module of coordinator `T` (called by [`crate::export_coordinator!`]).
pub fn coordinator_root_module<T: CoordinatorPlugin>() -> CoordinatorModRef {
    CoordinatorMod {
        manifest: manifest::<T>(PluginKind::Coordinator),
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
            RBox::new(CoordinatorAdapter(inner)),
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
            RBox::new(CoordinatorAdapter(inner)),
            TD_Opaque,
        ))
    })
    .into()
}

struct CoordinatorAdapter<T>(T);

type Outputs = RResult<RVec<CoordinatorOutput>, PluginError>;

impl<T: CoordinatorPlugin> Coordinator for CoordinatorAdapter<T> {
    fn handle(&mut self, now_ms: u64, input: CoordinatorInput) -> Outputs {
        guard(|| self.0.handle(now_ms, input).map(RVec::from)).into()
    }

    fn poll_timeout(&self) -> ROption<u64> {
        guard(|| Ok(self.0.poll_timeout())).ok().flatten().into()
    }

    fn slot_gained(&mut self, now_ms: u64, slot: u32) -> Outputs {
        guard(|| self.0.slot_gained(now_ms, slot).map(RVec::from)).into()
    }

    fn slot_lost(&mut self, now_ms: u64, slot: u32) -> Outputs {
        guard(|| self.0.slot_lost(now_ms, slot).map(RVec::from)).into()
    }

    fn shutdown(&mut self, now_ms: u64) -> Outputs {
        guard(|| self.0.shutdown(now_ms).map(RVec::from)).into()
    }
}
