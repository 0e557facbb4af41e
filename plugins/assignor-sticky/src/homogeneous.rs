//! Identical subscriptions: quota-based stickiness (KIP-848 optimized uniform
//! assignor).

use drover_abi::sdk::assignor::{GroupView, NO_OWNER};

/// Owner table for a group whose members all subscribe to the same topics.
///
/// With `P` partitions and `M` members: in member-id order each member keeps its valid,
/// unclaimed owned partitions (ascending) up to the quota `P / M`, and one more if it
/// owned more and one of the `P % M` extra slots is left. The unowned partitions, in
/// global-id order, then go to the members below quota (up to the quota, plus an extra
/// slot while any is left), and any extra slots still left to members exactly at quota,
/// one each.
pub(crate) fn owners(view: &GroupView<'_>) -> Vec<u32> {
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
        *count = keep(&owned, m as u32, quota, &mut extra, &mut owners);
    }
    fill(&mut owners, &mut counts, quota, extra);
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
/// left to members at `quota`, in member order.
fn fill(owners: &mut [u32], counts: &mut [u32], quota: u32, mut extra: usize) {
    let free: Vec<u32> = (0..owners.len() as u32)
        .filter(|&g| owners[g as usize] == NO_OWNER)
        .collect();
    let mut free = free.into_iter();
    for (m, count) in counts.iter_mut().enumerate() {
        if *count < quota {
            let mut target = quota;
            if extra > 0 {
                extra -= 1;
                target += 1;
            }
            for g in free.by_ref().take((target - *count) as usize) {
                owners[g as usize] = m as u32;
            }
            *count = target;
        }
    }
    for (m, count) in counts.iter_mut().enumerate() {
        if extra == 0 {
            break;
        }
        if *count == quota {
            if let Some(g) = free.next() {
                owners[g as usize] = m as u32;
            }
            *count += 1;
            extra -= 1;
        }
    }
    debug_assert!(
        free.next().is_none(),
        "partitions left after filling quotas"
    );
}
