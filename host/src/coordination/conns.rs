//! The driver's table of connections that spoke a native API.
//!
//! A connection may mix Kafka and native requests, and answers must leave in request
//! order (docs/protocol.md §1). So each request routed to the coordinator reserves a
//! response slot in the connection's outgoing queue before it reaches the coordinator,
//! and the driver fills the oldest open slot with the coordinator's next `Answer` on
//! that connection (the coordinator contract, rule 1, in `drover_abi::coordinator`). A
//! `Push` (the coordinator's own request: Heartbeat, StopFetcher, StartFetcher) goes
//! onto the queue of a channel.
//!
//! The coordinator says when a connection becomes a channel (`ChannelOpened`, before
//! the answer that tells the client): the driver sets its flag then, so the connection
//! reads every later frame as the consumer's answer (no slot). The driver never decodes
//! the coordinator's frames. An `Answer` with no open slot or a `Push` on a connection
//! that is not a channel breaks the contract: the connection is closed.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::atomic::Ordering,
};

use bytes::Bytes;
use tokio::sync::{mpsc::error::TrySendError, oneshot};

use crate::server::{
    conn_id::ConnId,
    queue::{ConnSink, Pending},
    reply::Outcome,
};

/// A reserved answer: the request's API key and version, and where the answer goes.
pub struct Slot {
    /// The request's API key (native, or a Kafka group API the coordinator serves).
    pub api_key: i16,
    /// The request's version (its header's `request_api_version`).
    pub api_version: i16,
    /// Receives the answer; its receiver sits in the connection's outgoing queue.
    pub reply: oneshot::Sender<Outcome>,
}

/// What became of a frame the coordinator sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The coordinator broke its contract (an answer nobody asked for, a push on a
    /// connection that is not a channel); the connection is closed.
    Violation(&'static str),
    /// It answered a request of API `api_key` at `api_version`.
    Answered {
        /// The request's API key.
        api_key: i16,
        /// The request's version.
        api_version: i16,
    },
    /// It was queued as a coordinator request on a channel.
    Pushed,
    /// The connection is gone (closed, or never spoke a native API).
    Gone,
    /// The connection's queue is full: the consumer does not read. Close it.
    Overflow,
}

#[derive(Default)]
struct Entry {
    sink: Option<ConnSink>,
    slots: VecDeque<Slot>,
}

/// Connections known to the driver, by connection id.
#[derive(Default)]
pub struct ConnTable {
    conns: HashMap<ConnId, Entry>,
    /// Closed by the driver; frames still arriving from them are dropped until the
    /// connection reports that it is gone.
    closing: HashSet<ConnId>,
}

impl ConnTable {
    /// Records the sink of `conn` (its first native frame).
    pub fn attach(&mut self, conn: ConnId, sink: ConnSink) {
        self.conns.entry(conn).or_default().sink = Some(sink);
    }

    /// Reserves the next answer on `conn` for a request of `api_key`.
    pub fn reserve(&mut self, conn: ConnId, slot: Slot) {
        self.conns.entry(conn).or_default().slots.push_back(slot);
    }

    /// Marks `conn` as a coordinator channel (`ChannelOpened`); returns whether it is
    /// known.
    pub fn open_channel(&mut self, conn: ConnId) -> bool {
        match self.conns.get(&conn).and_then(|e| e.sink.as_ref()) {
            Some(sink) => {
                sink.channel.store(true, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Delivers an `Answer` on `conn`: fills its oldest open slot.
    pub fn answer(&mut self, conn: ConnId, bytes: Bytes) -> Delivery {
        let Some(entry) = self.conns.get_mut(&conn) else {
            return Delivery::Gone;
        };
        match entry.slots.pop_front() {
            Some(slot) => {
                let _ = slot.reply.send(Outcome::Respond(bytes));
                Delivery::Answered {
                    api_key: slot.api_key,
                    api_version: slot.api_version,
                }
            }
            None => Delivery::Violation("an answer on a connection with no request waiting"),
        }
    }

    /// Delivers a `Push` on channel `conn`: queued behind what the connection sends.
    pub fn push(&mut self, conn: ConnId, bytes: Bytes) -> Delivery {
        let Some(entry) = self.conns.get_mut(&conn) else {
            return Delivery::Gone;
        };
        let Some(sink) = &entry.sink else {
            return Delivery::Gone;
        };
        if !sink.channel.load(Ordering::Acquire) {
            return Delivery::Violation("a push on a connection that is not a channel");
        }
        match sink.queue.try_send(Pending::Now(Outcome::Respond(bytes))) {
            Ok(()) => Delivery::Pushed,
            Err(TrySendError::Full(_)) => Delivery::Overflow,
            Err(TrySendError::Closed(_)) => Delivery::Gone,
        }
    }

    /// Forgets `conn` and tells the connection to close; returns whether it was known.
    /// Unanswered slots are dropped, which closes the connection after the answers
    /// before them went out.
    pub fn close(&mut self, conn: ConnId) -> bool {
        let removed = self.conns.remove(&conn);
        shrink_after_peak(&mut self.conns);
        match removed {
            Some(entry) => {
                if let Some(sink) = entry.sink {
                    sink.close.send_replace(true);
                }
                self.closing.insert(conn);
                true
            }
            None => false,
        }
    }

    /// Whether `conn` is open in the table (attached, not closed by the driver, not
    /// ended).
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
    }

    /// Whether the driver closed `conn` and it has not reported its end yet: its
    /// frames are dropped.
    pub fn is_closing(&self, conn: ConnId) -> bool {
        self.closing.contains(&conn)
    }

    /// Forgets `conn`, which reported its end; returns whether it was open (not
    /// already closed by the driver).
    pub fn remove(&mut self, conn: ConnId) -> bool {
        if self.closing.remove(&conn)
            && self.closing.capacity() > KEEP_CAPACITY
            && self.closing.len() < self.closing.capacity() / 4
        {
            self.closing.shrink_to(self.closing.len() * 2);
        }
        let known = self.conns.remove(&conn).is_some();
        shrink_after_peak(&mut self.conns);
        known
    }

    /// Every known connection id.
    pub fn ids(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// Number of known connections.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether no connection is known.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }
}

/// Tables this small keep their room (entries).
const KEEP_CAPACITY: usize = 64;

/// Gives back the room `conns` grew to at a peak once it is less than a quarter full:
/// a `HashMap` keeps its capacity when entries are removed, and 2,000 connections of a
/// classic-group churn left this table with room for 2,000 (issue 28 item 7; the
/// coordinator's tables do the same, coordinator-plugin/src/shrink.rs).
fn shrink_after_peak(conns: &mut HashMap<ConnId, Entry>) {
    if conns.capacity() > KEEP_CAPACITY && conns.len() < conns.capacity() / 4 {
        conns.shrink_to(conns.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{atomic::AtomicBool, Arc};

    use drover_protocol::ApiKey;
    use tokio::sync::watch;

    use super::*;

    fn sink() -> (
        ConnSink,
        tokio::sync::mpsc::Receiver<Pending>,
        watch::Receiver<bool>,
    ) {
        let (queue, rx) = tokio::sync::mpsc::channel(2);
        let (close, closed) = watch::channel(false);
        (
            ConnSink {
                queue,
                channel: Arc::new(AtomicBool::new(false)),
                close: Arc::new(close),
                peer: ([127, 0, 0, 1], 9).into(),
            },
            rx,
            closed,
        )
    }

    #[test]
    fn answers_fill_slots_in_order_and_pushes_need_a_channel() {
        let mut table = ConnTable::default();
        let (sink, mut queue, _closed) = sink();
        let channel = Arc::clone(&sink.channel);
        table.attach(1, sink);
        assert!(matches!(
            table.push(1, Bytes::from_static(b"early")),
            Delivery::Violation(_)
        ));
        let (tx, mut rx) = oneshot::channel();
        table.reserve(
            1,
            Slot {
                api_key: ApiKey::RegisterConsumer.code(),
                api_version: 0,
                reply: tx,
            },
        );
        assert!(table.open_channel(1));
        assert!(channel.load(Ordering::Acquire), "told: now a channel");
        assert_eq!(
            table.answer(1, Bytes::from_static(b"registered")),
            Delivery::Answered {
                api_key: 20_000,
                api_version: 0
            }
        );
        assert!(matches!(rx.try_recv(), Ok(Outcome::Respond(_))));
        assert!(matches!(
            table.answer(1, Bytes::from_static(b"unasked")),
            Delivery::Violation(_)
        ));
        assert_eq!(table.push(1, Bytes::from_static(b"ping")), Delivery::Pushed);
        assert!(queue.try_recv().is_ok());
        assert_eq!(table.push(1, Bytes::from_static(b"a")), Delivery::Pushed);
        assert_eq!(table.push(1, Bytes::from_static(b"b")), Delivery::Pushed);
        assert_eq!(table.push(1, Bytes::from_static(b"c")), Delivery::Overflow);
        assert_eq!(table.push(2, Bytes::from_static(b"x")), Delivery::Gone);
        assert!(!table.open_channel(2));
    }

    #[test]
    fn the_table_gives_back_the_room_a_peak_of_connections_left() {
        // Issue 28 item 7: 2,000 connections of a classic-group churn left the table
        // with room for 2,000 once they were gone.
        let mut table = ConnTable::default();
        let mut receivers = Vec::new();
        for conn in 0..2_000 {
            let (sink, queue, closed) = sink();
            table.attach(conn, sink);
            receivers.push((queue, closed));
        }
        let peak = table.conns.capacity();
        for conn in 0..1_000 {
            assert!(table.close(conn));
            assert!(!table.remove(conn));
        }
        for conn in 1_000..1_995 {
            assert!(table.remove(conn));
        }
        assert_eq!(table.len(), 5);
        assert!(table.conns.capacity() <= 2 * KEEP_CAPACITY, "{peak}");
        assert!(table.closing.capacity() <= 2 * KEEP_CAPACITY);
        assert!(table.is_open(1_999));
    }

    #[test]
    fn a_connection_not_opened_as_a_channel_stays_ordinary() {
        let mut table = ConnTable::default();
        let (sink, _queue, closed) = sink();
        let channel = Arc::clone(&sink.channel);
        table.attach(1, sink);
        let (tx, _rx) = oneshot::channel();
        table.reserve(
            1,
            Slot {
                api_key: ApiKey::RegisterConsumer.code(),
                api_version: 0,
                reply: tx,
            },
        );
        table.answer(1, Bytes::from_static(b"refused"));
        assert!(!channel.load(Ordering::Acquire));
        assert!(table.close(1));
        assert!(*closed.borrow());
        assert!(table.is_closing(1));
        assert!(!table.close(1));
        assert!(!table.remove(1), "already closed by the driver");
        assert!(!table.is_closing(1));
    }
}
