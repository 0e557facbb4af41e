//! Maps PostgreSQL failures onto the ABI's [`PluginError`] kinds.
//!
//! - The server cannot be reached, closed the connection, is starting up or shutting
//!   down, is out of resources (too many connections, disk full), cancelled a statement
//!   (`statement_timeout`), hit a deadlock or serialization failure (after the store's
//!   own retries), is a read-only standby, or gave no answer within the client-side
//!   deadline: `Unavailable` — the same call can succeed later.
//! - At open, mistakes only the operator can fix are `InvalidConfig`: authentication
//!   failed (`28xxx`), the database does not exist (`3D000`), permission denied
//!   (`42501`), a table with another layout, a database whose encoding is not UTF-8.
//!   After open the same failures (a password rotated, a grant revoked) are
//!   `Unavailable`: the broker keeps retrying until the operator fixes them.
//! - Values PostgreSQL cannot hold (data exceptions `22xxx`, program limits `54xxx`
//!   such as a key longer than a B-tree entry) are `InvalidInput`.
//! - Anything else (the table dropped under the store, a protocol error) is `Internal`.
//!
//! Messages carry PostgreSQL's own text and SQLSTATE, and a hint where one helps. The OS
//! error number of a failed connection, when there is one, goes into
//! [`PluginError::code`].

use std::{error::Error as _, time::Duration};

use drover_abi::{ErrorKind, PluginError};
use tokio_postgres::error::{DbError, SqlState};

/// When an error happened: opening the store or serving a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Inside `open`: configuration mistakes are `InvalidConfig`.
    Open,
    /// Any later call.
    Call,
}

/// How the store may react to a failed attempt, besides reporting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The connection is unusable (closed, broken, timed out): discard it, and retry the
    /// call once on a new connection if it was a reused one.
    Reconnect,
    /// A deadlock or serialization failure: the transaction was rolled back and may
    /// simply be run again.
    Transaction,
    /// Report the error.
    No,
}

/// A failed database operation, before it is reported.
#[derive(Debug)]
pub struct PgFailure {
    /// The client's error, or `None` for a client-side deadline.
    pub error: Option<tokio_postgres::Error>,
    /// For a deadline: how long the store waited.
    pub waited: Duration,
}

impl From<tokio_postgres::Error> for PgFailure {
    fn from(error: tokio_postgres::Error) -> Self {
        PgFailure {
            error: Some(error),
            waited: Duration::ZERO,
        }
    }
}

impl PgFailure {
    /// A client-side deadline after `waited`.
    pub fn timed_out(waited: Duration) -> Self {
        PgFailure {
            error: None,
            waited,
        }
    }

    /// What the store may do about it.
    pub fn retry(&self) -> Retry {
        let Some(error) = &self.error else {
            return Retry::Reconnect;
        };
        match error.as_db_error() {
            None => Retry::Reconnect,
            Some(db) => {
                let code = db.code();
                if *code == SqlState::T_R_DEADLOCK_DETECTED
                    || *code == SqlState::T_R_SERIALIZATION_FAILURE
                {
                    Retry::Transaction
                } else if connection_lost(code) {
                    Retry::Reconnect
                } else {
                    Retry::No
                }
            }
        }
    }

    /// Whether the connection it happened on must be discarded.
    pub fn breaks_connection(&self) -> bool {
        self.retry() == Retry::Reconnect
    }

    /// The error to report for this failure while doing `context` (for example
    /// "commit", "fetch offsets of group `g`") against `target`.
    pub fn report(&self, phase: Phase, context: &str, target: &str) -> PluginError {
        match &self.error {
            None => PluginError::unavailable(format!(
                "offset store `postgres`: {context}: no answer from PostgreSQL at {target} \
                 within {} ms; the connection was dropped",
                self.waited.as_millis()
            )),
            Some(error) => from_pg(phase, context, target, error),
        }
    }
}

/// Server errors after which the session is gone.
fn connection_lost(code: &SqlState) -> bool {
    code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::IDLE_SESSION_TIMEOUT
}

/// The [`PluginError`] for `error`, which happened while doing `context` in `phase`.
pub fn from_pg(
    phase: Phase,
    context: &str,
    target: &str,
    error: &tokio_postgres::Error,
) -> PluginError {
    if let Some(db) = error.as_db_error() {
        return from_db(phase, context, target, db);
    }
    // Client-side failures: no server error. The kinds are told apart by the error's
    // text, the only public view of tokio-postgres' error kind.
    let text = describe(error);
    let kind_text = error.to_string();
    let config_mistake = matches!(
        kind_text.as_str(),
        "invalid configuration" | "invalid connection string" | "authentication error"
    );
    if config_mistake {
        let kind = match phase {
            Phase::Open => ErrorKind::InvalidConfig,
            Phase::Call => ErrorKind::Unavailable,
        };
        return PluginError::new(
            kind,
            format!(
                "offset store `postgres`: {context}: {text} (server {target}); hint: check \
                 `user` and `password` (or the credentials in `url`) in \
                 [plugins.config.postgres]"
            ),
        );
    }
    let io = io_error(error);
    let code = io.and_then(std::io::Error::raw_os_error).unwrap_or(0);
    let hint = match io.map(std::io::Error::kind) {
        Some(std::io::ErrorKind::ConnectionRefused) => {
            "; hint: is PostgreSQL running and accepting TCP connections there?"
        }
        _ => "",
    };
    let kind = if kind_text.starts_with("error deserializing")
        || kind_text.starts_with("error serializing")
        || kind_text.starts_with("invalid column")
        || kind_text.starts_with("query returned an unexpected")
    {
        ErrorKind::Internal
    } else {
        ErrorKind::Unavailable
    };
    PluginError::new(
        kind,
        format!("offset store `postgres`: {context}: {text} (server {target}){hint}"),
    )
    .with_code(code)
}

/// The [`PluginError`] for a server error.
fn from_db(phase: Phase, context: &str, target: &str, db: &DbError) -> PluginError {
    let code = db.code();
    let class = &code.code()[..2];
    let at_open = phase == Phase::Open;
    let (kind, hint) = if class == "28" {
        (
            if at_open {
                ErrorKind::InvalidConfig
            } else {
                ErrorKind::Unavailable
            },
            "check `user` and `password` (or the credentials in `url`) in \
             [plugins.config.postgres], and the server's pg_hba.conf",
        )
    } else if *code == SqlState::INVALID_CATALOG_NAME {
        (
            if at_open {
                ErrorKind::InvalidConfig
            } else {
                ErrorKind::Unavailable
            },
            "create the database (CREATE DATABASE ...) or fix the database name in `url` \
             or `dbname`",
        )
    } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
        (
            if at_open {
                ErrorKind::InvalidConfig
            } else {
                ErrorKind::Unavailable
            },
            "grant the user the privileges docs/operations.md lists for plugin `postgres`, \
             or create the table beforehand",
        )
    } else if class == "08"
        || class == "53"
        || class == "40"
        || class == "58"
        || class == "57"
        || *code == SqlState::LOCK_NOT_AVAILABLE
        || *code == SqlState::OBJECT_IN_USE
        || *code == SqlState::READ_ONLY_SQL_TRANSACTION
    {
        (ErrorKind::Unavailable, "")
    } else if class == "22" || class == "54" {
        (ErrorKind::InvalidInput, "")
    } else if *code == SqlState::UNDEFINED_TABLE && !at_open {
        (
            ErrorKind::Internal,
            "the offsets table was dropped while the store was open; reopen the store \
             (it creates the table again) and restore the offsets",
        )
    } else {
        (ErrorKind::Internal, "")
    };
    let mut message = format!(
        "offset store `postgres`: {context}: {} (SQLSTATE {}, server {target})",
        db.message(),
        code.code()
    );
    if let Some(detail) = db.detail() {
        message.push_str("; detail: ");
        message.push_str(detail);
    }
    if !hint.is_empty() {
        message.push_str("; hint: ");
        message.push_str(hint);
    } else if let Some(server_hint) = db.hint() {
        message.push_str("; hint: ");
        message.push_str(server_hint);
    }
    PluginError::new(kind, message)
}

/// The error and its causes, joined with `: ` (`error connecting to server: Connection
/// refused (os error 111)`).
fn describe(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The I/O error somewhere in `error`'s causes.
fn io_error(error: &tokio_postgres::Error) -> Option<&std::io::Error> {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = cause.source();
    }
    None
}

/// The error every call returns after [`crate::store::Store::close`].
pub fn closed() -> PluginError {
    PluginError::new(ErrorKind::Closed, "offset store `postgres` is closed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_unavailable_and_reconnects() {
        let f = PgFailure::timed_out(Duration::from_millis(1500));
        assert_eq!(f.retry(), Retry::Reconnect);
        assert!(f.breaks_connection());
        let e = f.report(Phase::Call, "commit", "h:5432, database `d`, user `u`");
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(e.message.contains("within 1500 ms"), "{e}");
        assert!(e.message.contains("commit"), "{e}");
        assert!(e.message.contains("h:5432"), "{e}");
    }

    #[test]
    fn closed_is_closed() {
        assert_eq!(closed().kind, ErrorKind::Closed);
    }
}
