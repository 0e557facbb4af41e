//! Compatibility fixture: `compat-lag-deal`, an assignor built against the frozen
//! drover-abi 3.4 (assignor ABI 3.1), the first minor whose assignors read an
//! `AssignContext`. Deals each topic's partitions round its subscribers in member-id
//! order, starting each topic with the partitions the context says lag most (log end −
//! committed offset, then partition order), so it reads every kind of entry of the
//! context layout it was built with: member labels, brokers and their racks, and each
//! partition's data. Later brokers hand it a longer context (assignor ABI 3.2 added
//! `partition_data_age_ms`); it must keep reading what it knows, unchanged.

use drover_abi::{
    sdk::{
        assignor::{run, Context, GroupView},
        AssignorPlugin, PluginContext, PluginInfo,
    },
    AssignInput, Assignment, PluginError,
};

/// The plugin: stateless.
pub struct CompatLagDeal;

impl PluginInfo for CompatLagDeal {
    const NAME: &'static str = "compat-lag-deal";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "compatibility fixture: reads the assignor context, built on assignor ABI 3.1";
}

impl AssignorPlugin for CompatLagDeal {
    fn new(_: &PluginContext) -> Result<Self, PluginError> {
        Ok(CompatLagDeal)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.assign_with_context(input, &Context::empty())
    }

    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: &Context<'_>,
    ) -> Result<Assignment, PluginError> {
        run(Self::NAME, input, |view| deal_by_lag(view, context))
    }
}

/// Each topic's partitions, most lag first (unknown lag last, then by partition), dealt
/// round the topic's subscribers. Labels and racks are read too, and only feed a tie
/// order that cannot change the result (members are dealt in id order).
fn deal_by_lag(view: &GroupView<'_>, context: &Context<'_>) -> Vec<u32> {
    let mut owners = vec![0u32; view.partition_count()];
    for topic in view.topics() {
        let subs = &topic.subscribers;
        let mut order: Vec<(i64, i32)> = (0..topic.partitions as i32)
            .map(|p| {
                let lag = context.lag(topic.name, p).unwrap_or(-1);
                let _leader_rack = context.leader_rack(topic.name, p);
                (-lag, p)
            })
            .collect();
        order.sort_unstable();
        for (i, (_, p)) in order.into_iter().enumerate() {
            let member = subs[i % subs.len()];
            let _labels = context.labels(view.members()[member as usize].id).len();
            owners[(topic.first + p as u32) as usize] = member;
        }
    }
    owners
}

drover_abi::export_assignor!(CompatLagDeal);
