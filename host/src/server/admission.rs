//! Connection admission: which connections the broker takes, and which it closes to
//! make room, so that idle or slow clients cannot lock new ones out.
//!
//! - **Per address**: at most `server.max_connections_per_ip` connections from one IP
//!   address (Kafka's `max.connections.per.ip`, unlimited by default), with
//!   per-address exceptions in `server.max_connections_per_ip_overrides` (Kafka's
//!   `max.connections.per.ip.overrides`). A connection over the limit is closed as soon
//!   as it is accepted, as Kafka does.
//! - **Idle eviction at the cap**: when all `server.max_connections` slots are taken
//!   and a new client connects, the connection that has been idle longest — no request
//!   being handled, no response unsent; a long poll waiting for records does not count
//!   as handled (server/connection.rs parks it) — is closed to make room. Only when
//!   every connection is busy does the new client wait.
//! - The first-request deadline (`server.first_request_timeout_ms`) is applied by the
//!   connection itself (server/connection.rs).
//!
//! Each admitted connection holds a [`Ticket`]: it reports the connection's activity
//! and is told when the connection is evicted; dropping it gives the slot back.

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
};

use tokio::sync::Notify;

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The address has as many connections as it may have.
    #[error("{ip} already has {limit} connections, its maximum (server.max_connections_per_ip)")]
    PerAddress {
        /// The client's address.
        ip: IpAddr,
        /// Its limit.
        limit: usize,
    },
}

/// The live connections and the per-address counts.
#[derive(Debug)]
pub struct Admission {
    per_ip: Option<usize>,
    overrides: HashMap<IpAddr, usize>,
    epoch: crate::clock::Epoch,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    conns: HashMap<u64, Arc<Activity>>,
    per_ip: HashMap<IpAddr, usize>,
}

/// What one connection is doing, as far as eviction is concerned.
#[derive(Debug)]
struct Activity {
    ip: IpAddr,
    /// When a request was last read or a response last written, ms since the epoch.
    last_ms: AtomicU64,
    /// Requests read whose responses are not written yet.
    busy: AtomicUsize,
    /// Chosen for eviction (chosen once).
    evicting: AtomicBool,
    evicted: Notify,
}

impl Admission {
    /// Admission with a limit of `per_ip` connections per address (`None`: no limit)
    /// and per-address `overrides`.
    pub fn new(per_ip: Option<usize>, overrides: HashMap<IpAddr, usize>) -> Arc<Self> {
        Arc::new(Admission {
            per_ip,
            overrides,
            epoch: crate::clock::Epoch::start(),
            state: Mutex::new(State::default()),
        })
    }

    /// Admission from the `[server]` settings `max_connections_per_ip` and
    /// `max_connections_per_ip_overrides` (keys are checked IP addresses, see
    /// config.rs; one that does not parse is ignored).
    pub fn from_config(per_ip: Option<usize>, overrides: &BTreeMap<String, usize>) -> Arc<Self> {
        let overrides = overrides
            .iter()
            .filter_map(|(ip, n)| Some((ip.parse().ok()?, *n)))
            .collect();
        Self::new(per_ip, overrides)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.now_ms()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `ip`, unless its address is at its limit.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refused> {
        let limit = self.overrides.get(&ip).copied().or(self.per_ip);
        let mut state = self.state();
        let count = state.per_ip.get(&ip).copied().unwrap_or(0);
        if let Some(limit) = limit {
            if count >= limit {
                return Err(Refused::PerAddress { ip, limit });
            }
        }
        state.per_ip.insert(ip, count + 1);
        let id = state.next_id;
        state.next_id += 1;
        let activity = Arc::new(Activity {
            ip,
            last_ms: AtomicU64::new(self.now_ms()),
            busy: AtomicUsize::new(0),
            evicting: AtomicBool::new(false),
            evicted: Notify::new(),
        });
        state.conns.insert(id, Arc::clone(&activity));
        Ok(Ticket {
            admission: Arc::clone(self),
            id,
            activity,
        })
    }

    /// Tells the connection that has been idle longest (nothing in flight, not
    /// `except`) to close. Returns its address, or `None` when every connection is
    /// busy.
    pub fn evict_idlest(&self, except: &Ticket) -> Option<IpAddr> {
        let state = self.state();
        let victim = state
            .conns
            .iter()
            .filter(|(id, a)| {
                **id != except.id
                    && a.busy.load(Ordering::Acquire) == 0
                    && !a.evicting.load(Ordering::Acquire)
            })
            .min_by_key(|(_, a)| a.last_ms.load(Ordering::Acquire))
            .map(|(_, a)| Arc::clone(a))?;
        victim.evicting.store(true, Ordering::Release);
        victim.evicted.notify_one();
        Some(victim.ip)
    }

    /// Connections admitted and not yet closed.
    pub fn len(&self) -> usize {
        self.state().conns.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One admitted connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    activity: Arc<Activity>,
}

impl Ticket {
    /// A request was read: the connection is busy until its response is written.
    pub fn request_read(&self) {
        self.activity.busy.fetch_add(1, Ordering::AcqRel);
        self.touch();
    }

    /// The response to a request was written (or it needed none).
    pub fn response_written(&self) {
        let _ = self
            .activity
            .busy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| b.checked_sub(1));
        self.touch();
    }

    /// Something other than a request was received (a coordinator channel's answer).
    pub fn touch(&self) {
        self.activity
            .last_ms
            .store(self.admission.now_ms(), Ordering::Release);
    }

    /// Completes when the connection was chosen for eviction. Cancel safe.
    pub async fn evicted(&self) {
        self.activity.evicted.notified().await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.admission.state();
        state.conns.remove(&self.id);
        let ip = self.activity.ip;
        if let Some(n) = state.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                state.per_ip.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn the_per_address_limit_and_its_overrides_hold_until_a_ticket_is_dropped() {
        let admission = Admission::new(Some(2), HashMap::from([(ip(9), 3)]));
        let a1 = admission.admit(ip(1)).unwrap();
        let _a2 = admission.admit(ip(1)).unwrap();
        assert_eq!(
            admission.admit(ip(1)).unwrap_err(),
            Refused::PerAddress {
                ip: ip(1),
                limit: 2
            }
        );
        let _b = admission.admit(ip(2)).unwrap();
        let _o: Vec<_> = (0..3).map(|_| admission.admit(ip(9)).unwrap()).collect();
        assert!(admission.admit(ip(9)).is_err());
        drop(a1);
        assert!(admission.admit(ip(1)).is_ok());
    }

    #[test]
    fn no_limit_by_default() {
        let admission = Admission::from_config(None, &BTreeMap::new());
        let tickets: Vec<_> = (0..100).map(|_| admission.admit(ip(1)).unwrap()).collect();
        assert_eq!(admission.len(), 100);
        drop(tickets);
        assert!(admission.is_empty());
    }

    #[tokio::test]
    async fn eviction_takes_the_idle_connection_idle_longest_never_a_busy_one() {
        // Activity is kept in ms: the sleeps make the order of events unambiguous.
        let admission = Admission::new(None, HashMap::new());
        let oldest_busy = admission.admit(ip(1)).unwrap();
        oldest_busy.request_read();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let idle_old = admission.admit(ip(2)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let idle_new = admission.admit(ip(3)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        idle_old.request_read();
        idle_old.response_written();
        let newcomer = admission.admit(ip(4)).unwrap();
        // ip(2) answered a request after ip(3) connected: ip(3) has been idle longest.
        assert_eq!(admission.evict_idlest(&newcomer), Some(ip(3)));
        idle_new.evicted().await;
        assert_eq!(admission.evict_idlest(&newcomer), Some(ip(2)));
        idle_old.evicted().await;
        // Left: a busy connection and the newcomer itself.
        assert_eq!(admission.evict_idlest(&newcomer), None);
        oldest_busy.response_written();
        assert_eq!(admission.evict_idlest(&newcomer), Some(ip(1)));
    }
}
