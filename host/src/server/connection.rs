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

use std::{net::SocketAddr, sync::Arc};

use tokio::{
    io::{AsyncWriteExt, BufWriter},
    net::{tcp::OwnedReadHalf, tcp::OwnedWriteHalf, TcpStream},
    sync::{mpsc, watch},
    task::JoinHandle,
};

use super::{
    dispatch::{handle_frame, Outcome, Step},
    frame::{read_frame, FrameError, FrameLimits},
};
use crate::broker::Broker;

/// A response slot in the queue.
enum Pending {
    Now(Outcome),
    Later(JoinHandle<Outcome>),
}

/// Serves one connection until the peer leaves, an unanswerable frame arrives, or
/// shutdown.
pub async fn run(
    broker: Arc<Broker>,
    socket: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
) {
    broker.metrics.connection_opened();
    let _ = socket.set_nodelay(true);
    let (reader, writer) = socket.into_split();
    let (queue, pending) = mpsc::channel(broker.config.server.max_in_flight.max(1));
    let writer = tokio::spawn(write_loop(Arc::clone(&broker), writer, pending, peer));
    read_loop(&broker, reader, queue, peer, shutdown).await;
    // The queue is closed: the writer sends what is pending, then stops.
    let _ = writer.await;
    broker.metrics.connection_closed();
}

async fn read_loop(
    broker: &Arc<Broker>,
    mut reader: OwnedReadHalf,
    queue: mpsc::Sender<Pending>,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    let server = &broker.config.server;
    let mut limits = FrameLimits {
        max_bytes: server.max_frame_bytes,
        // Until the first request arrives, a shorter timeout: an idle socket must not
        // hold a connection slot for long.
        idle_timeout_ms: server.first_request_timeout_ms.min(server.idle_timeout_ms),
        frame_timeout_ms: server.frame_timeout_ms,
    };
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut reader, limits) => frame,
            _ = shutdown.changed() => return,
            _ = queue.closed() => return,
        };
        let frame = match frame {
            Ok(f) => f,
            Err(FrameError::Closed) => return,
            Err(e) => {
                if !matches!(e, FrameError::Idle(_) | FrameError::Io(_)) {
                    broker.metrics.frame_rejected(e.reason());
                    tracing::info!(%peer, "closing connection: {e}");
                }
                return;
            }
        };
        limits.idle_timeout_ms = server.idle_timeout_ms;
        broker.metrics.bytes_in(frame.len() + 4);
        let (slot, last) = match handle_frame(broker, frame).await {
            Step::Now(outcome) => {
                let close = matches!(outcome, Outcome::Close(..));
                (Pending::Now(outcome), close)
            }
            Step::Later(wait) => (Pending::Later(tokio::spawn(wait)), false),
        };
        if queue.send(slot).await.is_err() || last {
            return;
        }
    }
}

async fn write_loop(
    broker: Arc<Broker>,
    writer: OwnedWriteHalf,
    mut pending: mpsc::Receiver<Pending>,
    peer: SocketAddr,
) {
    let mut writer = BufWriter::new(writer);
    let write_timeout = std::time::Duration::from_millis(broker.config.server.write_timeout_ms);
    while let Some(slot) = pending.recv().await {
        let outcome = match slot {
            Pending::Now(outcome) => outcome,
            Pending::Later(task) => match task.await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::Close("handler_failed", format!("request handler failed: {e}")),
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
                        tracing::info!(%peer, "closing connection: the client did not read its responses for {write_timeout:?}");
                        return;
                    }
                }
                broker.metrics.bytes_out(body.len() + 4);
            }
            Outcome::Silent => {}
            Outcome::Close(reason, detail) => {
                let _ = writer.flush().await;
                broker.metrics.frame_rejected(reason);
                tracing::info!(%peer, "closing connection: {detail}");
                return;
            }
        }
    }
    let _ = writer.flush().await;
}
