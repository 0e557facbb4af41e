//! What AlterShareGroupOffsets and DeleteShareGroupOffsets share (KIP-932; Kafka's
//! `GroupCoordinatorShard.alterShareGroupOffsets` / `initiateDeleteShareGroupOffsets`):
//! a share group's offsets change only while it is a share group without members.
//!
//! Membership is the coordinator plugin's (docs/design.md, "Share groups"), so the
//! group's type and members come from it, through the native DescribeGroups v2 the
//! admin API reads groups with (no ABI call of its own). A group the coordinator does
//! not know but whose share-partition state the offset store holds (the coordinator
//! keeps groups in memory: after a restart an empty share group lives on only in its
//! state) is an empty share group.
//!
//! The check and the write are two steps, where Kafka makes them one coordinator write:
//! a member joining in between is not refused (its first fetch may read the state before
//! the change; the change then drops its share-partitions from memory).

use std::sync::Arc;

use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};

use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::Broker,
    offsets::OffsetStores,
};

/// An error answer: the Kafka error and its message.
pub type Refusal = (ResponseError, String);

/// The most partitions (alter) or topics (delete) one request may name, in all; a request
/// naming more is INVALID_REQUEST as a whole.
pub const MAX_PARTITIONS: usize = super::describe_share_group_offsets::MAX_PARTITIONS;

/// The request-level checks of both APIs: a group id (else INVALID_GROUP_ID) on which
/// the principal may do `operation` (else GROUP_AUTHORIZATION_FAILED).
pub fn check_group(
    authz: &RequestAuthz,
    group: &str,
    operation: AclOperation,
) -> Result<(), Refusal> {
    let refused = |e: ResponseError| Err((e, e.to_string()));
    if group.is_empty() {
        return refused(ResponseError::InvalidGroupId);
    }
    if !authz.allows(ResourceType::Group, group, operation) {
        return refused(ResponseError::GroupAuthorizationFailed);
    }
    Ok(())
}

/// Checks that `group` is a share group without members (module docs): GROUP_ID_NOT_FOUND
/// when no group of that id is a share group, NON_EMPTY_GROUP while it has members,
/// the coordinator's error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, …) when it cannot
/// say, COORDINATOR_NOT_AVAILABLE without a coordinator or offset store.
pub async fn require_empty(broker: &Arc<Broker>, group: &str) -> Result<(), Refusal> {
    use drover_protocol::{DescribedGroup, ErrorCode};
    let unavailable = |why: String| (ResponseError::CoordinatorNotAvailable, why);
    let coordinator = broker
        .coordinator()
        .ok_or_else(|| unavailable("no coordinator plugin is running".into()))?;
    let described = coordinator
        .describe_groups(Some(vec![group.to_owned()]))
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let g = described
        .into_iter()
        .find(|g| g.group_id == group)
        .ok_or_else(|| unavailable(format!("the coordinator did not describe `{group}`")))?;
    if g.error_code == ErrorCode::GROUP_ID_NOT_FOUND {
        let broker = Arc::clone(broker);
        let id = group.to_owned();
        let held = tokio::task::spawn_blocking(move || holds_state(&broker, &id))
            .await
            .map_err(|e| unavailable(e.to_string()))??;
        return if held { Ok(()) } else { Err(not_found(group)) };
    }
    if let Some(e) = g.error_code.0.err() {
        return Err((e, format!("describing group `{group}`: {e}")));
    }
    if g.group_type != DescribedGroup::SHARE {
        return Err((
            ResponseError::GroupIdNotFound,
            format!("Group {group} is not a share group."),
        ));
    }
    if !g.members.is_empty() {
        return Err((
            ResponseError::NonEmptyGroup,
            format!(
                "share group {group} has {} members: its offsets change only when it has none",
                g.members.len()
            ),
        ));
    }
    Ok(())
}

fn not_found(group: &str) -> Refusal {
    (
        ResponseError::GroupIdNotFound,
        format!("Share group {group} not found."),
    )
}

/// Whether the offset store holds any share-partition state of `group`.
fn holds_state(broker: &Broker, group: &str) -> Result<bool, Refusal> {
    let first = stores(broker)?
        .group_share_state(group, 1)
        .map_err(store_failed)?;
    Ok(!first.is_empty())
}

/// The open offset stores, or COORDINATOR_NOT_AVAILABLE.
pub fn stores(broker: &Broker) -> Result<Arc<OffsetStores>, Refusal> {
    broker.offsets().ok_or_else(|| {
        (
            ResponseError::CoordinatorNotAvailable,
            "no offset store is open".to_owned(),
        )
    })
}

/// A refusal for a failed share-state read or write.
pub fn store_failed(e: crate::offsets::share_state::ShareStateError) -> Refusal {
    (ResponseError::CoordinatorNotAvailable, e.to_string())
}
