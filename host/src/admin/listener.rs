//! The admin listener's connections: an accept loop of its own over hyper's HTTP/1
//! server, for plain TCP and for TLS (through the Kafka listeners' handshake,
//! [`crate::server::tls::handshake`]: the same rustls configuration, reloads,
//! client-certificate verification and principal mapping, failures counted in
//! `drover_tls_handshake_failures_total{listener="admin"}`).
//!
//! Its bounds (issue 29; `axum::serve` has none of them):
//!
//! - **Connections**: at most `admin.max_connections` at once, TLS handshakes in
//!   progress included; each holds a semaphore permit for its whole life. One more is
//!   closed as soon as it is accepted and counted in
//!   `drover_admin_connections_refused_total{reason="limit"}`.
//! - **Request heads**: hyper's `header_read_timeout` (`admin.header_timeout_ms`) runs
//!   whenever the connection waits for a request's head — the first one and every one
//!   after on a keep-alive connection — so a client that dribbles its headers, never
//!   finishes them, or sits idle between requests is closed at the deadline
//!   (`reason="header_timeout"`) and gives its permit back.
//! - **TLS handshakes**: each within `server.first_request_timeout_ms`, in a task of its
//!   own, so a client that stalls one holds up no one else.
//!
//! Each connection's [`AdminPeer`] (addresses, verified principal) reaches the guard and
//! the handlers as axum's `ConnectInfo`. At shutdown the loop stops accepting, each
//! connection finishes the request it serves (hyper's graceful shutdown), and
//! [`serve`] returns when they are gone or after [`SHUTDOWN_GRACE`].

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use axum::{extract::ConnectInfo, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::{watch, Semaphore},
};

use super::guard::AdminPeer;
use crate::{metrics::Metrics, server::tls::TlsListener};

/// How long shutdown waits for connections to finish the requests they serve.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The listener's bounds, from `[admin]` and `[server]`.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Connections at once (`admin.max_connections`).
    pub max_connections: usize,
    /// The longest wait for a request's head (`admin.header_timeout_ms`).
    pub header_timeout: Duration,
    /// The longest TLS handshake (`server.first_request_timeout_ms`).
    pub handshake_timeout: Duration,
}

/// Serves `app` on `socket` (over TLS with `tls`) within `bounds` until `shutdown`
/// becomes true.
pub async fn serve(
    socket: TcpListener,
    app: Router,
    tls: Option<Arc<TlsListener>>,
    metrics: Arc<Metrics>,
    bounds: Bounds,
    mut shutdown: watch::Receiver<bool>,
) {
    let local = socket
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let permits = Arc::new(Semaphore::new(bounds.max_connections));
    loop {
        let accepted = tokio::select! {
            accepted = socket.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let (tcp, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                crate::warn_limited!("admin.accept_failed", "admin listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            metrics.admin_connection_refused("limit");
            crate::warn_limited!(
                "admin.connections_limit",
                %remote,
                "admin listener: {} connections open (admin.max_connections), closing a new one",
                bounds.max_connections
            );
            continue;
        };
        let peer = AdminPeer {
            remote,
            local: tcp.local_addr().unwrap_or(local),
            principal: None,
        };
        let (app, tls, metrics, shutdown) = (
            app.clone(),
            tls.clone(),
            Arc::clone(&metrics),
            shutdown.clone(),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let Some(tls) = tls else {
                return connection(tcp, peer, app, &metrics, bounds, shutdown).await;
            };
            let deadline = tokio::time::Instant::now() + bounds.handshake_timeout;
            match crate::server::tls::handshake(&tls, tcp, deadline).await {
                Ok((stream, principal)) => {
                    metrics.tls_handshake(tls.name().as_str());
                    let verified = stream.get_ref().1.peer_certificates().is_some();
                    let peer = AdminPeer {
                        principal: verified.then(|| principal.to_string()),
                        ..peer
                    };
                    tracing::debug!(%remote, principal = ?peer.principal, "admin TLS connection");
                    connection(stream, peer, app, &metrics, bounds, shutdown).await;
                }
                Err(failure) => {
                    metrics.tls_handshake_failed(tls.name().as_str(), failure.reason());
                    crate::info_limited!(
                        "admin.tls_handshake_failed",
                        %remote,
                        reason = failure.reason(),
                        "admin listener: closing connection: {failure}"
                    );
                }
            }
        });
    }
    // Every permit back: every connection has ended.
    let all = u32::try_from(bounds.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::info!(
            "admin listener: stopping with connections still open after {SHUTDOWN_GRACE:?}"
        );
    }
}

/// Serves HTTP/1 requests on one connection until the client closes it, a request's
/// head is late, or shutdown (after the request in progress).
async fn connection<I>(
    io: I,
    peer: AdminPeer,
    app: Router,
    metrics: &Metrics,
    bounds: Bounds,
    mut shutdown: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let remote = peer.remote;
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(ConnectInfo(peer.clone()));
        let app = app.clone();
        async move {
            let response = tower::ServiceExt::oneshot(app, request).await;
            Ok::<_, Infallible>(response.unwrap_or_else(|never| match never {}))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let mut stopping = false;
    let result = loop {
        tokio::select! {
            result = connection.as_mut() => break result,
            _ = shutdown.wait_for(|stop| *stop), if !stopping => {
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    };
    match result {
        Ok(()) => {}
        Err(e) if e.is_timeout() => {
            metrics.admin_connection_refused("header_timeout");
            crate::info_limited!(
                "admin.header_timeout",
                %remote,
                "admin listener: closing a connection that sent no complete request head \
                 within admin.header_timeout_ms ({:?})",
                bounds.header_timeout
            );
        }
        Err(e) => tracing::debug!(%remote, "admin connection ended: {e}"),
    }
}
