//! Message streams: what the application reads.
//!
//! Each stream is a bounded queue filled by the fetchers. Reading a message passes the
//! delivery gate of [`crate::state`]: a message whose partition was stopped or moved
//! since it was fetched is dropped, not delivered, and a delivered message is recorded
//! as consumed (its offset + 1 is what the consumer reports and commits).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::{error::ClientError, state::Shared};

/// One record, as delivered to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Key, if any.
    pub key: Option<Bytes>,
    /// Value, if any (null for a tombstone).
    pub value: Option<Bytes>,
    /// Headers in record order.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Record timestamp, ms since the Unix epoch (create or log-append time).
    pub timestamp: i64,
}

impl Message {
    /// Bytes the message holds (key, value and headers), for the buffer bound.
    pub(crate) fn size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len))
            .sum();
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
            + 64
    }
}

/// An entry of a stream's queue.
pub(crate) enum Item {
    /// A fetched message, the epoch it was fetched under, and its share of the buffer.
    Message {
        message: Message,
        epoch: u64,
        _permit: OwnedSemaphorePermit,
    },
    /// An error for the application (no committed offset under reset `none`).
    Error(ClientError),
}

/// A stream of messages from some of the group's partitions; which partitions feed it
/// changes with every rebalance (docs/protocol.md §6.4). Messages of one partition
/// arrive in offset order. Ends (`None`) after [`crate::Consumer::shutdown`].
pub struct MessageStream {
    pub(crate) queue: mpsc::Receiver<Item>,
    pub(crate) shared: Arc<Shared>,
    /// Which stream this is.
    pub index: usize,
}

impl MessageStream {
    /// The next message, waiting for one. `Some(Err(_))` reports a partition the
    /// consumer cannot read (see [`ClientError::NoCommittedOffset`]); the stream goes
    /// on.
    pub async fn next(&mut self) -> Option<Result<Message, ClientError>> {
        loop {
            let item = self.queue.recv().await?;
            if let Some(out) = self.admit(item)? {
                return Some(out);
            }
        }
    }

    /// A message if one is ready now, without waiting (`None` also when shut down).
    pub fn try_next(&mut self) -> Option<Result<Message, ClientError>> {
        loop {
            let item = self.queue.try_recv().ok()?;
            if let Some(out) = self.admit(item)? {
                return Some(out);
            }
        }
    }

    /// The delivery gate: `None` when shut down, `Some(None)` to skip a stale message.
    #[allow(clippy::option_option)]
    fn admit(&self, item: Item) -> Option<Option<Result<Message, ClientError>>> {
        match item {
            Item::Error(e) => Some(Some(Err(e))),
            Item::Message { message, epoch, .. } => {
                let mut state = self.shared.lock();
                if state.closed {
                    return None;
                }
                let tp = (message.topic.clone(), message.partition);
                match state.owned.get_mut(&tp) {
                    Some(owned) if owned.epoch == epoch && message.offset >= owned.consumed => {
                        owned.consumed = message.offset + 1;
                        Some(Some(Ok(message)))
                    }
                    _ => Some(None),
                }
            }
        }
    }
}
