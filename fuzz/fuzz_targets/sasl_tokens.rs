//! Fuzzes the SASL server (`drover_host::auth`) with arbitrary tokens: the SCRAM
//! client-first and client-final parsers, the PLAIN parser, the credential document
//! decoder, and whole SCRAM exchanges through the SaslHandshake/SaslAuthenticate state
//! machine against a store holding one user. No panic; every step answers; a failure
//! is SASL_AUTHENTICATION_FAILED with the one failure message, never another text; no
//! made-up client is authenticated.
//!
//! Input layout: one byte choosing the mechanism, two bytes of length, the first token,
//! then the rest as the second token.
#![no_main]

use std::{
    net::IpAddr,
    sync::{Arc, OnceLock},
    time::Instant,
};

use bytes::Bytes;
use drover_host::{
    auth::{
        credentials::{CredentialTable, ScramCredential},
        keys,
        mechanism::{Mechanism, ScramMechanism},
        plain::PlainMessage,
        scram_messages::{ClientFinal, ClientFirst},
        session::{failure_message, ConnectionInfo, SaslServer, SaslSession, SaslSettings},
        store::CredentialStore,
    },
    config::SaslSection,
    metrics::Metrics,
};
use kafka_protocol::{
    messages::{SaslAuthenticateRequest, SaslHandshakeRequest},
    protocol::StrBytes,
};
use libfuzzer_sys::fuzz_target;

fn server() -> SaslServer {
    let mut table = CredentialTable::with_secret([3; 32]);
    for m in ScramMechanism::ALL {
        // The fewest iterations, so exchanges stay fast.
        let salted = keys::salted_password(m, b"pw", b"salt", 4096);
        table.insert(
            "user",
            m,
            ScramCredential::from_salted_password(m, b"salt", &salted, 4096),
        );
    }
    let settings = SaslSettings::from_config(&SaslSection {
        failures_per_minute_per_client: u32::MAX,
        ..SaslSection::default()
    });
    SaslServer::new(
        settings,
        Arc::new(CredentialStore::in_memory(table, 10)),
        Arc::new(Metrics::new()),
    )
}

fuzz_target!(|data: &[u8]| {
    let _ = ClientFirst::parse(data);
    let _ = ClientFinal::parse(data);
    let _ = PlainMessage::parse(data);
    let _ = CredentialTable::decode(data);
    if data.len() < 3 {
        return;
    }
    let mechanism = if data[0] & 1 == 0 {
        ScramMechanism::Sha256
    } else {
        ScramMechanism::Sha512
    };
    let len = usize::from(u16::from_be_bytes([data[1], data[2]])).min(data.len() - 3);
    let (first, second) = data[3..].split_at(len);
    static SERVER: OnceLock<SaslServer> = OnceLock::new();
    let server = SERVER.get_or_init(server);
    let now = Instant::now();
    let session = SaslSession::new(ConnectionInfo {
        peer: IpAddr::from([10, 0, 0, 1]),
        tls: false,
    });
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(mechanism.name());
    let step = server.handshake(session, 1, &handshake);
    assert_eq!(step.response.expect("answered").error_code, 0);
    let mut session = step.session;
    for token in [first, second] {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = Bytes::copy_from_slice(token);
        let step = server.authenticate(session, 2, &request, now);
        let response = step.response.expect("answered");
        if response.error_code != 0 {
            assert_eq!(response.error_code, 58);
            assert_eq!(
                response.error_message.as_deref(),
                Some(failure_message(Mechanism::Scram(mechanism)).as_str())
            );
            return;
        }
        session = step.session;
    }
    // Passing both steps needs the user's proof, which the fuzzer cannot make.
    assert!(
        session.principal().is_none(),
        "authenticated a made-up client"
    );
});
