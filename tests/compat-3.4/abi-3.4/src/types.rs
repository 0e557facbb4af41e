//! Boundary types shared by several plugin kinds.

use abi_stable::{
    std_types::{RString, RVec},
    StableAbi,
};

/// A set of partitions of one topic: `topic` and partition indexes (0-based).
/// Used for owned partitions, assignments and offset fetches; grouping by topic keeps a
/// million-partition assignment to one string per topic.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartitions {
    /// Topic name.
    pub topic: RString,
    /// Partition indexes, each in `0..partition_count`.
    pub partitions: RVec<i32>,
}

impl TopicPartitions {
    /// Builds a value from a topic name and partition indexes.
    pub fn new(topic: impl Into<RString>, partitions: impl Into<RVec<i32>>) -> Self {
        TopicPartitions {
            topic: topic.into(),
            partitions: partitions.into(),
        }
    }
}

/// A topic and its partition count.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicInfo {
    /// Topic name.
    pub name: RString,
    /// Number of partitions; partitions are `0..partitions`.
    pub partitions: u32,
}

impl TopicInfo {
    /// Builds a value from a topic name and partition count.
    pub fn new(name: impl Into<RString>, partitions: u32) -> Self {
        TopicInfo {
            name: name.into(),
            partitions,
        }
    }
}
