//! Catches panics at the boundary: a panic inside a plugin must never unwind into the
//! host (unwinding out of an `extern "C"` function aborts the process, and with it the
//! broker).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{ErrorKind, PluginError};

/// Runs `f`; a panic becomes a [`ErrorKind::Panicked`] error carrying the panic message.
pub fn guard<T>(f: impl FnOnce() -> Result<T, PluginError>) -> Result<T, PluginError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_owned()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "panic with a non-string payload".to_owned()
            };
            Err(PluginError::new(
                ErrorKind::Panicked,
                format!("plugin panicked: {message}"),
            ))
        }
    }
}
