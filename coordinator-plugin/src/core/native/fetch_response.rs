//! The FetchOffsets answer, built from the offset store's result.

use std::collections::BTreeMap;

use drover_protocol as proto;
use kafka_protocol::ResponseError;

use crate::core::Ctx;

use crate::types::{GroupId, OffsetEntry, StoreError, TopicName, TopicPartition};
use crate::wire;

/// Builds a FetchOffsets response from the store's answer.
pub(in crate::core) fn fetch_response(
    cx: &Ctx,
    group: &GroupId,
    topics: Option<Vec<proto::TopicPartitions>>,
    result: Result<Vec<OffsetEntry>, StoreError>,
) -> proto::FetchOffsetsResponse {
    let entries = match result {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(%group, error = %e, "offset fetch failed");
            return proto::FetchOffsetsResponse {
                error_code: wire::error_code(ResponseError::CoordinatorNotAvailable),
                topics: Vec::new(),
            };
        }
    };
    let found: BTreeMap<TopicPartition, (i64, Option<String>)> = entries
        .into_iter()
        .filter(|e| &e.group == group)
        .map(|e| (e.tp, (e.offset, Some(e.metadata.unwrap_or_default()))))
        .collect();
    let topics = match topics {
        Some(requested) => requested
            .into_iter()
            .map(|t| {
                let topic = TopicName::new(&t.topic);
                let partitions = t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let tp = TopicPartition {
                            topic: topic.clone(),
                            partition: p,
                        };
                        match found.get(&tp) {
                            Some((offset, metadata)) => proto::FetchedOffset {
                                partition: p,
                                offset: *offset,
                                metadata: metadata.clone(),
                                error_code: wire::error_code(None),
                            },
                            None => proto::FetchedOffset {
                                partition: p,
                                offset: proto::FetchedOffset::NO_OFFSET,
                                metadata: None,
                                error_code: if cx.exists(&tp) {
                                    wire::error_code(None)
                                } else {
                                    wire::error_code(ResponseError::UnknownTopicOrPartition)
                                },
                            },
                        }
                    })
                    .collect();
                proto::TopicFetchedOffsets {
                    topic: t.topic,
                    partitions,
                }
            })
            .collect(),
        None => {
            let mut out: Vec<proto::TopicFetchedOffsets> = Vec::new();
            for (tp, (offset, metadata)) in found {
                let entry = proto::FetchedOffset {
                    partition: tp.partition,
                    offset,
                    metadata,
                    error_code: wire::error_code(None),
                };
                match out.last_mut() {
                    Some(last) if last.topic == tp.topic.as_str() => last.partitions.push(entry),
                    _ => out.push(proto::TopicFetchedOffsets {
                        topic: tp.topic.to_string(),
                        partitions: vec![entry],
                    }),
                }
            }
            out
        }
    };
    proto::FetchOffsetsResponse {
        error_code: wire::error_code(None),
        topics,
    }
}
