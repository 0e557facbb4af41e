//! Authentication: SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the SCRAM credentials
//! it checks against (issue 29 items 3 and 4; docs/security.md, "SASL/SCRAM").
//!
//! One job per file:
//!
//! - [`mechanism`]: the mechanisms' names, KIP-554 type ids and iteration bounds;
//! - [`keys`]: RFC 5802's key derivations over RustCrypto's pbkdf2/hmac/sha2, with
//!   constant-time comparison (subtle);
//! - [`credentials`]: what is stored per user (salt, StoredKey, ServerKey, iterations —
//!   never a password) and its document format;
//! - [`kip554`]: DescribeUserScramCredentials and AlterUserScramCredentials as pure
//!   functions over a table;
//! - [`store`], [`file_store`], [`zk_store`], [`error`]: where the table lives (the data
//!   directory; a ZooKeeper node every broker watches) and how it changes;
//! - [`decoy`]: the same work and the same answers for unknown users;
//! - [`scram`], [`plain`]: the mechanisms' exchanges, over their client messages as the
//!   `drover-sasl-messages` crate parses them (the `sasl_messages` fuzz target's crate);
//! - [`rate_limit`]: failed authentications per client address;
//! - [`session`]: SaslHandshake/SaslAuthenticate as a sans-IO state machine per
//!   connection, what an unauthenticated connection may send, KIP-368's session
//!   lifetime.
//!
//! The credential APIs are served (server::handlers); the state machine is driven by
//! each connection of a SASL listener through its gate (server::sasl).

pub mod credentials;
pub mod decoy;
pub mod error;
pub mod file_store;
pub mod keys;
pub mod kip554;
pub mod mechanism;
pub mod plain;
pub mod rate_limit;
pub mod scram;
pub mod session;
pub mod store;
pub mod zk_store;

#[cfg(test)]
mod session_tests;
