//! `drover serve`: start the broker — plugins, topics and logs, the Kafka listeners, the
//! admin API, background log maintenance — and run until SIGTERM or Ctrl-C, then shut
//! down gracefully with a final flush. With TLS listeners, SIGHUP reloads their
//! certificate files (server/tls.rs).

use std::{sync::Arc, time::Duration};

use tokio::{net::TcpListener, sync::watch};

use crate::{
    admin,
    broker::{Broker, NodeInfo},
    config::listeners::ListenerName,
    config::Config,
    coordination, server,
    server::{context::ListenerHandle, listener::Bound, tls::TlsListeners},
    startup,
};

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A plugin the config requires failed to load or start.
    #[error(transparent)]
    Plugins(#[from] crate::plugins::LoadError),
    /// The data directory could not be opened.
    #[error(transparent)]
    Broker(#[from] crate::broker::BrokerError),
    /// The coordinator plugin could not start.
    #[error(transparent)]
    Coordinator(#[from] crate::coordination::start::StartError),
    /// The configuration cannot work (after command-line overrides).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// drover.toml names another offset store than the one a swap made active.
    #[error(transparent)]
    OffsetStore(#[from] Box<crate::offsets::active::ChoiceError>),
    /// The record of the active offset store could not be read or updated.
    #[error("the active offset store record: {0}")]
    OffsetStoreRecord(#[from] crate::offsets::active::RecordError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Which listener.
        what: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// A TLS listener's certificate, key or client CA could not be loaded.
    #[error(transparent)]
    Tls(#[from] crate::server::tls::TlsError),
}

/// How often the maintenance task runs (flush policy by time, retention), ms.
const MAINTENANCE_TICK_MS: u64 = 1_000;

/// A broker started by [`start`]: its addresses, its state, and what [`Running::stop`]
/// waits for.
pub struct Running {
    /// The shared broker state.
    pub broker: Arc<Broker>,
    /// The first Kafka listener's address.
    pub listen: std::net::SocketAddr,
    /// Every Kafka listener's name and bound address, in configuration order.
    pub listeners: Vec<(ListenerName, std::net::SocketAddr)>,
    /// The TLS listeners' material, for reloads.
    pub tls: TlsListeners,
    /// The admin listener's address.
    pub admin: std::net::SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Startup choices made on the command line rather than in drover.toml.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// `--use-configured-offset-store`: start on the offset store drover.toml names even
    /// when a swap made another one active (its record is removed; nothing is copied).
    pub use_configured_offset_store: bool,
}

/// Runs the broker until a shutdown signal.
pub async fn run(config: Config, options: StartOptions) -> Result<(), ServeError> {
    let running = start_with(config, options).await?;
    wait_for_signal().await;
    running.stop().await;
    Ok(())
}

/// Starts the broker with default [`StartOptions`]; see [`start_with`].
pub async fn start(config: Config) -> Result<Running, ServeError> {
    start_with(config, StartOptions::default()).await
}

/// Which offset store to start as the active one: the configured store, or the one a
/// swap made active before the restart ([`crate::offsets::active::choose`]). Removes a
/// record that is no longer needed.
fn choose_offset_store(
    config: &Config,
    options: StartOptions,
) -> Result<crate::offsets::active::Choice, ServeError> {
    use crate::offsets::active;
    let configured = active::StoreSpec::configured(config);
    let record = active::read(&config.data_dir)?;
    let path = active::path(&config.data_dir);
    let choice = active::choose(
        &configured,
        record.as_ref(),
        options.use_configured_offset_store,
        &path,
    )?;
    if choice.remove_record {
        if let Some(record) = &record {
            if !record.active.same_store(&configured) {
                tracing::warn!(
                    recorded = %record.active.plugin,
                    configured = %configured.plugin,
                    "--use-configured-offset-store: starting on the offset store drover.toml names; offsets committed to the recorded store since its swap are not copied"
                );
            }
        }
        active::remove(&config.data_dir)?;
    }
    Ok(choice)
}

/// Starts the broker — plugins, topics and logs, the coordinator, the Kafka listener,
/// the admin API and log maintenance — and logs the `drover ready` line.
pub async fn start_with(config: Config, options: StartOptions) -> Result<Running, ServeError> {
    // The listeners as configured (checked again: command-line flags may have changed
    // server.listen since the file was read), then their TLS material.
    let specs = crate::config::listeners::resolve(&config.server)
        .map_err(|e| ServeError::Config(e.to_string()))?;
    let tls = TlsListeners::load(&specs)?;
    // The admin listener's rules (checked again: --admin-listen may have moved it off
    // loopback) and its TLS, which reloads with the Kafka listeners'.
    config
        .admin
        .check(config.server.admin_listen)
        .map_err(ServeError::Config)?;
    let admin_tls = match config.admin.tls() {
        true => Some(Arc::new(crate::server::tls::TlsListener::load(
            ListenerName::admin_api(),
            config.admin.ssl.clone(),
        )?)),
        false => None,
    };
    let tls = match &admin_tls {
        Some(listener) => tls.with(Arc::clone(listener)),
        None => tls,
    };
    let active_store = choose_offset_store(&config, options)?;
    raise_open_file_limit(&config);
    let mut bound = Vec::with_capacity(specs.len());
    let mut endpoints = std::collections::BTreeMap::new();
    let mut listeners = Vec::with_capacity(specs.len());
    for spec in &specs {
        let what = format!("Kafka listener {} ({})", spec.name, spec.protocol);
        let socket = bind(spec.bind, &what).await?;
        let addr = addr_of(&socket, &what, spec.bind)?;
        endpoints.insert(
            spec.name.to_string(),
            crate::cluster::Endpoint {
                host: spec
                    .advertised_host
                    .clone()
                    .unwrap_or_else(|| addr.ip().to_string()),
                port: i32::from(spec.advertised_port.unwrap_or(addr.port())),
            },
        );
        listeners.push((spec.name.clone(), addr));
        bound.push(Bound {
            socket,
            handle: ListenerHandle {
                name: spec.name.clone(),
                tls: tls.get(&spec.name),
                sasl: spec.protocol.uses_sasl(),
            },
        });
    }
    let admin_listener = bind(config.server.admin_listen, "admin listener").await?;
    let listen = listeners[0].1;
    let admin = addr_of(
        &admin_listener,
        "admin listener",
        config.server.admin_listen,
    )?;
    let admin_guard =
        Arc::new(admin::guard::Guard::load(&config.admin, admin).map_err(ServeError::Config)?);
    let admin_access = admin::Access {
        guard: Arc::clone(&admin_guard),
        tls: admin_tls,
    };
    let admin_auth = match (
        config.admin.token_file.is_some(),
        config.admin.ssl.client_auth != crate::config::ClientAuth::None,
    ) {
        (false, false) => "none",
        (true, false) => "token",
        (false, true) => "client_certificate",
        (true, true) => "token_or_client_certificate",
    };
    let admin_tls_on = config.admin.tls();
    let first = &endpoints[specs[0].name.as_str()];
    let node = NodeInfo {
        id: config.server.broker_id,
        host: first.host.clone(),
        port: first.port,
        rack: config.server.rack.clone(),
        endpoints,
    };
    // In cluster mode the cluster (and the session it lends to plugins) exists before
    // the plugins start: offset stores get the broker's ZooKeeper session in their
    // HostServices. It connects once the cluster task runs (below); until then calls
    // on the lent session wait for it, within the session timeout.
    if let (true, Some(path)) = (config.zookeeper.enabled, &config.zookeeper.auth_digest_file) {
        crate::cluster::acl::read_digest_file(path)
            .and_then(crate::cluster::acl::authenticate_with)
            .map_err(ServeError::Config)?;
    }
    let cluster = config.zookeeper.enabled.then(|| {
        crate::cluster::Cluster::new(
            node.id,
            crate::cluster::BrokerAddr {
                host: node.host.clone(),
                port: node.port,
                rack: node.rack.clone(),
                endpoints: node.endpoints.clone(),
            },
            config.zookeeper.clone(),
        )
    });
    let plugins = startup::load_plugins_with_active(
        &config,
        startup::loader_options(&config),
        cluster.as_ref().map(crate::cluster::session::for_plugins),
        active_store,
    )?;
    let broker = Broker::open(config, node, plugins, cluster.clone())?;
    // The coordinator starts from the opened state; the broker is shared once it has
    // the coordinator's client, with the Kafka APIs it serves already probed.
    let coordinator = match coordination::start::start(&broker)? {
        Some(coordinator) => Some(coordinator.probe_kafka_apis().await),
        None => None,
    };
    let broker = Arc::new(broker.with_coordinator(coordinator));
    if let Some(coordinator) = broker.coordinator() {
        let txn = broker.transactions();
        // Offsets staged by transactions still open go back to the group coordinator
        // before any client request and before any transaction is completed.
        crate::txn::broker_ports::restore_offsets(txn, coordinator).await;
    }
    if let Some(coordinator) = broker.coordinator() {
        tokio::spawn(coordination::start::forward_topic_changes(
            Arc::clone(&broker),
            coordinator.clone(),
        ));
        tokio::spawn(coordination::partition_stats::forward_partition_stats(
            Arc::clone(&broker),
            coordinator.clone(),
        ));
    }
    let (stop, stopped) = watch::channel(false);
    for info in tls.infos() {
        broker
            .metrics
            .tls_certificate(&info.listener, info.not_after_unix_s);
    }
    let tasks = vec![
        tokio::spawn(server::serve(Arc::clone(&broker), bound, stopped.clone())),
        tokio::spawn(admin::serve(
            Arc::clone(&broker),
            admin_listener,
            tls.clone(),
            admin_access,
            stopped.clone(),
        )),
        tokio::spawn(maintain(Arc::clone(&broker), stopped.clone())),
        tokio::spawn(crate::offsets::retention::run(Arc::clone(&broker))),
        // Share groups' acquisition locks (KIP-932).
        tokio::spawn(crate::share::expiry::run(
            Arc::clone(&broker.share),
            broker.stopping(),
        )),
    ];
    let mut tasks = tasks;
    {
        let txn = broker.transactions();
        // Markers: in-process standalone; in cluster mode a remote leader's go through
        // its ZooKeeper queue (txn::marker_queue), which every broker follows.
        let local = crate::txn::broker_ports::LogMarkers {
            topics: Arc::clone(&broker.topics),
            cluster: cluster.clone(),
            transactions: Arc::clone(txn),
        };
        let markers: Arc<dyn crate::txn::ports::MarkerWriter> = match &cluster {
            None => Arc::new(local),
            Some(c) => {
                tasks.push(tokio::spawn(crate::txn::marker_queue::run(
                    local.clone(),
                    Arc::clone(c),
                    stopped.clone(),
                )));
                tasks.push(tokio::spawn(crate::txn::slots::run(
                    Arc::clone(txn),
                    Arc::clone(c),
                    stopped.clone(),
                )));
                Arc::new(crate::txn::marker_queue::ClusterMarkers {
                    local,
                    cluster: Arc::clone(c),
                })
            }
        };
        // Group offsets: completed in-process standalone; in cluster mode through an
        // outcome per group that the group slot's owner applies (txn::group_offsets).
        let offsets: Arc<dyn crate::txn::ports::GroupOffsetsCompleter> =
            match (&cluster, txn.zk_store()) {
                (Some(c), Some(zk)) => {
                    if let Some(coordinator) = broker.coordinator() {
                        let follower = crate::txn::group_offsets::outcome::Follower {
                            store: Arc::clone(zk),
                            coordinator: coordinator.clone(),
                        };
                        tasks.push(tokio::spawn(crate::txn::group_offsets::outcome::run(
                            follower,
                            stopped.clone(),
                        )));
                    }
                    Arc::new(crate::txn::group_offsets::outcome::ClusterGroupOffsets(
                        Arc::clone(c),
                    ))
                }
                _ => Arc::new(crate::txn::broker_ports::CoordinatorOffsets(
                    broker.coordinator().cloned(),
                )),
            };
        // Transactions found decided at startup are completed first thing.
        tokio::spawn(crate::txn::completion::run(
            Arc::clone(txn),
            crate::txn::ports::Ports { markers, offsets },
        ));
        tasks.push(tokio::spawn(crate::txn::timeouts::run(
            Arc::clone(txn),
            broker
                .config
                .transactions
                .transaction_abort_timed_out_transaction_cleanup_interval_ms,
            stopped.clone(),
        )));
    }
    if let Some(cluster) = cluster {
        // Every broker follows the SCRAM credentials' node (auth::zk_store).
        let credentials = Arc::clone(broker.identity.sasl.credentials());
        tasks.push(tokio::spawn(crate::auth::zk_store::follow(
            move |table, version| credentials.install(table, version),
            Arc::clone(&cluster),
            stopped.clone(),
        )));
        // ... and the group configs' node (cluster::group_configs).
        tasks.push(tokio::spawn(crate::cluster::group_configs::follow(
            Arc::clone(&broker.groups.configs),
            Arc::clone(&cluster),
            stopped.clone(),
        )));
        tasks.push(tokio::spawn(crate::cluster::sync::run(
            Arc::clone(&broker),
            cluster,
        )));
        // The authorizer starts once the session it reads its ACLs through is up.
        tasks.push(tokio::spawn(crate::rescan::start_authorizer(Arc::clone(
            &broker,
        ))));
    }
    if !tls.is_empty() || broker.config.admin.token_file.is_some() {
        // Only with TLS listeners or an admin token file: otherwise SIGHUP keeps its
        // default (the broker stops), as before listeners had TLS.
        tasks.push(tokio::spawn(reload_on_sighup(
            Arc::clone(&broker),
            tls.clone(),
            admin_guard,
            stopped.clone(),
        )));
    }
    for (spec, (_, addr)) in specs.iter().zip(&listeners) {
        let at = broker.identity.node.endpoint(&spec.name);
        tracing::info!(
            listener = %spec.name,
            protocol = %spec.protocol,
            bound = %addr,
            advertised = %at.map(|e| format!("{}:{}", e.host, e.port)).unwrap_or_default(),
            "Kafka listener"
        );
    }
    tracing::info!(
        listen = %listen,
        admin = %admin,
        admin_tls = admin_tls_on,
        admin_auth,
        data_dir = %broker.config.data_dir.display(),
        topics = broker.topics.list().len(),
        "drover ready"
    );
    Ok(Running {
        broker,
        listen,
        listeners,
        tls,
        admin,
        stop,
        tasks,
    })
}

impl Running {
    /// Graceful shutdown: listeners stop, the coordinator writes its last commits,
    /// every partition is flushed, the active offset store is flushed and closed, then
    /// any other store opened at startup and not closed yet (each exactly once).
    pub async fn stop(self) {
        let broker = self.broker;
        tracing::info!("shutting down");
        broker.begin_shutdown();
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
        if let Some(coordinator) = broker.coordinator() {
            // Final commits reach the offset store before it is closed below.
            coordinator.shutdown().await;
        }
        let broker_ref = Arc::clone(&broker);
        let _ = tokio::task::spawn_blocking(move || flush_all(&broker_ref)).await;
        if let Some(stores) = broker.offsets() {
            // Waits for a running swap to roll back first.
            match tokio::task::spawn_blocking(move || stores.close()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("closing the active offset store: {e}"),
                Err(e) => tracing::warn!("closing the active offset store: {e}"),
            }
        }
        if let Err(e) = broker.plugins.started.close() {
            tracing::warn!("closing offset stores: {e}");
        }
        tracing::info!("stopped");
    }
}

/// Raises the soft open-file limit to the hard limit, as Kafka's packaging does, and
/// logs what the limit leaves room for ([`crate::broker::descriptors`]): each partition
/// keeps one file open (its active segment's `.log`), plus the segment file cache
/// (`log.open_files_cache`), two per connection and a reserve; partitions beyond that
/// are refused at creation, and a warning says what to raise or lower when a topic of
/// `topics.max_partitions` partitions would not fit.
fn raise_open_file_limit(config: &Config) {
    crate::broker::descriptors::raise_soft_limit();
    crate::broker::descriptors::DescriptorBudget::current(config).log(config.topics.max_partitions);
}

async fn bind(addr: std::net::SocketAddr, what: &str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr,
            what: what.to_owned(),
            source,
        })
}

fn addr_of(
    listener: &TcpListener,
    what: &str,
    addr: std::net::SocketAddr,
) -> Result<std::net::SocketAddr, ServeError> {
    listener.local_addr().map_err(|source| ServeError::Bind {
        addr,
        what: what.to_owned(),
        source,
    })
}

/// Reloads the TLS listeners' certificate files and the admin token file at every
/// SIGHUP until `stopped`.
async fn reload_on_sighup(
    broker: Arc<Broker>,
    tls: TlsListeners,
    admin_guard: Arc<admin::guard::Guard>,
    mut stopped: watch::Receiver<bool>,
) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(
                    "cannot watch SIGHUP (TLS certificates reload only through the admin API): {e}"
                );
                return;
            }
        };
        loop {
            tokio::select! {
                got = hangup.recv() => if got.is_none() { return },
                _ = stopped.changed() => return,
            }
            tracing::info!("SIGHUP: reloading TLS certificates and the admin token");
            let (broker, tls, guard) = (Arc::clone(&broker), tls.clone(), Arc::clone(&admin_guard));
            let _ = tokio::task::spawn_blocking(move || {
                tls.reload(&broker.metrics);
                admin::reload_admin_token(&guard);
            })
            .await;
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (broker, tls, admin_guard, stopped.changed().await);
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("cannot watch SIGTERM: {e}");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Periodic log work: bringing partitions that a storage error took offline back
/// (with backoff, see `PartitionLog::try_recover`), time-based flushes and retention.
/// Failures are logged at most once per second per kind, as they repeat every tick for
/// as long as the disk is full.
async fn maintain(broker: Arc<Broker>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(MAINTENANCE_TICK_MS));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let broker = Arc::clone(&broker);
        let _ = tokio::task::spawn_blocking(move || {
            let now = crate::clock::now_ms();
            let instant = std::time::Instant::now();
            for topic in broker.topics.list() {
                for partition in &topic.partitions {
                    let mut log = partition.lock_log();
                    if log.is_offline() {
                        match log.try_recover(instant) {
                            Ok(true) => partition.notify_appended(),
                            Ok(false) => {}
                            Err(e) => crate::warn_limited!(
                                "log.recovery_failed",
                                topic = %topic.name,
                                partition = partition.index,
                                "partition still offline, recovery failed: {e}"
                            ),
                        }
                    }
                    if log.needs_flush(now) && !log.is_offline() {
                        if let Err(e) = log.flush() {
                            crate::warn_limited!(
                                "log.flush_failed",
                                topic = %topic.name,
                                partition = partition.index,
                                "flush failed, partition offline: {e}"
                            );
                        }
                    }
                    if let Err(e) = log.apply_retention(now) {
                        crate::warn_limited!(
                            "log.retention_failed",
                            topic = %topic.name,
                            partition = partition.index,
                            "retention failed: {e}"
                        );
                    }
                }
            }
        })
        .await;
    }
}

/// Flushes and closes every partition (shutdown), so the next start skips recovery scans.
fn flush_all(broker: &Broker) {
    for topic in broker.topics.list() {
        for partition in &topic.partitions {
            let mut log = partition.lock_log();
            if let Err(e) = log.close() {
                tracing::error!(topic = %topic.name, partition = partition.index, "final flush failed: {e}");
            }
        }
    }
}
