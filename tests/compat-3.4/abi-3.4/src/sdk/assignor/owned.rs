//! Resolving a member's owned partitions (from the previous generation) to global ids.

use super::GroupView;

impl GroupView<'_> {
    /// Clears `out` and fills it with the global ids of the partitions member `member`
    /// owns that it could keep: of a topic in the view that it subscribes to, and in
    /// range. Ascending, without duplicates. Unknown topics, unsubscribed topics and
    /// out-of-range (or negative) partitions are skipped. Whether another member claims
    /// the same partition is the policy's business.
    pub fn owned_partitions(&self, member: usize, out: &mut Vec<u32>) {
        out.clear();
        let view = &self.members()[member];
        for owned in view.input.owned.iter() {
            let Some(t) = self.topic_index(owned.topic.as_str()) else {
                continue;
            };
            if view.topics.binary_search(&t).is_err() {
                continue;
            }
            let topic = &self.topics()[t as usize];
            out.extend(
                owned
                    .partitions
                    .iter()
                    .filter(|&&p| p >= 0 && (p as u32) < topic.partitions)
                    .map(|&p| topic.first + p as u32),
            );
        }
        out.sort_unstable();
        out.dedup();
    }
}
