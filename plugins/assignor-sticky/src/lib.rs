//! `sticky` — Drover's sticky assignor plugin, after Kafka's `StickyAssignor` /
//! `CooperativeStickyAssignor` and the KIP-848 server-side *uniform* assignor
//! (`org.apache.kafka.coordinator.group.assignor.UniformAssignor`).
//!
//! Goals, in order: a correct assignment, balance, then stickiness (members keep the
//! partitions they own, [`drover_abi::AssignorMember::owned`]). Owned partitions of an
//! unknown topic, out of range, of a topic the member does not subscribe to, or already
//! claimed by a member earlier in member-id order are ignored. Weights are ignored.
//!
//! Racks (KIP-881): when members declare racks and the context names the racks of
//! partition leaders, the assignor prefers a member in a partition's leader rack where
//! balance allows — an over-quota member keeps its rack-local owned partitions first,
//! unowned partitions go first to rack-local members below their share (identical
//! subscriptions), or to a rack-local member among the least loaded (different
//! subscriptions). Balance and stickiness come first; without rack data on either side
//! the result is unchanged.
//!
//! - Identical subscriptions (KIP-848's "optimized uniform" case, module
//!   `homogeneous`): with `P` partitions and `M` members, each
//!   member keeps its owned partitions up to the minimum quota `P / M`, one more while
//!   extra slots (`P % M`) remain; the unowned partitions, in (topic, partition) order,
//!   then fill the members below quota. Every member ends with `P / M` or `P / M + 1`
//!   partitions, and when one member of a balanced group leaves only its partitions
//!   move.
//! - Different subscriptions (KIP-848's "general uniform" case, modules
//!   `heterogeneous` and `rebalance`): members keep their valid owned
//!   partitions; the rest are assigned topic by topic, most-constrained topic (fewest
//!   subscribers) first, each partition to the least-loaded subscriber; a bounded
//!   rebalancing pass then moves partitions from a topic's most-loaded holder to its
//!   least-loaded subscriber while their loads differ by two or more.

mod heterogeneous;
mod homogeneous;
mod rebalance;

use drover_abi::sdk::assignor::{Context, GroupView, Racks};
use drover_abi::{
    sdk::{AssignorPlugin, PluginContext, PluginInfo},
    AssignInput, Assignment, PluginError,
};

/// The `sticky` assignor (KIP-848 uniform assignor). It takes no config.
#[derive(Debug, Default, Clone, Copy)]
pub struct StickyAssignor;

impl PluginInfo for StickyAssignor {
    const NAME: &'static str = "sticky";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "KIP-848 uniform assignor: balanced, keeping owned partitions where balance allows";
}

impl AssignorPlugin for StickyAssignor {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        drover_abi::sdk::assignor::expect_no_config(Self::NAME, &ctx.config)?;
        Ok(StickyAssignor)
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
            owners(view, &Racks::new(view, context))
        })
    }
}

/// The owner table: the homogeneous rule when subscriptions are identical, the general
/// one otherwise.
fn owners(view: &GroupView<'_>, racks: &Racks) -> Vec<u32> {
    if view.is_homogeneous() {
        homogeneous::owners(view, racks)
    } else {
        heterogeneous::owners(view, racks)
    }
}

drover_abi::export_assignor!(StickyAssignor);

#[cfg(test)]
mod tests;
