//! The range rule itself.

use drover_abi::sdk::assignor::{GroupView, NO_OWNER};

/// Owner table: for each topic, its subscribers (already in member-id order) get
/// contiguous ranges of `n / m` partitions, the first `n % m` of them one more.
pub(crate) fn owners(view: &GroupView<'_>) -> Vec<u32> {
    let mut owners = vec![NO_OWNER; view.partition_count()];
    for topic in view.topics() {
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
    owners
}
