//! The consumer connector: create message streams, stay in the group, commit, shut
//! down.
//!
//! A [`Consumer`] runs three kinds of task: the membership loop (find the coordinator,
//! register, serve the channel; when the channel ends — lost, lease expired, fetchers
//! unhealthy — drop every partition, back off and register again), the fetchers
//! ([`crate::fetcher`]), and an auto-commit timer.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use drover_protocol::{
    CommitOffsetRequest, LeaveGroupRequest, NativeRequest, NativeResponse, Subscription,
};
use tokio::{
    sync::{broadcast, mpsc, oneshot, watch, Mutex},
    task::JoinHandle,
};

use crate::{
    channel::{self, SessionEnd},
    cluster::Cluster,
    config::ConsumerConfig,
    conn::Conn,
    error::ClientError,
    fetcher::{self, FetchContext},
    state::{ConsumerEvent, Routing, Shared, TopicPartition},
    stream::MessageStream,
};

/// Queue length of each stream, in messages (memory is bounded by
/// `max_buffered_bytes`).
const STREAM_QUEUE: usize = 4096;

/// A wildcard subscription (the original design's topic filters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicFilter {
    /// Every topic whose whole name matches the regular expression.
    Whitelist(String),
    /// Every topic whose name does not match it.
    Blacklist(String),
}

/// A member of a consumer group, speaking the native protocol.
pub struct Consumer {
    shared: Arc<Shared>,
    config: Arc<ConsumerConfig>,
    cluster: Cluster,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    committer: Arc<Committer>,
}

/// Sends CommitOffset for the consumed offsets, on a connection it keeps.
struct Committer {
    shared: Arc<Shared>,
    config: Arc<ConsumerConfig>,
    cluster: Cluster,
    conn: Mutex<Option<Conn>>,
}

impl Consumer {
    /// Joins `config.group` subscribed to `topics` (topic → number of streams) and
    /// returns the streams of each topic. Fails with [`ClientError::UnknownTopic`] for
    /// a topic the brokers do not have, [`ClientError::Unreachable`] when no broker
    /// answers within `bootstrap_timeout_ms`, and [`ClientError::Refused`] when the
    /// coordinator refuses the registration.
    pub async fn create_message_streams<T: Into<String>>(
        config: ConsumerConfig,
        topics: impl IntoIterator<Item = (T, usize)>,
    ) -> Result<(Consumer, BTreeMap<String, Vec<MessageStream>>), ClientError> {
        let topics: Vec<(String, usize)> = topics.into_iter().map(|(t, n)| (t.into(), n)).collect();
        if topics.is_empty() || topics.iter().any(|(_, n)| *n == 0) {
            return Err(ClientError::Config(
                "subscribe to at least one topic, with at least one stream each".into(),
            ));
        }
        config.validate()?;
        let config = Arc::new(config);
        let cluster = Cluster::new(Arc::clone(&config));
        let names: Vec<String> = topics.iter().map(|(t, _)| t.clone()).collect();
        let metadata = cluster.metadata(Some(&names)).await?;
        if let Some(missing) = names.iter().find(|t| !metadata.topics.contains_key(*t)) {
            return Err(ClientError::UnknownTopic(missing.clone()));
        }
        let mut routes = BTreeMap::new();
        let mut next = 0;
        for (topic, n) in &topics {
            routes.insert(topic.clone(), (next..next + n).collect::<Vec<_>>());
            next += n;
        }
        let subscription = Subscription::static_topics(
            topics
                .iter()
                .map(|(t, n)| (t.clone(), (*n).min(i32::MAX as usize) as i32)),
        );
        let (consumer, streams) = Consumer::start(
            config,
            cluster,
            subscription,
            Routing::Static(routes.clone()),
            next,
        )
        .await?;
        Ok((consumer, streams_by_topic(&routes, streams)))
    }

    /// Joins `config.group` subscribed to every topic `filter` selects, now and as
    /// topics are created or deleted, read through `streams` streams. Fails with
    /// [`ClientError::InvalidPattern`] for a pattern that is not a regular expression.
    pub async fn create_message_streams_by_filter(
        config: ConsumerConfig,
        filter: TopicFilter,
        streams: usize,
    ) -> Result<(Consumer, Vec<MessageStream>), ClientError> {
        if streams == 0 {
            return Err(ClientError::Config("at least one stream".into()));
        }
        config.validate()?;
        let pattern = match &filter {
            TopicFilter::Whitelist(p) | TopicFilter::Blacklist(p) => p.clone(),
        };
        let compiled = match regex::Regex::new(&format!("^(?:{pattern})$")) {
            Ok(compiled) => compiled,
            Err(e) => {
                return Err(ClientError::InvalidPattern {
                    pattern,
                    message: e.to_string().lines().last().unwrap_or("").trim().to_owned(),
                })
            }
        };
        let n = streams.min(i32::MAX as usize) as i32;
        let whitelist = matches!(filter, TopicFilter::Whitelist(_));
        let subscription = match filter {
            TopicFilter::Whitelist(p) => Subscription::whitelist(p, n),
            TopicFilter::Blacklist(p) => Subscription::blacklist(p, n),
        };
        let config = Arc::new(config);
        let cluster = Cluster::new(Arc::clone(&config));
        let routing = Routing::Wildcard {
            streams,
            pattern: compiled,
            whitelist,
        };
        Consumer::start(config, cluster, subscription, routing, streams).await
    }

    async fn start(
        config: Arc<ConsumerConfig>,
        cluster: Cluster,
        subscription: Subscription,
        routing: Routing,
        streams: usize,
    ) -> Result<(Consumer, Vec<MessageStream>), ClientError> {
        let shared = Shared::new(routing, config.max_buffered_bytes);
        let (shutdown, stopped) = watch::channel(false);
        let mut sinks = Vec::with_capacity(streams);
        let mut out = Vec::with_capacity(streams);
        for index in 0..streams {
            let (tx, rx) = mpsc::channel(STREAM_QUEUE);
            sinks.push(tx);
            out.push(MessageStream {
                queue: rx,
                shared: Arc::clone(&shared),
                index,
                pending: None,
            });
        }
        let fetch = Arc::new(FetchContext {
            shared: Arc::clone(&shared),
            config: Arc::clone(&config),
            cluster: cluster.clone(),
            sinks,
            shutdown: stopped.clone(),
        });
        let mut tasks = vec![tokio::spawn(fetcher::manage(fetch))];
        let (registered_tx, registered) = oneshot::channel();
        tasks.push(tokio::spawn(membership(
            Arc::clone(&shared),
            Arc::clone(&config),
            cluster.clone(),
            subscription,
            stopped.clone(),
            registered_tx,
        )));
        let committer = Arc::new(Committer {
            shared: Arc::clone(&shared),
            config: Arc::clone(&config),
            cluster: cluster.clone(),
            conn: Mutex::new(None),
        });
        if config.enable_auto_commit && config.auto_commit_interval_ms > 0 {
            tasks.push(tokio::spawn(auto_commit(
                Arc::clone(&committer),
                stopped.clone(),
            )));
        }
        let consumer = Consumer {
            shared,
            config,
            cluster,
            shutdown,
            tasks,
            committer,
        };
        match registered.await {
            Ok(Ok(())) => Ok((consumer, out)),
            Ok(Err(e)) => {
                consumer.stop();
                Err(e)
            }
            Err(_) => {
                consumer.stop();
                Err(ClientError::Shutdown)
            }
        }
    }

    /// Membership events (registered, assigned, stopped, lost), for progress displays.
    pub fn events(&self) -> broadcast::Receiver<ConsumerEvent> {
        self.shared.events.subscribe()
    }

    /// The current generation and owned partitions.
    pub fn assignment(&self) -> (i32, Vec<TopicPartition>) {
        let state = self.shared.lock();
        (state.generation, state.owned.keys().cloned().collect())
    }

    /// The consumed offsets (next offset to deliver) of the owned partitions.
    pub fn positions(&self) -> Vec<(TopicPartition, i64)> {
        self.shared.lock().consumed()
    }

    /// Commits the consumed offsets of the owned partitions now (CommitOffset), and
    /// waits until the coordinator has them durably. Offsets are also reported in
    /// every Heartbeat answer and committed every `auto_commit_interval_ms`.
    pub async fn commit(&self) -> Result<(), ClientError> {
        self.committer.commit().await
    }

    /// Commits, leaves the group (LeaveGroup releases the partitions at once), stops
    /// every task; the streams end. Returns the first error of the commit or the leave.
    pub async fn shutdown(self) -> Result<(), ClientError> {
        // A rebalance that started a moment ago (another member left) refuses commits
        // of the previous generation until this consumer has the new one: retry briefly.
        let mut committed = self.commit().await;
        for _ in 0..10 {
            match &committed {
                Err(ClientError::Response { code, .. })
                    if code.contains("ILLEGAL_GENERATION")
                        || code.contains("REBALANCE_IN_PROGRESS") =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    committed = self.commit().await;
                }
                _ => break,
            }
        }
        // Stop delivering before leaving; the membership loop sees `closed` when the
        // coordinator closes the channel, and does not register again.
        self.shared.lock().closed = true;
        let leave = NativeRequest::LeaveGroup(LeaveGroupRequest {
            group_id: self.config.group.clone(),
            consumer_id: self.config.consumer_id.clone(),
        });
        let left = async {
            let addr = self.cluster.find_coordinator().await?;
            let mut conn =
                Conn::connect(&addr, self.config.request_timeout(), &self.config.security).await?;
            match conn.native(&leave).await? {
                NativeResponse::LeaveGroup(r) if r.error_code.is_none() => Ok(()),
                NativeResponse::LeaveGroup(r) => Err(ClientError::Response {
                    api: "LeaveGroup",
                    code: r.error_code.name().unwrap_or("unknown error").to_owned(),
                }),
                _ => Err(ClientError::Io("unexpected answer to LeaveGroup".into())),
            }
        }
        .await;
        self.stop();
        committed.and(left)
    }

    fn stop(&self) {
        {
            let mut state = self.shared.lock();
            state.closed = true;
            state.drop_all();
        }
        self.shutdown.send_replace(true);
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Committer {
    pub async fn commit(&self) -> Result<(), ClientError> {
        let (generation, offsets) = {
            let state = self.shared.lock();
            (state.generation, state.consumed())
        };
        if offsets.is_empty() || generation <= 0 {
            return Ok(());
        }
        let request = NativeRequest::CommitOffset(CommitOffsetRequest {
            group_id: self.config.group.clone(),
            consumer_id: self.config.consumer_id.clone(),
            generation,
            topics: channel::to_wire(offsets),
        });
        let mut conn = self.conn.lock().await;
        if conn.is_none() {
            let addr = self.cluster.find_coordinator().await?;
            *conn = Some(
                Conn::connect(&addr, self.config.request_timeout(), &self.config.security).await?,
            );
        }
        let Some(c) = conn.as_mut() else {
            return Err(ClientError::Shutdown);
        };
        let answer = match c.native(&request).await {
            Ok(answer) => answer,
            Err(e) => {
                *conn = None;
                return Err(e);
            }
        };
        let NativeResponse::CommitOffset(r) = answer else {
            return Err(ClientError::Io("unexpected answer to CommitOffset".into()));
        };
        for t in r.topics {
            for p in t.partitions {
                if !p.error_code.is_none() {
                    return Err(ClientError::Response {
                        api: "CommitOffset",
                        code: format!(
                            "{}-{}: {}",
                            t.topic,
                            p.partition,
                            p.error_code.name().unwrap_or("unknown error")
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Commits every `auto_commit_interval_ms` until shutdown.
async fn auto_commit(committer: Arc<Committer>, mut shutdown: watch::Receiver<bool>) {
    let every = Duration::from_millis(committer.config.auto_commit_interval_ms);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        if let Err(e) = committer.commit().await {
            tracing::debug!("auto-commit: {e}");
        }
    }
}

/// Stays in the group until shutdown: register, serve the channel, and again.
async fn membership(
    shared: Arc<Shared>,
    config: Arc<ConsumerConfig>,
    cluster: Cluster,
    subscription: Subscription,
    mut shutdown: watch::Receiver<bool>,
    registered: oneshot::Sender<Result<(), ClientError>>,
) {
    let mut registered = Some(registered);
    let base = Duration::from_millis(config.retry_backoff_ms.max(1));
    let mut backoff = base;
    // Sessions in a row that ended with a dead fetcher (docs/protocol.md §6.3).
    let mut dead_streak = 0u32;
    loop {
        let end = channel::session(
            &shared,
            &config,
            &cluster,
            &subscription,
            &mut shutdown,
            &mut registered,
        )
        .await;
        if shared.lock().closed {
            return;
        }
        let pause = match &end {
            SessionEnd::FetcherDied(_) => {
                dead_streak = dead_streak.saturating_add(1);
                config.fetcher_failure_backoff(dead_streak)
            }
            _ => {
                dead_streak = 0;
                backoff
            }
        };
        match end {
            SessionEnd::Shutdown => return,
            SessionEnd::Refused(e) => {
                if let Some(tx) = registered.take() {
                    let _ = tx.send(Err(e));
                    return;
                }
                tracing::error!("registration refused: {e}; retrying in {backoff:?}");
            }
            SessionEnd::Retry(why) => {
                tracing::info!("re-registering in {backoff:?} ({why})");
            }
            SessionEnd::FetcherDied(why) => {
                tracing::warn!(
                    sessions_in_a_row = dead_streak,
                    "a fetcher died; re-registering in {} ms ({why})",
                    pause.as_millis()
                );
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
        if matches!(shared.lock().generation, g if g > 0) {
            backoff = base;
        }
    }
}

/// The streams of each topic, taken by their indexes in `routes` (topic → indexes into
/// `streams`). The indexes follow the order the topics were given in, not the topics'
/// names (`drover consume --topic h2 --topic c6` gives h2 stream 0 and c6 stream 1),
/// so each topic's streams are picked out by index; an index out of range, which
/// `routes` built from the same list never has, is skipped.
fn streams_by_topic<S>(
    routes: &BTreeMap<String, Vec<usize>>,
    streams: Vec<S>,
) -> BTreeMap<String, Vec<S>> {
    let mut slots: Vec<Option<S>> = streams.into_iter().map(Some).collect();
    routes
        .iter()
        .map(|(topic, indexes)| {
            let mine = indexes
                .iter()
                .filter_map(|&i| slots.get_mut(i).and_then(Option::take))
                .collect();
            (topic.clone(), mine)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(list: &[(&str, &[usize])]) -> BTreeMap<String, Vec<usize>> {
        list.iter()
            .map(|(t, i)| (t.to_string(), i.to_vec()))
            .collect()
    }

    /// Topics given out of alphabetical order (`--topic h2 --topic c6`): h2 has stream
    /// 0, c6 stream 1. Splitting from the end of the topics in name order panicked.
    #[test]
    fn streams_follow_the_order_topics_were_given_in() {
        let by = streams_by_topic(&routes(&[("h2", &[0]), ("c6", &[1])]), vec!["s0", "s1"]);
        assert_eq!(by["h2"], ["s0"]);
        assert_eq!(by["c6"], ["s1"]);
        let by = streams_by_topic(
            &routes(&[("z", &[0, 1]), ("a", &[2]), ("m", &[3, 4, 5])]),
            (0..6).collect(),
        );
        assert_eq!(by["z"], [0, 1]);
        assert_eq!(by["a"], [2]);
        assert_eq!(by["m"], [3, 4, 5]);
    }
}
