//! The assignor plugin kind: a rebalance policy that maps group members to partitions.
//!
//! An assignor is a pure, deterministic function: the same [`AssignInput`] always gives
//! the same [`Assignment`]. The coordinator calls it during a rebalance (docs/design.md, "the
//! native group protocol", step 4) and for KIP-848 server-side assignment.
//!
//! Contract every assignor must meet (checked by the conformance suite):
//! - every partition of a topic some member subscribes to is assigned to exactly one
//!   member subscribed to that topic;
//! - no partition goes to a member not subscribed to its topic, and no unknown topic or
//!   out-of-range partition appears;
//! - every input member appears in the output, possibly with no partitions;
//! - duplicate member ids, or a topic listed twice in `topics`, are refused with
//!   [`crate::ErrorKind::InvalidInput`].
//!
//! # Share assignors
//!
//! A share group (KIP-932) lets several members fetch one partition, so its target
//! assignment is computed by a *share assignor* under a contract of its own, through
//! [`Assignor::assign_share`] of an assignor whose [`Assignor::share_groups_supported`]
//! answers `true` (assignor ABI 3.3; checked by the conformance suite):
//! - when a topic has subscribers, each of its partitions is assigned to **at least
//!   one** member subscribed to it (possibly several);
//! - no partition goes to a member not subscribed to its topic, no unknown topic or
//!   out-of-range partition appears, a member lists a partition at most once;
//! - every input member appears in the output, possibly with no partitions;
//! - the output depends on the input and context only (deterministic).
//!
//! `owned` carries each member's partitions of the target in force, so a policy may keep
//! them. Drover's own share assignor is `simple` (Kafka's default), in the coordinator.
//!
//! Conventions the built-in assignors follow (and the conformance suite relies on):
//! members are ordered by the bytes of their ids; the output lists members by id,
//! topics by name and partitions ascending. A topic has at most `i32::MAX` partitions;
//! the coordinator bounds the total number of partitions it hands to an assignor.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, ROption, RResult, RString, RVec},
    StableAbi,
};

pub mod context;

pub use context::{
    AssignContext, AssignContextRef, BrokerContext, MemberContext, MemberLabel, PartitionContext,
    TopicContext,
};

use crate::{
    error::PluginError, host::HostServices, manifest::Manifest, types::TopicInfo,
    types::TopicPartitions,
};

/// One group member as an assignor sees it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AssignorMember {
    /// Member (consumer) id, unique in the group. Assignors order members by it.
    pub member_id: RString,
    /// Topics the member subscribes to (wildcards already resolved by the coordinator).
    pub topics: RVec<RString>,
    /// Partitions the member owns now (from the previous generation); sticky policies
    /// keep them where balance allows.
    pub owned: RVec<TopicPartitions>,
    /// The member's rack (`client.rack`), if it declared one.
    pub rack: ROption<RString>,
    /// Relative capacity declared by the member; 1 when it declared none. Policies that
    /// do not weigh members ignore it.
    pub weight: u32,
}

/// Input of one assignment: the group, its members and the partition counts of every
/// topic any member subscribes to.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AssignInput {
    /// The group being rebalanced (for logs; policies must not depend on it).
    pub group: RString,
    /// The members, in no particular order.
    pub members: RVec<AssignorMember>,
    /// Partition counts of the subscribed topics. A subscribed topic missing here has no
    /// partitions to assign.
    pub topics: RVec<TopicInfo>,
}

/// The partitions given to one member.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct MemberAssignment {
    /// The member's id, as in the input.
    pub member_id: RString,
    /// Its partitions, grouped by topic.
    pub partitions: RVec<TopicPartitions>,
}

/// The result of an assignment: one entry per input member.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// One entry per member of the input.
    pub members: RVec<MemberAssignment>,
}

/// The assignor interface across the boundary. Plugin authors implement
/// [`crate::sdk::AssignorPlugin`] instead; the SDK adapts it to this trait.
#[sabi_trait]
pub trait Assignor: Send + Sync {
    /// Computes the assignment. Errors: [`crate::ErrorKind::InvalidInput`] when the
    /// input cannot be assigned by this policy, [`crate::ErrorKind::Panicked`] when the
    /// plugin panicked.
    #[sabi(last_prefix_field)]
    fn assign(&self, input: &AssignInput) -> RResult<Assignment, PluginError>;

    /// Computes the assignment of `input` knowing `context` (member labels,
    /// per-partition data; [`context`]). The contract and errors are those of
    /// [`assign`](Assignor::assign); `context` is valid only during the call.
    ///
    /// Added in assignor ABI 3.1: optional. An assignor built against 3.0 has no such
    /// method, and the call runs this default, which forwards to `assign` (the context
    /// is dropped); so the host calls this method on every assignor.
    fn assign_with_context(
        &self,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> RResult<Assignment, PluginError> {
        let _ = context;
        self.assign(input)
    }

    /// Whether this assignor serves share groups (KIP-932) through
    /// [`assign_share`](Assignor::assign_share). Added in assignor ABI 3.3: an assignor
    /// built before has no such method and reads `false` (this default), so the
    /// coordinator never offers it a share group.
    fn share_groups_supported(&self) -> bool {
        false
    }

    /// Computes a share group's target assignment (KIP-932, assignor ABI 3.3): the
    /// share-assignor contract ([`share`](crate::assignor#share-assignors)), in which
    /// a partition may go to several members. `context` is the one
    /// [`assign_with_context`](Assignor::assign_with_context) gets (leaders, racks, log
    /// offsets, produce rates; no committed offsets: a share group's progress is its
    /// share-partition state), valid only during the call. Errors: as `assign`; the
    /// default answers [`crate::ErrorKind::Unsupported`].
    fn assign_share(
        &self,
        input: &AssignInput,
        context: AssignContextRef<'_>,
    ) -> RResult<Assignment, PluginError> {
        let _ = (input, context);
        RResult::RErr(PluginError::unsupported(
            "this assignor does not serve share groups",
        ))
    }
}

/// A shareable assignor instance (the coordinator and the host both hold it).
pub type AssignorArc = RArc<Assignor_TO<'static, RBox<()>>>;

/// Root module of an assignor plugin.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = AssignorModRef)))]
pub struct AssignorMod {
    /// What the plugin is; `kind` is [`crate::ManifestKind::Assignor`].
    pub manifest: Manifest,
    /// Creates an instance with the host's services and the plugin's config. Errors:
    /// [`crate::ErrorKind::InvalidConfig`].
    #[sabi(last_prefix_field)]
    pub new: extern "C" fn(HostServices) -> RResult<AssignorArc, PluginError>,
}

impl RootModule for AssignorModRef {
    declare_root_module_statics! {AssignorModRef}
    const BASE_NAME: &'static str = "drover_assignor";
    const NAME: &'static str = "drover_assignor";
    const VERSION_STRINGS: VersionStrings = crate::version::ASSIGNOR_VERSION_STRINGS;
}
