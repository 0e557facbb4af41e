//! Kafka's own group APIs, served beside the native protocol: classic groups
//! (JoinGroup/SyncGroup), offsets of any group (OffsetCommit/OffsetFetch/OffsetDelete),
//! group administration (DescribeGroups/ListGroups/DeleteGroups) and KIP-848 groups
//! (ConsumerGroupHeartbeat/ConsumerGroupDescribe).
//!
//! A group id belongs to one protocol at a time: the first member decides (native,
//! classic or consumer); a request of another protocol for it is refused with
//! INCONSISTENT_GROUP_PROTOCOL (joins) or the API's nearest error. Every group's
//! offsets go through the active offset store.

pub(crate) mod admin;
mod classic;
mod classic_api;
mod offsets;

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::{RequestKind, ResponseKind};

pub(crate) use classic::{ClassicGroup, ClassicTimer};
pub(crate) use offsets::KafkaOffsets;

use super::conn::SlotRef;
use super::{Coordinator, Ctx};
use crate::kafka_wire::{self, KafkaReplyTo};
use crate::types::{ConnId, GroupId, TopicName};

/// The Kafka side of the coordinator's state.
#[derive(Debug, Default)]
pub(crate) struct KafkaGroups {
    /// Classic groups by id.
    pub classic: BTreeMap<GroupId, ClassicGroup>,
    /// Offset commits and fetches in flight.
    pub offsets: KafkaOffsets,
    /// DeleteGroups requests waiting for the store.
    pub delete_groups: BTreeMap<u64, admin::DeleteGroupsWait>,
    /// Topic ids (UUID bytes) by name, from the host (for KIP-848 and OffsetCommit v10).
    pub topic_ids: BTreeMap<TopicName, [u8; 16]>,
}

/// Which protocol a group id belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupKind {
    Native,
    Classic,
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
        if self.groups.contains_key(id) {
            Some(GroupKind::Native)
        } else if self.kafka.classic.contains_key(id) {
            Some(GroupKind::Classic)
        } else {
            None
        }
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
            RequestKind::DescribeGroups(r) => self.on_describe_groups(slot, to, r),
            RequestKind::ListGroups(r) => self.on_list_groups(slot, to, r),
            RequestKind::DeleteGroups(r) => self.on_delete_groups(slot, to, r),
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
