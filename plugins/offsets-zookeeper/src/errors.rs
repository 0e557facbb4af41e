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

use std::time::Duration;

use drover_abi::{ErrorKind, PluginError};
use zookeeper_client::Error as ZkError;

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

/// What the store knows to put in an error message: the ensemble and the timeout.
#[derive(Debug, Clone)]
pub struct ErrorContext {
    /// The configured `connect` string.
    pub connect: String,
    /// The configured chroot.
    pub chroot: String,
    /// The configured request timeout.
    pub request_timeout: Duration,
}

impl ErrorContext {
    /// The [`PluginError`] for ZooKeeper error `err` that happened while doing `what`
    /// (for example "commit", "fetch offsets of group `g`").
    pub fn from_zk(&self, what: &str, err: ZkError) -> PluginError {
        let connect = &self.connect;
        let code = zk_code(&err);
        let message = match &err {
            ZkError::Timeout => format!(
                "offset store `zookeeper`: {what}: no answer from ZooKeeper at {connect} within \
                 {} ms (request_timeout_ms); ZooKeeper is down or unreachable",
                self.request_timeout.as_millis()
            ),
            ZkError::NoAuth | ZkError::AuthFailed => format!(
                "offset store `zookeeper`: {what}: ZooKeeper at {connect} refused access ({err}); \
                 hint: the ACLs of {} and below must let the broker create, read, write and \
                 delete nodes",
                self.chroot
            ),
            ZkError::QuotaExceeded => format!(
                "offset store `zookeeper`: {what}: ZooKeeper at {connect}: quota exceeded below \
                 {} ({err})",
                self.chroot
            ),
            e if is_unavailable(e) => format!(
                "offset store `zookeeper`: {what}: ZooKeeper at {connect} is unavailable ({err})"
            ),
            _ => format!("offset store `zookeeper`: {what}: ZooKeeper at {connect}: {err}"),
        };
        let kind = if is_unavailable(&err) {
            ErrorKind::Unavailable
        } else {
            ErrorKind::Internal
        };
        PluginError::new(kind, message).with_code(code)
    }

    /// A node value that does not decode: data this store cannot read.
    pub fn bad_value(&self, path: &str, why: &str) -> PluginError {
        PluginError::internal(format!(
            "offset store `zookeeper`: node {path} in ZooKeeper at {}: {why}",
            self.connect
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
}
