//! `GET /v1/groups` and `GET /v1/groups/{group}`: consumer groups as operators see
//! them.
//!
//! Membership and assignment come from the coordinator: native and KIP-848 groups from
//! a native DescribeGroups request (docs/protocol.md §5.8; v2 describes both, with
//! session timeouts and the loads each group's last assignment saw), classic Kafka
//! groups from Kafka's ListGroups and DescribeGroups (their assignments decoded from
//! the `consumer` protocol), each on an internal connection. A coordinator without
//! DescribeGroups v2 describes KIP-848 groups through Kafka's ConsumerGroupDescribe
//! (no session timeouts, no loads). Committed offsets come from
//! the active offset store; lag is the partition's log end offset minus the committed
//! offset. Groups that only have committed offsets (no members) are listed as `empty`,
//! as Kafka's ListGroups does (in cluster mode by the broker that coordinates them).
//!
//! Errors: 503 when no coordinator runs or it does not answer; 404 for a group that
//! neither the coordinator nor the offset store knows; 502 when the offset store fails.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use axum::{
    extract::{Path, State},
    http::{StatusCode, Uri},
    response::{IntoResponse, Response},
    Json,
};
use drover_protocol::DescribedGroup;
use serde::Serialize;

use crate::broker::Broker;

/// One row of `GET /v1/groups`.
#[derive(Serialize)]
pub struct GroupSummary {
    /// Group id.
    pub group: String,
    /// Group protocol: `native` (the coordinator-driven protocol of docs/protocol.md),
    /// `classic` (Kafka's JoinGroup/SyncGroup), `consumer` (KIP-848) or `share`
    /// (KIP-932; its members may share partitions).
    pub protocol: String,
    /// Native groups: `stable`, `stopping`, `fetching`, `starting`, or `empty`
    /// (committed offsets only); Kafka groups: Kafka's state name (`Stable`,
    /// `PreparingRebalance`, `CompletingRebalance`, `Empty`, ...).
    pub state: String,
    /// Current generation of a native group (0 before the first rebalance or when
    /// empty), the group epoch of a KIP-848 group; `null` for classic groups (Kafka's
    /// DescribeGroups does not report it).
    pub generation: Option<i32>,
    /// The group's assignor, if it has members (classic groups: the client-side
    /// protocol the members chose, such as `range` or `cooperative-sticky`).
    pub assignor: Option<String>,
    /// The assignor the group's next rebalance runs, given what is loaded now:
    /// `assignor`, or the default assignor when `assignor` is not loaded (native groups;
    /// see `assignor_fallback`). The current assignment may still be the previous
    /// rebalance's. KIP-848 and classic groups: the assignor that ran.
    pub effective_assignor: Option<String>,
    /// Why rebalances run another assignor than the members name (its plugin is
    /// missing, was refused, or was removed by a rescan; or it is slow: a call of it
    /// runs past `coordinator.assignor_timeout_ms`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignor_fallback: Option<String>,
    /// Registered consumers.
    pub members: usize,
}

/// `GET /v1/groups/{group}`.
#[derive(Serialize)]
pub struct GroupDetail {
    /// Group id.
    pub group: String,
    /// See [`GroupSummary::protocol`].
    pub protocol: String,
    /// See [`GroupSummary::state`].
    pub state: String,
    /// See [`GroupSummary::generation`].
    pub generation: Option<i32>,
    /// The group's assignor, if it has members.
    pub assignor: Option<String>,
    /// See [`GroupSummary::effective_assignor`].
    pub effective_assignor: Option<String>,
    /// See [`GroupSummary::assignor_fallback`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignor_fallback: Option<String>,
    /// `incremental` or `eager`.
    pub rebalance_mode: Option<String>,
    /// Registered consumers.
    pub members: Vec<MemberView>,
    /// Every partition the group owns or has committed, with offsets and lag.
    pub partitions: Vec<PartitionView>,
    /// Native groups: partitions of failed consumers not released yet (their lease,
    /// the rebalance debounce, is running; docs/protocol.md §6.4), `topic-partition`,
    /// sorted; no live member owns them. Empty for Kafka groups.
    pub held_by_failed: Vec<String>,
    /// Share groups: each share-partition's offsets, records in flight, delivery
    /// counts and archived records ([`super::share_partitions`]); absent for other
    /// groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_partitions: Option<Vec<super::share_partitions::SharePartitionView>>,
}

/// A consumer in [`GroupDetail`].
#[derive(Serialize)]
pub struct MemberView {
    /// Consumer id (classic groups: the member id).
    pub consumer_id: String,
    /// The client's `client.id` (classic and KIP-848 groups; `null` for native
    /// groups, whose RegisterConsumer carries none beyond the request header's).
    pub client_id: Option<String>,
    /// Host it declared at registration (classic groups: the client host, may be
    /// empty).
    pub host: String,
    /// Session timeout, ms: a KIP-848 member's is the coordinator's
    /// `consumer_session_timeout_ms` (`null` for classic groups, whose DescribeGroups
    /// omits it, and for KIP-848 groups of a coordinator without DescribeGroups v2).
    pub session_timeout_ms: Option<i32>,
    /// Subscription as text (static topics with stream counts, or a pattern; classic
    /// groups: the subscribed topics, comma-separated).
    pub subscription: String,
    /// Subscribed topics, resolved against the current topics.
    pub topics: Vec<String>,
    /// Assigned partitions, `topic-partition`.
    pub partitions: Vec<String>,
    /// The rack it declared: native `drover consume --rack` (RegisterConsumer v1),
    /// KIP-848 `client.rack`; `null` for none and for classic groups (they assign on
    /// the client).
    pub rack: Option<String>,
    /// Its weight (capacity relative to the other members, ≥ 1): native groups only
    /// (`drover consume --weight`); `null` for Kafka groups, whose protocols have no
    /// such field.
    pub weight: Option<i32>,
    /// Its free-form labels (native RegisterConsumer v1), key to value; omitted when it
    /// has none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A partition in [`GroupDetail`].
#[derive(Serialize)]
pub struct PartitionView {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The consumer delivering it, if any.
    pub owner: Option<String>,
    /// Committed offset (next record to consume), if any.
    pub committed_offset: Option<i64>,
    /// Log end offset, if the partition exists on this broker.
    pub log_end_offset: Option<i64>,
    /// `log_end_offset - committed_offset` (≥ 0), when both are known.
    pub lag: Option<i64>,
    /// Native and KIP-848 groups: what the group's last assignment (a KIP-848 group:
    /// the target in force) saw of the partition (the produce rates and lag its
    /// assignor was given); absent when it saw none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assigned_with: Option<SeenLoadView>,
}

/// A partition's load as a group's last assignment saw it (DescribeGroups v1 and v2).
#[derive(Serialize)]
pub struct SeenLoadView {
    /// Produce rate, bytes per second over `coordinator.produce_rate_window_ms`,
    /// rounded down; `null` when unknown.
    pub produce_bytes_per_sec: Option<i64>,
    /// Produce rate, records per second over the same window; `null` when unknown.
    pub produce_records_per_sec: Option<i64>,
    /// Log end offset minus the committed offset then; `null` when unknown.
    pub lag: Option<i64>,
}

/// A classic or KIP-848 group's member, as the detail view needs it.
struct KafkaMember<'a> {
    id: &'a str,
    client_id: &'a str,
    host: &'a str,
    /// Topics comma-separated, or the KIP-848 regex.
    subscription: String,
    topics: &'a [String],
    /// (topic, partition) assigned.
    partitions: &'a [(String, i32)],
    /// KIP-848 `rack_id`.
    rack: Option<&'a str>,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// Asks the coordinator to describe `groups` (every group when `None`).
async fn describe(
    broker: &Broker,
    groups: Option<Vec<String>>,
) -> Result<Vec<DescribedGroup>, Response> {
    let Some(coordinator) = broker.coordinator() else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no coordinator plugin is running",
        ));
    };
    coordinator
        .describe_groups(groups)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))
}

/// `GET /v1/groups`: every group the coordinator or the offset store knows, as a JSON
/// array; with `?q=&page=&size=` a [`super::paging::Paged`] page of the groups whose id
/// contains `q`, in group id order. Classic and KIP-848 groups are described (members,
/// assignor) only for the rows answered, so a page costs the same with 10 000 groups.
pub async fn list(State(broker): State<Arc<Broker>>, uri: Uri) -> Response {
    let paging = match super::paging::parse(uri.query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let described = match describe(&broker, None).await {
        Ok(groups) => groups,
        Err(response) => return response,
    };
    // Rows, and which need a Kafka describe for their members and assignor.
    let mut rows: BTreeMap<String, (GroupSummary, bool)> = described
        .into_iter()
        .filter(|g| g.error_code.is_none())
        .map(|g| {
            (g.group_id.clone(), {
                let (effective_assignor, assignor_fallback) = effective_assignor_of(&broker, &g);
                let row = GroupSummary {
                    group: g.group_id,
                    protocol: g.group_type,
                    state: g.state,
                    generation: Some(g.generation),
                    assignor: g.assignor,
                    effective_assignor,
                    assignor_fallback,
                    members: g.members.len(),
                };
                (row, false)
            })
        })
        .collect();
    if let Some(coordinator) = broker.coordinator() {
        if coordinator.serves(kafka_protocol::messages::ApiKey::ListGroups as i16) {
            let listed = match coordinator.list_groups().await {
                Ok(listed) => listed,
                Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            };
            // Native groups, and KIP-848 ones at DescribeGroups v2, are described above.
            for g in listed {
                if g.group_type == "native" || rows.contains_key(&g.group) {
                    continue;
                }
                let row = GroupSummary {
                    group: g.group.clone(),
                    protocol: g.group_type,
                    state: g.state,
                    generation: None,
                    assignor: None,
                    effective_assignor: None,
                    assignor_fallback: None,
                    members: 0,
                };
                rows.insert(g.group, (row, true));
            }
        }
    }
    let stored = {
        let broker = Arc::clone(&broker);
        tokio::task::spawn_blocking(move || match active_store(&broker) {
            Some(store) => store.list_groups().map_err(|e| e.to_string()),
            None => Ok(Vec::new()),
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
    };
    match stored {
        Ok(groups) => {
            // Cluster mode: the store is shared; a group with only committed offsets is
            // listed by the broker that coordinates it, not by every broker.
            let cluster = broker.cluster();
            for group in groups {
                if cluster.is_some_and(|c| c.coordinator_of(&group).map(|(id, _)| id) != Some(c.me))
                {
                    continue;
                }
                rows.entry(group.clone()).or_insert((
                    GroupSummary {
                        group,
                        protocol: "native".into(),
                        state: "empty".into(),
                        generation: Some(0),
                        assignor: None,
                        effective_assignor: None,
                        assignor_fallback: None,
                        members: 0,
                    },
                    false,
                ));
            }
        }
        Err(e) => return error(StatusCode::BAD_GATEWAY, format!("offset store: {e}")),
    }
    match paging {
        None => {
            let mut out = Vec::with_capacity(rows.len());
            for (row, kafka) in rows.into_values() {
                out.push(enrich(&broker, row, kafka).await);
            }
            Json(out).into_response()
        }
        Some(page) => {
            let paged = page.apply(rows.into_values(), |(row, _)| row.group.as_str());
            let mut items = Vec::with_capacity(paged.items.len());
            for (row, kafka) in paged.items {
                items.push(enrich(&broker, row, kafka).await);
            }
            Json(super::paging::Paged {
                total: paged.total,
                page: paged.page,
                size: paged.size,
                items,
            })
            .into_response()
        }
    }
}

/// A listed classic or KIP-848 group's members, generation and assignor, from Kafka's
/// DescribeGroups or ConsumerGroupDescribe (`kafka` false: `row` as it is).
async fn enrich(broker: &Broker, mut row: GroupSummary, kafka: bool) -> GroupSummary {
    let Some(coordinator) = broker.coordinator().filter(|_| kafka) else {
        return row;
    };
    let (members, generation, assignor) = if row.protocol == "consumer" {
        match coordinator.describe_consumer_group(&row.group).await {
            Ok(Some(c)) => (c.members.len(), Some(c.group_epoch), Some(c.assignor)),
            _ => (0, None, None),
        }
    } else {
        match coordinator.describe_classic(&row.group).await {
            Ok(Some(c)) => (c.members.len(), None, Some(c.protocol)),
            _ => (0, None, None),
        }
    };
    let assignor = assignor.filter(|a| !a.is_empty());
    row.members = members;
    row.generation = generation;
    row.effective_assignor = assignor.clone();
    row.assignor = assignor;
    row
}

/// The assignor a described group runs, and why it is not the one its members name:
/// for a native group [`effective_assignor`]; a KIP-848 group's is the one that ran (a
/// member's unknown server assignor already fell back inside the coordinator).
fn effective_assignor_of(broker: &Broker, g: &DescribedGroup) -> (Option<String>, Option<String>) {
    // A KIP-848 group's assignor is the one that ran; a share group's is the
    // coordinator's in-tree `simple` share assignor, never a plugin.
    if g.group_type == DescribedGroup::CONSUMER || g.group_type == DescribedGroup::SHARE {
        (g.assignor.clone(), None)
    } else {
        effective_assignor(broker, g.assignor.as_deref())
    }
}

/// The assignor a native group's rebalances run, and why it is not the one its members
/// name: the coordinator falls back to the default assignor when the named one is not
/// loaded (docs/plugins.md, "When an assignor is missing"), so the broker, which knows
/// what is loaded, reports the same.
fn effective_assignor(broker: &Broker, named: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(named) = named else {
        return (None, None);
    };
    let default = &broker.config.coordinator.default_assignor;
    if broker.plugins.live.assignors().contains_key(named) {
        // Loaded, but a call of it runs past its budget: its calls fail at once and
        // rebalances run the default (coordinator.assignor_timeout_ms).
        if let Some(slow) = broker.plugins.budgets.slow(named) {
            if named != default {
                return (
                    Some(default.clone()),
                    Some(format!(
                        "assignor `{named}` is slow ({slow}); rebalances run the default \
                         assignor `{default}`"
                    )),
                );
            }
        }
        return (Some(named.to_owned()), None);
    }
    (
        Some(default.clone()),
        Some(format!(
            "assignor `{named}` is not loaded; rebalances run the default assignor `{default}`"
        )),
    )
}

fn active_store(broker: &Broker) -> Option<Arc<crate::offsets::OffsetStores>> {
    broker.offsets()
}

/// `GET /v1/groups/{group}`.
pub async fn detail(State(broker): State<Arc<Broker>>, Path(group): Path<String>) -> Response {
    let described = match describe(&broker, Some(vec![group.clone()])).await {
        Ok(groups) => groups.into_iter().find(|g| g.group_id == group),
        Err(response) => return response,
    };
    let committed = {
        let broker = Arc::clone(&broker);
        let group = group.clone();
        tokio::task::spawn_blocking(move || match active_store(&broker) {
            Some(store) => store.fetch_group(&group).map_err(|e| e.to_string()),
            None => Ok(Vec::new()),
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
    };
    let committed = match committed {
        Ok(records) => records,
        Err(e) => return error(StatusCode::BAD_GATEWAY, format!("offset store: {e}")),
    };
    let live = described.filter(|g| g.error_code.is_none());
    let classic = match (&live, broker.coordinator()) {
        (None, Some(c)) if c.serves(kafka_protocol::messages::ApiKey::DescribeGroups as i16) => {
            match c.describe_classic(&group).await {
                Ok(found) => found,
                Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            }
        }
        _ => None,
    };
    let consumer = match (&live, &classic, broker.coordinator()) {
        (None, None, Some(c))
            if c.serves(kafka_protocol::messages::ApiKey::ConsumerGroupDescribe as i16) =>
        {
            match c.describe_consumer_group(&group).await {
                Ok(found) => found,
                Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            }
        }
        _ => None,
    };
    // A share group's share-partitions; a group only the share state knows (its
    // coordinator forgot it, e.g. after a restart) is an empty share group.
    let unknown = live.is_none() && classic.is_none() && consumer.is_none() && committed.is_empty();
    let share = live
        .as_ref()
        .is_some_and(|g| g.group_type == DescribedGroup::SHARE);
    let share_partitions = if share || unknown {
        let broker = Arc::clone(&broker);
        let id = group.clone();
        match tokio::task::spawn_blocking(move || super::share_partitions::view(&broker, &id))
            .await
            .unwrap_or_else(|e| Err(e.to_string()))
        {
            Ok(view) => (share || !view.is_empty()).then_some(view),
            Err(e) => return error(StatusCode::BAD_GATEWAY, format!("share state: {e}")),
        }
    } else {
        None
    };
    if unknown && share_partitions.is_none() {
        return error(StatusCode::NOT_FOUND, format!("no group `{group}`"));
    }

    let mut owners: BTreeMap<(String, i32), String> = BTreeMap::new();
    let mut members = Vec::new();
    if let Some(g) = &live {
        // KIP-848 and share members have no weight (the coordinator describes 1).
        let kafka_member = g.group_type != DescribedGroup::NATIVE;
        for m in &g.members {
            let mut partitions = Vec::new();
            for t in &m.partitions {
                for p in &t.partitions {
                    owners.insert((t.topic.clone(), *p), m.consumer_id.clone());
                    partitions.push(format!("{}-{p}", t.topic));
                }
            }
            members.push(MemberView {
                consumer_id: m.consumer_id.clone(),
                client_id: None,
                host: m.host.clone(),
                session_timeout_ms: Some(m.session_timeout_ms),
                subscription: m.subscription.clone(),
                topics: m.topics.clone(),
                partitions,
                rack: m.member.rack.clone(),
                weight: (!kafka_member).then_some(m.member.weight),
                labels: m
                    .member
                    .labels
                    .iter()
                    .map(|l| (l.key.clone(), l.value.clone()))
                    .collect(),
            });
        }
    }
    let known = |v: i64| (v >= 0).then_some(v);
    let seen: BTreeMap<(String, i32), SeenLoadView> = live
        .iter()
        .flat_map(|g| &g.partition_loads)
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    (t.topic.clone(), p.partition),
                    SeenLoadView {
                        produce_bytes_per_sec: known(p.bytes_per_sec),
                        produce_records_per_sec: known(p.records_per_sec),
                        lag: known(p.lag),
                    },
                )
            })
        })
        .collect();
    let held_by_failed: Vec<String> = live
        .iter()
        .flat_map(|g| &g.held_by_failed)
        .flat_map(|t| t.partitions.iter().map(move |p| format!("{}-{p}", t.topic)))
        .collect();
    let kafka_members: Vec<KafkaMember<'_>> = match (&classic, &consumer) {
        (Some(g), _) => g
            .members
            .iter()
            .map(|m| {
                let sub = m.topics.join(",");
                KafkaMember {
                    id: &m.member_id,
                    client_id: &m.client_id,
                    host: &m.client_host,
                    subscription: sub,
                    topics: &m.topics,
                    partitions: &m.partitions,
                    rack: None,
                }
            })
            .collect(),
        (None, Some(g)) => g
            .members
            .iter()
            .map(|m| {
                let sub = m.regex.clone().unwrap_or_else(|| m.topics.join(","));
                KafkaMember {
                    id: &m.member_id,
                    client_id: &m.client_id,
                    host: &m.client_host,
                    subscription: sub,
                    topics: &m.topics,
                    partitions: &m.partitions,
                    rack: m.rack.as_deref(),
                }
            })
            .collect(),
        (None, None) => Vec::new(),
    };
    for m in kafka_members {
        for (topic, p) in m.partitions {
            owners.insert((topic.clone(), *p), m.id.to_owned());
        }
        members.push(MemberView {
            consumer_id: m.id.to_owned(),
            client_id: Some(m.client_id.to_owned()),
            host: m.host.to_owned(),
            session_timeout_ms: None,
            subscription: m.subscription,
            topics: m.topics.to_vec(),
            partitions: m
                .partitions
                .iter()
                .map(|(t, p)| format!("{t}-{p}"))
                .collect(),
            rack: m.rack.map(str::to_owned),
            weight: None,
            labels: BTreeMap::new(),
        });
    }
    let committed: BTreeMap<(String, i32), i64> = committed
        .into_iter()
        .map(|r| ((r.topic.to_string(), r.partition), r.offset))
        .collect();
    let keys: BTreeSet<(String, i32)> = owners
        .keys()
        .chain(committed.keys())
        .chain(seen.keys())
        .cloned()
        .collect();
    let partitions = keys
        .into_iter()
        .map(|(topic, partition)| {
            let log_end_offset = broker.topics.get(&topic).and_then(|t| {
                t.partitions.get(partition as usize).map(|p| {
                    p.log
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .log_end_offset()
                })
            });
            let committed_offset = committed.get(&(topic.clone(), partition)).copied();
            PartitionView {
                owner: owners.get(&(topic.clone(), partition)).cloned(),
                lag: match (log_end_offset, committed_offset) {
                    (Some(end), Some(at)) => Some((end - at).max(0)),
                    _ => None,
                },
                assigned_with: seen.get(&(topic.clone(), partition)).map(|s| SeenLoadView {
                    produce_bytes_per_sec: s.produce_bytes_per_sec,
                    produce_records_per_sec: s.produce_records_per_sec,
                    lag: s.lag,
                }),
                topic,
                partition,
                committed_offset,
                log_end_offset,
            }
        })
        .collect();
    let detail = match (live, classic, consumer) {
        (Some(g), _, _) => {
            let (effective_assignor, assignor_fallback) = effective_assignor_of(&broker, &g);
            GroupDetail {
                group: g.group_id,
                protocol: g.group_type,
                state: g.state,
                generation: Some(g.generation),
                assignor: g.assignor,
                effective_assignor,
                assignor_fallback,
                rebalance_mode: Some(g.rebalance_mode),
                members,
                partitions,
                held_by_failed,
                share_partitions,
            }
        }
        (None, Some(c), _) => GroupDetail {
            group,
            protocol: "classic".into(),
            state: c.state,
            generation: None,
            // Classic groups assign on the client: the protocol is what runs.
            effective_assignor: Some(c.protocol.clone()).filter(|p| !p.is_empty()),
            assignor: Some(c.protocol).filter(|p| !p.is_empty()),
            assignor_fallback: None,
            rebalance_mode: None,
            members,
            partitions,
            held_by_failed,
            share_partitions: None,
        },
        // KIP-848: the group epoch stands for the generation; reconciliation is
        // incremental (only moving partitions are revoked).
        (None, None, Some(c)) => GroupDetail {
            group,
            protocol: "consumer".into(),
            state: c.state,
            generation: Some(c.group_epoch),
            // ConsumerGroupDescribe reports the assignor that runs (a member's unknown
            // server assignor already fell back inside the coordinator).
            effective_assignor: Some(c.assignor.clone()).filter(|a| !a.is_empty()),
            assignor: Some(c.assignor).filter(|a| !a.is_empty()),
            assignor_fallback: None,
            rebalance_mode: Some("incremental".into()),
            members,
            partitions,
            held_by_failed,
            share_partitions: None,
        },
        // Committed offsets only: an empty native group; known only by its share state:
        // an empty share group.
        (None, None, None) => {
            let share = share_partitions.is_some();
            GroupDetail {
                group,
                protocol: if share {
                    DescribedGroup::SHARE
                } else {
                    "native"
                }
                .into(),
                state: if share { "Empty" } else { "empty" }.into(),
                generation: (!share).then_some(0),
                assignor: None,
                effective_assignor: None,
                assignor_fallback: None,
                rebalance_mode: None,
                members,
                partitions,
                held_by_failed,
                share_partitions,
            }
        }
    };
    Json(detail).into_response()
}
