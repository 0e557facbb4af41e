//! Topic config overrides in cluster mode: they live in ZooKeeper with the topic's
//! placement (`/brokers/topics/<name>`, field `configs`), so every broker that holds a
//! copy of the topic applies the same settings. AlterConfigs changes them here first,
//! as a read-modify-write of the node: the change (IncrementalAlterConfigs' operations,
//! or AlterConfigs' whole new set) is applied to the overrides read from ZooKeeper, not
//! to this broker's copy (which lags by up to a refresh interval), and written with a
//! versioned `set_data`; a concurrent write by another broker makes it start again
//! from the newer node, up to [`MAX_ATTEMPTS`] times, so two brokers' concurrent alters
//! both stick and neither fails for having raced. The other brokers pick the result up
//! with the topic list on their next refresh and apply it to their logs
//! (`cluster::sync`).

use zookeeper_client as zk;

use super::{Cluster, ClusterError, TopicPlacement, TOPICS};
use crate::broker::topic_config::Overrides;

/// How many times a config change reads and writes the topic's node before giving up
/// when other brokers keep changing it in between (each retry follows a write that
/// succeeded elsewhere, so the cluster makes progress).
pub const MAX_ATTEMPTS: usize = 32;

impl Cluster {
    /// Changes the config overrides of topic `name` in ZooKeeper: `change` maps the
    /// overrides stored there to the new ones (it may run several times, once per
    /// attempt, always on the newest node) or refuses with its own error `E`, which is
    /// returned as the inner `Err` with nothing written. Returns the overrides written.
    /// Blocking: call from a blocking thread. Errors: [`ClusterError::UnknownTopic`],
    /// ZooKeeper's, or [`ClusterError::Zk`] after [`MAX_ATTEMPTS`] lost races.
    pub fn update_topic_configs<E>(
        &self,
        name: &str,
        change: impl Fn(&Overrides) -> Result<Overrides, E>,
    ) -> Result<Result<Overrides, E>, ClusterError> {
        let client = self.client_blocking()?;
        let path = format!("{TOPICS}/{name}");
        let outcome = self.block_on(async {
            for _ in 0..MAX_ATTEMPTS {
                let (data, stat) = client.get_data(&path).await.map_err(|e| match e {
                    zk::Error::NoNode => ClusterError::UnknownTopic(name.to_owned()),
                    other => other.into(),
                })?;
                let mut placement: TopicPlacement = serde_json::from_slice(&data)
                    .map_err(|e| ClusterError::Zk(format!("{path}: {e}")))?;
                placement.configs = match change(&placement.configs) {
                    Ok(updated) => updated,
                    Err(refused) => return Ok(Err(refused)),
                };
                let data = serde_json::to_vec(&placement).unwrap_or_default();
                match client.set_data(&path, &data, Some(stat.version)).await {
                    Ok(_) => return Ok(Ok(placement)),
                    Err(zk::Error::BadVersion) => continue,
                    Err(zk::Error::NoNode) => {
                        return Err(ClusterError::UnknownTopic(name.to_owned()))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(ClusterError::Zk(format!(
                "{path}: changed by other brokers {MAX_ATTEMPTS} times while altering its \
                 configs"
            )))
        })?;
        Ok(match outcome {
            Ok(placement) => {
                let configs = placement.configs.clone();
                self.update(|v| {
                    v.topics.insert(name.to_owned(), placement);
                });
                Ok(configs)
            }
            Err(refused) => Err(refused),
        })
    }
}
