//! Accepting connections on every listener (config/listeners.rs): at most
//! `server.max_connections` are served at once over all of them, and shutdown stops
//! accepting, tells every connection to finish, and waits for them (bounded).
//!
//! Admission (server/admission.rs): a connection over its address's limit is closed at
//! once; at the cap, the connection idle longest is evicted to make room for the new
//! one, and only when every connection is busy does the new one wait (and the ones
//! behind it in the kernel's accept queue).

use std::{
    future::poll_fn,
    net::SocketAddr,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    net::{TcpListener, TcpStream},
    sync::{watch, OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
};

use super::{admission::Admission, budget::ResponseBudget, connection, context::ListenerHandle};
use crate::broker::Broker;

/// A bound listener socket and what its connections are told of it.
#[derive(Debug)]
pub struct Bound {
    /// The socket.
    pub socket: TcpListener,
    /// The listener.
    pub handle: ListenerHandle,
}

/// How long shutdown waits for connections to finish their current request.
const DRAIN: Duration = Duration::from_secs(10);

/// At the cap with every connection busy: how often to look for one that became idle.
const BUSY_RETRY: Duration = Duration::from_millis(100);

/// At the cap after an eviction: when to evict another if no slot came free.
const EVICTED_RETRY: Duration = Duration::from_secs(1);

/// Serves Kafka clients on `listeners` until `shutdown` becomes true. The connection
/// bounds (`server.max_connections`, per address, queued response bytes) hold for all
/// listeners together.
pub async fn serve(
    broker: Arc<Broker>,
    listeners: Vec<Bound>,
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
    let mut next = 0;
    loop {
        let (accepted, index) = tokio::select! {
            accepted = poll_fn(|cx| accept_any(&listeners, &mut next, cx)) => accepted,
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
        let handle = listeners[index].handle.clone();
        connections.spawn(async move {
            connection::run(broker, socket, peer, shutdown, budget, ticket, handle).await;
            drop(permit);
        });
    }
    drop(listeners);
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

/// The next connection on any of `listeners`, and which listener it came in on; the
/// listeners are polled in turn from `next`, so that a busy one does not starve the
/// others.
fn accept_any(
    listeners: &[Bound],
    next: &mut usize,
    cx: &mut Context<'_>,
) -> Poll<(std::io::Result<(TcpStream, SocketAddr)>, usize)> {
    let n = listeners.len();
    for i in 0..n {
        let index = (*next + i) % n;
        if let Poll::Ready(accepted) = listeners[index].socket.poll_accept(cx) {
            *next = (index + 1) % n;
            return Poll::Ready((accepted, index));
        }
    }
    Poll::Pending
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
