//! Request validation: the checks a ConsumerGroupHeartbeat must pass before it touches
//! a group (Kafka's `GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid`)
//! and the member-epoch fencing check (`throwIfConsumerGroupMemberEpochIsInvalid`).

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use super::group::ConsumerGroup;
use super::member::Member;
use super::{
    failure, Failure, HeartbeatRequest, CLIENT_MEMBER_ID_VERSION, JOIN_EPOCH, LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
};
use crate::types::TopicPartition;

/// Whether `s` is empty or only whitespace.
fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The check of a heartbeat's `RackId` (KIP-848 and share groups): not blank (Kafka),
/// and at most 255 bytes — Drover's bound, the same as a native consumer's rack
/// (docs/protocol.md §5.1): the rack is kept per member and handed to every assignor
/// run. Kafka has none. The error is INVALID_REQUEST's message.
pub(in crate::core::kafka) fn check_rack_id(rack: Option<&str>) -> Result<(), &'static str> {
    match rack {
        Some(r) if blank(r) => Err("RackId can't be empty."),
        Some(r) if r.len() > drover_protocol::MAX_MEMBER_STRING_LEN => {
            Err("RackId is longer than 255 bytes.")
        }
        _ => Ok(()),
    }
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
pub(super) fn validate(req: &HeartbeatRequest) -> Result<(), Failure> {
    let invalid = |m: &str| Err(failure(ResponseError::InvalidRequest, m));
    if (req.version >= CLIENT_MEMBER_ID_VERSION
        || req.member_epoch > 0
        || req.member_epoch == LEAVE_EPOCH)
        && blank(&req.member_id)
    {
        return invalid("MemberId can't be empty.");
    }
    if blank(req.group.as_str()) {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return invalid("InstanceId can't be empty.");
    }
    check_rack_id(req.rack_id.as_deref()).or_else(&invalid)?;
    if req.rebalance_timeout_ms < -1 {
        return invalid("RebalanceTimeoutMs is invalid.");
    }
    match req.member_epoch {
        JOIN_EPOCH => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned_partitions.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        STATIC_LEAVE_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < STATIC_LEAVE_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    Ok(())
}

impl ConsumerGroup {
    /// Checks a heartbeat's epoch against the member's (Kafka's
    /// `throwIfConsumerGroupMemberEpochIsInvalid`).
    pub(super) fn check_epoch(
        m: &Member,
        received: i32,
        owned: Option<&BTreeSet<TopicPartition>>,
    ) -> Result<(), Failure> {
        if received == JOIN_EPOCH {
            return Ok(());
        }
        if received > m.epoch {
            return Err(failure(
                ResponseError::FencedMemberEpoch,
                format!(
                    "the member epoch {received} is newer than the coordinator's ({}); the member must abandon its partitions and rejoin",
                    m.epoch
                ),
            ));
        }
        if received < m.epoch {
            let lost_response =
                received == m.previous_epoch && owned.is_some_and(|o| o.is_subset(&m.assigned));
            if !lost_response {
                return Err(failure(
                    ResponseError::FencedMemberEpoch,
                    format!(
                        "the member epoch {received} is older than the coordinator's ({}); the member must abandon its partitions and rejoin",
                        m.epoch
                    ),
                ));
            }
        }
        Ok(())
    }
}
