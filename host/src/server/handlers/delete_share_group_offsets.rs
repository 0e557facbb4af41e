//! DeleteShareGroupOffsets (API 92, v0; KIP-932): deletes an empty share group's
//! share-partition state of whole topics, so its next consumers start where
//! `share.auto.offset.reset` says, as `kafka-share-groups.sh --delete-offsets` and the
//! Admin client's `deleteShareGroupOffsets` do (Kafka's
//! `handleDeleteShareGroupOffsetsRequest` and
//! `GroupCoordinatorService.deleteShareGroupOffsets`).
//!
//! - Authorization: Delete on the group, else GROUP_AUTHORIZATION_FAILED for the
//!   request; Read on each topic, else the topic is TOPIC_AUTHORIZATION_FAILED.
//! - Only for a share group without members ([`super::share_group_state::require_empty`]):
//!   GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or the coordinator's error, as the request's
//!   error with no topics.
//! - Per topic: an unknown one, or one of which the group has no state, is
//!   UNKNOWN_TOPIC_OR_PARTITION; otherwise every saved share-partition state of the
//!   topic is deleted from the offset store (both stores during a swap) while the
//!   share-partitions in memory are held, then dropped
//!   ([`crate::share::SharePartitions::replace_durable`]). A failed store:
//!   COORDINATOR_NOT_AVAILABLE for the topic.
//!
//! Bounds: at most [`MAX_TOPICS`] topics (INVALID_REQUEST for the request).

use std::sync::Arc;

use drover_abi::TopicPartitions;
use kafka_protocol::{
    error::ResponseError,
    messages::{
        delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic,
        DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, TopicName,
    },
    protocol::StrBytes,
};

use super::share_group_state::{self, store_failed, Refusal};
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::Broker,
    server::reply::Reply,
};

/// The most topics one request may name.
pub const MAX_TOPICS: usize = 1000;

/// Handles DeleteShareGroupOffsets v0.
pub async fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    request: DeleteShareGroupOffsetsRequest,
) -> Reply {
    let group = request.group_id.as_str().to_owned();
    if request.topics.len() > MAX_TOPICS {
        return refused((
            ResponseError::InvalidRequest,
            format!("{} topics; at most {MAX_TOPICS}", request.topics.len()),
        ));
    }
    if let Err(refusal) = share_group_state::check_group(authz, &group, AclOperation::Delete) {
        return refused(refusal);
    }
    let topics: Vec<(TopicName, bool)> = request
        .topics
        .into_iter()
        .map(|t| {
            let allowed = authz.allows(
                ResourceType::Topic,
                t.topic_name.as_str(),
                AclOperation::Read,
            );
            (t.topic_name, allowed)
        })
        .collect();
    if let Err(refusal) = share_group_state::require_empty(broker, &group).await {
        return refused(refusal);
    }
    let answered = {
        let broker = Arc::clone(broker);
        tokio::task::spawn_blocking(move || {
            topics
                .into_iter()
                .map(|(name, allowed)| {
                    let outcome = if allowed {
                        delete_topic(&broker, &group, name.as_str())
                    } else {
                        let e = ResponseError::TopicAuthorizationFailed;
                        Err((e, e.to_string()))
                    };
                    let id = broker.topics.get(name.as_str()).map(|t| t.id);
                    topic_answer(name, id.unwrap_or_default(), outcome.err())
                })
                .collect::<Vec<_>>()
        })
        .await
    };
    let responses = match answered {
        Ok(r) => r,
        Err(e) => return refused((ResponseError::UnknownServerError, e.to_string())),
    };
    let error = super::errors::first_error(responses.iter().map(|t| t.error_code));
    let mut response = DeleteShareGroupOffsetsResponse::default();
    response.responses = responses;
    Reply::new(response, error)
}

/// Deletes `group`'s share-partition state of `topic` (module docs).
fn delete_topic(broker: &Broker, group: &str, topic: &str) -> Result<(), Refusal> {
    let Some(t) = broker.topics.get(topic) else {
        let e = ResponseError::UnknownTopicOrPartition;
        return Err((e, e.to_string()));
    };
    let stores = share_group_state::stores(broker)?;
    let every = [TopicPartitions {
        topic: topic.into(),
        partitions: (0..t.partitions.len() as i32).collect::<Vec<_>>().into(),
    }];
    let saved = stores
        .read_share_state(group, &every)
        .map_err(store_failed)?;
    if saved.is_empty() {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("share group {group} has no offsets of topic {topic} to delete"),
        ));
    }
    let held = [TopicPartitions {
        topic: topic.into(),
        partitions: saved.iter().map(|r| r.partition).collect::<Vec<_>>().into(),
    }];
    broker
        .share
        .partitions
        .replace_durable(
            group,
            |k| &*k.topic == topic,
            || stores.delete_share_state(group, &held),
        )
        .map(|_| ())
        .map_err(store_failed)
}

fn topic_answer(
    name: TopicName,
    id: uuid::Uuid,
    error: Option<Refusal>,
) -> DeleteShareGroupOffsetsResponseTopic {
    let mut t = DeleteShareGroupOffsetsResponseTopic::default();
    t.topic_name = name;
    t.topic_id = id;
    if let Some((e, message)) = error {
        t.error_code = e.code();
        t.error_message = Some(StrBytes::from_string(message));
    }
    t
}

/// The request refused as a whole: the error, no topics (Kafka's error response).
fn refused((error, message): Refusal) -> Reply {
    let mut response = DeleteShareGroupOffsetsResponse::default();
    response.error_code = error.code();
    response.error_message = Some(StrBytes::from_string(message));
    Reply::new(response, error.code())
}
