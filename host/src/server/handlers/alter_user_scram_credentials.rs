//! AlterUserScramCredentials (API 51, v0; KIP-554): upsertions carry a salt, an
//! iteration count and the *salted* password (the client ran PBKDF2; the password never
//! reaches the broker), from which the broker keeps the StoredKey and ServerKey;
//! deletions name a user and mechanism ([`crate::auth::kip554::alter`] has the rules
//! and error codes). Answered once the change is durable: fsynced in the data
//! directory, or written to ZooKeeper, whose watch carries it to every broker. A store
//! that cannot be written answers every named user with the store's error
//! (`REQUEST_TIMED_OUT` while ZooKeeper is unreachable; `UNKNOWN_SERVER_ERROR`).
//!
//! No authorization yet (issue 23): any client of the listener may change credentials.

use kafka_protocol::{
    messages::{
        alter_user_scram_credentials_response::AlterUserScramCredentialsResult,
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    },
    protocol::StrBytes,
};

use super::describe_user_scram_credentials::store_error_code;
use crate::{auth::store::CredentialStore, server::reply::Reply};

/// Handles AlterUserScramCredentials v0. Blocking (an fsync or ZooKeeper round trips):
/// run it on the blocking pool.
///
/// Authorization (Kafka's `KafkaApis.handleAlterUserScramCredentialsRequest`): Alter on
/// the cluster, else every user CLUSTER_AUTHORIZATION_FAILED.
pub fn handle(
    store: &CredentialStore,
    authz: &crate::authz::RequestAuthz,
    request: AlterUserScramCredentialsRequest,
) -> Reply {
    if !authz.allows_cluster(crate::authz::AclOperation::Alter) {
        let e = kafka_protocol::error::ResponseError::ClusterAuthorizationFailed;
        return every_user(&request, e.code(), &e.to_string());
    }
    match store.alter(&request) {
        Ok(response) => {
            let error = super::errors::first_error(response.results.iter().map(|r| r.error_code));
            Reply::new(response, error)
        }
        Err(e) => {
            crate::warn_limited!("handlers.alter_user_scram_credentials", "{e}");
            let code = store_error_code(&e).code();
            every_user(&request, code, &e.to_string())
        }
    }
}

/// Every user the request names, once, answered `code` with `message`.
fn every_user(request: &AlterUserScramCredentialsRequest, code: i16, message: &str) -> Reply {
    {
        {
            let mut users: Vec<&StrBytes> = Vec::new();
            for name in request
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(request.upsertions.iter().map(|u| &u.name))
            {
                if !users.contains(&name) {
                    users.push(name);
                }
            }
            let mut response = AlterUserScramCredentialsResponse::default();
            response.results = users
                .into_iter()
                .map(|user| {
                    let mut result = AlterUserScramCredentialsResult::default();
                    result.user = user.clone();
                    result.error_code = code;
                    result.error_message = Some(StrBytes::from_string(message.to_owned()));
                    result
                })
                .collect();
            Reply::new(response, code)
        }
    }
}
