//! Producer id blocks in cluster mode: every broker takes blocks of ids from one
//! ZooKeeper node, `/latest_producer_id_block` below the chroot, as Kafka's ZooKeeper-era
//! `ProducerIdManager` did. The node holds the last block handed out,
//! `{"version": 1, "broker": <id>, "block_start": <first id>, "block_end": <last id>}`;
//! a broker reads it, writes the next block conditionally on the version it read
//! (`setData` with that version; a lost race reads again), and only then uses the ids,
//! so no id is handed out twice across the cluster, whatever restarts.

use serde::{Deserialize, Serialize};
use zookeeper_client as zk;

use super::{Cluster, ClusterError};

/// The node below the chroot.
pub(crate) const PRODUCER_ID_BLOCK: &str = "/latest_producer_id_block";

/// How many times a broker retries after losing the race for the next block.
const MAX_ATTEMPTS: usize = 20;

/// The contents of [`PRODUCER_ID_BLOCK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct BlockNode {
    version: i32,
    broker: i32,
    block_start: i64,
    block_end: i64,
}

impl Cluster {
    /// The id after the newest block any broker took: no id at or above it was handed
    /// out. Blocking: call from a blocking thread.
    ///
    /// Errors: [`ClusterError::Unavailable`] without a ZooKeeper session,
    /// [`ClusterError::Zk`] for a node that does not parse.
    pub fn producer_ids_handed_out_below(&self) -> Result<i64, ClusterError> {
        let client = self.client_blocking()?;
        self.block_on(async {
            match client.get_data(PRODUCER_ID_BLOCK).await {
                Ok((data, _)) => {
                    let last: BlockNode = serde_json::from_slice(&data)
                        .map_err(|e| ClusterError::Zk(format!("{PRODUCER_ID_BLOCK}: {e}")))?;
                    Ok(last.block_end.saturating_add(1))
                }
                Err(zk::Error::NoNode) => Ok(0),
                Err(e) => Err(e.into()),
            }
        })
    }

    /// Claims the next block of `size` producer ids for this broker: returns its first
    /// id and the id after its last. Blocking: call from a blocking thread.
    ///
    /// Errors: [`ClusterError::Unavailable`] without a ZooKeeper session,
    /// [`ClusterError::Zk`] for a node that does not parse, ids exhausted, or a race
    /// lost `MAX_ATTEMPTS` times.
    pub fn allocate_producer_id_block(&self, size: i64) -> Result<(i64, i64), ClusterError> {
        let client = self.client_blocking()?;
        self.block_on(async {
            for _ in 0..MAX_ATTEMPTS {
                let (start, version) = match client.get_data(PRODUCER_ID_BLOCK).await {
                    Ok((data, stat)) => {
                        let last: BlockNode = serde_json::from_slice(&data)
                            .map_err(|e| ClusterError::Zk(format!("{PRODUCER_ID_BLOCK}: {e}")))?;
                        (last.block_end.checked_add(1), Some(stat.version))
                    }
                    Err(zk::Error::NoNode) => (Some(0), None),
                    Err(e) => return Err(e.into()),
                };
                let end = start.and_then(|s| s.checked_add(size)).ok_or_else(|| {
                    ClusterError::Zk("producer ids exhausted (past i64::MAX)".into())
                })?;
                let start = end - size;
                let node = BlockNode {
                    version: 1,
                    broker: self.me,
                    block_start: start,
                    block_end: end - 1,
                };
                let data = serde_json::to_vec(&node).unwrap_or_default();
                let written = match version {
                    Some(v) => client
                        .set_data(PRODUCER_ID_BLOCK, &data, Some(v))
                        .await
                        .map(|_| ()),
                    None => client
                        .create(
                            PRODUCER_ID_BLOCK,
                            &data,
                            &zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes()),
                        )
                        .await
                        .map(|_| ()),
                };
                match written {
                    Ok(()) => return Ok((start, end)),
                    Err(zk::Error::BadVersion | zk::Error::NodeExists) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(ClusterError::Zk(format!(
                "{PRODUCER_ID_BLOCK}: lost the race for the next block {MAX_ATTEMPTS} times"
            )))
        })
    }
}
