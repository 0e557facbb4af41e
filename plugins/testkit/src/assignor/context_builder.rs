//! [`ContextBuilder`]: an assign context an author describes entry by entry — member
//! racks come with the input ([`super::builders::member`] plus `rack`), labels, broker
//! racks, and per partition its leader, log offsets, committed offset and produce rates
//! — lent to the assignor under test like the host lends one.
//!
//! ```
//! use drover_plugin_testkit::assignor::{builders, ContextBuilder};
//!
//! let ctx = ContextBuilder::new()
//!     .broker(1, Some("eu-1a"))
//!     .label("m1", "disk", "ssd")
//!     .partition("orders", 0, |p| p.leader(1).offsets(0, 120).committed(100).rate(2_000.0, 20.0))
//!     .age_ms(1_500);
//! let lag = ctx.lend(|raw| drover_abi::sdk::assignor::Context::new(raw).lag("orders", 0));
//! assert_eq!(lag, Some(20));
//! # let _ = builders::member("m1", &["orders"]);
//! ```

use std::collections::BTreeMap;

use drover_abi::{
    assignor::{
        AssignContext, AssignContextRef, BrokerContext, MemberContext, MemberLabel,
        PartitionContext, TopicContext,
    },
    std_types::{ROption, RSlice, RString, RVec},
};

/// An assign context built entry by entry; every field not set stays unknown (`None`),
/// as the host leaves what it does not know.
#[derive(Debug, Clone, Default)]
pub struct ContextBuilder {
    labels: BTreeMap<String, Vec<(String, String)>>,
    brokers: BTreeMap<i32, Option<String>>,
    partitions: BTreeMap<String, BTreeMap<i32, PartitionContext>>,
    age_ms: Option<u64>,
}

/// One partition's entry, for [`ContextBuilder::partition`].
#[derive(Debug, Clone)]
pub struct PartitionEntry(PartitionContext);

impl PartitionEntry {
    /// Its leader's broker id (give the broker's rack with [`ContextBuilder::broker`]).
    pub fn leader(mut self, broker_id: i32) -> Self {
        self.0.leader = ROption::RSome(broker_id);
        self
    }

    /// Its log start and end offsets.
    pub fn offsets(mut self, start: i64, end: i64) -> Self {
        self.0.log_start_offset = ROption::RSome(start);
        self.0.log_end_offset = ROption::RSome(end);
        self
    }

    /// The group's committed offset.
    pub fn committed(mut self, offset: i64) -> Self {
        self.0.committed_offset = ROption::RSome(offset);
        self
    }

    /// Its produce rate: bytes and records per second.
    pub fn rate(mut self, bytes_per_sec: f64, records_per_sec: f64) -> Self {
        self.0.produce_bytes_per_sec = ROption::RSome(bytes_per_sec);
        self.0.produce_records_per_sec = ROption::RSome(records_per_sec);
        self
    }
}

impl ContextBuilder {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Member `member_id` declares label `key` = `value` (in call order).
    pub fn label(mut self, member_id: &str, key: &str, value: &str) -> Self {
        self.labels
            .entry(member_id.to_owned())
            .or_default()
            .push((key.to_owned(), value.to_owned()));
        self
    }

    /// Broker `broker_id` with `rack`.
    pub fn broker(mut self, broker_id: i32, rack: Option<&str>) -> Self {
        self.brokers.insert(broker_id, rack.map(str::to_owned));
        self
    }

    /// `topic`'s partition `partition`, described by `describe` (replaces an earlier
    /// entry of the same partition).
    pub fn partition(
        mut self,
        topic: &str,
        partition: i32,
        describe: impl FnOnce(PartitionEntry) -> PartitionEntry,
    ) -> Self {
        let entry = describe(PartitionEntry(PartitionContext::unknown(partition))).0;
        self.partitions
            .entry(topic.to_owned())
            .or_default()
            .insert(partition, entry);
        self
    }

    /// How old the partition data is, ms (assignor ABI 3.2's `partition_data_age_ms`).
    pub fn age_ms(mut self, age_ms: u64) -> Self {
        self.age_ms = Some(age_ms);
        self
    }

    /// Lends the context to `f`, as the host lends one for an assignor call (call
    /// `assignor.assign_with_context(input, raw)` or `Context::new(raw)` inside).
    pub fn lend<R>(&self, f: impl FnOnce(AssignContextRef<'_>) -> R) -> R {
        let members: Vec<MemberContext> = self
            .labels
            .iter()
            .map(|(id, labels)| MemberContext {
                member_id: RString::from(id.as_str()),
                labels: labels
                    .iter()
                    .map(|(k, v)| MemberLabel {
                        key: RString::from(k.as_str()),
                        value: RString::from(v.as_str()),
                    })
                    .collect::<RVec<_>>(),
            })
            .collect();
        let brokers: Vec<BrokerContext> = self
            .brokers
            .iter()
            .map(|(id, rack)| BrokerContext {
                broker_id: *id,
                rack: rack.as_deref().map(RString::from).into(),
            })
            .collect();
        let topics: Vec<TopicContext> = self
            .partitions
            .iter()
            .map(|(topic, partitions)| TopicContext {
                topic: RString::from(topic.as_str()),
                partitions: partitions.values().cloned().collect::<RVec<_>>(),
            })
            .collect();
        AssignContext {
            members: RSlice::from_slice(&members),
            brokers: RSlice::from_slice(&brokers),
            topics: RSlice::from_slice(&topics),
            partition_data_age_ms: self.age_ms.into(),
        }
        .lend(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_abi::sdk::assignor::Context;

    #[test]
    fn what_is_described_is_what_the_sdk_reads() {
        let builder = ContextBuilder::new()
            .broker(1, Some("eu-1a"))
            .broker(2, None)
            .label("m1", "disk", "ssd")
            .partition("t", 3, |p| {
                p.leader(1).offsets(5, 50).committed(45).rate(10.0, 1.0)
            })
            .partition("t", 0, |p| p.leader(2))
            .age_ms(700);
        let read = builder.lend(|raw| {
            let ctx = Context::new(raw);
            (
                ctx.label("m1", "disk").map(str::to_owned),
                ctx.leader_rack("t", 3u32).map(str::to_owned),
                ctx.leader_rack("t", 0).map(str::to_owned),
                ctx.lag("t", 3),
                ctx.lag("t", 0),
                ctx.partition("t", 3).map(|p| p.produce_bytes_per_sec),
                ctx.partition_data_age_ms(),
            )
        });
        assert_eq!(
            read,
            (
                Some("ssd".to_owned()),
                Some("eu-1a".to_owned()),
                None,
                Some(5),
                None,
                Some(ROption::RSome(10.0)),
                Some(700)
            )
        );
    }
}
