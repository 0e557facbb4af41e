//! # drover-client — the consumer connector of Drover's native group protocol
//!
//! The consumer side of the original design (its "simplified consumer connector"),
//! speaking `docs/protocol.md` to a Drover coordinator and Kafka Fetch to partition
//! leaders:
//!
//! - **bootstrap**: Metadata and FindCoordinator from the broker list, tried in turn
//!   with backoff;
//! - **the coordinator channel** ([`channel`]): RegisterConsumer, then Heartbeat
//!   answered with consumed offsets and fetcher health, StopFetcher answered once those
//!   partitions are stopped (with final offsets), StartFetcher starting the new
//!   assignment; the session-timeout lease is kept, so a consumer cut off from its
//!   coordinator stops delivering before its partitions can move;
//! - **fetchers** ([`fetcher`]) per partition leader, with memory bounded by
//!   `max_buffered_bytes` (backpressure);
//! - **message streams** ([`MessageStream`]): `n` streams per topic, or `n` streams
//!   for a whitelist/blacklist pattern; partitions are mapped to streams anew at every
//!   StartFetcher;
//! - **offsets**: reported in every Heartbeat answer, committed every
//!   `auto_commit_interval_ms` and on [`Consumer::commit`]; `auto_offset_reset`
//!   earliest, latest or none;
//! - **failure handling**: a lost channel, lease expiry or a dead fetcher (offset out
//!   of range) drops every partition, and the consumer rediscovers the coordinator and
//!   registers again; [`Consumer::shutdown`] commits and leaves;
//! - **security** ([`security`]): TLS and SASL (SCRAM-SHA-512/256, PLAIN) on every
//!   connection, for SSL, SASL_PLAINTEXT and SASL_SSL listeners
//!   ([`ConsumerConfig::security`]).
//!
//! Delivery is at least once: a message is consumed when a stream returns it, and
//! consumed offsets are what gets committed.
//!
//! ```no_run
//! # async fn run() -> Result<(), drover_client::ClientError> {
//! use drover_client::{Consumer, ConsumerConfig};
//!
//! let config = ConsumerConfig::new(["127.0.0.1:9092"], "billing");
//! let (consumer, mut streams) = Consumer::create_message_streams(config, [("invoices", 2)]).await?;
//! let mut stream = streams.remove("invoices").unwrap().remove(0);
//! while let Some(message) = stream.next().await {
//!     let message = message?;
//!     println!("{}-{}@{}", message.topic, message.partition, message.offset);
//! }
//! consumer.shutdown().await
//! # }
//! ```

pub mod channel;
mod cluster;
mod config;
mod conn;
mod consumer;
mod error;
pub mod fetcher;
pub mod security;
mod state;
mod stream;

pub use config::{ConsumerConfig, OffsetReset};
pub use consumer::{Consumer, TopicFilter};
pub use error::ClientError;
pub use security::{SaslCredentials, SaslMechanism, Security, TlsSettings};
pub use state::{ConsumerEvent, TopicPartition};
pub use stream::{Message, MessageStream};
