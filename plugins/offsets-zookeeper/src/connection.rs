//! The store's own ZooKeeper connection: a tokio runtime owned by the plugin, one
//! `zookeeper-client` session, bounded waits, and reconnection.
//!
//! The plugin is synchronous at the ABI: every call blocks the host's thread on
//! [`Connection::block_on`] (those threads are not tokio threads; the plugin's tokio is
//! its own copy). The runtime has one worker thread, which drives the session in the
//! background (pings, reconnects) between calls.
//!
//! Each ZooKeeper request is bounded by `request_timeout_ms` ([`Connection::io`]); so is
//! getting a session ([`Connection::client`]), so a call fails after at most about twice
//! that when ZooKeeper is down (once when it still has a session). While the connection is lost, requests wait in the client for it to come
//! back, and fail with `Unavailable` when their time is up. When the session has
//! expired (ZooKeeper was unreachable for longer than the session timeout), the next
//! call opens a new session. So a store survives ZooKeeper going away and coming back
//! without being reopened.
//!
//! A request that timed out or lost its connection may still have been applied by
//! ZooKeeper (as with any ZooKeeper client): the caller treats a failed commit as not
//! committed, and committing again is harmless.

use std::{
    future::Future,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use drover_abi::PluginError;
use zookeeper_client::{Client, Error as ZkError};

use crate::{config::Config, errors::ErrorContext};

/// How long [`Connection::shutdown`] waits for the session to close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A ZooKeeper session that reconnects when it expired, plus the runtime that runs it.
pub struct Connection {
    runtime: tokio::runtime::Runtime,
    config: Config,
    errors: ErrorContext,
    /// The current session; `None` before the first connect and after a failed one.
    client: Mutex<Option<Client>>,
    /// Serialises (re)connecting, so concurrent callers open one session, not many.
    connecting: tokio::sync::Mutex<()>,
    /// `auth_digest_file`'s `user:password`, read at open.
    digest: Option<Vec<u8>>,
}

impl Connection {
    /// Starts the runtime and connects. Errors: `Unavailable` when no session can be
    /// established within `request_timeout_ms`, `Internal` when the runtime cannot start.
    pub fn open(config: &Config) -> Result<Connection, PluginError> {
        let digest = match &config.auth_digest_file {
            Some(path) => Some(crate::config::read_digest_file(path)?),
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("drover-zk-offsets")
            .enable_all()
            .build()
            .map_err(|e| {
                PluginError::internal(format!(
                    "offset store `zookeeper`: cannot start its runtime: {e}"
                ))
            })?;
        let connection = Connection {
            runtime,
            errors: ErrorContext::for_config(config),
            config: config.clone(),
            client: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            digest,
        };
        connection.block_on(connection.client())?;
        Ok(connection)
    }

    /// Runs `future` to completion on the calling (non-tokio) thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// How the store's nodes are created: open to anyone, or with `auth_digest_file`
    /// all rights for the session's identity and read for anyone.
    pub fn create_options(&self) -> zookeeper_client::CreateOptions<'static> {
        match self.digest {
            Some(_) => crate::backend::restricted(),
            None => crate::backend::PERSISTENT,
        }
    }

    /// How errors are described.
    pub fn errors(&self) -> &ErrorContext {
        &self.errors
    }

    /// A live session: the current one, or a new one when there is none or it has
    /// expired or closed. Waiting for another caller's connect attempt and connecting
    /// together take at most `request_timeout_ms`, so callers queued behind a failing
    /// attempt do not wait for one attempt each.
    pub async fn client(&self) -> Result<Client, PluginError> {
        if let Some(client) = self.live() {
            return Ok(client);
        }
        let connect = async {
            let _connecting = self.connecting.lock().await;
            if let Some(client) = self.live() {
                return Ok(client);
            }
            let mut connector =
                Client::connector().with_session_timeout(self.config.session_timeout);
            if let Some(digest) = &self.digest {
                // auth_digest_file: the session's identity, which owns the store's nodes.
                connector = connector.with_auth("digest", digest);
            }
            let client = connector.connect(&self.config.connect).await?;
            tracing::info!(
                connect = %self.config.connect,
                session = %client.session_id(),
                session_timeout_ms = client.session_timeout().as_millis() as u64,
                "ZooKeeper session established"
            );
            *self.slot() = Some(client.clone());
            Ok(client)
        };
        self.io(connect)
            .await
            .map_err(|e| self.errors.from_zk("connect", e))
    }

    /// The current session if it is not terminated (expired, closed, auth failed).
    fn live(&self) -> Option<Client> {
        let mut slot = self.slot();
        match slot.as_ref() {
            Some(client) if !client.state().is_terminated() => Some(client.clone()),
            Some(client) => {
                tracing::warn!(
                    session = %client.session_id(),
                    state = %client.state(),
                    "ZooKeeper session ended; opening a new one"
                );
                *slot = None;
                None
            }
            None => None,
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Client>> {
        self.client.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Awaits one ZooKeeper request (or a pipelined group of them), for at most
    /// `request_timeout_ms`; running out of time is [`ZkError::Timeout`].
    pub async fn io<T>(
        &self,
        request: impl Future<Output = Result<T, ZkError>>,
    ) -> Result<T, ZkError> {
        match tokio::time::timeout(self.config.request_timeout, request).await {
            Ok(result) => result,
            Err(_) => Err(ZkError::Timeout),
        }
    }

    /// Closes the session (waiting briefly for ZooKeeper to confirm) and stops the
    /// runtime.
    pub fn shutdown(self) {
        if let Some(client) = self.slot().take() {
            let mut state = client.state_watcher();
            let session = client.session_id();
            drop(client); // the last handle: the client sends CloseSession
            let closed = self.runtime.block_on(async {
                tokio::time::timeout(CLOSE_WAIT, async {
                    while !state.state().is_terminated() {
                        state.changed().await;
                    }
                })
                .await
                .is_ok()
            });
            tracing::debug!(%session, closed, "ZooKeeper session closed");
        }
        self.runtime.shutdown_timeout(CLOSE_WAIT);
    }
}
