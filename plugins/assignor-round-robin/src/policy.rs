//! The round-robin rule itself.

use drover_abi::sdk::assignor::{GroupView, NO_OWNER};

/// Owner table of Kafka's circular walk, without stepping over non-subscribers one by
/// one: the walk reaches a topic at some position of the member circle; its partitions
/// then go to the topic's subscribers in circle order starting from the first one at or
/// after that position, and the walk resumes after the last member served.
pub(crate) fn owners(view: &GroupView<'_>) -> Vec<u32> {
    let mut owners = vec![NO_OWNER; view.partition_count()];
    let members = view.members().len() as u32;
    let mut cursor = 0u32; // The member the walk looks at next.
    for topic in view.topics() {
        let subscribers = &topic.subscribers; // Ascending member indexes, never empty.
        let first = subscribers.partition_point(|&m| m < cursor) % subscribers.len();
        let table = &mut owners[topic.first as usize..][..topic.partitions as usize];
        let mut k = first;
        for owner in table.iter_mut() {
            *owner = subscribers[k];
            k += 1;
            if k == subscribers.len() {
                k = 0;
            }
        }
        let last = (first + topic.partitions as usize - 1) % subscribers.len();
        cursor = (subscribers[last] + 1) % members;
    }
    owners
}
