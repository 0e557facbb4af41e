//! The coordinator's integration tests, one binary for all of them (each was its own
//! binary, and each compiled and linked the harness again). Every module drives one
//! coordinator on virtual time through its public API (`handle(now, input)`), with the
//! fake consumers and store of [`common`] and the Kafka clients of [`kafka`].
//!
//! Run one area with a filter: `cargo test -p drover-coordinator --test all slots::`.
//! `scale_costs.rs` stays a binary of its own: it installs a counting global allocator.

mod common;
mod kafka;

mod kafka_groups;
mod partition_stats;
mod robustness;
mod scenarios;
mod share_groups;
mod simulation;
mod slots;
mod txn_offsets;
mod txn_simulation;
