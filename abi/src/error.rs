//! The one error value that crosses the plugin boundary.

use abi_stable::{std_types::RString, StableAbi};

/// What kind of failure a [`PluginError`] reports; decides whether callers retry.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The plugin's config string was rejected (at instantiation).
    InvalidConfig = 0,
    /// The input of a call was rejected (for example an assignor given a member whose
    /// subscription it cannot satisfy). Not retriable with the same input.
    InvalidInput = 1,
    /// A backend is unreachable or overloaded; the same call may succeed later.
    Unavailable = 2,
    /// The plugin failed in a way it did not expect; not retriable.
    Internal = 3,
    /// The plugin panicked. The SDK caught the panic; the host takes the instance out of
    /// service.
    Panicked = 4,
    /// The instance was closed (offset store) or taken out of service.
    Closed = 5,
}

impl ErrorKind {
    /// Whether retrying the same call later can succeed.
    pub const fn is_retriable(self) -> bool {
        matches!(self, ErrorKind::Unavailable)
    }
}

/// An error returned by a plugin call: a kind, an optional kind-specific code (a
/// ZooKeeper or database error code; 0 when none) and a human-readable message.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    /// Classification, see [`ErrorKind`].
    pub kind: ErrorKind,
    /// Backend-specific code, 0 when none.
    pub code: i32,
    /// What went wrong, for logs and operators.
    pub message: RString,
}

impl PluginError {
    /// An error of `kind` with `message` and no code.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        PluginError {
            kind,
            code: 0,
            message: RString::from(message.into()),
        }
    }

    /// Shorthand for [`ErrorKind::InvalidConfig`].
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidConfig, message)
    }

    /// Shorthand for [`ErrorKind::InvalidInput`].
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    /// Shorthand for [`ErrorKind::Unavailable`].
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// Shorthand for [`ErrorKind::Internal`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// Sets the backend-specific code.
    pub fn with_code(mut self, code: i32) -> Self {
        self.code = code;
        self
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.kind)?;
        if self.code != 0 {
            write!(f, " (code {})", self.code)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PluginError {}
