//! One connection to a broker: Kafka framing, one request at a time, Kafka APIs through
//! `kafka-protocol` and the native APIs through `drover-protocol`. Every read is bounded
//! by the response size limit and every exchange by the request timeout.
//!
//! On a SASL listener the connection authenticates first, and again (KIP-368) before
//! the session lifetime the broker answered runs out: a request due after
//! [`REAUTH_AT_PERCENT`] of the lifetime is preceded by a new SaslHandshake and
//! SaslAuthenticate on the same connection. A coordinator channel, which sends no
//! requests of its own, is renewed by the broker instead (docs/security.md).

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use drover_protocol::{NativeRequest, NativeResponse};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::{
    messages::{RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes},
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    error::ClientError,
    security::{Exchange, SaslCredentials, Security},
};

/// A connection's byte stream: TCP, or TLS over TCP.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Largest response accepted, bytes (a fetch response is bounded by `fetch_max_bytes`).
pub(crate) const MAX_RESPONSE_BYTES: usize = 128 * 1024 * 1024;

/// The client id sent in every request header.
pub(crate) const CLIENT_ID: &str = "drover-client";

/// How far into the session lifetime the broker answered the connection
/// re-authenticates (KIP-368 suggests 85–95 %): early enough that the request it
/// precedes arrives before the session ends.
pub(crate) const REAUTH_AT_PERCENT: u32 = 85;

/// A connection to one broker.
pub(crate) struct Conn {
    stream: Box<dyn Stream>,
    addr: String,
    next_correlation: i32,
    timeout: Duration,
    /// The SASL credentials it authenticated with, and when it re-authenticates
    /// (`None`: the session does not expire).
    sasl: Option<(SaslCredentials, Option<Instant>)>,
}

fn io(addr: &str, what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Io(format!("{addr}: {what}: {e}"))
}

impl Conn {
    /// Connects to `addr` within `timeout`, with TLS and SASL as `security` says
    /// (each within `timeout` too).
    pub(crate) async fn connect(
        addr: &str,
        timeout: Duration,
        security: &Security,
    ) -> Result<Conn, ClientError> {
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| io(addr, "connect", "timed out"))?
            .map_err(|e| io(addr, "connect", e))?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let config = Security::tls_config(tls)?;
                // The name the broker's certificate must carry: the host connected to.
                let host = addr
                    .rsplit_once(':')
                    .map_or(addr, |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .map_err(|e| io(addr, "TLS server name", e))?;
                let connector = tokio_rustls::TlsConnector::from(config);
                let tls = tokio::time::timeout(timeout, connector.connect(name, tcp))
                    .await
                    .map_err(|_| io(addr, "TLS handshake", "timed out"))?
                    .map_err(|e| io(addr, "TLS handshake", e))?;
                Box::new(tls)
            }
        };
        let mut conn = Conn {
            stream,
            addr: addr.to_owned(),
            next_correlation: 0,
            timeout,
            sasl: None,
        };
        if let Some(creds) = &security.sasl {
            let reauth_at = conn.authenticate(creds).await?;
            conn.sasl = Some((creds.clone(), reauth_at));
        }
        Ok(conn)
    }

    /// Re-authenticates (KIP-368) if the session is due for it.
    async fn reauthenticate_if_due(&mut self) -> Result<(), ClientError> {
        let Some((creds, Some(at))) = &self.sasl else {
            return Ok(());
        };
        if Instant::now() < *at {
            return Ok(());
        }
        let creds = creds.clone();
        let reauth_at = self.authenticate(&creds).await?;
        tracing::debug!(broker = %self.addr, "re-authenticated (KIP-368)");
        self.sasl = Some((creds, reauth_at));
        Ok(())
    }

    /// SaslHandshake v1, then SaslAuthenticate (v2) until the exchange is done; when
    /// to re-authenticate, if the broker answered a session lifetime.
    async fn authenticate(
        &mut self,
        creds: &SaslCredentials,
    ) -> Result<Option<Instant>, ClientError> {
        let started = Instant::now();
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_static_str(creds.mechanism.name());
        let answer = self.send_now(1, &handshake).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(io(
                &self.addr,
                "SASL handshake",
                format!(
                    "error {}: the broker offers {} (not {})",
                    answer.error_code,
                    offered.join(", "),
                    creds.mechanism.name()
                ),
            ));
        }
        let (mut exchange, mut token) = Exchange::start(creds)?;
        loop {
            let mut request = SaslAuthenticateRequest::default();
            request.auth_bytes = Bytes::from(token);
            let answer = self.send_now(2, &request).await?;
            if answer.error_code != 0 {
                // The broker's message names the mechanism only.
                let message = answer.error_message.map(|m| m.to_string());
                return Err(io(
                    &self.addr,
                    "SASL authentication",
                    format!(
                        "error {}: {}",
                        answer.error_code,
                        message.unwrap_or_default()
                    ),
                ));
            }
            match exchange.step(creds, &answer.auth_bytes)? {
                Some(next) => token = next,
                None => {
                    let lifetime = u64::try_from(answer.session_lifetime_ms).unwrap_or(0);
                    return Ok((lifetime > 0).then(|| {
                        started + Duration::from_millis(lifetime) * REAUTH_AT_PERCENT / 100
                    }));
                }
            }
        }
    }

    /// The broker address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    fn correlation(&mut self) -> i32 {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        self.next_correlation
    }

    /// Sends a Kafka request at `version` and reads its response (re-authenticating
    /// first when the session is due for it).
    pub(crate) async fn send<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        self.reauthenticate_if_due().await?;
        self.send_now(version, request).await
    }

    async fn send_now<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        let correlation = self.correlation();
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation;
        header.client_id = Some(StrBytes::from_static_str(CLIENT_ID));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|()| request.encode(&mut body, version))
            .map_err(|e| io(&self.addr, "encode", e))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        let mut answer = self.exchange(&frame).await?;
        let header = ResponseHeader::decode(&mut answer, R::Response::header_version(version))
            .map_err(|e| io(&self.addr, "response header", e))?;
        if header.correlation_id != correlation {
            return Err(io(
                &self.addr,
                "response",
                format!(
                    "correlation id {} instead of {correlation}",
                    header.correlation_id
                ),
            ));
        }
        R::Response::decode(&mut answer, version).map_err(|e| io(&self.addr, "response", e))
    }

    /// Sends a native request, in the lowest version that carries its values
    /// ([`NativeRequest::version`]), and reads its response.
    pub(crate) async fn native(
        &mut self,
        request: &NativeRequest,
    ) -> Result<NativeResponse, ClientError> {
        self.reauthenticate_if_due().await?;
        let correlation = self.correlation();
        let mut frame = BytesMut::new();
        drover_protocol::encode_request_frame(&mut frame, correlation, Some(CLIENT_ID), request)
            .map_err(|e| io(&self.addr, "encode", e))?;
        let answer = self.exchange(&frame).await?;
        let (header, response) =
            drover_protocol::decode_response_frame(answer, request.api_key(), request.version())
                .map_err(|e| io(&self.addr, "native response", e))?;
        if header.correlation_id != correlation {
            return Err(io(&self.addr, "native response", "wrong correlation id"));
        }
        Ok(response)
    }

    async fn exchange(&mut self, frame: &[u8]) -> Result<Bytes, ClientError> {
        let timeout = self.timeout;
        let addr = self.addr.clone();
        tokio::time::timeout(timeout, async {
            self.stream
                .write_all(frame)
                .await
                .map_err(|e| io(&addr, "send", e))?;
            read_frame(&mut self.stream, &addr).await
        })
        .await
        .map_err(|_| io(&addr, "request", format!("no response within {timeout:?}")))?
    }

    /// The connection's stream, for the coordinator channel to split.
    pub(crate) fn into_stream(self) -> Box<dyn Stream> {
        self.stream
    }
}

/// Reads one size-prefixed frame (bounded by [`MAX_RESPONSE_BYTES`]).
pub(crate) async fn read_frame(
    reader: &mut (impl AsyncReadExt + Unpin),
    addr: &str,
) -> Result<Bytes, ClientError> {
    let size = reader.read_i32().await.map_err(|e| io(addr, "read", e))?;
    if size < 4 || size as usize > MAX_RESPONSE_BYTES {
        return Err(io(addr, "read", format!("frame size {size} out of range")));
    }
    let mut buf = vec![0; size as usize];
    reader
        .read_exact(&mut buf)
        .await
        .map_err(|e| io(addr, "read", e))?;
    Ok(Bytes::from(buf))
}
