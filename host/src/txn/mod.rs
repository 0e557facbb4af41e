//! The transaction coordinator (KIP-98 as Kafka 4.x serves it, with KIP-360, KIP-447
//! and KIP-890 part 1): transactional ids, their producer ids and epochs, the
//! partitions and groups of each open transaction, timeouts and expiry, kept durably
//! in the data directory and completed by writing transaction markers and completing
//! group offsets.
//!
//! - [`types`]: the domain types; [`error`]: refusals and their Kafka codes;
//! - [`state`]: the state machine, pure (no IO, no clock);
//! - [`codec`], [`store`]: the durable record and its redb store;
//! - [`coordinator`]: the synchronous driver (decide, write, apply);
//! - [`completion`]: the async driver that completes decided transactions through
//!   [`ports`]; [`timeouts`]: the periodic abort of timed-out transactions.
//!
//! Standalone only: in cluster mode no transaction coordinator runs and transaction
//! requests are answered `COORDINATOR_NOT_AVAILABLE` (docs/operations.md).

pub mod broker_ports;
pub mod codec;
pub mod completion;
pub mod coordinator;
pub mod error;
pub mod metrics;
pub mod ports;
pub mod state;
pub mod store;
pub mod timeouts;
pub mod types;

pub use coordinator::TxnCoordinator;
pub use error::TxnError;
pub use state::{Caller, InitRequest, Limits};
pub use types::{ProducerIdEpoch, TopicPartition, TransactionalId, TxnMetadata, TxnState};
