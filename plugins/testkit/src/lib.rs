//! # drover-plugin-testkit — Drover's plugin conformance suites as a library
//!
//! The same properties the broker's own plugins are held to, runnable against any
//! instance of the ABI's trait objects:
//!
//! - [`assignor::run`] against a [`drover_abi::assignor::AssignorArc`];
//! - [`offset_store::run`] against an opener of [`drover_abi::offset_store::OffsetStoreArc`]s
//!   (called again with the same config to check that acknowledged commits survive a
//!   reopen), and [`offset_store::crash`] for crash safety with a child process;
//! - [`authorizer::run`] against a [`drover_abi::authorizer::AuthorizerArc`] (the ACL
//!   properties only for an authorizer that keeps ACLs).
//!
//! Where the instance comes from is the caller's business: `drover plugins test FILE.so`
//! loads a `.so` through the broker's loader; an author's `cargo test` builds one
//! in-process from the plugin type with [`drover_abi::sdk::in_process`]. Each run
//! returns a [`Report`] with one verdict per property, named, which prints as
//! `PASS name` / `FAIL name: why` lines; [`Report::assert_passed`] turns it into a test
//! failure.
//!
//! This crate depends on `drover-abi` and `proptest` only, nothing of the host.

pub mod assignor;
pub mod authorizer;
mod check;
pub mod offset_store;
mod report;

pub use report::{Outcome, Report, Verdict, REPORT_ENV};
