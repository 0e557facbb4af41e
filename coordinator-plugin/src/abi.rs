//! Conversions between the core's [`Input`]/[`Output`] and the plugin ABI's
//! [`CoordinatorInput`]/[`CoordinatorOutput`]: the one place where ABI types meet the
//! core's domain types (besides the assignor call in [`crate::assignors`]).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use bytes::Bytes;
use drover_abi::assignor::Assignment;
use drover_abi::coordinator::AssignorJob_TO;
use drover_abi::coordinator::{
    CoordinatorInput, CoordinatorOutput, PendingTxnOffsets as AbiPendingTxnOffsets,
};
use drover_abi::offset_store::OffsetRecord;
use drover_abi::std_types::{RArc, RResult, RString, RVec};
use drover_abi::TopicInfo;
use drover_abi::{ErrorKind, PluginError};
use kafka_protocol::ResponseError;

use crate::assignor_job::AssignorJob;
use crate::assignors::to_abi_partitions;
use crate::io::{FetchScope, Input, Output};
use crate::types::{ConnId, GroupId, OffsetEntry, OpId, StoreError, TopicName, TopicPartition};
use crate::types::{PendingTxnOffsets, TxnProducer};

/// The topic list of `TopicsChanged` / `CoordinatorStartup::topics`.
pub fn topics_from_abi(topics: &[TopicInfo]) -> BTreeMap<TopicName, u32> {
    topics
        .iter()
        .map(|t| (TopicName::new(t.name.as_str()), t.partitions))
        .collect()
}

/// A stored offset as the core sees it. The store keeps "no metadata" as an empty
/// string, read back as `Some("")`.
pub fn offset_from_abi(r: &OffsetRecord) -> OffsetEntry {
    OffsetEntry {
        group: GroupId::new(r.group.as_str()),
        tp: TopicPartition::new(r.topic.as_str(), r.partition),
        offset: r.offset,
        metadata: Some(r.metadata.to_string()),
    }
}

/// An offset to commit, stamped with the broker's wall clock (ms since the epoch); the
/// core has no clock of its own.
pub fn offset_to_abi(e: &OffsetEntry, commit_time_ms: i64) -> OffsetRecord {
    OffsetRecord {
        group: RString::from(e.group.as_str()),
        topic: RString::from(e.tp.topic.as_str()),
        partition: e.tp.partition,
        offset: e.offset,
        metadata: RString::from(e.metadata.as_deref().unwrap_or("")),
        commit_time_ms,
    }
}

/// Converts a host input; `None` for one this core has no use for (the SDK already
/// routed variants unknown to this build to `unknown_input`).
pub fn input_from_abi(input: CoordinatorInput) -> Option<Input> {
    Some(match input {
        CoordinatorInput::Frame { conn, bytes } => Input::Frame {
            conn: ConnId(conn),
            bytes: Bytes::from(bytes.into_vec()),
        },
        CoordinatorInput::ConnectionClosed { conn } => {
            Input::ConnectionClosed { conn: ConnId(conn) }
        }
        CoordinatorInput::TimerFired => Input::Timer,
        CoordinatorInput::TopicsChanged { topics } => Input::TopicsChanged {
            topics: topics_from_abi(&topics),
        },
        CoordinatorInput::OffsetsCommitted { op, result } => Input::OffsetsCommitted {
            op: OpId(op),
            result: result.into_result().map_err(StoreError::from),
        },
        CoordinatorInput::OffsetsDeleted { op, result } => Input::OffsetsDeleted {
            op: OpId(op),
            result: result.into_result().map_err(StoreError::from),
        },
        CoordinatorInput::ConnectionOpened { conn, peer } => Input::ConnectionOpened {
            conn: ConnId(conn),
            peer: peer.into_string(),
        },
        CoordinatorInput::TopicIds { topics } => Input::TopicIds {
            ids: topics
                .iter()
                .map(|t| (crate::types::TopicName::new(t.name.as_str()), t.id))
                .collect(),
        },
        CoordinatorInput::OffsetsFetched { op, result } => Input::OffsetsFetched {
            op: OpId(op),
            result: result
                .into_result()
                .map(|records| records.iter().map(offset_from_abi).collect())
                .map_err(StoreError::from),
        },
        CoordinatorInput::PartitionStats { brokers, topics } => Input::PartitionStats(
            crate::PartitionStats::new(brokers.into_vec(), topics.into_vec()),
        ),
        CoordinatorInput::TxnOffsetsStaged { op, error_code } => Input::TxnOffsetsStaged {
            op: OpId(op),
            result: error_from_code(error_code),
        },
        CoordinatorInput::TxnOffsetsPending { pending } => Input::TxnOffsetsPending {
            pending: pending.iter().map(pending_from_abi).collect(),
        },
        CoordinatorInput::TxnCompleted {
            op,
            producer_id,
            producer_epoch,
            committed,
        } => Input::TxnCompleted {
            op,
            producer: TxnProducer {
                id: producer_id,
                epoch: producer_epoch,
            },
            committed,
        },
        CoordinatorInput::AssignorDone { op, result } => Input::AssignorDone {
            call: op,
            result: result.into_result(),
        },
        CoordinatorInput::TopicScope { conn, topics } => Input::TopicScope {
            conn: ConnId(conn),
            topics: topics
                .iter()
                .map(|t| crate::types::TopicName::new(t.as_str()))
                .collect(),
        },
        _ => return None,
    })
}

/// An [`AssignorJob`] as the host runs it ([`CoordinatorOutput::RunAssignor`]).
struct HostJob(Arc<AssignorJob>);

impl drover_abi::coordinator::AssignorJob for HostJob {
    fn run(&self) -> RResult<Assignment, PluginError> {
        // The call runs on a host thread: a panic must not unwind into it.
        std::panic::catch_unwind(AssertUnwindSafe(|| self.0.run()))
            .unwrap_or_else(|_| {
                Err(PluginError::new(
                    ErrorKind::Panicked,
                    format!("the assignor call of `{}` panicked", self.0.assignor()),
                ))
            })
            .into()
    }

    fn group(&self) -> RString {
        RString::from(self.0.group().as_str())
    }

    fn assignor(&self) -> RString {
        RString::from(self.0.assignor())
    }
}

/// A Kafka error code from the host: 0 is success; a code this build does not know is
/// UNKNOWN_SERVER_ERROR.
fn error_from_code(code: i16) -> Result<(), ResponseError> {
    match code {
        0 => Ok(()),
        c => Err(ResponseError::try_from_code(c).unwrap_or(ResponseError::UnknownServerError)),
    }
}

/// Pending transactional offsets as the core sees them; offsets of another group than
/// the record's are dropped.
pub fn pending_from_abi(p: &AbiPendingTxnOffsets) -> PendingTxnOffsets {
    let group = GroupId::new(p.group.as_str());
    PendingTxnOffsets {
        offsets: p
            .offsets
            .iter()
            .map(offset_from_abi)
            .filter(|e| e.group == group)
            .collect(),
        group,
        producer: TxnProducer {
            id: p.producer_id,
            epoch: p.producer_epoch,
        },
    }
}

/// Pending transactional offsets for the host, stamped with the broker's wall clock.
pub fn pending_to_abi(p: &PendingTxnOffsets, commit_time_ms: i64) -> AbiPendingTxnOffsets {
    AbiPendingTxnOffsets {
        group: RString::from(p.group.as_str()),
        producer_id: p.producer.id,
        producer_epoch: p.producer.epoch,
        offsets: p
            .offsets
            .iter()
            .map(|e| offset_to_abi(e, commit_time_ms))
            .collect(),
    }
}

/// A fetch or delete scope as the ABI carries it: empty for the whole group.
fn scope_to_abi(scope: FetchScope) -> RVec<drover_abi::TopicPartitions> {
    match scope {
        FetchScope::WholeGroup => RVec::new(),
        FetchScope::Partitions(mut list) => {
            list.sort();
            to_abi_partitions(list.iter())
        }
    }
}

/// Converts an output for the host. Events have no ABI form: the wrapper logs them and
/// gets `None`. [`FetchScope::WholeGroup`] becomes a fetch with an empty partition list,
/// which the host driver executes as `OffsetStore::fetch_group`.
pub fn output_to_abi(output: Output, commit_time_ms: i64) -> Option<CoordinatorOutput> {
    Some(match output {
        Output::Answer { conn, bytes } => CoordinatorOutput::Answer {
            conn: conn.0,
            bytes: RVec::from(bytes.to_vec()),
        },
        Output::Push { conn, bytes } => CoordinatorOutput::Push {
            conn: conn.0,
            bytes: RVec::from(bytes.to_vec()),
        },
        Output::ChannelOpened { conn } => CoordinatorOutput::ChannelOpened { conn: conn.0 },
        Output::CloseConnection { conn } => CoordinatorOutput::CloseConnection { conn: conn.0 },
        Output::CommitOffsets { op, records } => CoordinatorOutput::CommitOffsets {
            op: op.0,
            records: records
                .iter()
                .map(|r| offset_to_abi(r, commit_time_ms))
                .collect(),
        },
        Output::FetchOffsets { op, group, scope } => CoordinatorOutput::FetchOffsets {
            op: op.0,
            group: RString::from(group.as_str()),
            partitions: scope_to_abi(scope),
        },
        Output::DeleteOffsets { op, group, scope } => CoordinatorOutput::DeleteOffsets {
            op: op.0,
            group: RString::from(group.as_str()),
            partitions: scope_to_abi(scope),
        },
        Output::Metric { counter, value } => CoordinatorOutput::Metric {
            name: RString::from(counter.name()),
            value: i64::try_from(value).unwrap_or(i64::MAX),
        },
        Output::StageTxnOffsets { op, pending } => CoordinatorOutput::StageTxnOffsets {
            op: op.0,
            pending: pending_to_abi(&pending, commit_time_ms),
        },
        Output::TxnCompletionApplied { op } => CoordinatorOutput::TxnCompletionApplied { op },
        Output::RunAssignor(job) => CoordinatorOutput::RunAssignor {
            op: job.id(),
            job: RArc::new(AssignorJob_TO::from_value(HostJob(job), TD_Opaque)),
        },
        Output::WantTopicScope { conn } => CoordinatorOutput::WantTopicScope { conn: conn.0 },
        Output::Event(event) => {
            event.log();
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_abi::std_types::RResult::{RErr, ROk};
    use drover_abi::PluginError;

    #[test]
    fn inputs_and_outputs_convert() {
        let input = input_from_abi(CoordinatorInput::Frame {
            conn: 7,
            bytes: vec![1, 2].into(),
        })
        .unwrap();
        assert!(
            matches!(input, Input::Frame { conn: ConnId(7), ref bytes } if bytes[..] == [1, 2])
        );
        let input = input_from_abi(CoordinatorInput::OffsetsCommitted {
            op: 3,
            result: RErr(PluginError::unavailable("down")),
        })
        .unwrap();
        assert!(
            matches!(input, Input::OffsetsCommitted { op: OpId(3), result: Err(ref e) } if e.retriable)
        );
        let record = OffsetRecord {
            group: "g".into(),
            topic: "t".into(),
            partition: 1,
            offset: 42,
            metadata: "".into(),
            commit_time_ms: 5,
        };
        let input = input_from_abi(CoordinatorInput::OffsetsFetched {
            op: 4,
            result: ROk(vec![record.clone()].into()),
        });
        let Some(Input::OffsetsFetched {
            result: Ok(found), ..
        }) = input
        else {
            panic!()
        };
        assert_eq!(found[0].offset, 42);
        let out = output_to_abi(
            Output::CommitOffsets {
                op: OpId(9),
                records: found,
            },
            5,
        );
        let Some(CoordinatorOutput::CommitOffsets { op: 9, records }) = out else {
            panic!()
        };
        assert_eq!(records[0], record);
        let out = output_to_abi(
            Output::FetchOffsets {
                op: OpId(1),
                group: GroupId::new("g"),
                scope: FetchScope::Partitions(vec![
                    TopicPartition::new("b", 0),
                    TopicPartition::new("a", 1),
                    TopicPartition::new("a", 0),
                ]),
            },
            0,
        );
        let Some(CoordinatorOutput::FetchOffsets { partitions, .. }) = out else {
            panic!()
        };
        assert_eq!(partitions.len(), 2);
        assert_eq!(partitions[0].partitions.as_slice(), &[0, 1]);
        assert!(output_to_abi(
            Output::Event(crate::io::Event::ConnectionRejected {
                conn: ConnId(1),
                message: String::new()
            }),
            0
        )
        .is_none());
    }
}
