//! # drover-host — the Drover broker host
//!
//! The binary `drover` is built from this crate:
//! - [`config`]: `drover.toml`, its defaults and validation;
//! - [`plugins`] and [`startup`]: the plugin loader (directory scan, per-file checks,
//!   content-addressed loading through `abi_stable`) and plugin instances;
//! - [`plugin_test`]: `drover plugins test`, the conformance suites against a plugin file;
//! - [`log`]: partition logs on disk (segments, indexes, retention, recovery);
//! - [`broker`]: shared state — topics, partitions, metrics;
//! - [`server`]: the Kafka wire server; [`admin`]: the admin HTTP API;
//! - [`serve`]: `drover serve`, wiring it all together;
//! - [`logging`]: the host's `tracing` subscriber.
//!
//! ZooKeeper integration and the group coordinator arrive with later issues (see
//! `../shared/DESIGN.md`).

pub mod admin;
pub mod admin_cli;
pub mod broker;
pub mod cluster;
pub mod config;
pub mod consume;
pub mod coordination;
pub mod demo;
pub mod log;
pub mod logging;
pub mod offsets;
pub mod plugin_test;
pub mod plugins;
pub mod serve;
pub mod server;
pub mod startup;
