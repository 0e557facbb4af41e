//! ApiVersions: the supported version range of every API in the handler table, and of
//! every Kafka group API the coordinator plugin serves (learnt at startup,
//! [`crate::coordination::CoordinatorClient::probe_kafka_apis`]); from v3 the feature
//! flags (KIP-584) Kafka 4.1 reports that Drover has:
//!
//! - `metadata.version`: supported 7–27 (Kafka 4.1's range, 3.3-IV3 to 4.1-IV1),
//!   finalized at 27, so tools that read the finalized `metadata.version` (Kafka's
//!   `describeFeatures`, kafka-python's `describe_features`) see a 4.1 broker;
//! - `group.version`: supported 0–1 and finalized at 1 (KIP-848's consumer protocol)
//!   while the coordinator serves ConsumerGroupHeartbeat, absent otherwise;
//! - `share.version`: supported 0–1 and finalized at 1 (KIP-932's share groups) once
//!   the broker lists both halves of share groups, ShareGroupHeartbeat (the
//!   coordinator's, ABI 3.7) and ShareFetch (the host's), absent otherwise.
//!
//! Kafka 4.1's other features are left out (a feature a broker does not list is at level
//! 0 for clients): `kraft.version` (no KRaft quorum), `transaction.version` (level 2 would
//! make Java producers use KIP-890 part 2, EndTxn v5, which Drover does not serve),
//! `eligible.leader.replicas.version`, `streams.version`. The finalized
//! features' epoch is constant ([`FEATURES_EPOCH`]): they never change while a broker
//! runs. Kafka lists a finalized level as both its min and max.

use kafka_protocol::{
    messages::{
        api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey},
        ApiKey, ApiVersionsResponse,
    },
    protocol::StrBytes,
};

use crate::coordination::CoordinatorClient;
use crate::server::{
    dispatch::{supported_versions, HANDLERS},
    reply::Reply,
};

/// Kafka 4.1's oldest `metadata.version` level (3.3-IV3, `MetadataVersion.MINIMUM_VERSION`).
pub const METADATA_VERSION_MIN: i16 = 7;
/// Kafka 4.1's latest production `metadata.version` level (4.1-IV1), finalized here.
pub const METADATA_VERSION: i16 = 27;
/// `group.version` 1: the consumer rebalance protocol (KIP-848).
pub const GROUP_VERSION: i16 = 1;
/// `share.version` 1: share groups (KIP-932).
pub const SHARE_VERSION: i16 = 1;
/// The finalized features' epoch: Kafka's is the metadata log offset that set them, ≥ 0
/// once known (clients ignore −1). Drover's features are fixed, so a constant, raised
/// with `metadata.version`.
pub const FEATURES_EPOCH: i64 = METADATA_VERSION as i64;

/// The feature flags (name, supported min, supported max, finalized level) of a broker
/// whose ApiVersions lists `api_keys`.
pub fn features(api_keys: &[ApiVersion]) -> Vec<(&'static str, i16, i16, i16)> {
    let mut out = vec![(
        "metadata.version",
        METADATA_VERSION_MIN,
        METADATA_VERSION,
        METADATA_VERSION,
    )];
    if api_keys
        .iter()
        .any(|v| v.api_key == ApiKey::ConsumerGroupHeartbeat as i16)
    {
        out.push(("group.version", 0, GROUP_VERSION, GROUP_VERSION));
    }
    let lists = |key: ApiKey| api_keys.iter().any(|v| v.api_key == key as i16);
    if lists(ApiKey::ShareGroupHeartbeat) && lists(ApiKey::ShareFetch) {
        out.push(("share.version", 0, SHARE_VERSION, SHARE_VERSION));
    }
    out
}

/// The response listing every served API with its version range, in key order: the
/// handler table's, and the Kafka group APIs `coordinator` serves (none without one);
/// from v3 with the feature flags.
pub fn response(coordinator: Option<&CoordinatorClient>, version: i16) -> ApiVersionsResponse {
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
    if version >= 3 {
        for (name, min, max, level) in features(&response.api_keys) {
            let mut supported = SupportedFeatureKey::default();
            supported.name = StrBytes::from_static_str(name);
            supported.min_version = min;
            supported.max_version = max;
            response.supported_features.push(supported);
            let mut finalized = FinalizedFeatureKey::default();
            finalized.name = StrBytes::from_static_str(name);
            finalized.min_version_level = level;
            finalized.max_version_level = level;
            response.finalized_features.push(finalized);
        }
        response.finalized_features_epoch = FEATURES_EPOCH;
    }
    response
}

/// Handles ApiVersions (any supported version; the request body carries only the
/// client's software name and version).
pub fn handle(coordinator: Option<&CoordinatorClient>, version: i16) -> Reply {
    Reply::new(response(coordinator, version), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_reports_a_kafka_41_metadata_version() {
        let response = response(None, 3);
        let names: Vec<&str> = response
            .finalized_features
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        // No coordinator: no KIP-848 groups, no group.version.
        assert_eq!(names, ["metadata.version"]);
        let f = &response.finalized_features[0];
        assert_eq!((f.min_version_level, f.max_version_level), (27, 27));
        let s = &response.supported_features[0];
        assert_eq!((s.min_version, s.max_version), (7, 27));
        assert!(response.finalized_features_epoch >= 0);
        // Before v3 the response has no features.
        let v2 = super::response(None, 2);
        assert!(v2.supported_features.is_empty() && v2.finalized_features.is_empty());
    }

    #[test]
    fn group_version_follows_the_consumer_group_heartbeat() {
        let mut heartbeat = ApiVersion::default();
        heartbeat.api_key = ApiKey::ConsumerGroupHeartbeat as i16;
        let with = features(&[heartbeat]);
        assert!(with.contains(&("group.version", 0, 1, 1)), "{with:?}");
        assert!(features(&[]).iter().all(|f| f.0 != "group.version"));
    }

    #[test]
    fn share_version_needs_both_halves_of_share_groups() {
        let key = |k: ApiKey| {
            let mut v = ApiVersion::default();
            v.api_key = k as i16;
            v
        };
        let share =
            |apis: &[ApiVersion]| features(apis).into_iter().find(|f| f.0 == "share.version");
        assert_eq!(share(&[key(ApiKey::ShareGroupHeartbeat)]), None);
        assert_eq!(share(&[key(ApiKey::ShareFetch)]), None);
        assert_eq!(
            share(&[key(ApiKey::ShareGroupHeartbeat), key(ApiKey::ShareFetch)]),
            Some(("share.version", 0, 1, 1))
        );
    }
}
