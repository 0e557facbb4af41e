//! The credential document in ZooKeeper (cluster mode): one persistent node,
//! `<chroot>/config/scram_credentials`, holding the same JSON as the standalone file
//! ([`super::credentials`]); created by the first broker that needs it, with a new decoy
//! secret that every broker then shares.
//!
//! Kafka's ZooKeeper mode kept a node per user under `/config/users`; one node keeps an
//! alteration of several users atomic and lets every broker follow the credentials with
//! one data watch. Its size bounds the number of users: ZooKeeper refuses nodes over
//! `jute.maxbuffer` (1 MiB by default), which is about 1,500 users with both
//! mechanisms, above the default `sasl.max_scram_users` (1000).
//!
//! Whoever can write the chroot can add credentials: ZooKeeper is inside the trust
//! boundary (docs/security.md).

use std::{path::PathBuf, sync::Arc};

use tokio::sync::watch;
use zookeeper_client as zk;

use super::{credentials::CredentialTable, error::StoreError, kip554::Altered};
use crate::cluster::{Cluster, ClusterError};

/// The node's path below the chroot.
pub const NODE: &str = "/config/scram_credentials";
const PARENT: &str = "/config";
/// How many times an alteration reads and writes the node when other brokers keep
/// writing it in between.
pub const MAX_ATTEMPTS: usize = 32;

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes())
}

fn node_path() -> PathBuf {
    PathBuf::from(format!("zookeeper:{NODE}"))
}

fn zk_error(e: zk::Error) -> StoreError {
    match e {
        zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::ClientClosed => {
            StoreError::Unavailable(e.to_string())
        }
        other => StoreError::Zk(format!("{NODE}: {other}")),
    }
}

fn cluster_error(e: ClusterError) -> StoreError {
    match e {
        ClusterError::Unavailable(m) => StoreError::Unavailable(m),
        other => StoreError::Zk(other.to_string()),
    }
}

fn decode(data: &[u8]) -> Result<CredentialTable, StoreError> {
    CredentialTable::decode(data).map_err(|reason| StoreError::Damaged {
        path: node_path(),
        reason: reason.to_string(),
    })
}

/// Reads the node, creating it (empty, with a new decoy secret) if it does not exist.
/// Returns the table and the node's data version.
async fn read_or_create(client: &zk::Client) -> Result<(CredentialTable, i32), StoreError> {
    loop {
        match client.get_data(NODE).await {
            Ok((data, stat)) => return Ok((decode(&data)?, stat.version)),
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(zk_error(e)),
        }
        match client.mkdir(PARENT, &persistent()).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(zk_error(e)),
        }
        let table = CredentialTable::new().map_err(StoreError::Random)?;
        match client.create(NODE, &table.encode(), &persistent()).await {
            Ok((stat, _)) => return Ok((table, stat.version)),
            // Another broker created it first: read theirs.
            Err(zk::Error::NodeExists) => continue,
            Err(e) => return Err(zk_error(e)),
        }
    }
}

/// Reads the node (creating it if missing). Blocking: call from a blocking thread.
pub(crate) fn read(cluster: &Cluster) -> Result<(CredentialTable, i32), StoreError> {
    let client = cluster.client_blocking().map_err(cluster_error)?;
    cluster.block_on(read_or_create(&client))
}

/// Applies `change` to the node as a versioned read-modify-write, starting again from
/// the newer node when another broker wrote in between (up to [`MAX_ATTEMPTS`]
/// times). Returns what `change` decided on the node it was applied to, and the
/// version written (`None` when it changed nothing). Blocking.
pub(crate) fn alter(
    cluster: &Cluster,
    change: impl Fn(&CredentialTable) -> Altered,
) -> Result<(Altered, Option<i32>), StoreError> {
    let client = cluster.client_blocking().map_err(cluster_error)?;
    cluster.block_on(async {
        for _ in 0..MAX_ATTEMPTS {
            let (table, version) = read_or_create(&client).await?;
            let altered = change(&table);
            let Some(next) = &altered.table else {
                return Ok((altered, None));
            };
            match client.set_data(NODE, &next.encode(), Some(version)).await {
                Ok(stat) => return Ok((altered, Some(stat.version))),
                Err(zk::Error::BadVersion) | Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(zk_error(e)),
            }
        }
        Err(StoreError::Zk(format!(
            "{NODE}: changed by other brokers {MAX_ATTEMPTS} times while altering it"
        )))
    })
}

/// Follows the node until `stop` becomes true: reads it with a data watch, hands each
/// version to `install` (the credential store's
/// [`super::store::CredentialStore::install`], which keeps the newest and says whether
/// it changed anything), and reads again when the watch fires (or every 10 s, or after
/// a new session).
pub async fn follow(
    install: impl Fn(CredentialTable, i64) -> bool,
    cluster: Arc<Cluster>,
    stop: watch::Receiver<bool>,
) {
    let install = &install;
    crate::cluster::follow::follow_node(
        cluster,
        stop,
        "auth.scram_credentials_follow",
        |client| async move { watch_once(install, &client).await },
    )
    .await
}

/// One read of the node with a watch (creating the node if missing); installs it in
/// `install`.
async fn watch_once(
    install: &impl Fn(CredentialTable, i64) -> bool,
    client: &zk::Client,
) -> Result<zk::OneshotWatcher, StoreError> {
    for _ in 0..2 {
        match client.get_and_watch_data(NODE).await {
            Ok((data, stat, watcher)) => {
                let table = decode(&data)?;
                let users = table.user_count();
                if install(table, i64::from(stat.version)) {
                    tracing::info!(
                        users,
                        version = stat.version,
                        "SCRAM credentials loaded from ZooKeeper"
                    );
                }
                return Ok(watcher);
            }
            Err(zk::Error::NoNode) => {
                read_or_create(client).await?;
            }
            Err(e) => return Err(zk_error(e)),
        }
    }
    Err(StoreError::Zk(format!(
        "{NODE}: deleted as soon as created"
    )))
}
