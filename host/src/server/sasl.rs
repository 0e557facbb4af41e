//! SASL on one connection of a `SASL_PLAINTEXT` or `SASL_SSL` listener (issue 29 item
//! 3; docs/security.md, "SASL/SCRAM"): the connection's read loop hands every frame to
//! its [`SaslGate`] before anything else looks at it, and the gate says what to do
//! with it ([`Verdict`]).
//!
//! The gate is the I/O side of the sans-IO state machine in `crate::auth::session`:
//!
//! - Before the connection has authenticated, only ApiVersions, SaslHandshake and
//!   SaslAuthenticate pass; any other frame — a Produce, a native coordinator request
//!   (API keys 20000–20099), a frame too short to carry an API key — closes the
//!   connection at once and writes nothing ([`Verdict::Close`]). The same holds for a
//!   connection whose session expired (KIP-368): it may only re-authenticate.
//! - SaslHandshake and SaslAuthenticate are answered here, never by the dispatcher;
//!   after SaslHandshake v0 the next frames are raw tokens (no request header), answered
//!   raw. A PLAIN check runs PBKDF2, so it runs on the blocking pool.
//! - A failed authentication is answered after `sasl.failed_authentication_delay_ms`,
//!   then the connection closes ([`Answer::next`]).
//! - Once authenticated, every frame but a re-authentication passes to the usual path
//!   ([`Verdict::Pass`]), and [`SaslGate::principal`] is the connection's principal.
//!
//! It counts the SASL requests it answers in `drover_requests_total`, as the dispatcher
//! counts the others; the connection counts the closes (by the reason labels of
//! `crate::auth::session`) and logs them. Nothing here logs or returns a token.

use std::{sync::Arc, time::Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse,
};

use super::{
    api_name::api_name,
    dispatch::{decode_request, encode_response},
    principal::Principal,
};
use crate::{
    auth::{
        mechanism::Mechanism,
        session::{Admission, ConnectionInfo, Next, SaslServer, SaslSession, Step},
    },
    metrics::Metrics,
};

/// One connection's SASL state and the shared server it steps through.
pub struct SaslGate {
    server: Arc<SaslServer>,
    metrics: Arc<Metrics>,
    /// `None` only when a step on the blocking pool was lost (the connection closes).
    session: Option<SaslSession>,
}

/// What the connection does with a frame ([`SaslGate::frame`]).
#[derive(Debug)]
pub enum Verdict {
    /// Not SASL's to answer, and allowed: handle the frame as on any listener.
    Pass(Bytes),
    /// Answered by the gate: send the answer (if any), then do what it says.
    Answered(Answer),
    /// Close the connection now, writing nothing; the reason is a metrics label.
    Close(&'static str),
}

/// A SASL request's (or raw token's) answer.
#[derive(Debug)]
pub struct Answer {
    /// The response frame's body (header and message, or a raw token); `None`: send
    /// nothing.
    pub response: Option<Bytes>,
    /// What follows: carry on, or wait the delay (before sending the response) and
    /// close.
    pub next: Next,
}

impl SaslGate {
    /// The gate of a new connection from `conn`, stepping through `server`.
    pub fn new(server: Arc<SaslServer>, metrics: Arc<Metrics>, conn: ConnectionInfo) -> SaslGate {
        SaslGate {
            server,
            metrics,
            session: Some(SaslSession::new(conn)),
        }
    }

    /// The authenticated principal, `User:<name>`; `None` before the connection has
    /// authenticated (and while it re-authenticates).
    pub fn principal(&self) -> Option<Principal> {
        self.session
            .as_ref()
            .and_then(SaslSession::principal)
            .map(Principal::user)
    }

    /// Whether the connection has authenticated (and is not re-authenticating):
    /// [`SaslGate::principal`] without building it.
    pub fn is_authenticated(&self) -> bool {
        self.session
            .as_ref()
            .and_then(SaslSession::principal)
            .is_some()
    }

    /// The SASL name of the mechanism the connection authenticated with.
    pub fn mechanism(&self) -> Option<&'static str> {
        self.session
            .as_ref()
            .and_then(SaslSession::mechanism)
            .map(|m| m.name())
    }

    /// Whether the session has expired at `now` without re-authenticating. A
    /// coordinator channel's frames (answers, which carry no API key) are closed then.
    pub fn expired(&self, now: Instant) -> bool {
        self.session
            .as_ref()
            .is_none_or(|s| s.must_reauthenticate(now))
    }

    /// A coordinator channel's session that expired at `now` is renewed when its
    /// credential is stored unchanged ([`SaslServer::renew_channel`]); whether the
    /// channel may go on.
    pub fn renew_channel(&mut self, now: Instant) -> bool {
        self.session
            .as_mut()
            .is_some_and(|s| self.server.renew_channel(s, now))
    }

    /// Looks at one frame read at `now`: passes it on, answers it, or closes.
    pub async fn frame(&mut self, frame: Bytes, now: Instant) -> Verdict {
        let Some(session) = self.session.take() else {
            return Verdict::Close("sasl_failed");
        };
        if session.expects_raw_token() {
            return self.raw_token(session, frame, now).await;
        }
        // A frame too short for an API key is no allowed request either.
        let key = match frame.get(..2) {
            Some(k) => i16::from_be_bytes([k[0], k[1]]),
            None => -1,
        };
        if let Admission::Close(reason) = session.check_request(key, now) {
            self.session = Some(session);
            return Verdict::Close(reason);
        }
        if key != ApiKey::SaslHandshake as i16 && key != ApiKey::SaslAuthenticate as i16 {
            self.session = Some(session);
            return Verdict::Pass(frame);
        }
        // An undecodable SASL request, or one at a version not served: the dispatcher
        // closes the connection as it does for any such request.
        let Ok((api, request)) = decode_request(frame.clone()) else {
            self.session = Some(session);
            return Verdict::Pass(frame);
        };
        let (version, correlation_id) = (request.version, request.header.correlation_id);
        let (response, next) = match request.body {
            RequestKind::SaslHandshake(r) => {
                let step = self.server.handshake(session, version, &r);
                self.session = Some(step.session);
                let response: Option<(i16, ResponseKind)> =
                    step.response.map(|r| (r.error_code, r.into()));
                (response, step.next)
            }
            RequestKind::SaslAuthenticate(r) => {
                let Some(step) = self.authenticate(session, version, r, now).await else {
                    return Verdict::Close("sasl_failed");
                };
                self.session = Some(step.session);
                let response: Option<(i16, ResponseKind)> =
                    step.response.map(|r| (r.error_code, r.into()));
                (response, step.next)
            }
            // The API key said it is one of the two.
            _ => {
                self.session = Some(session);
                return Verdict::Close("sasl_illegal_state");
            }
        };
        let Some((error, response)) = response else {
            return Verdict::Answered(Answer {
                response: None,
                next,
            });
        };
        self.metrics.request(api_name(api), error);
        match encode_response(api, version, correlation_id, &response) {
            Ok(bytes) => Verdict::Answered(Answer {
                response: Some(bytes),
                next,
            }),
            Err(_) => Verdict::Close("encode_error"),
        }
    }

    /// SaslAuthenticate; a PLAIN check (PBKDF2) on the blocking pool. `None` when the
    /// blocking task was lost.
    async fn authenticate(
        &self,
        session: SaslSession,
        version: i16,
        request: SaslAuthenticateRequest,
        now: Instant,
    ) -> Option<Step<SaslAuthenticateResponse>> {
        if session.mechanism() != Some(Mechanism::Plain) {
            return Some(self.server.authenticate(session, version, &request, now));
        }
        let server = Arc::clone(&self.server);
        tokio::task::spawn_blocking(move || server.authenticate(session, version, &request, now))
            .await
            .ok()
    }

    /// A raw token after SaslHandshake v0, answered raw.
    async fn raw_token(&mut self, session: SaslSession, token: Bytes, now: Instant) -> Verdict {
        let step = if session.mechanism() == Some(Mechanism::Plain) {
            let server = Arc::clone(&self.server);
            match tokio::task::spawn_blocking(move || server.raw_token(session, &token, now)).await
            {
                Ok(step) => step,
                Err(_) => return Verdict::Close("sasl_failed"),
            }
        } else {
            self.server.raw_token(session, &token, now)
        };
        self.session = Some(step.session);
        Verdict::Answered(Answer {
            response: step.response,
            next: step.next,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::{net::IpAddr, time::Duration};

    use bytes::BytesMut;
    use kafka_protocol::{
        messages::{
            ApiVersionsRequest, ProduceRequest, RequestHeader, ResponseHeader,
            SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
            SaslHandshakeResponse,
        },
        protocol::{Decodable, Encodable, StrBytes},
    };

    use super::*;
    use crate::auth::{
        credentials::{CredentialTable, ScramCredential},
        mechanism::ScramMechanism,
        session::SaslSettings,
        store::CredentialStore,
    };

    fn gate(tls: bool, reauth_ms: u64) -> SaslGate {
        let mut table = CredentialTable::with_secret([7; 32]);
        let m = ScramMechanism::Sha512;
        table.insert(
            "alice",
            m,
            ScramCredential::from_password(m, b"pencil", 4096).unwrap(),
        );
        let settings = SaslSettings::from_config(&crate::config::SaslSection {
            mechanisms: vec!["SCRAM-SHA-512".into(), "PLAIN".into()],
            connections_max_reauth_ms: reauth_ms,
            ..Default::default()
        });
        let metrics = Arc::new(Metrics::new());
        let server = SaslServer::new(
            settings,
            Arc::new(CredentialStore::in_memory(table, 10)),
            Arc::clone(&metrics),
        );
        SaslGate::new(
            Arc::new(server),
            metrics,
            ConnectionInfo {
                peer: IpAddr::from([192, 0, 2, 1]),
                tls,
            },
        )
    }

    fn frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let mut out = BytesMut::new();
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = 42;
        header
            .encode(&mut out, key.request_header_version(version))
            .unwrap();
        body.encode(&mut out, version).unwrap();
        out.freeze()
    }

    fn handshake(mechanism: &str, version: i16) -> Bytes {
        let mut r = SaslHandshakeRequest::default();
        r.mechanism = StrBytes::from_string(mechanism.into());
        frame(ApiKey::SaslHandshake, version, &r)
    }

    fn authenticate(token: &[u8]) -> Bytes {
        let mut r = SaslAuthenticateRequest::default();
        r.auth_bytes = Bytes::copy_from_slice(token);
        frame(ApiKey::SaslAuthenticate, 2, &r)
    }

    fn produce() -> Bytes {
        frame(ApiKey::Produce, 9, &ProduceRequest::default())
    }

    /// The answer's body decoded as `M` after its header (correlation id 42).
    fn answered<M: Decodable>(verdict: Verdict, key: ApiKey, version: i16) -> (M, Next) {
        let Verdict::Answered(Answer {
            response: Some(mut body),
            next,
        }) = verdict
        else {
            panic!("not answered: {verdict:?}");
        };
        let header =
            ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, 42);
        (M::decode(&mut body, version).unwrap(), next)
    }

    #[tokio::test]
    async fn before_authentication_only_api_versions_and_sasl_pass() {
        let now = Instant::now();
        let mut g = gate(true, 0);
        let versions = frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert!(matches!(g.frame(versions, now).await, Verdict::Pass(_)));
        for f in [
            produce(),
            // A native coordinator request (RegisterConsumer's key).
            Bytes::from_static(&[0x4e, 0x20, 0, 0, 0, 0, 0, 1]),
            // Too short for an API key.
            Bytes::from_static(&[0]),
        ] {
            let mut g = gate(true, 0);
            assert!(
                matches!(
                    g.frame(f, now).await,
                    Verdict::Close("sasl_unauthenticated_request")
                ),
                "a frame before authentication passed"
            );
            assert!(g.principal().is_none());
        }
    }

    #[tokio::test]
    async fn plain_authenticates_and_the_principal_is_the_user() {
        let now = Instant::now();
        let mut g = gate(true, 0);
        let (r, next): (SaslHandshakeResponse, _) = answered(
            g.frame(handshake("PLAIN", 1), now).await,
            ApiKey::SaslHandshake,
            1,
        );
        assert_eq!((r.error_code, next), (0, Next::Continue));
        assert!(g.principal().is_none());
        let (r, next): (SaslAuthenticateResponse, _) = answered(
            g.frame(authenticate(b"\0alice\0pencil"), now).await,
            ApiKey::SaslAuthenticate,
            2,
        );
        assert_eq!((r.error_code, next), (0, Next::Continue));
        assert_eq!(g.principal(), Some(Principal::user("alice")));
        assert!(matches!(g.frame(produce(), now).await, Verdict::Pass(_)));
        assert!(!g.expired(now + Duration::from_secs(3600)));
    }

    #[tokio::test]
    async fn a_wrong_password_is_answered_58_and_closes_after_the_delay() {
        let now = Instant::now();
        let mut g = gate(true, 0);
        let _ = g.frame(handshake("PLAIN", 1), now).await;
        let (r, next): (SaslAuthenticateResponse, _) = answered(
            g.frame(authenticate(b"\0alice\0pen"), now).await,
            ApiKey::SaslAuthenticate,
            2,
        );
        assert_eq!(r.error_code, 58);
        let message = r.error_message.unwrap().to_string();
        assert!(!message.contains("pen"), "{message}");
        assert_eq!(
            next,
            Next::Close {
                delay: Duration::from_millis(100),
                reason: "sasl_authentication_failed"
            }
        );
        assert!(g.principal().is_none());
        assert!(matches!(
            g.frame(produce(), now).await,
            Verdict::Close("sasl_failed")
        ));
    }

    #[tokio::test]
    async fn plain_is_not_offered_without_tls() {
        let mut g = gate(false, 0);
        let (r, next): (SaslHandshakeResponse, _) = answered(
            g.frame(handshake("PLAIN", 1), Instant::now()).await,
            ApiKey::SaslHandshake,
            1,
        );
        assert_eq!(r.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
        let offered: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
        assert_eq!(offered, ["SCRAM-SHA-512"]);
        assert!(matches!(next, Next::Close { .. }));
    }

    #[tokio::test]
    async fn a_v0_handshake_takes_raw_tokens() {
        let now = Instant::now();
        let mut g = gate(true, 0);
        let (r, _): (SaslHandshakeResponse, _) = answered(
            g.frame(handshake("PLAIN", 0), now).await,
            ApiKey::SaslHandshake,
            0,
        );
        assert_eq!(r.error_code, 0);
        // The raw token is no Kafka request: no header, no API key.
        let Verdict::Answered(answer) = g.frame(Bytes::from_static(b"\0alice\0pencil"), now).await
        else {
            panic!("a raw token was not answered");
        };
        assert_eq!(answer.response, Some(Bytes::new()));
        assert_eq!(answer.next, Next::Continue);
        assert_eq!(g.principal(), Some(Principal::user("alice")));
    }

    #[tokio::test]
    async fn an_expired_session_may_only_reauthenticate() {
        let now = Instant::now();
        let mut g = gate(true, 1000);
        let _ = g.frame(handshake("PLAIN", 1), now).await;
        let _ = g.frame(authenticate(b"\0alice\0pencil"), now).await;
        let later = now + Duration::from_millis(1500);
        assert!(matches!(g.frame(produce(), now).await, Verdict::Pass(_)));
        assert!(g.expired(later));
        assert!(matches!(
            g.frame(produce(), later).await,
            Verdict::Close("sasl_session_expired")
        ));
        // Re-authenticating renews the session.
        let (r, _): (SaslHandshakeResponse, _) = answered(
            g.frame(handshake("PLAIN", 1), later).await,
            ApiKey::SaslHandshake,
            1,
        );
        assert_eq!(r.error_code, 0);
        let (r, _): (SaslAuthenticateResponse, _) = answered(
            g.frame(authenticate(b"\0alice\0pencil"), later).await,
            ApiKey::SaslAuthenticate,
            2,
        );
        assert_eq!((r.error_code, r.session_lifetime_ms), (0, 1000));
        assert!(!g.expired(later));
        assert!(matches!(g.frame(produce(), later).await, Verdict::Pass(_)));
    }
}
