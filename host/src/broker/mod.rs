//! The broker's shared state: configuration, topics and their partition logs, metrics,
//! loaded plugins, this node's identity, cluster membership and the coordinator's
//! client. Built in order at startup (data directory, then the coordinator from it,
//! [`Broker::open`], [`Broker::with_coordinator`]) and only then shared: one
//! `Arc<Broker>` for every connection task and the admin API, with nothing set late.

pub mod auto_create;
pub mod descriptors;
pub mod group_configs;
pub mod new_txn_ids;
pub mod produce_rate;
pub mod producer_ids;
pub mod topic_config;
pub mod topic_config_store;
pub mod topics;

use crate::metrics::Metrics;
use std::{path::Path, sync::Arc};

use tokio::sync::watch;

use crate::{
    config::Config,
    coordination::CoordinatorClient,
    offsets::OffsetStores,
    plugins::{LivePlugins, Loader},
    startup::StartedPlugins,
};

pub use topics::{Partition, Topic, TopicError, TopicLimits, TopicRegistry};

/// How clients reach this broker (Metadata, FindCoordinator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Broker id.
    pub id: i32,
    /// Advertised host of the first listener.
    pub host: String,
    /// Advertised port of the first listener.
    pub port: i32,
    /// Rack (`server.rack`, Kafka's `broker.rack`), if configured.
    pub rack: Option<String>,
    /// The advertised address of every listener, by name (config/listeners.rs); empty:
    /// one PLAINTEXT listener at `host`:`port`.
    pub endpoints: std::collections::BTreeMap<String, crate::cluster::Endpoint>,
}

impl NodeInfo {
    /// This broker's address on `listener` (the listener a request came in on).
    pub fn endpoint(
        &self,
        listener: &crate::config::listeners::ListenerName,
    ) -> Option<crate::cluster::Endpoint> {
        crate::cluster::endpoint_on(&self.host, self.port, &self.endpoints, listener)
    }
}

/// Errors starting the broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The data directory or a topic could not be opened.
    #[error(transparent)]
    Topics(#[from] TopicError),
    /// The cluster id file could not be read or written.
    #[error("cluster id file {path}: {source}")]
    ClusterId {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The transaction coordinator's store could not be opened or read.
    #[error(transparent)]
    Transactions(#[from] crate::txn::store::StoreError),
    /// The producer id block file is unreadable or damaged (standalone).
    #[error(transparent)]
    ProducerIds(#[from] producer_ids::ProducerIdError),
    /// The SCRAM credential file is unreadable, damaged or locked (standalone).
    #[error(transparent)]
    Credentials(#[from] crate::auth::store::StoreError),
    /// The group configs file is unreadable or damaged (standalone).
    #[error("group configs file {path}: {source}")]
    GroupConfigs {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Everything the request handlers share, grouped by concern so that a handler or a
/// task can be handed just the part it uses (`&TopicRegistry`, `&Producers`,
/// `&Groups`) the way mini-redis hands a command `&Db`.
pub struct Broker {
    /// The configuration the broker started with.
    pub config: Config,
    /// This node, the cluster id and, in cluster mode, the membership.
    pub identity: Identity,
    /// Topics and partition logs (shared with the transaction markers' writer).
    pub topics: Arc<TopicRegistry>,
    /// Prometheus metrics (shared with the coordinator driver).
    pub metrics: Arc<Metrics>,
    /// Producer ids, the new-transactional-id bound and the transaction coordinator.
    pub producers: Producers,
    /// The plugins: started at startup, the directory as rescans leave it, and the
    /// assignors' budgets.
    pub plugins: Plugins,
    /// The group coordinator's client, the active offset store and the group configs.
    pub groups: Groups,
    /// Share-group delivery: share-partitions and share sessions (KIP-932; the
    /// membership half is the coordinator's).
    pub share: Arc<crate::share::ShareDelivery>,
    /// Becomes true when shutdown starts; long polls answer early.
    stopping: watch::Sender<bool>,
}

/// Who this broker is, which cluster it belongs to, and who its clients may be.
pub struct Identity {
    /// This node: how clients reach it (Metadata, FindCoordinator).
    pub node: NodeInfo,
    /// The cluster id (generated on first start, kept in `<data_dir>/cluster_id`).
    pub cluster_id: String,
    /// Cluster membership, in cluster mode.
    cluster: Option<Arc<crate::cluster::Cluster>>,
    /// SASL: the SCRAM credential store and the authentication state machine's shared
    /// part (settings, failure limiter), [`crate::auth`].
    pub sasl: Arc<crate::auth::session::SaslServer>,
    /// What clients may do: the configured authorizer, or none ([`crate::authz`]).
    pub authz: Arc<crate::authz::Authz>,
}

impl Identity {
    /// Cluster membership, in cluster mode.
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.cluster.as_ref()
    }

    /// The cluster id clients see: ZooKeeper's `/cluster/id` in cluster mode (this
    /// broker's own until its first session read it), else `<data_dir>/cluster_id`.
    pub fn reported_cluster_id(&self) -> String {
        self.cluster()
            .and_then(|c| c.cluster_id())
            .unwrap_or_else(|| self.cluster_id.clone())
    }

    /// The controller id clients see: this broker standalone, in cluster mode the
    /// lowest live broker id ([`crate::cluster::Cluster::controller_id`]).
    pub fn controller_id(&self) -> i32 {
        self.cluster().map_or(self.node.id, |c| c.controller_id())
    }

    /// Whether this broker serves `topic`-`partition`: always standalone; in cluster
    /// mode only the partitions it leads.
    pub fn serves(&self, topic: &str, partition: i32) -> bool {
        self.cluster().is_none_or(|c| c.leads(topic, partition))
    }
}

/// The partitions a request may name, and whether this broker leads each: what the
/// handlers that read or delete by partition use (ListOffsets, DeleteRecords,
/// DeleteTopics, DescribeLogDirs, DescribeProducers, DescribeTopicPartitions).
#[derive(Clone, Copy)]
pub struct Partitions<'a> {
    /// The topics and their partition logs.
    pub topics: &'a TopicRegistry,
    /// Who this broker is, and in cluster mode the membership that says who leads.
    pub identity: &'a Identity,
}

impl Partitions<'_> {
    /// Whether this broker serves `topic`-`partition` ([`Identity::serves`]).
    pub fn serves(&self, topic: &str, partition: i32) -> bool {
        self.identity.serves(topic, partition)
    }
}

/// The producer side: ids for InitProducerId, the bound on new transactional ids, and
/// the transaction coordinator.
pub struct Producers {
    /// Producer ids for InitProducerId (a block file in the data directory, or blocks
    /// from ZooKeeper in cluster mode).
    pub ids: producer_ids::ProducerIds,
    /// The bound on new transactional ids per client address and second
    /// (`transactions.new_ids_per_sec_per_client`), checked by InitProducerId.
    pub new_txn_ids: new_txn_ids::NewTxnIdLimiter,
    /// The transaction coordinator: standalone over the data directory, in cluster
    /// mode over ZooKeeper for the slots this broker owns.
    pub transactions: Arc<crate::txn::TxnCoordinator>,
}

/// The plugins as the broker holds them.
pub struct Plugins {
    /// The plugins loaded and started at startup.
    pub started: StartedPlugins,
    /// The plugin directory as it is now: startup's, changed by every rescan
    /// (`POST /v1/plugins/rescan`). Assignors and swap targets are looked up here.
    pub live: LivePlugins,
    /// The assignors' time budgets and slow state (`coordinator.assignor_timeout_ms`):
    /// the coordinator is handed the assignors through it.
    pub budgets: crate::coordination::assignor_budget::AssignorBudgets,
}

/// Group coordination: the running coordinator, the active offset store and the group
/// configs.
pub struct Groups {
    /// The running coordinator (see [`crate::coordination`]); set by
    /// [`Broker::with_coordinator`] before the broker is shared.
    coordinator: Option<CoordinatorClient>,
    /// The active offset store (`coordinator.offset_store`, or the one a swap made
    /// active before a restart), swappable.
    offsets: Option<Arc<OffsetStores>>,
    /// Per-group config overrides (IncrementalAlterConfigs on GROUP resources).
    pub configs: Arc<group_configs::GroupConfigs>,
}

impl Groups {
    /// The running coordinator, if one started.
    pub fn coordinator(&self) -> Option<&CoordinatorClient> {
        self.coordinator.as_ref()
    }

    /// The active offset store, if one is open.
    pub fn offsets(&self) -> Option<Arc<OffsetStores>> {
        self.offsets.clone()
    }
}

impl Broker {
    /// Opens the data directory (topics, partition logs with crash recovery) and builds
    /// the shared state, without a coordinator. `node` is what clients are told to
    /// connect to; `cluster` is the membership in cluster mode (made before the plugins
    /// start, which get its ZooKeeper session). Startup then starts the coordinator
    /// from this state (`coordination::start::start`), adds it with
    /// [`Broker::with_coordinator`], and only then shares the broker.
    pub fn open(
        config: Config,
        node: NodeInfo,
        plugins: StartedPlugins,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Result<Broker, BrokerError> {
        let topics = Arc::new(TopicRegistry::open_with(
            &config.data_dir,
            config.log.clone(),
            TopicLimits::from_config(&config),
        )?);
        let cluster_id = cluster_id(&config.data_dir)?;
        let offsets = plugins.active_store.clone().map(OffsetStores::new);
        let group_configs = Arc::new(match &cluster {
            None => group_configs::GroupConfigs::open(&config.data_dir).map_err(|source| {
                BrokerError::GroupConfigs {
                    path: config.data_dir.join("group-configs.json"),
                    source,
                }
            })?,
            Some(_) => group_configs::GroupConfigs::clustered(),
        });
        let share = Arc::new(crate::share::ShareDelivery::new(
            &config.share,
            Arc::clone(&group_configs),
            offsets
                .clone()
                .map(|o| o as Arc<dyn crate::share::store::ShareStateStore>),
        ));
        let live = LivePlugins::new(
            &plugins.registry,
            &plugins.assignors,
            Loader::new(crate::startup::loader_options(&config)),
            config.plugins.max_loaded_libraries,
        );
        let metrics = Arc::new(Metrics::new());
        metrics.plugin_libraries(live.libraries_loaded());
        let ids = producer_ids::ProducerIds::open(&config.data_dir, cluster.clone())?;
        let transactions = Arc::new(match &cluster {
            None => {
                crate::txn::TxnCoordinator::open(&config.data_dir, config.transactions.limits())?
            }
            Some(c) => crate::txn::TxnCoordinator::open_cluster(
                Arc::new(crate::txn::zk_store::ZkTxnStore::new(Arc::clone(c))),
                config.transactions.limits(),
            ),
        });
        let credentials = Arc::new(match &cluster {
            None => crate::auth::store::CredentialStore::open_file(
                &config.data_dir,
                config.sasl.max_scram_users,
            )?,
            Some(c) => crate::auth::store::CredentialStore::open_cluster(
                Arc::clone(c),
                config.sasl.max_scram_users,
            )?,
        });
        let auth = Arc::new(crate::auth::session::SaslServer::new(
            crate::auth::session::SaslSettings::from_config(&config.sasl),
            credentials,
            Arc::clone(&metrics),
        ));
        let authz = Arc::new(crate::authz::Authz::configured(
            config.authorizer.plugin.as_deref(),
            plugins.authorizer.clone(),
            Arc::clone(&metrics),
            config.authorizer.acl_call_timeout_ms,
        ));
        let budgets = crate::coordination::assignor_budget::AssignorBudgets::new(
            config.coordinator.assignor_timeout_ms,
            Arc::clone(&metrics),
        );
        Ok(Broker {
            producers: Producers {
                ids,
                new_txn_ids: new_txn_ids::NewTxnIdLimiter::new(
                    config.transactions.new_ids_per_sec_per_client,
                ),
                transactions,
            },
            plugins: Plugins {
                started: plugins,
                live,
                budgets,
            },
            groups: Groups {
                coordinator: None,
                offsets,
                configs: group_configs,
            },
            share,
            identity: Identity {
                node,
                cluster_id,
                cluster,
                sasl: auth,
                authz,
            },
            config,
            topics,
            metrics,
            stopping: watch::channel(false).0,
        })
    }

    /// The broker with its coordinator (`None`: no coordinator runs).
    pub fn with_coordinator(self, coordinator: Option<CoordinatorClient>) -> Broker {
        Broker {
            groups: Groups {
                coordinator,
                ..self.groups
            },
            ..self
        }
    }

    /// The active offset store, if one is open.
    pub fn offsets(&self) -> Option<Arc<OffsetStores>> {
        self.groups.offsets()
    }

    /// Cluster membership, in cluster mode.
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.identity.cluster()
    }

    /// Whether this broker serves `topic`-`partition` ([`Identity::serves`]).
    pub fn serves(&self, topic: &str, partition: i32) -> bool {
        self.identity.serves(topic, partition)
    }

    /// The topics with who leads them ([`Partitions`]).
    pub fn partitions(&self) -> Partitions<'_> {
        Partitions {
            topics: &self.topics,
            identity: &self.identity,
        }
    }

    /// Whether topics may be created implicitly (Metadata, Produce): configured, and
    /// standalone only (in cluster mode topics are created with CreateTopics).
    pub fn auto_create(&self) -> bool {
        self.config.topics.auto_create && self.cluster().is_none()
    }

    /// The running coordinator, if one started.
    pub fn coordinator(&self) -> Option<&CoordinatorClient> {
        self.groups.coordinator()
    }

    /// The transaction coordinator (always runs; in cluster mode it serves the
    /// transactional ids of the slots this broker owns).
    pub fn transactions(&self) -> &Arc<crate::txn::TxnCoordinator> {
        &self.producers.transactions
    }

    /// Starts shutdown: waiting fetches answer with what they have.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
    }

    /// A receiver that becomes true when shutdown starts.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }
}

/// Reads `<data_dir>/cluster_id`, creating it with a random id on first start.
fn cluster_id(data_dir: &Path) -> Result<String, BrokerError> {
    let path = data_dir.join("cluster_id");
    let err = |source| BrokerError::ClusterId {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        Ok(_) | Err(_) => {
            std::fs::create_dir_all(data_dir).map_err(err)?;
            let id = uuid::Uuid::new_v4().simple().to_string();
            std::fs::write(&path, &id).map_err(err)?;
            Ok(id)
        }
    }
}
