//! # drover-share — share-partition state (KIP-932, "queues for Kafka")
//!
//! A share group reads a topic cooperatively: any member may get any record, the broker
//! hands records out under acquisition locks, counts deliveries and redelivers what is
//! released or whose lock runs out. Kafka keeps this state with the partition's leader
//! (`SharePartition`, `SharePartitionManager`); Drover keeps it in the host beside the
//! partition log (docs/design.md, "Share groups"), and this crate is its state machine,
//! one [`SharePartition`] per (share group, topic-partition).
//!
//! The crate is sans-IO, like the coordinator core: every call takes `now` (ms) and what
//! the log returned ([`LogBatch`]), and returns what was acquired and the state to make
//! durable ([`ShareSnapshot`]); [`SharePartition::poll_timeout`] is the next lock
//! expiry the caller's timer must fire at. It reads no clock, does no I/O and depends on
//! no other Drover crate.
//!
//! - [`config`]: the per-partition limits (`group.share.*`) and `share.auto.offset.reset`.
//! - [`record_state`]: record states and acknowledge types with their wire codes.
//! - [`log_input`]: what the log returned, classified for delivery.
//! - [`partition`]: the state machine.
//! - [`snapshot`]: the persisted form of a share-partition's state.
//! - [`stats`]: what a share-partition holds and did, for the admin API and metrics.

pub mod config;
pub mod log_input;
pub mod partition;
pub mod record_state;
pub mod snapshot;
pub mod stats;

pub use config::{AutoOffsetReset, ConfigError, ShareLimits};
pub use log_input::{AbortedRange, LogBatch};
pub use partition::{AckBatch, AckError, Acquired, AcquiredRange, MemberId, SharePartition};
pub use record_state::{AckType, RecordState};
pub use snapshot::{ShareSnapshot, StateRun};
pub use stats::{ShareCounters, ShareStats, WindowCounts, DELIVERY_BUCKETS};
