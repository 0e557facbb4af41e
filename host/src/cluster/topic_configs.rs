//! Topic config overrides in cluster mode: they live in ZooKeeper with the topic's
//! placement (`/brokers/topics/<name>`, field `configs`), so every broker that holds a
//! copy of the topic applies the same settings. AlterConfigs writes them here first
//! (a versioned `set_data`, so a concurrent change of the same node is refused rather
//! than lost); the other brokers pick them up with the topic list on their next
//! refresh and apply them to their logs (`cluster::sync`).

use super::{Cluster, ClusterError, TopicPlacement, TOPICS};
use crate::broker::topic_config::Overrides;

impl Cluster {
    /// Replaces the config overrides of topic `name` in ZooKeeper. Blocking: call from
    /// a blocking thread. Errors: [`ClusterError::UnknownTopic`], or ZooKeeper's (a
    /// concurrent change of the topic is [`ClusterError::Zk`]; the client retries).
    pub fn set_topic_configs(&self, name: &str, configs: &Overrides) -> Result<(), ClusterError> {
        let client = self.client_blocking()?;
        let path = format!("{TOPICS}/{name}");
        let placement = self.block_on(async {
            let (data, stat) = client.get_data(&path).await.map_err(|e| match e {
                zookeeper_client::Error::NoNode => ClusterError::UnknownTopic(name.to_owned()),
                other => other.into(),
            })?;
            let mut placement: TopicPlacement = serde_json::from_slice(&data)
                .map_err(|e| ClusterError::Zk(format!("{path}: {e}")))?;
            placement.configs = configs.clone();
            let data = serde_json::to_vec(&placement).unwrap_or_default();
            client
                .set_data(&path, &data, Some(stat.version))
                .await
                .map_err(ClusterError::from)?;
            Ok::<_, ClusterError>(placement)
        })?;
        self.update(|v| {
            v.topics.insert(name.to_owned(), placement);
        });
        Ok(())
    }
}
