//! [`Context`]: an assignor's view of its [`AssignContextRef`] (assignor ABI 3.1),
//! indexed for lookups by member id and by (topic, partition).

use std::collections::HashMap;

use crate::assignor::{
    AssignContextRef, BrokerContext, MemberContext, MemberLabel, PartitionContext, TopicContext,
};

/// The context of one assignment, indexed: member labels by member id, partition data
/// by (topic, partition), broker racks by id. Every lookup answers `None` (or an empty
/// slice) for what the host does not know; see [`crate::assignor::context`] for what
/// the host fills.
#[derive(Debug, Default)]
pub struct Context<'a> {
    members: HashMap<&'a str, &'a MemberContext>,
    topics: HashMap<&'a str, &'a TopicContext>,
    brokers: HashMap<i32, &'a BrokerContext>,
    partition_data_age_ms: Option<u64>,
}

impl<'a> Context<'a> {
    /// Indexes `raw`. When an entry appears twice (a member, a topic or a broker), the
    /// first one counts.
    pub fn new(raw: AssignContextRef<'a>) -> Self {
        let mut ctx = Context::default();
        for m in raw.members().as_slice() {
            ctx.members.entry(m.member_id.as_str()).or_insert(m);
        }
        for t in raw.topics().as_slice() {
            ctx.topics.entry(t.topic.as_str()).or_insert(t);
        }
        for b in raw.brokers().as_slice() {
            ctx.brokers.entry(b.broker_id).or_insert(b);
        }
        ctx.partition_data_age_ms = raw.partition_data_age_ms().and_then(|a| a.into_option());
        ctx
    }

    /// How old the host's per-partition data (log offsets, produce rates, leaders) is,
    /// in ms; `None` when there is none or the coordinator is older than assignor ABI
    /// 3.2. Committed offsets are current, so a lag computed from this data mixes two
    /// moments up to this far apart.
    pub fn partition_data_age_ms(&self) -> Option<u64> {
        self.partition_data_age_ms
    }

    /// An empty context (what a 3.0 caller's plain `assign` amounts to).
    pub fn empty() -> Self {
        Context::default()
    }

    /// The labels member `member_id` declared, in its order; empty when it declared
    /// none or is unknown.
    pub fn labels(&self, member_id: &str) -> &'a [MemberLabel] {
        self.members
            .get(member_id)
            .map_or(&[], |m| m.labels.as_slice())
    }

    /// The value of member `member_id`'s label `key`.
    pub fn label(&self, member_id: &str, key: &str) -> Option<&'a str> {
        self.labels(member_id)
            .iter()
            .find(|l| l.key.as_str() == key)
            .map(|l| l.value.as_str())
    }

    /// What the host knows about `topic`'s partition `partition`.
    ///
    /// `partition` is any integer type: the `u32` of [`super::GroupView`]'s topics as
    /// well as the ABI's `i32` (a number out of `i32`'s range is simply not found).
    pub fn partition(
        &self,
        topic: &str,
        partition: impl TryInto<i32>,
    ) -> Option<&'a PartitionContext> {
        let partition: i32 = partition.try_into().ok()?;
        let t = self.topics.get(topic)?;
        let list = t.partitions.as_slice();
        match list.binary_search_by_key(&partition, |p| p.partition) {
            Ok(i) => Some(&list[i]),
            // Not sorted as documented: fall back to a scan rather than miss it.
            Err(_) => list.iter().find(|p| p.partition == partition),
        }
    }

    /// The rack of broker `broker_id`, if the host knows it.
    pub fn broker_rack(&self, broker_id: i32) -> Option<&'a str> {
        self.brokers
            .get(&broker_id)
            .and_then(|b| b.rack.as_ref().into_option())
            .map(|r| r.as_str())
    }

    /// The rack of the leader of `topic`'s partition `partition`, if both are known.
    pub fn leader_rack(&self, topic: &str, partition: impl TryInto<i32>) -> Option<&'a str> {
        let leader = *self
            .partition(topic, partition)?
            .leader
            .as_ref()
            .into_option()?;
        self.broker_rack(leader)
    }

    /// The group's lag on `topic`'s partition `partition`: log end minus committed
    /// offset, in records, when both are known. The log end comes from the host's
    /// partition table ([`Self::partition_data_age_ms`] old) and the committed offset is
    /// current, so a committed offset past that log end means the log end is stale:
    /// the lag is then unknown (`None`), never a clamped 0.
    pub fn lag(&self, topic: &str, partition: impl TryInto<i32>) -> Option<i64> {
        let p = self.partition(topic, partition)?;
        let end = *p.log_end_offset.as_ref().into_option()?;
        let committed = *p.committed_offset.as_ref().into_option()?;
        (end >= committed).then_some(end - committed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignor::AssignContext;
    use abi_stable::std_types::{RSlice, RVec};

    #[test]
    fn looks_up_labels_partitions_and_racks() {
        let members = [MemberContext {
            member_id: "m".into(),
            labels: RVec::from(vec![MemberLabel {
                key: "zone".into(),
                value: "a".into(),
            }]),
        }];
        let brokers = [BrokerContext {
            broker_id: 3,
            rack: ROptionExt::some("r3"),
        }];
        let mut p1 = PartitionContext::unknown(1);
        p1.leader = abi_stable::std_types::RSome(3);
        p1.log_end_offset = abi_stable::std_types::RSome(10);
        p1.committed_offset = abi_stable::std_types::RSome(4);
        let topics = [TopicContext {
            topic: "t".into(),
            partitions: RVec::from(vec![PartitionContext::unknown(0), p1]),
        }];
        let found = AssignContext {
            members: RSlice::from_slice(&members),
            brokers: RSlice::from_slice(&brokers),
            topics: RSlice::from_slice(&topics),
            partition_data_age_ms: abi_stable::std_types::RSome(1_500),
        }
        .lend(|raw| {
            let ctx = Context::new(raw);
            (
                ctx.label("m", "zone").map(str::to_owned),
                ctx.label("m", "other").is_none(),
                ctx.labels("nobody").is_empty(),
                ctx.leader_rack("t", 1).map(str::to_owned),
                ctx.leader_rack("t", 0).is_none(),
                ctx.lag("t", 1),
                ctx.partition("u", 0).is_none(),
            )
        });
        assert_eq!(
            found,
            (
                Some("a".to_owned()),
                true,
                true,
                Some("r3".to_owned()),
                true,
                Some(6),
                true
            )
        );
    }

    /// Issue 28 item 3: a committed offset past the (older) log end is an unknown lag,
    /// not a clamped 0; the data's age reaches the assignor.
    #[test]
    fn a_committed_offset_past_a_stale_log_end_is_an_unknown_lag() {
        let mut p = PartitionContext::unknown(0);
        p.log_end_offset = abi_stable::std_types::RSome(584);
        p.committed_offset = abi_stable::std_types::RSome(652);
        let topics = [TopicContext {
            topic: "t".into(),
            partitions: RVec::from(vec![p]),
        }];
        let (lag, age) = AssignContext {
            members: RSlice::from_slice(&[]),
            brokers: RSlice::from_slice(&[]),
            topics: RSlice::from_slice(&topics),
            partition_data_age_ms: abi_stable::std_types::RSome(4_000),
        }
        .lend(|raw| {
            let ctx = Context::new(raw);
            (ctx.lag("t", 0), ctx.partition_data_age_ms())
        });
        assert_eq!((lag, age), (None, Some(4_000)));
    }

    /// `ROption<RString>` from a `&str`, for the test's brevity.
    trait ROptionExt {
        fn some(s: &str) -> Self;
    }
    impl ROptionExt for abi_stable::std_types::ROption<abi_stable::std_types::RString> {
        fn some(s: &str) -> Self {
            abi_stable::std_types::RSome(s.into())
        }
    }
}
