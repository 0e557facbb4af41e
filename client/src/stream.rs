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
///
/// **Consumed** (reported to the coordinator and committed) means processed: a message
/// counts once the application asks for the next one from the same stream, or calls
/// [`MessageStream::done`]. A consumer that dies while holding a message gets it
/// redelivered to the next owner (at least once).
pub struct MessageStream {
    pub(crate) queue: mpsc::Receiver<Item>,
    pub(crate) shared: Arc<Shared>,
    /// Which stream this is.
    pub index: usize,
    /// The message handed out last and not yet marked processed: (partition, the
    /// epoch it was delivered under, the offset after it).
    pub(crate) pending: Option<(crate::state::TopicPartition, u64, i64)>,
}

impl MessageStream {
    /// The next message, waiting for one; the previous one counts as processed.
    /// `Some(Err(_))` reports a partition the consumer cannot read (see
    /// [`ClientError::NoCommittedOffset`]); the stream goes on.
    pub async fn next(&mut self) -> Option<Result<Message, ClientError>> {
        self.done();
        loop {
            let item = self.queue.recv().await?;
            if let Some(out) = self.admit(item)? {
                return Some(out);
            }
        }
    }

    /// A message if one is ready now, without waiting (`None` also when shut down); the
    /// previous one counts as processed.
    pub fn try_next(&mut self) -> Option<Result<Message, ClientError>> {
        self.done();
        loop {
            let item = self.queue.try_recv().ok()?;
            if let Some(out) = self.admit(item)? {
                return Some(out);
            }
        }
    }

    /// Marks the message last returned as processed (its offset + 1 becomes the
    /// partition's consumed offset), unless its partition was stopped or moved since.
    pub fn done(&mut self) {
        let Some((tp, epoch, next)) = self.pending.take() else {
            return;
        };
        let mut state = self.shared.lock();
        if let Some(owned) = state.owned.get_mut(&tp) {
            if owned.epoch == epoch && owned.consumed < next {
                owned.consumed = next;
            }
        }
    }

    /// Whether the message last returned may still be acted on: its partition is still
    /// this consumer's under the same assignment and the coordinator lease holds.
    /// Check it right before an irreversible side effect; when it is false, another
    /// consumer will get (or has got) the message.
    pub fn is_current(&self) -> bool {
        let Some((tp, epoch, _)) = &self.pending else {
            return false;
        };
        let state = self.shared.lock();
        let lease_holds = state
            .lease_until
            .is_none_or(|d| std::time::Instant::now() < d);
        !state.closed && lease_holds && state.owned.get(tp).is_some_and(|o| o.epoch == *epoch)
    }

    /// The delivery gate: `None` when shut down, `Some(None)` to skip a stale message.
    #[allow(clippy::option_option)]
    fn admit(&mut self, item: Item) -> Option<Option<Result<Message, ClientError>>> {
        match item {
            Item::Error(e) => Some(Some(Err(e))),
            Item::Message { message, epoch, .. } => {
                let state = self.shared.lock();
                if state.closed {
                    return None;
                }
                if state
                    .lease_until
                    .is_some_and(|d| std::time::Instant::now() >= d)
                {
                    // The lease ran out: the channel task will drop everything; deliver
                    // nothing meanwhile.
                    return Some(None);
                }
                let tp = (message.topic.clone(), message.partition);
                match state.owned.get(&tp) {
                    Some(owned) if owned.epoch == epoch && message.offset >= owned.consumed => {
                        drop(state);
                        self.pending = Some((tp, epoch, message.offset + 1));
                        Some(Some(Ok(message)))
                    }
                    _ => Some(None),
                }
            }
        }
    }
}
