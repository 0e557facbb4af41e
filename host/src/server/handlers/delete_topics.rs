//! DeleteTopics: by name (v1–v5 `topic_names`; v6 `topics` with a name) or by id (v6).

use kafka_protocol::{
    error::ResponseError,
    messages::{
        delete_topics_response::DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
        TopicName,
    },
    protocol::StrBytes,
};
use uuid::Uuid;

use super::errors::first_error;
use crate::{
    broker::{Partitions, TopicError},
    server::reply::Reply,
};

/// Handles DeleteTopics v1–v6.
///
/// Authorization (Kafka's `KafkaApis.handleDeleteTopicsRequest`): Delete on each topic,
/// else TOPIC_AUTHORIZATION_FAILED; a topic named by id that the principal may not
/// even describe is answered with a null name.
pub fn handle(
    partitions: Partitions<'_>,
    authz: &crate::authz::RequestAuthz,
    version: i16,
    request: DeleteTopicsRequest,
) -> Reply {
    use crate::authz::{AclOperation, ResourceType};
    let wanted: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::nil()))
            .collect()
    };
    let results: Vec<DeletableTopicResult> = wanted
        .into_iter()
        .map(|(name, id)| {
            let mut r = DeletableTopicResult::default();
            let name = match name {
                Some(n) => Some(n.0.to_string()),
                None => partitions.topics.get_by_id(id).map(|t| t.name.clone()),
            };
            let by_id = !id.is_nil() && name.is_some();
            let mut hide_name = false;
            let outcome = match &name {
                None => Err(ResponseError::UnknownTopicId),
                Some(n) if !authz.allows(ResourceType::Topic, n, AclOperation::Delete) => {
                    hide_name = by_id
                        && !authz.allows_quietly(ResourceType::Topic, n, AclOperation::Describe);
                    Err(ResponseError::TopicAuthorizationFailed)
                }
                // Kafka's internal topic names are reserved (`topics::INTERNAL_TOPICS`).
                Some(n) if crate::broker::topics::is_internal(n) => {
                    Err(ResponseError::InvalidRequest)
                }
                Some(n) => match partitions
                    .identity
                    .cluster()
                    .map_or(Ok(()), |c| {
                        c.delete_topic(n).map_err(super::errors::cluster_refusal)
                    })
                    .map_err(|(code, _)| code)
                    .and_then(|()| {
                        partitions.topics.delete(n).map_err(|e| match e {
                            TopicError::Unknown(_) => ResponseError::UnknownTopicOrPartition,
                            e => {
                                tracing::warn!("deleting topic `{n}`: {e}");
                                ResponseError::KafkaStorageError
                            }
                        })
                    }) {
                    Ok(topic) => {
                        if version >= 6 {
                            r.topic_id = topic.id;
                        }
                        Ok(())
                    }
                    Err(code) => Err(code),
                },
            };
            r.name = name
                .filter(|_| !hide_name)
                .map(|n| TopicName(StrBytes::from_string(n)));
            if let Err(e) = outcome {
                r.error_code = e.code();
            }
            r
        })
        .collect();
    let error = first_error(results.iter().map(|r| r.error_code));
    let mut response = DeleteTopicsResponse::default();
    response.responses = results;
    Reply::new(response, error)
}
