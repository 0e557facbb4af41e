//! The SASL client messages Drover's broker parses before it checks anything (issue 29;
//! docs/security.md, "SASL/SCRAM"): SCRAM's client-first and client-final messages
//! ([`scram`], RFC 5802 §7) and PLAIN's message ([`plain`], RFC 4616). Pure functions
//! over untrusted bytes, each bounded, giving a value or an error and never a panic;
//! the broker's `auth` module checks what they carry against the stored credentials.
//!
//! A crate of its own so that the `sasl_messages` fuzz target (fuzz/) builds against it
//! without the broker, as the other decoders' targets do.

pub mod plain;
pub mod scram;
