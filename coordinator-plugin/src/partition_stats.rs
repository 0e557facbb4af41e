//! The latest partition table the host measured (coordinator ABI 3.3's
//! `CoordinatorInput::PartitionStats`): state the core keeps between inputs and reads
//! when it builds an assignor's context (`crate::assignors::ContextParts`).
//!
//! Each input replaces the whole table. Memory: one
//! [`PartitionContext`] (96 bytes on 64-bit
//! targets) per partition the host reported, one map entry per topic and per broker;
//! 1,000,000 partitions take about 96 MB.

use std::collections::BTreeMap;

use drover_abi::assignor::{BrokerContext, PartitionContext, TopicContext};
use drover_abi::std_types::{RNone, RString};

use crate::types::TopicName;

/// Per broker its rack, per topic its partitions' data, as last reported by the host.
/// Empty until the first report (and forever with a host older than coordinator ABI
/// 3.3): every context field it would fill stays `None` then.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionStats {
    /// Rack by broker id (`None`: the broker has no rack configured).
    brokers: BTreeMap<i32, Option<RString>>,
    /// Per topic, partitions ascending, each at most once, `committed_offset` cleared.
    topics: BTreeMap<TopicName, Vec<PartitionContext>>,
    /// When the table arrived, on the coordinator's clock (ms); `None` before the first.
    received_ms: Option<u64>,
}

impl PartitionStats {
    /// The table from what the host sent. Partitions are sorted and deduplicated (the
    /// first entry of a partition listed twice is kept); a `committed_offset` the host
    /// set is dropped (the group's own comes from the coordinator); a later entry of a
    /// topic listed twice replaces the earlier one.
    pub fn new(
        brokers: impl IntoIterator<Item = BrokerContext>,
        topics: impl IntoIterator<Item = TopicContext>,
    ) -> Self {
        let brokers = brokers
            .into_iter()
            .map(|b| (b.broker_id, b.rack.into_option()))
            .collect();
        let topics = topics
            .into_iter()
            .map(|t| {
                let mut partitions = t.partitions.into_vec();
                partitions.sort_by_key(|p| p.partition);
                partitions.dedup_by_key(|p| p.partition);
                for p in &mut partitions {
                    p.committed_offset = RNone;
                }
                (TopicName::new(t.topic.as_str()), partitions)
            })
            .collect();
        PartitionStats {
            brokers,
            topics,
            received_ms: None,
        }
    }

    /// The table as received at `now_ms` (the coordinator's clock), so that a context
    /// built later says how old its data is ([`Self::age_ms`]).
    pub fn received_at(mut self, now_ms: u64) -> Self {
        self.received_ms = Some(now_ms);
        self
    }

    /// How old the table is at `now_ms`, in ms; `None` before the first table.
    pub fn age_ms(&self, now_ms: u64) -> Option<u64> {
        self.received_ms.map(|at| now_ms.saturating_sub(at))
    }

    /// The partitions of `topic` the host reported, ascending by partition; empty for
    /// a topic it did not report.
    pub fn partitions(&self, topic: &TopicName) -> &[PartitionContext] {
        self.topics.get(topic).map_or(&[], Vec::as_slice)
    }

    /// Broker `id` with its rack as the host reported it; a broker the host did not
    /// list gets no rack.
    pub fn broker(&self, id: i32) -> BrokerContext {
        BrokerContext {
            broker_id: id,
            rack: self.brokers.get(&id).cloned().flatten().into(),
        }
    }

    /// How many partitions the table holds, over every topic.
    pub fn partition_count(&self) -> usize {
        self.topics.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_abi::std_types::RSome;

    #[test]
    fn table_is_sorted_deduplicated_and_drops_committed_offsets() {
        let mut p1 = PartitionContext::unknown(1);
        p1.leader = RSome(3);
        p1.committed_offset = RSome(5);
        let p0 = PartitionContext::unknown(0);
        let dup = PartitionContext::unknown(1);
        let stats = PartitionStats::new(
            [BrokerContext {
                broker_id: 3,
                rack: RSome("r1".into()),
            }],
            [TopicContext {
                topic: "t".into(),
                partitions: vec![p1, p0, dup].into(),
            }],
        );
        let parts = stats.partitions(&TopicName::new("t"));
        assert_eq!(
            parts.iter().map(|p| p.partition).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(parts[1].leader, RSome(3));
        assert_eq!(parts[1].committed_offset, RNone);
        assert_eq!(stats.broker(3).rack, RSome("r1".into()));
        assert_eq!(stats.broker(9).rack, RNone);
        assert!(stats.partitions(&TopicName::new("other")).is_empty());
        assert_eq!(stats.partition_count(), 2);
    }

    #[test]
    fn partition_context_is_96_bytes() {
        // The memory figure of the module docs and of docs/plugins.md.
        assert_eq!(std::mem::size_of::<PartitionContext>(), 96);
    }
}
