//! A transaction's outcome for its offsets (coordinator ABI 3.4), after Kafka's
//! `OffsetMetadataManager.replayEndTransactionMarker`: `Input::TxnCompleted` commits
//! the producer's pending offsets of every group through the one commit queue
//! (`core::commits`, so at most one `CommitOffsets` per group stays in flight) or
//! drops them, and answers `Output::TxnCompletionApplied` once every group's part is
//! durable (or at once, with nothing to do: a repeated outcome is idempotent). And
//! `Input::TxnOffsetsPending`: offsets the host recorded earlier, held as pending again
//! after a restart.
//!
//! A part whose store write fails is queued again: a committed transaction's offsets
//! are never given up, and stay unstable for OffsetFetch's `require_stable` meanwhile.

use std::collections::BTreeMap;

use super::commits::{Queued, TxnCommitWait};
use super::Coordinator;
use crate::io::Output;
use crate::types::{PendingTxnOffsets, TxnProducer};

/// Per host completion id, the groups whose part is still on its way to the store.
#[derive(Debug, Default)]
pub(crate) struct Completions {
    remaining: BTreeMap<u64, usize>,
}

impl Coordinator {
    /// `Input::TxnOffsetsPending`: held as open, without staging; offsets of a group id
    /// this coordinator does not own are ignored (its owner gets them).
    pub(super) fn on_txn_pending(&mut self, pending: Vec<PendingTxnOffsets>) {
        for p in pending {
            if p.group.as_str().is_empty() || !self.owns(p.group.as_str()) {
                continue;
            }
            let offsets = p
                .offsets
                .into_iter()
                .filter(|e| e.group == p.group)
                .collect();
            self.groups.txn.add(&p.group, p.producer, offsets, 0);
        }
    }

    /// `Input::TxnCompleted` `op`: see the module docs.
    pub(super) fn on_txn_completed(&mut self, op: u64, producer: TxnProducer, committed: bool) {
        let taken = self.groups.txn.take_producer(producer);
        if !committed || taken.is_empty() {
            tracing::debug!(%producer, committed, groups = taken.len(), "transaction ended");
            self.cx.output(Output::TxnCompletionApplied { op });
            return;
        }
        self.completions.remaining.insert(op, taken.len());
        for (group, txn) in taken {
            let records: Vec<_> = txn.offsets.into_values().collect();
            self.groups
                .txn
                .start_committing(&group, records.iter().map(|r| &r.tp));
            self.queue_commit(
                group,
                Queued::Txn(TxnCommitWait {
                    completion: op,
                    records,
                }),
            );
        }
    }

    /// One group's part of completion `op` is durable (or had nothing left to write).
    pub(crate) fn txn_part_done(&mut self, op: u64) {
        let Some(n) = self.completions.remaining.get_mut(&op) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.completions.remaining.remove(&op);
            self.cx.output(Output::TxnCompletionApplied { op });
        }
    }
}
