//! The host end of the plugin log bridge: each plugin instance gets a [`LogSink`] that
//! re-emits the plugin's events into the host's `tracing` subscriber inside a
//! `plugin{name,version}` span with the `tracing` target `plugin` (filter them with
//! `RUST_LOG=plugin=debug`), whatever thread the plugin logged from.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RArc, RBox, RStr},
};
use drover_abi::{
    host::{LogSink, LogSinkArc, LogSink_TO},
    LogLevel,
};
use tracing::{level_filters::LevelFilter, Level};

use super::loader::PluginSummary;

/// A log sink for the plugin described by `summary`.
pub fn for_plugin(summary: &PluginSummary) -> LogSinkArc {
    RArc::new(LogSink_TO::from_ptr(
        RBox::new(HostLogSink {
            name: summary.name.clone(),
            version: summary.version.clone(),
        }),
        TD_Opaque,
    ))
}

struct HostLogSink {
    name: String,
    version: String,
}

impl LogSink for HostLogSink {
    fn log(&self, level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
        let span = tracing::info_span!(target: "plugin", "plugin", name = %self.name, version = %self.version);
        let _entered = span.enter();
        let (target, message) = (target.as_str(), message.as_str());
        match level.to_tracing() {
            Level::ERROR => tracing::error!(target: "plugin", plugin_target = target, "{message}"),
            Level::WARN => tracing::warn!(target: "plugin", plugin_target = target, "{message}"),
            Level::INFO => tracing::info!(target: "plugin", plugin_target = target, "{message}"),
            Level::DEBUG => tracing::debug!(target: "plugin", plugin_target = target, "{message}"),
            _ => tracing::trace!(target: "plugin", plugin_target = target, "{message}"),
        }
    }

    fn max_level(&self) -> LogLevel {
        match LevelFilter::current().into_level() {
            Some(level) => LogLevel::from_tracing(&level),
            None => LogLevel::Error,
        }
    }
}
