//! The assignment being built: owners, each member's summed load and weight, and the
//! tolerance band, shared by the placing and rebalancing passes.

use drover_abi::sdk::assignor::{GroupView, Racks, NO_OWNER};

use crate::load::Loads;

/// An assignment in progress.
pub(crate) struct State<'a> {
    /// The group.
    pub view: &'a GroupView<'a>,
    /// Per-partition loads.
    pub loads: &'a Loads,
    /// Member and leader racks.
    pub racks: &'a Racks,
    /// Owner table (member index per global partition id, or [`NO_OWNER`]).
    pub owners: Vec<u32>,
    /// Per member: the summed load of the partitions it holds.
    pub level: Vec<f64>,
    /// Per member: its declared weight (`AssignorMember::weight`, 0 read as 1).
    pub weight: Vec<f64>,
    /// The accepted imbalance in load per unit of weight: `tolerance` × the fair
    /// share (total load / total weight of the members that subscribe to something).
    pub band: f64,
}

impl<'a> State<'a> {
    /// An empty assignment of `view` with `tolerance` (see [`crate::Config`]).
    pub fn new(
        view: &'a GroupView<'a>,
        loads: &'a Loads,
        racks: &'a Racks,
        tolerance: f64,
    ) -> Self {
        let weight: Vec<f64> = view
            .members()
            .iter()
            .map(|m| f64::from(m.input.weight.max(1)))
            .collect();
        let total_weight: f64 = view
            .members()
            .iter()
            .zip(&weight)
            .filter(|(m, _)| !m.topics.is_empty())
            .map(|(_, w)| w)
            .sum();
        let total_load: f64 = loads.of.iter().sum();
        let band = if total_weight > 0.0 {
            tolerance * total_load / total_weight
        } else {
            0.0
        };
        State {
            view,
            loads,
            racks,
            owners: vec![NO_OWNER; view.partition_count()],
            level: vec![0.0; view.members().len()],
            weight,
            band,
        }
    }

    /// Member `m`'s load per unit of weight.
    pub fn per_weight(&self, m: u32) -> f64 {
        self.level[m as usize] / self.weight[m as usize]
    }

    /// Member `m`'s load per unit of weight if it also held partition `g`.
    pub fn per_weight_with(&self, m: u32, g: u32) -> f64 {
        (self.level[m as usize] + self.loads.of[g as usize]) / self.weight[m as usize]
    }

    /// Partition `g`'s load per unit of member `m`'s weight: what holding it adds to
    /// `m`'s level.
    pub fn load_per_weight(&self, m: u32, g: u32) -> f64 {
        self.loads.of[g as usize] / self.weight[m as usize]
    }

    /// Whether member `m` sits in the rack of partition `g`'s leader (both known).
    pub fn in_leader_rack(&self, m: u32, g: u32) -> bool {
        self.racks.matches(m, g)
    }

    /// Gives partition `g` (held by nobody) to `m`.
    pub fn give(&mut self, g: u32, m: u32) {
        debug_assert_eq!(self.owners[g as usize], NO_OWNER);
        self.owners[g as usize] = m;
        self.level[m as usize] += self.loads.of[g as usize];
    }

    /// Moves partition `g` from its holder to `m`.
    pub fn shift(&mut self, g: u32, m: u32) {
        let from = self.owners[g as usize];
        self.level[from as usize] -= self.loads.of[g as usize];
        self.owners[g as usize] = NO_OWNER;
        self.give(g, m);
    }
}
