//! SASL on one connection as a sans-IO state machine: SaslHandshake (API 17, v0–1) and
//! SaslAuthenticate (API 36, v0–2) at Kafka 4.1's version ranges, as functions from
//! (session, request, now) to (response, session, what the connection does next). It
//! reads no clock, does no I/O and never blocks, except that a PLAIN check runs PBKDF2
//! (milliseconds: call [`SaslServer::authenticate`] on a blocking thread when the
//! session's mechanism is PLAIN, see [`SaslSession::mechanism`]).
//!
//! The rules, after Kafka's `SaslServerAuthenticator`:
//!
//! - **Before authentication** a connection may send only ApiVersions, SaslHandshake
//!   and SaslAuthenticate ([`allowed_before_auth`]); the connection asks
//!   [`SaslSession::check_request`] before it handles any request and closes the
//!   connection when told to (issue 29: "anything else closes it").
//! - **SaslHandshake** names a mechanism. One not offered (not in `sasl.mechanisms`;
//!   PLAIN on a listener without TLS unless `sasl.plain_on_plaintext`) is answered
//!   `UNSUPPORTED_SASL_MECHANISM` with the offered list, and the connection closed. v1
//!   means the tokens follow in SaslAuthenticate requests; v0 (KIP-43's original form)
//!   that they follow as raw frames (a 4-byte length and the token), which the
//!   connection hands to [`SaslServer::raw_token`] ([`SaslSession::expects_raw_token`]).
//! - **SaslAuthenticate** carries the mechanism's tokens: PLAIN's one message, or
//!   SCRAM's client-first then client-final message. A request out of order (before a
//!   handshake, a second handshake) is `ILLEGAL_SASL_STATE` and closes the connection.
//! - **A failed authentication** — wrong password, unknown user, a malformed message,
//!   or a client address over `sasl.failures_per_minute_per_client` — is answered
//!   `SASL_AUTHENTICATION_FAILED` (58) with one message that names the mechanism only,
//!   and the connection is closed after `sasl.failed_authentication_delay_ms`
//!   (KIP-306). Unknown users take the same path as known ones ([`super::decoy`]).
//!   Failures are counted per mechanism (`drover_sasl_authentications_total`).
//! - **Re-authentication** (KIP-368): with `sasl.connections_max_reauth_ms` > 0 the
//!   final SaslAuthenticate (v1+) answers the session lifetime; the client then sends
//!   SaslHandshake and SaslAuthenticate again on the same connection, with the same
//!   mechanism and as the same user, before the session expires
//!   ([`SaslSession::reauthenticate_by`]). A connection whose session expired may
//!   only re-authenticate: anything else closes it. A v0 client (no lifetime in its
//!   answer) is closed at expiry the same way.

use std::{
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use bytes::Bytes;
use kafka_protocol::{
    error::ResponseError,
    messages::{
        ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
        SaslHandshakeResponse,
    },
    protocol::{Message, StrBytes, VersionRange},
};

use super::{
    credentials::ScramCredential,
    mechanism::{Mechanism, ScramMechanism},
    plain::{self, PlainMessage},
    rate_limit::FailureLimiter,
    scram::{ScramExchange, ScramFailure},
    store::CredentialStore,
};
use crate::{config::SaslSection, metrics::Metrics};

/// SaslHandshake's versions (Kafka 4.1: 0–1).
pub const SASL_HANDSHAKE_VERSIONS: VersionRange = SaslHandshakeRequest::VERSIONS;
/// SaslAuthenticate's versions (Kafka 4.1: 0–2; v1 adds `session_lifetime_ms`).
pub const SASL_AUTHENTICATE_VERSIONS: VersionRange = SaslAuthenticateRequest::VERSIONS;

/// Whether a connection that has not authenticated may send API `api_key`:
/// ApiVersions, SaslHandshake and SaslAuthenticate only (Kafka's
/// `SaslServerAuthenticator`; issue 29).
pub fn allowed_before_auth(api_key: i16) -> bool {
    api_key == ApiKey::ApiVersions as i16
        || api_key == ApiKey::SaslHandshake as i16
        || api_key == ApiKey::SaslAuthenticate as i16
}

/// The `[sasl]` settings the state machine uses.
#[derive(Debug, Clone)]
pub struct SaslSettings {
    /// Mechanisms offered, in the order SaslHandshake lists them.
    pub mechanisms: Vec<Mechanism>,
    /// Offer PLAIN without TLS.
    pub plain_on_plaintext: bool,
    /// Session lifetime (`connections_max_reauth_ms`); `None`: no expiry.
    pub session_lifetime: Option<Duration>,
    /// How long a failure's answer waits before the close.
    pub failed_authentication_delay: Duration,
    /// Failures per minute per client address.
    pub failures_per_minute_per_client: u32,
}

impl SaslSettings {
    /// The settings of a validated `[sasl]` table (unknown names are skipped; config
    /// validation refuses them).
    pub fn from_config(section: &SaslSection) -> SaslSettings {
        SaslSettings {
            mechanisms: section
                .mechanisms
                .iter()
                .filter_map(|n| Mechanism::from_name(n))
                .collect(),
            plain_on_plaintext: section.plain_on_plaintext,
            session_lifetime: (section.connections_max_reauth_ms > 0)
                .then(|| Duration::from_millis(section.connections_max_reauth_ms)),
            failed_authentication_delay: Duration::from_millis(
                section.failed_authentication_delay_ms,
            ),
            failures_per_minute_per_client: section.failures_per_minute_per_client,
        }
    }
}

/// Where the server nonces of SCRAM exchanges come from.
pub trait NonceSource: Send + Sync {
    /// A fresh nonce: printable ASCII without `,`, unpredictable. `None` when no
    /// randomness is available (the authentication then fails).
    fn server_nonce(&self) -> Option<String>;
}

/// Nonces of 24 random bytes from the operating system, base64url (32 characters).
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomNonces;

impl NonceSource for RandomNonces {
    fn server_nonce(&self) -> Option<String> {
        let mut bytes = [0u8; 24];
        getrandom::getrandom(&mut bytes).ok()?;
        Some(URL_SAFE_NO_PAD.encode(bytes))
    }
}

/// The broker's side of SASL: settings, credentials, the failure limiter, metrics.
/// Shared by every connection.
pub struct SaslServer {
    settings: SaslSettings,
    credentials: Arc<CredentialStore>,
    limiter: FailureLimiter,
    metrics: Arc<Metrics>,
    nonces: Box<dyn NonceSource>,
}

/// What the connection knows about itself when it starts a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The client's address (the failure limiter's key).
    pub peer: IpAddr,
    /// Whether the listener is TLS (SASL_SSL): PLAIN is offered there.
    pub tls: bool,
}

/// An authenticated session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The user name; Kafka's principal is `User:<name>`.
    pub user: String,
    /// The mechanism it authenticated with.
    pub mechanism: Mechanism,
    /// When the session expires (`sasl.connections_max_reauth_ms` after the
    /// authentication), if it does.
    pub expires_at: Option<Instant>,
    /// The stored credential the client proved it knows (SCRAM's, or the one a PLAIN
    /// password was checked against), for renewing a coordinator channel's session
    /// while it is unchanged ([`SaslServer::renew_channel`]).
    pub credential: (ScramMechanism, ScramCredential),
}

/// How the tokens of an authentication travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// In SaslAuthenticate requests (SaslHandshake v1).
    Wrapped,
    /// As raw frames (SaslHandshake v0).
    Raw,
}

#[derive(Debug)]
enum State {
    /// Nothing but ApiVersions yet.
    Start,
    /// A mechanism was chosen; its first token is due.
    Handshaken {
        mechanism: Mechanism,
        framing: Framing,
        /// The session being re-authenticated (KIP-368).
        previous: Option<Authenticated>,
    },
    /// SCRAM's server-first message was sent; the client-final message is due.
    ScramFinalDue {
        exchange: Box<ScramExchange>,
        framing: Framing,
        previous: Option<Authenticated>,
    },
    /// Authenticated.
    Authenticated(Authenticated),
    /// Failed: the connection is being closed.
    Failed,
}

/// One connection's SASL state. Start one with [`SaslSession::new`] when a
/// connection on a SASL listener is accepted.
#[derive(Debug)]
pub struct SaslSession {
    conn: ConnectionInfo,
    state: State,
}

/// Whether the connection may handle a request ([`SaslSession::check_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Handle it.
    Allow,
    /// Close the connection without answering; the reason is a metrics label
    /// (`sasl_unauthenticated_request`, `sasl_session_expired`,
    /// `sasl_reauthentication_interrupted`, `sasl_failed`).
    Close(&'static str),
}

/// What the connection does after sending the response (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Carry on reading requests.
    Continue,
    /// Send the response, if any, wait `delay`, and close; the reason is a metrics
    /// label (`sasl_authentication_failed`, `sasl_unsupported_mechanism`,
    /// `sasl_illegal_state`, `sasl_credentials_not_loaded`).
    Close {
        /// How long to hold the connection before closing it (KIP-306; zero when the
        /// failure is not an authentication failure).
        delay: Duration,
        /// Why.
        reason: &'static str,
    },
}

/// The result of one step: the response to send (if any), the session after the step,
/// and what to do next.
#[derive(Debug)]
pub struct Step<R> {
    /// The response; `None`: send nothing.
    pub response: Option<R>,
    /// The session after the step.
    pub session: SaslSession,
    /// What the connection does next.
    pub next: Next,
}

/// Why an authentication failed (for the broker's log; never sent to the client). Its
/// `Display` holds no credential or client input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthFailure {
    /// A SCRAM check failed.
    #[error("SCRAM: {0}")]
    Scram(ScramFailure),
    /// A PLAIN message was refused.
    #[error("PLAIN: {0}")]
    Plain(super::plain::PlainError),
    /// The PLAIN password is not the user's, or the user does not exist.
    #[error("PLAIN: invalid credentials")]
    PlainPassword,
    /// Re-authentication as another user (KIP-368 forbids changing principals).
    #[error("re-authentication as another user")]
    PrincipalChanged,
    /// The client address is over its failure budget.
    #[error("too many failed authentications from this client")]
    RateLimited,
    /// No random nonce could be made.
    #[error("no randomness for a nonce")]
    NoRandomness,
}

/// The one message of every failed authentication: it names the mechanism, never which
/// check failed (Kafka's wording for invalid credentials).
pub fn failure_message(mechanism: Mechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL \
         mechanism {mechanism}"
    )
}

impl SaslSession {
    /// The session of a new connection.
    pub fn new(conn: ConnectionInfo) -> SaslSession {
        SaslSession {
            conn,
            state: State::Start,
        }
    }

    /// The connection it was started with.
    pub fn connection(&self) -> ConnectionInfo {
        self.conn
    }

    /// Whether the connection may handle a request of API `api_key` at `now` (see
    /// the module docs). Call before every request; ApiVersions is always allowed.
    pub fn check_request(&self, api_key: i16, now: Instant) -> Admission {
        let sasl_step =
            api_key == ApiKey::SaslHandshake as i16 || api_key == ApiKey::SaslAuthenticate as i16;
        match &self.state {
            State::Failed => Admission::Close("sasl_failed"),
            State::Authenticated(a) => {
                let expired = a.expires_at.is_some_and(|at| now >= at);
                if expired
                    && api_key != ApiKey::SaslHandshake as i16
                    && api_key != ApiKey::ApiVersions as i16
                {
                    Admission::Close("sasl_session_expired")
                } else {
                    Admission::Allow
                }
            }
            State::Handshaken {
                previous: Some(_), ..
            }
            | State::ScramFinalDue {
                previous: Some(_), ..
            } => {
                if sasl_step || api_key == ApiKey::ApiVersions as i16 {
                    Admission::Allow
                } else {
                    Admission::Close("sasl_reauthentication_interrupted")
                }
            }
            State::Start | State::Handshaken { .. } | State::ScramFinalDue { .. } => {
                if allowed_before_auth(api_key) {
                    Admission::Allow
                } else {
                    Admission::Close("sasl_unauthenticated_request")
                }
            }
        }
    }

    /// Whether the next frame is a raw SASL token (after SaslHandshake v0) rather than
    /// a Kafka request: hand it to [`SaslServer::raw_token`].
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            self.state,
            State::Handshaken {
                framing: Framing::Raw,
                ..
            } | State::ScramFinalDue {
                framing: Framing::Raw,
                ..
            }
        )
    }

    /// The mechanism of the authentication under way or done.
    pub fn mechanism(&self) -> Option<Mechanism> {
        match &self.state {
            State::Handshaken { mechanism, .. } => Some(*mechanism),
            State::ScramFinalDue { exchange, .. } => Some(Mechanism::Scram(exchange.mechanism())),
            State::Authenticated(a) => Some(a.mechanism),
            State::Start | State::Failed => None,
        }
    }

    /// The authenticated session, if the connection has authenticated (during a
    /// re-authentication: none, the connection handles no other request then).
    pub fn authenticated(&self) -> Option<&Authenticated> {
        match &self.state {
            State::Authenticated(a) => Some(a),
            _ => None,
        }
    }

    /// The authenticated user name (Kafka's principal `User:<name>`).
    pub fn principal(&self) -> Option<&str> {
        self.authenticated().map(|a| a.user.as_str())
    }

    /// When the client must have re-authenticated (KIP-368): the session's expiry, if
    /// it has one. A connection past it that sends anything but SaslHandshake (or
    /// ApiVersions) is closed ([`SaslSession::check_request`]).
    pub fn reauthenticate_by(&self) -> Option<Instant> {
        self.authenticated().and_then(|a| a.expires_at)
    }

    /// Whether the session has expired at `now` without re-authenticating.
    pub fn must_reauthenticate(&self, now: Instant) -> bool {
        self.reauthenticate_by().is_some_and(|at| now >= at)
    }

    fn failed(self) -> SaslSession {
        SaslSession {
            conn: self.conn,
            state: State::Failed,
        }
    }
}

/// What one token did.
enum TokenResult {
    /// Answer this token; the exchange goes on (SCRAM's server-first).
    Challenge(Vec<u8>, SaslSession),
    /// Authenticated: answer this token (SCRAM's server-final; empty for PLAIN).
    Done(Vec<u8>, SaslSession, Option<Duration>),
    /// Failed for `mechanism`.
    Failed(Mechanism, AuthFailure, SaslSession),
    /// A token in the wrong state.
    Illegal(SaslSession),
}

impl SaslServer {
    /// The server over `credentials`, counting into `metrics`, with random nonces.
    pub fn new(
        settings: SaslSettings,
        credentials: Arc<CredentialStore>,
        metrics: Arc<Metrics>,
    ) -> SaslServer {
        SaslServer::with_nonces(settings, credentials, metrics, Box::new(RandomNonces))
    }

    /// The server with its nonces from `nonces` (tests replay RFC 7677's exchange).
    pub fn with_nonces(
        settings: SaslSettings,
        credentials: Arc<CredentialStore>,
        metrics: Arc<Metrics>,
        nonces: Box<dyn NonceSource>,
    ) -> SaslServer {
        SaslServer {
            limiter: FailureLimiter::new(settings.failures_per_minute_per_client),
            settings,
            credentials,
            metrics,
            nonces,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &SaslSettings {
        &self.settings
    }

    /// The credential store.
    pub fn credentials(&self) -> &Arc<CredentialStore> {
        &self.credentials
    }

    /// The mechanisms offered to `conn`, in SaslHandshake's order.
    pub fn offered(&self, conn: ConnectionInfo) -> Vec<Mechanism> {
        self.settings
            .mechanisms
            .iter()
            .copied()
            .filter(|m| *m != Mechanism::Plain || conn.tls || self.settings.plain_on_plaintext)
            .collect()
    }

    /// SaslHandshake (API 17) at `version` (0–1) on `session`.
    pub fn handshake(
        &self,
        session: SaslSession,
        version: i16,
        request: &SaslHandshakeRequest,
    ) -> Step<SaslHandshakeResponse> {
        let offered = self.offered(session.conn);
        let mut response = SaslHandshakeResponse::default();
        response.mechanisms = offered
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let close = |response: SaslHandshakeResponse, session: SaslSession, reason| Step {
            response: Some(response),
            session: session.failed(),
            next: Next::Close {
                delay: Duration::ZERO,
                reason,
            },
        };
        let previous = match &session.state {
            State::Start => None,
            // KIP-368: a new handshake on an authenticated connection re-authenticates,
            // in SaslAuthenticate requests (the connection carries other requests).
            State::Authenticated(a) if version >= 1 => Some(a.clone()),
            _ => {
                response.error_code = ResponseError::IllegalSaslState.code();
                return close(response, session, "sasl_illegal_state");
            }
        };
        let chosen =
            Mechanism::from_name(request.mechanism.as_str()).filter(|m| offered.contains(m));
        let Some(mechanism) =
            chosen.filter(|m| previous.as_ref().is_none_or(|p| p.mechanism == *m))
        else {
            response.error_code = ResponseError::UnsupportedSaslMechanism.code();
            return close(response, session, "sasl_unsupported_mechanism");
        };
        if !self.credentials.is_loaded() {
            // Cluster mode before the first read of the credentials: the client
            // reconnects (a closed connection is retriable; an authentication failure
            // is not).
            return Step {
                response: None,
                session: session.failed(),
                next: Next::Close {
                    delay: Duration::ZERO,
                    reason: "sasl_credentials_not_loaded",
                },
            };
        }
        Step {
            response: Some(response),
            session: SaslSession {
                conn: session.conn,
                state: State::Handshaken {
                    mechanism,
                    framing: if version == 0 {
                        Framing::Raw
                    } else {
                        Framing::Wrapped
                    },
                    previous,
                },
            },
            next: Next::Continue,
        }
    }

    /// SaslAuthenticate (API 36) at `version` (0–2) on `session` at `now`. Runs
    /// PBKDF2 when the mechanism is PLAIN.
    pub fn authenticate(
        &self,
        session: SaslSession,
        version: i16,
        request: &SaslAuthenticateRequest,
        now: Instant,
    ) -> Step<SaslAuthenticateResponse> {
        let mut response = SaslAuthenticateResponse::default();
        if session.expects_raw_token()
            || !matches!(
                session.state,
                State::Handshaken { .. } | State::ScramFinalDue { .. }
            )
        {
            response.error_code = ResponseError::IllegalSaslState.code();
            response.error_message = Some(StrBytes::from_static_str(
                "SaslAuthenticate is not expected in this state of the SASL exchange",
            ));
            return Step {
                response: Some(response),
                session: session.failed(),
                next: Next::Close {
                    delay: Duration::ZERO,
                    reason: "sasl_illegal_state",
                },
            };
        }
        match self.token(session, &request.auth_bytes, now) {
            TokenResult::Challenge(bytes, session) => {
                response.auth_bytes = Bytes::from(bytes);
                Step {
                    response: Some(response),
                    session,
                    next: Next::Continue,
                }
            }
            TokenResult::Done(bytes, session, lifetime) => {
                response.auth_bytes = Bytes::from(bytes);
                if version >= 1 {
                    response.session_lifetime_ms =
                        lifetime.map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX));
                }
                Step {
                    response: Some(response),
                    session,
                    next: Next::Continue,
                }
            }
            TokenResult::Failed(mechanism, _why, session) => {
                response.error_code = ResponseError::SaslAuthenticationFailed.code();
                response.error_message = Some(StrBytes::from_string(failure_message(mechanism)));
                Step {
                    response: Some(response),
                    session,
                    next: self.failure_close(),
                }
            }
            TokenResult::Illegal(session) => {
                response.error_code = ResponseError::IllegalSaslState.code();
                Step {
                    response: Some(response),
                    session,
                    next: Next::Close {
                        delay: Duration::ZERO,
                        reason: "sasl_illegal_state",
                    },
                }
            }
        }
    }

    /// A raw token after SaslHandshake v0 ([`SaslSession::expects_raw_token`]): the
    /// response is the raw token to send back (a 4-byte length and the bytes; an empty
    /// token after PLAIN). A failure sends nothing and closes after the delay, as
    /// Kafka does for unwrapped tokens.
    pub fn raw_token(&self, session: SaslSession, token: &[u8], now: Instant) -> Step<Bytes> {
        if !session.expects_raw_token() {
            return Step {
                response: None,
                session: session.failed(),
                next: Next::Close {
                    delay: Duration::ZERO,
                    reason: "sasl_illegal_state",
                },
            };
        }
        match self.token(session, token, now) {
            TokenResult::Challenge(bytes, session) | TokenResult::Done(bytes, session, _) => Step {
                response: Some(Bytes::from(bytes)),
                session,
                next: Next::Continue,
            },
            TokenResult::Failed(_, _, session) => Step {
                response: None,
                session,
                next: self.failure_close(),
            },
            TokenResult::Illegal(session) => Step {
                response: None,
                session,
                next: Next::Close {
                    delay: Duration::ZERO,
                    reason: "sasl_illegal_state",
                },
            },
        }
    }

    /// Renews the session of a coordinator channel that has expired at `now`, when the
    /// credential it authenticated with is still stored unchanged; whether it did.
    ///
    /// A channel carries only the consumer's answers to the coordinator, never a
    /// request of its own, so it cannot re-authenticate (KIP-368) as other
    /// connections do (docs/protocol.md, section 4). What a successful
    /// re-authentication would establish for SCRAM and PLAIN — the client still holds
    /// the secret of the credential the store holds now — follows from the client
    /// having proved it for the same credential, while that credential is unchanged.
    /// A changed or deleted credential (or a failed session) is not renewed, and the
    /// connection closes as an expired one does.
    pub fn renew_channel(&self, session: &mut SaslSession, now: Instant) -> bool {
        let State::Authenticated(a) = &mut session.state else {
            return false;
        };
        let (scram, credential) = &a.credential;
        let snapshot = self.credentials.snapshot();
        let unchanged = snapshot
            .table()
            .get(&a.user, *scram)
            .is_some_and(|stored| stored == credential);
        if !unchanged {
            return false;
        }
        a.expires_at = self.settings.session_lifetime.map(|l| now + l);
        self.metrics
            .sasl_authentication(a.mechanism.label(), "channel_renewed");
        true
    }

    fn failure_close(&self) -> Next {
        Next::Close {
            delay: self.settings.failed_authentication_delay,
            reason: "sasl_authentication_failed",
        }
    }

    /// One token of the exchange under way.
    fn token(&self, session: SaslSession, token: &[u8], now: Instant) -> TokenResult {
        let conn = session.conn;
        match session.state {
            State::Handshaken {
                mechanism,
                framing,
                previous,
            } => {
                // The exchange holds a token of the client's failure budget until it
                // succeeds (rate_limit.rs): concurrent exchanges cannot all pass on one.
                if !self.limiter.reserve(conn.peer, now) {
                    self.metrics
                        .sasl_authentication(mechanism.label(), "rate_limited");
                    return TokenResult::Failed(
                        mechanism,
                        AuthFailure::RateLimited,
                        SaslSession {
                            conn,
                            state: State::Failed,
                        },
                    );
                }
                let snapshot = self.credentials.snapshot();
                match mechanism {
                    Mechanism::Plain => {
                        let checked = PlainMessage::parse(token)
                            .map_err(AuthFailure::Plain)
                            .and_then(|message| match plain::verify(&message, &snapshot) {
                                (true, scram) => snapshot
                                    .table()
                                    .get(&message.username, scram)
                                    .map(|c| (message.username.clone(), (scram, c.clone())))
                                    .ok_or(AuthFailure::PlainPassword),
                                (false, _) => Err(AuthFailure::PlainPassword),
                            });
                        match checked {
                            Ok((user, credential)) => self.succeed(
                                conn,
                                mechanism,
                                (user, credential),
                                previous,
                                Vec::new(),
                                now,
                            ),
                            Err(why) => self.fail(conn, mechanism, why),
                        }
                    }
                    Mechanism::Scram(scram) => {
                        let Some(nonce) = self.nonces.server_nonce() else {
                            return self.fail(conn, mechanism, AuthFailure::NoRandomness);
                        };
                        match ScramExchange::start(scram, &snapshot, token, &nonce) {
                            Ok((exchange, server_first)) => TokenResult::Challenge(
                                server_first,
                                SaslSession {
                                    conn,
                                    state: State::ScramFinalDue {
                                        exchange: Box::new(exchange),
                                        framing,
                                        previous,
                                    },
                                },
                            ),
                            Err(why) => self.fail(conn, mechanism, AuthFailure::Scram(why)),
                        }
                    }
                }
            }
            State::ScramFinalDue {
                exchange, previous, ..
            } => {
                let mechanism = Mechanism::Scram(exchange.mechanism());
                let credential = (exchange.mechanism(), exchange.credential().clone());
                match exchange.finish(token) {
                    Ok((user, server_final)) => self.succeed(
                        conn,
                        mechanism,
                        (user, credential),
                        previous,
                        server_final,
                        now,
                    ),
                    Err(why) => self.fail(conn, mechanism, AuthFailure::Scram(why)),
                }
            }
            state => TokenResult::Illegal(SaslSession { conn, state }),
        }
    }

    fn succeed(
        &self,
        conn: ConnectionInfo,
        mechanism: Mechanism,
        (user, credential): (String, (ScramMechanism, ScramCredential)),
        previous: Option<Authenticated>,
        answer: Vec<u8>,
        now: Instant,
    ) -> TokenResult {
        if previous.as_ref().is_some_and(|p| p.user != user) {
            return self.fail(conn, mechanism, AuthFailure::PrincipalChanged);
        }
        self.limiter.refund(conn.peer, now);
        self.metrics
            .sasl_authentication(mechanism.label(), "success");
        let lifetime = self.settings.session_lifetime;
        TokenResult::Done(
            answer,
            SaslSession {
                conn,
                state: State::Authenticated(Authenticated {
                    user,
                    mechanism,
                    expires_at: lifetime.map(|l| now + l),
                    credential,
                }),
            },
            lifetime,
        )
    }

    fn fail(&self, conn: ConnectionInfo, mechanism: Mechanism, why: AuthFailure) -> TokenResult {
        // The failure keeps the token its exchange took at its first message.
        self.metrics
            .sasl_authentication(mechanism.label(), "failure");
        tracing::debug!(peer = %conn.peer, %mechanism, reason = %why, "SASL authentication failed");
        TokenResult::Failed(
            mechanism,
            why,
            SaslSession {
                conn,
                state: State::Failed,
            },
        )
    }
}
