//! One assignor call's input and context, built by the same code a rebalance uses
//! ([`crate::assignors`]: the `AssignInput` of the members and topics, the
//! `AssignContext` from labels, committed offsets and the host's [`PartitionStats`]),
//! as a public type: the benchmark of what building them costs next to the assignment
//! itself (`benches/assignor_context.rs`, docs/benchmarks.md) uses it.

use std::collections::{BTreeMap, BTreeSet};

use drover_abi::assignor::{AssignInput, Assignment};
use drover_abi::PluginError;

use crate::assignors::{build_input, Assignors, ContextParts, MemberView};
use crate::partition_stats::PartitionStats;
use crate::types::{ConsumerId, TopicName, TopicPartition};

/// A member as [`AssignorCall::build`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct CallMember<'a> {
    /// Its id.
    pub id: &'a ConsumerId,
    /// The topics it subscribes to (those that do not exist are left out of the input).
    pub topics: &'a BTreeSet<TopicName>,
    /// The partitions it owns now.
    pub owned: &'a BTreeSet<TopicPartition>,
}

/// An assignor's input and its context, ready to be lent to an assignor.
#[derive(Debug)]
pub struct AssignorCall {
    input: AssignInput,
    context: ContextParts,
}

impl AssignorCall {
    /// What a native group's rebalance hands its assignor for `members` (no racks,
    /// weight 1, no labels) over `topics` (partition counts): the input, and a context
    /// with `stats`' entries of the subscribed partitions and the committed offsets in
    /// `committed` (in (topic, partition) order).
    pub fn build<'c>(
        group: &str,
        members: &[CallMember<'_>],
        topics: &BTreeMap<TopicName, u32>,
        stats: &PartitionStats,
        committed: impl IntoIterator<Item = (&'c TopicPartition, i64)>,
    ) -> Self {
        let views: Vec<MemberView<'_>> = members
            .iter()
            .map(|m| MemberView {
                id: m.id,
                topics: m.topics,
                owned: m.owned,
                rack: None,
                weight: 1,
                labels: &[],
            })
            .collect();
        AssignorCall {
            input: build_input(group, &views, topics),
            context: ContextParts::build(&views, topics, stats, committed),
        }
    }

    /// The input.
    pub fn input(&self) -> &AssignInput {
        &self.input
    }

    /// Runs assignor `name` of `assignors` with the input and the context (not checked:
    /// the coordinator checks the output separately). Errors: the assignor's.
    pub fn run(&self, assignors: &dyn Assignors, name: &str) -> Result<Assignment, PluginError> {
        self.context
            .lend(|context| assignors.assign_with_context(name, &self.input, context))
    }
}
