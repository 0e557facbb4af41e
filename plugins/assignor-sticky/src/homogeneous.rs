//! Identical subscriptions: quota-based stickiness (KIP-848 optimized uniform
//! assignor).

use std::collections::{HashMap, VecDeque};

use drover_abi::sdk::assignor::{GroupView, Racks, NO_OWNER};

/// Owner table for a group whose members all subscribe to the same topics.
///
/// With `P` partitions and `M` members: in member-id order each member keeps its valid,
/// unclaimed owned partitions (ascending) up to the quota `P / M`, and one more if it
/// owned more and one of the `P % M` extra slots is left. The unowned partitions, in
/// global-id order, then go to the members below quota (up to the quota, plus an extra
/// slot while any is left), and any extra slots still left to members exactly at quota,
/// one each.
///
/// With racks on both sides ([`Racks::is_active`], KIP-881): a member over its quota
/// keeps the owned partitions led in its rack first, and before the unowned partitions
/// are dealt in order, each goes to a member in its leader's rack that is still below
/// its share, if there is one. The shares are those without racks.
pub(crate) fn owners(view: &GroupView<'_>, racks: &Racks) -> Vec<u32> {
    let total = view.partition_count();
    let mut owners = vec![NO_OWNER; total];
    if total == 0 {
        return owners;
    }
    // Partitions exist only if someone subscribes, so there is at least one member.
    let members = view.members().len();
    let quota = (total / members) as u32;
    let mut extra = total % members;
    let mut counts = vec![0u32; members];
    let mut owned = Vec::new();
    for (m, count) in counts.iter_mut().enumerate() {
        view.owned_partitions(m, &mut owned);
        if racks.is_active() {
            // Stable: within each group, ascending as before.
            owned.sort_by_key(|&g| !racks.matches(m as u32, g));
        }
        *count = keep(&owned, m as u32, quota, &mut extra, &mut owners);
    }
    fill(&mut owners, &counts, quota, extra, racks);
    owners
}

/// Member `member` keeps the unclaimed partitions of `owned` up to `quota`, plus one
/// while `extra` slots remain; returns how many it kept.
fn keep(owned: &[u32], member: u32, quota: u32, extra: &mut usize, owners: &mut [u32]) -> u32 {
    let mut kept = 0;
    for &g in owned {
        let owner = &mut owners[g as usize];
        if *owner != NO_OWNER {
            continue;
        }
        if kept == quota {
            if *extra > 0 {
                *extra -= 1;
                *owner = member;
                kept += 1;
            }
            break;
        }
        *owner = member;
        kept += 1;
    }
    kept
}

/// Gives the unowned partitions to the members below `quota` and the `extra` slots
/// left to members at `quota`, in member order; with racks, first each partition to a
/// member in its leader's rack still below its share.
fn fill(owners: &mut [u32], counts: &[u32], quota: u32, extra: usize, racks: &Racks) {
    let (targets, order) = shares(counts, quota, extra);
    let mut held = counts.to_vec();
    if racks.is_active() {
        by_rack(owners, &mut held, &targets, racks);
    }
    let free: Vec<u32> = (0..owners.len() as u32)
        .filter(|&g| owners[g as usize] == NO_OWNER)
        .collect();
    let mut free = free.into_iter();
    for m in order {
        let want = (targets[m as usize] - held[m as usize]) as usize;
        for g in free.by_ref().take(want) {
            owners[g as usize] = m;
        }
        held[m as usize] = targets[m as usize];
    }
    debug_assert!(
        !owners.contains(&NO_OWNER),
        "partitions left after filling quotas"
    );
}

/// Every member's share and the order in which members below it are filled: first, in
/// member order, the members below `quota` (up to `quota`, one more while an `extra`
/// slot is left), then the members at `quota`, one extra slot each while any is left.
fn shares(counts: &[u32], quota: u32, mut extra: usize) -> (Vec<u32>, Vec<u32>) {
    let mut targets = counts.to_vec();
    let mut order = Vec::new();
    for (m, target) in targets.iter_mut().enumerate() {
        if *target < quota {
            *target = quota;
            if extra > 0 {
                extra -= 1;
                *target += 1;
            }
            order.push(m as u32);
        }
    }
    for (m, target) in targets.iter_mut().enumerate() {
        if extra == 0 {
            break;
        }
        if *target == quota {
            *target += 1;
            extra -= 1;
            order.push(m as u32);
        }
    }
    (targets, order)
}

/// Gives each unowned partition whose leader rack is known to the first member (in
/// member order) of that rack still below its share.
fn by_rack(owners: &mut [u32], held: &mut [u32], targets: &[u32], racks: &Racks) {
    let mut open: HashMap<u32, VecDeque<u32>> = HashMap::new();
    for m in 0..held.len() as u32 {
        if let Some(rack) = racks.member(m) {
            if held[m as usize] < targets[m as usize] {
                open.entry(rack).or_default().push_back(m);
            }
        }
    }
    for g in 0..owners.len() as u32 {
        if owners[g as usize] != NO_OWNER {
            continue;
        }
        let Some(queue) = racks.leader(g).and_then(|r| open.get_mut(&r)) else {
            continue;
        };
        let Some(&m) = queue.front() else {
            continue;
        };
        owners[g as usize] = m;
        held[m as usize] += 1;
        if held[m as usize] == targets[m as usize] {
            queue.pop_front();
        }
    }
}
