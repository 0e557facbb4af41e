//! Kafka's own group APIs, served beside the native protocol: classic groups
//! (JoinGroup/SyncGroup), offsets of any group (OffsetCommit/OffsetFetch/OffsetDelete),
//! group administration (DescribeGroups/ListGroups/DeleteGroups) and KIP-848 groups
//! (ConsumerGroupHeartbeat/ConsumerGroupDescribe), share groups' membership (KIP-932:
//! ShareGroupHeartbeat/ShareGroupDescribe), and transactional offset commits
//! (TxnOffsetCommit).
//!
//! A group id belongs to one protocol at a time (the coordinator's one group table,
//! `core::groups`): the first member decides (native, classic or consumer); a request
//! of another protocol for it is refused with INCONSISTENT_GROUP_PROTOCOL (joins) or
//! the API's nearest error. Every group's offsets take the one commit path
//! (`core::commits`) to the active offset store.
//!
//! The files, by group type and API: classic groups in `classic` (the group: joins,
//! syncs, heartbeats, its timers) and `classic_api` (the wire glue); KIP-848 groups in
//! `consumer_group/` (the pure engine) and `consumer_api` (its glue); share groups in
//! `share_group/` (the pure engine) and `share_api` (its glue); OffsetCommit,
//! OffsetFetch and OffsetDelete in `offsets`; TxnOffsetCommit in `txn_offset_commit`;
//! DescribeGroups, ListGroups and
//! DeleteGroups in `admin`.

pub(crate) mod admin;
mod classic;
mod classic_api;
mod consumer_api;
mod consumer_group;
mod offsets;
mod share_api;
mod share_group;
mod txn_offset_commit;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::messages::{RequestKind, ResponseKind};

pub(crate) use classic::{ClassicGroup, ClassicReply, ClassicTimer, Pending};
pub(in crate::core) use classic_api::send as send_classic;
pub(crate) use consumer_group::ConsumerGroup;
pub(crate) use offsets::{CommitWait, DeleteWait, KafkaOffsets};
pub(crate) use share_group::ShareGroup;
pub(crate) use txn_offset_commit::StageWait;

use super::conn::SlotRef;
use super::groups::GroupKind;
use super::{Coordinator, Ctx};
use crate::kafka_wire::{self, KafkaReplyTo};
use crate::types::{ConnId, TopicName};

/// The Kafka side of the coordinator's state.
#[derive(Debug, Default)]
pub(crate) struct KafkaGroups {
    /// The KIP-848 engine (its groups are in the coordinator's one table).
    pub consumer: consumer_group::ConsumerGroups,
    /// The share-group engine (its groups are in the coordinator's one table).
    pub share: share_group::ShareGroups,
    /// OffsetFetch requests waiting for one store read per group.
    pub offsets: KafkaOffsets,
    /// DeleteGroups requests waiting for the store.
    pub delete_groups: BTreeMap<u64, admin::DeleteGroupsWait>,
    /// Topic ids (UUID bytes) by name, from the host (for KIP-848 and OffsetCommit v10).
    /// Set with [`KafkaGroups::set_topic_ids`], which keeps `topic_names` with it.
    pub topic_ids: BTreeMap<TopicName, [u8; 16]>,
    /// The same table by id: a ConsumerGroupHeartbeat's owned partitions are named by
    /// topic id, so each one is a lookup here rather than a rebuild of this map per
    /// heartbeat (which cost O(topics) allocations per heartbeat).
    pub topic_names: HashMap<[u8; 16], TopicName>,
}

impl KafkaGroups {
    /// Replaces the topic ids (the host's [`crate::Input::TopicIds`]).
    pub(crate) fn set_topic_ids(&mut self, ids: BTreeMap<TopicName, [u8; 16]>) {
        self.topic_names = ids.iter().map(|(name, id)| (*id, name.clone())).collect();
        self.topic_ids = ids;
    }
}

impl Ctx {
    /// Encodes a Kafka response and fills its slot.
    pub(crate) fn respond_kafka(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        response: ResponseKind,
    ) {
        match kafka_wire::encode_response(to, &response) {
            Ok(bytes) => self.fill(slot, bytes),
            Err(e) => self.reject(slot.conn, format!("cannot encode the response: {e}")),
        }
    }
}

impl Coordinator {
    /// Which protocol group `id` belongs to, if the coordinator knows it.
    pub(crate) fn group_kind(&self, id: &str) -> Option<GroupKind> {
        self.groups.kind(id)
    }

    /// Makes group id `id` available to a group of `kind`: a group of another kind that
    /// may be dropped (no member; a native group also nothing pending, no zombie,
    /// [`Group::may_be_dropped`](super::groups::Group::may_be_dropped)) is forgotten
    /// (its committed offsets stay; Kafka 4 converts an empty group the same way),
    /// except to or from a share group ([`GroupKind::converts_to`]); `false` when
    /// another kind's group still holds the id.
    pub(crate) fn take_group_id(&mut self, id: &str, kind: GroupKind) -> bool {
        match self.groups.get(id) {
            None => true,
            Some(g) if g.kind() == kind => true,
            Some(g) if g.may_be_dropped() && g.kind().converts_to(kind) => {
                self.groups.remove(id);
                true
            }
            Some(_) => false,
        }
    }

    /// A member's host as Kafka reports it (`/` and the client's IP address), or
    /// empty when the host did not say.
    pub(crate) fn client_host(&self, conn: ConnId) -> String {
        self.cx
            .peer(conn)
            .map(|ip| format!("/{ip}"))
            .unwrap_or_default()
    }

    /// A request of one of Kafka's group APIs (or the host's ApiVersions probe).
    pub(super) fn on_kafka_request(&mut self, conn: ConnId, bytes: Bytes) {
        let request = match kafka_wire::decode_request(bytes) {
            Ok(r) => r,
            Err(e) => return self.cx.reject(conn, e),
        };
        let slot = self.cx.reserve(conn);
        let to = request.reply_to();
        let client_id = request
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        match request.body {
            RequestKind::ApiVersions(_) => {
                self.cx
                    .respond_kafka(slot, to, kafka_wire::api_versions_response());
            }
            RequestKind::JoinGroup(r) => self.on_join_group(slot, to, client_id, r),
            RequestKind::SyncGroup(r) => self.on_sync_group(slot, to, r),
            RequestKind::Heartbeat(r) => self.on_classic_heartbeat(slot, to, r),
            RequestKind::LeaveGroup(r) => self.on_leave_group(slot, to, r),
            RequestKind::OffsetCommit(r) => self.on_offset_commit(slot, to, r),
            RequestKind::OffsetFetch(r) => self.on_offset_fetch(slot, to, r),
            RequestKind::OffsetDelete(r) => self.on_offset_delete(slot, to, r),
            RequestKind::TxnOffsetCommit(r) => self.on_txn_offset_commit(slot, to, r),
            RequestKind::DescribeGroups(r) => self.on_describe_groups(slot, to, r),
            RequestKind::ListGroups(r) => self.on_list_groups(slot, to, r),
            RequestKind::DeleteGroups(r) => self.on_delete_groups(slot, to, r),
            RequestKind::ConsumerGroupHeartbeat(r) => {
                self.on_consumer_heartbeat(slot, to, client_id, r)
            }
            RequestKind::ConsumerGroupDescribe(r) => self.on_consumer_group_describe(slot, to, r),
            RequestKind::ShareGroupHeartbeat(r) => self.on_share_heartbeat(slot, to, client_id, r),
            RequestKind::ShareGroupDescribe(r) => self.on_share_group_describe(slot, to, r),
            other => {
                tracing::debug!(?to.key, "no handler");
                let _ = other;
                self.cx.reject(
                    conn,
                    format!("{:?} is not served by this coordinator", to.key),
                );
            }
        }
    }
}
