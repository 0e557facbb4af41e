//! `range` — Drover's assignor plugin with the semantics of Kafka's `RangeAssignor`
//! (`org.apache.kafka.clients.consumer.RangeAssignor`, the classic consumer default).
//!
//! Policy, topic by topic: the members subscribed to the topic are sorted by member id;
//! its `n` partitions are cut into contiguous ranges in that order, each of the `m`
//! members getting `n / m` and the first `n % m` members one more. Owned partitions and
//! weights are ignored; with several topics the first members by id get the extras of
//! every topic, as in Kafka.
//!
//! Racks (KIP-881, Kafka 3.5's rack-aware `RangeAssignor`): when members declare racks
//! (`client.rack`, `--rack`) and the context names the racks of partition leaders
//! (`[server] rack`), each member first takes the partitions led in its rack, up to
//! its share, and the others fill the shares left; the shares stay `n / m` or one
//! more. Without rack data on either side the result is unchanged.

mod policy;

use drover_abi::{
    sdk::{
        assignor::{Context, Racks},
        AssignorPlugin, PluginContext, PluginInfo,
    },
    AssignInput, Assignment, PluginError,
};

/// The `range` assignor (Kafka's `RangeAssignor`). It takes no config.
#[derive(Debug, Default, Clone, Copy)]
pub struct RangeAssignor;

impl PluginInfo for RangeAssignor {
    const NAME: &'static str = "range";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Kafka RangeAssignor: per topic, contiguous partition ranges in member-id order";
}

impl AssignorPlugin for RangeAssignor {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        drover_abi::sdk::assignor::expect_no_config(Self::NAME, &ctx.config)?;
        Ok(RangeAssignor)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.assign_with_context(input, &Context::empty())
    }

    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: &Context<'_>,
    ) -> Result<Assignment, PluginError> {
        drover_abi::sdk::assignor::run(Self::NAME, input, |view| {
            policy::owners(view, &Racks::new(view, context))
        })
    }
}

drover_abi::export_assignor!(RangeAssignor);

#[cfg(test)]
mod tests;
