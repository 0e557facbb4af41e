//! Giving freed response memory back to the operating system.
//!
//! Fetch responses are built from buffers of up to tens of MiB. glibc's allocator
//! serves most of them from its per-thread arenas, and memory freed there stays with the
//! process: measured before the response budgets, four clients that never read their
//! fetches left the broker at 629 MiB RSS (from 25 MiB) after they were disconnected.
//! The budgets bound the peak (server/budget.rs); this task returns what the peak left
//! behind: once a second, if the queued response bytes reached [`TRIM_PEAK_BYTES`] and
//! have since fallen to a quarter of that peak or less, it calls `malloc_trim(0)` on the
//! blocking pool (a few ms; it releases the free pages of every arena).

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::budget::ResponseBudget;

/// Peaks of queued response bytes below this are left to the allocator: 64 MiB.
pub const TRIM_PEAK_BYTES: usize = 64 * 1024 * 1024;

/// How often the peak is looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// Runs until `shutdown` becomes true.
pub async fn run(budget: Arc<ResponseBudget>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let peak = budget.take_peak();
        if peak >= TRIM_PEAK_BYTES && budget.used() <= peak / 4 {
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        } else if peak >= TRIM_PEAK_BYTES {
            // Still high: look again next time.
            budget.keep_peak(peak);
        }
    }
}

/// Returns the allocator's free memory to the operating system, where it can. Also
/// called after a plugin rescan, which reads and hashes whole library files.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
