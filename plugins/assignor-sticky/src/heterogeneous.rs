//! Different subscriptions: keep owned partitions, assign the rest most-constrained
//! first, then rebalance (KIP-848 general uniform assignor, simplified).

use std::{cmp::Reverse, collections::BinaryHeap};

use drover_abi::sdk::assignor::{GroupView, TopicView, NO_OWNER};

use crate::rebalance;

/// Owner table for a group whose members subscribe to different topics.
///
/// In member-id order each member keeps its valid, unclaimed owned partitions. Then,
/// topic by topic from the fewest subscribers to the most (ties by name), every unowned
/// partition goes to the topic's least-loaded subscriber (ties by member id). Finally
/// [`rebalance::run`] evens the loads out.
pub(crate) fn owners(view: &GroupView<'_>) -> Vec<u32> {
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
        fill_topic(&view.topics()[t], &mut owners, &mut loads);
    }
    rebalance::run(view, &order, &mut owners, &mut loads, &kept);
    owners
}

/// Gives each unowned partition of `topic` to its least-loaded subscriber.
fn fill_topic(topic: &TopicView<'_>, owners: &mut [u32], loads: &mut [u32]) {
    let table = &mut owners[topic.first as usize..][..topic.partitions as usize];
    if !table.contains(&NO_OWNER) {
        return;
    }
    let mut heap: BinaryHeap<Reverse<(u32, u32)>> = topic
        .subscribers
        .iter()
        .map(|&m| Reverse((loads[m as usize], m)))
        .collect();
    for owner in table.iter_mut().filter(|o| **o == NO_OWNER) {
        // Subscribers are never empty for a topic in the view.
        let Some(mut least) = heap.peek_mut() else {
            return;
        };
        let Reverse((load, m)) = *least;
        *owner = m;
        loads[m as usize] = load + 1;
        *least = Reverse((load + 1, m));
    }
}
