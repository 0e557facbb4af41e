//! The cdylib export: the sans-IO core behind `drover-abi`'s coordinator root module.
//! A thin adapter — ABI values are converted by [`crate::abi`], the only thing added is
//! the wall-clock stamp of commit records (the core has no clock).
//!
//! Standalone mode only for now: `startup_zookeeper`, `slot_gained` and `slot_lost`
//! are refused with a clear error until cluster mode exists (issue 7).

use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorOutput, CoordinatorStartup},
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

fn cluster_mode() -> PluginError {
    PluginError::invalid_input(
        "drover-coordinator runs standalone only: cluster mode (coordinator slots) is not implemented yet",
    )
}

impl CoordinatorPlugin for ExportedCoordinator {
    fn startup(ctx: &PluginContext, startup: CoordinatorStartup) -> Result<Self, PluginError> {
        if !ctx.config.trim().is_empty() {
            return Err(PluginError::invalid_config(
                "drover-coordinator takes no [plugins.config] keys yet; remove its table",
            ));
        }
        let mut config = CoordinatorConfig::default();
        if !startup.default_assignor.is_empty() {
            config.default_assignor = startup.default_assignor.to_string();
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
        tracing::info!(
            assignors = startup.assignors.len(),
            topics = startup.topics.len(),
            "coordinator started (standalone)"
        );
        Ok(ExportedCoordinator { core })
    }

    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Ok(to_abi(self.core.handle(now_ms, input_from_abi(input))))
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.core.poll_timeout()
    }

    fn slot_gained(
        &mut self,
        _now_ms: u64,
        _slot: u32,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Err(cluster_mode())
    }

    fn slot_lost(
        &mut self,
        _now_ms: u64,
        _slot: u32,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Err(cluster_mode())
    }

    fn shutdown(&mut self, _now_ms: u64) -> Result<Vec<CoordinatorOutput>, PluginError> {
        // Commits are written as they happen (final offsets at once, heartbeat offsets
        // every commit interval); channels close with the broker's connections.
        Ok(Vec::new())
    }
}

drover_abi::export_coordinator!(ExportedCoordinator);
