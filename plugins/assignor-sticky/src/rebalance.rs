//! The bounded rebalancing pass of the heterogeneous path.

use std::{cmp::Reverse, collections::BinaryHeap};

use drover_abi::sdk::assignor::{GroupView, TopicView};

/// At most this many passes over all topics; a pass that moves nothing ends it sooner.
const MAX_PASSES: usize = 64;

/// Evens loads out: for each topic (in `order`), while the most-loaded member holding
/// one of its partitions has at least two more partitions than the least-loaded
/// subscriber, one partition moves from the first to the second, partitions the holder
/// did not keep from its previous assignment (`kept`) first. Repeats over all topics
/// until nothing moves or [`MAX_PASSES`] is reached. Each move lowers the sum of
/// squared loads, so the loop ends; once it ends by itself, no single move between two
/// subscribers of a topic can narrow their gap.
pub(crate) fn run(
    view: &GroupView<'_>,
    order: &[usize],
    owners: &mut [u32],
    loads: &mut [u32],
    kept: &[bool],
) {
    let mut scratch = Scratch {
        position: vec![0; view.members().len()],
        ..Scratch::default()
    };
    for _ in 0..MAX_PASSES {
        let mut moved = false;
        for &t in order {
            moved |= balance_topic(&view.topics()[t], owners, loads, kept, &mut scratch);
        }
        if !moved {
            break;
        }
    }
}

/// Buffers reused across topics.
#[derive(Default)]
struct Scratch {
    /// Member index → its index among the current topic's subscribers.
    position: Vec<u32>,
    /// Per subscriber, the start of its partitions in `held`.
    start: Vec<usize>,
    /// Per subscriber, the end of its not-yet-moved partitions in `held`.
    end: Vec<usize>,
    /// The topic's partition indexes grouped by holder, kept ones first.
    held: Vec<u32>,
}

/// Balances one topic; returns whether any partition moved.
fn balance_topic(
    topic: &TopicView<'_>,
    owners: &mut [u32],
    loads: &mut [u32],
    kept: &[bool],
    scratch: &mut Scratch,
) -> bool {
    let subscribers = &topic.subscribers;
    let table = &mut owners[topic.first as usize..][..topic.partitions as usize];
    let kept = &kept[topic.first as usize..][..topic.partitions as usize];
    let least = subscribers.iter().map(|&m| loads[m as usize]).min();
    let most = table.iter().map(|&m| loads[m as usize]).max();
    match (least, most) {
        (Some(least), Some(most)) if most >= least + 2 => {}
        _ => return false,
    }
    group_by_holder(subscribers, table, kept, scratch);
    let Scratch {
        start, end, held, ..
    } = scratch;
    let load = |loads: &[u32], k: usize| loads[subscribers[k] as usize];
    let mut donors: BinaryHeap<(u32, Reverse<usize>)> = (0..subscribers.len())
        .filter(|&k| end[k] > start[k])
        .map(|k| (load(loads, k), Reverse(k)))
        .collect();
    let mut receivers: BinaryHeap<Reverse<(u32, usize)>> = (0..subscribers.len())
        .map(|k| Reverse((load(loads, k), k)))
        .collect();
    let mut moved = false;
    loop {
        // Drop stale heap entries (their member's load changed or it holds nothing).
        while let Some(&(l, Reverse(k))) = donors.peek() {
            if l == load(loads, k) && end[k] > start[k] {
                break;
            }
            donors.pop();
        }
        while let Some(&Reverse((l, k))) = receivers.peek() {
            if l == load(loads, k) {
                break;
            }
            receivers.pop();
        }
        let (Some(&(most, Reverse(d))), Some(&Reverse((least, r)))) =
            (donors.peek(), receivers.peek())
        else {
            break;
        };
        if most < least + 2 {
            break;
        }
        end[d] -= 1;
        table[held[end[d]] as usize] = subscribers[r];
        loads[subscribers[d] as usize] -= 1;
        loads[subscribers[r] as usize] += 1;
        moved = true;
        if end[d] > start[d] {
            donors.push((most - 1, Reverse(d)));
        }
        receivers.push(Reverse((most - 1, d)));
        receivers.push(Reverse((least + 1, r)));
        if end[r] > start[r] {
            donors.push((least + 1, Reverse(r)));
        }
    }
    moved
}

/// Fills `scratch` with the topic's partitions grouped by holder (a counting sort), the
/// holder's kept partitions before the others, so that moves take the others first.
fn group_by_holder(subscribers: &[u32], table: &[u32], kept: &[bool], scratch: &mut Scratch) {
    for (k, &m) in subscribers.iter().enumerate() {
        scratch.position[m as usize] = k as u32;
    }
    let count = subscribers.len();
    scratch.start.clear();
    scratch.start.resize(count + 1, 0);
    for &m in table {
        scratch.start[scratch.position[m as usize] as usize + 1] += 1;
    }
    for k in 0..count {
        scratch.start[k + 1] += scratch.start[k];
    }
    scratch.end.clear();
    scratch.end.extend_from_slice(&scratch.start[..count]);
    scratch.held.clear();
    scratch.held.resize(table.len(), 0);
    for keep_first in [true, false] {
        for (p, (&m, &k)) in table.iter().zip(kept).enumerate() {
            if k == keep_first {
                let slot = &mut scratch.end[scratch.position[m as usize] as usize];
                scratch.held[*slot] = p as u32;
                *slot += 1;
            }
        }
    }
}
