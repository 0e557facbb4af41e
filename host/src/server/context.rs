//! What a connection carries beside its bytes: the listener it came in on
//! ([`ListenerHandle`], handed from accepting to the connection) and what each of its
//! requests is handled with ([`ConnContext`]: the listener's name and the client's
//! principal). A leaf of the server's modules, so that accepting, the connection, the
//! dispatcher and the handlers can all name these without naming each other.

use std::sync::Arc;

use super::{principal::Principal, tls::TlsListener};
use crate::config::listeners::ListenerName;

/// A listener as a connection sees it: its name, and its TLS material when it has TLS.
#[derive(Debug, Clone)]
pub struct ListenerHandle {
    /// The listener's name.
    pub name: ListenerName,
    /// Its TLS material (SSL and SASL_SSL listeners), reloadable.
    pub tls: Option<Arc<TlsListener>>,
    /// Whether clients authenticate with SASL on it (SASL_PLAINTEXT, SASL_SSL):
    /// its connections go through a SASL gate (server/sasl.rs).
    pub sasl: bool,
}

impl ListenerHandle {
    /// Kafka's name of the listener's security protocol.
    pub fn security_protocol(&self) -> &'static str {
        match (self.tls.is_some(), self.sasl) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

/// What a request knows of its connection, handed to the handlers beside it.
#[derive(Debug, Clone)]
pub struct ConnContext {
    /// The listener the connection came in on.
    pub listener: ListenerName,
    /// Who the client is: the SASL user once authenticated on a SASL listener (set
    /// again after each re-authentication), from its certificate on an mTLS listener,
    /// else `User:ANONYMOUS` (server/principal.rs). What the authorizer decides for.
    pub principal: Principal,
    /// Kafka's name of the listener's security protocol (`SASL_SSL`).
    pub security_protocol: &'static str,
    /// The SASL mechanism the connection authenticated with, once it has.
    pub sasl_mechanism: Option<&'static str>,
    /// The connection's id (the coordinator knows it by this id; share sessions live
    /// on it).
    pub conn: super::conn_id::ConnId,
}

impl ConnContext {
    /// A connection on the default PLAINTEXT listener, anonymous (tests, tools).
    pub fn plaintext() -> ConnContext {
        ConnContext {
            listener: ListenerName::plaintext(),
            principal: Principal::anonymous(),
            security_protocol: "PLAINTEXT",
            sasl_mechanism: None,
            conn: super::conn_id::next_conn_id(),
        }
    }

    /// The authorizer's context for a request with `head` from `peer` on this
    /// connection.
    pub fn authz_context(
        &self,
        peer: std::net::IpAddr,
        head: &crate::authz::context::RequestHead<'_>,
    ) -> crate::authz::RequestContext {
        let principal = self.principal.to_string();
        crate::authz::context::build(
            &crate::authz::context::Caller {
                principal: &principal,
                listener: self.listener.as_str(),
                security_protocol: self.security_protocol,
                sasl_mechanism: self.sasl_mechanism,
                client_address: peer,
            },
            head,
        )
    }
}
