//! The SASL state machine end to end: handshakes, exchanges, failures, limits and
//! re-authentication, on virtual time.

use std::{
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use base64::{engine::general_purpose::STANDARD, Engine};
use bytes::Bytes;
use kafka_protocol::{
    error::ResponseError,
    messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest},
    protocol::StrBytes,
};

use super::{
    credentials::{CredentialTable, ScramCredential},
    keys,
    mechanism::{Mechanism, ScramMechanism},
    session::*,
    store::CredentialStore,
};
use crate::metrics::Metrics;

struct FixedNonce(&'static str);

impl NonceSource for FixedNonce {
    fn server_nonce(&self) -> Option<String> {
        Some(self.0.to_owned())
    }
}

const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

fn store() -> Arc<CredentialStore> {
    let mut table = CredentialTable::with_secret([7; 32]);
    let m = ScramMechanism::Sha256;
    let salt = STANDARD.decode(RFC_SALT).unwrap();
    let salted = keys::salted_password(m, b"pencil", &salt, 4096);
    table.insert(
        "user",
        m,
        ScramCredential::from_salted_password(m, &salt, &salted, 4096),
    );
    let m = ScramMechanism::Sha512;
    let salted = keys::salted_password(m, b"pencil", &salt, 4096);
    table.insert(
        "user",
        m,
        ScramCredential::from_salted_password(m, &salt, &salted, 4096),
    );
    Arc::new(CredentialStore::in_memory(table, 100))
}

fn settings() -> SaslSettings {
    SaslSettings::from_config(&crate::config::SaslSection {
        mechanisms: vec![
            "SCRAM-SHA-512".into(),
            "SCRAM-SHA-256".into(),
            "PLAIN".into(),
        ],
        connections_max_reauth_ms: 60_000,
        failures_per_minute_per_client: 3,
        ..Default::default()
    })
}

fn server_with(settings: SaslSettings, store: Arc<CredentialStore>) -> (SaslServer, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let server = SaslServer::with_nonces(
        settings,
        store,
        Arc::clone(&metrics),
        Box::new(FixedNonce(RFC_NONCE)),
    );
    (server, metrics)
}

fn server() -> (SaslServer, Arc<Metrics>) {
    server_with(settings(), store())
}

fn conn(last: u8, tls: bool) -> ConnectionInfo {
    ConnectionInfo {
        peer: IpAddr::from([192, 0, 2, last]),
        tls,
    }
}

fn handshake(
    server: &SaslServer,
    session: SaslSession,
    mechanism: &str,
    version: i16,
) -> Step<kafka_protocol::messages::SaslHandshakeResponse> {
    let mut request = SaslHandshakeRequest::default();
    request.mechanism = StrBytes::from_string(mechanism.into());
    server.handshake(session, version, &request)
}

fn token(
    server: &SaslServer,
    session: SaslSession,
    bytes: &[u8],
    now: Instant,
) -> Step<kafka_protocol::messages::SaslAuthenticateResponse> {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = Bytes::copy_from_slice(bytes);
    server.authenticate(session, 2, &request, now)
}

/// The client's final message for a server-first message (RFC 5802 §3).
fn client_final(m: ScramMechanism, password: &[u8], bare: &str, server_first: &[u8]) -> Vec<u8> {
    let server_first = std::str::from_utf8(server_first).unwrap();
    let fields: Vec<&str> = server_first.split(',').collect();
    let nonce = &fields[0][2..];
    let salt = STANDARD.decode(&fields[1][2..]).unwrap();
    let iterations: u32 = fields[2][2..].parse().unwrap();
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{bare},{server_first},{without_proof}");
    let salted = keys::salted_password(m, password, &salt, iterations);
    let proof = keys::client_proof(m, &salted, auth.as_bytes());
    format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes()
}

/// Runs a whole SCRAM exchange; returns the final step.
fn scram(
    server: &SaslServer,
    session: SaslSession,
    m: ScramMechanism,
    user: &str,
    password: &[u8],
    now: Instant,
) -> Step<kafka_protocol::messages::SaslAuthenticateResponse> {
    let step = handshake(server, session, m.name(), 1);
    assert_eq!(step.response.unwrap().error_code, 0);
    let bare = format!("n={user},r=rOprNGfwEbeRWgbNEkqO");
    let step = token(server, step.session, format!("n,,{bare}").as_bytes(), now);
    let first = step.response.unwrap();
    assert_eq!(first.error_code, 0);
    let last = client_final(m, password, &bare, &first.auth_bytes);
    token(server, step.session, &last, now)
}

fn count(metrics: &Metrics, mechanism: &str, outcome: &str) -> u64 {
    let text = metrics.render(&[]);
    let needle = format!(
        "drover_sasl_authentications_total{{mechanism=\"{mechanism}\",outcome=\"{outcome}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[test]
fn rfc7677_through_handshake_and_authenticate() {
    let (server, metrics) = server();
    let now = Instant::now();
    let session = SaslSession::new(conn(1, false));
    assert_eq!(
        session.check_request(ApiKey::ApiVersions as i16, now),
        Admission::Allow
    );
    let step = handshake(&server, session, "SCRAM-SHA-256", 1);
    let answer = step.response.unwrap();
    assert_eq!(answer.error_code, 0);
    // PLAIN is not offered without TLS.
    let offered: Vec<String> = answer.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, vec!["SCRAM-SHA-512", "SCRAM-SHA-256"]);
    let step = token(
        &server,
        step.session,
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        now,
    );
    assert_eq!(
        step.response.unwrap().auth_bytes,
        Bytes::from(format!(
            "r=rOprNGfwEbeRWgbNEkqO{RFC_NONCE},s={RFC_SALT},i=4096"
        ))
    );
    assert!(step.session.principal().is_none());
    let step = token(
        &server,
        step.session,
        format!("c=biws,r=rOprNGfwEbeRWgbNEkqO{RFC_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .as_bytes(),
        now,
    );
    let last = step.response.unwrap();
    assert_eq!(last.error_code, 0);
    assert_eq!(
        last.auth_bytes,
        Bytes::from_static(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    );
    assert_eq!(last.session_lifetime_ms, 60_000);
    assert_eq!(step.next, Next::Continue);
    assert_eq!(step.session.principal(), Some("user"));
    assert_eq!(
        step.session.reauthenticate_by(),
        Some(now + Duration::from_secs(60))
    );
    assert_eq!(count(&metrics, "scram-sha-256", "success"), 1);
}

#[test]
fn before_authentication_only_the_sasl_apis_and_api_versions_pass() {
    let now = Instant::now();
    for key in [
        ApiKey::ApiVersions,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
    ] {
        assert!(allowed_before_auth(key as i16));
    }
    for key in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::AlterUserScramCredentials,
    ] {
        assert!(!allowed_before_auth(key as i16));
        let session = SaslSession::new(conn(1, false));
        assert_eq!(
            session.check_request(key as i16, now),
            Admission::Close("sasl_unauthenticated_request")
        );
    }
    assert!(!allowed_before_auth(20000));
    assert!(!allowed_before_auth(-1));
    // Also mid-exchange.
    let (server, _) = server();
    let step = handshake(
        &server,
        SaslSession::new(conn(1, false)),
        "SCRAM-SHA-512",
        1,
    );
    assert_eq!(
        step.session.check_request(ApiKey::Produce as i16, now),
        Admission::Close("sasl_unauthenticated_request")
    );
}

#[test]
fn wrong_password_and_unknown_user_fail_alike() {
    let (server, metrics) = server();
    let now = Instant::now();
    let m = ScramMechanism::Sha512;
    let wrong = scram(
        &server,
        SaslSession::new(conn(1, false)),
        m,
        "user",
        b"guess",
        now,
    );
    let unknown = scram(
        &server,
        SaslSession::new(conn(2, false)),
        m,
        "nobody",
        b"pencil",
        now,
    );
    for step in [&wrong, &unknown] {
        let answer = step.response.as_ref().unwrap();
        assert_eq!(
            answer.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert!(answer.auth_bytes.is_empty());
        assert_eq!(
            step.next,
            Next::Close {
                delay: Duration::from_millis(100),
                reason: "sasl_authentication_failed"
            }
        );
        assert_eq!(
            step.session.check_request(ApiKey::Metadata as i16, now),
            Admission::Close("sasl_failed")
        );
    }
    assert_eq!(
        wrong.response.as_ref().unwrap().error_message,
        unknown.response.as_ref().unwrap().error_message
    );
    assert_eq!(
        wrong
            .response
            .as_ref()
            .unwrap()
            .error_message
            .as_ref()
            .unwrap()
            .to_string(),
        failure_message(Mechanism::Scram(m))
    );
    // Malformed messages get the same answer.
    let step = handshake(
        &server,
        SaslSession::new(conn(3, false)),
        "SCRAM-SHA-512",
        1,
    );
    let step = token(&server, step.session, b"\xff garbage", now);
    assert_eq!(
        step.response.as_ref().unwrap().error_message,
        wrong.response.as_ref().unwrap().error_message
    );
    assert_eq!(count(&metrics, "scram-sha-512", "failure"), 3);
    // The right password still works from another address.
    let ok = scram(
        &server,
        SaslSession::new(conn(4, false)),
        m,
        "user",
        b"pencil",
        now,
    );
    assert_eq!(ok.response.unwrap().error_code, 0);
}

#[test]
fn unknown_users_see_a_server_first_message_like_known_ones() {
    let (server, _) = server();
    let now = Instant::now();
    let first = |user: &str| {
        let step = handshake(
            &server,
            SaslSession::new(conn(1, false)),
            "SCRAM-SHA-512",
            1,
        );
        let step = token(
            &server,
            step.session,
            format!("n,,n={user},r=abc").as_bytes(),
            now,
        );
        let answer = step.response.unwrap();
        assert_eq!(answer.error_code, 0);
        String::from_utf8(answer.auth_bytes.to_vec()).unwrap()
    };
    let (known, unknown) = (first("user"), first("nobody"));
    let shape = |s: &str| {
        s.split(',')
            .map(|f| (f.len(), f[..2].to_owned()))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&known), shape(&unknown));
    assert_eq!(first("nobody"), unknown);
}

#[test]
fn a_guessing_address_is_rate_limited_and_others_are_not() {
    let (server, metrics) = server();
    let now = Instant::now();
    let m = ScramMechanism::Sha256;
    for _ in 0..3 {
        let step = scram(
            &server,
            SaslSession::new(conn(9, false)),
            m,
            "user",
            b"guess",
            now,
        );
        assert_eq!(
            step.response.unwrap().error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
    }
    // Even the right password is refused now, unchecked, at the first token.
    let step = handshake(&server, SaslSession::new(conn(9, false)), m.name(), 1);
    let step = token(&server, step.session, b"n,,n=user,r=abc", now);
    let answer = step.response.unwrap();
    assert_eq!(
        answer.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(
        answer.error_message.unwrap().to_string(),
        failure_message(Mechanism::Scram(m))
    );
    assert_eq!(count(&metrics, "scram-sha-256", "rate_limited"), 1);
    // 1,000 failures from one address leave another one authenticating.
    for _ in 0..1000 {
        let step = handshake(&server, SaslSession::new(conn(9, false)), m.name(), 1);
        let _ = token(&server, step.session, b"n,,n=user,r=abc", now);
    }
    let ok = scram(
        &server,
        SaslSession::new(conn(10, false)),
        m,
        "user",
        b"pencil",
        now,
    );
    assert_eq!(ok.response.unwrap().error_code, 0);
    // A minute later the guesser may try again.
    let later = now + Duration::from_secs(60);
    let ok = scram(
        &server,
        SaslSession::new(conn(9, false)),
        m,
        "user",
        b"pencil",
        later,
    );
    assert_eq!(ok.response.unwrap().error_code, 0);
}

#[test]
fn concurrent_exchanges_from_one_address_share_its_failure_budget() {
    // Three tokens: five exchanges started at once (each to its server-first message)
    // get three through; the other two are refused unchecked, before any has failed.
    let (server, metrics) = server();
    let now = Instant::now();
    let m = ScramMechanism::Sha256;
    let bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
    let mut open = Vec::new();
    for _ in 0..5 {
        let step = handshake(&server, SaslSession::new(conn(11, false)), m.name(), 1);
        let step = token(&server, step.session, format!("n,,{bare}").as_bytes(), now);
        let answer = step.response.unwrap();
        if answer.error_code == 0 {
            open.push((step.session, answer.auth_bytes));
        }
    }
    assert_eq!(open.len(), 3);
    assert_eq!(count(&metrics, "scram-sha-256", "rate_limited"), 2);
    // One of them succeeds and gives its token back: one new exchange may start.
    let (session, first) = open.pop().unwrap();
    let last = client_final(m, b"pencil", bare, &first);
    assert_eq!(
        token(&server, session, &last, now)
            .response
            .unwrap()
            .error_code,
        0
    );
    let ok = scram(
        &server,
        SaslSession::new(conn(11, false)),
        m,
        "user",
        b"pencil",
        now,
    );
    assert_eq!(ok.response.unwrap().error_code, 0);
    // The other two fail and keep theirs, as does one more wrong guess ...
    for (session, first) in open {
        let last = client_final(m, b"guess", bare, &first);
        assert_eq!(
            token(&server, session, &last, now)
                .response
                .unwrap()
                .error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
    }
    let guess = scram(
        &server,
        SaslSession::new(conn(11, false)),
        m,
        "user",
        b"guess",
        now,
    );
    assert_eq!(
        guess.response.unwrap().error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(count(&metrics, "scram-sha-256", "failure"), 3);
    // ... so the bucket is empty: refused unchecked, even with the right password.
    let step = handshake(&server, SaslSession::new(conn(11, false)), m.name(), 1);
    let step = token(&server, step.session, format!("n,,{bare}").as_bytes(), now);
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(count(&metrics, "scram-sha-256", "rate_limited"), 3);
}

#[test]
fn plain_is_checked_against_the_scram_credential_and_needs_tls() {
    let (server, metrics) = server();
    let now = Instant::now();
    let step = handshake(&server, SaslSession::new(conn(1, false)), "PLAIN", 1);
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
    assert!(matches!(
        step.next,
        Next::Close {
            reason: "sasl_unsupported_mechanism",
            ..
        }
    ));
    let step = handshake(&server, SaslSession::new(conn(1, true)), "PLAIN", 1);
    let offered: Vec<String> = step
        .response
        .unwrap()
        .mechanisms
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert!(offered.contains(&"PLAIN".to_owned()));
    assert_eq!(step.session.mechanism(), Some(Mechanism::Plain));
    let ok = token(&server, step.session, b"\0user\0pencil", now);
    assert_eq!(ok.response.unwrap().error_code, 0);
    assert_eq!(ok.session.principal(), Some("user"));
    for wrong in [&b"\0user\0nope"[..], b"\0nobody\0pencil", b"junk"] {
        let step = handshake(&server, SaslSession::new(conn(2, true)), "PLAIN", 1);
        let failed = token(&server, step.session, wrong, now);
        assert_eq!(
            failed.response.unwrap().error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
    }
    assert_eq!(count(&metrics, "plain", "failure"), 3);
    // plain_on_plaintext offers it without TLS.
    let mut s = settings();
    s.plain_on_plaintext = true;
    let (server, _) = server_with(s, store());
    let step = handshake(&server, SaslSession::new(conn(1, false)), "PLAIN", 1);
    assert_eq!(step.response.unwrap().error_code, 0);
}

#[test]
fn out_of_order_requests_are_illegal_state() {
    let (server, _) = server();
    let now = Instant::now();
    let step = token(
        &server,
        SaslSession::new(conn(1, false)),
        b"n,,n=user,r=abc",
        now,
    );
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::IllegalSaslState.code()
    );
    assert!(matches!(
        step.next,
        Next::Close {
            reason: "sasl_illegal_state",
            ..
        }
    ));
    let step = handshake(
        &server,
        SaslSession::new(conn(1, false)),
        "SCRAM-SHA-256",
        1,
    );
    let step = handshake(&server, step.session, "SCRAM-SHA-256", 1);
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::IllegalSaslState.code()
    );
    let step = handshake(&server, SaslSession::new(conn(1, false)), "GSSAPI", 1);
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
}

#[test]
fn sessions_expire_and_re_authenticate_as_the_same_user() {
    let (server, _) = server();
    let t0 = Instant::now();
    let m = ScramMechanism::Sha512;
    let step = scram(
        &server,
        SaslSession::new(conn(1, false)),
        m,
        "user",
        b"pencil",
        t0,
    );
    let session = step.session;
    let t1 = t0 + Duration::from_secs(61);
    assert!(!session.must_reauthenticate(t0));
    assert!(session.must_reauthenticate(t1));
    assert_eq!(
        session.check_request(ApiKey::Produce as i16, t0),
        Admission::Allow
    );
    assert_eq!(
        session.check_request(ApiKey::Produce as i16, t1),
        Admission::Close("sasl_session_expired")
    );
    assert_eq!(
        session.check_request(ApiKey::SaslHandshake as i16, t1),
        Admission::Allow
    );
    // Re-authenticate (KIP-368): handshake v1, same mechanism, same user.
    let again = scram(&server, session, m, "user", b"pencil", t1);
    assert_eq!(again.response.unwrap().error_code, 0);
    assert_eq!(
        again.session.reauthenticate_by(),
        Some(t1 + Duration::from_secs(60))
    );
    assert_eq!(
        again.session.check_request(ApiKey::Produce as i16, t1),
        Admission::Allow
    );
    // Another mechanism is refused; so is a request while re-authenticating.
    let step = handshake(&server, again.session, "SCRAM-SHA-256", 1);
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
    let session = scram(
        &server,
        SaslSession::new(conn(1, false)),
        m,
        "user",
        b"pencil",
        t0,
    )
    .session;
    let step = handshake(&server, session, m.name(), 1);
    assert_eq!(
        step.session.check_request(ApiKey::Fetch as i16, t0),
        Admission::Close("sasl_reauthentication_interrupted")
    );
    // Another user is refused.
    let mut table = CredentialTable::with_secret([7; 32]);
    for user in ["user", "other"] {
        let salted = keys::salted_password(m, b"pw", b"salt", 4096);
        table.insert(
            user,
            m,
            ScramCredential::from_salted_password(m, b"salt", &salted, 4096),
        );
    }
    let (server, _) = server_with(settings(), Arc::new(CredentialStore::in_memory(table, 10)));
    let session = scram(
        &server,
        SaslSession::new(conn(1, false)),
        m,
        "user",
        b"pw",
        t0,
    )
    .session;
    let step = scram(&server, session, m, "other", b"pw", t0);
    assert_eq!(
        step.response.unwrap().error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
}

#[test]
fn without_a_lifetime_sessions_do_not_expire_and_v0_answers_have_none() {
    let mut s = settings();
    s.session_lifetime = None;
    let (server, _) = server_with(s, store());
    let now = Instant::now();
    let step = scram(
        &server,
        SaslSession::new(conn(1, false)),
        ScramMechanism::Sha256,
        "user",
        b"pencil",
        now,
    );
    assert_eq!(step.response.unwrap().session_lifetime_ms, 0);
    assert!(!step
        .session
        .must_reauthenticate(now + Duration::from_secs(86_400 * 365)));
}

#[test]
fn raw_tokens_after_a_v0_handshake() {
    let (server, _) = server();
    let now = Instant::now();
    let m = ScramMechanism::Sha256;
    let step = handshake(&server, SaslSession::new(conn(1, false)), m.name(), 0);
    assert!(step.session.expects_raw_token());
    // A SaslAuthenticate request is out of place now.
    let bare = "n=user,r=abc";
    let first = server.raw_token(step.session, format!("n,,{bare}").as_bytes(), now);
    let server_first = first.response.unwrap();
    assert!(first.session.expects_raw_token());
    let last = server.raw_token(
        first.session,
        &client_final(m, b"pencil", bare, &server_first),
        now,
    );
    assert!(last.response.unwrap().starts_with(b"v="));
    assert!(!last.session.expects_raw_token());
    assert_eq!(last.session.principal(), Some("user"));
    // A failure sends nothing.
    let step = handshake(&server, SaslSession::new(conn(1, false)), m.name(), 0);
    let failed = server.raw_token(step.session, b"junk", now);
    assert!(failed.response.is_none());
    assert!(matches!(
        failed.next,
        Next::Close {
            reason: "sasl_authentication_failed",
            ..
        }
    ));
}

#[test]
fn before_the_credentials_are_loaded_the_client_is_disconnected_to_retry() {
    let store = Arc::new(CredentialStore::not_loaded(CredentialTable::with_secret(
        [0; 32],
    )));
    let (server, _) = server_with(settings(), Arc::clone(&store));
    let step = handshake(
        &server,
        SaslSession::new(conn(1, false)),
        "SCRAM-SHA-256",
        1,
    );
    assert!(step.response.is_none());
    assert!(matches!(
        step.next,
        Next::Close {
            reason: "sasl_credentials_not_loaded",
            ..
        }
    ));
    store.install(CredentialTable::with_secret([0; 32]), 0);
    let step = handshake(
        &server,
        SaslSession::new(conn(1, false)),
        "SCRAM-SHA-256",
        1,
    );
    assert_eq!(step.next, Next::Continue);
}

#[test]
fn a_channel_is_renewed_while_its_credential_is_unchanged() {
    let store = store();
    let (server, metrics) = server_with(settings(), Arc::clone(&store));
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_secs(61);
    let m = ScramMechanism::Sha512;
    let mut scram_session = scram(
        &server,
        SaslSession::new(conn(1, false)),
        m,
        "user",
        b"pencil",
        t0,
    )
    .session;
    let step = handshake(&server, SaslSession::new(conn(2, true)), "PLAIN", 1);
    let mut plain_session = token(&server, step.session, b"\0user\0pencil", t0).session;
    assert!(plain_session.principal().is_some());
    for session in [&mut scram_session, &mut plain_session] {
        assert!(session.must_reauthenticate(t1));
        assert!(server.renew_channel(session, t1));
        assert_eq!(
            session.reauthenticate_by(),
            Some(t1 + Duration::from_secs(60))
        );
    }
    assert_eq!(count(&metrics, "scram-sha-512", "channel_renewed"), 1);
    assert_eq!(count(&metrics, "plain", "channel_renewed"), 1);
    // The user's SCRAM-SHA-512 credential changes (a new password): neither renews.
    let mut table = store.snapshot().table().clone();
    let salted = keys::salted_password(m, b"new", b"salt", 4096);
    table.insert(
        "user",
        m,
        ScramCredential::from_salted_password(m, b"salt", &salted, 4096),
    );
    store.install(table.clone(), 1);
    let t2 = t1 + Duration::from_secs(61);
    for session in [&mut scram_session, &mut plain_session] {
        assert!(!server.renew_channel(session, t2));
        assert!(session.must_reauthenticate(t2));
    }
    // A deleted credential neither; nor a session that never authenticated.
    table.remove("user", m);
    store.install(table, 2);
    assert!(!server.renew_channel(&mut scram_session, t2));
    assert!(!server.renew_channel(&mut SaslSession::new(conn(3, false)), t2));
}
