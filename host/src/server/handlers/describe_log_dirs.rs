//! DescribeLogDirs (API 35, v1–v4): the broker's one log directory
//! (`<data_dir>/logs`) with the size of each partition's log, as Kafka's
//! `ReplicaManager.describeLogDirs` answers it.
//!
//! - A partition's size is the bytes of its segments' `.log` files
//!   ([`crate::log::PartitionLog::size_bytes`], Kafka's `UnifiedLog.size`; indexes not
//!   counted); its offset lag is 0 (no followers: the high watermark is the log end);
//!   no log is a future one (AlterReplicaLogDirs is not served).
//! - A null topic list means every partition; otherwise the partitions named, and
//!   names that are not partitions here are left out without an error. Topics with no
//!   partition to list are left out, as in Kafka.
//! - In cluster mode only the partitions this broker leads: they are the replicas it
//!   holds (Drover does not replicate).
//! - v4 (KIP-827) adds the volume's total and usable bytes (`statvfs` of the
//!   directory; −1 when it cannot be read).
//! - A partition whose log is offline is left out (Kafka leaves out the logs of an
//!   offline directory).
//!
//! Bound: at most [`MAX_PARTITIONS`] partitions named per request; beyond it the answer
//! is `INVALID_REQUEST` with no directory, without looking at a log.

use crate::authz::{AclOperation, RequestAuthz};
use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_log_dirs_response::{
            DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
        },
        DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
    },
    protocol::StrBytes,
};

use crate::{broker::Partitions, server::reply::Reply};

/// The most partitions one DescribeLogDirs request may name (as DeleteRecords).
pub const MAX_PARTITIONS: usize = super::delete_records::MAX_PARTITIONS;

/// Handles DescribeLogDirs v1–v4 (on the blocking pool: it locks partition logs and
/// reads the file system).
pub fn handle(
    partitions: Partitions<'_>,
    authz: &RequestAuthz,
    request: DescribeLogDirsRequest,
) -> Reply {
    let mut response = DescribeLogDirsResponse::default();
    // Kafka: Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED and no results.
    if !authz.allows_cluster(AclOperation::Describe) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        response.error_code = code;
        return Reply::new(response, code);
    }
    // The partitions named, by topic; None: all.
    let wanted: Option<BTreeMap<String, BTreeSet<i32>>> = match request.topics {
        None => None,
        Some(topics) => {
            let total: usize = topics.iter().map(|t| t.partitions.len()).sum();
            if total > MAX_PARTITIONS {
                crate::info_limited!(
                    "describe_log_dirs.too_many",
                    partitions = total,
                    "DescribeLogDirs refused: more than {MAX_PARTITIONS} partitions"
                );
                let code = ResponseError::InvalidRequest.code();
                response.error_code = code;
                return Reply::new(response, code);
            }
            let mut wanted: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for t in topics {
                wanted
                    .entry(t.topic.0.to_string())
                    .or_default()
                    .extend(t.partitions);
            }
            Some(wanted)
        }
    };
    let dir = partitions.topics.logs_dir();
    let mut result = DescribeLogDirsResult::default();
    result.log_dir = StrBytes::from_string(
        std::path::absolute(&dir)
            .unwrap_or_else(|_| dir.clone())
            .display()
            .to_string(),
    );
    (result.total_bytes, result.usable_bytes) = volume_bytes(&dir).unwrap_or((-1, -1));
    result.topics = match &wanted {
        None => {
            let mut topics = partitions.topics.list();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            topics
                .iter()
                .filter_map(|t| describe_topic(partitions, t, None))
                .collect()
        }
        Some(wanted) => wanted
            .iter()
            .filter_map(|(name, indexes)| {
                let topic = partitions.topics.get(name)?;
                describe_topic(partitions, &topic, Some(indexes))
            })
            .collect(),
    };
    response.results = vec![result];
    Reply::new(response, 0)
}

/// The partitions of `topic` this broker holds (those of `only`, when given), or None
/// when there are none to list.
fn describe_topic(
    partitions: Partitions<'_>,
    topic: &crate::broker::Topic,
    only: Option<&BTreeSet<i32>>,
) -> Option<DescribeLogDirsTopic> {
    let listed: Vec<DescribeLogDirsPartition> = topic
        .partitions
        .iter()
        .filter(|p| only.is_none_or(|only| only.contains(&p.index)))
        .filter(|p| partitions.serves(&topic.name, p.index))
        .filter_map(|p| {
            let log = p.lock_log();
            if log.is_offline() {
                return None;
            }
            let mut out = DescribeLogDirsPartition::default();
            out.partition_index = p.index;
            out.partition_size = i64::try_from(log.size_bytes()).unwrap_or(i64::MAX);
            out.offset_lag = 0;
            out.is_future_key = false;
            Some(out)
        })
        .collect();
    if listed.is_empty() {
        return None;
    }
    let mut out = DescribeLogDirsTopic::default();
    out.name = TopicName(StrBytes::from_string(topic.name.clone()));
    out.partitions = listed;
    Some(out)
}

/// The total and usable bytes of the volume `dir` is on (`statvfs`), saturated to
/// `i64::MAX` as Kafka's `adjustForLargeFileSystems`.
#[allow(clippy::useless_conversion)] // the statvfs field types differ between targets
fn volume_bytes(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stat` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let bytes = |blocks: u64| {
        i64::try_from(blocks.saturating_mul(u64::from(stat.f_frsize))).unwrap_or(i64::MAX)
    };
    Some((
        bytes(u64::from(stat.f_blocks)),
        bytes(u64::from(stat.f_bavail)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_volume_of_a_directory_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let (total, usable) = volume_bytes(dir.path()).unwrap();
        assert!(
            total > 0 && usable >= 0 && usable <= total,
            "{total} {usable}"
        );
        assert_eq!(volume_bytes(&dir.path().join("missing")), None);
    }
}
