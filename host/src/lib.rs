//! # drover-host — the Drover broker host
//!
//! The binary `drover` is built from this crate (docs/design.md has the map):
//! - [`config`]: `drover.toml`, its defaults and validation;
//! - [`plugins`], [`startup`] and [`rescan`]: the plugin loader (directory scan,
//!   per-file checks, content-addressed loading through `abi_stable`), the live plugin
//!   directory, plugin instances behind handles — the `drover-plugin-loader` crate,
//!   re-exported — and the broker's side of startup and of a rescan;
//! - [`plugin_test`]: `drover plugins test`, the conformance suites against a plugin file;
//! - [`log`]: partition logs on disk (segments, indexes, record validation, retention,
//!   recovery) — the `drover-log` crate, re-exported;
//! - [`broker`]: shared state, grouped so a handler is handed the part it uses —
//!   configuration, identity (node, cluster id, membership), topics and their configs,
//!   producers (producer ids, the transaction coordinator), plugins, groups (the
//!   coordinator's client, the active offset store); produce rates and auto-creation
//!   limits;
//! - [`address_buckets`]: token buckets per client address, behind the per-client
//!   rate bounds (new transactional ids, failed authentications);
//! - [`secret_file`]: one-line secrets read from files only their owner may read
//!   (the admin token, the ZooKeeper digest);
//! - [`metrics`]: the Prometheus metrics every part counts into (the broker holds them;
//!   the coordinator driver and the assignor budgets are handed them);
//! - [`clock`]: the wall clock (Kafka timestamps) and the monotonic epoch (coordinator
//!   time); local deadlines read `Instant::now()` where they are kept;
//! - [`server`]: the Kafka wire server (connection, frame, request, handler); request
//!   decoding and the table of served APIs and versions are the `drover-kafka-wire`
//!   crate, re-exported in `server::dispatch`;
//! - [`coordination`]: the host side of the coordinator plugin — its driver, the
//!   connection table of the coordinator contract, the offset-store worker;
//! - [`txn`]: the transaction coordinator (transactional ids, their transactions,
//!   markers and transactional offset commits; durable standalone and in ZooKeeper);
//! - [`offsets`]: the active offset store, retention, and hot swap (offsets and
//!   share-group state);
//! - [`share`]: share groups' delivery (KIP-932) — share-partitions beside the logs,
//!   share sessions, the acquisition-lock timer;
//! - [`cluster`]: cluster mode through ZooKeeper (membership, coordinator slots, topic
//!   metadata);
//! - [`admin`]: the admin HTTP API;
//! - [`auth`]: SASL (PLAIN, SCRAM-SHA-256/512) as a sans-IO state machine per
//!   connection, and the SCRAM credential store (data directory, or ZooKeeper in
//!   cluster mode) behind DescribeUserScramCredentials and AlterUserScramCredentials;
//! - [`authz`]: authorization — the configured authorizer plugin (swapped by rescans),
//!   each request's checks built from its connection, failing closed, and the ACL
//!   management calls run off the request path within a budget;
//! - [`serve`]: `drover serve`, wiring it all together;
//! - [`logging`]: the host's `tracing` subscriber and rate-limited warnings (the
//!   `drover-rate-limit` crate, re-exported as `logging::rate_limit`, with
//!   [`warn_limited!`] and [`info_limited!`] at this crate's root).
//!
//! The binary's client commands (`drover demo`, `drover consume`, `drover admin`,
//! `drover plugins rescan`) live in the binary's own module tree (`src/cli/`), not here.

pub mod address_buckets;
pub mod admin;
pub mod auth;
pub mod authz;
pub mod broker;
pub use drover_log::clock;
pub mod cluster;
pub mod config;
pub mod coordination;
pub use drover_log as log;
pub mod logging;
pub use drover_rate_limit::{info_limited, warn_limited};
pub mod metrics;
pub mod offsets;
pub mod plugin_test;
pub use drover_plugin_loader as plugins;
pub mod rescan;
pub mod secret_file;
pub mod serve;
pub mod server;
pub mod share;
pub mod startup;
pub mod txn;

#[cfg(test)]
mod docs_drift;
