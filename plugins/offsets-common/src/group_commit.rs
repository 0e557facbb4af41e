//! Group commit: concurrent `commit` calls share one durable write transaction.
//!
//! A durable commit costs the backend a flush (an `fsync` for redb, a WAL flush and a
//! round trip for PostgreSQL), and stores often run one write transaction at a time, so
//! committers that simply took turns would each pay for their own flush. Here at most
//! one thread (the *leader*) writes at a time. A caller that arrives while a leader is
//! writing copies its batch into the queue and waits; when the leader is done, one
//! waiter becomes the next leader and writes the whole queue — every batch that arrived
//! meanwhile — in one transaction, and every caller whose batch was in it gets that
//! transaction's result. A caller that arrives when nobody is writing writes at once,
//! without copying its batch (together with anything already queued).
//!
//! A caller returns only once its batch is in a transaction that committed durably
//! (or failed, in which case none of the batches in it were applied: the store's
//! transactions must be atomic). Batches are applied in the order they were queued, each
//! batch's records in order, so within a batch a later record for the same key wins. A
//! panicking leader fails its group instead of leaving the others waiting forever.

use std::{
    mem,
    sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError},
};

use drover_abi::{OffsetRecord, PluginError};

/// Batches committers into shared write transactions; see the module docs.
pub struct GroupCommit {
    /// The store's plugin name, for messages.
    store: &'static str,
    state: Mutex<State>,
    written: Condvar,
}

#[derive(Default)]
struct State {
    /// Whether a leader is writing right now.
    writing: bool,
    /// Records of the batches waiting for the next leader, in arrival order.
    queued: Vec<OffsetRecord>,
    /// Where the next leader publishes the result for the `queued` batches.
    outcome: Arc<Outcome>,
}

/// The result of one shared transaction, set once by its leader.
#[derive(Default)]
struct Outcome(OnceLock<Result<(), PluginError>>);

impl GroupCommit {
    /// Group commit for the store named `store` (used in error messages).
    pub fn new(store: &'static str) -> GroupCommit {
        GroupCommit {
            store,
            state: Mutex::default(),
            written: Condvar::new(),
        }
    }

    /// Commits `batch`, sharing a transaction with concurrent callers. `write` must apply
    /// the given slices, in order, in one durable transaction.
    pub fn commit<W>(&self, batch: &[OffsetRecord], write: W) -> Result<(), PluginError>
    where
        W: FnOnce(&[&[OffsetRecord]]) -> Result<(), PluginError>,
    {
        let mut state = self.lock();
        if !state.writing {
            // Nobody is writing: lead with our own batch, borrowed, after any queue.
            let (queued, outcome) = state.start_writing();
            drop(state);
            return self.lead(outcome, || write(&[&queued, batch]));
        }
        state.queued.extend_from_slice(batch);
        let mine = Arc::clone(&state.outcome);
        loop {
            if let Some(result) = mine.0.get() {
                return result.clone();
            }
            if !state.writing {
                // Our batch is still queued (nobody else could have taken it without
                // publishing into `mine`): write the queue.
                let (queued, outcome) = state.start_writing();
                drop(state);
                return self.lead(outcome, || write(&[&queued]));
            }
            state = self
                .written
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Runs `write` as the leader, then publishes its result and steps down, also when
    /// `write` panics.
    fn lead(
        &self,
        outcome: Arc<Outcome>,
        write: impl FnOnce() -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        let leader = Leader {
            group: self,
            outcome,
        };
        let result = write();
        let _ = leader.outcome.0.set(result.clone());
        drop(leader);
        result
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Marks a leader as writing and hands it the queue and its outcome slot.
    fn start_writing(&mut self) -> (Vec<OffsetRecord>, Arc<Outcome>) {
        self.writing = true;
        (
            mem::take(&mut self.queued),
            mem::replace(&mut self.outcome, Arc::new(Outcome::default())),
        )
    }
}

/// Steps down on drop: fails the group if the leader did not publish a result (it
/// panicked), clears `writing` and wakes the waiters.
struct Leader<'a> {
    group: &'a GroupCommit,
    outcome: Arc<Outcome>,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        let _ = self.outcome.0.set(Err(PluginError::internal(format!(
            "offset store `{}`: the thread writing this commit panicked; \
             the batch was not committed",
            self.group.store
        ))));
        self.group.lock().writing = false;
        self.group.written.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{atomic::AtomicUsize, atomic::Ordering, Barrier},
        thread,
        time::Duration,
    };

    use super::*;

    fn record(partition: i32) -> OffsetRecord {
        OffsetRecord {
            group: "g".into(),
            topic: "t".into(),
            partition,
            offset: 1,
            metadata: "".into(),
            commit_time_ms: 0,
        }
    }

    #[test]
    fn concurrent_batches_are_all_written_once() {
        let group = GroupCommit::new("test");
        let written = Mutex::new(Vec::new());
        let transactions = AtomicUsize::new(0);
        let barrier = Barrier::new(8);
        thread::scope(|s| {
            for t in 0..8 {
                let (group, written, transactions, barrier) =
                    (&group, &written, &transactions, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for i in 0..50 {
                        let batch = [record(t * 1000 + i)];
                        group
                            .commit(&batch, |slices| {
                                transactions.fetch_add(1, Ordering::SeqCst);
                                thread::sleep(Duration::from_micros(200));
                                let mut w = written.lock().unwrap();
                                for s in slices {
                                    w.extend(s.iter().map(|r| r.partition));
                                }
                                Ok(())
                            })
                            .unwrap();
                        // Our own batch is written when commit returns.
                        assert!(written.lock().unwrap().contains(&(t * 1000 + i)));
                    }
                });
            }
        });
        let mut w = written.into_inner().unwrap();
        assert_eq!(w.len(), 400);
        w.sort_unstable();
        w.dedup();
        assert_eq!(w.len(), 400);
        assert!(transactions.load(Ordering::SeqCst) <= 400);
    }

    #[test]
    fn a_failed_transaction_fails_every_member() {
        let group = GroupCommit::new("test");
        let r = group.commit(&[record(0)], |_| Err(PluginError::unavailable("disk gone")));
        assert_eq!(r.unwrap_err().message.as_str(), "disk gone");
        // The committer is usable afterwards.
        group.commit(&[record(0)], |_| Ok(())).unwrap();
    }

    #[test]
    fn a_panicking_leader_does_not_block_others() {
        let group = GroupCommit::new("test");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            group.commit(&[record(0)], |_| panic!("boom"))
        }));
        assert!(r.is_err());
        group.commit(&[record(1)], |_| Ok(())).unwrap();
    }
}
