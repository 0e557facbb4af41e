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

/// What a request knows of its connection, handed to the handlers beside it.
#[derive(Debug, Clone)]
pub struct ConnContext {
    /// The listener the connection came in on.
    pub listener: ListenerName,
    /// Who the client is: the SASL user once authenticated on a SASL listener (set
    /// again after each re-authentication), from its certificate on an mTLS listener,
    /// else `User:ANONYMOUS` (server/principal.rs). Kept for the authorizer (issue 23).
    pub principal: Principal,
}

impl ConnContext {
    /// A connection on the default PLAINTEXT listener, anonymous (tests, tools).
    pub fn plaintext() -> ConnContext {
        ConnContext {
            listener: ListenerName::plaintext(),
            principal: Principal::anonymous(),
        }
    }
}
