//! `DELETE /v1/groups/{group}`: deletes a group without members and its committed
//! offsets, as Kafka's `kafka-consumer-groups --delete` — a Kafka DeleteGroups request
//! to the coordinator, whose rules decide (a group with members is NON_EMPTY_GROUP).
//!
//! 200 `{"deleted": group}`; 409 for a group with members (NON_EMPTY_GROUP); 404 for a
//! group the coordinator does not know (GROUP_ID_NOT_FOUND); 502 with the error name
//! for another refusal; 501 when the coordinator serves no DeleteGroups; 503 when no
//! coordinator runs or it does not answer.

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use kafka_protocol::{
    error::ResponseError,
    messages::{ApiKey, DeleteGroupsRequest, GroupId, RequestKind, ResponseKind},
    protocol::StrBytes,
};

use crate::broker::Broker;

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// The HTTP status of a DeleteGroups error code.
pub fn status_of(code: i16) -> StatusCode {
    match ResponseError::try_from_code(code) {
        None => StatusCode::OK,
        Some(ResponseError::NonEmptyGroup) => StatusCode::CONFLICT,
        Some(ResponseError::GroupIdNotFound) => StatusCode::NOT_FOUND,
        Some(ResponseError::CoordinatorNotAvailable | ResponseError::NotCoordinator) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Some(_) => StatusCode::BAD_GATEWAY,
    }
}

/// `DELETE /v1/groups/{group}` (module docs).
pub async fn delete(State(broker): State<Arc<Broker>>, Path(group): Path<String>) -> Response {
    let Some(c) = broker.coordinator() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no coordinator plugin is running",
        );
    };
    let Some(&(_, _, max)) = c
        .kafka_apis()
        .iter()
        .find(|(key, _, _)| *key == ApiKey::DeleteGroups as i16)
    else {
        return error(
            StatusCode::NOT_IMPLEMENTED,
            "the coordinator plugin serves no Kafka DeleteGroups",
        );
    };
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![GroupId(StrBytes::from_string(group.clone()))];
    let answer = match c
        .kafka_call(
            ApiKey::DeleteGroups,
            max.min(2),
            RequestKind::DeleteGroups(request),
        )
        .await
    {
        Ok(ResponseKind::DeleteGroups(r)) => r,
        Ok(_) => {
            return error(
                StatusCode::BAD_GATEWAY,
                "the coordinator answered something else",
            )
        }
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    let code = answer
        .results
        .iter()
        .find(|r| r.group_id.as_str() == group)
        .map_or(-1, |r| r.error_code);
    match status_of(code) {
        StatusCode::OK => Json(serde_json::json!({ "deleted": group })).into_response(),
        status => {
            let name = ResponseError::try_from_code(code)
                .map(|e| format!("{e:?}"))
                .unwrap_or_else(|| code.to_string());
            error(status, format!("DeleteGroups of `{group}`: {name}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_map_to_statuses() {
        assert_eq!(status_of(0), StatusCode::OK);
        assert_eq!(
            status_of(ResponseError::NonEmptyGroup.code()),
            StatusCode::CONFLICT
        );
        assert_eq!(
            status_of(ResponseError::GroupIdNotFound.code()),
            StatusCode::NOT_FOUND
        );
        assert_eq!(status_of(-1), StatusCode::BAD_GATEWAY);
    }
}
