//! The broker's ZooKeeper session lent to plugins (`drover_abi::host::ZkSession`): the
//! coordinator's `startup_zookeeper` gets it. Calls block on the broker's client from
//! the plugin's thread (never a runtime thread); paths are below the broker's chroot.
//! Errors carry ZooKeeper's error code and are `Unavailable` for connection loss and
//! session expiry.

use std::sync::Arc;

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

/// ZooKeeper's numeric error code of `e` (for [`PluginError::code`]).
fn code(e: &zk::Error) -> i32 {
    match e {
        zk::Error::NoNode => -101,
        zk::Error::NodeExists => -110,
        zk::Error::BadVersion => -103,
        zk::Error::NotEmpty => -111,
        zk::Error::ConnectionLoss => -4,
        zk::Error::SessionExpired => -112,
        _ => -1,
    }
}

fn error(e: zk::Error) -> PluginError {
    let kind = match e {
        zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::ClientClosed => {
            ErrorKind::Unavailable
        }
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

impl BrokerSession {
    fn call<T>(
        &self,
        f: impl FnOnce(
            zk::Client,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, zk::Error>> + Send>,
        >,
    ) -> RResult<T, PluginError> {
        let client = match self.cluster.client() {
            Ok(c) => c,
            Err(e) => return RResult::RErr(PluginError::unavailable(e.to_string())),
        };
        self.cluster
            .runtime
            .block_on(f(client))
            .map_err(error)
            .into()
    }
}

impl ZkSession for BrokerSession {
    fn session_id(&self) -> i64 {
        self.cluster.client().map(|c| c.session_id().0).unwrap_or(0)
    }

    fn get(&self, path: RStr<'_>) -> RResult<ROption<ZkData>, PluginError> {
        let path = path.to_string();
        self.call(move |c| {
            Box::pin(async move {
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
        self.call(move |c| {
            Box::pin(async move {
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
        self.call(move |c| {
            Box::pin(async move {
                let options = mode(create_mode).with_acls(zk::Acls::anyone_all());
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
        self.call(move |c| {
            Box::pin(async move {
                c.set_data(&path, &data, version(v))
                    .await
                    .map(|s| s.version)
            })
        })
    }

    fn delete(&self, path: RStr<'_>, v: i32) -> RResult<(), PluginError> {
        let path = path.to_string();
        self.call(move |c| Box::pin(async move { c.delete(&path, version(v)).await }))
    }

    fn multi(&self, ops: RVec<ZkOp>) -> RResult<(), PluginError> {
        let ops = ops.into_vec();
        self.call(move |c| {
            Box::pin(async move {
                let mut writer = c.new_multi_writer();
                for op in &ops {
                    match op {
                        ZkOp::Create {
                            path,
                            data,
                            mode: m,
                        } => {
                            let options = mode(*m).with_acls(zk::Acls::anyone_all());
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

/// The session object for plugins of `cluster`.
pub fn for_plugins(cluster: &Arc<Cluster>) -> ZkSessionArc {
    RArc::new(ZkSession_TO::from_value(
        BrokerSession {
            cluster: Arc::clone(cluster),
        },
        TD_Opaque,
    ))
}
