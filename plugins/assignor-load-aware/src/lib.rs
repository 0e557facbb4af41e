//! `load-aware` — Drover's assignor plugin that balances partition *load* rather than
//! partition count, by each member's declared weight, preferring members in the
//! partition leader's rack, and keeping owned partitions while the imbalance stays
//! within a tolerance.
//!
//! No Kafka assignor uses load: the broker is the one place that measures it, and
//! Drover hands it to assignors in the context (assignor ABI 3.1, filled from the
//! coordinator's partition table, coordinator ABI 3.3).
//!
//! **Load of a partition** ([`Basis`], module `load`): its produce rate in bytes/s
//! (`PartitionContext::produce_bytes_per_sec`, measured by the broker over
//! `coordinator.produce_rate_window_ms`) when some partition of the group has a rate
//! above zero; otherwise its lag in records (log end − committed offset) when some lag
//! is above zero; otherwise 1 (partition count). A partition whose value is unknown
//! while others are known (in cluster mode, partitions another broker leads) counts as
//! the mean of the known ones; every partition weighs at least 1% of the mean, so idle
//! partitions still spread.
//!
//! **Policy**, in three steps over the SDK's owner table:
//! 1. each member, in member-id order, keeps its valid owned partitions that no member
//!    before it claimed (module `place`);
//! 2. every other partition, heaviest first, goes to the subscriber whose load per unit
//!    of weight (`AssignorMember::weight`, 0 read as 1) is lowest after taking it —
//!    unless a subscriber in the leader's rack (`AssignorMember::rack` equal to the
//!    leader broker's `rack`) would end at most the *band* above that: then the best
//!    of those takes it (KIP-881's rack preference, bounded by balance);
//! 3. a rebalancing pass (module `rebalance`) moves a partition from member `d` to a
//!    subscriber `r` of its topic while `d`'s load per weight exceeds `r`'s by more
//!    than the band and `r` would stay below `d`'s level after taking it.
//!
//! The *band* is `tolerance` (config, default [`DEFAULT_TOLERANCE`] = 0.1) × the fair
//! share (total load ÷ total weight). Owned partitions move only to close a gap wider
//! than the band, so a group whose rates wander within 10% keeps its assignment. With
//! nothing measured (an empty context, e.g. a 3.0 caller) the basis is partition count
//! and, with equal weights and identical subscriptions, the result is balanced to
//! within one partition and sticky as the `sticky` assignor's (the test kit's claims).
//!
//! Config (`[plugins.config.load-aware]`): `tolerance`, a number in `0.0..=10.0`.

mod config;
mod level;
mod load;
mod place;
mod rebalance;
mod state;

pub use config::{Config, DEFAULT_TOLERANCE, MAX_TOLERANCE};
pub use load::Basis;

use drover_abi::{
    sdk::{
        assignor::{run, Context, GroupView, Racks},
        AssignorPlugin, PluginContext, PluginInfo,
    },
    AssignInput, Assignment, PluginError,
};

/// The `load-aware` assignor with its config.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoadAwareAssignor {
    config: Config,
}

impl LoadAwareAssignor {
    /// An instance with `config`.
    pub fn with_config(config: Config) -> Self {
        LoadAwareAssignor { config }
    }
}

impl PluginInfo for LoadAwareAssignor {
    const NAME: &'static str = "load-aware";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "balances produce rate (or lag) by member weight, rack-preferring, sticky within a tolerance";
}

impl AssignorPlugin for LoadAwareAssignor {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        Ok(LoadAwareAssignor {
            config: Config::parse(&ctx.config)?,
        })
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        self.assign_with_context(input, &Context::empty())
    }

    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: &Context<'_>,
    ) -> Result<Assignment, PluginError> {
        run(Self::NAME, input, |view| owners(view, context, self.config))
    }
}

/// The owner table of `view` under `context`: keep, place, rebalance.
pub(crate) fn owners(view: &GroupView<'_>, context: &Context<'_>, config: Config) -> Vec<u32> {
    let loads = load::measure(view, context);
    let racks = Racks::new(view, context);
    let mut state = state::State::new(view, &loads, &racks, config.tolerance);
    tracing::debug!(
        basis = ?loads.basis,
        band = state.band,
        "load-aware: balancing by {:?}",
        loads.basis
    );
    place::keep_owned(&mut state);
    place::place_rest(&mut state);
    rebalance::run(&mut state);
    state.owners
}

drover_abi::export_assignor!(LoadAwareAssignor);

#[cfg(test)]
mod tests;
