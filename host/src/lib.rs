//! # drover-host — the Drover broker host
//!
//! The binary `drover` is built from this crate. So far it holds:
//! - [`config`]: `drover.toml`, its defaults and validation;
//! - [`plugins`]: the plugin loader (directory scan, per-file checks, content-addressed
//!   loading through `abi_stable`) and the host-side handles of plugin instances;
//! - [`logging`]: the host's `tracing` subscriber.
//!
//! The network server, partition logs, ZooKeeper integration and admin API arrive with
//! later issues (see `../shared/DESIGN.md`).

pub mod config;
pub mod logging;
pub mod plugins;
pub mod startup;
