//! Accepting connections: at most `server.max_connections` are served at once (the
//! rest wait in the kernel's accept queue), and shutdown stops accepting, tells every
//! connection to finish, and waits for them (bounded).

use std::{sync::Arc, time::Duration};

use tokio::{
    net::TcpListener,
    sync::{watch, Semaphore},
    task::JoinSet,
};

use super::connection;
use crate::broker::Broker;

/// How long shutdown waits for connections to finish their current request.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves Kafka clients on `listener` until `shutdown` becomes true.
pub async fn serve(
    broker: Arc<Broker>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(broker.config.server.max_connections));
    let mut connections = JoinSet::new();
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        // Reap finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((socket, peer)) => {
                let broker = Arc::clone(&broker);
                let shutdown = shutdown.clone();
                connections.spawn(async move {
                    connection::run(broker, socket, peer, shutdown).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    let open = connections.len();
    if open > 0 {
        tracing::info!(connections = open, "waiting for connections to finish");
    }
    let drained = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
        connections.shutdown().await;
    }
}
