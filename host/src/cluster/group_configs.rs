//! Group configs in cluster mode: one persistent ZooKeeper node,
//! `<chroot>/config/group_configs`, holding the document a standalone broker keeps in
//! `<data_dir>/group-configs.json` ([`crate::broker::group_configs`]). IncrementalAlterConfigs
//! on any broker alters it as a versioned read-modify-write; every broker follows it
//! with a data watch ([`follow`]) and answers from its copy, so a change made through
//! one broker applies on the partition leaders that deliver the group's share
//! partitions within a watch round trip.
//!
//! One node keeps the document small to follow (one watch, one read per change); its
//! size is bounded by [`crate::broker::group_configs::MAX_GROUPS`], well under
//! ZooKeeper's 1 MiB `jute.maxbuffer`.

use std::sync::Arc;

use tokio::sync::watch;
use zookeeper_client as zk;

use super::{Cluster, ClusterError};
use crate::broker::group_configs::{AllGroupConfigs, GroupConfigs, GroupConfigsFile};

/// The node's path below the chroot.
pub const NODE: &str = "/config/group_configs";
const PARENT: &str = "/config";
/// How many times an alteration reads and writes the node while other brokers keep
/// writing it in between.
const MAX_ATTEMPTS: usize = 32;

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(super::acl::nodes())
}

fn damaged(e: String) -> ClusterError {
    ClusterError::Zk(format!("{NODE}: {e}"))
}

/// Reads the node (an empty document when it does not exist yet) and its version
/// (`None`: no node).
async fn read(client: &zk::Client) -> Result<(AllGroupConfigs, Option<i32>), ClusterError> {
    match client.get_data(NODE).await {
        Ok((data, stat)) => Ok((
            GroupConfigsFile::decode(&data).map_err(damaged)?,
            Some(stat.version),
        )),
        Err(zk::Error::NoNode) => Ok((AllGroupConfigs::new(), None)),
        Err(e) => Err(e.into()),
    }
}

impl Cluster {
    /// Applies `change` to every group's configs as stored in ZooKeeper, as one
    /// versioned read-modify-write that starts again from the newer node when another
    /// broker wrote in between (up to 32 times). `change` may refuse with its own error
    /// `E`, returned as the inner `Err` with nothing written. Returns the document
    /// written, which the caller installs locally. Blocking: call from a blocking
    /// thread. Errors: ZooKeeper's, or [`ClusterError::Zk`] for a damaged node or too
    /// many lost races.
    pub fn update_group_configs<E>(
        &self,
        change: impl Fn(&AllGroupConfigs) -> Result<AllGroupConfigs, E>,
    ) -> Result<Result<AllGroupConfigs, E>, ClusterError> {
        let client = self.client_blocking()?;
        self.block_on(async {
            for _ in 0..MAX_ATTEMPTS {
                let (current, version) = read(&client).await?;
                let next = match change(&current) {
                    Ok(next) => next,
                    Err(refused) => return Ok(Err(refused)),
                };
                let data = GroupConfigsFile::encode(&next);
                let written = match version {
                    Some(v) => client.set_data(NODE, &data, Some(v)).await.map(|_| ()),
                    None => {
                        match client.mkdir(PARENT, &persistent()).await {
                            Ok(()) | Err(zk::Error::NodeExists) => {}
                            Err(e) => return Err(e.into()),
                        }
                        client.create(NODE, &data, &persistent()).await.map(|_| ())
                    }
                };
                match written {
                    Ok(()) => return Ok(Ok(next)),
                    Err(zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists) => {
                        continue
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(ClusterError::Zk(format!(
                "{NODE}: changed by other brokers {MAX_ATTEMPTS} times while altering it"
            )))
        })
    }
}

/// Follows the node until `stop` becomes true ([`super::follow::follow_node`]),
/// installing each version in `configs` (an empty document while there is no node).
pub async fn follow(
    configs: Arc<GroupConfigs>,
    cluster: Arc<Cluster>,
    stop: watch::Receiver<bool>,
) {
    let configs = &configs;
    super::follow::follow_node(
        cluster,
        stop,
        "cluster.group_configs_follow",
        |client| async move { watch_once(configs, &client).await },
    )
    .await
}

/// One read of the node with a watch; installs what it read.
async fn watch_once(
    configs: &GroupConfigs,
    client: &zk::Client,
) -> Result<zk::OneshotWatcher, ClusterError> {
    loop {
        match client.get_and_watch_data(NODE).await {
            Ok((data, _, watcher)) => {
                configs.replace_all(GroupConfigsFile::decode(&data).map_err(damaged)?);
                return Ok(watcher);
            }
            Err(zk::Error::NoNode) => {
                // Created since? Read it; else watch for its creation.
                if let (None, watcher) = client.check_and_watch_stat(NODE).await? {
                    configs.replace_all(AllGroupConfigs::new());
                    return Ok(watcher);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}
