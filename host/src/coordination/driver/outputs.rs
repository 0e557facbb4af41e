//! Executing the coordinator's outputs: frames to connections (through
//! [`super::super::conns`]), closed connections, offset-store operations to the store
//! worker's queue, counters to the metrics. Never blocks; what an output leads to
//! (a connection closed, a store that is gone) is queued as the next inputs.

use std::collections::VecDeque;

use abi_stable::std_types::RResult;
use bytes::Bytes;
use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorOutput},
    PluginError,
};

use super::{Coordinator, Driver};
use crate::{
    coordination::{conns::Delivery, store_worker::StoreOp},
    server::conn_id::ConnId,
};

impl<C: Coordinator> Driver<C> {
    /// Counts an answered request; closes a channel whose consumer does not read, or a
    /// connection on which the coordinator broke its contract.
    fn delivered(
        &mut self,
        conn: ConnId,
        delivery: Delivery,
        inputs: &mut VecDeque<CoordinatorInput>,
    ) {
        let metrics = &self.deps.metrics;
        match delivery {
            Delivery::Answered { api_key } => {
                if drover_protocol::ApiKey::is_native_code(api_key) {
                    metrics.native_request(api_key)
                } else if let Ok(key) = kafka_protocol::messages::ApiKey::try_from(api_key) {
                    // Kafka group APIs count with the broker's own requests (their error
                    // codes are inside the answer: counted as 0 here).
                    metrics.request(crate::server::dispatch::api_name(key), 0)
                }
            }
            Delivery::Pushed | Delivery::Gone => {}
            Delivery::Overflow => {
                tracing::info!(
                    conn,
                    "closing a coordinator channel: the consumer does not read it"
                );
                self.conns.close(conn);
                inputs.push_back(CoordinatorInput::ConnectionClosed { conn });
            }
            Delivery::Violation(what) => {
                crate::warn_limited!(
                    "coordinator-contract",
                    conn,
                    "closing a connection: the coordinator plugin sent {what}"
                );
                metrics.coordinator_event("contract_violations", 1);
                if self.conns.close(conn) {
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
                let delivery = self.conns.answer(conn, Bytes::from(bytes.into_vec()));
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
                if self.conns.close(conn) {
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
            // A variant of a later minor than this build: `known_outputs` (plugins::handle)
            // already dropped those; the arm is what the non-exhaustive enum requires.
            _ => {}
        }
    }
}
