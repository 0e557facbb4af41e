//! # drover-coordinator — Drover's consumer group coordinator
//!
//! The coordinator of the native group protocol (`docs/protocol.md`, docs/design.md, "The
//! native group protocol") as a **sans-IO state machine**: it never reads a clock,
//! opens a socket or sleeps. The host feeds it [`Input`]s stamped with a monotonic
//! `now_ms`, executes the [`Output`]s it returns, and delivers [`Input::Timer`] at
//! [`Coordinator::poll_timeout`]. Everything it does is a deterministic function of its
//! inputs, which is what the scenario tests and the seeded simulation in `tests/` rely
//! on.
//!
//! What it implements:
//!
//! - **Registration** (RegisterConsumer) with static topic subscriptions and
//!   whitelist/blacklist regular expressions resolved against the topic metadata, with
//!   the checks and error codes of docs/protocol.md §7.2, group size and session timeout
//!   bounds, and a per-group assignor chosen by name.
//! - **Liveness**: a Heartbeat every `session_timeout_ms / 3` on each consumer's channel;
//!   a consumer is failed when it is silent for its session timeout, its channel closes,
//!   it answers with an error, reports dead fetchers, violates the channel protocol, or
//!   registers again.
//! - **Rebalances** (§6.4), incremental (default) or eager: StopFetcher, wait for the
//!   answers (their final offsets are committed), the group's assignor, start offsets
//!   from the offset store, StartFetcher to every member with a new generation. A
//!   partition of a failed consumer is handed over only once released (§6.2: at once
//!   for an error answer or LeaveGroup, otherwise after the consumer's lease has surely
//!   expired). Triggers are debounced.
//! - **Offsets** (§6.5): Heartbeat offsets committed periodically, final offsets and
//!   CommitOffset at once, one batch in flight per group, stale generations refused,
//!   offsets never going backwards within a generation; FetchOffsets.
//! - **DescribeGroups** (§5.8, v0–1): state, generation, assignor, members and their
//!   partitions (v1: their rack, weight and labels, and the partition loads the last
//!   assignment saw), from [`Coordinator::group`]; what the broker's admin API
//!   `GET /v1/groups` shows.
//! - **Cluster mode** (§6.8): with [`CoordinatorConfig::slot_count`] set, the
//!   coordinator serves only the groups of the coordinator slots it owns
//!   ([`Ownership`]), answers NOT_COORDINATOR for the others, drops a slot's groups
//!   (closing their channels) on [`Input::SlotLost`], and after [`Input::SlotGained`]
//!   rebuilds them from the consumers that re-register, with no rebalance before the
//!   takeover wait ([`CoordinatorConfig::takeover_wait_ms`]) has passed.
//!
//! The plugin's configuration is [`CoordinatorConfig`], read from the operator's
//! `[plugins.config.drover-coordinator]` table with [`CoordinatorConfig::from_toml`].
//!
//! The pieces: [`Coordinator`] (the state machine), [`CoordinatorConfig`], [`Input`] /
//! [`Output`] / [`Event`] ([`io`]), the domain types ([`types`]), the assignor interface
//! [`Assignors`] with [`AssignorSet`] for loaded `AssignorArc`s ([`assignors`]), and the
//! conversions to the plugin ABI's coordinator types ([`abi`]).
//!
//! ```
//! use bytes::BytesMut;
//! use drover_abi::assignor::{AssignInput, Assignment, MemberAssignment};
//! use drover_abi::PluginError;
//! use drover_coordinator::{
//!     Assignors, ConnId, Coordinator, CoordinatorConfig, Input, Output, TopicName,
//! };
//! use drover_protocol as proto;
//!
//! /// Everything to the first member (enough for one consumer).
//! struct First;
//! impl Assignors for First {
//!     fn contains(&self, name: &str) -> bool {
//!         name == "first"
//!     }
//!     fn assign(&self, _: &str, input: &AssignInput) -> Result<Assignment, PluginError> {
//!         let all: Vec<_> = input
//!             .topics
//!             .iter()
//!             .map(|t| drover_abi::TopicPartitions::new(t.name.clone(), (0..t.partitions as i32).collect::<Vec<_>>()))
//!             .collect();
//!         let members = input.members.iter().enumerate().map(|(i, m)| MemberAssignment {
//!             member_id: m.member_id.clone(),
//!             partitions: if i == 0 { all.clone().into() } else { Default::default() },
//!         });
//!         Ok(Assignment { members: members.collect::<Vec<_>>().into() })
//!     }
//! }
//!
//! let config = CoordinatorConfig {
//!     default_assignor: "first".into(),
//!     rebalance_delay_ms: 0,
//!     ..CoordinatorConfig::default()
//! };
//! let mut coordinator = Coordinator::new(config, First).unwrap();
//! let topics = [(TopicName::new("invoices"), 2)].into_iter().collect();
//! coordinator.handle(0, Input::TopicsChanged { topics });
//!
//! // A consumer registers on connection 1 (docs/protocol.md §9).
//! let request = proto::NativeRequest::RegisterConsumer(proto::RegisterConsumerRequest {
//!     group_id: "billing".into(),
//!     consumer_id: "billing-1".into(),
//!     host: "10.0.0.5".into(),
//!     session_timeout_ms: 30_000,
//!     subscription: proto::Subscription::static_topics([("invoices", 2)]),
//!     auto_offset_reset: proto::AutoOffsetReset::EARLIEST,
//!     assignor: None,
//!     member: proto::MemberData::default(),
//! });
//! let mut frame = BytesMut::new();
//! proto::encode_request_frame(&mut frame, 1, Some("app"), &request).unwrap();
//! let outputs = coordinator.handle(5, Input::Frame { conn: ConnId(1), bytes: frame.freeze().slice(4..) });
//!
//! // The connection becomes a channel, the registration is answered, then (no
//! // debounce) the start offsets are read...
//! assert!(matches!(&outputs[0], Output::ChannelOpened { conn: ConnId(1) }));
//! assert!(matches!(&outputs[1], Output::Answer { conn: ConnId(1), .. }));
//! let Some(Output::FetchOffsets { op, .. }) =
//!     outputs.iter().find(|o| matches!(o, Output::FetchOffsets { .. }))
//! else {
//!     panic!("no fetch")
//! };
//! // ... and once the store answers (nothing committed), StartFetcher goes out.
//! let outputs = coordinator.handle(6, Input::OffsetsFetched { op: *op, result: Ok(vec![]) });
//! let Some(Output::Push { bytes, .. }) =
//!     outputs.iter().find(|o| matches!(o, Output::Push { .. }))
//! else {
//!     panic!("no StartFetcher")
//! };
//! let (_, start) = proto::decode_request_frame(bytes.clone()).unwrap();
//! let proto::NativeRequest::StartFetcher(start) = start else { panic!() };
//! assert_eq!(start.generation, 1);
//! assert_eq!(start.assignment[0].partitions.len(), 2);
//! assert_eq!(start.assignment[0].partitions[0].start_offset, -2);
//! // The next thing the coordinator needs is a timer: the session deadline.
//! assert_eq!(coordinator.poll_timeout(), Some(5 + 30_000));
//! ```

pub mod abi;
pub mod assignor_call;
pub mod assignor_job;
pub mod assignors;
pub mod config;
mod core;
pub mod export;
mod id_map;
pub mod io;
pub mod kafka_wire;
mod log_limit;
pub mod partition_stats;
pub mod seen_loads;
mod shrink;
pub mod subscription;
mod timers;
pub mod types;
mod wire;

pub use crate::core::{Coordinator, GroupSnapshot, MemberSnapshot, Ownership};
pub use assignor_job::{AssignorJob, AssignorRunner};
pub use assignors::{AssignorSet, Assignors};
pub use config::{ConfigError, CoordinatorConfig, RebalanceMode};
pub use io::{CoordinatorCounter, Event, FailureReason, FetchScope, Input, Output};
pub use partition_stats::PartitionStats;
pub use types::{
    ConnId, ConsumerId, Generation, GroupId, OffsetEntry, OpId, PendingTxnOffsets, StoreError,
    TopicName, TopicPartition, TxnProducer,
};
