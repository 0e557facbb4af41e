//! The broker's ZooKeeper session lent to plugins (`drover_abi::host::ZkSession`): the
//! coordinator's `startup_zookeeper` gets it, and so does every offset store in cluster
//! mode (through `HostServices.zookeeper`; the `zookeeper` store keeps its offsets
//! over it). Paths are below the broker's chroot.
//!
//! # Behaviour
//!
//! - **Follows the broker's session.** Every call uses the client the cluster task
//!   holds at that moment (`Cluster::client`): after a session expired and the broker
//!   registered again with a new session, the same lent object uses the new one. The
//!   lent object may be created before the cluster task has connected at all.
//! - **Bounded.** Each call, including waiting for a session when the broker has none
//!   (before the first connection, between an expiry and the next session), takes at
//!   most the broker's `zookeeper.session_timeout_ms` (plus scheduling slack); then it
//!   fails with `Unavailable` (code −4, connection loss, when there was no session at
//!   all; −7, operation timeout, when ZooKeeper did not answer in time). After that
//!   long without an answer the session is surely lost anyway. Calls never hang and
//!   never panic.
//! - **Any calling thread.** A call runs its request on the broker's runtime and waits
//!   for the answer on the calling thread: a plugin thread, a blocking-pool thread, or
//!   even a runtime worker thread (the wait then moves off the worker with
//!   `block_in_place` when the runtime allows it). After the runtime has shut down,
//!   calls fail with `Unavailable`.
//! - **Errors** carry ZooKeeper's error code in `PluginError::code` (−101 NoNode, −110
//!   NodeExists, −103 BadVersion, −111 NotEmpty, −102 NoAuth, ...) and are
//!   `Unavailable` for connection loss, session expiry and timeouts, `InvalidInput`
//!   otherwise (a missing node, a version mismatch: the caller's request does not fit
//!   the tree).
//! - A multi that fails reports the error of its failing operation (not its index).

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RArc, ROption, RResult, RSlice, RStr, RString, RVec},
};
use drover_abi::{
    host::{ZkCreateMode, ZkData, ZkOp, ZkSession, ZkSessionArc, ZkSession_TO},
    ErrorKind, PluginError,
};
use zookeeper_client as zk;

use super::Cluster;

/// ZooKeeper's `ConnectionLoss` code: the broker has no session to send the request on.
pub const CODE_CONNECTION_LOSS: i32 = -4;
/// ZooKeeper's `OperationTimeout` code: no answer within the bound.
pub const CODE_TIMEOUT: i32 = -7;

/// How often a call waiting for the broker's session looks again.
const SESSION_POLL: Duration = Duration::from_millis(50);
/// Slack on top of the bound for the answer to reach the waiting thread (the runtime
/// may be busy); past it the call fails even if the runtime never ran the request.
const HANDOFF_SLACK: Duration = Duration::from_secs(1);

/// ZooKeeper's numeric error code of `e` (for [`PluginError::code`]).
fn code(e: &zk::Error) -> i32 {
    match e {
        zk::Error::ConnectionLoss => CODE_CONNECTION_LOSS,
        zk::Error::MarshallingError => -5,
        zk::Error::Unimplemented => -6,
        zk::Error::Timeout => CODE_TIMEOUT,
        zk::Error::BadArguments(_) => -8,
        zk::Error::NoNode => -101,
        zk::Error::NoAuth => -102,
        zk::Error::BadVersion => -103,
        zk::Error::NoChildrenForEphemerals => -108,
        zk::Error::NodeExists => -110,
        zk::Error::NotEmpty => -111,
        zk::Error::SessionExpired => -112,
        zk::Error::InvalidAcl => -114,
        zk::Error::AuthFailed => -115,
        zk::Error::SessionMoved => -118,
        zk::Error::NotReadOnly => -119,
        zk::Error::QuotaExceeded => -125,
        zk::Error::Throttled => -127,
        zk::Error::UnexpectedErrorCode(code) => *code,
        _ => -1,
    }
}

fn error(e: zk::Error) -> PluginError {
    let kind = match e {
        zk::Error::ConnectionLoss
        | zk::Error::SessionExpired
        | zk::Error::SessionMoved
        | zk::Error::ClientClosed
        | zk::Error::Timeout
        | zk::Error::NoHosts
        | zk::Error::Throttled
        | zk::Error::NotReadOnly
        // Connection-level failures (I/O errors on the socket) are custom errors.
        | zk::Error::Custom(_) => ErrorKind::Unavailable,
        _ => ErrorKind::InvalidInput,
    };
    PluginError::new(kind, format!("ZooKeeper: {e}")).with_code(code(&e))
}

fn mode(m: ZkCreateMode) -> zk::CreateMode {
    match m {
        ZkCreateMode::Persistent => zk::CreateMode::Persistent,
        ZkCreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        ZkCreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        ZkCreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
    }
}

fn version(v: i32) -> Option<i32> {
    (v >= 0).then_some(v)
}

/// The session object handed to plugins.
struct BrokerSession {
    cluster: Arc<Cluster>,
}

/// Runs `f`, turning a panic into an `Internal` error: a panic must not unwind into
/// the plugin that called us (that would abort the broker).
fn guard<T>(f: impl FnOnce() -> RResult<T, PluginError>) -> RResult<T, PluginError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        RResult::RErr(PluginError::internal(
            "the broker's ZooKeeper session panicked serving a plugin's call",
        ))
    })
}

/// Waits for the answer of a request running on the broker's runtime, on the calling
/// thread: directly on a plain thread, through `block_in_place` on a worker thread of
/// a multi-threaded runtime (so the worker's other tasks move elsewhere meanwhile).
fn wait_answer<T>(rx: &std::sync::mpsc::Receiver<T>, bound: Duration) -> Option<T> {
    let wait = || rx.recv_timeout(bound).ok();
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        // Refused (a panic before `wait` runs) only inside a `LocalSet`; then block.
        if let Ok(answer) =
            std::panic::catch_unwind(AssertUnwindSafe(|| tokio::task::block_in_place(wait)))
        {
            return answer;
        }
    }
    wait()
}

impl BrokerSession {
    /// The bound on one call: the broker's session timeout.
    fn bound(&self) -> Duration {
        Duration::from_millis(self.cluster.settings.session_timeout_ms.max(1))
    }

    /// Runs the request `f` makes with the broker's current client on the broker's
    /// runtime, waiting for a client first if there is none, within [`Self::bound`].
    fn call<T, F, Fut>(&self, f: F) -> RResult<T, PluginError>
    where
        T: Send + 'static,
        F: FnOnce(zk::Client) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, zk::Error>> + Send + 'static,
    {
        let bound = self.bound();
        let cluster = Arc::clone(&self.cluster);
        let had_session = Arc::new(AtomicBool::new(false));
        let had = Arc::clone(&had_session);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let request = async move {
            let work = async {
                let client = loop {
                    match cluster.client() {
                        Ok(c) => break c,
                        Err(_) => tokio::time::sleep(SESSION_POLL).await,
                    }
                };
                had.store(true, Ordering::Release);
                f(client).await.map_err(error)
            };
            let result = tokio::time::timeout(bound, work)
                .await
                .unwrap_or_else(|_| Err(timed_out(bound, had.load(Ordering::Acquire))));
            let _ = tx.send(result);
        };
        // After the runtime shut down the task is dropped unrun, and with it `tx`.
        drop(self.cluster.runtime.spawn(request));
        match wait_answer(&rx, bound + HANDOFF_SLACK) {
            Some(result) => result.into(),
            None => RResult::RErr(timed_out(bound, had_session.load(Ordering::Acquire))),
        }
    }
}

/// The error of a call that ran out of time: with no session at all, or with no answer.
fn timed_out(bound: Duration, had_session: bool) -> PluginError {
    let ms = bound.as_millis();
    if had_session {
        PluginError::unavailable(format!(
            "ZooKeeper: no answer on the broker's session within {ms} ms \
             (zookeeper.session_timeout_ms)"
        ))
        .with_code(CODE_TIMEOUT)
    } else {
        PluginError::unavailable(format!(
            "ZooKeeper: the broker has no ZooKeeper session (not connected yet, or \
             reconnecting after the session ended); waited {ms} ms"
        ))
        .with_code(CODE_CONNECTION_LOSS)
    }
}

impl ZkSession for BrokerSession {
    fn session_id(&self) -> i64 {
        self.cluster.client().map(|c| c.session_id().0).unwrap_or(0)
    }

    fn get(&self, path: RStr<'_>) -> RResult<ROption<ZkData>, PluginError> {
        let path = path.to_string();
        guard(|| {
            self.call(move |c| async move {
                match c.get_data(&path).await {
                    Ok((data, stat)) => Ok(ROption::RSome(ZkData {
                        data: RVec::from(data),
                        version: stat.version,
                    })),
                    Err(zk::Error::NoNode) => Ok(ROption::RNone),
                    Err(e) => Err(e),
                }
            })
        })
    }

    fn children(&self, path: RStr<'_>) -> RResult<RVec<RString>, PluginError> {
        let path = path.to_string();
        guard(|| {
            self.call(move |c| async move {
                c.list_children(&path)
                    .await
                    .map(|v| v.into_iter().map(RString::from).collect())
            })
        })
    }

    fn create(
        &self,
        path: RStr<'_>,
        data: RSlice<'_, u8>,
        create_mode: ZkCreateMode,
    ) -> RResult<RString, PluginError> {
        let path = path.to_string();
        let data = data.to_vec();
        guard(|| {
            self.call(move |c| async move {
                let options = mode(create_mode).with_acls(crate::cluster::acl::nodes());
                let (_, sequence) = c.create(&path, &data, &options).await?;
                let created = if matches!(
                    create_mode,
                    ZkCreateMode::PersistentSequential | ZkCreateMode::EphemeralSequential
                ) {
                    format!("{path}{sequence}")
                } else {
                    path
                };
                Ok(RString::from(created))
            })
        })
    }

    fn set_data(&self, path: RStr<'_>, data: RSlice<'_, u8>, v: i32) -> RResult<i32, PluginError> {
        let path = path.to_string();
        let data = data.to_vec();
        guard(|| {
            self.call(move |c| async move {
                c.set_data(&path, &data, version(v))
                    .await
                    .map(|s| s.version)
            })
        })
    }

    fn delete(&self, path: RStr<'_>, v: i32) -> RResult<(), PluginError> {
        let path = path.to_string();
        guard(|| self.call(move |c| async move { c.delete(&path, version(v)).await }))
    }

    fn multi(&self, ops: RVec<ZkOp>) -> RResult<(), PluginError> {
        let ops = ops.into_vec();
        guard(|| {
            self.call(move |c| async move {
                let mut writer = c.new_multi_writer();
                for op in &ops {
                    match op {
                        ZkOp::Create {
                            path,
                            data,
                            mode: m,
                        } => {
                            let options = mode(*m).with_acls(crate::cluster::acl::nodes());
                            writer.add_create(path.as_str(), data.as_slice(), &options)?;
                        }
                        ZkOp::SetData {
                            path,
                            data,
                            version: v,
                        } => writer.add_set_data(path.as_str(), data.as_slice(), version(*v))?,
                        ZkOp::Delete { path, version: v } => {
                            writer.add_delete(path.as_str(), version(*v))?
                        }
                        ZkOp::Check { path, version: v } => {
                            writer.add_check_version(path.as_str(), *v)?
                        }
                    }
                }
                writer.commit().await.map(|_| ()).map_err(|e| match e {
                    zk::MultiWriteError::RequestFailed { source } => source,
                    zk::MultiWriteError::OperationFailed { source, .. } => source,
                })
            })
        })
    }
}

/// The session object for plugins of `cluster`: the coordinator plugin and, in cluster
/// mode, every offset store. It may be created before the cluster task connects, and
/// it follows the broker's session across expiries (see the module docs).
pub fn for_plugins(cluster: &Arc<Cluster>) -> ZkSessionArc {
    RArc::new(ZkSession_TO::from_value(
        BrokerSession {
            cluster: Arc::clone(cluster),
        },
        TD_Opaque,
    ))
}
