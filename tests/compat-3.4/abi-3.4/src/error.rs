//! The one error value that crosses the plugin boundary.

use abi_stable::{std_types::RString, StableAbi};

/// What kind of failure a [`PluginError`] reports; decides whether callers retry.
///
/// An open set, encoded as one byte: a later ABI minor may add kinds, so code that
/// matches on it keeps a wildcard arm (the compiler insists) and treats an unknown kind
/// as not retriable. The names are associated constants, used like enum variants:
/// `ErrorKind::Unavailable`, `matches!(k, ErrorKind::Closed)`.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorKind(u8);

#[allow(non_upper_case_globals)]
impl ErrorKind {
    /// The plugin's config string was rejected (at instantiation).
    pub const InvalidConfig: ErrorKind = ErrorKind(0);
    /// The input of a call was rejected (for example an assignor given a member whose
    /// subscription it cannot satisfy). Not retriable with the same input.
    pub const InvalidInput: ErrorKind = ErrorKind(1);
    /// A backend is unreachable or overloaded; the same call may succeed later.
    pub const Unavailable: ErrorKind = ErrorKind(2);
    /// The plugin failed in a way it did not expect; not retriable.
    pub const Internal: ErrorKind = ErrorKind(3);
    /// The plugin panicked. The SDK caught the panic; the host takes the instance out of
    /// service.
    pub const Panicked: ErrorKind = ErrorKind(4);
    /// The instance was closed (offset store) or taken out of service.
    pub const Closed: ErrorKind = ErrorKind(5);
    /// The plugin does not implement an optional operation (one added in a later ABI
    /// minor than it was built against, or one it chose not to offer). Not retriable;
    /// callers use their fallback.
    pub const Unsupported: ErrorKind = ErrorKind(6);

    const NAMES: [&'static str; 7] = [
        "InvalidConfig",
        "InvalidInput",
        "Unavailable",
        "Internal",
        "Panicked",
        "Closed",
        "Unsupported",
    ];

    /// Whether retrying the same call later can succeed. Unknown kinds are not retriable.
    pub const fn is_retriable(self) -> bool {
        self.0 == Self::Unavailable.0
    }

    /// The kind's name (`Unavailable`), or `None` for a kind added by a later ABI minor
    /// than this build knows.
    pub fn name(self) -> Option<&'static str> {
        Self::NAMES.get(usize::from(self.0)).copied()
    }

    /// The raw code, for logs and metrics.
    pub const fn code(self) -> u8 {
        self.0
    }
}

impl std::fmt::Debug for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "Unknown({})", self.0),
        }
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

    /// Shorthand for [`ErrorKind::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_print_and_are_not_retriable() {
        assert_eq!(format!("{:?}", ErrorKind::Unavailable), "Unavailable");
        assert!(ErrorKind::Unavailable.is_retriable());
        let future = ErrorKind(200);
        assert_eq!(format!("{future:?}"), "Unknown(200)");
        assert_eq!(future.name(), None);
        assert!(!future.is_retriable());
        assert!(matches!(ErrorKind::Closed, ErrorKind::Closed));
    }
}
