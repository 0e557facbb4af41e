//! Kafka's group administration APIs over every kind of group: DescribeGroups,
//! ListGroups (with the state and type filters of KIP-518 and KIP-848) and
//! DeleteGroups.
//!
//! Kafka names a group's type `classic` or `consumer` (KIP-848); Drover's native groups
//! are listed with type `native` and protocol type `consumer` (they are consumer groups:
//! Kafka tools such as librdkafka's admin client list only groups of that protocol
//! type), their states mapped to Kafka's names (`Stable`, `PreparingRebalance` while a
//! rebalance runs, `Empty`), and their members' subscriptions and assignments encoded as
//! Kafka's `consumer` protocol metadata, so `kafka-consumer-groups --describe` shows
//! them.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopicPartition;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    ListGroupsRequest, ListGroupsResponse, ResponseKind,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::offsets::DeleteWait;
use crate::core::conn::SlotRef;
use crate::core::groups::{Group, NATIVE_PROTOCOL_TYPE};
use crate::core::{Coordinator, Op};
use crate::io::{FetchScope, Output};
use crate::kafka_wire::KafkaReplyTo;
use crate::types::{GroupId, OpId, StoreError};

/// Kafka's `consumer` protocol encoding (a version, then the message) at v0.
fn consumer_protocol(message: &impl Encodable) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    // v0 of both messages has no field that can fail to encode.
    let _ = message.encode(&mut out, 0);
    out.freeze()
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub group: String,
    pub protocol_type: String,
    pub state: &'static str,
    pub group_type: &'static str,
}

/// A DeleteGroups request waiting for the store.
#[derive(Debug)]
pub(crate) struct DeleteGroupsWait {
    slot: SlotRef,
    to: KafkaReplyTo,
    results: Vec<DeletableGroupResult>,
    /// Whether the coordinator knew the group (else: not found unless it had offsets).
    known: Vec<bool>,
    remaining: usize,
}

impl Coordinator {
    /// Every group the coordinator serves, in id order, as ListGroups reports it.
    pub(crate) fn list_kafka(&self) -> Vec<Listed> {
        self.groups
            .iter()
            .map(|(id, g)| {
                let summary = g.summary();
                Listed {
                    group: id.to_string(),
                    protocol_type: summary.protocol_type,
                    state: summary.state,
                    group_type: summary.group_type,
                }
            })
            .collect()
    }

    pub(super) fn on_list_groups(&mut self, slot: SlotRef, to: KafkaReplyTo, r: ListGroupsRequest) {
        let states: Vec<String> = r.states_filter.iter().map(|s| s.to_lowercase()).collect();
        let types: Vec<String> = r.types_filter.iter().map(|s| s.to_lowercase()).collect();
        let mut response = ListGroupsResponse::default();
        response.groups = self
            .list_kafka()
            .into_iter()
            .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
            .filter(|g| types.is_empty() || types.contains(&g.group_type.to_string()))
            .map(|g| {
                let mut l = ListedGroup::default();
                l.group_id = s(g.group).into();
                l.protocol_type = s(g.protocol_type);
                l.group_state = s(g.state);
                l.group_type = s(g.group_type);
                l
            })
            .collect();
        self.cx
            .respond_kafka(slot, to, ResponseKind::ListGroups(response));
    }

    pub(super) fn on_describe_groups(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: DescribeGroupsRequest,
    ) {
        let mut response = DescribeGroupsResponse::default();
        for id in r.groups {
            response
                .groups
                .push(self.describe_kafka(id.as_str(), to.version));
        }
        self.cx
            .respond_kafka(slot, to, ResponseKind::DescribeGroups(response));
    }

    fn describe_kafka(&self, id: &str, version: i16) -> DescribedGroup {
        let mut d = DescribedGroup::default();
        d.group_id = s(id).into();
        d.authorized_operations = i32::MIN;
        let error = |d: &mut DescribedGroup, e: ResponseError, message: String| {
            d.error_code = e.code();
            if version >= 6 {
                d.error_message = Some(s(message));
            }
        };
        if id.is_empty() {
            error(
                &mut d,
                ResponseError::InvalidGroupId,
                "empty group id".into(),
            );
            return d;
        }
        if !self.owns(id) {
            error(
                &mut d,
                ResponseError::NotCoordinator,
                self.not_coordinator_message(id),
            );
            return d;
        }
        // Each group type decides how DescribeGroups shows it.
        let g = match self.groups.get(id) {
            Some(Group::Classic(g)) => g,
            Some(Group::Consumer(_) | Group::Share(_)) => {
                // Kafka 4: DescribeGroups describes classic groups only.
                error(
                    &mut d,
                    ResponseError::GroupIdNotFound,
                    format!("group {id} is not a classic group"),
                );
                return d;
            }
            Some(Group::Native(_)) => return self.describe_native(d, id),
            None => {
                // Kafka 4: an unknown group is GROUP_ID_NOT_FOUND from v6, `Dead` before.
                if version >= 6 {
                    error(
                        &mut d,
                        ResponseError::GroupIdNotFound,
                        format!("group {id} not found"),
                    );
                } else {
                    d.group_state = s("Dead");
                }
                return d;
            }
        };
        d.group_state = s(g.state.name());
        d.protocol_type = s(g.protocol_type.clone().unwrap_or_default());
        let protocol = g.protocol_name.clone().unwrap_or_default();
        d.protocol_data = s(protocol.clone());
        for m in g.members.values() {
            let mut dm = DescribedGroupMember::default();
            dm.member_id = s(m.member_id.clone());
            dm.group_instance_id = if version >= 4 {
                m.instance_id.clone().map(s)
            } else {
                None
            };
            dm.client_id = s(m.client_id.clone());
            dm.client_host = s(m.client_host.clone());
            dm.member_metadata = m.metadata(&protocol).cloned().unwrap_or_default();
            dm.member_assignment = m.assignment.clone();
            d.members.push(dm);
        }
        d
    }

    /// DescribeGroups of native group `id`: its consumers as a `consumer` protocol
    /// group's members.
    fn describe_native(&self, mut d: DescribedGroup, id: &str) -> DescribedGroup {
        if let Some(snapshot) = self.group(id) {
            let state = self.groups.get(id).map_or("Empty", |g| g.summary().state);
            d.group_state = s(state);
            d.protocol_type = s(NATIVE_PROTOCOL_TYPE);
            d.protocol_data = s(snapshot.assignor.unwrap_or_default());
            for m in snapshot.members {
                let mut dm = DescribedGroupMember::default();
                dm.member_id = s(m.consumer.to_string());
                dm.client_id = s(m.consumer.to_string());
                dm.client_host = s(m.host);
                let mut sub = ConsumerProtocolSubscription::default();
                sub.topics = m.topics.iter().map(|t| s(t.as_str())).collect();
                dm.member_metadata = consumer_protocol(&sub);
                let mut assignment = ConsumerProtocolAssignment::default();
                for tp in &m.owned {
                    match assignment.assigned_partitions.last_mut() {
                        Some(t) if t.topic.as_str() == tp.topic.as_str() => {
                            t.partitions.push(tp.partition)
                        }
                        _ => {
                            let mut t = AssignedTopicPartition::default();
                            t.topic = s(tp.topic.as_str()).into();
                            t.partitions.push(tp.partition);
                            assignment.assigned_partitions.push(t);
                        }
                    }
                }
                dm.member_assignment = consumer_protocol(&assignment);
                d.members.push(dm);
            }
        }
        d
    }

    pub(super) fn on_delete_groups(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: DeleteGroupsRequest,
    ) {
        let mut wait = DeleteGroupsWait {
            slot,
            to,
            results: Vec::new(),
            known: Vec::new(),
            remaining: 0,
        };
        let wait_id = self.kafka.offsets.next_wait();
        let mut outputs = Vec::new();
        for (index, name) in r.groups_names.into_iter().enumerate() {
            let id = name.to_string();
            let mut result = DeletableGroupResult::default();
            result.group_id = name;
            // Whether the group exists, before the checks below delete an empty KIP-848
            // group (an existing group without offsets is deleted, not "not found").
            // A group id with only pending transactional offsets counts as a group, as
            // Kafka's simple group made by the TxnOffsetCommit does.
            let known = self.group_kind(&id).is_some() || self.groups.txn.has_group(&id);
            let error = if id.is_empty() {
                Some(ResponseError::InvalidGroupId)
            } else if !self.owns(&id) {
                Some(ResponseError::NotCoordinator)
            } else if let Err(e) = self.delete_consumer_group(&id) {
                Some(e)
            } else if let Err(e) = self.delete_share_group(&id) {
                Some(e)
            } else if self
                .groups
                .get(id.as_str())
                .is_some_and(|g| !g.may_be_dropped())
            {
                Some(ResponseError::NonEmptyGroup)
            } else {
                None
            };
            wait.known.push(known);
            if let Some(e) = error {
                result.error_code = e.code();
            } else {
                self.drop_empty_group(&id);
                // Its pending transactional offsets go with it (Kafka's tombstones of a
                // deleted group remove them): their transactions write nothing for it.
                self.groups.txn.drop_group(&id);
                let op = self.cx.add_op(Op::DeleteOffsets(DeleteWait::Group {
                    wait: wait_id,
                    index,
                }));
                outputs.push(Output::DeleteOffsets {
                    op,
                    group: GroupId::new(&id),
                    scope: FetchScope::WholeGroup,
                });
                wait.remaining += 1;
            }
            wait.results.push(result);
        }
        if wait.remaining == 0 {
            return self.finish_delete_groups(wait);
        }
        self.kafka.delete_groups.insert(wait_id, wait);
        self.cx.outputs(outputs);
    }

    /// DeleteGroups of a KIP-848 group: refused while it has members. `Ok` for a group
    /// of another kind (checked by the caller).
    fn delete_consumer_group(&mut self, id: &str) -> Result<(), ResponseError> {
        if self.groups.consumer(id).is_none() {
            return Ok(());
        }
        self.kafka.consumer.delete(&mut self.groups, id)
    }

    /// DeleteGroups of a share group: refused while it has members. `Ok` for a group
    /// of another kind.
    fn delete_share_group(&mut self, id: &str) -> Result<(), ResponseError> {
        if self.groups.share(id).is_none() {
            return Ok(());
        }
        self.kafka.share.delete(&mut self.groups, id)
    }

    /// Forgets an empty group (DeleteGroups), checked by the caller
    /// ([`Group::may_be_dropped`](crate::core::groups::Group::may_be_dropped)).
    fn drop_empty_group(&mut self, id: &str) {
        if self.groups.get(id).is_some_and(|g| g.may_be_dropped()) {
            self.groups.remove(id);
        }
    }

    fn finish_delete_groups(&mut self, wait: DeleteGroupsWait) {
        let mut response = DeleteGroupsResponse::default();
        response.results = wait.results;
        self.cx
            .respond_kafka(wait.slot, wait.to, ResponseKind::DeleteGroups(response));
    }

    /// The store's answer to an [`Output::DeleteOffsets`] ([`Op::DeleteOffsets`]): the
    /// number of offsets deleted.
    pub(crate) fn on_offsets_deleted(
        &mut self,
        op: OpId,
        wait: DeleteWait,
        result: Result<u64, StoreError>,
    ) {
        if let Err(e) = &result {
            tracing::warn!(%op, error = %e, "offset delete failed");
        }
        match wait {
            DeleteWait::Offsets {
                slot,
                to,
                mut response,
                known,
            } => {
                match result {
                    Err(_) => response.error_code = ResponseError::CoordinatorNotAvailable.code(),
                    Ok(0) if !known => {
                        response.error_code = ResponseError::GroupIdNotFound.code();
                        response.topics.clear();
                    }
                    Ok(_) => {}
                }
                self.cx
                    .respond_kafka(slot, to, ResponseKind::OffsetDelete(response));
            }
            DeleteWait::Group { wait, index } => {
                let Some(w) = self.kafka.delete_groups.get_mut(&wait) else {
                    return;
                };
                w.results[index].error_code = match result {
                    Err(_) => ResponseError::CoordinatorNotAvailable.code(),
                    Ok(0) if !w.known[index] => ResponseError::GroupIdNotFound.code(),
                    Ok(_) => 0,
                };
                w.remaining -= 1;
                if w.remaining == 0 {
                    if let Some(w) = self.kafka.delete_groups.remove(&wait) {
                        self.finish_delete_groups(w);
                    }
                }
            }
        }
    }
}
