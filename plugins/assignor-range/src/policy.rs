//! The range rule itself, with KIP-881's rack preference.

use drover_abi::sdk::assignor::{GroupView, Racks, TopicView, NO_OWNER};

/// Owner table: for each topic, its subscribers (already in member-id order) get
/// `n / m` partitions each, the first `n % m` of them one more.
///
/// Without racks (or when every subscriber sits in the rack of every partition's
/// leader) the partitions come in contiguous ranges in member order, as Kafka's
/// `RangeAssignor`. With racks on both sides ([`Racks::is_active`]) the rack-aware
/// range of KIP-881 (Kafka 3.5+): first, in member order, each subscriber takes the
/// unassigned partitions led in its rack (ascending) up to its share (`n / m`, or one
/// more while extra slots remain); then, in member order, each subscriber below its
/// share takes the remaining partitions in ascending order. Every member still gets
/// `n / m` or `n / m + 1`, `n % m` of them the larger share; racks decide which
/// partitions, and which members get the extra ones.
pub(crate) fn owners(view: &GroupView<'_>, racks: &Racks) -> Vec<u32> {
    let mut owners = vec![NO_OWNER; view.partition_count()];
    for topic in view.topics() {
        if racks.is_active() && rack_mismatch(topic, racks) {
            by_rack(topic, racks, &mut owners);
        } else {
            contiguous(topic, &mut owners);
        }
    }
    owners
}

/// Kafka's plain rule for one topic: contiguous ranges in member order.
fn contiguous(topic: &TopicView<'_>, owners: &mut [u32]) {
    // A topic is in the view only if someone subscribes to it.
    let members = topic.subscribers.len() as u32;
    let (quota, extra) = (topic.partitions / members, topic.partitions % members);
    let mut next = topic.first as usize;
    for (k, &member) in topic.subscribers.iter().enumerate() {
        let len = (quota + u32::from((k as u32) < extra)) as usize;
        owners[next..next + len].fill(member);
        next += len;
    }
}

/// Whether some subscriber with a rack is outside the rack of some partition's leader
/// (when none is, racks change nothing and Kafka assigns as without them).
fn rack_mismatch(topic: &TopicView<'_>, racks: &Racks) -> bool {
    let partitions = topic.first..topic.first + topic.partitions;
    let member_racks = topic.subscribers.iter().filter_map(|&m| racks.member(m));
    let mut seen = None;
    for rack in member_racks {
        if seen.is_some_and(|s| s != rack) {
            return true;
        }
        seen = Some(rack);
    }
    match seen {
        None => false,
        Some(rack) => partitions
            .clone()
            .any(|g| racks.leader(g).is_some_and(|l| l != rack)),
    }
}

/// KIP-881's rack-aware range for one topic (see [`owners`]).
fn by_rack(topic: &TopicView<'_>, racks: &Racks, owners: &mut [u32]) {
    let members = topic.subscribers.len() as u32;
    let (quota, mut extra) = (topic.partitions / members, topic.partitions % members);
    let first = topic.first;
    let table = &mut owners[first as usize..][..topic.partitions as usize];
    let mut counts = vec![0u32; topic.subscribers.len()];
    for (k, &m) in topic.subscribers.iter().enumerate() {
        if racks.member(m).is_none() {
            continue;
        }
        let max = quota + u32::from(extra > 0);
        for (p, owner) in table.iter_mut().enumerate() {
            if counts[k] == max {
                break;
            }
            if *owner == NO_OWNER && racks.matches(m, first + p as u32) {
                *owner = m;
                counts[k] += 1;
            }
        }
        if counts[k] > quota {
            extra -= 1;
        }
    }
    let mut free = (0..table.len())
        .filter(|&p| table[p] == NO_OWNER)
        .collect::<Vec<_>>()
        .into_iter();
    for (k, &m) in topic.subscribers.iter().enumerate() {
        if counts[k] > quota {
            continue;
        }
        let target = quota + u32::from(extra > 0);
        if target > quota {
            extra -= 1;
        }
        for p in free.by_ref().take((target - counts[k]) as usize) {
            table[p] = m;
        }
    }
}
