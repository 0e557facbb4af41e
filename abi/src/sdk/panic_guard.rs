//! Catches panics at the boundary: a panic inside a plugin must never unwind into the
//! host (unwinding out of an `extern "C"` function aborts the process, and with it the
//! broker).

use std::{
    cell::Cell,
    panic::{catch_unwind, AssertUnwindSafe},
};

use crate::error::{ErrorKind, PluginError};

thread_local! {
    /// How many guarded calls this thread is inside (a plugin may call itself through
    /// the boundary, so it nests). The log bridge's panic hook reads it.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether the current thread is inside [`guard`]: a panic now is a plugin's, and the
/// guard will turn it into an error.
pub(crate) fn in_guarded_call() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Counts the thread in a guarded call while it lives (unwinding included).
struct Depth;

impl Depth {
    fn enter() -> Depth {
        DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Runs `f`; a panic becomes a [`ErrorKind::Panicked`] error carrying the panic message.
pub fn guard<T>(f: impl FnOnce() -> Result<T, PluginError>) -> Result<T, PluginError> {
    let depth = Depth::enter();
    let result = catch_unwind(AssertUnwindSafe(f));
    drop(depth);
    match result {
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
