//! Budgets of bytes in queued responses: how much response data the broker holds in
//! memory for clients that have not read it yet.
//!
//! Every response a connection has produced but not yet written to its socket holds a
//! [`Charge`] against two budgets: its connection's
//! (`server.queued_max_response_bytes_per_connection`) and the broker's
//! (`server.queued_max_response_bytes`). The charge is released when the response has
//! been written, or dropped with its connection. Two rules keep memory bounded against
//! a client that pipelines requests and never reads:
//!
//! - A connection stops reading requests while its own budget is used up, or while
//!   the broker's is used up and it holds part of it ([`ConnBudget::room_to_read`]).
//! - A Fetch reads at most what is left of both budgets ([`ConnBudget::try_reserve`]);
//!   with nothing left it waits, as it waits for data, and at its deadline answers
//!   without records. Only the first batch of a response may go beyond the grant
//!   (KIP-74: a consumer must be able to get past a batch larger than its limits).
//!
//! So the broker holds at most about `queued_max_response_bytes` of queued responses
//! plus one record batch per fetching connection. The idea follows Kafka's
//! `queued.max.request.bytes`, which bounds queued *request* bytes and stops reading
//! when it is reached; Kafka needs no response budget because it sends fetch data from
//! the log files (zero copy).

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use tokio::sync::Notify;

/// One budget: bytes charged against a limit, and a wake-up for those waiting for
/// room.
#[derive(Debug)]
struct Pool {
    used: AtomicUsize,
    limit: usize,
    released: Notify,
}

impl Pool {
    fn new(limit: usize) -> Self {
        Pool {
            used: AtomicUsize::new(0),
            limit,
            released: Notify::new(),
        }
    }

    fn left(&self) -> usize {
        self.limit.saturating_sub(self.used.load(Ordering::Acquire))
    }

    fn add(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
    }

    fn sub(&self, bytes: usize) {
        let before = self.used.fetch_sub(bytes, Ordering::AcqRel);
        // Whoever waits does so because the pool was full; a release from a full pool
        // is the only one that can let them go on.
        if before >= self.limit {
            self.released.notify_waiters();
        }
    }
}

/// The broker-wide budget of bytes in queued responses
/// (`server.queued_max_response_bytes`), shared by every connection.
#[derive(Debug)]
pub struct ResponseBudget {
    pool: Pool,
    per_connection: usize,
    /// The most bytes charged at once since [`ResponseBudget::take_peak`] last ran.
    peak: AtomicUsize,
}

impl ResponseBudget {
    /// A budget of `limit` bytes for the broker, `per_connection` bytes for each
    /// connection.
    pub fn new(limit: usize, per_connection: usize) -> Arc<Self> {
        Arc::new(ResponseBudget {
            pool: Pool::new(limit),
            per_connection,
            peak: AtomicUsize::new(0),
        })
    }

    /// The most bytes charged at once since the previous call (or the start); resets
    /// it to what is charged now.
    pub fn take_peak(&self) -> usize {
        self.peak.swap(self.used(), Ordering::AcqRel)
    }

    /// Puts a peak taken with [`take_peak`](Self::take_peak) back (unless a higher
    /// one was reached since).
    pub fn keep_peak(&self, peak: usize) {
        self.peak.fetch_max(peak, Ordering::AcqRel);
    }

    /// Bytes charged now, over every connection.
    pub fn used(&self) -> usize {
        self.pool.used.load(Ordering::Acquire)
    }

    /// The budget of a new connection.
    pub fn connection(self: &Arc<Self>) -> Arc<ConnBudget> {
        Arc::new(ConnBudget {
            pool: Pool::new(self.per_connection),
            broker: Arc::clone(self),
        })
    }
}

impl ResponseBudget {
    fn add(&self, bytes: usize) {
        let used = self.pool.used.fetch_add(bytes, Ordering::AcqRel) + bytes;
        self.peak.fetch_max(used, Ordering::AcqRel);
    }
}

/// One connection's budget of bytes in queued responses
/// (`server.queued_max_response_bytes_per_connection`), within the broker's.
#[derive(Debug)]
pub struct ConnBudget {
    pool: Pool,
    broker: Arc<ResponseBudget>,
}

impl ConnBudget {
    /// Bytes this connection's queued responses hold now.
    pub fn used(&self) -> usize {
        self.pool.used.load(Ordering::Acquire)
    }

    /// Bytes a new response may take now: what is left of this connection's budget
    /// and of the broker's, whichever is less.
    pub fn available(&self) -> usize {
        self.pool.left().min(self.broker.pool.left())
    }

    /// Charges `bytes` unconditionally (a response already built: the bytes are in
    /// memory whatever the budget says). Released when the [`Charge`] is dropped.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        self.pool.add(bytes);
        self.broker.add(bytes);
        Charge {
            budget: Arc::clone(self),
            bytes,
        }
    }

    /// Reserves up to `want` bytes for a response about to be read: the grant is
    /// `min(want, available())`, charged at once. `None` when nothing is available (or
    /// `want` is 0).
    pub fn try_reserve(self: &Arc<Self>, want: usize) -> Option<Charge> {
        let grant = want.min(self.available());
        (grant > 0).then(|| self.charge(grant))
    }

    /// Waits until [`available`](Self::available) is non-zero. Cancel safe.
    pub async fn wait_available(&self) {
        self.wait_until(|b| b.available() > 0).await;
    }

    /// Whether this connection may read another request now: its own budget is not
    /// used up, and the broker's is not used up unless this connection holds none of
    /// it (a connection with nothing queued never adds to the pressure by reading one
    /// request, and must be able to send its next one).
    pub fn may_read(&self) -> bool {
        let used = self.used();
        used < self.pool.limit && (used == 0 || self.broker.pool.left() > 0)
    }

    /// Waits until [`may_read`](Self::may_read). Cancel safe.
    pub async fn room_to_read(&self) {
        self.wait_until(Self::may_read).await;
    }

    /// Waits until `ready` holds, woken by releases on this connection's budget or the
    /// broker's. The common case (already ready) costs the check alone, no
    /// registration with the wake-ups. Cancel safe.
    async fn wait_until(&self, ready: impl Fn(&Self) -> bool) {
        if ready(self) {
            return;
        }
        loop {
            let conn = self.pool.released.notified();
            let broker = self.broker.pool.released.notified();
            tokio::pin!(conn, broker);
            conn.as_mut().enable();
            broker.as_mut().enable();
            if ready(self) {
                return;
            }
            tokio::select! {
                _ = conn => {}
                _ = broker => {}
            }
        }
    }
}

/// Bytes charged against a connection's budget and the broker's; released on drop.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<ConnBudget>,
    bytes: usize,
}

impl Charge {
    /// The bytes charged.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Changes the charge to `bytes` (the size of what was actually built): more is
    /// charged unconditionally, less is released.
    pub fn resize(&mut self, bytes: usize) {
        let (conn, broker) = (&self.budget.pool, &self.budget.broker.pool);
        if bytes > self.bytes {
            conn.add(bytes - self.bytes);
            self.budget.broker.add(bytes - self.bytes);
        } else if bytes < self.bytes {
            conn.sub(self.bytes - bytes);
            broker.sub(self.bytes - bytes);
        }
        self.bytes = bytes;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.resize(0);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn charges_count_against_both_budgets_until_dropped() {
        let broker = ResponseBudget::new(100, 60);
        let a = broker.connection();
        let b = broker.connection();
        let c1 = a.charge(50);
        assert_eq!((a.used(), broker.used()), (50, 50));
        assert_eq!(a.available(), 10);
        assert_eq!(b.available(), 50);
        let mut c2 = b.charge(30);
        assert_eq!(b.available(), 20);
        assert_eq!(a.available(), 10);
        c2.resize(45);
        assert_eq!((b.used(), broker.used()), (45, 95));
        assert_eq!(a.available(), 5);
        c2.resize(5);
        assert_eq!((b.used(), broker.used()), (5, 55));
        drop(c1);
        drop(c2);
        assert_eq!((a.used(), b.used(), broker.used()), (0, 0, 0));
    }

    #[test]
    fn a_reservation_is_cut_to_what_is_left_and_refused_when_nothing_is() {
        let broker = ResponseBudget::new(100, 60);
        let a = broker.connection();
        let first = a.try_reserve(1000).unwrap();
        assert_eq!(first.bytes(), 60);
        assert!(a.try_reserve(1).is_none());
        assert!(a.try_reserve(0).is_none());
        let b = broker.connection();
        assert_eq!(b.try_reserve(1000).unwrap().bytes(), 40);
        drop(first);
        assert_eq!(a.try_reserve(10).unwrap().bytes(), 10);
    }

    #[test]
    fn an_oversized_charge_still_counts_and_blocks_reading() {
        let broker = ResponseBudget::new(100, 60);
        let a = broker.connection();
        assert!(a.may_read());
        let mut grant = a.try_reserve(30).unwrap();
        assert!(a.may_read());
        // The first batch of a fetch may go beyond its grant.
        grant.resize(70);
        assert!(!a.may_read());
        assert_eq!(a.available(), 0);
        drop(grant);
        assert!(a.may_read());
    }

    #[test]
    fn a_full_broker_budget_pauses_only_the_connections_holding_part_of_it() {
        let broker = ResponseBudget::new(100, 60);
        let (a, b, c) = (
            broker.connection(),
            broker.connection(),
            broker.connection(),
        );
        let _ca = a.charge(50);
        let _cb = b.charge(50);
        assert!(!a.may_read() && !b.may_read());
        // c holds nothing: it may send a request, but a fetch of it gets no bytes.
        assert!(c.may_read());
        assert!(c.try_reserve(10).is_none());
    }

    #[tokio::test]
    async fn waiters_wake_when_a_full_budget_is_released() {
        let broker = ResponseBudget::new(100, 60);
        let a = broker.connection();
        let b = broker.connection();
        let held = a.charge(60);
        let other = b.charge(40);
        let reader = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.room_to_read().await })
        };
        let fetch = {
            let b = Arc::clone(&b);
            tokio::spawn(async move { b.wait_available().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!reader.is_finished() && !fetch.is_finished());
        drop(held);
        reader.await.unwrap();
        fetch.await.unwrap();
        drop(other);
    }
}
