//! One client connection: frames in, responses out, in request order.
//!
//! A reader and a writer run side by side, joined by a bounded queue of pending
//! responses (`server.max_in_flight`). The reader decodes each request and runs the
//! handler's ordered part — appends, topic changes — before reading the next one, so
//! side effects happen in request order, as in Kafka. Waiting (a produce for its
//! group-commit fsync, a fetch for data) happens in a spawned task whose outcome is
//! queued in order; the writer sends responses in that order. A frame that cannot be
//! answered closes the connection after the earlier responses went out; the broker
//! keeps serving everyone else.
//!
//! Native coordinator requests (API keys 20000–20099, docs/protocol.md) go to the
//! coordinator thread: the reader queues a slot for the answer first, then hands the
//! frame over, so answers keep request order. Once RegisterConsumer succeeds the
//! connection is a coordinator channel: the coordinator pushes its own requests onto
//! the queue and every frame read is the consumer's answer, passed on as is. The
//! coordinator may close the connection at any time.
//!
//! Bounds against a client that misbehaves: every response holds its bytes against the
//! connection's and the broker's budgets of queued response bytes until it is written,
//! and reading pauses while they are used up (server/budget.rs); the first request must
//! be complete within `server.first_request_timeout_ms` of the accept, however slowly
//! its bytes trickle in; and the listener may evict the connection when it is idle and
//! the broker is at `server.max_connections` (server/admission.rs).
//!
//! On a TLS listener the handshake comes first (server/tls.rs), under the same
//! first-request deadline and admission ticket; the frames then run inside TLS exactly
//! as they do in the clear, native coordinator requests included (they are told apart
//! by API key, after framing). Each request is handed its connection's
//! [`ConnContext`]: the listener it came in on (Metadata, DescribeCluster and
//! FindCoordinator answer with that listener's addresses) and the client's principal.
//!
//! On a SASL listener every frame goes through the connection's SASL gate
//! (server/sasl.rs) first: until the client has authenticated only ApiVersions,
//! SaslHandshake and SaslAuthenticate pass, and anything else — a Kafka request or a
//! native coordinator request alike — closes the connection without a word; the
//! SASL requests are answered by the gate; afterwards the principal is the
//! authenticated user's, and a session past `sasl.connections_max_reauth_ms` may only
//! re-authenticate (a coordinator channel's frames close it then).

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use bytes::Bytes;
use drover_protocol::api_key::{NATIVE_API_KEY_FIRST, NATIVE_API_KEY_LAST};
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter},
    net::TcpStream,
    sync::{mpsc, oneshot, watch},
    time::Instant,
};

use super::{
    admission::Ticket,
    budget::ConnBudget,
    conn_id::{next_conn_id, ConnId},
    context::{ConnContext, ListenerHandle},
    dispatch::{handle_frame, Step},
    frame::{FrameError, FrameLimits, FrameReader},
    principal::Principal,
    queue::{ConnSink, Pending},
    reply::{Charged, Outcome},
    sasl::{Answer, SaslGate, Verdict},
};
use crate::{
    auth::session::{ConnectionInfo, Next},
    authz::RequestAuthz,
    broker::Broker,
};

/// A connection's read side, in the clear or inside TLS.
type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// A connection's write side, in the clear or inside TLS.
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The connection's side of the coordinator routing.
struct Native {
    conn: ConnId,
    /// Set by the coordinator thread when RegisterConsumer succeeded.
    channel: Arc<AtomicBool>,
    close: Arc<watch::Sender<bool>>,
    /// Whether the coordinator thread knows this connection.
    attached: bool,
    /// The client's address.
    peer: SocketAddr,
}

/// Serves one connection, accepted on `listener`, until the peer leaves, an
/// unanswerable frame arrives, it is evicted (`ticket`), or shutdown. Its responses
/// are charged to `budget`.
pub async fn run(
    broker: Arc<Broker>,
    socket: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    budget: Arc<ConnBudget>,
    ticket: Ticket,
    listener: ListenerHandle,
) {
    let accepted = Instant::now();
    let ticket = Arc::new(ticket);
    broker.metrics.connection_opened();
    let _ = socket.set_nodelay(true);
    let sasl = listener.sasl.then(|| {
        SaslGate::new(
            Arc::clone(&broker.identity.sasl),
            Arc::clone(&broker.metrics),
            ConnectionInfo {
                peer: peer.ip(),
                tls: listener.tls.is_some(),
            },
        )
    });
    if let Some((reader, writer, ctx)) = open(
        &broker, socket, peer, &shutdown, &ticket, accepted, listener,
    )
    .await
    {
        serve(
            broker.clone(),
            reader,
            writer,
            peer,
            shutdown,
            Conn {
                budget,
                ticket,
                accepted,
                ctx,
                sasl,
            },
        )
        .await;
    }
    broker.metrics.connection_closed();
}

/// The connection's streams and context: the socket's halves, or on a TLS listener the
/// TLS stream's once the handshake finished within the first-request deadline. `None`
/// when the handshake failed (counted and logged here), or the connection was evicted
/// or the broker stops meanwhile.
async fn open(
    broker: &Arc<Broker>,
    socket: TcpStream,
    peer: SocketAddr,
    shutdown: &watch::Receiver<bool>,
    ticket: &Ticket,
    accepted: Instant,
    listener: ListenerHandle,
) -> Option<(Reader, Writer, ConnContext)> {
    let security_protocol = listener.security_protocol();
    let Some(tls) = listener.tls else {
        let (reader, writer) = socket.into_split();
        let ctx = ConnContext {
            listener: listener.name,
            principal: Principal::anonymous(),
            security_protocol,
            sasl_mechanism: None,
            conn: next_conn_id(),
        };
        return Some((Box::new(reader), Box::new(writer), ctx));
    };
    let server = &broker.config.server;
    let deadline = accepted + std::time::Duration::from_millis(server.first_request_timeout_ms);
    let mut shutdown = shutdown.clone();
    let result = tokio::select! {
        result = super::tls::handshake(&tls, socket, deadline) => result,
        _ = ticket.evicted() => {
            broker.metrics.connection_closed_by_broker("evicted");
            return None;
        }
        _ = shutdown.changed() => return None,
    };
    match result {
        Ok((stream, principal)) => {
            broker.metrics.tls_handshake(listener.name.as_str());
            tracing::debug!(%peer, listener = %listener.name, %principal, "TLS connection");
            let (reader, writer) = tokio::io::split(stream);
            let ctx = ConnContext {
                listener: listener.name,
                principal,
                security_protocol,
                sasl_mechanism: None,
                conn: next_conn_id(),
            };
            Some((Box::new(reader), Box::new(writer), ctx))
        }
        Err(failure) => {
            broker
                .metrics
                .tls_handshake_failed(listener.name.as_str(), failure.reason());
            crate::info_limited!(
                "conn.tls_handshake_failed",
                %peer,
                listener = %listener.name,
                reason = failure.reason(),
                "closing connection: {failure}"
            );
            None
        }
    }
}

/// Runs the reader and the writer of an open connection until it ends.
async fn serve(
    broker: Arc<Broker>,
    reader: Reader,
    writer: Writer,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    mut conn: Conn,
) {
    let (queue, pending) = mpsc::channel(broker.config.server.max_in_flight.max(1));
    let (close, closed) = watch::channel(false);
    let mut native = Native {
        conn: conn.ctx.conn,
        channel: Arc::new(AtomicBool::new(false)),
        close: Arc::new(close),
        attached: false,
        peer,
    };
    let writer = tokio::spawn(write_loop(
        Arc::clone(&broker),
        writer,
        pending,
        peer,
        closed.clone(),
        Arc::clone(&conn.ticket),
    ));
    read_loop(
        &broker,
        reader,
        queue,
        peer,
        shutdown,
        &mut native,
        closed,
        &mut conn,
    )
    .await;
    if native.attached {
        if let Some(coordinator) = broker.coordinator() {
            coordinator.closed(native.conn).await;
        }
    }
    // Its share sessions go with it, and their members' records come back.
    broker.share.connection_closed(native.conn).await;
    // The queue is closed: the writer sends what is pending, then stops (when the
    // client closed or was evicted, it drops what is pending instead).
    let _ = writer.await;
}

/// What the read loop needs beyond the socket: the budget, the admission ticket, when
/// the connection was accepted, the context its requests are handled in, and on a SASL
/// listener its SASL gate.
/// The largest frame a SASL connection may send before it has authenticated, in bytes:
/// Kafka's `sasl.server.max.receive.size` default (512 KiB). SASL messages are a few
/// hundred bytes; a larger frame closes the connection as any oversized frame does.
pub const PRE_AUTH_MAX_FRAME_BYTES: u32 = 512 * 1024;

struct Conn {
    budget: Arc<ConnBudget>,
    ticket: Arc<Ticket>,
    accepted: Instant,
    ctx: ConnContext,
    sasl: Option<SaslGate>,
}

#[allow(clippy::too_many_arguments)]
async fn read_loop(
    broker: &Arc<Broker>,
    reader: Reader,
    queue: mpsc::Sender<Pending>,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
    native: &mut Native,
    mut closed: watch::Receiver<bool>,
    conn: &mut Conn,
) {
    let server = &broker.config.server;
    let limits = FrameLimits {
        max_bytes: server.max_frame_bytes,
        // Until the first request arrives, a shorter timeout: an idle socket must not
        // hold a connection slot for long.
        idle_timeout_ms: server.first_request_timeout_ms.min(server.idle_timeout_ms),
        frame_timeout_ms: server.frame_timeout_ms,
    };
    // The whole first request must be in by then, however slowly its bytes come.
    let first_deadline =
        conn.accepted + std::time::Duration::from_millis(server.first_request_timeout_ms);
    let mut reader = FrameReader::new(reader, limits);
    let mut first = true;
    loop {
        // Before a SASL connection has authenticated, a frame may be at most
        // PRE_AUTH_MAX_FRAME_BYTES (Kafka's `sasl.server.max.receive.size`): an
        // unauthenticated client cannot make the broker hold `max_frame_bytes` per
        // connection.
        let pre_auth = conn.sasl.as_ref().is_some_and(|g| !g.is_authenticated());
        reader.set_limits(FrameLimits {
            max_bytes: if pre_auth {
                limits.max_bytes.min(PRE_AUTH_MAX_FRAME_BYTES)
            } else {
                limits.max_bytes
            },
            idle_timeout_ms: if first {
                limits.idle_timeout_ms
            } else {
                server.idle_timeout_ms
            },
            ..limits
        });
        let frame = tokio::select! {
            frame = async {
                // No new request while the responses already queued use up the budget.
                conn.budget.room_to_read().await;
                reader.read_frame().await
            } => frame,
            _ = tokio::time::sleep_until(first_deadline), if first => {
                broker.metrics.connection_closed_by_broker("first_request_timeout");
                crate::info_limited!(
                    "conn.first_request_timeout",
                    %peer,
                    "closing connection: no complete request within {} ms of connecting \
                     (server.first_request_timeout_ms)",
                    server.first_request_timeout_ms
                );
                return;
            }
            _ = conn.ticket.evicted() => {
                broker.metrics.connection_closed_by_broker("evicted");
                crate::info_limited!(
                    "conn.evicted",
                    %peer,
                    "closing idle connection: the broker is at server.max_connections ({}) \
                     and a new client connected",
                    server.max_connections
                );
                // Its long polls end with it: the slot is free at once.
                native.close.send_replace(true);
                return;
            }
            _ = shutdown.changed() => return,
            _ = queue.closed() => return,
            _ = closed.wait_for(|c| *c) => return,
        };
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                if !matches!(
                    e,
                    FrameError::Closed | FrameError::Idle(_) | FrameError::Io(_)
                ) {
                    broker.metrics.frame_rejected(e.reason());
                    crate::info_limited!("conn.bad_frame", %peer, "closing connection: {e}");
                }
                // The peer is gone (or sent what ends the connection): nobody reads
                // the answers still waited for, so the writer drops them (a long poll
                // must not keep the connection's slot after its client closed).
                native.close.send_replace(true);
                return;
            }
        };
        first = false;
        broker.metrics.bytes_in(frame.len() + 4);
        if native.channel.load(Ordering::Acquire) {
            // A channel's frames are answers, not requests: an expired SASL session
            // cannot re-authenticate on it. It is renewed while its credential is
            // stored unchanged, and ends it otherwise (server::sasl).
            let now = std::time::Instant::now();
            if conn
                .sasl
                .as_mut()
                .is_some_and(|g| g.expired(now) && !g.renew_channel(now))
            {
                sasl_close(broker, peer, "sasl_session_expired");
                return;
            }
            // The consumer's answer to the coordinator: nothing goes back for it.
            conn.ticket.touch();
            if !to_coordinator(broker, &queue, native, frame).await {
                return;
            }
            continue;
        }
        conn.ticket.request_read();
        let frame = match conn.sasl.as_mut() {
            None => frame,
            Some(gate) => match gate.frame(frame, std::time::Instant::now()).await {
                Verdict::Pass(frame) => frame,
                Verdict::Close(reason) => {
                    sasl_close(broker, peer, reason);
                    return;
                }
                Verdict::Answered(answer) => {
                    if !sasl_answer(broker, &queue, &mut shutdown, peer, answer).await {
                        return;
                    }
                    if let Some(principal) = gate.principal() {
                        if principal != conn.ctx.principal {
                            tracing::debug!(%peer, %principal, "SASL authenticated");
                            conn.ctx.principal = principal;
                        }
                        conn.ctx.sasl_mechanism = gate.mechanism();
                    }
                    continue;
                }
            },
        };
        if to_coordinator_key(broker, &frame) {
            let (frame, answer) = match group_refusal(broker, peer, &conn.ctx, &frame) {
                GroupRoute::Refused(refusal) => {
                    if queue.send(Pending::Ready(refusal)).await.is_err() {
                        return;
                    }
                    continue;
                }
                GroupRoute::Forward(other, answer) => (other.unwrap_or(frame), answer),
            };
            let scope = match native.attached {
                true => RequestAuthz::allow_all(),
                false => connection_scope(broker, peer, &conn.ctx, &frame),
            };
            if !to_coordinator_with(broker, &queue, native, frame, answer, scope).await {
                return;
            }
            continue;
        }
        let long_poll = is_long_poll(&frame);
        let (slot, last) =
            match handle_frame(broker, &conn.budget, peer.ip(), &conn.ctx, frame).await {
                Step::Now(charged) => {
                    let close = matches!(charged.outcome, Outcome::Close(..));
                    (Pending::Ready(charged), close)
                }
                Step::Later(wait) if long_poll => {
                    // Waiting for records is not work: idle for eviction meanwhile.
                    conn.ticket.response_written();
                    (Pending::Parked(tokio::spawn(wait)), false)
                }
                Step::Later(wait) => (Pending::Later(tokio::spawn(wait)), false),
            };
        if queue.send(slot).await.is_err() || last {
            return;
        }
    }
}

/// Whether `frame` is a Fetch (1) or ShareFetch (78): a request that may long-poll
/// (its API key is the frame's first two bytes).
fn is_long_poll(frame: &Bytes) -> bool {
    matches!(
        frame.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]])),
        Some(1 | 78)
    )
}

/// Closes a SASL connection without answering, for `reason` (counted, logged at a
/// bounded rate).
fn sasl_close(broker: &Broker, peer: SocketAddr, reason: &'static str) {
    broker.metrics.connection_closed_by_broker(reason);
    crate::info_limited!(
        "conn.sasl_closed",
        %peer,
        reason,
        "closing SASL connection without an answer (a request before authentication, \
         or after the session expired)"
    );
}

/// Queues the gate's answer to a SASL request; on a failure waits its delay first
/// (KIP-306) and then ends the connection. Returns false when the connection must end.
async fn sasl_answer(
    broker: &Broker,
    queue: &mpsc::Sender<Pending>,
    shutdown: &mut watch::Receiver<bool>,
    peer: SocketAddr,
    answer: Answer,
) -> bool {
    let close = match answer.next {
        Next::Continue => None,
        Next::Close { delay, reason } => {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => return false,
            }
            Some(reason)
        }
    };
    if let Some(body) = answer.response {
        let slot = Pending::Ready(Charged::free(Outcome::Respond(body)));
        if queue.send(slot).await.is_err() {
            return false;
        }
    }
    match close {
        None => true,
        Some(reason) => {
            broker.metrics.connection_closed_by_broker(reason);
            crate::info_limited!(
                "conn.sasl_failed",
                %peer,
                reason,
                "closing SASL connection after its answer"
            );
            false
        }
    }
}

/// What becomes of a request for the coordinator once authorized.
enum GroupRoute {
    /// Answered by the host: the coordinator never sees it.
    Refused(Charged),
    /// Handed on (this frame, the request's allowed part, or with `None` the client's
    /// frame); the coordinator's answer passes through the filter first, if any.
    Forward(Option<Bytes>, Option<AnswerFilter>),
}

/// Rewrites the coordinator's answer before it is sent (refused items merged in,
/// ListGroups' filter, KIP-430 operations).
type AnswerFilter = Box<dyn FnOnce(Bytes) -> Bytes + Send>;

/// With an authorizer, the host's answer to a Kafka group API request the principal may
/// not make (server/group_authz, server/native_authz.rs): the coordinator never sees
/// it; or the request's allowed part and the edit of the coordinator's answer.
fn group_refusal(
    broker: &Broker,
    peer: SocketAddr,
    ctx: &ConnContext,
    frame: &Bytes,
) -> GroupRoute {
    match group_check(broker, peer, ctx, frame) {
        Ok(route) => route,
        Err(()) => GroupRoute::Forward(None, None),
    }
}

fn group_check(
    broker: &Broker,
    peer: SocketAddr,
    ctx: &ConnContext,
    frame: &Bytes,
) -> Result<GroupRoute, ()> {
    use super::group_authz::{check, decode, edit_answer, GroupCheck};
    if !broker.identity.authz.is_enabled() {
        return Err(());
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    if (NATIVE_API_KEY_FIRST..=NATIVE_API_KEY_LAST).contains(&key) {
        return native_refusal(broker, peer, ctx, frame)
            .map(GroupRoute::Refused)
            .ok_or(());
    }
    let decoded = decode(frame).ok_or(())?;
    let api = super::api_name::api_name(decoded.key);
    let authz = broker.identity.authz.request(api, || {
        ctx.authz_context(
            peer.ip(),
            &crate::authz::context::RequestHead {
                client_id: decoded.header.client_id.as_deref(),
                api_key: key,
                api_version: decoded.version,
                correlation_id: decoded.header.correlation_id,
            },
        )
    });
    let (api_key, version) = (decoded.key, decoded.version);
    match check(&authz, decoded) {
        GroupCheck::Forward => Err(()),
        GroupCheck::Edit { request, edit } => {
            let frame = match request.map(|r| r.encode()).transpose() {
                Ok(frame) => frame,
                Err(e) => {
                    let close =
                        Outcome::Close("encode_error", format!("{api_key:?} v{version}: {e}"));
                    return Ok(GroupRoute::Refused(Charged::free(close)));
                }
            };
            let filter: AnswerFilter =
                Box::new(move |answer| edit_answer(api_key, version, answer, edit));
            Ok(GroupRoute::Forward(frame, Some(filter)))
        }
        GroupCheck::Refuse {
            key,
            version,
            correlation_id,
            response,
            error,
        } => {
            broker.metrics.request(api, error);
            let outcome =
                match super::dispatch::encode_response(key, version, correlation_id, &response) {
                    Ok(bytes) => Outcome::Respond(bytes),
                    Err(e) => Outcome::Close("encode_error", format!("{key:?} v{version}: {e}")),
                };
            Ok(GroupRoute::Refused(Charged::free(outcome)))
        }
    }
}

/// With an authorizer, the host's answer to a native coordinator request the principal
/// may not make (server/native_authz.rs). `None`: hand it on.
fn native_refusal(
    broker: &Broker,
    peer: SocketAddr,
    ctx: &ConnContext,
    frame: &Bytes,
) -> Option<Charged> {
    use super::native_authz::{check, decode};
    let decoded = decode(frame)?;
    let api =
        drover_protocol::api_key::ApiKey::from_code(decoded.api_key).map_or("Native", |k| k.name());
    let authz = broker.identity.authz.request(api, || {
        ctx.authz_context(
            peer.ip(),
            &crate::authz::context::RequestHead {
                client_id: decoded.client_id.as_deref(),
                api_key: decoded.api_key,
                api_version: decoded.version,
                correlation_id: decoded.correlation_id,
            },
        )
    });
    let scoped_patterns = broker.coordinator().is_some_and(|c| c.scopes_patterns());
    let (body, error) = check(&authz, &decoded, scoped_patterns)?;
    broker
        .metrics
        .native_request(decoded.api_key, &std::iter::once((error, 1)).collect());
    Some(Charged::free(Outcome::Respond(body)))
}

/// Whether `frame` is a request for the coordinator: a native API key (answered with a
/// clear refusal when no coordinator runs), or a Kafka group API the running
/// coordinator serves.
fn to_coordinator_key(broker: &Broker, frame: &Bytes) -> bool {
    if frame.len() < 2 {
        return false;
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    (NATIVE_API_KEY_FIRST..=NATIVE_API_KEY_LAST).contains(&key)
        || broker.coordinator().is_some_and(|c| c.serves(key))
}

/// Hands a native request, or any frame on a coordinator channel, to the coordinator
/// thread. Returns false when the connection must end.
async fn to_coordinator(
    broker: &Arc<Broker>,
    queue: &mpsc::Sender<Pending>,
    native: &mut Native,
    frame: Bytes,
) -> bool {
    to_coordinator_with(
        broker,
        queue,
        native,
        frame,
        None,
        RequestAuthz::allow_all(),
    )
    .await
}

/// The authorization context the coordinator thread keeps for the connection's topic
/// scope (coordination::driver::topic_scopes), from its first coordinator request;
/// allows everything (and is not kept) without an authorizer.
fn connection_scope(
    broker: &Broker,
    peer: SocketAddr,
    ctx: &ConnContext,
    frame: &Bytes,
) -> RequestAuthz {
    if !broker.identity.authz.is_enabled() || frame.len() < 4 {
        return RequestAuthz::allow_all();
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = frame
        .get(4..8)
        .map_or(0, |c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    broker.identity.authz.request("TopicScope", || {
        ctx.authz_context(
            peer.ip(),
            &crate::authz::context::RequestHead {
                client_id: None,
                api_key,
                api_version,
                correlation_id,
            },
        )
    })
}

/// [`to_coordinator`], with the coordinator's answer to the request passed through
/// `filter` first; `scope` is the connection's authorization context, handed over when
/// the connection attaches.
async fn to_coordinator_with(
    broker: &Arc<Broker>,
    queue: &mpsc::Sender<Pending>,
    native: &mut Native,
    frame: Bytes,
    filter: Option<AnswerFilter>,
    scope: RequestAuthz,
) -> bool {
    let Some(coordinator) = broker.coordinator() else {
        let _ = queue
            .send(Pending::Now(Outcome::Close(
                "no_coordinator",
                "a native coordinator request arrived, but no coordinator plugin is running".into(),
            )))
            .await;
        return false;
    };
    if !native.attached {
        let sink = ConnSink {
            queue: queue.clone(),
            channel: Arc::clone(&native.channel),
            close: Arc::clone(&native.close),
            peer: native.peer,
        };
        if coordinator.attach(native.conn, sink, scope).await.is_err() {
            return false;
        }
        native.attached = true;
    }
    if native.channel.load(Ordering::Acquire) {
        return coordinator.channel_frame(native.conn, frame).await.is_ok();
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    // The answer's place in the response order is taken before the coordinator sees
    // the request.
    let (reply, answer) = oneshot::channel();
    let answer = match filter {
        None => answer,
        Some(filter) => {
            // The filtered answer takes the request's place in the response order.
            let (filtered, out) = oneshot::channel();
            tokio::spawn(async move {
                if let Ok(outcome) = answer.await {
                    let _ = filtered.send(match outcome {
                        Outcome::Respond(body) => Outcome::Respond(filter(body)),
                        other => other,
                    });
                }
            });
            out
        }
    };
    if queue.send(Pending::Reply(answer)).await.is_err() {
        return false;
    }
    coordinator
        .request(native.conn, api_key, frame, reply)
        .await
        .is_ok()
}

async fn write_loop(
    broker: Arc<Broker>,
    writer: Writer,
    mut pending: mpsc::Receiver<Pending>,
    peer: SocketAddr,
    mut closed: watch::Receiver<bool>,
    ticket: Arc<Ticket>,
) {
    let mut writer = BufWriter::new(writer);
    let write_timeout = std::time::Duration::from_millis(broker.config.server.write_timeout_ms);
    loop {
        let slot = tokio::select! {
            slot = pending.recv() => match slot {
                Some(slot) => slot,
                None => break,
            },
            _ = closed.wait_for(|c| *c) => break,
        };
        // Whether it answers a request (not a coordinator push), and the budget it
        // holds until it is written.
        let parked = matches!(slot, Pending::Parked(_));
        let (outcome, answers, _charge) = match slot {
            Pending::Now(outcome) => (outcome, false, None),
            Pending::Ready(charged) => (charged.outcome, true, charged.charge),
            Pending::Later(mut task) | Pending::Parked(mut task) => tokio::select! {
                done = &mut task => match done {
                    // A parked long poll stopped counting as busy when it was parked.
                    Ok(charged) => (charged.outcome, !parked, charged.charge),
                    Err(e) => (
                        Outcome::Close("handler_failed", format!("request handler failed: {e}")),
                        !parked,
                        None,
                    ),
                },
                _ = closed.wait_for(|c| *c) => {
                    task.abort();
                    break;
                }
            },
            Pending::Reply(answer) => tokio::select! {
                answer = answer => match answer {
                    Ok(outcome) => (outcome, true, None),
                    // The coordinator closed the connection before answering.
                    Err(_) => break,
                },
                _ = closed.wait_for(|c| *c) => break,
            },
        };
        match outcome {
            Outcome::Respond(body) => {
                let len = (body.len() as u32).to_be_bytes();
                let sent = tokio::time::timeout(write_timeout, async {
                    writer.write_all(&len).await?;
                    writer.write_all(&body).await?;
                    // Flush only when nothing else is ready to go out.
                    if pending.is_empty() {
                        writer.flush().await?;
                    }
                    Ok::<(), std::io::Error>(())
                })
                .await;
                match sent {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return,
                    Err(_) => {
                        broker.metrics.connection_closed_by_broker("write_timeout");
                        crate::info_limited!(
                            "conn.write_timeout",
                            %peer,
                            "closing connection: the client did not read its responses for \
                             {write_timeout:?}"
                        );
                        return;
                    }
                }
                broker.metrics.bytes_out(body.len() + 4);
                if answers {
                    ticket.response_written();
                }
            }
            Outcome::Silent => {
                if answers {
                    ticket.response_written();
                }
            }
            Outcome::Close(reason, detail) => {
                let _ = writer.flush().await;
                broker.metrics.frame_rejected(reason);
                crate::info_limited!("conn.refused_request", %peer, "closing connection: {detail}");
                return;
            }
        }
    }
    // Closed: the answers still waited for go nowhere. Their handlers stop at their
    // next await (what they changed before stays changed, as when a Kafka client
    // disconnects: an append stays made; records acquired for the connection's share
    // sessions go back when the sessions go with the connection).
    pending.close();
    while let Ok(slot) = pending.try_recv() {
        if let Pending::Later(task) | Pending::Parked(task) = slot {
            task.abort();
        }
    }
    let _ = writer.flush().await;
}
