//! The periodic task that aborts open transactions past their timeout (Kafka's
//! `transaction.abort.timed.out.transaction.cleanup.interval.ms`) and removes
//! transactional ids idle for `transactional.id.expiration.ms`.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::coordinator::TxnCoordinator;

/// Runs every `interval_ms` until `stop` becomes true.
pub async fn run(
    coordinator: Arc<TxnCoordinator>,
    interval_ms: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let c = Arc::clone(&coordinator);
        let _ = tokio::task::spawn_blocking(move || {
            let now = crate::clock::now_ms();
            if let Err(e) = c.abort_timed_out(now) {
                crate::warn_limited!(
                    "txn.timeouts_failed",
                    "aborting timed-out transactions: {e}"
                );
            }
            if let Err(e) = c.expire(now) {
                crate::warn_limited!("txn.expiry_failed", "expiring transactional ids: {e}");
            }
        })
        .await;
    }
}
