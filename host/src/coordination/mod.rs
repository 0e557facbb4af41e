//! The host side of the coordinator plugin (docs/design.md, "The coordinator core is
//! sans-IO"): thin adapters around the loaded coordinator.
//!
//! - [`driver`]: one OS thread owns the coordinator instance (any
//!   [`driver::Coordinator`]: the loaded plugin in production, a scripted one in its
//!   unit tests). Connections, the topic registry and the offset-store worker feed it
//!   messages through one bounded channel; it calls `handle(now, input)`, executes the outputs (frames to
//!   connections, closes, offset-store operations, metrics) and delivers `TimerFired`
//!   at the coordinator's `poll_timeout`.
//! - [`answer_errors`]: the error codes in the coordinator's answers, counted in the
//!   request metrics as Kafka counts them.
//! - [`conns`]: the driver's view of the connections that spoke a native API: the
//!   response slots that keep responses in request order, and the queue on which it
//!   pushes the coordinator's own requests (Heartbeat, StopFetcher, StartFetcher) on
//!   coordinator channels.
//! - [`store_worker`]: executes offset-store operations in batches on its own thread
//!   (all commits of a batch in one store transaction) and feeds the results back.
//! - [`topic_deletion`]: removes the committed offsets of topics this broker's view
//!   lost (deleted, or re-created with a new id), in the store worker's order.
//! - [`kafka_admin`]: the host as a Kafka client of its coordinator: which Kafka group
//!   APIs it serves (an ApiVersions probe at startup), and ListGroups/DescribeGroups
//!   for the admin API.
//! - [`partition_stats`]: the partition table for assignors (leaders, racks, log
//!   offsets, produce rates), sent periodically to coordinators of ABI 3.3 or later.
//! - [`mod@start`]: starts the configured coordinator plugin with the loaded assignors and
//!   the topic metadata, and the threads above.
//!
//! Time given to the coordinator is milliseconds since the driver started, on the
//! monotonic clock ([`crate::clock::Epoch`]).

pub mod answer_errors;
pub mod assignor_budget;
pub mod conns;
pub mod driver;
pub mod kafka_admin;
pub mod partition_stats;
pub mod rebalances;
pub mod start;
pub mod store_worker;
pub mod topic_deletion;
pub mod txn_ledger;

pub use driver::{CoordinatorClient, DriverError};

pub use txn_ledger::{Staging, TxnOffsetLedger};
