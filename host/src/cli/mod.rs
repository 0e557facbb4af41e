//! The parts of the `drover` binary that are clients of a broker, not the broker:
//! `drover demo`, `drover consume`, and the admin API's command-line client (`drover
//! admin ...`, `drover plugins rescan`; `drover admin users` and `drover admin acls` speak
//! the Kafka API). They live in the binary's own module tree, so
//! the `drover_host` library (the broker) does not carry them; their clients (`rskafka`,
//! `drover-client`) are still dependencies of the package, which one `Cargo.toml` cannot
//! limit to the binary.

pub mod acls;
pub mod admin;
pub mod consume;
pub mod demo;
pub mod users;
