//! # drover-coordinator — Drover's consumer group coordinator
//!
//! A sans-IO state machine implementing the native group protocol of
//! `docs/protocol.md`. Work in progress.

pub mod abi;
pub mod assignors;
pub mod config;
mod core;
pub mod io;
pub mod subscription;
mod timers;
pub mod types;
mod wire;

pub use crate::core::{Coordinator, GroupSnapshot, MemberSnapshot};
pub use assignors::{AssignorSet, Assignors};
pub use config::{ConfigError, CoordinatorConfig, RebalanceMode};
pub use io::{Event, FailureReason, FetchScope, Input, Output};
pub use types::{
    ConnId, ConsumerId, Generation, GroupId, OffsetEntry, OpId, StoreError, TopicName,
    TopicPartition,
};
