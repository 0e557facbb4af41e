//! Following one ZooKeeper node for as long as the broker runs: read it with a watch,
//! install what was read, and read again when the watch fires, every 10 s anyway, or
//! after a new session. The SCRAM credentials (`crate::auth::zk_store`) and the group
//! configs ([`super::group_configs`]) are followed this way.

use std::{fmt::Display, future::Future, sync::Arc, time::Duration};

use tokio::sync::watch;
use zookeeper_client as zk;

use super::Cluster;

/// How long a follower waits for its watch before reading the node anyway.
const POLL: Duration = Duration::from_secs(10);
/// Pause after a failed read, or while there is no session.
const RETRY: Duration = Duration::from_millis(500);

/// Calls `read_and_watch` with the current session's client until `stop` becomes true;
/// after each successful read waits for the watcher it returned (at most 10 s), after a
/// failure logs it (rate-limited under `log_key`) and retries after 500 ms.
pub async fn follow_node<F, Fut, E>(
    cluster: Arc<Cluster>,
    mut stop: watch::Receiver<bool>,
    log_key: &'static str,
    mut read_and_watch: F,
) where
    F: FnMut(zk::Client) -> Fut,
    Fut: Future<Output = Result<zk::OneshotWatcher, E>>,
    E: Display,
{
    loop {
        let wait: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = match cluster.client() {
            Err(_) => Box::pin(tokio::time::sleep(RETRY)),
            Ok(client) => match read_and_watch(client).await {
                Ok(watcher) => Box::pin(async move {
                    let _ = tokio::time::timeout(POLL, watcher.changed()).await;
                }),
                Err(e) => {
                    crate::warn_limited!(log_key, "{e}");
                    Box::pin(tokio::time::sleep(RETRY))
                }
            },
        };
        tokio::select! {
            _ = wait => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
