//! The consumer's shared state: which partitions it owns, at which positions, and which
//! stream each feeds — and the delivery gate that makes "stopped" mean stopped.
//!
//! Every owned partition carries an *epoch*. Fetched messages are tagged with the epoch
//! they were fetched under; a stream hands a message to the application only if, under
//! the state lock, the partition is still owned with that epoch — and then records it
//! as consumed in the same critical section. StopFetcher and lease expiry remove
//! partitions under the same lock, so once they return, no message of those partitions
//! is delivered (docs/protocol.md §6.2: C stops delivering before it answers).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::sync::{broadcast, watch, Semaphore};

use crate::cluster::MetadataView;

/// A topic partition.
pub type TopicPartition = (String, i32);

/// One owned partition.
#[derive(Debug, Clone)]
pub(crate) struct Owned {
    /// Bumped whenever the partition is (re)started or moves to another stream.
    pub epoch: u64,
    /// Next offset to deliver (what is reported and committed); −1 until known.
    pub consumed: i64,
    /// Next offset to fetch; −1 until known (a reset is pending).
    pub fetch_position: i64,
    /// The stream it feeds.
    pub stream: usize,
    /// The position must come from the reset policy (no committed offset, or the
    /// committed one was out of range).
    pub needs_reset: bool,
    /// The fetcher gave up on it (offset out of range, …): reported as unhealthy in
    /// the next Heartbeat answer.
    pub dead: Option<String>,
}

/// Something that happened to the consumer's membership, for progress displays.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// Registered with the coordinator.
    Registered {
        /// The group's generation at registration.
        generation: i32,
    },
    /// A StopFetcher was applied.
    Stopped {
        /// Partitions stopped.
        partitions: Vec<TopicPartition>,
    },
    /// A StartFetcher was applied: the complete assignment of a generation.
    Assigned {
        /// The generation.
        generation: i32,
        /// Every partition owned now.
        partitions: Vec<TopicPartition>,
    },
    /// The channel ended and every partition was dropped; the consumer re-registers.
    Lost {
        /// Why.
        reason: String,
    },
}

/// How partitions map to streams.
#[derive(Debug, Clone)]
pub(crate) enum Routing {
    /// `{topic: n}`: each topic's owned partitions spread over its own streams.
    Static(BTreeMap<String, Vec<usize>>),
    /// A wildcard: every owned partition spread over all `streams`.
    Wildcard {
        /// Number of streams.
        streams: usize,
        /// The pattern, anchored at both ends.
        pattern: regex::Regex,
        /// Whitelist (topics matching) or blacklist (topics not matching).
        whitelist: bool,
    },
}

impl Routing {
    /// Whether the subscription covers `topic` (a StartFetcher naming another topic is
    /// refused, docs/protocol.md §6.4).
    pub(crate) fn subscribes(&self, topic: &str) -> bool {
        match self {
            Routing::Static(streams) => streams.contains_key(topic),
            Routing::Wildcard {
                pattern, whitelist, ..
            } => pattern.is_match(topic) == *whitelist,
        }
    }

    /// The stream of every partition in `owned` (sorted).
    pub(crate) fn assign(
        &self,
        owned: &BTreeSet<TopicPartition>,
    ) -> BTreeMap<TopicPartition, usize> {
        let mut out = BTreeMap::new();
        match self {
            Routing::Static(streams) => {
                let mut index: BTreeMap<&str, usize> = BTreeMap::new();
                for tp in owned {
                    let Some(of_topic) = streams.get(&tp.0).filter(|s| !s.is_empty()) else {
                        // Not subscribed (a race with a subscription change): the
                        // first stream of any topic takes it.
                        let first = streams.values().flatten().next().copied().unwrap_or(0);
                        out.insert(tp.clone(), first);
                        continue;
                    };
                    let i = index.entry(tp.0.as_str()).or_default();
                    out.insert(tp.clone(), of_topic[*i % of_topic.len()]);
                    *i += 1;
                }
            }
            Routing::Wildcard { streams, .. } => {
                for (i, tp) in owned.iter().enumerate() {
                    out.insert(tp.clone(), i % (*streams).max(1));
                }
            }
        }
        out
    }
}

/// Everything behind the state lock.
#[derive(Debug)]
pub(crate) struct State {
    /// The generation of the last StartFetcher (0 before the first).
    pub generation: i32,
    /// Owned partitions.
    pub owned: BTreeMap<TopicPartition, Owned>,
    /// Partitions whose committed offset was found out of range: that offset.
    pub out_of_range: BTreeMap<TopicPartition, i64>,
    /// Partition leaders.
    pub metadata: MetadataView,
    /// Shutdown started: nothing more is delivered.
    pub closed: bool,
    /// The lease deadline of the current channel (docs/protocol.md §6.2): after it
    /// nothing is delivered, even before the channel task notices (a process frozen
    /// and resumed must not deliver stale messages).
    pub lease_until: Option<std::time::Instant>,
    next_epoch: u64,
}

impl State {
    pub(crate) fn epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }

    /// Drops every partition (lost channel, lease expiry, shutdown); returns their
    /// consumed offsets.
    pub(crate) fn drop_all(&mut self) -> Vec<(TopicPartition, i64)> {
        self.lease_until = None;
        let all = std::mem::take(&mut self.owned);
        all.into_iter()
            .filter(|(_, o)| o.consumed >= 0)
            .map(|(tp, o)| (tp, o.consumed))
            .collect()
    }

    /// Consumed offsets of every owned partition that has one.
    pub(crate) fn consumed(&self) -> Vec<(TopicPartition, i64)> {
        self.owned
            .iter()
            .filter(|(_, o)| o.consumed >= 0)
            .map(|(tp, o)| (tp.clone(), o.consumed))
            .collect()
    }
}

/// State shared by the channel task, the fetchers and the streams.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Bumped when the assignment or metadata changes (fetchers re-read the state).
    pub changed: watch::Sender<u64>,
    /// Bytes of undelivered messages (`max_buffered_bytes` permits).
    pub buffer: Arc<Semaphore>,
    /// Membership events.
    pub events: broadcast::Sender<ConsumerEvent>,
    /// How partitions map to streams.
    pub routing: Routing,
}

impl Shared {
    pub(crate) fn new(routing: Routing, max_buffered_bytes: usize) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                generation: 0,
                owned: BTreeMap::new(),
                out_of_range: BTreeMap::new(),
                metadata: MetadataView::default(),
                closed: false,
                lease_until: None,
                next_epoch: 0,
            }),
            changed: watch::channel(0).0,
            buffer: Arc::new(Semaphore::new(
                max_buffered_bytes.min(Semaphore::MAX_PERMITS),
            )),
            events: broadcast::channel(1024).0,
            routing,
        })
    }

    /// Locks the state (a panic elsewhere does not poison it for good).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the fetchers to re-read the state.
    pub(crate) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Publishes an event (nobody listening is fine).
    pub(crate) fn event(&self, event: ConsumerEvent) {
        let _ = self.events.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    #[test]
    fn static_routing_spreads_each_topic_over_its_streams() {
        let routing = Routing::Static(
            [("a".to_string(), vec![0, 1]), ("b".to_string(), vec![2])]
                .into_iter()
                .collect(),
        );
        let out = routing.assign(&tps(&[("a", 0), ("a", 3), ("a", 5), ("b", 1)]));
        assert_eq!(out[&("a".to_string(), 0)], 0);
        assert_eq!(out[&("a".to_string(), 3)], 1);
        assert_eq!(out[&("a".to_string(), 5)], 0);
        assert_eq!(out[&("b".to_string(), 1)], 2);
    }

    #[test]
    fn wildcard_routing_spreads_everything() {
        let routing = Routing::Wildcard {
            streams: 2,
            pattern: regex::Regex::new("^(?:[a-c])$").unwrap(),
            whitelist: true,
        };
        let out = routing.assign(&tps(&[("a", 0), ("b", 0), ("c", 0)]));
        assert_eq!(out.values().copied().collect::<Vec<_>>(), vec![0, 1, 0]);
        assert!(routing.subscribes("b") && !routing.subscribes("d"));
    }
}
