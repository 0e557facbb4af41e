//! Forwards the plugin's `tracing` events to the host.
//!
//! A `cdylib` has its own copy of `tracing`'s global dispatcher, so without a bridge the
//! plugin's events go nowhere. On the first instantiation the SDK installs a global
//! subscriber inside the plugin whose only layer formats each event and hands it to the
//! host's [`LogSink`](crate::host::LogSink). The host's maximum level is read then, once:
//! events below it are filtered inside the plugin for the rest of the process.
//!
//! The plugin's panic hook is replaced by one that logs the panic and its location
//! through the same bridge, so a broker's log names the plugin that panicked. Built
//! in-process ([`crate::sdk::in_process`], a plugin author's `cargo test`), the plugin
//! shares the hook with the test binary: there the bridge logs only panics inside a
//! plugin call (the SDK's guard), and leaves every other panic — a failed assertion, a
//! conformance suite's failure — to the hook that was installed before, so the test
//! fails with the usual `thread '…' panicked at …` message and not a log line.

use std::{
    fmt::Write as _,
    sync::{
        atomic::{AtomicBool, Ordering},
        Once,
    },
};

use tracing::{
    field::{Field, Visit},
    Event, Metadata, Subscriber,
};
use tracing_subscriber::{
    layer::{Context, SubscriberExt},
    Layer,
};

use crate::host::{LogLevel, LogSinkArc};

static INSTALL: Once = Once::new();

/// Set by [`crate::sdk::in_process`] before it instantiates a plugin: the plugin runs in
/// the caller's binary, not in a library of its own.
static IN_PROCESS: AtomicBool = AtomicBool::new(false);

/// Notes that plugins are instantiated in-process (see the module docs).
pub(crate) fn mark_in_process() {
    IN_PROCESS.store(true, Ordering::Relaxed);
}

/// Whether the bridge's panic hook logs a panic on the current thread, or leaves it to
/// the hook installed before: in a plugin library always; in-process only inside a
/// plugin call.
fn logs_panic_here() -> bool {
    !IN_PROCESS.load(Ordering::Relaxed) || super::panic_guard::in_guarded_call()
}

/// Installs the bridge to `sink` (once per plugin library; later calls do nothing).
pub fn install(sink: &LogSinkArc) {
    INSTALL.call_once(|| {
        let max = sink.max_level();
        let layer = Forward {
            sink: sink.clone(),
            max,
        };
        let subscriber = tracing_subscriber::registry().with(layer);
        // Fails only if the plugin installed its own subscriber first; then that wins.
        let _ = tracing::subscriber::set_global_default(subscriber);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !logs_panic_here() {
                return previous(info);
            }
            let location = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(%location, "panic: {message}");
        }));
    });
}

struct Forward {
    sink: LogSinkArc,
    max: LogLevel,
}

impl<S: Subscriber> Layer<S> for Forward {
    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        LogLevel::from_tracing(metadata.level()) >= self.max
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut visitor = Message::default();
        event.record(&mut visitor);
        let mut text = visitor.message;
        text.push_str(&visitor.fields);
        self.sink.log(
            LogLevel::from_tracing(meta.level()),
            meta.target().into(),
            text.as_str().into(),
        );
    }
}

#[derive(Default)]
struct Message {
    message: String,
    fields: String,
}

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}
