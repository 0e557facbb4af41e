//! Creating plugin instances from loaded plugins: builds the [`HostServices`] of the
//! instance (log sink, config string, ZooKeeper session) and wraps the result in a handle.

use std::sync::Arc;

use abi_stable::std_types::{ROption, RString};
use drover_abi::{host::ZkSessionArc, HostServices, PluginKind};

use super::{
    error::LoadError,
    handle::{AssignorHandle, AuthorizerHandle, CoordinatorHandle, OffsetStoreHandle},
    loader::{LoadedPlugin, PluginModule},
    log_sink,
};

impl LoadedPlugin {
    fn services(&self, config: &str) -> HostServices {
        self.services_with(config, None)
    }

    fn services_with(&self, config: &str, zookeeper: Option<ZkSessionArc>) -> HostServices {
        HostServices {
            log: log_sink::for_plugin(&self.summary),
            config: RString::from(config),
            zookeeper: ROption::from(zookeeper),
        }
    }

    fn instantiate_error(&self, error: drover_abi::PluginError) -> LoadError {
        LoadError::Instantiate {
            path: self.path.clone(),
            name: self.summary.name.clone(),
            error,
        }
    }

    fn wrong_kind(&self, expected: PluginKind) -> LoadError {
        LoadError::WrongKind {
            path: self.path.clone(),
            expected,
            found: self.summary.kind,
        }
    }

    /// Creates an assignor instance with `config` (the plugin's TOML config string).
    pub fn new_assignor(&self, config: &str) -> Result<AssignorHandle, LoadError> {
        let PluginModule::Assignor(module) = self.module else {
            return Err(self.wrong_kind(PluginKind::Assignor));
        };
        let inner = (module.new())(self.services(config))
            .into_result()
            .map_err(|e| self.instantiate_error(e))?;
        Ok(AssignorHandle::new(Arc::new(self.summary.clone()), inner))
    }

    /// Starts the coordinator (standalone) with `config` and `startup`.
    pub fn start_coordinator(
        &self,
        config: &str,
        startup: drover_abi::coordinator::CoordinatorStartup,
    ) -> Result<CoordinatorHandle, LoadError> {
        let PluginModule::Coordinator(module) = self.module else {
            return Err(self.wrong_kind(PluginKind::Coordinator));
        };
        let inner = (module.startup())(self.services(config), startup)
            .into_result()
            .map_err(|e| self.instantiate_error(e))?;
        Ok(CoordinatorHandle::new(
            Arc::new(self.summary.clone()),
            inner,
        ))
    }

    /// Starts the coordinator in cluster mode with `config` and `startup` (slot count
    /// and the broker's ZooKeeper session); it owns no slot until `slot_gained`.
    pub fn start_coordinator_zookeeper(
        &self,
        config: &str,
        startup: drover_abi::coordinator::ZkCoordinatorStartup,
    ) -> Result<CoordinatorHandle, LoadError> {
        let PluginModule::Coordinator(module) = self.module else {
            return Err(self.wrong_kind(PluginKind::Coordinator));
        };
        let inner = (module.startup_zookeeper())(self.services(config), startup)
            .into_result()
            .map_err(|e| self.instantiate_error(e))?;
        Ok(CoordinatorHandle::new(
            Arc::new(self.summary.clone()),
            inner,
        ))
    }

    /// Opens an offset-store instance with `config`, standalone (no ZooKeeper session
    /// in its `HostServices`).
    pub fn open_offset_store(&self, config: &str) -> Result<OffsetStoreHandle, LoadError> {
        self.open_offset_store_with(config, None)
    }

    /// Opens an offset-store instance with `config` and, in cluster mode, the broker's
    /// ZooKeeper session (`HostServices.zookeeper`; see the host's
    /// `drover_host::cluster::session::for_plugins`). Errors: [`LoadError::WrongKind`] when
    /// the plugin is not an offset store, [`LoadError::Instantiate`] with the plugin's
    /// error when it refuses to open.
    pub fn open_offset_store_with(
        &self,
        config: &str,
        zookeeper: Option<ZkSessionArc>,
    ) -> Result<OffsetStoreHandle, LoadError> {
        let PluginModule::OffsetStore(module) = self.module else {
            return Err(self.wrong_kind(PluginKind::OffsetStore));
        };
        let inner = (module.open())(self.services_with(config, zookeeper))
            .into_result()
            .map_err(|e| self.instantiate_error(e))?;
        Ok(OffsetStoreHandle::new(
            Arc::new(self.summary.clone()),
            inner,
        ))
    }

    /// Creates an authorizer instance with `config` and, in cluster mode, the broker's
    /// ZooKeeper session (where an authorizer keeps ACLs every broker shares). Errors:
    /// [`LoadError::WrongKind`] when the plugin is not an authorizer,
    /// [`LoadError::Instantiate`] with the plugin's error when it refuses to start.
    pub fn new_authorizer(
        &self,
        config: &str,
        zookeeper: Option<ZkSessionArc>,
    ) -> Result<AuthorizerHandle, LoadError> {
        let PluginModule::Authorizer(module) = self.module else {
            return Err(self.wrong_kind(PluginKind::Authorizer));
        };
        let inner = (module.new())(self.services_with(config, zookeeper))
            .into_result()
            .map_err(|e| self.instantiate_error(e))?;
        Ok(AuthorizerHandle::new(Arc::new(self.summary.clone()), inner))
    }
}
