//! `GET /v1/groups/{group}/rebalances`: a group's recent rebalances, as its coordinator
//! recorded them (DescribeRebalances, [`crate::coordination::rebalances`]): the last
//! 50 at most, oldest first, each `{"generation", "cause", "started_ms" (wall clock),
//! "duration_ms" (null while it runs), "partitions_moved" (null while unknown),
//! "members", "assignor"}`. `cause` is `join`, `leave`, `session_expiry`,
//! `topic_change`, `load_drift`, `plugin_rescan`, `subscription_change` or `other`.
//!
//! Native, classic and KIP-848 groups (a classic group's `partitions_moved` is `null`:
//! its members assign on the client, opaque to the coordinator; a KIP-848 group's is
//! known from the start, counted between its old and new target): 404 for a group the
//! coordinator does not have (or, from a coordinator plugin older than KIP-848
//! recording, a KIP-848 group); 421 when another broker coordinates
//! it; 501 when the coordinator plugin predates DescribeRebalances; 503 when no
//! coordinator runs.

use std::sync::Arc;

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;

use crate::{
    broker::Broker,
    coordination::{rebalances::Rebalances, DriverError},
};

/// One rebalance of the answer.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct RebalanceView {
    /// The generation it started from.
    pub generation: i32,
    /// Why it ran (module docs).
    pub cause: String,
    /// When it started, wall-clock ms since the epoch.
    pub started_ms: i64,
    /// How long it took, ms; `null` while it runs.
    pub duration_ms: Option<i64>,
    /// Partitions whose owner it changed; `null` while unknown (a native group's
    /// while it runs, a classic group's always).
    pub partitions_moved: Option<i32>,
    /// Members when it started.
    pub members: i32,
    /// The assignor it ran.
    pub assignor: Option<String>,
}

/// The wire record as the admin API shows it, answered at wall-clock `now_ms`.
pub fn view(r: drover_protocol::RebalanceRecord, now_ms: i64) -> RebalanceView {
    RebalanceView {
        generation: r.generation,
        cause: r.cause,
        started_ms: now_ms.saturating_sub(r.age_ms.max(0)),
        duration_ms: (r.duration_ms >= 0).then_some(r.duration_ms),
        partitions_moved: (r.partitions_moved >= 0).then_some(r.partitions_moved),
        members: r.members,
        assignor: r.assignor,
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// `GET /v1/groups/{group}/rebalances` (module docs).
pub async fn get(State(broker): State<Arc<Broker>>, Path(group): Path<String>) -> Response {
    let Some(c) = broker.coordinator() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no coordinator plugin is running",
        );
    };
    match c.describe_rebalances(&group).await {
        Ok(Rebalances::Recorded(records)) => {
            let now = crate::clock::now_ms();
            let rebalances: Vec<_> = records.into_iter().map(|r| view(r, now)).collect();
            Json(serde_json::json!({ "group": group, "rebalances": rebalances })).into_response()
        }
        Ok(Rebalances::NotFound) => error(
            StatusCode::NOT_FOUND,
            format!("the coordinator records no rebalances of `{group}` (no such group)"),
        ),
        Ok(Rebalances::Error(code)) => error(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "DescribeRebalances of `{group}`: error {code} (another broker coordinates it?)"
            ),
        ),
        Err(DriverError::Refused(why)) => error(
            StatusCode::NOT_IMPLEMENTED,
            format!("the coordinator plugin does not describe rebalances: {why}"),
        ),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_become_wall_clock_and_running_ones_have_no_duration() {
        let r = drover_protocol::RebalanceRecord {
            generation: 2,
            cause: "join".into(),
            age_ms: 1_000,
            duration_ms: -1,
            partitions_moved: -1,
            members: 3,
            assignor: None,
        };
        let v = view(r, 10_000);
        assert_eq!(v.started_ms, 9_000);
        assert_eq!((v.duration_ms, v.partitions_moved), (None, None));
    }
}
