//! What `load-aware` balances: one load value per partition, read from the
//! assignment's context.

use drover_abi::sdk::assignor::{Context, GroupView};

/// Share of the mean partition load every partition weighs at least, so that idle
/// partitions (rate 0) still spread over the members instead of all landing on one.
const FLOOR: f64 = 0.01;

/// What the loads of one assignment are measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// Produce rate, bytes/s (`PartitionContext::produce_bytes_per_sec`): used when
    /// some partition of the group has a known rate above zero.
    BytesPerSec,
    /// Lag, records (log end minus the group's committed offset): used when no rate is
    /// above zero but some lag is.
    Lag,
    /// Every partition weighs 1: nothing is known (an empty context, a broker that has
    /// not measured yet) or everything is idle and consumed.
    Count,
}

/// The loads of one assignment.
#[derive(Debug)]
pub(crate) struct Loads {
    /// What they are measured in.
    pub basis: Basis,
    /// Per global partition id: the load (in the basis' unit, at least [`FLOOR`] × the
    /// mean for bytes/s and lag; 1 for count). A partition whose value is unknown while
    /// others are known counts as the mean of the known ones.
    pub of: Vec<f64>,
}

/// Reads the loads of `view`'s partitions from `ctx` (see [`Basis`] for
/// which value is used).
pub(crate) fn measure(view: &GroupView<'_>, ctx: &Context<'_>) -> Loads {
    let total = view.partition_count();
    let mut bytes: Vec<Option<f64>> = vec![None; total];
    let mut lag: Vec<Option<f64>> = vec![None; total];
    for topic in view.topics() {
        for p in 0..topic.partitions {
            let g = (topic.first + p) as usize;
            let Some(pc) = ctx.partition(topic.name, p as i32) else {
                continue;
            };
            bytes[g] = pc
                .produce_bytes_per_sec
                .into_option()
                .filter(|r| r.is_finite() && *r >= 0.0);
            // A committed offset past the (older) log end leaves the lag unknown
            // rather than a measured 0 (the SDK's `Context::lag`).
            lag[g] = ctx.lag(topic.name, p as i32).map(|l| l as f64);
        }
    }
    let (basis, of) = if let Some(of) = fill(&bytes) {
        (Basis::BytesPerSec, of)
    } else if let Some(of) = fill(&lag) {
        (Basis::Lag, of)
    } else {
        (Basis::Count, vec![1.0; total])
    };
    Loads { basis, of }
}

/// The loads from `known` values, if some is above zero: unknown ones count as the
/// mean of the known, and every one at least [`FLOOR`] × the mean.
fn fill(known: &[Option<f64>]) -> Option<Vec<f64>> {
    let (sum, count) = known
        .iter()
        .flatten()
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if sum <= 0.0 || !sum.is_finite() {
        return None;
    }
    let mean = sum / count as f64;
    Some(
        known
            .iter()
            .map(|v| v.unwrap_or(mean).max(FLOOR * mean))
            .collect(),
    )
}
