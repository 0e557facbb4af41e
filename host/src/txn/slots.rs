//! Cluster mode: keeps the transaction coordinator's slots equal to the coordinator
//! slots this broker owns (`Cluster::owned`, set by the cluster task after the slot
//! guard, docs/design.md "Cluster mode"). A slot owned and not taken over yet is taken
//! over ([`TxnCoordinator::take_over_slot`]: its coordinator epoch bumped, its records
//! loaded, its Prepare* transactions queued for completion); a slot taken over and no
//! longer owned is given up. The cluster task itself stops serving a lost slot at once
//! (`ZkTxnStore::give_up`); this task then drops its state. Runs after every change of
//! the cluster view or of the slots owned, and at least every [`TICK`].

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::coordinator::TxnCoordinator;
use crate::cluster::Cluster;

/// The longest time between two passes.
pub const TICK: Duration = Duration::from_millis(500);

/// Runs until `stop` becomes true.
pub async fn run(txn: Arc<TxnCoordinator>, cluster: Arc<Cluster>, mut stop: watch::Receiver<bool>) {
    let mut view = cluster.subscribe();
    loop {
        let t = Arc::clone(&txn);
        let c = Arc::clone(&cluster);
        let _ = tokio::task::spawn_blocking(move || reconcile(&t, &c)).await;
        tokio::select! {
            _ = view.changed() => {}
            _ = cluster.owned_changed.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One pass. Blocking (ZooKeeper reads of the slots taken over).
fn reconcile(txn: &TxnCoordinator, cluster: &Cluster) {
    txn.forget_dropped();
    let owned = cluster
        .owned
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let served = txn.slots();
    for &slot in served.difference(&owned) {
        txn.give_up_slot(slot);
    }
    for &slot in owned.difference(&served) {
        let taken = txn.take_over_slot(slot);
        if let (Ok(_), Some(zk)) = (&taken, txn.zk_store()) {
            // Its staged transactional offsets can be restored now.
            zk.offsets_slots.wake();
        }
        if let Err(e) = taken {
            crate::warn_limited!(
                "txn.take_over_failed",
                slot,
                "taking transaction slot over: {e}; retrying"
            );
        }
    }
}
