//! One client connection: read a frame, handle it, write the response, in order.
//!
//! Requests on one connection are processed one at a time, as Kafka does (it mutes a
//! channel until its response is sent), so responses keep the request order and a
//! connection holds at most one request in memory. A frame that cannot be answered
//! closes the connection; the broker keeps serving everyone else.

use std::{net::SocketAddr, sync::Arc};

use tokio::{
    io::{AsyncWriteExt, BufWriter},
    net::TcpStream,
    sync::watch,
};

use super::{
    dispatch::{handle_frame, Outcome},
    frame::{read_frame, FrameError, FrameLimits},
};
use crate::broker::Broker;

/// Serves one connection until the peer leaves, an unanswerable frame arrives, or
/// shutdown.
pub async fn run(
    broker: Arc<Broker>,
    socket: TcpStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    broker.metrics.connection_opened();
    let _ = socket.set_nodelay(true);
    let (mut reader, writer) = socket.into_split();
    let mut writer = BufWriter::new(writer);
    let server = &broker.config.server;
    let limits = FrameLimits {
        max_bytes: server.max_frame_bytes,
        idle_timeout_ms: server.idle_timeout_ms,
        frame_timeout_ms: server.frame_timeout_ms,
    };
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut reader, limits) => frame,
            _ = shutdown.changed() => break,
        };
        let frame = match frame {
            Ok(f) => f,
            Err(FrameError::Closed) => break,
            Err(e) => {
                if !matches!(e, FrameError::Idle(_) | FrameError::Io(_)) {
                    broker.metrics.frame_rejected(e.reason());
                    tracing::info!(%peer, "closing connection: {e}");
                }
                break;
            }
        };
        broker.metrics.bytes_in(frame.len() + 4);
        let outcome = tokio::select! {
            outcome = handle_frame(&broker, frame) => outcome,
            _ = shutdown.changed() => break,
        };
        match outcome {
            Outcome::Respond(body) => {
                let len = (body.len() as u32).to_be_bytes();
                let sent = async {
                    writer.write_all(&len).await?;
                    writer.write_all(&body).await?;
                    writer.flush().await
                }
                .await;
                if sent.is_err() {
                    break;
                }
                broker.metrics.bytes_out(body.len() + 4);
            }
            Outcome::Silent => {}
            Outcome::Close(reason, detail) => {
                broker.metrics.frame_rejected(reason);
                tracing::info!(%peer, "closing connection: {detail}");
                break;
            }
        }
    }
    broker.metrics.connection_closed();
}
