//! What the host gives every plugin instance: [`HostServices`].
//!
//! - a log sink: the SDK installs a `tracing` subscriber inside the plugin that forwards
//!   every event here, and the host re-emits it inside a `plugin{name,version}` span;
//! - the plugin's own config: an opaque string (TOML, from the operator's `drover.toml`)
//!   that the plugin validates at instantiation;
//! - in cluster mode, the broker's ZooKeeper session ([`ZkSession`]).

use abi_stable::{
    sabi_trait,
    std_types::{RArc, RBox, ROption, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

use crate::error::PluginError;

/// Severity of a forwarded log event, ordered from most to least verbose.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `tracing::Level::TRACE`.
    Trace = 0,
    /// `tracing::Level::DEBUG`.
    Debug = 1,
    /// `tracing::Level::INFO`.
    Info = 2,
    /// `tracing::Level::WARN`.
    Warn = 3,
    /// `tracing::Level::ERROR`.
    Error = 4,
}

impl LogLevel {
    /// The matching `tracing` level.
    pub fn to_tracing(self) -> tracing::Level {
        match self {
            LogLevel::Trace => tracing::Level::TRACE,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Info => tracing::Level::INFO,
            LogLevel::Warn => tracing::Level::WARN,
            LogLevel::Error => tracing::Level::ERROR,
        }
    }

    /// The matching level of a `tracing` level.
    pub fn from_tracing(level: &tracing::Level) -> Self {
        match *level {
            tracing::Level::TRACE => LogLevel::Trace,
            tracing::Level::DEBUG => LogLevel::Debug,
            tracing::Level::INFO => LogLevel::Info,
            tracing::Level::WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

/// Receives the log events of one plugin instance. Implemented by the host; called by
/// the SDK's forwarding layer from any plugin thread.
#[sabi_trait]
pub trait LogSink: Send + Sync {
    /// Emits one event. `target` is the plugin-side `tracing` target (module path),
    /// `message` the formatted message followed by ` key=value` fields.
    fn log(&self, level: LogLevel, target: RStr<'_>, message: RStr<'_>);

    /// The most verbose level the host wants; the plugin filters below it.
    #[sabi(last_prefix_field)]
    fn max_level(&self) -> LogLevel;
}

/// A shareable log sink trait object.
pub type LogSinkArc = RArc<LogSink_TO<'static, RBox<()>>>;

/// How a ZooKeeper node is created (ZooKeeper's `CreateMode`).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZkCreateMode {
    /// Persistent node.
    Persistent = 0,
    /// Removed when the session ends.
    Ephemeral = 1,
    /// Persistent, with a monotonically increasing suffix.
    PersistentSequential = 2,
    /// Ephemeral, with a monotonically increasing suffix.
    EphemeralSequential = 3,
}

/// A node's data and its version (ZooKeeper `Stat.version`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ZkData {
    /// The node's bytes.
    pub data: RVec<u8>,
    /// Data version, for conditional `set`/`delete`.
    pub version: i32,
}

/// One operation of an atomic ZooKeeper `multi`.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub enum ZkOp {
    /// Create `path` with `data`.
    Create {
        /// Absolute path below the session's chroot.
        path: RString,
        /// Node data.
        data: RVec<u8>,
        /// Node mode.
        mode: ZkCreateMode,
    },
    /// Set `path`'s data if its version is `version` (−1: any).
    SetData {
        /// Absolute path below the session's chroot.
        path: RString,
        /// Node data.
        data: RVec<u8>,
        /// Expected version, −1 for any.
        version: i32,
    },
    /// Delete `path` if its version is `version` (−1: any).
    Delete {
        /// Absolute path below the session's chroot.
        path: RString,
        /// Expected version, −1 for any.
        version: i32,
    },
    /// Fail the whole `multi` unless `path` has version `version`.
    Check {
        /// Absolute path below the session's chroot.
        path: RString,
        /// Expected version.
        version: i32,
    },
}

/// The broker's ZooKeeper session, lent to plugins in cluster mode. Calls are
/// synchronous (the host blocks on its own client) and paths are relative to the
/// broker's chroot. Errors carry the ZooKeeper error code in [`PluginError::code`]
/// (for example −101 NoNode, −110 NodeExists, −103 BadVersion) and are
/// [`crate::ErrorKind::Unavailable`] for connection loss and session expiry.
#[sabi_trait]
pub trait ZkSession: Send + Sync {
    /// The session id, for logs.
    fn session_id(&self) -> i64;
    /// The node at `path`, or `RNone` if it does not exist.
    fn get(&self, path: RStr<'_>) -> RResult<ROption<ZkData>, PluginError>;
    /// The names of `path`'s children.
    fn children(&self, path: RStr<'_>) -> RResult<RVec<RString>, PluginError>;
    /// Creates `path`; returns the created path (with a sequence suffix if sequential).
    fn create(
        &self,
        path: RStr<'_>,
        data: RSlice<'_, u8>,
        mode: ZkCreateMode,
    ) -> RResult<RString, PluginError>;
    /// Sets `path`'s data if its version matches (−1: any); returns the new version.
    fn set_data(
        &self,
        path: RStr<'_>,
        data: RSlice<'_, u8>,
        version: i32,
    ) -> RResult<i32, PluginError>;
    /// Deletes `path` if its version matches (−1: any).
    fn delete(&self, path: RStr<'_>, version: i32) -> RResult<(), PluginError>;
    /// Runs `ops` atomically: all succeed or none is applied.
    #[sabi(last_prefix_field)]
    fn multi(&self, ops: RVec<ZkOp>) -> RResult<(), PluginError>;
}

/// A shareable ZooKeeper session trait object.
pub type ZkSessionArc = RArc<ZkSession_TO<'static, RBox<()>>>;

/// Everything the host gives one plugin instance at instantiation.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct HostServices {
    /// Where the plugin's log events go. The SDK installs the bridge; plugins normally
    /// just use `tracing` macros.
    pub log: LogSinkArc,
    /// The plugin's config: the operator's `[plugins.config.<name>]` table rendered as
    /// TOML, or an empty string. The plugin validates it and returns
    /// [`crate::ErrorKind::InvalidConfig`] when it is wrong.
    pub config: RString,
    /// The broker's ZooKeeper session in cluster mode; `RNone` when standalone.
    pub zookeeper: ROption<ZkSessionArc>,
}
