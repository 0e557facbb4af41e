//! What an assignor may know besides its [`AssignInput`](super::AssignInput) (assignor
//! ABI 3.1): member labels and per-partition data, passed to
//! [`Assignor::assign_with_context`](super::Assignor::assign_with_context).
//!
//! `AssignInput` is a plain `#[repr(C)]` struct and cannot grow within a major; the
//! context is an `abi_stable` *prefix type* instead, so a later minor can append fields
//! after [`AssignContext::topics`] (an assignor built before reads only the fields it
//! knows; one built after reads a field the host lacks as `None` — though a plugin newer
//! than the host is refused at load anyway). Every value in it is optional: what the
//! host does not know is absent, never guessed.
//!
//! Who fills what (Drover's coordinator, this release): member labels (native
//! RegisterConsumer v1); committed offsets the group has accepted (native groups);
//! leaders and their racks, log start/end offsets and produce rates from the broker's
//! partition table (coordinator ABI 3.3 `CoordinatorInput::PartitionStats`): log
//! offsets and rates only for partitions the broker running the coordinator leads, and
//! nothing before the first table arrived. An assignor must treat every field as
//! possibly missing.

use abi_stable::{
    prefix_type::WithMetadata,
    std_types::{ROption, RSlice, RString, RVec},
    StableAbi,
};

/// A free-form label a member declared (native RegisterConsumer v1 `labels`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct MemberLabel {
    /// Not empty; unique among the member's labels.
    pub key: RString,
    /// May be empty.
    pub value: RString,
}

/// What the context says about one member.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct MemberContext {
    /// The member's id, as in [`AssignorMember::member_id`](super::AssignorMember).
    pub member_id: RString,
    /// Its labels, in the order the member declared them; empty when it declared none
    /// (and for KIP-848 and classic members, whose protocols carry none).
    pub labels: RVec<MemberLabel>,
}

/// A broker that leads some partition in the context.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct BrokerContext {
    /// The broker id (`broker.id`; 0 for a standalone broker).
    pub broker_id: i32,
    /// Its rack (Kafka's `broker.rack`), if configured.
    pub rack: ROption<RString>,
}

/// What the broker knows about one partition handed to the assignor. Each field is
/// `None` when the host does not know it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct PartitionContext {
    /// The partition index.
    pub partition: i32,
    /// Broker id of its leader; its rack is in [`AssignContext::brokers`].
    pub leader: ROption<i32>,
    /// First offset still in the log (Kafka's log start offset).
    pub log_start_offset: ROption<i64>,
    /// Offset the next produced record gets (Kafka's log end offset / high watermark).
    pub log_end_offset: ROption<i64>,
    /// The group's committed offset (the next record the group would consume).
    pub committed_offset: ROption<i64>,
    /// Recent produce rate into the partition, bytes of record batches (as stored) per
    /// second, over a window the host measures (`coordinator.produce_rate_window_ms`).
    pub produce_bytes_per_sec: ROption<f64>,
    /// Recent produce rate into the partition, records per second, over the same
    /// window.
    pub produce_records_per_sec: ROption<f64>,
}

impl PartitionContext {
    /// A partition the host knows nothing about.
    pub fn unknown(partition: i32) -> Self {
        PartitionContext {
            partition,
            leader: ROption::RNone,
            log_start_offset: ROption::RNone,
            log_end_offset: ROption::RNone,
            committed_offset: ROption::RNone,
            produce_bytes_per_sec: ROption::RNone,
            produce_records_per_sec: ROption::RNone,
        }
    }
}

/// The partitions of one topic the context says something about.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct TopicContext {
    /// The topic, as in [`AssignInput::topics`](super::AssignInput).
    pub topic: RString,
    /// Ascending by partition, each at most once; a partition the host knows nothing
    /// about is left out (so the list is empty while nothing is measured, and building
    /// it costs nothing for groups with a million partitions).
    pub partitions: RVec<PartitionContext>,
}

/// The context of one assignment. Read it through [`AssignContextRef`] (the SDK's
/// [`crate::sdk::assignor::Context`] indexes it). Fields after `topics` may be added by
/// later assignor minors.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = AssignContextRef)))]
pub struct AssignContext<'a> {
    /// One entry per member that has something to say (labels), in no particular
    /// order; a member of the input without an entry has no labels.
    pub members: RSlice<'a, MemberContext>,
    /// The brokers named as leaders in `topics`, with their racks.
    pub brokers: RSlice<'a, BrokerContext>,
    /// Per-partition data, one entry per topic of the input the host knows something
    /// about, in no particular order.
    #[sabi(last_prefix_field)]
    pub topics: RSlice<'a, TopicContext>,
}

impl<'a> AssignContext<'a> {
    /// Lends the context to `f` as the [`AssignContextRef`] an assignor receives. The
    /// reference is valid only while `f` runs (an assignor must not keep it beyond the
    /// call it was passed to); `f` takes it for any lifetime, so neither its result nor
    /// anything it captures can hold it.
    pub fn lend<R>(self, f: impl FnOnce(AssignContextRef<'_>) -> R) -> R {
        let boxed = Box::new(WithMetadata::new(self));
        // SAFETY: `boxed` outlives every use of the reference: it is handed only to `f`,
        // which is generic over the reference's lifetime, so it cannot escape through
        // `R` (declared outside that lifetime) or through a capture.
        let prefix = unsafe { boxed.as_prefix() };
        f(AssignContextRef(prefix))
    }
}

/// An empty context: no labels, no partition data (what an assignor sees through
/// `assign_with_context` when the caller knows nothing more than the input).
pub fn empty_context<R>(f: impl FnOnce(AssignContextRef<'_>) -> R) -> R {
    AssignContext {
        members: RSlice::from_slice(&[]),
        brokers: RSlice::from_slice(&[]),
        topics: RSlice::from_slice(&[]),
    }
    .lend(f)
}
