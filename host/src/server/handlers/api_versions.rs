//! ApiVersions: the supported version range of every API in the handler table, and of
//! every Kafka group API the coordinator plugin serves (learnt at startup,
//! [`crate::coordination::CoordinatorClient::probe_kafka_apis`]).

use kafka_protocol::messages::{api_versions_response::ApiVersion, ApiVersionsResponse};

use crate::coordination::CoordinatorClient;
use crate::server::{
    dispatch::{supported_versions, HANDLERS},
    reply::Reply,
};

/// The response listing every served API with its version range, in key order: the
/// handler table's, and the Kafka group APIs `coordinator` serves (none without one).
pub fn response(coordinator: Option<&CoordinatorClient>, _version: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = HANDLERS
        .iter()
        .filter_map(|key| {
            let range = supported_versions(*key)?;
            let mut v = ApiVersion::default();
            v.api_key = *key as i16;
            v.min_version = range.min;
            v.max_version = range.max;
            Some(v)
        })
        .collect();
    if let Some(coordinator) = coordinator {
        for &(key, min, max) in coordinator.kafka_apis() {
            // TxnOffsetCommit is in the handler table too (answered there when the
            // coordinator does not serve it), with the same range.
            if response.api_keys.iter().any(|v| v.api_key == key) {
                continue;
            }
            let mut v = ApiVersion::default();
            v.api_key = key;
            v.min_version = min;
            v.max_version = max;
            response.api_keys.push(v);
        }
    }
    response.api_keys.sort_by_key(|v| v.api_key);
    response
}

/// Handles ApiVersions (any supported version; the request body carries only the
/// client's software name and version).
pub fn handle(coordinator: Option<&CoordinatorClient>, version: i16) -> Reply {
    Reply::new(response(coordinator, version), 0)
}
