//! DescribeClientQuotas (API 48, v0–v1; KIP-546): Drover has no client quotas, so a
//! valid filter matches nothing and the answer is an empty list. The filter is checked
//! as Kafka 4.1's `ClientQuotasImage.describe` checks it, with its messages:
//!
//! - an empty entity type, or one named twice: `INVALID_REQUEST`;
//! - an entity type other than `user`, `client-id` and `ip`: `UNSUPPORTED_VERSION`;
//! - match type 0 (exact) needs a match string, 1 (default) and 2 (any specified name)
//!   must not have one, any other match type: `INVALID_REQUEST`;
//! - `ip` together with `user` or `client-id`: `INVALID_REQUEST`.
//!
//! An error is the response's error code and message, with null entries. The number of
//! components needs no bound of its own: a valid filter has at most three (each entity
//! type once), and the check stops at the first invalid component.

use crate::authz::{AclOperation, RequestAuthz};
use std::collections::BTreeSet;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_client_quotas_request::ComponentData, DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    },
    protocol::StrBytes,
};

use crate::server::reply::Reply;

/// The entity types Kafka knows (`ClientQuotaEntity`).
const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

/// Match types (`DescribeClientQuotasRequest.MATCH_TYPE_*`).
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Handles DescribeClientQuotas v0–v1.
pub fn handle(authz: &RequestAuthz, request: DescribeClientQuotasRequest) -> Reply {
    let mut response = DescribeClientQuotasResponse::default();
    // Kafka: DescribeConfigs on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    let checked = if authz.allows_cluster(AclOperation::DescribeConfigs) {
        check_filter(&request.components)
    } else {
        Err((
            ResponseError::ClusterAuthorizationFailed,
            "not authorized to describe client quotas".to_owned(),
        ))
    };
    match checked {
        Ok(()) => {
            response.error_message = None;
            response.entries = Some(Vec::new());
        }
        Err((error, message)) => {
            response.error_code = error.code();
            response.error_message = Some(StrBytes::from_string(message));
            response.entries = None;
        }
    }
    let error = response.error_code;
    Reply::new(response, error)
}

/// Kafka's checks of a quota filter; the error and its message for the first broken
/// rule.
fn check_filter(components: &[ComponentData]) -> Result<(), (ResponseError, String)> {
    let invalid = |message: String| Err((ResponseError::InvalidRequest, message));
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for c in components {
        let entity = c.entity_type.as_str();
        if entity.is_empty() {
            return invalid("Invalid empty entity type.".to_owned());
        }
        if !seen.insert(entity) {
            return invalid(format!(
                "Entity type {entity} cannot appear more than once in the filter."
            ));
        }
        if ![IP, USER, CLIENT_ID].contains(&entity) {
            return Err((
                ResponseError::UnsupportedVersion,
                format!("Unsupported entity type {entity}"),
            ));
        }
        match (c.match_type, &c._match) {
            (MATCH_EXACT, None) => {
                return invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".to_owned(),
                )
            }
            (MATCH_DEFAULT, Some(_)) => {
                return invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .to_owned(),
                )
            }
            (MATCH_SPECIFIED, Some(_)) => {
                return invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match \
                     string."
                        .to_owned(),
                )
            }
            (MATCH_EXACT | MATCH_DEFAULT | MATCH_SPECIFIED, _) => {}
            (other, _) => return invalid(format!("Unknown match type {other}")),
        }
    }
    if seen.contains(IP) && (seen.contains(USER) || seen.contains(CLIENT_ID)) {
        return invalid(
            "Invalid entity filter component combination. IP filter component should not \
             be used with user or clientId filter component."
                .to_owned(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn component(entity: &str, match_type: i8, name: Option<&str>) -> ComponentData {
        let mut c = ComponentData::default();
        c.entity_type = StrBytes::from_string(entity.to_owned());
        c.match_type = match_type;
        c._match = name.map(|n| StrBytes::from_string(n.to_owned()));
        c
    }

    fn code(components: &[ComponentData]) -> i16 {
        check_filter(components).map_or_else(|(e, _)| e.code(), |()| 0)
    }

    #[test]
    fn valid_filters_match_nothing() {
        for components in [
            vec![],
            vec![component(USER, MATCH_EXACT, Some("alice"))],
            vec![
                component(USER, MATCH_DEFAULT, None),
                component(CLIENT_ID, MATCH_SPECIFIED, None),
            ],
            vec![component(IP, MATCH_SPECIFIED, None)],
        ] {
            assert_eq!(code(&components), 0, "{components:?}");
        }
        let mut request = DescribeClientQuotasRequest::default();
        request.components = vec![component(USER, MATCH_SPECIFIED, None)];
        let reply = handle(&RequestAuthz::allow_all(), request.clone());
        assert_eq!(reply.error, 0);
        // Without DescribeConfigs on the cluster (`kafka-cluster` is not an `ok` name).
        let denied = handle(&crate::authz::tests::ok_prefix_checks(), request);
        assert_eq!(
            denied.error,
            ResponseError::ClusterAuthorizationFailed.code()
        );
    }

    #[test]
    fn invalid_filters_are_refused_as_kafka_refuses_them() {
        let invalid = ResponseError::InvalidRequest.code();
        let unsupported = ResponseError::UnsupportedVersion.code();
        for (components, expected) in [
            (vec![component("", MATCH_SPECIFIED, None)], invalid),
            (
                vec![
                    component(USER, MATCH_SPECIFIED, None),
                    component(USER, MATCH_DEFAULT, None),
                ],
                invalid,
            ),
            (vec![component("group", MATCH_SPECIFIED, None)], unsupported),
            (vec![component(USER, MATCH_EXACT, None)], invalid),
            (vec![component(USER, MATCH_DEFAULT, Some("a"))], invalid),
            (vec![component(USER, MATCH_SPECIFIED, Some("a"))], invalid),
            (vec![component(USER, 3, None)], invalid),
            (
                vec![
                    component(IP, MATCH_SPECIFIED, None),
                    component(CLIENT_ID, MATCH_SPECIFIED, None),
                ],
                invalid,
            ),
        ] {
            assert_eq!(code(&components), expected, "{components:?}");
        }
        let mut request = DescribeClientQuotasRequest::default();
        request.components = vec![component("", MATCH_SPECIFIED, None)];
        assert_eq!(handle(&RequestAuthz::allow_all(), request).error, invalid);
    }

    proptest! {
        /// Whatever the filter, the answer is an empty list or an error with a message
        /// and no entries; more than three components are always refused.
        #[test]
        fn any_filter_is_answered(
            components in prop::collection::vec(
                (
                    prop::sample::select(vec!["", USER, CLIENT_ID, IP, "x"]),
                    -1i8..4,
                    prop::option::of("[a-z]{0,3}"),
                ),
                0..6,
            ),
        ) {
            let components: Vec<ComponentData> = components
                .iter()
                .map(|(e, m, n)| component(e, *m, n.as_deref()))
                .collect();
            let result = check_filter(&components);
            if components.len() > 3 {
                prop_assert!(result.is_err());
            }
            if let Err((e, message)) = result {
                prop_assert!(e == ResponseError::InvalidRequest || e == ResponseError::UnsupportedVersion);
                prop_assert!(!message.is_empty());
            }
        }
    }
}
