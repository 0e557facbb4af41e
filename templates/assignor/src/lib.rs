//! `my-assignor`: a Drover assignor plugin, from Drover's template
//! (`templates/assignor`). Replace [`owners`] with your policy.
//!
//! The policy deals the partitions of every subscribed topic, in (topic, partition)
//! order, round the topic's subscribers, the deal continuing from topic to topic: with
//! identical subscriptions every member gets the same number of partitions, give or
//! take one (the `balanced` claim of the conformance suite, `tests/conformance.rs`).
//!
//! The SDK ([`drover_abi::sdk::assignor`]) does the rest: [`run`] validates the input
//! (duplicate member ids and a topic listed twice are refused, as the contract asks),
//! hands the policy a [`GroupView`] (members sorted by id, topics by name, each with its
//! subscribers) and builds the sorted assignment from the owner table the policy
//! returns: one member index per partition, partition `p` of topic `t` at `t.first + p`.

use drover_abi::{
    sdk::assignor::{expect_no_config, run, GroupView},
    sdk::{AssignorPlugin, PluginContext, PluginInfo},
    AssignInput, Assignment, PluginError,
};

/// The plugin: stateless, takes no config.
pub struct MyAssignor;

impl PluginInfo for MyAssignor {
    /// The name groups select the assignor by (unique among a broker's plugins).
    const NAME: &'static str = "my-assignor";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "partitions dealt round each topic's subscribers";
}

impl AssignorPlugin for MyAssignor {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        // `ctx.config` is the `[plugins.config.my-assignor]` table as TOML.
        expect_no_config(Self::NAME, &ctx.config)?;
        Ok(MyAssignor)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        run(Self::NAME, input, owners)
    }
}

drover_abi::export_assignor!(MyAssignor);

/// The owner table: partition after partition, the next subscriber of its topic in a
/// deal that carries over from topic to topic.
pub fn owners(view: &GroupView<'_>) -> Vec<u32> {
    let mut owners = Vec::with_capacity(view.partition_count());
    let mut next = 0usize;
    for topic in view.topics() {
        // A topic is in the view only if someone subscribes to it.
        let subscribers = &topic.subscribers;
        for _ in 0..topic.partitions {
            owners.push(subscribers[next % subscribers.len()]);
            next += 1;
        }
    }
    owners
}
