//! The admin listener's connections for axum: plain TCP, or TLS through the Kafka
//! listeners' handshake ([`crate::server::tls::handshake`]: the same rustls
//! configuration, reloads, client-certificate verification and principal mapping,
//! failures counted in `drover_tls_handshake_failures_total{listener="admin"}`).
//!
//! axum's own `serve` runs the HTTP side (HTTP/1.1, graceful shutdown) over
//! [`TlsIncoming`], an [`axum::serve::Listener`] fed by an accept task that runs each
//! handshake in a task of its own (at most [`MAX_HANDSHAKES`] at once, each within
//! `server.first_request_timeout_ms`), so a client that stalls its handshake holds up
//! no one else. Each connection's [`AdminPeer`] (addresses, verified principal) reaches
//! the handlers as `ConnectInfo`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{extract::connect_info::Connected, serve::IncomingStream};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch, Semaphore},
};
use tokio_rustls::server::TlsStream;

use super::guard::AdminPeer;
use crate::{metrics::Metrics, server::tls::TlsListener};

/// Most TLS handshakes in progress at once on the admin listener; a connection beyond
/// them is closed at once (and counted, reason `busy`).
pub const MAX_HANDSHAKES: usize = 64;

impl Connected<IncomingStream<'_, TcpListener>> for AdminPeer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        let remote = *stream.remote_addr();
        AdminPeer {
            remote,
            local: stream
                .io()
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
            principal: None,
        }
    }
}

impl Connected<IncomingStream<'_, TlsIncoming>> for AdminPeer {
    fn connect_info(stream: IncomingStream<'_, TlsIncoming>) -> Self {
        stream.remote_addr().clone()
    }
}

/// TLS connections whose handshake finished, for `axum::serve`.
pub struct TlsIncoming {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, AdminPeer)>,
    local: SocketAddr,
}

impl axum::serve::Listener for TlsIncoming {
    type Io = TlsStream<TcpStream>;
    type Addr = AdminPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept task ended (shutdown): axum's graceful shutdown ends the serve.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(AdminPeer {
            remote: self.local,
            local: self.local,
            principal: None,
        })
    }
}

/// Accepts on `socket` until `shutdown`, runs each TLS handshake with `tls` within
/// `handshake_timeout`, and hands the connections that finished it to the returned
/// listener.
pub fn tls_incoming(
    socket: TcpListener,
    tls: Arc<TlsListener>,
    metrics: Arc<Metrics>,
    handshake_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<TlsIncoming> {
    let local = socket.local_addr()?;
    let (ready, incoming) = mpsc::channel(MAX_HANDSHAKES);
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = socket.accept() => accepted,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            let (tcp, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    crate::warn_limited!(
                        "admin.accept_failed",
                        "admin listener: accept failed: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                metrics.tls_handshake_failed(tls.name().as_str(), "busy");
                crate::warn_limited!(
                    "admin.handshakes_busy",
                    %remote,
                    "admin listener: {MAX_HANDSHAKES} TLS handshakes in progress, closing a new connection"
                );
                continue;
            };
            let (tls, metrics, ready) = (Arc::clone(&tls), Arc::clone(&metrics), ready.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let local = tcp.local_addr().unwrap_or(local);
                let deadline = tokio::time::Instant::now() + handshake_timeout;
                match crate::server::tls::handshake(&tls, tcp, deadline).await {
                    Ok((stream, principal)) => {
                        metrics.tls_handshake(tls.name().as_str());
                        let verified = stream.get_ref().1.peer_certificates().is_some();
                        let peer = AdminPeer {
                            remote,
                            local,
                            principal: verified.then(|| principal.to_string()),
                        };
                        tracing::debug!(%remote, principal = ?peer.principal, "admin TLS connection");
                        let _ = ready.send((stream, peer)).await;
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
    });
    Ok(TlsIncoming {
        ready: incoming,
        local,
    })
}
