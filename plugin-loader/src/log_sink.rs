//! The host end of the plugin log bridge: each plugin instance gets a [`LogSink`] that
//! re-emits the plugin's events into the host's `tracing` subscriber inside a
//! `plugin{name,version}` span with the `tracing` target `plugin` (filter them with
//! `RUST_LOG=plugin=debug`), whatever thread the plugin logged from.
//!
//! The span is an ERROR-level span, so it is enabled whenever any event is: with an
//! INFO span, `RUST_LOG=warn` would print a plugin's warnings without saying which plugin
//! they came from.
//!
//! The plugin asks [`LogSink::max_level`] once, when its first instance is created, and
//! filters below that level inside the plugin from then on: raising the host's level
//! later does not make an already-loaded plugin more verbose.

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
        let span = tracing::error_span!(target: "plugin", "plugin", name = %self.name, version = %self.version);
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_plugin_span_survives_a_warn_level_filter() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(Level::WARN)
            .with_writer(move || writer.clone())
            .finish();
        let sink = HostLogSink {
            name: "p".to_owned(),
            version: "1.2.3".to_owned(),
        };
        tracing::subscriber::with_default(subscriber, || {
            sink.log(LogLevel::Warn, "p::x".into(), "disk nearly full".into());
            sink.log(LogLevel::Info, "p::x".into(), "filtered out".into());
        });
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line = log
            .lines()
            .find(|l| l.contains("disk nearly full"))
            .unwrap_or_else(|| panic!("no warning in {log:?}"));
        assert!(line.contains("plugin{name=p version=1.2.3}"), "{line}");
        assert!(!log.contains("filtered out"), "{log}");
    }
}
