//! `weighted`: an example rebalance policy for Drover, written against `drover-abi`
//! only, on the SDK's assignor helpers ([`drover_abi::sdk::assignor`]).
//!
//! Each member declares a weight (its relative capacity; `AssignorMember::weight`, 1
//! when it declared none, and 0 is read as 1). Partitions are dealt one at a time, in
//! (topic, partition) order, each to the subscriber with the smallest
//! `(assigned + 1) / weight` — a member of weight 2 ends up with about twice the
//! partitions of a member of weight 1. Ties go to the smaller member id, so the result
//! is deterministic. With equal weights this is a least-loaded deal: balanced to within
//! one partition for identical subscriptions.
//!
//! The SDK does the rest: [`run`] validates the input (duplicate member ids and a topic
//! listed twice are refused), hands the policy a [`GroupView`] (members sorted by id,
//! topics by name, each topic's subscribers) and builds the sorted assignment from the
//! owner table the policy returns. Cost: O(P × M) for P partitions and M members
//! (a heap per topic makes it O(P log M) for very large groups).

use drover_abi::{
    sdk::assignor::{expect_no_config, run, GroupView},
    sdk::{AssignorPlugin, PluginContext, PluginInfo},
    AssignInput, Assignment, PluginError,
};

/// The plugin: stateless, takes no config.
pub struct Weighted;

impl PluginInfo for Weighted {
    const NAME: &'static str = "weighted";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "example: partitions in proportion to member weight";
}

impl AssignorPlugin for Weighted {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        expect_no_config(Self::NAME, &ctx.config)?;
        Ok(Weighted)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        run(Self::NAME, input, owners)
    }
}

drover_abi::export_assignor!(Weighted);

/// The owner table: every partition, in global-id order, to the subscriber of its
/// topic with the smallest `(load + 1) / weight` (the first, so the smallest id, on a
/// tie); loads carry over from topic to topic.
pub fn owners(view: &GroupView<'_>) -> Vec<u32> {
    let weight = |m: u32| u64::from(view.members()[m as usize].input.weight.max(1));
    let mut loads = vec![0u64; view.members().len()];
    let mut owners = Vec::with_capacity(view.partition_count());
    for topic in view.topics() {
        for _ in 0..topic.partitions {
            // (a + 1) / wa vs (b + 1) / wb without division; `min_by` keeps the first.
            let cost = |&a: &u32, &b: &u32| {
                ((loads[a as usize] + 1) * weight(b)).cmp(&((loads[b as usize] + 1) * weight(a)))
            };
            // A topic is in the view only if someone subscribes to it.
            let Some(best) = topic.subscribers.iter().copied().min_by(cost) else {
                break;
            };
            owners.push(best);
            loads[best as usize] += 1;
        }
    }
    owners
}

#[cfg(test)]
mod tests;
