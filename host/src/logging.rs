//! The host's `tracing` subscriber: human-readable lines on stderr, filtered by
//! `RUST_LOG` (default `info`), coloured only on a terminal. Plugin events arrive through
//! [`crate::plugins::log_sink`] and are printed inside a `plugin{name,version}` span.
//! [`rate_limit`] bounds the log lines a client can cause (the `drover-rate-limit` crate,
//! re-exported; its macros are at the crate root: `crate::warn_limited!`).

use std::io::IsTerminal;

pub use drover_rate_limit as rate_limit;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (default level `info`); later calls do nothing.
pub fn init() {
    init_with_default("info");
}

/// Installs the global subscriber with `default` as the filter when `RUST_LOG` is not
/// set (`drover demo` and `drover consume` use `warn`, so their own output stays
/// readable); later calls do nothing.
pub fn init_with_default(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
