//! A connection's outgoing queue: what goes on it ([`Pending`], sent in queue order by
//! the connection's writer) and the handle the coordinator driver gets to reach it
//! ([`ConnSink`]). The server owns both; the driver only fills them
//! ([`crate::coordination::conns`]).

use std::sync::{atomic::AtomicBool, Arc};

use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};

use super::reply::{Charged, Outcome};

/// An entry of a connection's outgoing queue, sent in queue order.
pub enum Pending {
    /// The coordinator's pushed requests on a channel (not answers to a request).
    Now(Outcome),
    /// A data-plane response, ready now.
    Ready(Charged),
    /// A data-plane handler still waiting (an fsync): the connection is busy until
    /// its response is written.
    Later(JoinHandle<Charged>),
    /// A long poll (Fetch, ShareFetch) waiting for records: the connection counts as
    /// idle meanwhile, so it may be evicted at the connection cap (its client fetches
    /// again elsewhere), and a client cannot hold slots with long polls alone.
    Parked(JoinHandle<Charged>),
    /// The coordinator's answer to a native request.
    Reply(oneshot::Receiver<Outcome>),
}

/// What a connection hands the driver with its first native frame.
pub struct ConnSink {
    /// The connection's outgoing queue; the writer sends in queue order.
    pub queue: tokio::sync::mpsc::Sender<Pending>,
    /// Set once RegisterConsumer succeeded: every later frame read on the connection
    /// is the consumer's answer to a coordinator request.
    pub channel: Arc<AtomicBool>,
    /// The driver sends `true` to close the connection.
    pub close: Arc<watch::Sender<bool>>,
    /// The client's address (Kafka's DescribeGroups reports it as the member's host).
    pub peer: std::net::SocketAddr,
}
