//! `POST /v1/groups/{group}/offsets/reset`: an operator's offset reset of an inactive
//! group, with the rules of Kafka's `kafka-consumer-groups --reset-offsets`
//! (`ConsumerGroupCommand`'s reset): first a preview (`"dry_run": true`, Kafka's
//! `--dry-run`), then the same body with `"dry_run": false` commits (`--execute`).
//!
//! Body: `{"to": "earliest" | "latest" | "offset" | "timestamp" | "shift", "value": N,
//! "topics": ["t", ...], "dry_run": true}`. `value` is the offset (`offset`), the
//! timestamp in ms since the epoch (`timestamp`) or the signed shift (`shift`).
//! Without `topics` the partitions the group has committed offsets for are reset
//! (Kafka's `--all-topics`); with them every partition of each topic.
//!
//! The rules ([`target`]): `earliest` is the log start offset, `latest` the log end
//! offset; `offset` and `shift` (the committed offset plus `value`; a partition without
//! a committed offset cannot be shifted) are clamped to [log start, log end], as
//! Kafka's `checkOffsetRange`; `timestamp` is the first offset whose record's timestamp
//! is at or after it (ListOffsets), or the log end offset when there is none.
//!
//! Only a group without members may be reset (Kafka: the group must be `Empty` or
//! `Dead`): 409 otherwise, before anything is computed. The commit is a Kafka
//! OffsetCommit to the coordinator with generation −1 and no member id — the simple
//! commit an admin client sends — so it goes through the coordinator's one offsets
//! path (`core/commits.rs`), which refuses it too if a member joined since (409 with
//! the partitions' errors). 200 `{"group", "applied", "partitions": [{"topic",
//! "partition", "current", "target", "log_start_offset", "log_end_offset"}]}`; 400 for a
//! bad body, 404 for an unknown topic, 501 when the coordinator serves no Kafka
//! OffsetCommit, 503 when no coordinator runs.

use std::{collections::BTreeMap, sync::Arc};

use axum::{
    extract::{rejection::JsonRejection, Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use kafka_protocol::messages::{
    offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    ApiKey, GroupId, OffsetCommitRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde::{Deserialize, Serialize};

use crate::broker::Broker;

/// The most partitions one reset may name.
pub const MAX_PARTITIONS: usize = 100_000;

/// Where to move each partition's committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The log start offset (`--to-earliest`).
    Earliest,
    /// The log end offset (`--to-latest`).
    Latest,
    /// This offset, clamped to the log (`--to-offset`).
    Offset(i64),
    /// The first offset at or after this timestamp, ms (`--to-datetime`).
    Timestamp(i64),
    /// The committed offset plus this, clamped to the log (`--shift-by`).
    Shift(i64),
}

/// What a partition's target is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionNow {
    /// Log start offset.
    pub log_start: i64,
    /// Log end offset.
    pub log_end: i64,
    /// The group's committed offset, if any.
    pub committed: Option<i64>,
    /// For [`ResetTo::Timestamp`]: the first offset at or after the timestamp (`None`:
    /// no such record).
    pub at_timestamp: Option<i64>,
}

/// Why a reset is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResetError {
    /// The group has members (Kafka: only an inactive group may be reset).
    #[error(
        "offsets can only be reset while group `{group}` has no members, but it is {state} \
         with {members} members"
    )]
    Active {
        /// The group.
        group: String,
        /// Its state.
        state: String,
        /// Its member count.
        members: usize,
    },
    /// `shift` of a partition without a committed offset.
    #[error("cannot shift {topic}-{partition}: the group has no committed offset for it")]
    NoCommittedOffset {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
    /// A topic in `topics` does not exist.
    #[error("no topic `{0}`")]
    UnknownTopic(String),
    /// The body is wrong.
    #[error("{0}")]
    BadRequest(String),
}

impl ResetError {
    fn status(&self) -> StatusCode {
        match self {
            ResetError::Active { .. } => StatusCode::CONFLICT,
            ResetError::NoCommittedOffset { .. } | ResetError::BadRequest(_) => {
                StatusCode::BAD_REQUEST
            }
            ResetError::UnknownTopic(_) => StatusCode::NOT_FOUND,
        }
    }
}

/// The new committed offset of a partition (module docs: Kafka's rules); `Err` for a
/// shift without a committed offset (`topic`, `partition` name it).
pub fn target(
    to: ResetTo,
    now: &PartitionNow,
    topic: &str,
    partition: i32,
) -> Result<i64, ResetError> {
    let clamp = |o: i64| o.clamp(now.log_start, now.log_end.max(now.log_start));
    Ok(match to {
        ResetTo::Earliest => now.log_start,
        ResetTo::Latest => now.log_end,
        ResetTo::Offset(o) => clamp(o),
        ResetTo::Timestamp(_) => now.at_timestamp.unwrap_or(now.log_end),
        ResetTo::Shift(by) => {
            let at = now.committed.ok_or_else(|| ResetError::NoCommittedOffset {
                topic: topic.to_owned(),
                partition,
            })?;
            clamp(at.saturating_add(by))
        }
    })
}

/// Whether a group in `state` with `members` may be reset: Kafka's `Empty` or `Dead`
/// (a native group's `empty`), and no members.
pub fn check_inactive(group: &str, state: &str, members: usize) -> Result<(), ResetError> {
    let inactive = ["empty", "dead"].contains(&state.to_ascii_lowercase().as_str());
    if inactive && members == 0 {
        Ok(())
    } else {
        Err(ResetError::Active {
            group: group.to_owned(),
            state: state.to_owned(),
            members,
        })
    }
}

/// The request body (module docs).
#[derive(Debug, Deserialize)]
pub struct ResetBody {
    /// `earliest`, `latest`, `offset`, `timestamp` or `shift`.
    pub to: String,
    /// The offset, timestamp (ms) or shift.
    #[serde(default)]
    pub value: Option<i64>,
    /// Topics to reset every partition of; default the group's committed partitions.
    #[serde(default)]
    pub topics: Option<Vec<String>>,
    /// Preview only (default true: nothing is committed unless asked).
    #[serde(default = "yes")]
    pub dry_run: bool,
}

fn yes() -> bool {
    true
}

impl ResetBody {
    /// The body's [`ResetTo`].
    pub fn reset_to(&self) -> Result<ResetTo, ResetError> {
        let value = |what: &str| {
            self.value
                .ok_or_else(|| ResetError::BadRequest(format!("`to: {what}` needs a `value`")))
        };
        Ok(match self.to.as_str() {
            "earliest" => ResetTo::Earliest,
            "latest" => ResetTo::Latest,
            "offset" => ResetTo::Offset(value("offset")?),
            "timestamp" => ResetTo::Timestamp(value("timestamp")?),
            "shift" => ResetTo::Shift(value("shift")?),
            other => {
                return Err(ResetError::BadRequest(format!(
                    "unknown `to: {other}` (earliest, latest, offset, timestamp or shift)"
                )))
            }
        })
    }
}

/// A partition of the answer.
#[derive(Debug, Serialize)]
pub struct PlannedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed offset now, if any.
    pub current: Option<i64>,
    /// The offset it is (or would be) reset to.
    pub target: i64,
    /// Log start offset.
    pub log_start_offset: i64,
    /// Log end offset.
    pub log_end_offset: i64,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// The group's state and member count, as the coordinator describes it (`None`: no
/// coordinator knows it, which counts as `Dead`).
async fn state_of(broker: &Broker, group: &str) -> Result<Option<(String, usize)>, Response> {
    let Some(c) = broker.coordinator() else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no coordinator plugin is running",
        ));
    };
    let unavailable = |e: crate::coordination::driver::DriverError| {
        error(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
    };
    let native = c
        .describe_groups(Some(vec![group.to_owned()]))
        .await
        .map_err(unavailable)?;
    if let Some(g) = native
        .into_iter()
        .find(|g| g.group_id == group && g.error_code.is_none())
    {
        return Ok(Some((g.state, g.members.len())));
    }
    if c.serves(ApiKey::ConsumerGroupDescribe as i16) {
        if let Some(g) = c
            .describe_consumer_group(group)
            .await
            .map_err(unavailable)?
        {
            return Ok(Some((g.state, g.members.len())));
        }
    }
    if c.serves(ApiKey::DescribeGroups as i16) {
        if let Some(g) = c.describe_classic(group).await.map_err(unavailable)? {
            return Ok(Some((g.state, g.members.len())));
        }
    }
    Ok(None)
}

/// `POST /v1/groups/{group}/offsets/reset` (module docs).
pub async fn reset(
    State(broker): State<Arc<Broker>>,
    Path(group): Path<String>,
    body: Result<Json<ResetBody>, JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let to = match body.reset_to() {
        Ok(to) => to,
        Err(e) => return error(e.status(), e.to_string()),
    };
    let (state, members) = match state_of(&broker, &group).await {
        Ok(found) => found.unwrap_or_else(|| ("Dead".into(), 0)),
        Err(response) => return response,
    };
    if let Err(e) = check_inactive(&group, &state, members) {
        return error(e.status(), e.to_string());
    }
    let planned = {
        let broker = Arc::clone(&broker);
        let group = group.clone();
        let topics = body.topics.clone();
        tokio::task::spawn_blocking(move || plan(&broker, &group, topics, to)).await
    };
    let planned = match planned {
        Ok(Ok(p)) => p,
        Ok(Err(PlanError::Reset(e))) => return error(e.status(), e.to_string()),
        Ok(Err(PlanError::Store(e))) => {
            return error(StatusCode::BAD_GATEWAY, format!("offset store: {e}"))
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    if !body.dry_run {
        if let Err(response) = commit(&broker, &group, &planned).await {
            return response;
        }
    }
    Json(serde_json::json!({
        "group": group,
        "applied": !body.dry_run,
        "partitions": planned,
    }))
    .into_response()
}

enum PlanError {
    Reset(ResetError),
    Store(String),
}

/// The targets of the partitions to reset. Blocking (the store, the logs).
fn plan(
    broker: &Broker,
    group: &str,
    topics: Option<Vec<String>>,
    to: ResetTo,
) -> Result<Vec<PlannedOffset>, PlanError> {
    let committed: BTreeMap<(String, i32), i64> = match broker.offsets() {
        Some(store) => store
            .fetch_group(group)
            .map_err(|e| PlanError::Store(e.to_string()))?
            .into_iter()
            .map(|r| ((r.topic.to_string(), r.partition), r.offset))
            .collect(),
        None => BTreeMap::new(),
    };
    let keys: Vec<(String, i32)> = match topics {
        Some(topics) => {
            let mut keys = Vec::new();
            for name in topics {
                let topic = broker
                    .topics
                    .get(&name)
                    .ok_or_else(|| PlanError::Reset(ResetError::UnknownTopic(name.clone())))?;
                keys.extend(topic.partitions.iter().map(|p| (name.clone(), p.index)));
                if keys.len() > MAX_PARTITIONS {
                    return Err(PlanError::Reset(ResetError::BadRequest(format!(
                        "more than {MAX_PARTITIONS} partitions in one reset"
                    ))));
                }
            }
            keys
        }
        None => committed.keys().cloned().collect(),
    };
    let mut out = Vec::with_capacity(keys.len());
    for (topic, partition) in keys {
        // Committed offsets of deleted topics or partitions are left alone.
        let Some(p) = broker
            .topics
            .get(&topic)
            .and_then(|t| t.partitions.get(partition as usize).cloned())
        else {
            continue;
        };
        let now = {
            let log = p.lock_log();
            let at_timestamp = match to {
                ResetTo::Timestamp(ts) => {
                    crate::server::handlers::list_offsets::record_for_timestamp(&log, ts)
                        .ok()
                        .flatten()
                        .map(|found| found.offset)
                }
                _ => None,
            };
            PartitionNow {
                log_start: log.log_start_offset(),
                log_end: log.log_end_offset(),
                committed: committed.get(&(topic.clone(), partition)).copied(),
                at_timestamp,
            }
        };
        let target = target(to, &now, &topic, partition).map_err(PlanError::Reset)?;
        out.push(PlannedOffset {
            topic,
            partition,
            current: now.committed,
            target,
            log_start_offset: now.log_start,
            log_end_offset: now.log_end,
        });
    }
    Ok(out)
}

/// Commits `planned` through the coordinator as a simple OffsetCommit (generation −1,
/// no member).
async fn commit(broker: &Broker, group: &str, planned: &[PlannedOffset]) -> Result<(), Response> {
    let Some(c) = broker.coordinator() else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no coordinator plugin is running",
        ));
    };
    let Some(&(_, min, max)) = c
        .kafka_apis()
        .iter()
        .find(|(key, _, _)| *key == ApiKey::OffsetCommit as i16)
    else {
        return Err(error(
            StatusCode::NOT_IMPLEMENTED,
            "the coordinator plugin serves no Kafka OffsetCommit",
        ));
    };
    let version = max.min(9);
    if version < min.max(2) {
        return Err(error(
            StatusCode::NOT_IMPLEMENTED,
            "the coordinator plugin serves no OffsetCommit version this broker sends (2-9)",
        ));
    }
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for p in planned {
        let mut part = OffsetCommitRequestPartition::default();
        part.partition_index = p.partition;
        part.committed_offset = p.target;
        part.committed_leader_epoch = -1;
        part.committed_metadata = Some(StrBytes::from_static_str(""));
        topics.entry(&p.topic).or_default().push(part);
    }
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.generation_id_or_member_epoch = -1;
    request.member_id = StrBytes::from_static_str("");
    request.topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let mut t = OffsetCommitRequestTopic::default();
            t.name = TopicName(StrBytes::from_string(name.to_owned()));
            t.partitions = partitions;
            t
        })
        .collect();
    let answer = c
        .kafka_call(
            ApiKey::OffsetCommit,
            version,
            RequestKind::OffsetCommit(request),
        )
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let ResponseKind::OffsetCommit(response) = answer else {
        return Err(error(
            StatusCode::BAD_GATEWAY,
            "the coordinator answered something else",
        ));
    };
    let failed: Vec<String> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| {
                    let name = kafka_protocol::error::ResponseError::try_from_code(p.error_code)
                        .map(|e| format!("{e:?}"))
                        .unwrap_or_else(|| p.error_code.to_string());
                    format!("{}-{}: {name}", t.name.as_str(), p.partition_index)
                })
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(error(
            StatusCode::CONFLICT,
            format!("the coordinator refused the commit: {}", failed.join(", ")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(log_start: i64, log_end: i64, committed: Option<i64>) -> PartitionNow {
        PartitionNow {
            log_start,
            log_end,
            committed,
            at_timestamp: None,
        }
    }

    fn t(to: ResetTo, n: &PartitionNow) -> Result<i64, ResetError> {
        target(to, n, "t", 0)
    }

    #[test]
    fn earliest_and_latest_are_the_log_bounds() {
        let n = now(10, 50, Some(30));
        assert_eq!(t(ResetTo::Earliest, &n), Ok(10));
        assert_eq!(t(ResetTo::Latest, &n), Ok(50));
    }

    #[test]
    fn an_offset_is_clamped_to_the_log_as_kafkas_check_offset_range() {
        let n = now(10, 50, None);
        assert_eq!(t(ResetTo::Offset(5), &n), Ok(10));
        assert_eq!(t(ResetTo::Offset(20), &n), Ok(20));
        assert_eq!(t(ResetTo::Offset(99), &n), Ok(50));
        assert_eq!(t(ResetTo::Offset(50), &n), Ok(50));
    }

    #[test]
    fn a_shift_moves_the_committed_offset_within_the_log() {
        let n = now(10, 50, Some(30));
        assert_eq!(t(ResetTo::Shift(-5), &n), Ok(25));
        assert_eq!(t(ResetTo::Shift(-100), &n), Ok(10));
        assert_eq!(t(ResetTo::Shift(100), &n), Ok(50));
        assert_eq!(t(ResetTo::Shift(i64::MAX), &n), Ok(50));
        assert_eq!(
            t(ResetTo::Shift(1), &now(10, 50, None)),
            Err(ResetError::NoCommittedOffset {
                topic: "t".into(),
                partition: 0
            })
        );
    }

    #[test]
    fn a_timestamp_past_every_record_is_the_log_end() {
        let mut n = now(10, 50, Some(30));
        n.at_timestamp = Some(17);
        assert_eq!(t(ResetTo::Timestamp(1_000), &n), Ok(17));
        n.at_timestamp = None;
        assert_eq!(t(ResetTo::Timestamp(1_000), &n), Ok(50));
    }

    #[test]
    fn only_an_inactive_group_without_members_is_reset() {
        assert!(check_inactive("g", "Empty", 0).is_ok());
        assert!(check_inactive("g", "empty", 0).is_ok());
        assert!(check_inactive("g", "Dead", 0).is_ok());
        for (state, members) in [
            ("Stable", 1),
            ("PreparingRebalance", 0),
            ("stable", 2),
            ("Empty", 1),
        ] {
            let e = check_inactive("g", state, members).unwrap_err();
            assert_eq!(e.status(), StatusCode::CONFLICT, "{state}");
        }
    }

    #[test]
    fn the_body_names_a_strategy_and_previews_by_default() {
        let body: ResetBody = serde_json::from_str(r#"{"to": "shift", "value": -3}"#).unwrap();
        assert!(body.dry_run);
        assert_eq!(body.reset_to(), Ok(ResetTo::Shift(-3)));
        let body: ResetBody = serde_json::from_str(r#"{"to": "offset"}"#).unwrap();
        assert!(matches!(body.reset_to(), Err(ResetError::BadRequest(_))));
        let body: ResetBody = serde_json::from_str(r#"{"to": "middle"}"#).unwrap();
        assert!(matches!(body.reset_to(), Err(ResetError::BadRequest(_))));
    }
}
