//! Caps on every length and count read from the wire (docs/protocol.md, "Limits").
//!
//! A decoder checks each length or count against the bytes that remain (an element
//! needs at least its minimum encoded size) **and** against the cap here before it
//! allocates anything, so a forged count costs nothing. Encoders enforce the same caps,
//! so whatever encodes also decodes.

/// Longest STRING or NULLABLE_STRING, in bytes: the largest INT16 length.
pub const MAX_STRING_LEN: usize = i16::MAX as usize;

/// Most topic entries in any one topic-level array of a message (requests and
/// responses alike).
pub const MAX_TOPICS_PER_REQUEST: usize = 10_000;

/// Most partition entries in the partition array of one topic entry.
pub const MAX_PARTITIONS_PER_TOPIC: usize = 100_000;

/// Most group entries in the `groups` array of a DescribeGroups request or response.
pub const MAX_GROUPS_PER_REQUEST: usize = 100_000;

/// Most member entries in the `members` array of one group described by DescribeGroups.
/// A coordinator's configured maximum group size must not exceed it.
pub const MAX_MEMBERS_PER_GROUP: usize = 100_000;

/// Most entries in RegisterConsumer's `labels` array (v1): a few free-form labels per
/// consumer, checked by decoders and encoders like every other count.
pub const MAX_LABELS_PER_CONSUMER: usize = 32;

/// Longest `rack`, label key and label value a coordinator accepts in RegisterConsumer
/// v1, in bytes. Longer ones are well-formed (a STRING may hold 32767 bytes) but break a
/// rule: the coordinator answers INVALID_REQUEST
/// ([`crate::RegisterConsumerRequest::validate`]).
pub const MAX_MEMBER_STRING_LEN: usize = 255;
