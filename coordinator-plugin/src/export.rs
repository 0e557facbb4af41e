//! The cdylib export: the sans-IO core behind `drover-abi`'s coordinator root module.
//! A thin adapter — ABI values are converted by [`crate::abi`], the only thing added is
//! the wall-clock stamp of commit records (the core has no clock).
//!
//! Configuration: the plugin's config string (the operator's
//! `[plugins.config.drover-coordinator]` table, as TOML) is read with
//! [`CoordinatorConfig::from_toml`]; an empty string gives the defaults. The host's own
//! default assignor ([`CoordinatorStartup::default_assignor`]), when not empty, then
//! replaces the config's `default_assignor`, so the broker-wide setting wins.
//!
//! Standalone (`startup`) the core serves every group. In cluster mode
//! (`startup_zookeeper`) it starts with [`CoordinatorConfig::slot_count`] set to the
//! host's [`ZkCoordinatorStartup::slot_count`], owning no slot; the host's
//! `slot_gained` / `slot_lost` calls become [`Input::SlotGained`] /
//! [`Input::SlotLost`] (docs/protocol.md §6.8). The ZooKeeper session is kept (the
//! core has no use for it yet: ownership comes from the host's election). A slot call
//! on a standalone coordinator, or for a slot at or above the slot count, is refused
//! with an `InvalidInput` error and changes nothing.

use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorOutput, CoordinatorStartup, ZkCoordinatorStartup},
    host::ZkSessionArc,
    sdk::{CoordinatorPlugin, PluginContext, PluginInfo},
    PluginError,
};

use crate::{
    abi::{input_from_abi, output_to_abi, topics_from_abi},
    AssignorSet, Coordinator, CoordinatorConfig, Input, Output,
};

/// The exported coordinator plugin, named `drover-coordinator`.
pub struct ExportedCoordinator {
    core: Coordinator,
    /// Cluster mode: the broker's ZooKeeper session, kept for the coordinator's
    /// lifetime (not used by the core yet).
    _zookeeper: Option<ZkSessionArc>,
}

impl PluginInfo for ExportedCoordinator {
    const NAME: &'static str = "drover-coordinator";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "consumer group coordinator: native protocol of the original design (sans-IO core)";
}

/// Wall-clock ms since the Unix epoch, for commit records.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn to_abi(outputs: Vec<Output>) -> Vec<CoordinatorOutput> {
    let now = wall_clock_ms();
    outputs
        .into_iter()
        .filter_map(|o| output_to_abi(o, now))
        .collect()
}

impl ExportedCoordinator {
    /// Both startups: the plugin config, the host's default assignor, the assignors
    /// and topics; `slot_count` for cluster mode.
    fn start(
        ctx: &PluginContext,
        startup: CoordinatorStartup,
        slot_count: Option<u32>,
        zookeeper: Option<ZkSessionArc>,
    ) -> Result<Self, PluginError> {
        let mut config = CoordinatorConfig::from_toml(&ctx.config)
            .map_err(|e| PluginError::invalid_config(format!("{}: {e}", Self::NAME)))?;
        if slot_count == Some(0) {
            return Err(PluginError::invalid_config(format!(
                "{}: the slot count must be at least 1",
                Self::NAME
            )));
        }
        config.slot_count = slot_count;
        if !startup.default_assignor.is_empty() {
            let host = startup.default_assignor.as_str();
            if config.default_assignor != host
                && config.default_assignor != CoordinatorConfig::default().default_assignor
            {
                tracing::warn!(
                    plugin_config = config.default_assignor,
                    host = host,
                    "default_assignor: the host's setting replaces the plugin config's"
                );
            }
            config.default_assignor = host.to_owned();
        }
        let mut assignors = AssignorSet::new();
        for named in startup.assignors.iter() {
            assignors.insert(named.name.as_str(), named.assignor.clone());
        }
        let mut core = Coordinator::new(config, assignors)
            .map_err(|e| PluginError::invalid_config(e.to_string()))?;
        // No group exists yet, so this yields no outputs.
        let _ = core.handle(
            0,
            Input::TopicsChanged {
                topics: topics_from_abi(&startup.topics),
            },
        );
        match slot_count {
            None => tracing::info!(
                broker = startup.broker_id,
                assignors = startup.assignors.len(),
                topics = startup.topics.len(),
                "coordinator started (standalone)"
            ),
            Some(slots) => tracing::info!(
                broker = startup.broker_id,
                assignors = startup.assignors.len(),
                topics = startup.topics.len(),
                slots,
                takeover_wait_ms = core.config().takeover_wait_ms(),
                "coordinator started (cluster mode, no slot owned yet)"
            ),
        }
        Ok(ExportedCoordinator {
            core,
            _zookeeper: zookeeper,
        })
    }

    /// Checks a slot call: cluster mode, slot in range.
    fn check_slot(&self, slot: u32) -> Result<(), PluginError> {
        match self.core.config().slot_count {
            None => Err(PluginError::invalid_input(format!(
                "{}: slot {slot}: this coordinator runs standalone (started without ZooKeeper)",
                Self::NAME
            ))),
            Some(count) if slot >= count => Err(PluginError::invalid_input(format!(
                "{}: slot {slot} is out of range (slot count {count})",
                Self::NAME
            ))),
            Some(_) => Ok(()),
        }
    }
}

impl CoordinatorPlugin for ExportedCoordinator {
    fn startup(ctx: &PluginContext, startup: CoordinatorStartup) -> Result<Self, PluginError> {
        Self::start(ctx, startup, None, None)
    }

    fn startup_zookeeper(
        ctx: &PluginContext,
        startup: ZkCoordinatorStartup,
    ) -> Result<Self, PluginError> {
        let ZkCoordinatorStartup {
            base,
            slot_count,
            session,
        } = startup;
        Self::start(ctx, base, Some(slot_count), Some(session))
    }

    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        if let CoordinatorInput::AssignorsChanged {
            assignors,
            default_assignor,
        } = input
        {
            let set: AssignorSet = assignors.into_iter().collect();
            self.core.replace_assignors(set, default_assignor.as_str());
            return Ok(Vec::new());
        }
        match input_from_abi(input) {
            Some(input) => Ok(to_abi(self.core.handle(now_ms, input))),
            None => Ok(Vec::new()),
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.core.poll_timeout()
    }

    fn slot_gained(
        &mut self,
        now_ms: u64,
        slot: u32,
        stopped_ms: u64,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        self.check_slot(slot)?;
        let input = Input::SlotGained { slot, stopped_ms };
        Ok(to_abi(self.core.handle(now_ms, input)))
    }

    fn slot_lost(&mut self, now_ms: u64, slot: u32) -> Result<Vec<CoordinatorOutput>, PluginError> {
        self.check_slot(slot)?;
        Ok(to_abi(self.core.handle(now_ms, Input::SlotLost { slot })))
    }

    fn shutdown(&mut self, _now_ms: u64) -> Result<Vec<CoordinatorOutput>, PluginError> {
        // Commits are written as they happen (final offsets at once, heartbeat offsets
        // every commit interval); channels close with the broker's connections.
        Ok(Vec::new())
    }
}

drover_abi::export_coordinator!(ExportedCoordinator);

#[cfg(test)]
mod tests {
    use drover_abi::std_types::{RString, RVec};
    use drover_abi::ErrorKind;

    use super::*;

    fn start(config: &str, host_default: &str) -> Result<ExportedCoordinator, PluginError> {
        let ctx = PluginContext {
            config: config.to_owned(),
            zookeeper: None,
        };
        let startup = CoordinatorStartup {
            broker_id: 0,
            assignors: RVec::new(),
            default_assignor: RString::from(host_default),
            topics: RVec::new(),
        };
        ExportedCoordinator::startup(&ctx, startup)
    }

    #[test]
    fn the_plugin_config_is_read() {
        let c = start("rebalance_mode = \"eager\"\nrebalance_delay_ms = 7\n", "").unwrap();
        let config = c.core.config();
        assert_eq!(config.rebalance_mode, crate::RebalanceMode::Eager);
        assert_eq!(config.rebalance_delay_ms, 7);
        assert_eq!(config.default_assignor, "range");
        let c = start("", "").unwrap();
        assert_eq!(c.core.config(), &CoordinatorConfig::default());
    }

    #[test]
    fn the_hosts_default_assignor_wins() {
        let c = start("default_assignor = \"sticky\"", "round-robin").unwrap();
        assert_eq!(c.core.config().default_assignor, "round-robin");
        let c = start("default_assignor = \"sticky\"", "").unwrap();
        assert_eq!(c.core.config().default_assignor, "sticky");
    }

    /// A ZooKeeper session that fails every call (the coordinator makes none).
    struct NoZk;

    impl drover_abi::host::ZkSession for NoZk {
        fn session_id(&self) -> i64 {
            7
        }
        fn get(
            &self,
            _: drover_abi::std_types::RStr<'_>,
        ) -> drover_abi::std_types::RResult<
            drover_abi::std_types::ROption<drover_abi::host::ZkData>,
            PluginError,
        > {
            drover_abi::std_types::RResult::RErr(PluginError::unavailable("no zookeeper"))
        }
        fn children(
            &self,
            _: drover_abi::std_types::RStr<'_>,
        ) -> drover_abi::std_types::RResult<RVec<RString>, PluginError> {
            drover_abi::std_types::RResult::RErr(PluginError::unavailable("no zookeeper"))
        }
        fn create(
            &self,
            _: drover_abi::std_types::RStr<'_>,
            _: drover_abi::std_types::RSlice<'_, u8>,
            _: drover_abi::host::ZkCreateMode,
        ) -> drover_abi::std_types::RResult<RString, PluginError> {
            drover_abi::std_types::RResult::RErr(PluginError::unavailable("no zookeeper"))
        }
        fn set_data(
            &self,
            _: drover_abi::std_types::RStr<'_>,
            _: drover_abi::std_types::RSlice<'_, u8>,
            _: i32,
        ) -> drover_abi::std_types::RResult<i32, PluginError> {
            drover_abi::std_types::RResult::RErr(PluginError::unavailable("no zookeeper"))
        }
        fn delete(
            &self,
            _: drover_abi::std_types::RStr<'_>,
            _: i32,
        ) -> drover_abi::std_types::RResult<(), PluginError> {
            drover_abi::std_types::RResult::RErr(PluginError::unavailable("no zookeeper"))
        }
        fn multi(
            &self,
            _: RVec<drover_abi::host::ZkOp>,
        ) -> drover_abi::std_types::RResult<(), PluginError> {
            drover_abi::std_types::RResult::RErr(PluginError::unavailable("no zookeeper"))
        }
    }

    fn start_cluster(config: &str, slots: u32) -> Result<ExportedCoordinator, PluginError> {
        let session: ZkSessionArc = drover_abi::std_types::RArc::new(
            drover_abi::host::ZkSession_TO::from_value(NoZk, abi_stable::sabi_trait::TD_Opaque),
        );
        let ctx = PluginContext {
            config: config.to_owned(),
            zookeeper: Some(session.clone()),
        };
        let startup = ZkCoordinatorStartup {
            base: CoordinatorStartup {
                broker_id: 3,
                assignors: RVec::new(),
                default_assignor: RString::from(""),
                topics: RVec::new(),
            },
            slot_count: slots,
            session,
        };
        ExportedCoordinator::startup_zookeeper(&ctx, startup)
    }

    #[test]
    fn startup_zookeeper_starts_in_slot_mode_owning_nothing() {
        let mut c = start_cluster("slot_takeover_wait_ms = 2000000", 8).unwrap();
        assert_eq!(c.core.config().slot_count, Some(8));
        assert_eq!(c.core.config().takeover_wait_ms(), 2_000_000);
        assert_eq!(
            c.core.ownership(),
            &crate::Ownership::Slots {
                count: 8,
                owned: Default::default()
            }
        );
        assert!(!c.core.owns("billing"));
        let slot = drover_protocol::coordinator_slot("billing", 8);
        c.slot_gained(10, slot, 0).unwrap();
        assert!(c.core.owns("billing"));
        assert_eq!(c.core.takeover_until(slot), Some(2_000_010));
        c.slot_lost(20, slot).unwrap();
        assert!(!c.core.owns("billing"));
        assert_eq!(c.core.takeover_until(slot), None);
        assert!(c._zookeeper.as_ref().is_some_and(|z| z.session_id() == 7));
    }

    #[test]
    fn slot_calls_are_checked() {
        let mut c = start_cluster("", 4).unwrap();
        for result in [c.slot_gained(0, 4, 0), c.slot_lost(0, 9)] {
            let e = result.unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidInput);
            assert!(e.message.contains("out of range"), "{e}");
        }
        let mut standalone = start("", "").unwrap();
        let e = standalone.slot_gained(0, 0, 0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(e.message.contains("standalone"), "{e}");
        assert!(standalone.slot_lost(0, 0).is_err());
        let Err(e) = start_cluster("", 0) else {
            panic!("0 slots accepted");
        };
        assert_eq!(e.kind, ErrorKind::InvalidConfig);
        let Err(e) = start_cluster(
            "max_session_timeout_ms = 10000\nslot_takeover_wait_ms = 10",
            4,
        ) else {
            panic!("a takeover wait below the session timeout bound accepted");
        };
        assert_eq!(e.kind, ErrorKind::InvalidConfig);
    }

    #[test]
    fn a_bad_config_is_an_invalid_config_error() {
        for text in [
            "nope = 1",
            "rebalance_mode = \"lazy\"",
            "max_group_size = 0",
        ] {
            let Err(e) = start(text, "") else {
                panic!("{text:?} accepted");
            };
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{text:?}");
            assert!(e.message.starts_with("drover-coordinator: "), "{e}");
        }
    }
}
