//! Different subscriptions: keep owned partitions, assign the rest most-constrained
//! first, then rebalance (KIP-848 general uniform assignor, simplified).

use std::{
    cmp::Reverse,
    collections::{BTreeMap, BinaryHeap},
};

use drover_abi::sdk::assignor::{GroupView, Racks, TopicView, NO_OWNER};

use crate::rebalance;

/// Owner table for a group whose members subscribe to different topics.
///
/// In member-id order each member keeps its valid, unclaimed owned partitions. Then,
/// topic by topic from the fewest subscribers to the most (ties by name), every unowned
/// partition goes to the topic's least-loaded subscriber (ties by member id). Finally
/// [`rebalance::run`] evens the loads out.
///
/// With racks on both sides ([`Racks::is_active`], KIP-881): among the least-loaded
/// subscribers of a partition, one in its leader's rack takes it (balance first, rack
/// on a tie).
pub(crate) fn owners(view: &GroupView<'_>, racks: &Racks) -> Vec<u32> {
    let total = view.partition_count();
    let mut owners = vec![NO_OWNER; total];
    let mut loads = vec![0u32; view.members().len()];
    let mut kept = vec![false; total];
    let mut owned = Vec::new();
    for (m, load) in loads.iter_mut().enumerate() {
        view.owned_partitions(m, &mut owned);
        for &g in &owned {
            if owners[g as usize] == NO_OWNER {
                owners[g as usize] = m as u32;
                kept[g as usize] = true;
                *load += 1;
            }
        }
    }
    let mut order: Vec<usize> = (0..view.topics().len()).collect();
    order.sort_by_key(|&t| view.topics()[t].subscribers.len());
    for &t in &order {
        fill_topic(&view.topics()[t], &mut owners, &mut loads, racks);
    }
    rebalance::run(view, &order, &mut owners, &mut loads, &kept);
    owners
}

/// Gives each unowned partition of `topic` to its least-loaded subscriber (ties: one
/// in the partition's leader rack, then the smaller member index).
fn fill_topic(topic: &TopicView<'_>, owners: &mut [u32], loads: &mut [u32], racks: &Racks) {
    let first = topic.first;
    let table = &mut owners[first as usize..][..topic.partitions as usize];
    if !table.contains(&NO_OWNER) {
        return;
    }
    // One heap per rack of subscribers (`None`: no rack); without racks, just one.
    let mut heaps: BTreeMap<Option<u32>, BinaryHeap<Reverse<(u32, u32)>>> = BTreeMap::new();
    for &m in &topic.subscribers {
        let rack = racks.member(m).filter(|_| racks.is_active());
        heaps
            .entry(rack)
            .or_default()
            .push(Reverse((loads[m as usize], m)));
    }
    for (p, owner) in table.iter_mut().enumerate() {
        if *owner != NO_OWNER {
            continue;
        }
        // Subscribers are never empty for a topic in the view.
        let Some(best) = heaps.values().filter_map(|h| h.peek().map(|r| r.0)).min() else {
            return;
        };
        let leader = racks.leader(first + p as u32).filter(|_| racks.is_active());
        let in_rack = leader
            .and_then(|r| heaps.get(&Some(r)))
            .and_then(|h| h.peek())
            .map(|r| r.0)
            .filter(|&(load, _)| load == best.0);
        let (load, m) = in_rack.unwrap_or(best);
        let rack = racks.member(m).filter(|_| racks.is_active());
        let heap = heaps.get_mut(&rack).expect("the member's heap");
        let Some(mut top) = heap.peek_mut() else {
            return;
        };
        *owner = m;
        loads[m as usize] = load + 1;
        *top = Reverse((load + 1, m));
    }
}
