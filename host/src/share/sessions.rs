//! The share-session cache (KIP-932, "Share sessions"; Kafka's `ShareSessionCache` and
//! `SharePartitionManager.newContext`): one session per (share group, member id), with
//! the partitions it fetches and its epoch. Sans-IO: every call takes `now` in ms.
//!
//! Epochs, as the ShareFetch request carries them: 0 opens a session (replacing the
//! member's previous one; acknowledgements are not allowed with it), −1 closes it (no
//! partitions to fetch may be added with it), any other must equal the session's
//! current epoch, which then moves on (1, 2, …, wrapping to 1). An unknown session is
//! SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH.
//!
//! Bounds (docs/operations.md, "Share groups"): at most `max` sessions, and at most
//! `per_client` opened from one client address. A new session past either bound
//! evicts a session idle for `idle_ms` (past the address's bound: one of that
//! address's), the least recently used first, else is refused
//! (SHARE_SESSION_LIMIT_REACHED, as Kafka's cache answers past its total). A session
//! in use is never evicted: a client opening sessions in a loop gets refusals, and the
//! consumers that share its address (the same host, a NAT) keep theirs. A session
//! lives on the connection that last used it: when that connection closes, its
//! sessions go ([`ShareSessions::drop_connection`], as Kafka's cache drops a
//! disconnected client's), so a crashed consumer's records come back at once and a
//! flood of sessions needs a connection held open for each. An evicted or dropped
//! session's member's records are released by the caller. A session's
//! partitions are bounded by the partitions the broker has (unknown ones are not
//! kept).

use std::{
    collections::{BTreeSet, HashMap},
    net::IpAddr,
    sync::Arc,
};

use kafka_protocol::error::ResponseError;

use crate::server::conn_id::ConnId;

/// A session's key: share group and member id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// Share group id.
    pub group: Arc<str>,
    /// Member id.
    pub member: Arc<str>,
}

/// A partition a session fetches: topic id and partition index.
pub type SessionPartition = (uuid::Uuid, i32);

/// One share session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The epoch the next request must carry.
    pub epoch: i32,
    /// The partitions it fetches.
    pub partitions: BTreeSet<SessionPartition>,
    /// The client address that opened it.
    pub client: IpAddr,
    /// The connection that last used it.
    pub conn: ConnId,
    /// When it was last used, ms.
    pub last_used_ms: i64,
}

/// Why a session request was refused (each a Kafka error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// SHARE_SESSION_NOT_FOUND.
    #[error("no such share session")]
    NotFound,
    /// INVALID_SHARE_SESSION_EPOCH.
    #[error("wrong share session epoch")]
    InvalidEpoch,
    /// SHARE_SESSION_LIMIT_REACHED.
    #[error("share session limit reached")]
    LimitReached,
    /// INVALID_REQUEST: acknowledgements with epoch 0, partitions to fetch with −1.
    #[error("invalid share session request")]
    InvalidRequest,
}

impl SessionError {
    /// The Kafka error.
    pub fn error(self) -> ResponseError {
        match self {
            SessionError::NotFound => ResponseError::ShareSessionNotFound,
            SessionError::InvalidEpoch => ResponseError::InvalidShareSessionEpoch,
            SessionError::LimitReached => ResponseError::ShareSessionLimitReached,
            SessionError::InvalidRequest => ResponseError::InvalidRequest,
        }
    }
}

/// What a ShareFetch did to its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchSession {
    /// Epoch 0: a new session fetching these partitions; `evicted` are sessions it
    /// pushed out (their members' records are to be released), `replaced` the member's
    /// previous session, if any.
    Opened {
        /// Sessions evicted to make room.
        evicted: Vec<SessionKey>,
        /// Whether the member had a session that this one replaced.
        replaced: bool,
        /// The partitions to fetch.
        partitions: Vec<SessionPartition>,
    },
    /// A later epoch: fetch these partitions (the session's, after the request's
    /// additions and removals).
    Continued {
        /// The partitions to fetch.
        partitions: Vec<SessionPartition>,
    },
    /// Epoch −1: the session is closed; nothing is fetched.
    Closed,
}

/// What a ShareFetch asks of its session.
#[derive(Debug, Clone, Copy)]
pub struct FetchStep<'a> {
    /// The request's session epoch.
    pub epoch: i32,
    /// The partitions it names to fetch.
    pub fetch: &'a [SessionPartition],
    /// The partitions it forgets.
    pub forget: &'a [SessionPartition],
    /// Whether it carries acknowledgements.
    pub acks: bool,
}

/// Where a ShareFetch comes from: the client's address and its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The client's address (the per-address bound counts by it).
    pub addr: IpAddr,
    /// The connection (its sessions go when it closes).
    pub conn: ConnId,
}

/// The cache (module docs).
#[derive(Debug)]
pub struct ShareSessions {
    max: usize,
    per_client: usize,
    idle_ms: i64,
    sessions: HashMap<SessionKey, Session>,
    per_address: HashMap<IpAddr, usize>,
    /// Sessions per connection, so that a closing connection without any costs a
    /// lookup.
    per_conn: HashMap<ConnId, usize>,
}

/// The epoch after `epoch` (Kafka's `ShareRequestMetadata.nextEpoch`).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 || epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSessions {
    /// At most `max` sessions, `per_client` per address; idle for `idle_ms` makes a
    /// session evictable.
    pub fn new(max: usize, per_client: usize, idle_ms: u64) -> ShareSessions {
        ShareSessions {
            max: max.max(1),
            per_client: per_client.max(1),
            idle_ms: i64::try_from(idle_ms).unwrap_or(i64::MAX),
            sessions: HashMap::new(),
            per_address: HashMap::new(),
            per_conn: HashMap::new(),
        }
    }

    /// How many sessions there are.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The session of `key`.
    pub fn get(&self, key: &SessionKey) -> Option<&Session> {
        self.sessions.get(key)
    }

    /// A ShareFetch's session step at `now_ms` from `origin`.
    pub fn fetch(
        &mut self,
        key: &SessionKey,
        origin: Origin,
        step: FetchStep<'_>,
        now_ms: i64,
    ) -> Result<FetchSession, SessionError> {
        let client = origin.addr;
        let FetchStep {
            epoch,
            fetch,
            forget,
            acks,
        } = step;
        match epoch {
            0 => {
                if acks {
                    return Err(SessionError::InvalidRequest);
                }
                let replaced = self.remove(key).is_some();
                let evicted = self.make_room(client, now_ms)?;
                let partitions: BTreeSet<SessionPartition> = fetch.iter().copied().collect();
                let list = partitions.iter().copied().collect();
                self.insert(
                    key.clone(),
                    Session {
                        epoch: next_epoch(0),
                        partitions,
                        client,
                        conn: origin.conn,
                        last_used_ms: now_ms,
                    },
                );
                Ok(FetchSession::Opened {
                    evicted,
                    replaced,
                    partitions: list,
                })
            }
            -1 => {
                if !fetch.is_empty() {
                    return Err(SessionError::InvalidRequest);
                }
                self.remove(key).ok_or(SessionError::NotFound)?;
                Ok(FetchSession::Closed)
            }
            _ => {
                let session = self.sessions.get_mut(key).ok_or(SessionError::NotFound)?;
                if session.epoch != epoch {
                    return Err(SessionError::InvalidEpoch);
                }
                session.partitions.extend(fetch.iter().copied());
                for p in forget {
                    session.partitions.remove(p);
                }
                session.epoch = next_epoch(session.epoch);
                session.last_used_ms = now_ms;
                let moved = (session.conn != origin.conn).then_some(session.conn);
                session.conn = origin.conn;
                let partitions = session.partitions.iter().copied().collect();
                if let Some(from) = moved {
                    self.uncount_conn(from);
                    *self.per_conn.entry(origin.conn).or_default() += 1;
                }
                Ok(FetchSession::Continued { partitions })
            }
        }
    }

    /// A ShareAcknowledge's session step (Kafka's `acknowledgeSessionUpdate`): epoch 0
    /// is INVALID_SHARE_SESSION_EPOCH; −1 closes the session (after the caller applied
    /// the acknowledgements: returns `true`); any other must be the current epoch,
    /// which moves on.
    pub fn acknowledge(
        &mut self,
        key: &SessionKey,
        epoch: i32,
        now_ms: i64,
    ) -> Result<bool, SessionError> {
        if epoch == 0 {
            return Err(SessionError::InvalidEpoch);
        }
        let session = self.sessions.get_mut(key).ok_or(SessionError::NotFound)?;
        if epoch == -1 {
            return Ok(true);
        }
        if session.epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        session.epoch = next_epoch(session.epoch);
        session.last_used_ms = now_ms;
        Ok(false)
    }

    /// Removes the session of `key` (closed with epoch −1, or its member left).
    pub fn remove(&mut self, key: &SessionKey) -> Option<Session> {
        let session = self.sessions.remove(key)?;
        if let Some(n) = self.per_address.get_mut(&session.client) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&session.client);
            }
        }
        self.uncount_conn(session.conn);
        Some(session)
    }

    /// Removes the sessions connection `conn` last used (it closed); returns their
    /// keys, whose members' records the caller releases.
    pub fn drop_connection(&mut self, conn: ConnId) -> Vec<SessionKey> {
        if !self.per_conn.contains_key(&conn) {
            return Vec::new();
        }
        let keys: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.conn == conn)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &keys {
            self.remove(key);
        }
        keys
    }

    fn uncount_conn(&mut self, conn: ConnId) {
        if let Some(n) = self.per_conn.get_mut(&conn) {
            *n -= 1;
            if *n == 0 {
                self.per_conn.remove(&conn);
            }
        }
    }

    fn insert(&mut self, key: SessionKey, session: Session) {
        *self.per_address.entry(session.client).or_default() += 1;
        *self.per_conn.entry(session.conn).or_default() += 1;
        self.sessions.insert(key, session);
    }

    /// Room for one more session from `client`: returns the sessions evicted.
    fn make_room(&mut self, client: IpAddr, now_ms: i64) -> Result<Vec<SessionKey>, SessionError> {
        let mut evicted = Vec::new();
        let idle_before = now_ms.saturating_sub(self.idle_ms);
        if self.per_address.get(&client).copied().unwrap_or(0) >= self.per_client {
            match self.least_recently_used(|s| s.client == client && s.last_used_ms <= idle_before)
            {
                Some(key) => {
                    self.remove(&key);
                    evicted.push(key);
                }
                None => return Err(SessionError::LimitReached),
            }
        }
        if self.sessions.len() >= self.max {
            match self.least_recently_used(|s| s.last_used_ms <= idle_before) {
                Some(key) => {
                    self.remove(&key);
                    evicted.push(key);
                }
                None => return Err(SessionError::LimitReached),
            }
        }
        Ok(evicted)
    }

    fn least_recently_used(&self, eligible: impl Fn(&Session) -> bool) -> Option<SessionKey> {
        self.sessions
            .iter()
            .filter(|(_, s)| eligible(s))
            .min_by(|a, b| (a.1.last_used_ms, a.0).cmp(&(b.1.last_used_ms, b.0)))
            .map(|(k, _)| k.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(member: &str) -> SessionKey {
        SessionKey {
            group: Arc::from("g"),
            member: Arc::from(member),
        }
    }

    fn step<'a>(
        epoch: i32,
        fetch: &'a [SessionPartition],
        forget: &'a [SessionPartition],
        acks: bool,
    ) -> FetchStep<'a> {
        FetchStep {
            epoch,
            fetch,
            forget,
            acks,
        }
    }

    const A: Origin = Origin {
        addr: IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
        conn: 1,
    };
    const B: Origin = Origin {
        addr: IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)),
        conn: 2,
    };

    #[test]
    fn epochs_follow_kafkas_rules() {
        let mut s = ShareSessions::new(10, 10, 1000);
        let k = key("m");
        let p = (uuid::Uuid::nil(), 0);
        assert_eq!(
            s.fetch(&k, A, step(1, &[p], &[], false), 0),
            Err(SessionError::NotFound)
        );
        assert_eq!(
            s.fetch(&k, A, step(0, &[p], &[], true), 0),
            Err(SessionError::InvalidRequest)
        );
        assert!(matches!(
            s.fetch(&k, A, step(0, &[p], &[], false), 0),
            Ok(FetchSession::Opened {
                replaced: false,
                ..
            })
        ));
        assert_eq!(
            s.fetch(&k, A, step(2, &[], &[], false), 0),
            Err(SessionError::InvalidEpoch)
        );
        assert_eq!(
            s.fetch(&k, A, step(1, &[], &[], true), 0),
            Ok(FetchSession::Continued {
                partitions: vec![p]
            })
        );
        assert_eq!(s.acknowledge(&k, 0, 0), Err(SessionError::InvalidEpoch));
        assert_eq!(s.acknowledge(&k, 1, 0), Err(SessionError::InvalidEpoch));
        assert_eq!(s.acknowledge(&k, 2, 0), Ok(false));
        assert_eq!(
            s.fetch(&k, A, step(3, &[], &[p], false), 0),
            Ok(FetchSession::Continued { partitions: vec![] })
        );
        assert_eq!(
            s.fetch(&k, A, step(-1, &[p], &[], false), 0),
            Err(SessionError::InvalidRequest)
        );
        assert_eq!(
            s.fetch(&k, A, step(-1, &[], &[], true), 0),
            Ok(FetchSession::Closed)
        );
        assert_eq!(
            s.fetch(&k, A, step(-1, &[], &[], false), 0),
            Err(SessionError::NotFound)
        );
        assert!(s.is_empty());
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    #[test]
    fn one_client_cannot_grow_the_cache_past_its_bound() {
        let mut s = ShareSessions::new(100, 5, 1_000);
        let (mut opened, mut refused) = (0, 0);
        for i in 0..10_000 {
            match s.fetch(&key(&format!("m{i}")), A, step(0, &[], &[], false), 0) {
                Ok(FetchSession::Opened { evicted, .. }) => {
                    assert!(evicted.is_empty());
                    opened += 1;
                }
                Err(SessionError::LimitReached) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((s.len(), opened, refused), (5, 5, 10_000 - 5));
        // The first five are kept: sessions in use are never pushed out.
        assert!(s.get(&key("m0")).is_some() && s.get(&key("m5")).is_none());
        // Another client is not affected.
        assert!(s
            .fetch(&key("other"), B, step(0, &[], &[], false), 0)
            .is_ok());
    }

    #[test]
    fn past_its_bound_an_address_replaces_only_its_idle_sessions() {
        let mut s = ShareSessions::new(100, 2, 1_000);
        s.fetch(&key("a"), A, step(0, &[], &[], false), 0).unwrap();
        s.fetch(&key("b"), A, step(0, &[], &[], false), 10).unwrap();
        // "a" stays in use; "b" (last used at 10) is not idle for 1,000 ms until 1,010.
        s.fetch(&key("a"), A, step(1, &[], &[], false), 500)
            .unwrap();
        assert_eq!(
            s.fetch(&key("c"), A, step(0, &[], &[], false), 1_005),
            Err(SessionError::LimitReached)
        );
        match s.fetch(&key("c"), A, step(0, &[], &[], false), 1_010) {
            Ok(FetchSession::Opened { evicted, .. }) => assert_eq!(evicted, [key("b")]),
            other => panic!("{other:?}"),
        }
        assert!(s.get(&key("a")).is_some());
    }

    #[test]
    fn the_total_bound_evicts_idle_sessions_only() {
        let mut s = ShareSessions::new(2, 2, 100);
        s.fetch(&key("a"), A, step(0, &[], &[], false), 0).unwrap();
        s.fetch(&key("b"), B, step(0, &[], &[], false), 50).unwrap();
        let c = Origin {
            addr: IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3)),
            conn: 3,
        };
        assert_eq!(
            s.fetch(&key("c"), c, step(0, &[], &[], false), 60),
            Err(SessionError::LimitReached)
        );
        match s.fetch(&key("c"), c, step(0, &[], &[], false), 120) {
            Ok(FetchSession::Opened { evicted, .. }) => assert_eq!(evicted, [key("a")]),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn a_closed_connection_takes_the_sessions_it_last_used() {
        let mut s = ShareSessions::new(10, 10, 1_000);
        let a2 = Origin { conn: 9, ..A };
        s.fetch(&key("a"), A, step(0, &[], &[], false), 0).unwrap();
        s.fetch(&key("b"), A, step(0, &[], &[], false), 0).unwrap();
        s.fetch(&key("c"), B, step(0, &[], &[], false), 0).unwrap();
        // "b" moves to another connection of the same client.
        s.fetch(&key("b"), a2, step(1, &[], &[], false), 1).unwrap();
        assert_eq!(s.drop_connection(A.conn), [key("a")]);
        assert!(s.drop_connection(A.conn).is_empty());
        assert_eq!(s.len(), 2);
        assert_eq!(s.drop_connection(a2.conn), [key("b")]);
        assert_eq!(s.drop_connection(B.conn), [key("c")]);
        assert!(s.is_empty() && s.per_conn.is_empty() && s.per_address.is_empty());
    }
}
