//! The driver's side of transactional offsets (coordinator ABI 3.4): staging through
//! the broker's [`TxnOffsetLedger`], transactions' outcomes and restored offsets sent
//! to the coordinator, and the pending-offset metrics. Only a coordinator of ABI 3.4 or
//! later is sent any of it; an older one never gets TxnOffsetCommit either
//! ([`super::client::CoordinatorClient::serves`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_abi::coordinator::{CoordinatorInput, PendingTxnOffsets};
use tokio::sync::oneshot;

use super::{Coordinator, Driver, Msg};
use crate::coordination::txn_ledger::{Staging, TxnIds, TxnOffsetLedger, NO_LEDGER};

/// The coordinator ABI minor (of major 3) that added transactional offset commits.
pub(crate) const TXN_MINOR: u32 = 4;

/// What the driver keeps about transactions.
pub(super) struct TxnState {
    /// Where staged offsets are recorded; `None`: no transaction coordinator.
    pub ledger: Option<Arc<dyn TxnOffsetLedger>>,
    /// The runtime the ledger's futures run on (the one the driver was started from).
    pub runtime: Option<tokio::runtime::Handle>,
    /// The driver's own mailbox, for a staging's result.
    pub mailbox: flume::WeakSender<Msg>,
    /// The next `TxnCompleted` operation id.
    next_op: u64,
    /// Per operation id, the completion's producer id, outcome and waiter.
    completions: BTreeMap<u64, (i64, bool, oneshot::Sender<()>)>,
    /// Per staging operation, its producer id and partitions.
    staging: BTreeMap<u64, (i64, usize)>,
    /// Per producer id, the partitions staged or restored and not yet resolved.
    pending: BTreeMap<i64, usize>,
    /// The transactional ids read from TxnOffsetCommit requests, for the ledger.
    pub ids: TxnIds,
    /// Per producer id, completions waiting for its stagings in flight to be answered
    /// (so a staging answered after its transaction's outcome cannot leave offsets
    /// pending that no outcome resolves): (epoch, committed, waiter).
    deferred: BTreeMap<i64, Vec<(i16, bool, oneshot::Sender<()>)>>,
}

impl TxnState {
    pub(super) fn new(
        ledger: Option<Arc<dyn TxnOffsetLedger>>,
        mailbox: flume::WeakSender<Msg>,
    ) -> TxnState {
        TxnState {
            ledger,
            runtime: tokio::runtime::Handle::try_current().ok(),
            mailbox,
            next_op: 0,
            completions: BTreeMap::new(),
            staging: BTreeMap::new(),
            pending: BTreeMap::new(),
            ids: TxnIds::default(),
            deferred: BTreeMap::new(),
        }
    }

    fn pending_total(&self) -> usize {
        self.pending.values().sum()
    }
}

impl<C: Coordinator> Driver<C> {
    fn knows_txn(&self) -> bool {
        self.coordinator.abi().minor >= TXN_MINOR
    }

    /// Executes `StageTxnOffsets` `op`: the ledger records the offsets and its code
    /// comes back as [`Msg::TxnStaged`]; with no ledger (or no runtime to run it on) the
    /// result is COORDINATOR_NOT_AVAILABLE at once, pushed on `inputs`.
    pub(super) fn stage_txn_offsets(
        &mut self,
        op: u64,
        pending: PendingTxnOffsets,
        inputs: &mut std::collections::VecDeque<CoordinatorInput>,
    ) {
        self.txn
            .staging
            .insert(op, (pending.producer_id, pending.offsets.len()));
        let (Some(ledger), Some(runtime)) = (&self.txn.ledger, &self.txn.runtime) else {
            if self.txn.ledger.is_some() {
                tracing::error!("transactional offsets cannot be staged: no runtime");
            }
            self.txn.staging.remove(&op);
            self.deps.metrics.txn_offset_stage(false);
            inputs.push_back(CoordinatorInput::TxnOffsetsStaged {
                op,
                error_code: NO_LEDGER,
            });
            return;
        };
        let transactional_id = self
            .txn
            .ids
            .get(pending.producer_id, pending.group.as_str());
        let staged = ledger.stage(Staging {
            transactional_id,
            pending,
        });
        let mailbox = self.txn.mailbox.clone();
        runtime.spawn(async move {
            let error_code = staged.await;
            if let Some(tx) = mailbox.upgrade() {
                let _ = tx.send_async(Msg::TxnStaged { op, error_code }).await;
            }
        });
    }

    /// The ledger's answer to staging `op`.
    pub(super) fn txn_staged(&mut self, op: u64, error_code: i16) {
        if let Some((producer, n)) = self.txn.staging.remove(&op) {
            if error_code == 0 {
                *self.txn.pending.entry(producer).or_default() += n;
                self.deps
                    .metrics
                    .txn_pending_offsets(self.txn.pending_total());
            }
        }
        self.deps.metrics.txn_offset_stage(error_code == 0);
        self.feed(CoordinatorInput::TxnOffsetsStaged { op, error_code });
        let producers: Vec<i64> = self.txn.deferred.keys().copied().collect();
        for producer in producers {
            if !self.staging_in_flight(producer) {
                for (epoch, committed, done) in
                    self.txn.deferred.remove(&producer).unwrap_or_default()
                {
                    self.complete_txn(producer, epoch, committed, done);
                }
            }
        }
    }

    fn staging_in_flight(&self, producer_id: i64) -> bool {
        self.txn.staging.values().any(|(p, _)| *p == producer_id)
    }

    /// A transaction ended: the coordinator applies it (a coordinator older than 3.4
    /// holds no transactional offsets: done at once).
    pub(super) fn complete_txn(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        committed: bool,
        done: oneshot::Sender<()>,
    ) {
        if !self.knows_txn() {
            let _ = done.send(());
            return;
        }
        if self.staging_in_flight(producer_id) {
            self.txn.deferred.entry(producer_id).or_default().push((
                producer_epoch,
                committed,
                done,
            ));
            return;
        }
        self.txn.ids.forget_producer(producer_id);
        self.txn.next_op += 1;
        let op = self.txn.next_op;
        self.txn
            .completions
            .insert(op, (producer_id, committed, done));
        self.feed(CoordinatorInput::TxnCompleted {
            op,
            producer_id,
            producer_epoch,
            committed,
        });
    }

    /// The coordinator's `TxnCompletionApplied` `op`.
    pub(super) fn txn_completion_applied(&mut self, op: u64) {
        let Some((producer, committed, done)) = self.txn.completions.remove(&op) else {
            tracing::warn!(
                op,
                "the coordinator applied an unknown transaction completion"
            );
            return;
        };
        self.txn.pending.remove(&producer);
        self.deps
            .metrics
            .txn_pending_offsets(self.txn.pending_total());
        self.deps.metrics.txn_completion(committed);
        let _ = done.send(());
    }

    /// Offsets the transaction coordinator recorded earlier, for a coordinator of 3.4
    /// or later.
    pub(super) fn restore_txn_offsets(&mut self, pending: Vec<PendingTxnOffsets>) {
        if !self.knows_txn() || pending.is_empty() {
            return;
        }
        for p in &pending {
            *self.txn.pending.entry(p.producer_id).or_default() += p.offsets.len();
        }
        self.deps
            .metrics
            .txn_pending_offsets(self.txn.pending_total());
        self.feed(CoordinatorInput::TxnOffsetsPending {
            pending: pending.into(),
        });
    }
}
