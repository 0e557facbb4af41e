//! Executing the coordinator's outputs: frames to connections (through
//! [`super::super::conns`]), closed connections, offset-store operations to the store
//! worker's queue, counters to the metrics. Never blocks; what an output leads to
//! (a connection closed, a store that is gone) is queued as the next inputs.

use std::collections::VecDeque;

use abi_stable::std_types::RResult;
use bytes::Bytes;
use drover_abi::{
    coordinator::{metrics::CoordinatorCounter, CoordinatorInput, CoordinatorOutput},
    PluginError,
};

use super::{Coordinator, Driver};
use crate::{
    coordination::{answer_errors, conns::Delivery, store_worker::StoreOp},
    server::conn_id::ConnId,
};

/// Why the driver closed a connection, as counted in
/// `drover_connections_closed_by_broker_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CloseReason {
    /// The coordinator's `CloseConnection`: a request it refuses to answer (an
    /// unsupported version, a frame that does not parse, a protocol violation).
    Coordinator,
    /// The coordinator broke its contract on the connection (an answer nobody asked
    /// for, a push on a connection that is not a channel).
    ContractViolation,
    /// A push found the channel's queue full: the consumer does not read.
    Overflow,
    /// The coordinator plugin was taken out of service; consumers must rediscover.
    OutOfService,
}

impl CloseReason {
    /// The metric's `reason` label.
    pub(super) fn label(self) -> &'static str {
        match self {
            CloseReason::Coordinator => "coordinator_closed",
            CloseReason::ContractViolation => "coordinator_contract_violation",
            CloseReason::Overflow => "coordinator_channel_overflow",
            CloseReason::OutOfService => "coordinator_out_of_service",
        }
    }
}

impl<C: Coordinator> Driver<C> {
    /// Closes `conn` for `reason` and counts it; returns whether it was open.
    pub(super) fn close(&mut self, conn: ConnId, reason: CloseReason) -> bool {
        if !self.conns.is_open(conn) {
            return false;
        }
        // Counted before the socket closes: a client that sees the close can read the
        // count at once.
        self.deps
            .metrics
            .connection_closed_by_broker(reason.label());
        self.conns.close(conn)
    }

    /// Counts an answer to a request of `api_key` at `api_version` by the error codes
    /// it carries ([`answer_errors`]); one that does not decode counts as
    /// UNKNOWN_SERVER_ERROR.
    fn count_answer(&self, api_key: i16, api_version: i16, answer: &Bytes) {
        let metrics = &self.deps.metrics;
        if let Some(native) = drover_protocol::ApiKey::from_code(api_key) {
            let counts = answer_errors::native(native, api_version, answer);
            metrics.native_request(api_key, &counts.unwrap_or_else(unknown_error));
        } else if let Ok(key) = kafka_protocol::messages::ApiKey::try_from(api_key) {
            // Kafka group APIs count with the broker's own requests.
            let counts = answer_errors::kafka(key, api_version, answer);
            metrics.request_errors(
                crate::server::api_name::api_name(key),
                &counts.unwrap_or_else(unknown_error),
            );
        }
    }

    /// Closes a channel whose consumer does not read, or a connection on which the
    /// coordinator broke its contract; the coordinator learns of it as its next input.
    fn delivered(
        &mut self,
        conn: ConnId,
        delivery: Delivery,
        inputs: &mut VecDeque<CoordinatorInput>,
    ) {
        match delivery {
            Delivery::Answered { .. } | Delivery::Pushed | Delivery::Gone => {}
            Delivery::Overflow => {
                tracing::info!(
                    conn,
                    "closing a coordinator channel: the consumer does not read it"
                );
                self.close(conn, CloseReason::Overflow);
                inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
            }
            Delivery::Violation(what) => {
                crate::warn_limited!(
                    "coordinator-contract",
                    conn,
                    "closing a connection: the coordinator plugin sent {what}"
                );
                self.deps
                    .metrics
                    .coordinator_event(CoordinatorCounter::ContractViolations.name(), 1);
                if self.close(conn, CloseReason::ContractViolation) {
                    inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
                }
            }
        }
    }

    /// Sends `op` to the store worker; when the worker is gone, queues `failed` (the
    /// operation's result, an error) as the coordinator's next input.
    fn send_to_store(
        &mut self,
        op: StoreOp,
        failed: impl FnOnce(PluginError) -> CoordinatorInput,
        inputs: &mut VecDeque<CoordinatorInput>,
    ) {
        if self.store.ops.send(op).is_err() {
            inputs.push_back(failed(PluginError::unavailable(
                "the offset-store worker has stopped",
            )));
        }
    }

    /// Executes one output; what it leads to goes onto `inputs`.
    // One arm per output reads better than guards folded into the match, which clippy
    // suggests once the non-exhaustive enum needs its wildcard arm.
    #[allow(clippy::collapsible_match)]
    pub(super) fn execute(
        &mut self,
        output: CoordinatorOutput,
        inputs: &mut VecDeque<CoordinatorInput>,
    ) {
        match output {
            CoordinatorOutput::Answer { conn, bytes } => {
                let bytes = Bytes::from(bytes.into_vec());
                let delivery = self.conns.answer(conn, bytes.clone());
                if let Delivery::Answered {
                    api_key,
                    api_version,
                } = delivery
                {
                    self.count_answer(api_key, api_version, &bytes);
                }
                self.delivered(conn, delivery, inputs);
            }
            CoordinatorOutput::Push { conn, bytes } => {
                let delivery = self.conns.push(conn, Bytes::from(bytes.into_vec()));
                self.delivered(conn, delivery, inputs);
            }
            CoordinatorOutput::ChannelOpened { conn } => {
                self.conns.open_channel(conn);
            }
            CoordinatorOutput::CloseConnection { conn } => {
                if self.close(conn, CloseReason::Coordinator) {
                    inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
                }
            }
            CoordinatorOutput::CommitOffsets { op, records } => self.send_to_store(
                StoreOp::Commit { op, records },
                |e| CoordinatorInput::OffsetsCommitted {
                    op,
                    result: RResult::RErr(e),
                },
                inputs,
            ),
            CoordinatorOutput::FetchOffsets {
                op,
                group,
                partitions,
            } => self.send_to_store(
                StoreOp::Fetch {
                    op,
                    group,
                    partitions,
                },
                |e| CoordinatorInput::OffsetsFetched {
                    op,
                    result: RResult::RErr(e),
                },
                inputs,
            ),
            CoordinatorOutput::DeleteOffsets {
                op,
                group,
                partitions,
            } => self.send_to_store(
                StoreOp::Delete {
                    op,
                    group,
                    partitions,
                },
                |e| CoordinatorInput::OffsetsDeleted {
                    op,
                    result: RResult::RErr(e),
                },
                inputs,
            ),
            CoordinatorOutput::Metric { name, value } => {
                self.deps.metrics.coordinator_event(&name, value)
            }
            CoordinatorOutput::StageTxnOffsets { op, pending } => {
                self.stage_txn_offsets(op, pending, inputs)
            }
            CoordinatorOutput::TxnCompletionApplied { op } => self.txn_completion_applied(op),
            CoordinatorOutput::RunAssignor { op, job } => {
                if let Some(failed) = self.assignor_runs.run(op, job) {
                    inputs.push_back(failed);
                }
            }
            // Ignored for a connection without an authorization context (closed, or
            // no authorizer).
            CoordinatorOutput::WantTopicScope { conn } => {
                if let Some(input) = self.topic_scope(conn) {
                    inputs.push_back(input);
                }
            }
            // A variant of a later minor than this build: `known_outputs` (plugins::handle)
            // already dropped those; the arm is what the non-exhaustive enum requires.
            _ => {}
        }
    }
}

/// The counts of an answer that does not decode: one UNKNOWN_SERVER_ERROR (-1).
fn unknown_error() -> answer_errors::ErrorCounts {
    answer_errors::ErrorCounts::from([(-1, 1)])
}
