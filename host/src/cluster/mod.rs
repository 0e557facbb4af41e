//! Cluster mode (docs/design.md, "Cluster mode"): brokers coordinated through ZooKeeper.
//!
//! Layout below `zookeeper.chroot`:
//!
//! ```text
//! /brokers/ids/<id>          ephemeral: {"host": .., "port": .., "endpoints": {..}}
//! /brokers/topics/<topic>    {"id": uuid, "leaders": [broker id per partition]}
//! /coordinator/slots/<n>     ephemeral: {"broker": id}               slot owners
//! /latest_producer_id_block  {"broker": id, "block_start": .., ..}   producer ids
//! ```
//!
//! - **Brokers** register an ephemeral node with their advertised address on every
//!   listener (`endpoints`, by listener name; `host` and `port` are the first
//!   listener's, which is all a broker from before named listeners wrote); Metadata lists
//!   every live broker that has the listener the request came in on, at its address on
//!   that listener, as Kafka does.
//! - **Topics** live in ZooKeeper: creating one through any broker places each
//!   partition on a live broker (round robin from a hash of the name) and records the
//!   placement; every broker keeps a local copy of every topic (same id and partition
//!   count) but serves only the partitions it leads — a Produce, Fetch or ListOffsets
//!   for another broker's partition gets NOT_LEADER_OR_FOLLOWER. Replication is out of
//!   scope: a partition whose leader is down is reported with leader −1 and served
//!   again when that broker returns.
//! - **Coordinator slots**: a group belongs to slot `coordinator_slot(group, slots)`;
//!   each slot is owned by the broker whose ephemeral node claims it. A broker claims
//!   free slots it is the preferred owner of (slot mod live brokers) at once and any
//!   other free slot after `slot_claim_delay_ms`, so slots spread and fail over. The
//!   coordinator plugin hears `slot_gained` / `slot_lost`; FindCoordinator names the
//!   owner.
//! - **Sessions**: when the ZooKeeper session expires — or the connection has been
//!   lost for a whole session timeout, after which the slot nodes are surely gone —
//!   the broker gives up its slots, then registers again with a new session and
//!   competes again. Meanwhile it keeps serving its partitions and says so in its log
//!   and in `drover_zookeeper_connected`.

pub mod acl;
pub mod follow;
pub mod group_configs;
mod liveness;
mod producer_ids;
pub mod session;
pub mod sync;
pub mod topic_configs;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;
use zookeeper_client as zk;

use crate::config::ZookeeperSection;

/// A broker's advertised address on one listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
}

/// A live broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerAddr {
    /// Advertised host of its first listener.
    pub host: String,
    /// Port of its first listener.
    pub port: i32,
    /// Rack, if the broker has one (absent in registrations of older brokers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Its advertised address on each listener, by listener name (issue 29; absent in
    /// registrations of brokers from before named listeners: see [`endpoint_on`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endpoints: BTreeMap<String, Endpoint>,
}

impl BrokerAddr {
    /// Its address on `listener`, if it has that listener.
    pub fn endpoint(&self, listener: &crate::config::listeners::ListenerName) -> Option<Endpoint> {
        endpoint_on(&self.host, self.port, &self.endpoints, listener)
    }
}

/// A broker's address on `listener`: from `endpoints`, or, when a broker registered
/// none (one from before named listeners, whose only listener was PLAINTEXT),
/// `host`:`port` for the PLAINTEXT listener only.
pub fn endpoint_on(
    host: &str,
    port: i32,
    endpoints: &BTreeMap<String, Endpoint>,
    listener: &crate::config::listeners::ListenerName,
) -> Option<Endpoint> {
    if endpoints.is_empty() {
        return (listener.as_str() == crate::config::listeners::ListenerName::PLAINTEXT).then(
            || Endpoint {
                host: host.to_owned(),
                port,
            },
        );
    }
    endpoints.get(listener.as_str()).cloned()
}

/// Where a topic's partitions live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPlacement {
    /// Topic id (KIP-516), the same on every broker.
    pub id: Uuid,
    /// Leader broker id of each partition, by partition index.
    pub leaders: Vec<i32>,
    /// The topic's config overrides (Kafka name → value), kept with its placement so
    /// every broker applies them ([`topic_configs`]); absent when there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub configs: crate::broker::topic_config::Overrides,
}

/// What this broker knows of the cluster.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterView {
    /// Whether the ZooKeeper session is connected.
    pub connected: bool,
    /// Live brokers by id.
    pub brokers: BTreeMap<i32, BrokerAddr>,
    /// Topics and their placement.
    pub topics: BTreeMap<String, TopicPlacement>,
    /// Slot → owner broker id.
    pub slots: BTreeMap<u32, i32>,
}

/// Errors of cluster operations, as Kafka error codes are chosen from them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// ZooKeeper is not reachable now.
    #[error("ZooKeeper is not available: {0}")]
    Unavailable(String),
    /// The topic exists.
    #[error("topic `{0}` already exists")]
    TopicExists(String),
    /// The topic does not exist.
    #[error("topic `{0}` does not exist")]
    UnknownTopic(String),
    /// No live broker to place partitions on.
    #[error("no live broker to place partitions on")]
    NoBrokers,
    /// A ZooKeeper error.
    #[error("ZooKeeper: {0}")]
    Zk(String),
}

impl From<zk::Error> for ClusterError {
    fn from(e: zk::Error) -> Self {
        match e {
            zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::ClientClosed => {
                ClusterError::Unavailable(e.to_string())
            }
            other => ClusterError::Zk(other.to_string()),
        }
    }
}

/// This broker's membership in the cluster, shared by handlers and tasks.
pub struct Cluster {
    /// This broker's id.
    pub me: i32,
    /// This broker's advertised address.
    pub addr: BrokerAddr,
    /// The `[zookeeper]` settings.
    pub settings: ZookeeperSection,
    view: watch::Sender<ClusterView>,
    client: RwLock<Option<zk::Client>>,
    runtime: tokio::runtime::Handle,
    /// Slots this broker's coordinator was told it owns.
    pub(crate) owned: Mutex<BTreeSet<u32>>,
    /// Notified whenever `owned` changes, so the transaction coordinator takes gained
    /// slots over at once (`txn::slots`) rather than at its next tick.
    pub(crate) owned_changed: tokio::sync::Notify,
    /// When this broker last stopped coordinating each slot it gave up.
    pub(crate) stopped_at: Mutex<BTreeMap<u32, std::time::Instant>>,
    /// The cluster id stored in ZooKeeper ([`CLUSTER_ID`]), once a session read it.
    cluster_id: RwLock<Option<String>>,
}

/// Paths below the chroot.
pub(crate) const BROKERS: &str = "/brokers/ids";
pub(crate) const TOPICS: &str = "/brokers/topics";
pub(crate) const SLOTS: &str = "/coordinator/slots";
/// The cluster id node, `{"version":"1","id":"<id>"}` as Kafka's ZooKeeper mode keeps
/// it; created once, by the first broker to connect (a conditional create).
pub(crate) const CLUSTER_ID: &str = "/cluster/id";

impl Cluster {
    /// A cluster member; [`sync::run`] connects it. Call inside the tokio runtime.
    pub fn new(me: i32, addr: BrokerAddr, settings: ZookeeperSection) -> Arc<Cluster> {
        Arc::new(Cluster {
            me,
            addr,
            settings,
            view: watch::channel(ClusterView::default()).0,
            client: RwLock::new(None),
            runtime: tokio::runtime::Handle::current(),
            owned: Mutex::new(BTreeSet::new()),
            owned_changed: tokio::sync::Notify::new(),
            stopped_at: Mutex::new(BTreeMap::new()),
            cluster_id: RwLock::new(None),
        })
    }

    /// The cluster's id from ZooKeeper; `None` until a session has read it.
    pub fn cluster_id(&self) -> Option<String> {
        self.cluster_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_cluster_id(&self, id: String) {
        *self.cluster_id.write().unwrap_or_else(|e| e.into_inner()) = Some(id);
    }

    /// The broker every member reports as controller (Metadata, DescribeCluster): the
    /// lowest id among the live brokers (this one included). Drover has no controller
    /// role; one id all brokers agree on (once their views agree, within a refresh) is
    /// what clients expect, as a Kafka cluster has one controller.
    pub fn controller_id(&self) -> i32 {
        self.view
            .borrow()
            .brokers
            .keys()
            .next()
            .map_or(self.me, |lowest| (*lowest).min(self.me))
    }

    /// The current view.
    pub fn view(&self) -> ClusterView {
        self.view.borrow().clone()
    }

    /// Changes of the view.
    pub fn subscribe(&self) -> watch::Receiver<ClusterView> {
        self.view.subscribe()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut ClusterView)) {
        self.view.send_modify(f);
    }

    pub(crate) fn set_client(&self, client: Option<zk::Client>) {
        *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
    }

    /// The connected client, if any.
    pub(crate) fn client(&self) -> Result<zk::Client, ClusterError> {
        self.client
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| ClusterError::Unavailable("not connected".into()))
    }

    /// The connected client, waiting up to a session timeout for a reconnection.
    /// Blocking: call from a blocking thread.
    pub(crate) fn client_blocking(&self) -> Result<zk::Client, ClusterError> {
        let deadline =
            std::time::Instant::now() + Duration::from_millis(self.settings.session_timeout_ms);
        loop {
            match self.client() {
                Ok(c) => return Ok(c),
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The leader of `topic`-`partition`: `None` for an unknown partition, `Some(-1)`
    /// when its broker is down.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let view = self.view.borrow();
        let leader = *view
            .topics
            .get(topic)?
            .leaders
            .get(usize::try_from(partition).ok()?)?;
        Some(if view.brokers.contains_key(&leader) {
            leader
        } else {
            -1
        })
    }

    /// Whether this broker leads `topic`-`partition`.
    pub fn leads(&self, topic: &str, partition: i32) -> bool {
        let view = self.view.borrow();
        view.topics
            .get(topic)
            .and_then(|t| t.leaders.get(usize::try_from(partition).ok()?))
            .is_some_and(|l| *l == self.me)
    }

    /// The coordinator of `group`: the owner of its slot and its address (on every
    /// listener).
    pub fn coordinator_of(&self, group: &str) -> Option<(i32, BrokerAddr)> {
        let slot = drover_protocol::coordinator_slot(group, self.settings.slots);
        let view = self.view.borrow();
        let owner = *view.slots.get(&slot)?;
        Some((owner, view.brokers.get(&owner)?.clone()))
    }

    /// Runs `f` on the runtime from a blocking thread (the admin handlers run there).
    pub(crate) fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(f)
    }

    /// Places a new topic on the live brokers and records it in ZooKeeper. Blocking:
    /// call from a blocking thread.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        configs: &crate::broker::topic_config::Overrides,
    ) -> Result<TopicPlacement, ClusterError> {
        let client = self.client_blocking()?;
        let brokers: Vec<i32> = self.view.borrow().brokers.keys().copied().collect();
        if brokers.is_empty() {
            return Err(ClusterError::NoBrokers);
        }
        let start = drover_protocol::slot::fnv1a32(name.as_bytes()) as usize;
        let placement = TopicPlacement {
            id: Uuid::new_v4(),
            leaders: (0..partitions as usize)
                .map(|p| brokers[(start + p) % brokers.len()])
                .collect(),
            configs: configs.clone(),
        };
        let data = serde_json::to_vec(&placement).unwrap_or_default();
        let path = format!("{TOPICS}/{name}");
        self.block_on(async {
            client
                .create(
                    &path,
                    &data,
                    &zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes()),
                )
                .await
        })
        .map_err(|e| match e {
            zk::Error::NodeExists => ClusterError::TopicExists(name.to_owned()),
            other => other.into(),
        })?;
        self.update(|v| {
            v.topics.insert(name.to_owned(), placement.clone());
        });
        Ok(placement)
    }

    /// Deletes a topic from ZooKeeper. Blocking.
    pub fn delete_topic(&self, name: &str) -> Result<(), ClusterError> {
        let client = self.client_blocking()?;
        let path = format!("{TOPICS}/{name}");
        self.block_on(async { client.delete(&path, None).await })
            .map_err(|e| match e {
                zk::Error::NoNode => ClusterError::UnknownTopic(name.to_owned()),
                other => other.into(),
            })?;
        self.update(|v| {
            v.topics.remove(name);
        });
        Ok(())
    }

    /// Grows a topic to `count` partitions, placing the new ones. Blocking.
    pub fn add_partitions(&self, name: &str, count: u32) -> Result<TopicPlacement, ClusterError> {
        let client = self.client_blocking()?;
        let path = format!("{TOPICS}/{name}");
        let brokers: Vec<i32> = self.view.borrow().brokers.keys().copied().collect();
        if brokers.is_empty() {
            return Err(ClusterError::NoBrokers);
        }
        self.block_on(async {
            let (data, stat) = client.get_data(&path).await.map_err(|e| match e {
                zk::Error::NoNode => ClusterError::UnknownTopic(name.to_owned()),
                other => other.into(),
            })?;
            let mut placement: TopicPlacement = serde_json::from_slice(&data)
                .map_err(|e| ClusterError::Zk(format!("{path}: {e}")))?;
            let start = drover_protocol::slot::fnv1a32(name.as_bytes()) as usize;
            while placement.leaders.len() < count as usize {
                let p = placement.leaders.len();
                placement.leaders.push(brokers[(start + p) % brokers.len()]);
            }
            let data = serde_json::to_vec(&placement).unwrap_or_default();
            client
                .set_data(&path, &data, Some(stat.version))
                .await
                .map_err(ClusterError::from)?;
            self.update(|v| {
                v.topics.insert(name.to_owned(), placement.clone());
            });
            Ok(placement)
        })
    }
}

/// Waits up to `timeout` for the view to satisfy `ready`.
pub async fn wait_for(
    cluster: &Cluster,
    timeout: Duration,
    ready: impl Fn(&ClusterView) -> bool,
) -> bool {
    let mut rx = cluster.subscribe();
    tokio::time::timeout(timeout, rx.wait_for(|v| ready(v)))
        .await
        .is_ok_and(|r| r.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::listeners::ListenerName;

    fn name(n: &str) -> ListenerName {
        ListenerName::new(n).unwrap()
    }

    /// A registration from before named listeners (host and port only) is one
    /// PLAINTEXT listener; a new one names every listener, and an older broker reading
    /// it still finds the first listener's host and port.
    #[test]
    fn registrations_old_and_new_give_each_listener_its_address() {
        let old: BrokerAddr = serde_json::from_str(r#"{"host":"b1","port":9092}"#).unwrap();
        assert_eq!(
            old.endpoint(&name("PLAINTEXT")),
            Some(Endpoint {
                host: "b1".into(),
                port: 9092
            })
        );
        assert_eq!(old.endpoint(&name("SSL")), None);
        let new = BrokerAddr {
            host: "b2".into(),
            port: 9092,
            rack: None,
            endpoints: BTreeMap::from([
                (
                    "PLAINTEXT".to_owned(),
                    Endpoint {
                        host: "b2".into(),
                        port: 9092,
                    },
                ),
                (
                    "SSL".to_owned(),
                    Endpoint {
                        host: "b2.example.com".into(),
                        port: 9093,
                    },
                ),
            ]),
        };
        let json = serde_json::to_string(&new).unwrap();
        let back: BrokerAddr = serde_json::from_str(&json).unwrap();
        assert_eq!(back, new);
        assert_eq!(back.endpoint(&name("ssl")).unwrap().port, 9093);
        assert_eq!(back.endpoint(&name("INTERNAL")), None);
        #[derive(Deserialize)]
        struct OlderReader {
            host: String,
            port: i32,
        }
        let older: OlderReader = serde_json::from_str(&json).unwrap();
        assert_eq!((older.host.as_str(), older.port), ("b2", 9092));
        // Without endpoints the field is not written at all.
        let plain = BrokerAddr {
            endpoints: BTreeMap::new(),
            ..new
        };
        assert!(!serde_json::to_string(&plain).unwrap().contains("endpoints"));
    }
}
