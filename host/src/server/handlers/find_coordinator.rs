//! FindCoordinator: in standalone mode every group's coordinator is this broker, when
//! it runs a coordinator plugin. Without one, group keys get `COORDINATOR_NOT_AVAILABLE`
//! (docs/protocol.md §4), so clients back off instead of sending group requests that
//! nobody can answer. Transaction and share-group coordinators are not offered
//! (`COORDINATOR_NOT_AVAILABLE`), since this broker serves neither.

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        find_coordinator_response::Coordinator, BrokerId, FindCoordinatorRequest,
        FindCoordinatorResponse,
    },
    protocol::StrBytes,
};

use crate::{broker::Broker, server::dispatch::Reply};

const GROUP: i8 = 0;

/// Handles FindCoordinator v0–v6 (v4+ batches keys).
pub fn handle(broker: &Arc<Broker>, version: i16, request: FindCoordinatorRequest) -> Reply {
    let node = &broker.node;
    let groups_served = broker.coordinator().is_some();
    let answer = |key_type: i8| -> (i16, i32, StrBytes, i32) {
        if key_type == GROUP && groups_served {
            (
                0,
                node.id,
                StrBytes::from_string(node.host.clone()),
                node.port,
            )
        } else {
            (
                ResponseError::CoordinatorNotAvailable.code(),
                -1,
                StrBytes::default(),
                -1,
            )
        }
    };
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let (error, id, host, port) = answer(request.key_type);
                let mut c = Coordinator::default();
                c.key = key;
                c.node_id = BrokerId(id);
                c.host = host;
                c.port = port;
                c.error_code = error;
                c
            })
            .collect();
        let error = super::first_error(response.coordinators.iter().map(|c| c.error_code));
        Reply::new(response, error)
    } else {
        let (error, id, host, port) = answer(request.key_type);
        response.error_code = error;
        response.node_id = BrokerId(id);
        response.host = host;
        response.port = port;
        Reply::new(response, error)
    }
}
