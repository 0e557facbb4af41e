//! What a group's last assignment saw of its partitions' load (produce rates and lag),
//! kept by the group for operators: DescribeGroups v1's `partition_loads`
//! (docs/protocol.md §5.8) and the admin API's `GET /v1/groups/{group}`.
//!
//! Built from the assignor's context (`crate::assignors::ContextParts::seen_loads`)
//! at each assignment and replaced by the next one. Memory: one [`SeenLoad`] (32 bytes)
//! per partition the context had a rate or lag for.

use crate::types::TopicName;

/// One partition's load as an assignment saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeenLoad {
    /// The partition index.
    pub partition: i32,
    /// Produce rate into it, bytes per second over the host's rate window; `None` when
    /// the host had not reported it.
    pub bytes_per_sec: Option<f64>,
    /// Produce rate into it, records per second over the same window.
    pub records_per_sec: Option<f64>,
    /// Log end offset minus the group's committed offset (≥ 0); `None` when either was
    /// unknown.
    pub lag: Option<i64>,
}

/// The loads seen for one topic's partitions, ascending by partition.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSeenLoads {
    /// The topic.
    pub topic: TopicName,
    /// Its partitions with a rate or a lag, ascending.
    pub partitions: Vec<SeenLoad>,
}
