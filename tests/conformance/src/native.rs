//! A lightweight consumer of the native group protocol (docs/protocol.md), for tests and
//! benchmarks of the coordinator inside a real broker: it registers, then serves the
//! coordinator channel — answers Heartbeat with its positions, StopFetcher with final
//! positions, StartFetcher by adopting the assignment — and reports what happened. It
//! fetches no data: positions are whatever the test sets ([`LightConsumer::advance`]).
//! The real consumer connector is `drover-client`.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Instant,
};

use bytes::{Bytes, BytesMut};
use drover_protocol::{
    decode_request_frame, decode_response_frame, encode_request_frame, encode_response_frame,
    ApiKey, AutoOffsetReset, ErrorCode, HeartbeatResponse, LeaveGroupRequest, NativeRequest,
    NativeResponse, PartitionOffset, PartitionStart, RegisterConsumerRequest, StartFetcherResponse,
    StopFetcherResponse, Subscription, TopicOffsets,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        tcp::{OwnedReadHalf, OwnedWriteHalf},
        TcpStream,
    },
    sync::mpsc,
    task::JoinHandle,
};

/// Largest frame the light consumer reads, bytes.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Who the consumer is and what it subscribes to.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    /// Group id.
    pub group: String,
    /// Consumer id.
    pub consumer_id: String,
    /// Static subscription: topic → stream count.
    pub topics: Vec<(String, i32)>,
    /// Session timeout, ms.
    pub session_timeout_ms: i32,
    /// Assignor name, or the coordinator's default.
    pub assignor: Option<String>,
}

/// Something the consumer saw on its channel.
#[derive(Debug, Clone)]
pub enum ChannelEvent {
    /// Registered in `generation`.
    Registered {
        /// The group's generation at registration.
        generation: i32,
        /// When.
        at: Instant,
    },
    /// Registration refused.
    Refused {
        /// The error code.
        code: ErrorCode,
        /// The message.
        message: Option<String>,
    },
    /// A Heartbeat arrived.
    Heartbeat {
        /// When.
        at: Instant,
    },
    /// A StopFetcher arrived and was answered.
    Stopped {
        /// Generation being ended.
        generation: i32,
        /// Partitions stopped (all when `stop_all`).
        partitions: Vec<(String, i32)>,
        /// When.
        at: Instant,
    },
    /// A StartFetcher arrived and was answered.
    Started {
        /// The new generation.
        generation: i32,
        /// The complete assignment with start offsets.
        assignment: Vec<(String, i32, i64)>,
        /// When.
        at: Instant,
    },
    /// The channel ended.
    Closed {
        /// Why.
        reason: String,
    },
}

/// Positions and assignment, shared with the test.
#[derive(Debug, Default)]
pub struct ConsumerState {
    /// The generation of the last StartFetcher.
    pub generation: i32,
    /// Owned partitions → position (next offset to consume; −1 when unknown).
    pub positions: BTreeMap<(String, i32), i64>,
    /// When the consumer last answered a coordinator request (its lease anchor is at
    /// most this late, docs/protocol.md §6.2).
    pub last_answer: Option<Instant>,
}

/// A running light consumer.
pub struct LightConsumer {
    /// The spec it registered with.
    pub spec: ConsumerSpec,
    /// Assignment and positions.
    pub state: Arc<Mutex<ConsumerState>>,
    /// What happened on the channel, in order.
    pub events: mpsc::UnboundedReceiver<ChannelEvent>,
    task: JoinHandle<()>,
}

impl LightConsumer {
    /// Connects to `addr`, registers and serves the channel in a task.
    pub async fn start(addr: SocketAddr, spec: ConsumerSpec) -> std::io::Result<LightConsumer> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (events_tx, events) = mpsc::unbounded_channel();
        let state = Arc::new(Mutex::new(ConsumerState::default()));
        let task = tokio::spawn(serve(stream, spec.clone(), Arc::clone(&state), events_tx));
        Ok(LightConsumer {
            spec,
            state,
            events,
            task,
        })
    }

    /// Owned partitions now, sorted.
    pub fn owned(&self) -> Vec<(String, i32)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.positions.keys().cloned().collect()
    }

    /// Moves the position of every owned partition forward by `n` (from 0 when unknown).
    pub fn advance(&self, n: i64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for position in state.positions.values_mut() {
            *position = (*position).max(0) + n;
        }
    }

    /// Drops the connection at once (like a crashed process: no LeaveGroup).
    pub fn kill(self) {
        self.task.abort();
    }

    /// Leaves the group: LeaveGroup on a new connection to `addr` (which releases the
    /// consumer's partitions at once, docs/protocol.md §6.7), then drops the channel.
    /// Returns the answer's error code.
    pub async fn leave(self, addr: SocketAddr) -> std::io::Result<ErrorCode> {
        let request = NativeRequest::LeaveGroup(LeaveGroupRequest {
            group_id: self.spec.group.clone(),
            consumer_id: self.spec.consumer_id.clone(),
        });
        let mut out = BytesMut::new();
        encode_request_frame(&mut out, 1, Some("light-consumer"), &request)
            .map_err(std::io::Error::other)?;
        let stream = TcpStream::connect(addr).await?;
        let (mut reader, mut writer) = stream.into_split();
        write_frame(&mut writer, out).await?;
        let answer = read_frame(&mut reader).await?;
        self.task.abort();
        match decode_response_frame(answer, ApiKey::LeaveGroup, 0) {
            Ok((_, NativeResponse::LeaveGroup(r))) => Ok(r.error_code),
            other => Err(std::io::Error::other(format!(
                "bad LeaveGroup answer: {other:?}"
            ))),
        }
    }
}

async fn read_frame(reader: &mut OwnedReadHalf) -> std::io::Result<Bytes> {
    let size = reader.read_i32().await?;
    if size < 4 || size as usize > MAX_FRAME {
        return Err(std::io::Error::other(format!("bad frame size {size}")));
    }
    let mut buf = vec![0; size as usize];
    reader.read_exact(&mut buf).await?;
    Ok(Bytes::from(buf))
}

async fn write_frame(writer: &mut OwnedWriteHalf, frame: BytesMut) -> std::io::Result<()> {
    writer.write_all(&frame).await
}

async fn serve(
    stream: TcpStream,
    spec: ConsumerSpec,
    state: Arc<Mutex<ConsumerState>>,
    events: mpsc::UnboundedSender<ChannelEvent>,
) {
    let reason = match run(stream, &spec, &state, &events).await {
        Ok(reason) => reason,
        Err(e) => e.to_string(),
    };
    let _ = events.send(ChannelEvent::Closed { reason });
}

async fn run(
    stream: TcpStream,
    spec: &ConsumerSpec,
    state: &Mutex<ConsumerState>,
    events: &mpsc::UnboundedSender<ChannelEvent>,
) -> std::io::Result<String> {
    let (mut reader, mut writer) = stream.into_split();
    let register = NativeRequest::RegisterConsumer(RegisterConsumerRequest {
        group_id: spec.group.clone(),
        consumer_id: spec.consumer_id.clone(),
        host: "127.0.0.1".into(),
        session_timeout_ms: spec.session_timeout_ms,
        subscription: Subscription::static_topics(spec.topics.iter().cloned()),
        auto_offset_reset: AutoOffsetReset::EARLIEST,
        assignor: spec.assignor.clone(),
        member: drover_protocol::MemberData::default(),
    });
    let mut out = BytesMut::new();
    encode_request_frame(&mut out, 0, Some("light-consumer"), &register)
        .map_err(std::io::Error::other)?;
    write_frame(&mut writer, out).await?;
    let registered = read_frame(&mut reader).await?;
    match decode_response_frame(registered, ApiKey::RegisterConsumer, 0) {
        Ok((_, NativeResponse::RegisterConsumer(r))) if r.error_code.is_none() => {
            let _ = events.send(ChannelEvent::Registered {
                generation: r.generation,
                at: Instant::now(),
            });
        }
        Ok((_, NativeResponse::RegisterConsumer(r))) => {
            let _ = events.send(ChannelEvent::Refused {
                code: r.error_code,
                message: r.error_message.clone(),
            });
            return Ok(format!("registration refused: {:?}", r.error_code));
        }
        other => return Ok(format!("bad RegisterConsumer answer: {other:?}")),
    }
    loop {
        let frame = match read_frame(&mut reader).await {
            Ok(frame) => frame,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok("the coordinator closed the channel".into())
            }
            Err(e) => return Err(e),
        };
        let (header, request) = decode_request_frame(frame).map_err(std::io::Error::other)?;
        let response = answer(request, state, events);
        let mut out = BytesMut::new();
        encode_response_frame(&mut out, header.correlation_id, &response)
            .map_err(std::io::Error::other)?;
        write_frame(&mut writer, out).await?;
    }
}

/// Positions of `partitions` (all owned when `None`) as TopicOffsets.
fn offsets_of(state: &ConsumerState, only: Option<&[(String, i32)]>) -> Vec<TopicOffsets> {
    let mut by_topic: BTreeMap<&str, Vec<PartitionOffset>> = BTreeMap::new();
    for ((topic, partition), position) in &state.positions {
        if *position < 0 {
            continue;
        }
        if let Some(only) = only {
            if !only.iter().any(|(t, p)| t == topic && p == partition) {
                continue;
            }
        }
        by_topic
            .entry(topic.as_str())
            .or_default()
            .push(PartitionOffset {
                partition: *partition,
                offset: *position,
                metadata: None,
            });
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| TopicOffsets {
            topic: topic.to_owned(),
            partitions,
        })
        .collect()
}

fn answer(
    request: NativeRequest,
    state: &Mutex<ConsumerState>,
    events: &mpsc::UnboundedSender<ChannelEvent>,
) -> NativeResponse {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    state.last_answer = Some(now);
    match request {
        NativeRequest::Heartbeat(_) => {
            let _ = events.send(ChannelEvent::Heartbeat { at: now });
            NativeResponse::Heartbeat(HeartbeatResponse {
                error_code: ErrorCode::NONE,
                fetchers_healthy: true,
                offsets: offsets_of(&state, None),
            })
        }
        NativeRequest::StopFetcher(stop) => {
            let stopped: Vec<(String, i32)> = if stop.stop_all {
                state.positions.keys().cloned().collect()
            } else {
                stop.partitions
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
                    .collect()
            };
            let offsets = offsets_of(&state, Some(&stopped));
            for key in &stopped {
                state.positions.remove(key);
            }
            let _ = events.send(ChannelEvent::Stopped {
                generation: stop.generation,
                partitions: stopped,
                at: now,
            });
            NativeResponse::StopFetcher(StopFetcherResponse {
                error_code: ErrorCode::NONE,
                offsets,
            })
        }
        NativeRequest::StartFetcher(start) => {
            let mut positions = BTreeMap::new();
            let mut assignment = Vec::new();
            for topic in &start.assignment {
                for PartitionStart {
                    partition,
                    start_offset,
                } in &topic.partitions
                {
                    let key = (topic.topic.clone(), *partition);
                    let position = if *start_offset == PartitionStart::KEEP_POSITION {
                        state.positions.get(&key).copied().unwrap_or(-1)
                    } else if *start_offset == PartitionStart::NO_COMMITTED_OFFSET {
                        0
                    } else {
                        *start_offset
                    };
                    assignment.push((topic.topic.clone(), *partition, *start_offset));
                    positions.insert(key, position);
                }
            }
            state.positions = positions;
            state.generation = start.generation;
            let _ = events.send(ChannelEvent::Started {
                generation: start.generation,
                assignment,
                at: now,
            });
            NativeResponse::StartFetcher(StartFetcherResponse {
                error_code: ErrorCode::NONE,
            })
        }
        other => {
            // Not a coordinator request: answer nothing sensible; the coordinator
            // treats the mismatch as a protocol violation.
            let _ = events.send(ChannelEvent::Closed {
                reason: format!("unexpected request on the channel: {:?}", other.api_key()),
            });
            NativeResponse::StartFetcher(StartFetcherResponse {
                error_code: ErrorCode(-1),
            })
        }
    }
}
