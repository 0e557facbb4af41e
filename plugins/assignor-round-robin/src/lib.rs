//! `round-robin` — Drover's assignor plugin with the semantics of Kafka's
//! `RoundRobinAssignor` (`org.apache.kafka.clients.consumer.RoundRobinAssignor`).
//!
//! Policy: all partitions of the subscribed topics are sorted by (topic, partition) and
//! the members by member id; walking the members as a circle, each partition goes to
//! the next member in the circle that subscribes to its topic, and the walk continues
//! after that member (across topics too). With identical subscriptions every member
//! ends up with `P / M` or `P / M + 1` partitions. Owned partitions, racks and weights
//! are ignored.

mod policy;

use drover_abi::{
    sdk::{AssignorPlugin, PluginContext, PluginInfo},
    AssignInput, Assignment, PluginError,
};

/// The `round-robin` assignor (Kafka's `RoundRobinAssignor`). It takes no config.
#[derive(Debug, Default, Clone, Copy)]
pub struct RoundRobinAssignor;

impl PluginInfo for RoundRobinAssignor {
    const NAME: &'static str = "round-robin";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Kafka RoundRobinAssignor: sorted partitions dealt around the members in id order";
}

impl AssignorPlugin for RoundRobinAssignor {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        drover_abi::sdk::assignor::expect_no_config(Self::NAME, &ctx.config)?;
        Ok(RoundRobinAssignor)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        drover_abi::sdk::assignor::run(Self::NAME, input, policy::owners)
    }
}

drover_abi::export_assignor!(RoundRobinAssignor);

#[cfg(test)]
mod tests;
