//! The transaction coordinator (KIP-98 as Kafka 4.x serves it, with KIP-360, KIP-447
//! and KIP-890 part 1): transactional ids, their producer ids and epochs, the
//! partitions and groups of each open transaction, timeouts and expiry, kept durably
//! in the data directory and completed by writing transaction markers and completing
//! group offsets.
//!
//! - [`types`]: the domain types; [`error`]: refusals and their Kafka codes;
//! - [`state`]: the state machine, pure (no IO, no clock);
//! - [`codec`], [`store`]: the durable record and the store abstraction with its redb
//!   implementation (standalone); [`zk_store`]: the ZooKeeper store (cluster mode);
//! - [`coordinator`]: the synchronous driver (decide, write, apply);
//! - [`completion`]: the async driver that completes decided transactions through
//!   [`ports`]; [`timeouts`]: the periodic abort of timed-out transactions.
//!
//! - [`marker_queue`]: cluster mode's markers for partitions another broker leads,
//!   through a ZooKeeper queue per broker; [`slots`]: takes the slots this broker
//!   owns over; [`remote_verify`]: KIP-890's check at a leader that is not the
//!   transaction's coordinator.
//!
//! Cluster mode: a transactional id is coordinated by the owner of its coordinator
//! slot (the groups' slot table), its record lives in ZooKeeper, and it fails over
//! with the slot (docs/design.md, "Producers and transactions"). Transactional offset
//! commits cross brokers through ZooKeeper: [`group_offsets`].

pub mod broker_ports;
pub mod codec;
pub mod completion;
pub mod coordinator;
pub mod error;
pub mod group_offsets;
pub mod marker_queue;
pub mod metrics;
pub mod ports;
pub mod remote_verify;
pub mod slots;
pub mod state;
pub mod store;
pub mod timeouts;
pub mod types;
pub mod zk_store;

pub use coordinator::TxnCoordinator;
pub use error::TxnError;
pub use state::{Caller, InitRequest, Limits};
pub use types::{ProducerIdEpoch, TopicPartition, TransactionalId, TxnMetadata, TxnState};
