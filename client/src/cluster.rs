//! Finding brokers, partition leaders and the group's coordinator (docs/protocol.md §4,
//! "Bootstrap"): bootstrap brokers are tried in turn, with a doubling backoff, until the
//! bootstrap timeout.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use kafka_protocol::{
    messages::{
        metadata_request::MetadataRequestTopic, FindCoordinatorRequest, MetadataRequest, TopicName,
    },
    protocol::StrBytes,
};

use crate::{config::ConsumerConfig, conn::Conn, error::ClientError};

/// Metadata version used (topic names, no topic ids needed).
const METADATA_VERSION: i16 = 9;
/// FindCoordinator version used (single key).
const FIND_COORDINATOR_VERSION: i16 = 3;
/// Kafka's COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR: retried.
const RETRIABLE_COORDINATOR: [i16; 2] = [15, 16];

/// Topics and their partition leaders, as one broker reported them.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetadataView {
    /// Broker id → `host:port`.
    pub brokers: HashMap<i32, String>,
    /// Topic → partition → leader broker id (−1 when none).
    pub topics: BTreeMap<String, BTreeMap<i32, i32>>,
}

impl MetadataView {
    /// The address of `topic`-`partition`'s leader.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Option<&str> {
        let id = self.topics.get(topic)?.get(&partition)?;
        self.brokers.get(id).map(String::as_str)
    }
}

/// Access to the cluster through the bootstrap list.
#[derive(Clone)]
pub(crate) struct Cluster {
    config: Arc<ConsumerConfig>,
}

impl Cluster {
    pub(crate) fn new(config: Arc<ConsumerConfig>) -> Cluster {
        Cluster { config }
    }

    /// Runs `attempt` against the bootstrap brokers in turn until one succeeds or the
    /// bootstrap timeout passes.
    async fn retry<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let started = Instant::now();
        let limit = Duration::from_millis(self.config.bootstrap_timeout_ms);
        let mut backoff = Duration::from_millis(self.config.retry_backoff_ms.max(1));
        let mut last = String::from("none tried");
        loop {
            for broker in &self.config.brokers {
                match Conn::connect(broker, self.config.request_timeout(), &self.config.security)
                    .await
                {
                    Ok(conn) => match attempt(conn).await {
                        Ok(value) => return Ok(value),
                        Err(e @ ClientError::UnknownTopic(_)) => return Err(e),
                        Err(e) => last = e.to_string(),
                    },
                    Err(e) => last = e.to_string(),
                }
            }
            if started.elapsed() >= limit {
                return Err(ClientError::Unreachable {
                    tried: self.config.brokers.join(", "),
                    waited: started.elapsed(),
                    last: format!("{what}: {last}"),
                });
            }
            tracing::debug!(what, %last, "retrying after {backoff:?}");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Metadata of `topics` (every topic when `None`), without auto-creating topics.
    pub(crate) async fn metadata(
        &self,
        topics: Option<&[String]>,
    ) -> Result<MetadataView, ClientError> {
        let mut request = MetadataRequest::default();
        request.allow_auto_topic_creation = false;
        request.topics = topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    let mut t = MetadataRequestTopic::default();
                    t.name = Some(TopicName(StrBytes::from_string(n.clone())));
                    t
                })
                .collect()
        });
        self.retry("Metadata", |mut conn| {
            let request = request.clone();
            async move {
                let response = conn.send(METADATA_VERSION, &request).await?;
                let mut view = MetadataView::default();
                for b in response.brokers {
                    view.brokers
                        .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
                }
                for t in response.topics {
                    let Some(name) = t.name else { continue };
                    if t.error_code != 0 {
                        continue;
                    }
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, p.leader_id.0))
                        .collect();
                    view.topics.insert(name.0.to_string(), partitions);
                }
                Ok(view)
            }
        })
        .await
    }

    /// The `host:port` of the group's coordinator.
    pub(crate) async fn find_coordinator(&self) -> Result<String, ClientError> {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(self.config.group.clone());
        request.key_type = 0;
        self.retry("FindCoordinator", |mut conn| {
            let request = request.clone();
            async move {
                let r = conn.send(FIND_COORDINATOR_VERSION, &request).await?;
                if r.error_code != 0 {
                    let code = if RETRIABLE_COORDINATOR.contains(&r.error_code) {
                        "COORDINATOR_NOT_AVAILABLE: the broker answers but runs no group \
                         coordinator for this group (no coordinator plugin, or its slot has \
                         no owner yet)"
                            .to_owned()
                    } else {
                        format!("error code {}", r.error_code)
                    };
                    return Err(ClientError::Response {
                        api: "FindCoordinator",
                        code,
                    });
                }
                Ok(format!("{}:{}", r.host.as_str(), r.port))
            }
        })
        .await
    }
}
