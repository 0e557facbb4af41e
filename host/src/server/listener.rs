//! Accepting connections: at most `server.max_connections` are served at once, and
//! shutdown stops accepting, tells every connection to finish, and waits for them
//! (bounded).
//!
//! Admission (server/admission.rs): a connection over its address's limit is closed at
//! once; at the cap, the connection idle longest is evicted to make room for the new
//! one, and only when every connection is busy does the new one wait (and the ones
//! behind it in the kernel's accept queue).

use std::{sync::Arc, time::Duration};

use tokio::{
    net::TcpListener,
    sync::{watch, OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
};

use super::{admission::Admission, budget::ResponseBudget, connection};
use crate::broker::Broker;

/// How long shutdown waits for connections to finish their current request.
const DRAIN: Duration = Duration::from_secs(10);

/// At the cap with every connection busy: how often to look for one that became idle.
const BUSY_RETRY: Duration = Duration::from_millis(100);

/// At the cap after an eviction: when to evict another if no slot came free.
const EVICTED_RETRY: Duration = Duration::from_secs(1);

/// Serves Kafka clients on `listener` until `shutdown` becomes true.
pub async fn serve(
    broker: Arc<Broker>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let server = &broker.config.server;
    let permits = Arc::new(Semaphore::new(server.max_connections));
    let budget = ResponseBudget::new(
        server.queued_max_response_bytes,
        server.queued_max_response_bytes_per_connection,
    );
    let admission = Admission::from_config(
        server.max_connections_per_ip,
        &server.max_connections_per_ip_overrides,
    );
    let trim = tokio::spawn(super::trim::run(Arc::clone(&budget), shutdown.clone()));
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        // Reap finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
        let (socket, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                crate::warn_limited!("conn.accept_failed", "accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ticket = match admission.admit(peer.ip()) {
            Ok(ticket) => ticket,
            Err(refused) => {
                broker.metrics.connection_closed_by_broker("per_ip");
                crate::info_limited!("conn.refused", %peer, "refusing connection: {refused}");
                drop(socket);
                continue;
            }
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => match make_room(&admission, &ticket, &permits, &mut shutdown).await {
                Some(permit) => permit,
                None => break,
            },
        };
        let broker = Arc::clone(&broker);
        let shutdown = shutdown.clone();
        let budget = budget.connection();
        connections.spawn(async move {
            connection::run(broker, socket, peer, shutdown, budget, ticket).await;
            drop(permit);
        });
    }
    drop(listener);
    trim.abort();
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

/// At the cap: evicts the connection idle longest and waits for its slot; when every
/// connection is busy, waits for a slot and looks for an idle one again every
/// [`BUSY_RETRY`]. `None` on shutdown.
async fn make_room(
    admission: &Admission,
    newcomer: &super::admission::Ticket,
    permits: &Arc<Semaphore>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    loop {
        let evicted = admission.evict_idlest(newcomer).is_some();
        tokio::select! {
            permit = permits.clone().acquire_owned() => return permit.ok(),
            // An evicted connection closes at once, unless a request came in just then.
            _ = tokio::time::sleep(if evicted { EVICTED_RETRY } else { BUSY_RETRY }) => {}
            _ = shutdown.changed() => return None,
        }
    }
}
