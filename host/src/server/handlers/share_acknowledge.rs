//! ShareAcknowledge (API 79, v1; KIP-932): a share-group member's acknowledgements
//! outside a fetch, through its share session (Kafka's
//! `KafkaApis.handleShareAcknowledgeRequest`, `SharePartitionManager
//! .acknowledgeSessionUpdate`).
//!
//! - Session: epoch 0 is INVALID_SHARE_SESSION_EPOCH; −1 applies the
//!   acknowledgements, then closes the session and releases the member's other
//!   records; any other must be the session's epoch. Errors are top-level.
//! - Each partition's acknowledgements are applied all or nothing and are durable
//!   before its `error_code` says NONE: INVALID_REQUEST for malformed batches or
//!   offsets past the share-partition's end offset, INVALID_RECORD_STATE for offsets
//!   not acquired by the member.
//!
//! Authorization as Kafka's: Read on the group (else GROUP_AUTHORIZATION_FAILED for
//! the whole request), Read on each topic (else its partitions are
//! TOPIC_AUTHORIZATION_FAILED).

use std::{collections::BTreeMap, sync::Arc};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        share_acknowledge_response::{
            LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
        },
        ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    },
};
use uuid::Uuid;

use super::share_acks::{self, ids, partition_log};
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::Broker,
    clock::now_ms,
    server::reply::Reply,
    share::{sessions::SessionKey, ShareKey},
};

fn top_level(error: ResponseError) -> Reply {
    let mut response = ShareAcknowledgeResponse::default();
    response.error_code = error.code();
    Reply::new(response, error.code())
}

/// Handles ShareAcknowledge v1 (module docs); runs on the blocking pool (each
/// partition's state is written to the offset store before it is answered).
pub fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    request: ShareAcknowledgeRequest,
) -> Reply {
    let delivery = &broker.share;
    let (group, member) = match ids(
        request.group_id.as_ref().map(|g| g.0.as_str()),
        request.member_id.as_deref(),
    ) {
        Ok(ids) => ids,
        Err(e) => return top_level(e),
    };
    if !authz.allows(ResourceType::Group, &group, AclOperation::Read) {
        return top_level(ResponseError::GroupAuthorizationFailed);
    }
    let key = SessionKey {
        group: Arc::clone(&group),
        member: Arc::clone(&member),
    };
    let closing = match delivery
        .sessions()
        .acknowledge(&key, request.share_session_epoch, now_ms())
    {
        Ok(closing) => closing,
        Err(e) => return top_level(e.error()),
    };
    let leader = broker.identity.node.id;
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    let mut first_error = 0;
    for topic in &request.topics {
        let resolved = broker.topics.get_by_id(topic.topic_id);
        let readable = resolved
            .as_ref()
            .map(|t| authz.allows(ResourceType::Topic, &t.name, AclOperation::Read));
        for p in &topic.partitions {
            let result = match (&resolved, readable) {
                (None, _) => Err(ResponseError::UnknownTopicId),
                (Some(_), Some(false)) => Err(ResponseError::TopicAuthorizationFailed),
                (Some(t), _) => partition_log(broker, t, p.partition_index).and_then(|log| {
                    let batches: Vec<(i64, i64, Vec<i8>)> = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                        .collect();
                    let share_key = ShareKey {
                        group: Arc::clone(&group),
                        topic: Arc::from(t.name.as_str()),
                        partition: p.partition_index,
                    };
                    share_acks::apply(
                        delivery,
                        &share_key,
                        topic.topic_id,
                        &log,
                        &member,
                        &batches,
                    )
                }),
            };
            let code = result.err().map_or(0, |e| e.code());
            if first_error == 0 {
                first_error = code;
            }
            let mut data = PartitionData::default();
            data.partition_index = p.partition_index;
            data.error_code = code;
            data.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(leader)
                .with_leader_epoch(0);
            topics.entry(topic.topic_id).or_default().push(data);
        }
    }
    if closing {
        delivery.sessions().remove(&key);
        delivery
            .partitions
            .release_member(&group, &member, now_ms());
    }
    let mut response = ShareAcknowledgeResponse::default();
    response.responses = topics
        .into_iter()
        .map(|(topic_id, partitions)| {
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect();
    Reply::new(response, first_error)
}
