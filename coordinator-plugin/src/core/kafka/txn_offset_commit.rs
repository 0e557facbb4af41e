//! TxnOffsetCommit (API 28, KIP-98; KIP-447 fencing from v3): offsets a transactional
//! producer commits for a group, visible only if its transaction commits.
//!
//! The request takes the one offsets path (`core::commits`): the group that has the id
//! validates it as a transactional commit (Kafka's
//! `OffsetMetadataManager.commitTransactionalOffset`: a classic group checks member and
//! generation, a KIP-848 group the member epoch — a stale one is ILLEGAL_GENERATION —,
//! a group id no group has takes a simple commit, generation −1, and refuses any other
//! with ILLEGAL_GENERATION); then each partition is checked as an OffsetCommit's
//! (UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE), the producer against the
//! group's pending offsets (`txn_offsets::TxnOffsets::check_producer`) and the
//! pending-offset bounds (COORDINATOR_LOAD_IN_PROGRESS). The accepted offsets go to the
//! host as `Output::StageTxnOffsets`; its result (`Input::TxnOffsetsStaged`) answers
//! the request — its error for every accepted partition if it failed — and, on
//! success, holds the offsets as pending for (group, producer id) until the
//! transaction's outcome (`core::txn_completion`).

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use crate::core::commits::{CommitApi, CommitAuthor};
use crate::core::conn::SlotRef;
use crate::core::txn_offsets::PendingBounds;
use crate::core::{Coordinator, Op};
use crate::io::Output;
use crate::kafka_wire::KafkaReplyTo;
use crate::types::TxnProducer;
use crate::types::{GroupId, OffsetEntry, OpId, PendingTxnOffsets, TopicName, TopicPartition};

/// A TxnOffsetCommit waiting for the host to record its offsets with the transaction.
#[derive(Debug)]
pub(crate) struct StageWait {
    slot: SlotRef,
    to: KafkaReplyTo,
    /// The answer, every partition's error code set but for the host's outcome.
    response: TxnOffsetCommitResponse,
    /// (topic index, partition index) of the accepted partitions.
    accepted: Vec<(usize, usize)>,
    /// The accepted offsets, as staged.
    pending: PendingTxnOffsets,
    /// Entries reserved in the pending-offset bounds.
    reserved: usize,
}

impl Coordinator {
    pub(super) fn on_txn_offset_commit(
        &mut self,
        slot: SlotRef,
        to: KafkaReplyTo,
        r: TxnOffsetCommitRequest,
    ) {
        let group = r.group_id.to_string();
        let producer = TxnProducer {
            id: r.producer_id.0,
            epoch: r.producer_epoch,
        };
        // Before v3 the request has no member id or generation: the defaults (empty,
        // −1) make it a simple commit, as in Kafka.
        let check = self
            .validate_offset_commit(
                &group,
                &CommitAuthor {
                    member_id: r.member_id.as_str(),
                    instance_id: r.group_instance_id.as_deref(),
                    generation: r.generation_id,
                    api: CommitApi::KafkaTxn,
                },
            )
            .map(|_| ())
            .and_then(|()| self.groups.txn.check_producer(&group, producer));
        let gid = GroupId::new(&group);
        let mut response = TxnOffsetCommitResponse::default();
        let mut accepted = Vec::new();
        let mut offsets = Vec::new();
        for (ti, t) in r.topics.into_iter().enumerate() {
            let topic = TopicName::new(t.name.as_str());
            let mut out = TxnOffsetCommitResponseTopic::default();
            out.name = t.name.clone();
            for (pi, p) in t.partitions.into_iter().enumerate() {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: p.partition_index,
                };
                let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                let code = self.partition_commit_error(check, &tp, metadata.as_deref());
                if code.is_none() {
                    accepted.push((ti, pi));
                    offsets.push(OffsetEntry {
                        group: gid.clone(),
                        tp,
                        offset: p.committed_offset,
                        metadata,
                    });
                }
                let mut po = TxnOffsetCommitResponsePartition::default();
                po.partition_index = p.partition_index;
                po.error_code = code.map_or(0, |e| e.code());
                out.partitions.push(po);
            }
            response.topics.push(out);
        }
        if offsets.is_empty() {
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::TxnOffsetCommit(response));
        }
        let bounds = PendingBounds {
            per_group: self.cx.config.max_pending_txn_offsets_per_group,
            total: self.cx.config.max_pending_txn_offsets,
        };
        let reserved = self.groups.txn.new_entries(&group, producer.id, &offsets);
        if let Err(e) = self.groups.txn.reserve(&gid, reserved, bounds) {
            tracing::warn!(
                group = %gid,
                %producer,
                partitions = offsets.len(),
                "TxnOffsetCommit refused: too many pending transactional offsets \
                 (max_pending_txn_offsets_per_group, max_pending_txn_offsets)"
            );
            let mut wait = StageWait {
                slot,
                to,
                response,
                accepted,
                pending: PendingTxnOffsets {
                    group: gid,
                    producer,
                    offsets: Vec::new(),
                },
                reserved: 0,
            };
            wait.fail(e);
            return self
                .cx
                .respond_kafka(slot, to, ResponseKind::TxnOffsetCommit(wait.response));
        }
        let pending = PendingTxnOffsets {
            group: gid,
            producer,
            offsets,
        };
        let op = self.cx.add_op(Op::StageTxn(StageWait {
            slot,
            to,
            response,
            accepted,
            pending: pending.clone(),
            reserved,
        }));
        self.cx.output(Output::StageTxnOffsets { op, pending });
    }

    /// The host's answer to [`Output::StageTxnOffsets`] `op` ([`Op::StageTxn`]): on
    /// success the offsets become pending for their group and producer; the request is
    /// answered either way.
    pub(crate) fn on_txn_staged(
        &mut self,
        op: OpId,
        mut wait: StageWait,
        result: Result<(), ResponseError>,
    ) {
        let offsets = std::mem::take(&mut wait.pending.offsets);
        let p = &wait.pending;
        match result {
            Ok(()) if self.owns(p.group.as_str()) => {
                self.groups
                    .txn
                    .add(&p.group, p.producer, offsets, wait.reserved);
            }
            Ok(()) => {
                // The group's slot was lost meanwhile: the transaction holds the
                // offsets for the slot's new owner.
                self.groups.txn.release(&p.group, wait.reserved);
            }
            Err(e) => {
                tracing::debug!(%op, group = %p.group, producer = %p.producer, error = ?e, "transactional offsets not staged");
                self.groups.txn.release(&p.group, wait.reserved);
                wait.fail(e);
            }
        }
        self.cx.respond_kafka(
            wait.slot,
            wait.to,
            ResponseKind::TxnOffsetCommit(wait.response),
        );
    }
}

impl StageWait {
    /// Every accepted partition gets `error`.
    fn fail(&mut self, error: ResponseError) {
        for &(t, p) in &self.accepted {
            self.response.topics[t].partitions[p].error_code = error.code();
        }
    }
}
