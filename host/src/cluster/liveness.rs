//! The slot guard's clock (docs/protocol.md §6.8): when ZooKeeper last answered this
//! broker. A keepalive task pings on its own schedule, so a long refresh (slot
//! takeovers, staged-offset restores, topic syncs) never starves the guard and makes a
//! healthy broker give its slots up.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use zookeeper_client as zk;

/// When ZooKeeper last answered, and how long coordinating stays safe after that.
pub(super) struct Liveness {
    /// The start of the last request ZooKeeper answered: the server heard from this
    /// session after it, so the session cannot expire before a session timeout later.
    last_ok: Mutex<Instant>,
    /// The slot guard.
    guard: Duration,
}

impl Liveness {
    /// A clock whose last answer is `since` (the registration's start).
    pub(super) fn new(since: Instant, guard: Duration) -> Arc<Liveness> {
        Arc::new(Liveness {
            last_ok: Mutex::new(since),
            guard,
        })
    }

    /// Records the answer to a request sent at `sent`; an older answer changes nothing.
    pub(super) fn answered(&self, sent: Instant) {
        let mut last = self.last_ok.lock().unwrap_or_else(|e| e.into_inner());
        *last = (*last).max(sent);
    }

    /// Until when coordinating is safe: the guard after the last answered request.
    pub(super) fn guard_until(&self) -> Instant {
        *self.last_ok.lock().unwrap_or_else(|e| e.into_inner()) + self.guard
    }

    /// Whether coordinating is safe now.
    pub(super) fn holds(&self) -> bool {
        Instant::now() < self.guard_until()
    }

    /// Resolves once the guard has run out; answers arriving meanwhile push it back.
    pub(super) async fn expired(&self) {
        loop {
            let until = self.guard_until();
            if Instant::now() >= until {
                return;
            }
            tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
        }
    }
}

/// The keepalive task; aborted when dropped (at the end of the session).
pub(super) struct Keepalive(tokio::task::JoinHandle<()>);

impl Drop for Keepalive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts pinging `path` (this broker's registration) every third of the guard; each
/// answer is recorded in `alive`. A ping waits at most the guard for its answer.
pub(super) fn keepalive(client: zk::Client, path: String, alive: Arc<Liveness>) -> Keepalive {
    let every = (alive.guard / 3).max(Duration::from_millis(10));
    Keepalive(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let sent = Instant::now();
            if let Ok(Ok(_)) = tokio::time::timeout(alive.guard, client.check_stat(&path)).await {
                alive.answered(sent);
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_pushes_the_guard_back() {
        let start = Instant::now();
        let alive = Liveness::new(start, Duration::from_millis(500));
        assert_eq!(alive.guard_until(), start + Duration::from_millis(500));
        alive.answered(start + Duration::from_millis(300));
        alive.answered(start + Duration::from_millis(100));
        assert_eq!(alive.guard_until(), start + Duration::from_millis(800));
        assert!(alive.holds());
    }
}
