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
        let mut config = CoordinatorConfig::from_toml(&ctx.config)
            .map_err(|e| PluginError::invalid_config(format!("{}: {e}", Self::NAME)))?;
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
