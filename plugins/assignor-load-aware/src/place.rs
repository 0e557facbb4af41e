//! Placing partitions: members keep what they own, then every other partition goes,
//! heaviest first, to the subscriber it loads least per unit of weight — or to one in
//! its leader's rack when that is within the tolerance band.

use std::{cmp::Reverse, collections::BinaryHeap, collections::HashMap};

use drover_abi::sdk::assignor::NO_OWNER;

use crate::{level::Level, state::State};

/// Each member, in member-id order, keeps its valid owned partitions that no member
/// before it claimed (stickiness; the rebalancing pass moves them only beyond the
/// band).
pub(crate) fn keep_owned(state: &mut State<'_>) {
    let mut owned = Vec::new();
    for m in 0..state.view.members().len() {
        state.view.owned_partitions(m, &mut owned);
        for &g in &owned {
            if state.owners[g as usize] == NO_OWNER {
                state.give(g, m as u32);
            }
        }
    }
}

/// Places every partition nobody kept, heaviest first (ties by global id): to the
/// subscriber whose load per unit of weight would be lowest after taking it (ties: the
/// smaller member index), unless a subscriber in the leader's rack would end at most
/// the band above that, in which case the best such subscriber takes it (KIP-881's
/// preference, bounded by balance).
pub(crate) fn place_rest(state: &mut State<'_>) {
    let mut free: Vec<u32> = (0..state.owners.len() as u32)
        .filter(|&g| state.owners[g as usize] == NO_OWNER)
        .collect();
    if free.is_empty() {
        return;
    }
    let of = &state.loads.of;
    free.sort_by(|&a, &b| of[b as usize].total_cmp(&of[a as usize]).then(a.cmp(&b)));
    if state.view.is_homogeneous() {
        let mut classes = Classes::new(state);
        for g in free {
            let m = classes.choose(state, g);
            state.give(g, m);
            classes.update(state, m);
        }
    } else {
        for g in free {
            let m = scan(state, g);
            state.give(g, m);
        }
    }
}

/// Picks between the best subscriber overall and the best one in the leader's rack.
fn pick(state: &State<'_>, best: (Level, u32), best_in_rack: Option<(Level, u32)>) -> u32 {
    match best_in_rack {
        Some((level, m)) if level.0 <= best.0 .0 + state.band => m,
        _ => best.1,
    }
}

/// The choice for partition `g` by a scan of its topic's subscribers (different
/// subscriptions).
fn scan(state: &State<'_>, g: u32) -> u32 {
    let topic = &state.view.topics()[state.view.topic_of(g)];
    let mut best: Option<(Level, u32)> = None;
    let mut best_in_rack: Option<(Level, u32)> = None;
    for &m in &topic.subscribers {
        let key = (Level(state.per_weight_with(m, g)), m);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
        if state.in_leader_rack(m, g) && best_in_rack.is_none_or(|b| key < b) {
            best_in_rack = Some(key);
        }
    }
    // A topic in the view has at least one subscriber.
    let best = best.expect("a topic in the view has a subscriber");
    pick(state, best, best_in_rack)
}

/// Members by (load, index), least loaded first.
type MinHeap = BinaryHeap<Reverse<(Level, u32)>>;

/// Members grouped by (weight, rack), each group a min-heap by load: with identical
/// subscriptions every member may take every partition, and within a group the least
/// loaded member is the best, so a choice looks at one member per group.
struct Classes {
    /// Per class: its rack, and its members by (load, index).
    heaps: Vec<(Option<u32>, MinHeap)>,
    /// Per member index: its class.
    class_of: Vec<usize>,
}

impl Classes {
    fn new(state: &State<'_>) -> Self {
        let mut index: HashMap<(u64, Option<u32>), usize> = HashMap::new();
        let mut heaps: Vec<(Option<u32>, MinHeap)> = Vec::new();
        let mut class_of = Vec::with_capacity(state.view.members().len());
        for (m, member) in state.view.members().iter().enumerate() {
            if member.topics.is_empty() {
                class_of.push(usize::MAX);
                continue;
            }
            let w = state.weight[m];
            let rack = state.racks.member(m as u32);
            let c = *index.entry((w.to_bits(), rack)).or_insert_with(|| {
                heaps.push((rack, BinaryHeap::new()));
                heaps.len() - 1
            });
            heaps[c].1.push(Reverse((Level(state.level[m]), m as u32)));
            class_of.push(c);
        }
        Classes { heaps, class_of }
    }

    /// The member that takes partition `g`.
    fn choose(&self, state: &State<'_>, g: u32) -> u32 {
        let rack = state.racks.leader(g);
        let mut best: Option<(Level, u32)> = None;
        let mut best_in_rack: Option<(Level, u32)> = None;
        for (class_rack, heap) in &self.heaps {
            let Some(Reverse((_, m))) = heap.peek() else {
                continue;
            };
            let key = (Level(state.per_weight_with(*m, g)), *m);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
            if rack.is_some() && *class_rack == rack && best_in_rack.is_none_or(|b| key < b) {
                best_in_rack = Some(key);
            }
        }
        let best = best.expect("a homogeneous group with partitions has a subscriber");
        pick(state, best, best_in_rack)
    }

    /// Member `m` (the top of its class) took a partition: re-key it.
    fn update(&mut self, state: &State<'_>, m: u32) {
        let heap = &mut self.heaps[self.class_of[m as usize]].1;
        if let Some(mut top) = heap.peek_mut() {
            debug_assert_eq!(top.0 .1, m);
            *top = Reverse((Level(state.level[m as usize]), m));
        }
    }
}
