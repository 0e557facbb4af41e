//! The coordinator channel (docs/protocol.md §4, §6): register, then answer the
//! coordinator's Heartbeat, StopFetcher and StartFetcher, one at a time, while keeping
//! the lease.
//!
//! **The lease** (§6.2): the anchor is when the consumer started writing its previous
//! frame, taken each time a coordinator frame arrives; if no frame arrives by
//! `anchor + session_timeout` (minus a safety margin), the consumer drops every
//! partition — nothing more is delivered — before the coordinator may hand them to
//! anyone else. A lost channel drops them at once. Either way the session ends and
//! `crate::consumer` rediscovers the coordinator and registers again.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::BytesMut;
use drover_protocol::{
    AutoOffsetReset, ErrorCode, HeartbeatResponse, NativeRequest, NativeResponse, PartitionOffset,
    PartitionStart, RegisterConsumerRequest, StartFetcherRequest, StartFetcherResponse,
    StopFetcherRequest, StopFetcherResponse, Subscription, TopicOffsets,
};
use tokio::io::AsyncWriteExt;

use crate::{
    cluster::Cluster,
    config::{ConsumerConfig, OffsetReset},
    conn::{read_frame, Conn},
    error::ClientError,
    state::{ConsumerEvent, Owned, Shared, TopicPartition},
};

/// Registration error codes worth retrying (the coordinator moved or is starting).
const RETRIABLE: [i16; 2] = [15, 16];

/// How a session ended.
#[derive(Debug)]
pub(crate) enum SessionEnd {
    /// Registration was refused for good (bad subscription, limits).
    Refused(ClientError),
    /// The session ran and ended (lost channel, lease expiry, retriable refusal);
    /// register again.
    Retry(String),
    /// A fetcher died and the consumer reported it (docs/protocol.md §6.3); register
    /// again after the fetcher-failure backoff.
    FetcherDied(String),
    /// Shutdown was requested.
    Shutdown,
}

/// The safety margin taken off the lease: stop a little before the deadline.
fn lease_margin(session_timeout: Duration) -> Duration {
    (session_timeout / 20).clamp(Duration::from_millis(5), Duration::from_millis(500))
}

/// Offsets as the wire groups them.
pub(crate) fn to_wire(offsets: Vec<(TopicPartition, i64)>) -> Vec<TopicOffsets> {
    let mut by_topic: BTreeMap<String, Vec<PartitionOffset>> = BTreeMap::new();
    for ((topic, partition), offset) in offsets {
        by_topic.entry(topic).or_default().push(PartitionOffset {
            partition,
            offset,
            metadata: None,
        });
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| TopicOffsets { topic, partitions })
        .collect()
}

/// One registration and the channel it opens. `registered` is told the outcome of the
/// registration.
pub(crate) async fn session(
    shared: &Arc<Shared>,
    config: &ConsumerConfig,
    cluster: &Cluster,
    subscription: &Subscription,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    registered: &mut Option<tokio::sync::oneshot::Sender<Result<(), ClientError>>>,
) -> SessionEnd {
    let coordinator = tokio::select! {
        found = cluster.find_coordinator() => match found {
            Ok(addr) => addr,
            Err(e @ ClientError::Unreachable { .. }) if registered.is_some() => {
                return SessionEnd::Refused(e)
            }
            Err(e) => return SessionEnd::Retry(e.to_string()),
        },
        _ = shutdown.wait_for(|s| *s) => return SessionEnd::Shutdown,
    };
    let mut conn =
        match Conn::connect(&coordinator, config.request_timeout(), &config.security).await {
            Ok(c) => c,
            Err(e) => return SessionEnd::Retry(e.to_string()),
        };
    let request = NativeRequest::RegisterConsumer(RegisterConsumerRequest {
        group_id: config.group.clone(),
        consumer_id: config.consumer_id.clone(),
        host: config.host.clone(),
        session_timeout_ms: config.session_timeout_ms,
        subscription: subscription.clone(),
        auto_offset_reset: match config.auto_offset_reset {
            OffsetReset::Earliest => AutoOffsetReset::EARLIEST,
            OffsetReset::Latest => AutoOffsetReset::LATEST,
            OffsetReset::None => AutoOffsetReset::NONE,
        },
        assignor: config.assignor.clone(),
        member: match config.member_data() {
            Ok(member) => member,
            Err(e) => return SessionEnd::Refused(e),
        },
    });
    let sent_register = Instant::now();
    let answer = match conn.native(&request).await {
        Ok(NativeResponse::RegisterConsumer(r)) => r,
        Ok(other) => return SessionEnd::Retry(format!("unexpected answer {:?}", other.api_key())),
        Err(e) if request.version() >= 1 => {
            // docs/protocol.md §3 rule 4: a coordinator that predates v1 closes the
            // connection without answering. Retry (it may be a restart), but say so.
            tracing::warn!(
                coordinator = %coordinator,
                "RegisterConsumer v1 (rack, weight or labels set) got no answer: {e}; \
                 a coordinator that does not serve v1 closes the connection like this"
            );
            return SessionEnd::Retry(e.to_string());
        }
        Err(e) => return SessionEnd::Retry(e.to_string()),
    };
    if !answer.error_code.is_none() {
        let error = ClientError::Refused {
            code: answer
                .error_code
                .name()
                .map_or_else(|| answer.error_code.0.to_string(), str::to_owned),
            message: answer.error_message.unwrap_or_default(),
        };
        if RETRIABLE.contains(&answer.error_code.0) {
            return SessionEnd::Retry(error.to_string());
        }
        return SessionEnd::Refused(error);
    }
    tracing::info!(
        group = %config.group,
        consumer = %config.consumer_id,
        coordinator = %coordinator,
        generation = answer.generation,
        version = request.version(),
        "registered"
    );
    shared.event(ConsumerEvent::Registered {
        generation: answer.generation,
    });
    if let Some(tx) = registered.take() {
        let _ = tx.send(Ok(()));
    }
    serve(shared, config, conn, sent_register, shutdown).await
}

/// Serves the channel until it ends; every partition is dropped when it does.
async fn serve(
    shared: &Arc<Shared>,
    config: &ConsumerConfig,
    conn: Conn,
    sent_register: Instant,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> SessionEnd {
    let addr = conn.addr().to_owned();
    let session_timeout = Duration::from_millis(config.session_timeout_ms.max(1) as u64);
    let margin = lease_margin(session_timeout);
    let (mut reader, mut writer) = tokio::io::split(conn.into_stream());
    // The register answer arrived: the anchor is the start of the RegisterConsumer.
    let mut anchor = sent_register;
    let mut last_sent = sent_register;
    let end = loop {
        let deadline = anchor + session_timeout - margin;
        let frame = tokio::select! {
            frame = tokio::time::timeout_at(deadline.into(), read_frame(&mut reader, &addr)) => frame,
            _ = shutdown.wait_for(|s| *s) => break SessionEnd::Shutdown,
        };
        let frame = match frame {
            Ok(Ok(frame)) => frame,
            Ok(Err(e)) => break SessionEnd::Retry(format!("channel lost: {e}")),
            Err(_) => {
                break SessionEnd::Retry(format!(
                    "no frame from the coordinator within the session timeout ({session_timeout:?})"
                ))
            }
        };
        anchor = last_sent;
        shared.lock().lease_until = Some(anchor + session_timeout - margin);
        let (header, request) = match drover_protocol::decode_request_frame(frame) {
            Ok(decoded) => decoded,
            Err(e) => break SessionEnd::Retry(format!("malformed coordinator request: {e}")),
        };
        let (response, then_end) = answer(shared, request, config.enable_auto_commit);
        let mut out = BytesMut::new();
        if let Err(e) =
            drover_protocol::encode_response_frame(&mut out, header.correlation_id, &response)
        {
            break SessionEnd::Retry(format!("cannot encode an answer: {e}"));
        }
        last_sent = Instant::now();
        if let Err(e) = writer.write_all(&out).await {
            break SessionEnd::Retry(format!("channel lost: {e}"));
        }
        if let Some(end) = then_end {
            break end;
        }
    };
    let (dropped, leaving) = {
        let mut state = shared.lock();
        (state.drop_all(), state.closed)
    };
    shared.bump();
    if leaving {
        // Shutdown: the consumer left the group; the coordinator closed the channel.
        tracing::debug!("coordinator channel closed after leaving the group");
        return SessionEnd::Shutdown;
    }
    let reason = match &end {
        SessionEnd::Retry(why) | SessionEnd::FetcherDied(why) => why.clone(),
        SessionEnd::Refused(e) => e.to_string(),
        SessionEnd::Shutdown => "shutdown".into(),
    };
    tracing::info!(
        partitions = dropped.len(),
        "coordinator channel ended: {reason}; stopped delivering"
    );
    shared.event(ConsumerEvent::Lost { reason });
    end
}

/// Answers one coordinator request; the second value is set when the consumer must
/// leave the channel after answering (its fetchers are unhealthy, or the request broke
/// the protocol). With `auto_commit` off, a healthy Heartbeat answer carries no
/// offsets; the answers that end ownership (StopFetcher, an unhealthy Heartbeat) carry
/// the processed offsets in both modes (docs/protocol.md §5.3, §6.5).
fn answer(
    shared: &Shared,
    request: NativeRequest,
    auto_commit: bool,
) -> (NativeResponse, Option<SessionEnd>) {
    match request {
        NativeRequest::Heartbeat(_) => {
            let mut state = shared.lock();
            let dead: Vec<String> = state
                .owned
                .iter()
                .filter_map(|(tp, o)| o.dead.as_ref().map(|d| format!("{}-{}: {d}", tp.0, tp.1)))
                .collect();
            if dead.is_empty() {
                let offsets = if auto_commit {
                    to_wire(state.consumed())
                } else {
                    Vec::new()
                };
                return (
                    NativeResponse::Heartbeat(HeartbeatResponse {
                        error_code: ErrorCode::NONE,
                        fetchers_healthy: true,
                        offsets,
                    }),
                    None,
                );
            }
            // Stop everything before saying so (§6.2: that lets the coordinator
            // release the partitions at once), report final offsets, re-register.
            let offsets = to_wire(state.drop_all());
            drop(state);
            shared.bump();
            (
                NativeResponse::Heartbeat(HeartbeatResponse {
                    error_code: ErrorCode::NONE,
                    fetchers_healthy: false,
                    offsets,
                }),
                Some(SessionEnd::FetcherDied(format!(
                    "fetcher died: {}",
                    dead.join("; ")
                ))),
            )
        }
        NativeRequest::StopFetcher(stop) => (
            NativeResponse::StopFetcher(stop_fetcher(shared, stop)),
            None,
        ),
        NativeRequest::StartFetcher(start) => {
            let (response, leave) = start_fetcher(shared, start);
            (
                NativeResponse::StartFetcher(response),
                leave.map(SessionEnd::Retry),
            )
        }
        other => (
            // Not a coordinator request; answering with an error makes the coordinator
            // fail this consumer, which then registers again.
            NativeResponse::StartFetcher(StartFetcherResponse {
                error_code: ErrorCode::INVALID_REQUEST,
            }),
            Some(SessionEnd::Retry(format!(
                "unexpected {:?} on the channel",
                other.api_key()
            ))),
        ),
    }
}

fn stop_fetcher(shared: &Shared, stop: StopFetcherRequest) -> StopFetcherResponse {
    let mut state = shared.lock();
    let stopped: Vec<TopicPartition> = if stop.stop_all {
        state.owned.keys().cloned().collect()
    } else {
        stop.partitions
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
            .collect()
    };
    let mut offsets = Vec::new();
    for tp in &stopped {
        if let Some(o) = state.owned.remove(tp) {
            if o.consumed >= 0 {
                offsets.push((tp.clone(), o.consumed));
            }
        }
    }
    drop(state);
    shared.bump();
    shared.event(ConsumerEvent::Stopped {
        partitions: stopped,
    });
    StopFetcherResponse {
        error_code: ErrorCode::NONE,
        offsets: to_wire(offsets),
    }
}

/// Applies a StartFetcher (docs/protocol.md §6.4). A topic outside the subscription is
/// refused with INVALID_REQUEST (the second value: the consumer then leaves the
/// channel).
fn start_fetcher(
    shared: &Shared,
    start: StartFetcherRequest,
) -> (StartFetcherResponse, Option<String>) {
    if let Some(t) = start
        .assignment
        .iter()
        .find(|t| !shared.routing.subscribes(&t.topic))
    {
        return (
            StartFetcherResponse {
                error_code: ErrorCode::INVALID_REQUEST,
            },
            Some(format!(
                "StartFetcher assigns topic `{}`, which this consumer does not subscribe to",
                t.topic
            )),
        );
    }
    let mut state = shared.lock();
    let mut next: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    for topic in &start.assignment {
        for PartitionStart {
            partition,
            start_offset,
        } in &topic.partitions
        {
            next.insert((topic.topic.clone(), *partition), *start_offset);
        }
    }
    let owned_now: BTreeSet<TopicPartition> = next.keys().cloned().collect();
    let streams = shared.routing.assign(&owned_now);
    let mut owned = BTreeMap::new();
    for (tp, start_offset) in next {
        let stream = streams.get(&tp).copied().unwrap_or(0);
        let kept = state.owned.remove(&tp);
        let out_of_range = state.out_of_range.get(&tp).copied();
        let entry = match kept {
            // −1 (keep): the partition stays as it is — position, a pending reset, a
            // dead fetcher. Only a move to another stream restarts it under a new epoch
            // from what was delivered (queued messages of the old stream are dropped).
            Some(o) if start_offset == PartitionStart::KEEP_POSITION => {
                if o.stream == stream {
                    o
                } else {
                    Owned {
                        epoch: state.epoch(),
                        fetch_position: if o.consumed >= 0 { o.consumed } else { -1 },
                        stream,
                        ..o
                    }
                }
            }
            _ => {
                // A start offset, −2 (no committed offset), or −1 for a partition not
                // owned (nothing to keep): the reset policy decides unless an offset
                // is given that is not the one found out of range.
                let reset = start_offset < 0 || out_of_range == Some(start_offset);
                if out_of_range == Some(start_offset) {
                    tracing::info!(
                        topic = %tp.0,
                        partition = tp.1,
                        offset = start_offset,
                        "committed offset is out of range: applying the reset policy"
                    );
                }
                Owned {
                    epoch: state.epoch(),
                    consumed: if reset { -1 } else { start_offset },
                    fetch_position: if reset { -1 } else { start_offset },
                    stream,
                    needs_reset: reset,
                    dead: None,
                }
            }
        };
        owned.insert(tp, entry);
    }
    state.out_of_range.retain(|tp, _| owned.contains_key(tp));
    state.owned = owned;
    state.generation = start.generation;
    drop(state);
    shared.bump();
    shared.event(ConsumerEvent::Assigned {
        generation: start.generation,
        partitions: owned_now.into_iter().collect(),
    });
    (
        StartFetcherResponse {
            error_code: ErrorCode::NONE,
        },
        None,
    )
}
