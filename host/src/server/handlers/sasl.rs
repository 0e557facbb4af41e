//! SaslHandshake (17) and SaslAuthenticate (36) as the dispatcher sees them: only on a
//! listener without SASL (PLAINTEXT, SSL), since a SASL listener's connection answers
//! them itself (server/sasl.rs). As Kafka's `KafkaApis` does, both are answered
//! `ILLEGAL_SASL_STATE`: there is nothing to authenticate here.

use kafka_protocol::{
    error::ResponseError,
    messages::{SaslAuthenticateResponse, SaslHandshakeResponse},
    protocol::StrBytes,
};

use crate::server::reply::Reply;

/// SaslHandshake on a listener without SASL.
pub fn handshake() -> Reply {
    let mut response = SaslHandshakeResponse::default();
    response.error_code = ResponseError::IllegalSaslState.code();
    Reply::new(response, response_code())
}

/// SaslAuthenticate on a listener without SASL.
pub fn authenticate() -> Reply {
    let mut response = SaslAuthenticateResponse::default();
    response.error_code = ResponseError::IllegalSaslState.code();
    response.error_message = Some(StrBytes::from_static_str(
        "SaslAuthenticate request received on a listener without SASL",
    ));
    Reply::new(response, response_code())
}

fn response_code() -> i16 {
    ResponseError::IllegalSaslState.code()
}
