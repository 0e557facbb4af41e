//! Maps ZooKeeper's errors onto the ABI's [`PluginError`] kinds.
//!
//! - No answer within `request_timeout_ms`, connection loss (also when the client
//!   reports it as an I/O error on the socket), an expired or moved session, no
//!   reachable server, a throttled request, a read-only server, a closed client:
//!   `Unavailable` (retriable; the store reconnects by itself, with a new session
//!   when the old one expired).
//! - Permission problems (`NoAuth`, `AuthFailed`) and an exceeded quota: `Unavailable`
//!   too (the operator can fix them without restarting the broker), with a hint.
//! - Anything else (a malformed request, an unexpected answer): `Internal`.
//!
//! [`PluginError::code`] carries ZooKeeper's error code when there is one (for example
//! −4 connection loss, −101 no node, −112 session expired), as in the ABI's `ZkSession`.
//!
//! Over the broker's session ([`crate::config::SessionSource::Broker`]) errors come from
//! the host as `PluginError`s with ZooKeeper's code; [`ErrorContext::from_broker`]
//! applies the same rules to them by code, keeping the host's message.

use std::time::Duration;

use drover_abi::{ErrorKind, PluginError};
use zookeeper_client::Error as ZkError;

use crate::config::SessionSource;

/// ZooKeeper's numeric code of `err` (0 when it has none).
pub fn zk_code(err: &ZkError) -> i32 {
    match err {
        ZkError::ConnectionLoss => -4,
        ZkError::MarshallingError => -5,
        ZkError::Unimplemented => -6,
        ZkError::Timeout => -7,
        ZkError::BadArguments(_) => -8,
        ZkError::NoNode => -101,
        ZkError::NoAuth => -102,
        ZkError::BadVersion => -103,
        ZkError::NoChildrenForEphemerals => -108,
        ZkError::NodeExists => -110,
        ZkError::NotEmpty => -111,
        ZkError::SessionExpired => -112,
        ZkError::InvalidAcl => -114,
        ZkError::AuthFailed => -115,
        ZkError::SessionMoved => -118,
        ZkError::NotReadOnly => -119,
        ZkError::NoWatcher => -121,
        ZkError::ReconfigDisabled => -123,
        ZkError::QuotaExceeded => -125,
        ZkError::Throttled => -127,
        ZkError::UnexpectedErrorCode(code) => *code,
        _ => 0,
    }
}

/// Whether `err` means ZooKeeper cannot be reached or cannot serve us right now.
pub fn is_unavailable(err: &ZkError) -> bool {
    matches!(
        err,
        ZkError::ConnectionLoss
            | ZkError::Timeout
            | ZkError::NoHosts
            | ZkError::SessionExpired
            | ZkError::SessionMoved
            | ZkError::ClientClosed
            | ZkError::Throttled
            | ZkError::NotReadOnly
            | ZkError::NoAuth
            | ZkError::AuthFailed
            | ZkError::QuotaExceeded
            // The client reports connection-level failures (an I/O error such as a broken
            // pipe, no response within the connection timeout) as custom errors.
            | ZkError::Custom(_)
    )
}

/// Whether ZooKeeper error code `code` (as carried by [`PluginError::code`]) means the
/// same as [`is_unavailable`].
pub fn code_is_unavailable(code: i32) -> bool {
    // ConnectionLoss, OperationTimeout, SessionExpired, SessionMoved, NotReadOnly,
    // NoAuth, AuthFailed, QuotaExceeded, Throttled.
    matches!(
        code,
        -4 | -7 | -112 | -118 | -119 | -102 | -115 | -125 | -127
    )
}

/// What the store knows to put in an error message: the session, the ensemble and the
/// timeout.
#[derive(Debug, Clone)]
pub struct ErrorContext {
    /// Which session the store uses.
    pub session: SessionSource,
    /// The configured `connect` string (unused over the broker's session).
    pub connect: String,
    /// The configured chroot.
    pub chroot: String,
    /// The configured request timeout.
    pub request_timeout: Duration,
}

impl ErrorContext {
    /// The context of a store opened with `config`.
    pub fn for_config(config: &crate::config::Config) -> ErrorContext {
        ErrorContext {
            session: config.session,
            connect: config.connect.clone(),
            chroot: config.chroot.clone(),
            request_timeout: config.request_timeout,
        }
    }

    /// Where requests go, for messages: `ZooKeeper at <connect>` or the broker's session.
    fn server(&self) -> String {
        match self.session {
            SessionSource::Own => format!("ZooKeeper at {}", self.connect),
            SessionSource::Broker => "ZooKeeper (the broker's session)".to_owned(),
        }
    }

    /// The store's chroot, for messages.
    fn root(&self) -> String {
        match self.session {
            SessionSource::Own => self.chroot.clone(),
            SessionSource::Broker => format!("{} (below the broker's chroot)", self.chroot),
        }
    }

    /// The access hint of permission errors.
    fn acl_hint(&self) -> String {
        format!(
            "hint: the ACLs of {} and below must let the broker create, read, write and \
             delete nodes",
            self.root()
        )
    }

    /// The [`PluginError`] for ZooKeeper error `err` that happened while doing `what`
    /// (for example "commit", "fetch offsets of group `g`").
    pub fn from_zk(&self, what: &str, err: ZkError) -> PluginError {
        let server = self.server();
        let code = zk_code(&err);
        let message = match &err {
            ZkError::Timeout => match self.session {
                SessionSource::Own => format!(
                    "offset store `zookeeper`: {what}: no answer from {server} within {} ms \
                     (request_timeout_ms); ZooKeeper is down or unreachable",
                    self.request_timeout.as_millis()
                ),
                SessionSource::Broker => format!(
                    "offset store `zookeeper`: {what}: no answer from {server} in time; \
                     ZooKeeper is down or unreachable"
                ),
            },
            ZkError::NoAuth | ZkError::AuthFailed => format!(
                "offset store `zookeeper`: {what}: {server} refused access ({err}); {}",
                self.acl_hint()
            ),
            ZkError::QuotaExceeded => format!(
                "offset store `zookeeper`: {what}: {server}: quota exceeded below {} ({err})",
                self.root()
            ),
            e if is_unavailable(e) => {
                format!("offset store `zookeeper`: {what}: {server} is unavailable ({err})")
            }
            _ => format!("offset store `zookeeper`: {what}: {server}: {err}"),
        };
        let kind = if is_unavailable(&err) {
            ErrorKind::Unavailable
        } else {
            ErrorKind::Internal
        };
        PluginError::new(kind, message).with_code(code)
    }

    /// The [`PluginError`] for an error the broker's session returned while doing
    /// `what`: `Unavailable` when the host says so or its ZooKeeper code is one of
    /// [`is_unavailable`]'s, else `Internal`; the host's message and code are kept.
    pub fn from_broker(&self, what: &str, err: &PluginError) -> PluginError {
        let unavailable = err.kind == ErrorKind::Unavailable || code_is_unavailable(err.code);
        let kind = if unavailable {
            ErrorKind::Unavailable
        } else {
            ErrorKind::Internal
        };
        let hint = if matches!(err.code, -102 | -115) {
            format!("; {}", self.acl_hint())
        } else {
            String::new()
        };
        PluginError::new(
            kind,
            format!(
                "offset store `zookeeper`: {what}: {}: {}{hint}",
                self.server(),
                err.message
            ),
        )
        .with_code(err.code)
    }

    /// A node value that does not decode: data this store cannot read.
    pub fn bad_value(&self, path: &str, why: &str) -> PluginError {
        PluginError::internal(format!(
            "offset store `zookeeper`: node {path} in {}: {why}",
            self.server()
        ))
    }
}

/// The error every call returns after [`crate::store::Store::close`].
pub fn closed() -> PluginError {
    PluginError::new(ErrorKind::Closed, "offset store `zookeeper` is closed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ErrorContext {
        ErrorContext {
            session: SessionSource::Own,
            connect: "127.0.0.1:2181".into(),
            chroot: "/drover".into(),
            request_timeout: Duration::from_millis(1500),
        }
    }

    #[test]
    fn kinds_and_codes() {
        let e = ctx().from_zk("commit", ZkError::ConnectionLoss);
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert_eq!(e.code, -4);
        assert!(e.message.contains("commit"), "{e}");
        assert!(e.message.contains("127.0.0.1:2181"), "{e}");

        let e = ctx().from_zk("scan", ZkError::Timeout);
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(e.message.contains("1500 ms"), "{e}");

        let e = ctx().from_zk("x", ZkError::SessionExpired);
        assert_eq!((e.kind, e.code), (ErrorKind::Unavailable, -112));

        let e = ctx().from_zk("x", ZkError::NoAuth);
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(e.message.contains("/drover"), "{e}");

        let e = ctx().from_zk("x", ZkError::MarshallingError);
        assert_eq!((e.kind, e.code), (ErrorKind::Internal, -5));

        assert_eq!(closed().kind, ErrorKind::Closed);
    }

    #[test]
    fn errors_of_the_broker_session() {
        let ctx = ErrorContext {
            session: SessionSource::Broker,
            ..ctx()
        };
        // The host reports a missing node as InvalidInput: for the store it is Internal.
        let e = ctx.from_broker(
            "commit",
            &PluginError::invalid_input("ZooKeeper: node not exists").with_code(-101),
        );
        assert_eq!((e.kind, e.code), (ErrorKind::Internal, -101));
        assert!(e.message.contains("the broker's session"), "{e}");
        assert!(e.message.contains("node not exists"), "{e}");
        let e = ctx.from_broker(
            "scan",
            &PluginError::unavailable("ZooKeeper: not connected").with_code(-4),
        );
        assert_eq!((e.kind, e.code), (ErrorKind::Unavailable, -4));
        // Permission errors are retriable, with a hint naming the root.
        let e = ctx.from_broker(
            "x",
            &PluginError::invalid_input("ZooKeeper: not authorized").with_code(-102),
        );
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(
            e.message.contains("/drover (below the broker's chroot)"),
            "{e}"
        );
        let e = ctx.from_zk("x", ZkError::Timeout);
        assert!(!e.message.contains("127.0.0.1"), "{e}");
    }
}
