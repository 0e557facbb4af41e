//! DescribeUserScramCredentials (API 50, v0; KIP-554): each named user's SCRAM
//! credentials as (mechanism, iterations) — nothing derived from the password — or
//! every user's when none is named ([`crate::auth::kip554::describe`]). In cluster mode
//! it reads the credentials' ZooKeeper node, so an alteration through any broker is
//! described at once. A store that cannot be read answers the top-level error
//! (`REQUEST_TIMED_OUT` while ZooKeeper is unreachable, which clients retry;
//! `UNKNOWN_SERVER_ERROR` otherwise) with the store's message.
//!
//! No authorization yet (issue 23): any client of the listener may list user names.

use kafka_protocol::{
    error::ResponseError,
    messages::{DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse},
    protocol::StrBytes,
};

use crate::{
    auth::store::{CredentialStore, StoreError},
    server::reply::Reply,
};

/// The Kafka error a store failure is answered with.
pub fn store_error_code(e: &StoreError) -> ResponseError {
    match e {
        StoreError::Unavailable(_) => ResponseError::RequestTimedOut,
        _ => ResponseError::UnknownServerError,
    }
}

/// Handles DescribeUserScramCredentials v0. Blocking in cluster mode (a ZooKeeper
/// read): run it on the blocking pool.
///
/// Authorization (Kafka's `KafkaApis.handleDescribeUserScramCredentialsRequest`):
/// Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
pub fn handle(
    store: &CredentialStore,
    authz: &crate::authz::RequestAuthz,
    request: DescribeUserScramCredentialsRequest,
) -> Reply {
    if !authz.allows_cluster(crate::authz::AclOperation::Describe) {
        let e = ResponseError::ClusterAuthorizationFailed;
        let mut response = DescribeUserScramCredentialsResponse::default();
        response.error_code = e.code();
        response.error_message = Some(StrBytes::from_string(e.to_string()));
        return Reply::new(response, e.code());
    }
    match store.describe(&request) {
        Ok(response) => {
            let error = super::errors::first_error(response.results.iter().map(|r| r.error_code));
            Reply::new(response, error)
        }
        Err(e) => {
            crate::warn_limited!("handlers.describe_user_scram_credentials", "{e}");
            let code = store_error_code(&e).code();
            let mut response = DescribeUserScramCredentialsResponse::default();
            response.error_code = code;
            response.error_message = Some(StrBytes::from_string(e.to_string()));
            Reply::new(response, code)
        }
    }
}
