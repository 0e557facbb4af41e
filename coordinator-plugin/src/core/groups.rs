//! The one group table: every group the coordinator serves, whatever its protocol, by
//! id ([`Groups`]), as a [`Group`] (after Kafka's `Group` with `ClassicGroup` and
//! `ConsumerGroup`), and what every group answers whatever its type: its kind and
//! protocol type, whether it may be dropped, the group-level checks of an offset commit or
//! fetch, its ListGroups summary, and topics that are gone.
//!
//! A group id belongs to one protocol at a time, so one table keeps the rule by
//! construction. The behaviour of each type is in its own files: native groups in
//! `native/`; classic groups in `kafka/classic*`; KIP-848 groups in
//! `kafka/consumer_group/` (the pure engine) and `kafka/consumer_api`; share groups
//! (KIP-932) in `kafka/share_group/` and `kafka/share_api`; the commit path they share
//! in `commits`.

use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::hash::Hash;

use kafka_protocol::ResponseError;

use super::commits::{validate_commit_without_group, CommitAuthor};
use super::kafka::{ClassicGroup, ConsumerGroup, ShareGroup};
use super::native::{Member, NativeGroup};
use crate::id_map::IdMap;
use crate::types::{GroupId, TopicName};

/// Which protocol a group id belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupKind {
    /// Drover's native protocol (RegisterConsumer and the coordinator channel).
    Native,
    /// Kafka's classic protocol (JoinGroup/SyncGroup), or a group that only commits.
    Classic,
    /// Kafka's KIP-848 protocol (ConsumerGroupHeartbeat).
    Consumer,
    /// Kafka's share groups (KIP-932, ShareGroupHeartbeat).
    Share,
}

impl GroupKind {
    /// The group type ListGroups reports (KIP-848's `classic` and `consumer`,
    /// KIP-932's `share`; Drover's own `native`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupKind::Native => "native",
            GroupKind::Classic => "classic",
            GroupKind::Consumer => "consumer",
            GroupKind::Share => "share",
        }
    }

    /// Whether an empty group of this kind may give its id to a group of kind `to`
    /// (Kafka 4 converts an empty classic group to a consumer group and back). A share
    /// group's id is never taken nor does a share group take another's: its
    /// share-partition state outlives its members, and Kafka answers a request of
    /// another type GROUP_ID_NOT_FOUND / INCONSISTENT_GROUP_PROTOCOL instead.
    pub(crate) fn converts_to(self, to: GroupKind) -> bool {
        match (self, to) {
            (GroupKind::Share, _) | (_, GroupKind::Share) => self == to,
            (GroupKind::Native | GroupKind::Classic | GroupKind::Consumer, _) => true,
        }
    }
}

/// Protocol type reported for native groups: they are consumer groups (Kafka tools such
/// as librdkafka's admin client list only groups of that protocol type).
pub(crate) const NATIVE_PROTOCOL_TYPE: &str = "consumer";

/// A group of any protocol.
#[derive(Debug)]
pub(crate) enum Group {
    /// A native group.
    Native(NativeGroup),
    /// A classic Kafka group.
    Classic(ClassicGroup),
    /// A KIP-848 group.
    Consumer(ConsumerGroup),
    /// A share group (KIP-932).
    Share(ShareGroup),
}

/// The topics a group consumes, which OffsetDelete keeps (Kafka's
/// GROUP_SUBSCRIBED_TO_TOPIC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Subscribed {
    /// These topics.
    Topics(BTreeSet<TopicName>),
    /// Every topic: a classic group whose members' subscriptions cannot be read
    /// (a protocol type other than `consumer`, or metadata that does not parse).
    Every,
}

/// A group as ListGroups reports it: protocol type, state (Kafka's names) and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub protocol_type: String,
    pub state: &'static str,
    pub group_type: &'static str,
}

impl Group {
    /// The group's protocol.
    pub(crate) fn kind(&self) -> GroupKind {
        match self {
            Group::Native(_) => GroupKind::Native,
            Group::Classic(_) => GroupKind::Classic,
            Group::Consumer(_) => GroupKind::Consumer,
            Group::Share(_) => GroupKind::Share,
        }
    }

    /// The group's recent rebalances for DescribeRebalances (docs/protocol.md §5.9), or
    /// `None` for a type that records none: a share group (KIP-932) has no rebalance
    /// with a start and an end to record (each heartbeat's assignment takes effect at
    /// once, with no revocation to wait for), so DescribeRebalances answers it as it
    /// answers an unknown group.
    pub(crate) fn rebalance_history(&self) -> Option<&super::rebalance_history::RebalanceHistory> {
        match self {
            Group::Native(g) => Some(&g.history),
            Group::Classic(g) => Some(&g.history),
            Group::Consumer(g) => Some(g.history()),
            Group::Share(_) => None,
        }
    }

    /// Whether the group may be forgotten, deleted by DeleteGroups or its id taken by a
    /// group of another protocol: it has no member, and a native group nothing else
    /// that needs it ([`NativeGroup::may_be_dropped`]). Its committed offsets stay (a
    /// DeleteGroups deletes them itself); Kafka 4 converts an empty group the same way.
    pub(crate) fn may_be_dropped(&self) -> bool {
        match self {
            Group::Native(g) => g.may_be_dropped(),
            Group::Classic(g) => g.members.is_empty(),
            Group::Consumer(g) => g.is_empty(),
            Group::Share(g) => g.is_empty(),
        }
    }

    /// The group as ListGroups reports it. A native group's states are mapped to
    /// Kafka's names: `Empty`, `PreparingRebalance` while a rebalance runs, `Stable`.
    pub(crate) fn summary(&self) -> Summary {
        let kind = self.kind();
        let (protocol_type, state) = match self {
            Group::Native(g) => {
                let state = if g.members.is_empty() {
                    "Empty"
                } else if g.in_rebalance() {
                    "PreparingRebalance"
                } else {
                    "Stable"
                };
                (NATIVE_PROTOCOL_TYPE.to_owned(), state)
            }
            Group::Classic(g) => (g.protocol_type.clone().unwrap_or_default(), g.state.name()),
            Group::Consumer(g) => ("consumer".to_owned(), g.state_name()),
            // Kafka's `ShareGroup.PROTOCOL_TYPE`.
            Group::Share(g) => ("share".to_owned(), g.state_name()),
        };
        Summary {
            protocol_type,
            state,
            group_type: kind.name(),
        }
    }

    /// The group-level check of an offset commit (Kafka's `validateOffsetCommit`), by
    /// the group's type: [`NativeGroup::validate_offset_commit`],
    /// [`ClassicGroup::validate_offset_commit`],
    /// [`ConsumerGroup::validate_offset_commit`]. `Ok(Some((group, member)))` for a
    /// native member's commit, whose per-partition checks need them.
    pub(crate) fn validate_offset_commit(
        &self,
        author: &CommitAuthor,
    ) -> Result<Option<(&NativeGroup, &Member)>, ResponseError> {
        match self {
            Group::Native(g) => Ok(g.validate_offset_commit(author)?.map(|m| (g, m))),
            Group::Classic(g) => g.validate_offset_commit(author).map(|()| None),
            Group::Consumer(g) => g.validate_offset_commit(author).map(|()| None),
            Group::Share(g) => g.validate_offset_commit(author).map(|()| None),
        }
    }

    /// The topics the group's members consume: a native group's resolved
    /// subscriptions, a classic group's from its members' `consumer` protocol metadata,
    /// a KIP-848 group's subscribed names and assigned topics.
    pub(crate) fn subscribed_topics(&self) -> Subscribed {
        match self {
            Group::Native(g) => Subscribed::Topics(
                g.members
                    .values()
                    .flat_map(|m| m.topics.iter().cloned())
                    .collect(),
            ),
            Group::Classic(g) => match g.subscribed_topics() {
                Some(topics) => {
                    Subscribed::Topics(topics.into_iter().map(TopicName::from).collect())
                }
                None => Subscribed::Every,
            },
            Group::Consumer(g) => Subscribed::Topics(g.subscribed_topics()),
            Group::Share(g) => Subscribed::Topics(g.subscribed_topics()),
        }
    }

    /// The group-level check of an OffsetDelete (Kafka's `validateOffsetDelete`): a
    /// share group refuses it with GROUP_ID_NOT_FOUND ("not a consumer group"); the
    /// others then keep the offsets of the topics they subscribe to
    /// ([`Group::subscribed_topics`]).
    pub(crate) fn validate_offset_delete(&self) -> Result<(), ResponseError> {
        match self {
            Group::Native(_) | Group::Classic(_) | Group::Consumer(_) => Ok(()),
            Group::Share(_) => Err(ResponseError::GroupIdNotFound),
        }
    }

    /// The group-level check of an offset fetch by `member` (id and epoch, from
    /// Kafka's OffsetFetch v9): a KIP-848 group checks the member
    /// ([`ConsumerGroup::validate_offset_fetch`]); a share group refuses every fetch
    /// ([`ShareGroup::validate_offset_fetch`]); native and classic groups allow every
    /// fetch.
    pub(crate) fn validate_offset_fetch(
        &self,
        member: Option<(Option<&str>, i32)>,
    ) -> Result<(), ResponseError> {
        match (self, member) {
            (Group::Consumer(g), Some((member_id, epoch))) => {
                g.validate_offset_fetch(member_id, epoch)
            }
            (Group::Consumer(_), None) | (Group::Native(_) | Group::Classic(_), _) => Ok(()),
            (Group::Share(g), _) => g.validate_offset_fetch(),
        }
    }
}

/// Every group the coordinator serves, by id: one table for the three protocols, and
/// the pending transactional offsets of every group id (with or without a group).
#[derive(Debug, Default)]
pub(crate) struct Groups {
    groups: IdMap<GroupId, Group>,
    /// How many of `groups` are share groups (`share_max_groups` bounds them).
    shares: usize,
    /// Pending transactional offsets per group id and producer id
    /// ([`TxnOffsets`](super::txn_offsets::TxnOffsets)).
    pub(crate) txn: super::txn_offsets::TxnOffsets,
}

impl Groups {
    /// The group with id `id`, of any protocol.
    pub(crate) fn get<Q>(&self, id: &Q) -> Option<&Group>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        self.groups.get(id)
    }

    /// The id of the group with id `id`, as stored: a clone of it costs no allocation.
    pub(crate) fn stored_id(&self, id: &str) -> Option<GroupId> {
        self.groups.get_key_value(id).map(|(k, _)| k.clone())
    }

    /// Adds (or replaces) a group.
    pub(crate) fn insert(&mut self, id: GroupId, group: Group) {
        let share = matches!(group, Group::Share(_));
        let old = self.groups.insert(id, group);
        self.shares =
            self.shares + usize::from(share) - usize::from(matches!(old, Some(Group::Share(_))));
    }

    /// Forgets a group.
    pub(crate) fn remove<Q>(&mut self, id: &Q) -> Option<Group>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        let old = self.groups.remove(id);
        if matches!(old, Some(Group::Share(_))) {
            self.shares -= 1;
        }
        old
    }

    /// The number of share groups.
    pub(crate) fn share_count(&self) -> usize {
        self.shares
    }

    /// Share group `id`.
    pub(crate) fn share<Q>(&self, id: &Q) -> Option<&ShareGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get(id) {
            Some(Group::Share(g)) => Some(g),
            _ => None,
        }
    }

    /// Share group `id`.
    pub(crate) fn share_mut<Q>(&mut self, id: &Q) -> Option<&mut ShareGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get_mut(id) {
            Some(Group::Share(g)) => Some(g),
            _ => None,
        }
    }

    /// Every share group, in id order.
    pub(crate) fn shares_mut(&mut self) -> impl Iterator<Item = &mut ShareGroup> {
        self.groups.values_mut().filter_map(|g| match g {
            Group::Share(g) => Some(g),
            _ => None,
        })
    }

    /// The number of groups of every protocol.
    pub(crate) fn len(&self) -> usize {
        self.groups.len()
    }

    /// Every group, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&GroupId, &Group)> {
        self.groups.iter()
    }

    /// The protocol of group `id`, if the coordinator knows it.
    pub(crate) fn kind<Q>(&self, id: &Q) -> Option<GroupKind>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        self.groups.get(id).map(Group::kind)
    }

    /// Native group `id`.
    pub(crate) fn native<Q>(&self, id: &Q) -> Option<&NativeGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get(id) {
            Some(Group::Native(g)) => Some(g),
            _ => None,
        }
    }

    /// Native group `id`.
    pub(crate) fn native_mut<Q>(&mut self, id: &Q) -> Option<&mut NativeGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get_mut(id) {
            Some(Group::Native(g)) => Some(g),
            _ => None,
        }
    }

    /// Native group `id`, made by `make` if there is none; the caller made the id free
    /// for a native group ([`Coordinator::take_group_id`](super::Coordinator)).
    pub(crate) fn native_or_insert(
        &mut self,
        id: GroupId,
        make: impl FnOnce() -> NativeGroup,
    ) -> &mut NativeGroup {
        if !matches!(self.groups.get(&id), Some(Group::Native(_))) {
            debug_assert!(
                !self.groups.contains_key(&id),
                "a native group in the place of another kind's"
            );
            self.insert(id.clone(), Group::Native(make()));
        }
        match self.groups.get_mut(&id) {
            Some(Group::Native(g)) => g,
            _ => unreachable!("made native above"),
        }
    }

    /// Every native group, in id order.
    pub(crate) fn natives_mut(&mut self) -> impl Iterator<Item = &mut NativeGroup> {
        self.groups.values_mut().filter_map(|g| match g {
            Group::Native(g) => Some(g),
            _ => None,
        })
    }

    /// Classic group `id`.
    pub(crate) fn classic<Q>(&self, id: &Q) -> Option<&ClassicGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get(id) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    /// Classic group `id`.
    pub(crate) fn classic_mut<Q>(&mut self, id: &Q) -> Option<&mut ClassicGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get_mut(id) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    /// Classic group `id`, made by `make` if there is none; the caller made the id free
    /// for a classic group ([`Coordinator::take_group_id`](super::Coordinator)).
    pub(crate) fn classic_or_insert(
        &mut self,
        id: GroupId,
        make: impl FnOnce() -> ClassicGroup,
    ) -> &mut ClassicGroup {
        if !matches!(self.groups.get(&id), Some(Group::Classic(_))) {
            debug_assert!(
                !self.groups.contains_key(&id),
                "a classic group in the place of another kind's"
            );
            self.insert(id.clone(), Group::Classic(make()));
        }
        match self.groups.get_mut(&id) {
            Some(Group::Classic(g)) => g,
            _ => unreachable!("made classic above"),
        }
    }

    /// KIP-848 group `id`.
    pub(crate) fn consumer<Q>(&self, id: &Q) -> Option<&ConsumerGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get(id) {
            Some(Group::Consumer(g)) => Some(g),
            _ => None,
        }
    }

    /// KIP-848 group `id`.
    pub(crate) fn consumer_mut<Q>(&mut self, id: &Q) -> Option<&mut ConsumerGroup>
    where
        GroupId: Borrow<Q>,
        Q: Hash + Ord + ?Sized,
    {
        match self.groups.get_mut(id) {
            Some(Group::Consumer(g)) => Some(g),
            _ => None,
        }
    }

    /// Every KIP-848 group, in id order.
    pub(crate) fn consumers_mut(&mut self) -> impl Iterator<Item = &mut ConsumerGroup> {
        self.groups.values_mut().filter_map(|g| match g {
            Group::Consumer(g) => Some(g),
            _ => None,
        })
    }

    /// The group-level check of a commit to `group` by `author`: by the group that has
    /// the id, whatever its type ([`Group::validate_offset_commit`]); with none, the
    /// rules of a commit to no group ([`validate_commit_without_group`]). The caller
    /// checked the id and its ownership
    /// ([`Coordinator::validate_offset_commit`](super::Coordinator::validate_offset_commit)).
    pub(crate) fn validate_offset_commit(
        &self,
        group: &str,
        author: &CommitAuthor,
    ) -> Result<Option<(&NativeGroup, &Member)>, ResponseError> {
        match self.groups.get(group) {
            Some(g) => g.validate_offset_commit(author),
            None => validate_commit_without_group(author).map(|()| None),
        }
    }

    /// The group-level check of an offset fetch of `group` by `member` (id and epoch):
    /// by the group that has the id ([`Group::validate_offset_fetch`]); a group id no
    /// group has allows every fetch (it has no offsets, or only those of simple
    /// commits).
    pub(crate) fn validate_offset_fetch(
        &self,
        group: &str,
        member: Option<(Option<&str>, i32)>,
    ) -> Result<(), ResponseError> {
        match self.groups.get(group) {
            Some(g) => g.validate_offset_fetch(member),
            None => Ok(()),
        }
    }

    /// The ids of the groups of `kind`, in id order.
    pub(crate) fn ids_of(&self, kind: GroupKind) -> Vec<GroupId> {
        self.groups
            .iter()
            .filter(|(_, g)| g.kind() == kind)
            .map(|(id, _)| id.clone())
            .collect()
    }
}
