//! FindCoordinator: in standalone mode every group's coordinator is this broker, when
//! it runs a coordinator plugin; in cluster mode it is the broker owning the group's
//! coordinator slot (`coordinator_slot(group, zookeeper.slots)`), or
//! COORDINATOR_NOT_AVAILABLE while the slot has no owner. Without one, group keys get `COORDINATOR_NOT_AVAILABLE`
//! (docs/protocol.md §4), so clients back off instead of sending group requests that
//! nobody can answer. Transaction keys (key type 1): this broker standalone; in cluster
//! mode the owner of the transactional id's slot, placed as groups are (the
//! transaction coordinator, [`crate::txn`], serves the ids of the slots its broker
//! owns), or `COORDINATOR_NOT_AVAILABLE` while it has none; an empty or too long
//! transactional id is `INVALID_REQUEST`.
//! Share-group coordinators are not offered (`COORDINATOR_NOT_AVAILABLE`).
//! The coordinator is named by its address on the listener the request came in on; an
//! owner without that listener is `COORDINATOR_NOT_AVAILABLE`, as in Kafka.

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        find_coordinator_response::Coordinator, BrokerId, FindCoordinatorRequest,
        FindCoordinatorResponse,
    },
    protocol::StrBytes,
};

use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::Broker,
    config::listeners::ListenerName,
    server::reply::Reply,
};

/// Authorization (Kafka's `KafkaApis.handleFindCoordinatorRequest`): Describe on the
/// group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key.
fn refused(authz: &RequestAuthz, key_type: i8, key: &str) -> Option<ResponseError> {
    match key_type {
        GROUP if !authz.allows(ResourceType::Group, key, AclOperation::Describe) => {
            Some(ResponseError::GroupAuthorizationFailed)
        }
        TRANSACTION
            if !authz.allows(ResourceType::TransactionalId, key, AclOperation::Describe) =>
        {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        }
        _ => None,
    }
}

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// The owner of `key`'s coordinator slot at its address on `listener`, or
/// COORDINATOR_NOT_AVAILABLE while it has none (or not that listener): (error code,
/// broker id, host, port).
fn owner(
    cluster: &crate::cluster::Cluster,
    listener: &ListenerName,
    key: &str,
) -> (i16, i32, StrBytes, i32) {
    match cluster
        .coordinator_of(key)
        .and_then(|(id, addr)| Some((id, addr.endpoint(listener)?)))
    {
        Some((id, at)) => (0, id, StrBytes::from_string(at.host), at.port),
        None => (
            ResponseError::CoordinatorNotAvailable.code(),
            -1,
            StrBytes::default(),
            -1,
        ),
    }
}

/// Handles FindCoordinator v0–v6 (v4+ batches keys) that came in on `listener`.
pub fn handle(
    broker: &Arc<Broker>,
    authz: &RequestAuthz,
    listener: &ListenerName,
    version: i16,
    request: FindCoordinatorRequest,
) -> Reply {
    let node = &broker.identity.node;
    // The request came in on `listener`, so this broker has it.
    let here = node.endpoint(listener).unwrap_or(crate::cluster::Endpoint {
        host: node.host.clone(),
        port: node.port,
    });
    let groups_served = broker.coordinator().is_some();
    let unavailable = || {
        (
            ResponseError::CoordinatorNotAvailable.code(),
            -1,
            StrBytes::default(),
            -1,
        )
    };
    // Standalone: this broker; cluster mode: the owner of the key's slot (groups and
    // transactional ids share the slot table), if it has one now.
    let here_or_owner = |key: &str| match broker.cluster() {
        None => (
            0,
            node.id,
            StrBytes::from_string(here.host.clone()),
            here.port,
        ),
        Some(cluster) => owner(cluster, listener, key),
    };
    let answer = |key_type: i8, key: &str| -> (i16, i32, StrBytes, i32) {
        if let Some(error) = refused(authz, key_type, key) {
            return (error.code(), -1, StrBytes::default(), -1);
        }
        match key_type {
            TRANSACTION => {
                if crate::txn::TransactionalId::new(key).is_none() {
                    (
                        ResponseError::InvalidRequest.code(),
                        -1,
                        StrBytes::default(),
                        -1,
                    )
                } else {
                    here_or_owner(key)
                }
            }
            GROUP if groups_served => here_or_owner(key),
            _ => unavailable(),
        }
    };
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let (error, id, host, port) = answer(request.key_type, key.as_str());
                let mut c = Coordinator::default();
                c.key = key;
                c.node_id = BrokerId(id);
                c.host = host;
                c.port = port;
                c.error_code = error;
                c
            })
            .collect();
        let error = super::errors::first_error(response.coordinators.iter().map(|c| c.error_code));
        Reply::new(response, error)
    } else {
        let (error, id, host, port) = answer(request.key_type, request.key.as_str());
        response.error_code = error;
        response.node_id = BrokerId(id);
        response.host = host;
        response.port = port;
        Reply::new(response, error)
    }
}
