//! DescribeCluster (API 60, v0–v2, KIP-700): the brokers Metadata lists (this one, or
//! in cluster mode every live broker, at their addresses on the listener the request
//! came in on), the cluster id, and the controller id Metadata
//! reports (this broker: Drover has no controller quorum). Each broker's rack is its
//! `server.rack` (null if unset); no broker is fenced. Only endpoint type 1 (brokers) is served;
//! 2 (controllers, KIP-919) is answered `UNSUPPORTED_ENDPOINT_TYPE`, as a Kafka broker
//! does. Cluster authorized operations are not computed (Kafka's "not requested"
//! value, `i32::MIN`), since Drover has no authorizer.

use std::sync::Arc;

use kafka_protocol::{
    error::ResponseError,
    messages::{
        describe_cluster_response::DescribeClusterBroker, BrokerId, DescribeClusterRequest,
        DescribeClusterResponse,
    },
    protocol::StrBytes,
};

use crate::{broker::Broker, config::listeners::ListenerName, server::reply::Reply};

/// Endpoint type 1: brokers (DescribeCluster v1+).
const ENDPOINT_BROKERS: i8 = 1;

/// Handles DescribeCluster v0–v2 that came in on `listener`.
///
/// Authorization (Kafka's `AuthHelper.computeDescribeClusterResponse`): none to be
/// answered; KIP-430's `include_cluster_authorized_operations` is answered with an
/// authorizer (0 without Describe on the cluster).
pub fn handle(
    broker: &Arc<Broker>,
    authz: &crate::authz::RequestAuthz,
    listener: &ListenerName,
    version: i16,
    request: DescribeClusterRequest,
) -> Reply {
    use crate::authz::{AclOperation, ResourceType};
    let mut response = DescribeClusterResponse::default();
    response.cluster_authorized_operations = i32::MIN;
    if authz.is_enabled() && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = if authz.allows_cluster(AclOperation::Describe) {
            authz.authorized_operations(ResourceType::Cluster, crate::authz::CLUSTER_RESOURCE_NAME)
        } else {
            0
        };
    }
    if version >= 1 {
        response.endpoint_type = request.endpoint_type;
        if request.endpoint_type != ENDPOINT_BROKERS {
            let code = ResponseError::UnsupportedEndpointType.code();
            response.error_code = code;
            response.error_message = Some(StrBytes::from_string(format!(
                "endpoint type {} is not served by a broker (only 1, brokers)",
                request.endpoint_type
            )));
            return Reply::new(response, code);
        }
    }
    response.cluster_id = StrBytes::from_string(broker.identity.reported_cluster_id());
    response.controller_id = BrokerId(broker.identity.controller_id());
    response.brokers = super::metadata::brokers(broker, listener)
        .into_iter()
        .map(|b| {
            let mut out = DescribeClusterBroker::default();
            out.broker_id = b.node_id;
            out.host = b.host;
            out.port = b.port;
            out.rack = b.rack;
            out.is_fenced = false;
            out
        })
        .collect();
    Reply::new(response, 0)
}
