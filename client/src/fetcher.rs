//! Fetchers: one task per partition leader, fetching the owned partitions it leads with
//! Kafka Fetch and queueing their records on the partitions' streams.
//!
//! Memory is bounded by `max_buffered_bytes`: a fetched message takes its size in
//! permits of a shared semaphore before it is queued and gives them back when it is
//! delivered or dropped, so fetchers wait while the application is behind
//! (backpressure) however large the topics are. Positions come from the shared state;
//! a partition whose start must come from the reset policy is resolved with
//! ListOffsets first. A fetch answered with OFFSET_OUT_OF_RANGE marks the partition
//! dead; the coordinator channel reports it at the next Heartbeat (docs/protocol.md
//! §6.3).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use kafka_protocol::{
    messages::{
        fetch_request::{FetchPartition, FetchTopic},
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        BrokerId, FetchRequest, ListOffsetsRequest, TopicName,
    },
    protocol::StrBytes,
    records::RecordBatchDecoder,
};
use tokio::sync::{mpsc, watch};

use crate::{
    cluster::Cluster,
    config::{ConsumerConfig, OffsetReset},
    conn::Conn,
    error::ClientError,
    state::{Shared, TopicPartition},
    stream::{Item, Message},
};

/// Fetch version used (topic names).
const FETCH_VERSION: i16 = 12;
/// ListOffsets version used.
const LIST_OFFSETS_VERSION: i16 = 7;
/// Kafka error codes the fetcher handles.
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// What every fetcher needs.
pub(crate) struct FetchContext {
    pub shared: Arc<Shared>,
    pub config: Arc<ConsumerConfig>,
    pub cluster: Cluster,
    pub sinks: Vec<mpsc::Sender<Item>>,
    pub shutdown: watch::Receiver<bool>,
}

/// Keeps one fetcher running per leader of an owned partition, and the partition
/// metadata fresh, until shutdown.
pub(crate) async fn manage(ctx: Arc<FetchContext>) {
    let mut running: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
    let mut changes = ctx.shared.changed.subscribe();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let (leaders, unknown) = {
            let state = ctx.shared.lock();
            let mut leaders = std::collections::BTreeSet::new();
            let mut unknown = std::collections::BTreeSet::new();
            for (topic, partition) in state.owned.keys() {
                match state.metadata.leader(topic, *partition) {
                    Some(addr) => {
                        leaders.insert(addr.to_owned());
                    }
                    None => {
                        unknown.insert(topic.clone());
                    }
                }
            }
            (leaders, unknown)
        };
        if !unknown.is_empty() {
            let topics: Vec<String> = unknown.into_iter().collect();
            match ctx.cluster.metadata(Some(&topics)).await {
                Ok(view) => {
                    let mut state = ctx.shared.lock();
                    state.metadata.brokers.extend(view.brokers);
                    state.metadata.topics.extend(view.topics);
                    drop(state);
                    continue;
                }
                Err(e) => tracing::warn!("metadata for {topics:?}: {e}"),
            }
        }
        for addr in leaders {
            if running.get(&addr).is_none_or(|t| t.is_finished()) {
                let task = tokio::spawn(fetch_loop(Arc::clone(&ctx), addr.clone()));
                running.insert(addr, task);
            }
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
    for task in running.into_values() {
        task.abort();
    }
}

/// A partition to fetch: where, under which epoch, into which stream.
struct Want {
    tp: TopicPartition,
    epoch: u64,
    position: i64,
    stream: usize,
}

/// Fetches the owned partitions led by `addr` until shutdown.
async fn fetch_loop(ctx: Arc<FetchContext>, addr: String) {
    let mut changes = ctx.shared.changed.subscribe();
    let mut shutdown = ctx.shutdown.clone();
    let mut conn: Option<Conn> = None;
    let mut backoff = Duration::from_millis(ctx.config.retry_backoff_ms.max(1));
    loop {
        if *shutdown.borrow() {
            return;
        }
        let (resets, wants) = snapshot(&ctx, &addr);
        if resets.is_empty() && wants.is_empty() {
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            continue;
        }
        if conn.is_none() {
            match Conn::connect(&addr, ctx.config.request_timeout(), &ctx.config.security).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!("fetcher for {addr}: {e}; retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let result = if !resets.is_empty() {
            reset(&ctx, c, resets).await
        } else {
            fetch(&ctx, c, wants).await
        };
        match result {
            Ok(()) => backoff = Duration::from_millis(ctx.config.retry_backoff_ms.max(1)),
            Err(e) => {
                tracing::warn!("fetcher for {addr}: {e}; retrying in {backoff:?}");
                conn = None;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// The partitions led by `addr`: those needing a reset, and those to fetch.
fn snapshot(ctx: &FetchContext, addr: &str) -> (Vec<(TopicPartition, u64)>, Vec<Want>) {
    let state = ctx.shared.lock();
    let mut resets = Vec::new();
    let mut wants = Vec::new();
    for (tp, o) in &state.owned {
        if state.metadata.leader(&tp.0, tp.1) != Some(addr) || o.dead.is_some() {
            continue;
        }
        if o.needs_reset {
            resets.push((tp.clone(), o.epoch));
        } else if o.fetch_position >= 0 {
            wants.push(Want {
                tp: tp.clone(),
                epoch: o.epoch,
                position: o.fetch_position,
                stream: o.stream,
            });
        }
    }
    (resets, wants)
}

/// Resolves positions from the reset policy with ListOffsets; under `none` the
/// application gets [`ClientError::NoCommittedOffset`] and the partition is not read.
async fn reset(
    ctx: &FetchContext,
    conn: &mut Conn,
    resets: Vec<(TopicPartition, u64)>,
) -> Result<(), ClientError> {
    let timestamp = match ctx.config.auto_offset_reset {
        OffsetReset::Earliest => -2,
        OffsetReset::Latest => -1,
        OffsetReset::None => {
            for ((topic, partition), epoch) in resets {
                let found = {
                    let mut state = ctx.shared.lock();
                    let tp = (topic.clone(), partition);
                    // The committed offset this StartFetcher gave was found out of range
                    // before (start_fetcher then asks for the reset policy).
                    let out_of_range = state.out_of_range.get(&tp).copied();
                    match state.owned.get_mut(&tp) {
                        Some(o) if o.epoch == epoch => {
                            // Owned but unreadable: the next Heartbeat reports it, which
                            // releases the consumer's partitions (docs/protocol.md §6.4).
                            o.needs_reset = false;
                            o.dead = Some(match out_of_range {
                                Some(offset) => format!(
                                    "offset {offset} is out of range and auto_offset_reset = none"
                                ),
                                None => "no committed offset and auto_offset_reset = none".into(),
                            });
                            Some((o.stream, out_of_range))
                        }
                        _ => None,
                    }
                };
                if let Some((stream, out_of_range)) = found {
                    let error = match out_of_range {
                        Some(offset) => ClientError::OffsetOutOfRange {
                            topic,
                            partition,
                            offset,
                            log: None,
                        },
                        None => ClientError::NoCommittedOffset { topic, partition },
                    };
                    tracing::warn!("{error}");
                    let _ = ctx.sinks[stream].send(Item::Error(error)).await;
                }
            }
            return Ok(());
        }
    };
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for ((topic, partition), _) in &resets {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            let mut t = ListOffsetsTopic::default();
            t.name = TopicName(StrBytes::from_string(topic.to_owned()));
            t.partitions = partitions
                .into_iter()
                .map(|p| {
                    let mut lp = ListOffsetsPartition::default();
                    lp.partition_index = p;
                    lp.timestamp = timestamp;
                    lp.current_leader_epoch = -1;
                    lp
                })
                .collect();
            t
        })
        .collect();
    let response = conn.send(LIST_OFFSETS_VERSION, &request).await?;
    let mut state = ctx.shared.lock();
    for t in response.topics {
        for p in t.partitions {
            if p.error_code != 0 {
                continue;
            }
            let tp = (t.name.0.to_string(), p.partition_index);
            let Some(epoch) = resets.iter().find(|(r, _)| *r == tp).map(|(_, e)| *e) else {
                continue;
            };
            if let Some(o) = state.owned.get_mut(&tp).filter(|o| o.epoch == epoch) {
                o.needs_reset = false;
                o.fetch_position = p.offset;
                o.consumed = p.offset;
            }
        }
    }
    Ok(())
}

/// The fetch position of `want` is outside the log: the partition's fetcher is dead
/// until the channel reports it and the consumer registers again (then the reset
/// policy decides where it starts). Under reset `none` the application is told too
/// (Kafka's consumer raises OffsetOutOfRange from `poll` then): the error to queue on
/// the partition's stream is returned.
fn mark_out_of_range(
    ctx: &FetchContext,
    want: &Want,
    log_start: i64,
    log_end: i64,
) -> Option<ClientError> {
    let mut state = ctx.shared.lock();
    let o = state
        .owned
        .get_mut(&want.tp)
        .filter(|o| o.epoch == want.epoch)?;
    o.dead = Some(format!(
        "offset {} is out of range (log {log_start}..{log_end})",
        want.position
    ));
    state.out_of_range.insert(want.tp.clone(), want.position);
    (ctx.config.auto_offset_reset == OffsetReset::None).then(|| ClientError::OffsetOutOfRange {
        topic: want.tp.0.clone(),
        partition: want.tp.1,
        offset: want.position,
        log: Some((log_start, log_end)),
    })
}

/// One Fetch for `wants`; queues what it returns.
async fn fetch(ctx: &FetchContext, conn: &mut Conn, wants: Vec<Want>) -> Result<(), ClientError> {
    let config = &ctx.config;
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = config.fetch_max_wait_ms;
    request.min_bytes = config.fetch_min_bytes;
    request.max_bytes = config.fetch_max_bytes;
    request.session_epoch = -1;
    let mut by_topic: BTreeMap<&str, Vec<&Want>> = BTreeMap::new();
    for w in &wants {
        by_topic.entry(&w.tp.0).or_default().push(w);
    }
    request.topics = by_topic
        .into_iter()
        .map(|(topic, ws)| {
            let mut t = FetchTopic::default();
            t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
            t.partitions = ws
                .into_iter()
                .map(|w| {
                    let mut p = FetchPartition::default();
                    p.partition = w.tp.1;
                    p.fetch_offset = w.position;
                    p.current_leader_epoch = -1;
                    p.last_fetched_epoch = -1;
                    p.log_start_offset = -1;
                    p.partition_max_bytes = config.partition_max_bytes;
                    p
                })
                .collect();
            t
        })
        .collect();
    let response = conn.send(FETCH_VERSION, &request).await?;
    if response.error_code != 0 {
        return Err(ClientError::Response {
            api: "Fetch",
            code: response.error_code.to_string(),
        });
    }
    let mut stale_metadata = false;
    for topic in response.responses {
        let name = topic.topic.0.to_string();
        for p in topic.partitions {
            let Some(want) = wants
                .iter()
                .find(|w| w.tp.0 == name && w.tp.1 == p.partition_index)
            else {
                continue;
            };
            match p.error_code {
                0 => {}
                OFFSET_OUT_OF_RANGE => {
                    let error = mark_out_of_range(ctx, want, p.log_start_offset, p.high_watermark);
                    if let Some(error) = error {
                        tracing::warn!("{error}");
                        let _ = ctx.sinks[want.stream].send(Item::Error(error)).await;
                    }
                    continue;
                }
                code => {
                    tracing::debug!(topic = %name, partition = p.partition_index, code, "fetch error");
                    stale_metadata = true;
                    continue;
                }
            }
            let Some(mut records) = p.records else {
                continue;
            };
            let batches = RecordBatchDecoder::decode_all(&mut records)
                .map_err(|e| ClientError::Io(format!("undecodable records from {name}: {e}")))?;
            let mut messages = Vec::new();
            let mut next = want.position;
            for batch in batches {
                for r in batch.records {
                    next = next.max(r.offset + 1);
                    if r.control || r.offset < want.position {
                        continue;
                    }
                    messages.push(Message {
                        topic: name.clone(),
                        partition: p.partition_index,
                        offset: r.offset,
                        key: r.key,
                        value: r.value,
                        headers: r
                            .headers
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect(),
                        timestamp: r.timestamp,
                    });
                }
            }
            let current = {
                let mut state = ctx.shared.lock();
                match state.owned.get_mut(&want.tp) {
                    Some(o) if o.epoch == want.epoch && o.fetch_position == want.position => {
                        o.fetch_position = next;
                        true
                    }
                    _ => false,
                }
            };
            if !current {
                continue;
            }
            for message in messages {
                let size = message.size().min(ctx.config.max_buffered_bytes) as u32;
                let Ok(permit) = Arc::clone(&ctx.shared.buffer)
                    .acquire_many_owned(size)
                    .await
                else {
                    return Ok(());
                };
                let item = Item::Message {
                    message,
                    epoch: want.epoch,
                    _permit: permit,
                };
                if ctx.sinks[want.stream].send(item).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
    if stale_metadata {
        {
            let mut state = ctx.shared.lock();
            for w in &wants {
                state.metadata.topics.remove(&w.tp.0);
            }
        }
        ctx.shared.bump();
        tokio::time::sleep(Duration::from_millis(config.retry_backoff_ms)).await;
    }
    Ok(())
}
