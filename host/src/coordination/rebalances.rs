//! The host as a client of the coordinator's DescribeRebalances (native API 20008,
//! docs/protocol.md §5.9): a group's recent rebalances for the admin API.

use drover_protocol::{
    ApiKey, DescribeRebalancesRequest, NativeRequest, NativeResponse, RebalanceRecord,
};

use super::driver::{CoordinatorClient, DriverError};

/// What the coordinator answered for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebalances {
    /// Its recorded rebalances, oldest first.
    Recorded(Vec<RebalanceRecord>),
    /// The coordinator has no such group, or records none for its type
    /// (GROUP_ID_NOT_FOUND).
    NotFound,
    /// Another broker coordinates it (NOT_COORDINATOR), or another error code.
    Error(i16),
}

impl CoordinatorClient {
    /// The recent rebalances of `group` on a connection of its own. Errors: the driver
    /// stopped, or the coordinator refused the request (one built before the API closes
    /// the connection) or answered something undecodable.
    pub async fn describe_rebalances(&self, group: &str) -> Result<Rebalances, DriverError> {
        let request = NativeRequest::DescribeRebalances(DescribeRebalancesRequest {
            groups: vec![group.to_owned()],
        });
        let mut frame = bytes::BytesMut::new();
        drover_protocol::encode_request_frame(&mut frame, 0, Some("drover-host"), &request)
            .map_err(|e| DriverError::Refused(e.to_string()))?;
        let answer = self
            .call(ApiKey::DescribeRebalances.code(), frame.freeze().slice(4..))
            .await?;
        let groups =
            match drover_protocol::decode_response_frame(answer, ApiKey::DescribeRebalances, 0) {
                Ok((_, NativeResponse::DescribeRebalances(r))) => r.groups,
                Ok((_, other)) => {
                    return Err(DriverError::Refused(format!(
                        "the coordinator answered {:?}",
                        other.api_key()
                    )))
                }
                Err(e) => {
                    return Err(DriverError::Refused(format!(
                        "undecodable DescribeRebalances answer: {e}"
                    )))
                }
            };
        let Some(g) = groups.into_iter().find(|g| g.group_id == group) else {
            return Err(DriverError::Refused(
                "the coordinator did not answer for the group".into(),
            ));
        };
        Ok(match g.error_code {
            code if code.is_none() => Rebalances::Recorded(g.rebalances),
            drover_protocol::ErrorCode::GROUP_ID_NOT_FOUND => Rebalances::NotFound,
            code => Rebalances::Error(code.0),
        })
    }
}
