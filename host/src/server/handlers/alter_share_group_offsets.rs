//! AlterShareGroupOffsets (API 91, v0; KIP-932): sets share-partitions' start offsets
//! (SPSO) of an empty share group, as `kafka-share-groups.sh --reset-offsets` and the
//! Admin client's `alterShareGroupOffsets` do (Kafka's `handleAlterShareGroupOffsetsRequest`
//! and `GroupCoordinatorService.alterShareGroupOffsets`).
//!
//! - Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED for the request;
//!   Read on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED.
//! - An unknown topic, or a partition the topic does not have, is
//!   UNKNOWN_TOPIC_OR_PARTITION; a negative start offset is INVALID_REQUEST (Drover's
//!   choice: −1 is "not initialised" in Kafka's share state, and resetting to it is
//!   DeleteShareGroupOffsets's job).
//! - Only for a share group without members ([`super::share_group_state::require_empty`]):
//!   GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or the coordinator's error, as the request's
//!   error with no topics (Kafka's error response).
//! - Each share-partition's state is written anew, as Kafka's share coordinator
//!   initialises it: the start offset asked, no records in flight, the state epoch one
//!   above the saved one; delivery counts start over. One write for the request, while
//!   the share-partitions in memory are held and then dropped
//!   ([`crate::share::SharePartitions::replace_durable`]), so the next ShareFetch starts
//!   at the new offset (a start below the log start moves up to it on load). A failed
//!   write: COORDINATOR_NOT_AVAILABLE for those partitions.
//!
//! Bounds: at most [`MAX_PARTITIONS`] partitions in all (INVALID_REQUEST for the request).

use std::{collections::BTreeMap, sync::Arc};

use drover_abi::{ShareStateRecord, TopicPartitions};
use kafka_protocol::{
    error::ResponseError,
    messages::{
        alter_share_group_offsets_response::{
            AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
        },
        AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, TopicName,
    },
    protocol::StrBytes,
};

use super::share_group_state::{self, store_failed, Refusal, MAX_PARTITIONS};
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::Broker,
    clock::now_ms,
    server::reply::Reply,
    share::ShareKey,
};

/// One topic's answer being built: its id and each partition's error (`None`: altered).
struct TopicAnswer {
    name: TopicName,
    id: uuid::Uuid,
    partitions: Vec<(i32, Option<Refusal>)>,
}

/// Handles AlterShareGroupOffsets v0.
pub async fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    request: AlterShareGroupOffsetsRequest,
) -> Reply {
    let group = request.group_id.as_str().to_owned();
    let named: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    if named > MAX_PARTITIONS {
        return refused((
            ResponseError::InvalidRequest,
            format!("{named} partitions; at most {MAX_PARTITIONS}"),
        ));
    }
    if let Err(refusal) = share_group_state::check_group(authz, &group, AclOperation::Read) {
        return refused(refusal);
    }
    // Per topic, in request order: refused ones answered without being looked at again.
    let mut answers = Vec::with_capacity(request.topics.len());
    let mut asked: Asked = Vec::new();
    for t in &request.topics {
        let name = t.topic_name.as_str();
        let topic = broker.topics.get(name);
        let refusal = if !authz.allows(ResourceType::Topic, name, AclOperation::Read) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else if topic.is_none() {
            Some(ResponseError::UnknownTopicOrPartition)
        } else {
            None
        };
        let count = topic.as_ref().map_or(0, |t| t.partitions.len());
        let index = answers.len();
        let partitions = t
            .partitions
            .iter()
            .enumerate()
            .map(|(at, p)| {
                let error = match refusal {
                    Some(e) => Some(e),
                    None if p.partition_index < 0 || p.partition_index as usize >= count => {
                        Some(ResponseError::UnknownTopicOrPartition)
                    }
                    None if p.start_offset < 0 => Some(ResponseError::InvalidRequest),
                    None => {
                        asked.push(Asked1 {
                            topic: index,
                            at,
                            partition: p.partition_index,
                            start_offset: p.start_offset,
                        });
                        None
                    }
                };
                (
                    p.partition_index,
                    error.map(|e| match e {
                        ResponseError::InvalidRequest => {
                            (e, format!("start offset {} is negative", p.start_offset))
                        }
                        e => (e, e.to_string()),
                    }),
                )
            })
            .collect();
        answers.push(TopicAnswer {
            name: t.topic_name.clone(),
            id: topic.map(|t| t.id).unwrap_or_default(),
            partitions,
        });
    }
    if let Err(refusal) = share_group_state::require_empty(broker, &group).await {
        return refused(refusal);
    }
    if !asked.is_empty() {
        let broker = Arc::clone(broker);
        let topics: Vec<(String, [u8; 16])> = answers
            .iter()
            .map(|a| (a.name.to_string(), *a.id.as_bytes()))
            .collect();
        let written = tokio::task::spawn_blocking(move || {
            write(&broker, &group, &topics, &asked).map(|()| asked)
        })
        .await;
        match written {
            Ok(Ok(_)) => {}
            Ok(Err((refusal, asked))) => {
                for a in asked {
                    answers[a.topic].partitions[a.at].1 = Some(refusal.clone());
                }
            }
            Err(e) => {
                return refused((ResponseError::UnknownServerError, e.to_string()));
            }
        }
    }
    let responses: Vec<_> = answers.into_iter().map(topic_answer).collect();
    let error = super::errors::first_error(
        responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
    );
    let mut response = AlterShareGroupOffsetsResponse::default();
    response.responses = responses;
    Reply::new(response, error)
}

/// A partition to alter: where it is in the answer (`topic` also indexes the
/// topics passed to [`write`]), and its new start offset.
#[derive(Debug, Clone, Copy)]
struct Asked1 {
    topic: usize,
    at: usize,
    partition: i32,
    start_offset: i64,
}

type Asked = Vec<Asked1>;

/// Writes the new states of `asked` of `group`, the share-partitions in memory held and
/// dropped around it.
fn write(
    broker: &Broker,
    group: &str,
    topics: &[(String, [u8; 16])],
    asked: &Asked,
) -> Result<(), (Refusal, Asked)> {
    let fail = |r: Refusal| (r, asked.clone());
    let stores = share_group_state::stores(broker).map_err(fail)?;
    // The saved state epochs, to write one above.
    let mut by_topic: BTreeMap<usize, Vec<i32>> = BTreeMap::new();
    for a in asked {
        by_topic.entry(a.topic).or_default().push(a.partition);
    }
    let mut epochs: BTreeMap<(usize, i32), i32> = BTreeMap::new();
    for (&index, partitions) in &by_topic {
        let (name, id) = &topics[index];
        let asked_here = [TopicPartitions {
            topic: name.as_str().into(),
            partitions: partitions.clone().into(),
        }];
        let saved = stores
            .read_share_state(group, &asked_here)
            .map_err(|e| fail(store_failed(e)))?;
        for r in saved {
            if r.topic_id == *id || r.topic_id == [0; 16] {
                epochs.insert((index, r.partition), r.state_epoch);
            }
        }
    }
    let now = now_ms();
    let batch: Vec<ShareStateRecord> = asked
        .iter()
        .map(|a| {
            let (name, id) = &topics[a.topic];
            ShareStateRecord {
                group: group.into(),
                topic: name.as_str().into(),
                partition: a.partition,
                topic_id: *id,
                state_epoch: epochs
                    .get(&(a.topic, a.partition))
                    .map_or(0, |e| e.saturating_add(1)),
                start_offset: a.start_offset,
                runs: Vec::new().into(),
                write_time_ms: now,
            }
        })
        .collect();
    let keys: std::collections::HashSet<(&str, i32)> = batch
        .iter()
        .map(|r| (r.topic.as_str(), r.partition))
        .collect();
    let affected = |k: &ShareKey| keys.contains(&(&*k.topic, k.partition));
    broker
        .share
        .partitions
        .replace_durable(group, affected, || stores.write_share_state(&batch))
        .map_err(|e| fail(store_failed(e)))
}

fn topic_answer(a: TopicAnswer) -> AlterShareGroupOffsetsResponseTopic {
    let mut t = AlterShareGroupOffsetsResponseTopic::default();
    t.topic_name = a.name;
    t.topic_id = a.id;
    t.partitions = a
        .partitions
        .into_iter()
        .map(|(index, error)| {
            let mut p = AlterShareGroupOffsetsResponsePartition::default();
            p.partition_index = index;
            if let Some((e, message)) = error {
                p.error_code = e.code();
                p.error_message = Some(StrBytes::from_string(message));
            }
            p
        })
        .collect();
    t
}

/// The request refused as a whole: the error, no topics (Kafka's error response).
fn refused((error, message): Refusal) -> Reply {
    let mut response = AlterShareGroupOffsetsResponse::default();
    response.error_code = error.code();
    response.error_message = Some(StrBytes::from_string(message));
    Reply::new(response, error.code())
}
