//! From a frame to a response frame: request header, version checks against the
//! handler table, body decoding (those three in the `drover-kafka-wire` crate,
//! re-exported here), the handler, response encoding.
//!
//! Kafka's rules for what cannot be answered (Kafka protocol guide; Kafka's
//! `SocketServer`/`KafkaApis`): an unknown API key, an unsupported version (except
//! ApiVersions) or an undecodable body closes the connection; ApiVersions with an
//! unsupported version is answered in v0 with `UNSUPPORTED_VERSION` and the supported
//! ranges, so the client can retry with a version the broker knows (KIP-511).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::{
    error::ResponseError,
    messages::{ApiKey, ResponseHeader, ResponseKind},
    protocol::Encodable,
};

pub use super::api_name::api_name;
use super::{
    budget::ConnBudget,
    handlers,
    reply::{Charged, Handled, Outcome, Reply},
};
use crate::broker::Broker;

// Decoding against the served-version table, in a crate of its own (the fuzz targets
// build against it without the broker).
pub use drover_kafka_wire::{decode_request, supported_versions, Rejection, Request, HANDLERS};

/// What the connection does with one frame.
pub enum Step {
    /// Respond, stay silent or close, now.
    Now(Charged),
    /// The outcome comes when this future completes; later frames may be handled
    /// meanwhile, responses keep their order.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Charged> + Send>>),
}

/// Handles one request frame from the client at address `peer`, on the connection
/// `ctx` describes: decoding and the handler's ordered part happen now; a deferred
/// wait is returned as [`Step::Later`]. Every response is charged to `budget` by its
/// encoded size until it has been written.
pub async fn handle_frame(
    broker: &Arc<Broker>,
    budget: &Arc<ConnBudget>,
    peer: std::net::IpAddr,
    ctx: &super::context::ConnContext,
    frame: Bytes,
) -> Step {
    let (key, request) = match decode_request(frame) {
        Ok(decoded) => decoded,
        Err(Rejection::Close(reason, detail)) => {
            return Step::Now(Charged::free(Outcome::Close(reason, detail)))
        }
        Err(Rejection::ApiVersionsUnsupported(correlation_id)) => {
            return Step::Now(Charged::free(unsupported_api_versions(
                broker,
                correlation_id,
            )))
        }
    };
    let (version, correlation_id) = (request.version, request.header.correlation_id);
    // The request's authorization checks (nothing is built without an authorizer).
    let authz = broker.identity.authz.request(api_name(key), || {
        ctx.authz_context(
            peer,
            &crate::authz::context::RequestHead {
                client_id: request.header.client_id.as_deref(),
                api_key: key as i16,
                api_version: version,
                correlation_id,
            },
        )
    });
    let finish = {
        let broker = Arc::clone(broker);
        let budget = Arc::clone(budget);
        move |reply: Reply| -> Charged {
            broker.metrics.request(api_name(key), reply.error);
            let Some(response) = reply.response else {
                return Charged::free(Outcome::Silent);
            };
            let encoded = encode_response(key, version, correlation_id, &response);
            // The records a Fetch holds are dropped with the message, once encoded.
            drop(response);
            match encoded {
                Ok(bytes) => {
                    let mut charge = reply.charge.unwrap_or_else(|| budget.charge(0));
                    charge.resize(bytes.len());
                    Charged {
                        outcome: Outcome::Respond(bytes),
                        charge: Some(charge),
                    }
                }
                Err(e) => Charged::free(Outcome::Close(
                    "encode_error",
                    format!("{key:?} v{version}: {e}"),
                )),
            }
        }
    };
    match handlers::handle(broker, budget, peer, ctx, &authz, request).await {
        Handled::Ready(reply) => Step::Now(finish(*reply)),
        Handled::Deferred(wait) => Step::Later(Box::pin(async move { finish(wait.await) })),
    }
}

/// Encodes a response header and body for `key` at `version`.
pub fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Bytes, EncodeError> {
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let header_version = key.response_header_version(version);
    // Sized up front: a large Fetch response is built in one allocation of the right
    // size, not by doubling (which copies it and leaves up to twice its size behind).
    let size = match response {
        ResponseKind::Fetch(fetch) => header
            .compute_size(header_version)
            .and_then(|h| Ok(h + fetch.compute_size(version)?))
            .unwrap_or(0),
        _ => 0,
    };
    let mut out = BytesMut::with_capacity(size);
    header
        .encode(&mut out, header_version)
        .map_err(|e| EncodeError(e.to_string()))?;
    response
        .encode(&mut out, version)
        .map_err(|e| EncodeError(e.to_string()))?;
    Ok(out.freeze())
}

/// ApiVersions with a version this broker does not know: answer in v0 with
/// `UNSUPPORTED_VERSION` and the supported ranges (KIP-511).
fn unsupported_api_versions(broker: &Arc<Broker>, correlation_id: i32) -> Outcome {
    let mut response = handlers::api_versions::response(broker.coordinator(), 0);
    response.error_code = ResponseError::UnsupportedVersion.code();
    broker.metrics.request("ApiVersions", response.error_code);
    match encode_response(ApiKey::ApiVersions, 0, correlation_id, &response.into()) {
        Ok(bytes) => Outcome::Respond(bytes),
        Err(e) => Outcome::Close("encode_error", e.to_string()),
    }
}

/// A response that `kafka-protocol` could not encode (a field set that the version
/// lacks); the connection is closed.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode response: {0}")]
pub struct EncodeError(String);
