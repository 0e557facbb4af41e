//! Giving freed memory back to the operating system.
//!
//! glibc's allocator serves most allocations from per-thread arenas, and memory freed
//! there mostly stays with the process until `malloc_trim` is called. Two triggers call
//! it (`malloc_trim(0)`, on the blocking pool: a few ms; it releases the free pages of
//! every arena):
//!
//! - **Response peaks.** Fetch responses are built from buffers of up to tens of MiB:
//!   measured before the response budgets, four clients that never read their fetches
//!   left the broker at 629 MiB RSS (from 25 MiB) after they were disconnected. The
//!   budgets bound the peak (server/budget.rs); once a second, if the queued response
//!   bytes reached [`TRIM_PEAK_BYTES`] and have since fallen to a quarter of that peak
//!   or less, the peak is given back.
//! - **Idle allocator memory** (issue 28 item 7). Any other burst leaves the same kind of
//!   residue: 2,000 classic-group members joining and leaving for 60 s (a connection,
//!   two JoinGroups, a SyncGroup, a commit and a LeaveGroup each, over and over) left a
//!   debug broker at 107 MB of anonymous memory (7 MB before), its allocator holding
//!   112 MB from the system with 6.4 MB in use (docs/benchmarks.md, "Classic-group
//!   churn"). Every [`SLACK_PERIOD`] the task
//!   compares the process's anonymous resident memory with what the allocator has in
//!   use (`mallinfo2`); when the difference — the *slack*, memory kept but not used,
//!   plus the few MiB of thread stacks and relocated library pages that are not the
//!   allocator's — exceeds the smallest slack seen since the last trim by
//!   [`TRIM_SLACK_BYTES`], it trims. What a trim cannot release (free memory in pieces
//!   smaller than a page) raises that floor, so it does not trim again for nothing.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::budget::ResponseBudget;

/// Peaks of queued response bytes below this are left to the allocator: 64 MiB.
pub const TRIM_PEAK_BYTES: usize = 64 * 1024 * 1024;

/// How often the peak is looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// Slack (module docs) above the smallest seen since the last trim that triggers a
/// trim: 16 MiB.
pub const TRIM_SLACK_BYTES: u64 = 16 * 1024 * 1024;

/// How often the slack is measured (`mallinfo2` walks every arena's free lists).
pub const SLACK_PERIOD: Duration = Duration::from_secs(5);

/// Runs until `shutdown` becomes true.
pub async fn run(budget: Arc<ResponseBudget>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let slack_every = (SLACK_PERIOD.as_millis() / PERIOD.as_millis()).max(1) as u64;
    let mut floor = SlackFloor::default();
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        ticks += 1;
        let peak = budget.take_peak();
        if peak >= TRIM_PEAK_BYTES && budget.used() <= peak / 4 {
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
            floor.trimmed(None);
        } else if peak >= TRIM_PEAK_BYTES {
            // Still high: look again next time.
            budget.keep_peak(peak);
        }
        if ticks % slack_every == 0 {
            let decided = tokio::task::spawn_blocking(move || {
                let slack = slack_bytes()?;
                if !floor.should_trim(slack) {
                    return Some(floor);
                }
                release_free_memory();
                floor.trimmed(slack_bytes());
                Some(floor)
            })
            .await;
            if let Ok(Some(next)) = decided {
                floor = next;
            }
        }
    }
}

/// The smallest slack seen since the last trim (module docs), and the trigger above it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SlackFloor {
    /// Bytes; `None` until measured.
    floor: Option<u64>,
}

impl SlackFloor {
    /// Whether `slack` bytes call for a trim; lowers the floor when it is below it.
    pub fn should_trim(&mut self, slack: u64) -> bool {
        match self.floor {
            Some(floor) if slack >= floor.saturating_add(TRIM_SLACK_BYTES) => true,
            Some(floor) => {
                self.floor = Some(floor.min(slack));
                false
            }
            None => {
                self.floor = Some(slack);
                false
            }
        }
    }

    /// A trim just ran; `after` is the slack measured after it (what it could not
    /// release), `None` when unknown: the floor is measured anew.
    pub fn trimmed(&mut self, after: Option<u64>) {
        self.floor = after;
    }
}

/// Anonymous resident bytes of the process minus the bytes the allocator has in use, or
/// `None` where that cannot be measured.
fn slack_bytes() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // statm: size resident shared ... in pages; resident − shared is RssAnon.
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let mut fields = statm.split_whitespace().skip(1);
        let resident: u64 = fields.next()?.parse().ok()?;
        let shared: u64 = fields.next()?.parse().ok()?;
        // SAFETY: sysconf has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        // SAFETY: mallinfo2 only reads the allocator's own bookkeeping, under its locks.
        let info = unsafe { libc::mallinfo2() };
        let in_use = (info.uordblks as u64).saturating_add(info.hblkhd as u64);
        Some(
            resident
                .saturating_sub(shared)
                .saturating_mul(page)
                .saturating_sub(in_use),
        )
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Returns the allocator's free memory to the operating system, where it can. Also
/// called after a plugin rescan.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn trims_only_when_the_slack_rose_by_the_threshold_above_its_floor() {
        let mut f = SlackFloor::default();
        assert!(
            !f.should_trim(5 * MIB),
            "the first measurement sets the floor"
        );
        assert!(!f.should_trim(20 * MIB), "15 MiB above the floor");
        assert!(!f.should_trim(3 * MIB), "a lower slack lowers the floor");
        assert!(f.should_trim(19 * MIB), "16 MiB above the floor of 3");
        // The trim left 10 MiB it could not release: that is the floor now.
        f.trimmed(Some(10 * MIB));
        assert!(!f.should_trim(20 * MIB));
        assert!(f.should_trim(26 * MIB));
        // Unknown after a trim: measured anew.
        f.trimmed(None);
        assert!(!f.should_trim(100 * MIB));
        assert!(f.should_trim(116 * MIB));
    }

    #[test]
    fn the_slack_is_measured_here() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        assert!(slack_bytes().is_some());
    }
}
