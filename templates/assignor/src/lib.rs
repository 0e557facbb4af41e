//! `my-assignor`: a Drover assignor plugin, from Drover's template
//! (`templates/assignor`). Replace [`owners`] (consumer groups) and [`holders`] (share
//! groups) with your policy.
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
    sdk::assignor::{expect_no_config, run, run_share, Context, GroupView},
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

    // Share groups (KIP-932; assignor ABI 3.3): delete these two methods if your
    // assignor should not serve them (the default answers `false`, and the broker then
    // never offers it a share group).
    fn share_groups_supported(&self) -> bool {
        true
    }

    fn assign_share(
        &self,
        input: &AssignInput,
        context: &Context<'_>,
    ) -> Result<Assignment, PluginError> {
        // `context` has what the broker knows of each partition (leader and its rack,
        // log offsets, produce rates), each optional; this policy does not use it.
        let _ = context;
        run_share(Self::NAME, input, holders)
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

/// A share group's holder table: each topic's partitions dealt round its subscribers as
/// in [`owners`] (starting afresh at each topic); while subscribers are left over, the
/// deal goes on round the partitions, so that every subscriber fetches from some
/// partition of each of its topics (a share group's partition may have several
/// members, which share its records).
pub fn holders(view: &GroupView<'_>) -> Vec<Vec<u32>> {
    let mut holders = Vec::with_capacity(view.partition_count());
    for topic in view.topics() {
        let subscribers = &topic.subscribers;
        let partitions = topic.partitions as usize;
        if partitions == 0 {
            continue;
        }
        let first = holders.len();
        holders.resize(first + partitions, Vec::new());
        for k in 0..partitions.max(subscribers.len()) {
            holders[first + k % partitions].push(subscribers[k % subscribers.len()]);
        }
    }
    holders
}
