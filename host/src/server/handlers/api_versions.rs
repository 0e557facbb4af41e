//! ApiVersions: the supported version range of every API in the handler table.

use kafka_protocol::messages::{api_versions_response::ApiVersion, ApiVersionsResponse};

use crate::server::dispatch::{supported_versions, Reply, HANDLERS};

/// The response listing every served API with its version range.
pub fn response(_version: i16) -> ApiVersionsResponse {
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
    response
}

/// Handles ApiVersions (any supported version; the request body carries only the
/// client's software name and version).
pub fn handle(version: i16) -> Reply {
    Reply::new(response(version), 0)
}
