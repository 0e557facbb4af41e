//! The native LeaveGroup and DescribeGroups requests (docs/protocol.md §5.7, §5.8);
//! DescribeGroups v2 describes KIP-848 groups as well, through the one snapshot model.

use drover_protocol as proto;
use drover_protocol::NativeResponse;
use kafka_protocol::ResponseError;

use crate::core::groups::GroupKind;
use crate::core::Coordinator;

use crate::types::{ConnId, ConsumerId};
use crate::wire;

impl Coordinator {
    pub(in crate::core) fn on_leave(
        &mut self,
        conn: ConnId,
        corr: i32,
        r: proto::LeaveGroupRequest,
    ) {
        let slot = self.cx.reserve(conn);
        let error = if r.group_id.is_empty() {
            Some(ResponseError::InvalidGroupId)
        } else if !self.owns(&r.group_id) {
            Some(ResponseError::NotCoordinator)
        } else {
            match self.groups.native_mut(r.group_id.as_str()) {
                Some(g) if g.members.contains_key(r.consumer_id.as_str()) => {
                    let id = ConsumerId::new(&r.consumer_id);
                    self.cx.native(g, |g, env, fx| g.leave(env, fx, &id));
                    None
                }
                _ => Some(ResponseError::UnknownMemberId),
            }
        };
        let response = NativeResponse::LeaveGroup(proto::LeaveGroupResponse {
            error_code: wire::error_code(error),
        });
        self.cx.respond(slot, corr, &response);
    }

    /// The answer to a DescribeGroups request (docs/protocol.md §5.8), built from
    /// [`Coordinator::snapshot`], the one model of native and KIP-848 groups: one entry
    /// per requested id in request order, or, for `groups: None`, one per group the
    /// request's version describes (at most [`proto::MAX_GROUPS_PER_REQUEST`], the
    /// first in id order). v0 and v1 describe native groups only, as before v2; v2
    /// KIP-848 groups too, each entry naming its protocol. An empty id gets
    /// INVALID_GROUP_ID, the id of a group whose slot the coordinator does not own
    /// (cluster mode) NOT_COORDINATOR, and an id of no group the version describes
    /// GROUP_ID_NOT_FOUND, all with empty fields. Arrays longer than the protocol's
    /// caps are cut at the cap (with a warning in the log), so the answer always
    /// encodes. The answer is at the request's version: v1 carries each member's
    /// rack, weight and labels and the partition loads of the last assignment, v2 the
    /// group's protocol.
    pub fn describe_groups(
        &self,
        request: &proto::DescribeGroupsRequest,
    ) -> proto::DescribeGroupsResponse {
        // Before v2 a reader cannot tell a KIP-848 group from a native one.
        let every_kind = request.version >= 2;
        let describe = |id: &str| {
            if id.is_empty() {
                return proto::DescribedGroup::error(
                    id,
                    wire::error_code(ResponseError::InvalidGroupId),
                );
            }
            if !self.owns(id) {
                return proto::DescribedGroup::error(
                    id,
                    wire::error_code(ResponseError::NotCoordinator),
                );
            }
            let snapshot = if every_kind {
                self.snapshot(id)
            } else {
                self.group(id)
            };
            match snapshot {
                Some(snapshot) => wire::group_to_wire(snapshot),
                None => proto::DescribedGroup::error(
                    id,
                    wire::error_code(ResponseError::GroupIdNotFound),
                ),
            }
        };
        let groups = match &request.groups {
            Some(ids) => ids
                .iter()
                .take(proto::MAX_GROUPS_PER_REQUEST)
                .map(|id| describe(id))
                .collect(),
            None => {
                let ids = if every_kind {
                    self.described_group_ids()
                } else {
                    self.groups.ids_of(GroupKind::Native)
                };
                if ids.len() > proto::MAX_GROUPS_PER_REQUEST {
                    tracing::warn!(
                        groups = ids.len(),
                        max = proto::MAX_GROUPS_PER_REQUEST,
                        "DescribeGroups of every group: describing only the first groups by id"
                    );
                }
                ids.iter()
                    .take(proto::MAX_GROUPS_PER_REQUEST)
                    .map(|id| describe(id.as_str()))
                    .collect()
            }
        };
        proto::DescribeGroupsResponse {
            groups,
            version: request.version,
        }
    }
}
