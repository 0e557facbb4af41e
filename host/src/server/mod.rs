//! The Kafka wire server, layered like mini-redis:
//! [`listener`] (accept, bounded connections, shutdown) → [`connection`] (one task per
//! client: frames in, responses out, in order) → [`frame`] (size-prefixed frames,
//! bounded) → [`dispatch`] (request header, version checks, decoding, the handler
//! table) → [`handlers`] (one module per API). Beside them: [`admission`] (who gets a
//! connection slot) and [`budget`] (bytes of queued responses), [`conn_id`] (connection
//! ids) and [`queue`] (a connection's outgoing queue and the handle the coordinator
//! driver fills it through), [`reply`] (what a request turns into: a handler's reply,
//! the connection's outcome), [`api_name`] (API names in metrics), [`trim`] (freed
//! memory back to the OS). Listeners with Kafka's names and security protocols are
//! configured in [`crate::config::listeners`] and accepted on in [`listener`]; TLS is
//! [`tls`], who a client is [`principal`], and what a connection carries beside its
//! bytes (its listener, its principal) [`context`]; on SASL listeners each connection's
//! frames pass its SASL gate first, [`sasl`]. With an authorizer, the group APIs the
//! coordinator serves are checked by the host before the plugin sees them,
//! [`group_authz`], and so are the native protocol's, [`native_authz`].

pub mod admission;
pub mod api_name;
pub mod budget;
pub mod conn_id;
pub mod connection;
pub mod context;
pub mod dispatch;
pub mod frame;
pub mod group_authz;
pub mod handlers;
pub mod listener;
pub mod native_authz;
pub mod principal;
pub mod queue;
pub mod reply;
pub mod sasl;
pub mod tls;
pub mod trim;

pub use listener::serve;
