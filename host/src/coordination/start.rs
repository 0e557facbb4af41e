//! Starting the coordinator: the plugin named in `coordinator.plugin`, the offset-store
//! worker, the coordinator thread, and the task that forwards topic changes.

use std::{collections::BTreeSet, sync::Arc};

use abi_stable::std_types::{RString, RVec};
use drover_abi::{
    coordinator::{CoordinatorStartup, TopicId, ZkCoordinatorStartup},
    PluginKind, TopicInfo,
};

use super::{
    driver::{self, CoordinatorClient, Msg},
    store_worker,
    topic_deletion::GroupOwner,
};
use crate::{broker::Broker, plugins::LoadError};

/// Why the coordinator could not start. Each names the config key to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// `coordinator.offset_store` names a store that is not loaded or did not open.
    #[error(
        "coordinator.offset_store: offset store `{store}` is not available ({why}); \
         put its plugin in the plugin directory or name another store"
    )]
    NoOffsetStore {
        /// The configured store.
        store: String,
        /// Not loaded, or its open error.
        why: String,
    },
    /// `coordinator.default_assignor` names an assignor that did not start.
    #[error("coordinator.default_assignor: assignor `{name}` is not loaded (loaded: {loaded})")]
    NoDefaultAssignor {
        /// The configured assignor.
        name: String,
        /// The assignors that started.
        loaded: String,
    },
    /// The plugin's startup failed.
    #[error(transparent)]
    Plugin(#[from] LoadError),
    /// A thread could not be spawned.
    #[error("cannot start the coordinator thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// Every topic with its partition count, as the coordinator sees topic metadata.
pub fn topic_infos(broker: &Broker) -> RVec<TopicInfo> {
    broker
        .topics
        .list()
        .iter()
        .map(|t| TopicInfo {
            name: RString::from(t.name.as_str()),
            partitions: t.partitions.len() as u32,
        })
        .collect()
}

/// Every topic's id, for the coordinator's Kafka APIs that name topics by id.
pub fn topic_ids(broker: &Broker) -> RVec<TopicId> {
    broker
        .topics
        .list()
        .iter()
        .map(|t| TopicId {
            name: RString::from(t.name.as_str()),
            id: *t.id.as_bytes(),
        })
        .collect()
}

/// Starts the configured coordinator plugin and its threads from the opened broker
/// state, and returns its client; the caller adds it to the broker
/// ([`Broker::with_coordinator`]) and then starts [`forward_topic_changes`]. Returns
/// `Ok(None)` when there is nothing to start: `coordinator.plugin` is empty, or names
/// no plugin in the plugin directory (native group requests are then refused).
pub fn start(broker: &Broker) -> Result<Option<CoordinatorClient>, StartError> {
    let section = &broker.config.coordinator;
    if section.plugin.is_empty() {
        tracing::info!("coordinator.plugin is empty: running without a group coordinator");
        return Ok(None);
    }
    let plugins = &broker.plugins.started;
    let Some(plugin) = plugins
        .registry
        .of_kind(PluginKind::Coordinator)
        .find(|p| p.summary.name == section.plugin)
    else {
        tracing::warn!(
            "no coordinator plugin `{}` in {}: running without a group coordinator",
            section.plugin,
            broker.config.plugins.dir.display()
        );
        return Ok(None);
    };
    let Some(store) = broker.offsets() else {
        return Err(StartError::NoOffsetStore {
            store: plugins.active.active.plugin.clone(),
            why: plugins
                .failed
                .get(&plugins.active.active.plugin)
                .cloned()
                .unwrap_or_else(|| "not loaded".into()),
        });
    };
    if !plugins.assignors.contains_key(&section.default_assignor) {
        return Err(StartError::NoDefaultAssignor {
            name: section.default_assignor.clone(),
            loaded: plugins
                .assignors
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let startup = CoordinatorStartup {
        broker_id: broker.config.server.broker_id,
        assignors: broker
            .plugins
            .budgets
            .named(&broker.plugins.live.assignors()),
        default_assignor: RString::from(section.default_assignor.as_str()),
        topics: topic_infos(broker),
    };
    let config = broker.config.plugin_config(&section.plugin);
    let coordinator = match broker.cluster() {
        None => plugin.start_coordinator(&config, startup)?,
        Some(cluster) => plugin.start_coordinator_zookeeper(
            &config,
            ZkCoordinatorStartup {
                base: startup,
                slot_count: cluster.settings.slots,
                session: crate::cluster::session::for_plugins(cluster),
            },
        )?,
    };

    let store_name = store.active_name();
    let channel = flume::bounded::<Msg>(section.queue_capacity);
    let (store_tx, store_rx) = flume::unbounded();
    let results = channel.0.clone();
    let max_batch = section.max_store_batch;
    let store_thread = std::thread::Builder::new()
        .name("drover-offsets".into())
        .spawn(move || {
            store_worker::run(store, store_rx, max_batch, |inputs| {
                results.send(Msg::Store(inputs)).is_ok()
            })
        })?;
    let deps = driver::DriverDeps {
        metrics: Arc::clone(&broker.metrics),
        owner: match broker.cluster() {
            None => GroupOwner::All,
            Some(cluster) => GroupOwner::Slots(Arc::clone(cluster)),
        },
        topic_ids: topic_ids(broker),
        // The transaction coordinator records staged offsets standalone; in cluster
        // mode (the group's and the transaction's coordinators may be two brokers)
        // they go to ZooKeeper beside the transaction's record (txn::group_offsets).
        txn_ledger: Some(match broker.transactions().zk_store() {
            None => Arc::new(crate::txn::broker_ports::TxnLedger(Arc::clone(
                broker.transactions(),
            ))) as Arc<dyn super::TxnOffsetLedger>,
            Some(zk) => Arc::new(crate::txn::group_offsets::stage::ZkTxnLedger {
                store: Arc::clone(zk),
                max_offsets: broker.transactions().limits().max_offsets_per_transaction,
            }),
        }),
        assignor_timeout_ms: broker.config.coordinator.assignor_timeout_ms,
    };
    let store = driver::StoreQueue {
        ops: store_tx,
        worker: Some(store_thread),
    };
    let (client, _thread) = driver::spawn(coordinator, deps, store, channel)?;
    tracing::info!(
        plugin = %section.plugin,
        offset_store = %store_name,
        default_assignor = %section.default_assignor,
        assignors = %plugins.assignors.keys().cloned().collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(","),
        "coordinator started"
    );
    Ok(Some(client))
}

/// Sends the topic list to the coordinator now (the startup input carried partition
/// counts only) and after every topic creation and deletion, until the coordinator or
/// the broker stops. Spawned by `drover serve` once the broker is shared.
pub async fn forward_topic_changes(broker: Arc<Broker>, client: CoordinatorClient) {
    let mut changes = broker.topics.subscribe_changes();
    let mut stopping = broker.stopping();
    // The startup input carried partition counts only: the ids follow at once.
    if client
        .topics_changed(topic_infos(&broker), topic_ids(&broker))
        .await
        .is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        if client
            .topics_changed(topic_infos(&broker), topic_ids(&broker))
            .await
            .is_err()
        {
            return;
        }
    }
}
