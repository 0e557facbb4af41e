//! The coordinator's own domain types, kept apart from the wire types of
//! `drover-protocol` and the boundary types of `drover-abi`. Conversions happen in
//! the private `wire` module (frames) and [`crate::assignors`] / [`crate::abi`] (ABI).
//!
//! Names are reference-counted strings: a group of 10,000 members over 10,000
//! partitions holds each topic name once.

use std::fmt;
use std::sync::Arc;

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a name.
            pub fn new(name: impl AsRef<str>) -> Self {
                $name(Arc::from(name.as_ref()))
            }

            /// The name.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name::new(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(Arc::from(s))
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A consumer group id (never empty once registered).
    GroupId
);
name_type!(
    /// A consumer id, chosen by the consumer, unique in its group.
    ConsumerId
);
name_type!(
    /// A topic name.
    TopicName
);

/// A group generation: increased each time the coordinator sends a round of
/// StartFetcher (docs/protocol.md §6.4). 0 before the first rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Generation(pub i32);

impl Generation {
    /// The generation after this one (saturating at `i32::MAX`).
    pub fn next(self) -> Generation {
        Generation(self.0.saturating_add(1))
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One partition of one topic.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: TopicName,
    /// The partition index, `0..partition_count`.
    pub partition: i32,
}

impl TopicPartition {
    /// Builds a value.
    pub fn new(topic: impl Into<TopicName>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Debug for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A connection, as identified by the host (unique for the broker's lifetime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// The id of an offset-store operation the coordinator asked for; its result comes back
/// with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

/// An offset to commit, or one read back from the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetEntry {
    /// The group.
    pub group: GroupId,
    /// The partition.
    pub tp: TopicPartition,
    /// The next offset to consume, ≥ 0.
    pub offset: i64,
    /// Application metadata (the store keeps `None` as an empty string).
    pub metadata: Option<String>,
}

/// A transactional producer as Kafka names it (KIP-98): its producer id and the epoch
/// it sent with, from TxnOffsetCommit or the transaction's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxnProducer {
    /// The producer id (≥ 0 for a real producer).
    pub id: i64,
    /// The producer epoch.
    pub epoch: i16,
}

impl fmt::Display for TxnProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "producer {}/{}", self.id, self.epoch)
    }
}

/// Offsets a transactional producer committed for one group (TxnOffsetCommit), held
/// until its transaction ends: committed then, or dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTxnOffsets {
    /// The group.
    pub group: GroupId,
    /// The producer whose transaction they belong to.
    pub producer: TxnProducer,
    /// The offsets, each of `group`.
    pub offsets: Vec<OffsetEntry>,
}

/// Why an offset-store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    /// Whether the same operation may succeed later (the store is down or overloaded).
    pub retriable: bool,
    /// What went wrong.
    pub message: String,
}

impl StoreError {
    /// A retriable failure.
    pub fn unavailable(message: impl Into<String>) -> Self {
        StoreError {
            retriable: true,
            message: message.into(),
        }
    }

    /// A failure retrying cannot fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        StoreError {
            retriable: false,
            message: message.into(),
        }
    }
}

impl From<drover_abi::PluginError> for StoreError {
    fn from(e: drover_abi::PluginError) -> Self {
        StoreError {
            retriable: e.kind.is_retriable(),
            message: e.to_string(),
        }
    }
}
