//! The acquisition-lock timer (KIP-932: a record whose lock runs out is available
//! again, or archived at the delivery-count limit): a task that sleeps until the
//! earliest lock deadline of any share-partition — at most [`MAX_SLEEP`], so locks
//! taken meanwhile are seen — and ends the locks due, on the blocking pool (the
//! changes are written to the offset store).

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::ShareDelivery;
use crate::clock::now_ms;

/// The longest the timer sleeps: locks taken while it sleeps end at most this late.
pub const MAX_SLEEP: Duration = Duration::from_millis(500);

/// Runs the timer until `stopping` turns true.
pub async fn run(delivery: Arc<ShareDelivery>, mut stopping: watch::Receiver<bool>) {
    loop {
        let due = {
            let delivery = Arc::clone(&delivery);
            tokio::task::spawn_blocking(move || delivery.partitions.expire(now_ms()))
                .await
                .ok()
                .flatten()
        };
        let sleep = due.map_or(MAX_SLEEP, |deadline| {
            let wait = deadline.saturating_sub(now_ms()).max(1);
            Duration::from_millis(u64::try_from(wait).unwrap_or(0)).min(MAX_SLEEP)
        });
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
    }
}
