//! A plugin type as the host would see it, without building or loading a `.so`: for a
//! plugin author's own tests (`drover-plugin-testkit` runs its conformance suites
//! against the trait objects these functions return).
//!
//! Each function goes through the same root module that [`crate::export_assignor!`] or
//! [`crate::export_offset_store!`] exports, so the instance gets the SDK's panic guard
//! and log bridge exactly as in a broker. The log bridge forwards the plugin's `tracing`
//! events at `WARN` and above to standard error; like in a plugin library it installs
//! itself as the process's global `tracing` subscriber (unless one is already set) and
//! logs panics inside plugin calls; any other panic of the test binary (a failed
//! assertion, a conformance suite's failure) goes to the panic hook installed before, so
//! the test fails with its plain message.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RArc, RBox, RNone, RStr, RString},
};

use super::{
    assignor_root_module, authorizer_root_module, offset_store_root_module, AssignorPlugin,
    AuthorizerPlugin, OffsetStorePlugin,
};
use crate::{
    assignor::AssignorArc,
    authorizer::AuthorizerArc,
    host::{LogLevel, LogSink, LogSink_TO},
    offset_store::OffsetStoreArc,
    HostServices, PluginError,
};

/// Creates an instance of assignor `T` with `config` (the TOML string an operator's
/// `[plugins.config.<name>]` table would give it; empty for none), through its
/// exported root module. Errors: whatever `T::new` returns (usually
/// [`crate::ErrorKind::InvalidConfig`]), or [`crate::ErrorKind::Panicked`].
pub fn assignor<T: AssignorPlugin>(config: &str) -> Result<AssignorArc, PluginError> {
    let module = assignor_root_module::<T>();
    (module.new())(services(config)).into_result()
}

/// Opens an instance of offset store `T` with `config`, through its exported root
/// module. Calling it again with the same config opens the same backing data (how the
/// test kit checks that acknowledged commits survive a close and reopen). Errors:
/// whatever `T::open` returns ([`crate::ErrorKind::InvalidConfig`],
/// [`crate::ErrorKind::Unavailable`]), or [`crate::ErrorKind::Panicked`].
pub fn offset_store<T: OffsetStorePlugin>(config: &str) -> Result<OffsetStoreArc, PluginError> {
    let module = offset_store_root_module::<T>();
    (module.open())(services(config)).into_result()
}

/// Creates an instance of authorizer `T` with `config`, through its exported root
/// module. Errors: whatever `T::new` returns, or [`crate::ErrorKind::Panicked`].
pub fn authorizer<T: AuthorizerPlugin>(config: &str) -> Result<AuthorizerArc, PluginError> {
    let module = authorizer_root_module::<T>();
    (module.new())(services(config)).into_result()
}

/// What a host would hand the instance: a log sink to standard error, the config, no
/// ZooKeeper session.
fn services(config: &str) -> HostServices {
    super::log_bridge::mark_in_process();
    HostServices {
        log: RArc::new(LogSink_TO::from_ptr(RBox::new(Stderr), TD_Opaque)),
        config: RString::from(config),
        zookeeper: RNone,
    }
}

/// Prints forwarded events on standard error.
struct Stderr;

impl LogSink for Stderr {
    fn log(&self, level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
        eprintln!("[{level:?} {target}] {message}");
    }

    fn max_level(&self) -> LogLevel {
        LogLevel::Warn
    }
}
