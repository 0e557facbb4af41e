//! ShareFetch (API 78, v1; KIP-932): a share-group member's fetch through its share
//! session, with acknowledgements piggy-backed. Served by the host beside the
//! partition logs, without the coordinator (docs/design.md, "Share groups"), as
//! Kafka's `KafkaApis.handleShareFetchRequest` with `SharePartitionManager`.
//!
//! In two parts, so that share-session epochs keep the order of the connection's
//! requests: [`prepare`] (now: ids, authorization, topics, the session step) and
//! [`serve`] (deferred: acknowledgements, then the long poll that acquires records).
//!
//! - Session (`crate::share::sessions`): epoch 0 opens (acknowledgements then are
//!   INVALID_REQUEST), −1 closes — acknowledgements are applied, the member's other
//!   records released, nothing fetched —, others continue. Errors are top-level.
//! - Acknowledgements: each partition's are applied all or nothing and made durable
//!   before the partition's `acknowledge_error_code` says NONE.
//! - Fetch: each partition of the session in turn gets what its share-partition
//!   acquires for the member from what the log returns (reading as Fetch does: whole
//!   batches, at most `max_bytes` and the connection's and broker's budgets, the first
//!   partition at least one batch, KIP-74; a read sized for `max_records`, growing
//!   from [`FIRST_READ_BYTES`], not all of `max_bytes`), at most `max_records` records
//!   in all; the
//!   acquisitions are durable before the records are answered. With nothing acquired
//!   the request waits for an append to one of the partitions, up to `max_wait_ms`
//!   (bounded by `server.max_fetch_wait_ms`), or for records to become available
//!   again (released, or a lock expired). `min_bytes` is read as 1: anything
//!   acquired is answered at once, since acquired records' locks are running.
//! - The response lists, after epoch 0, every requested partition; later, those with
//!   records, errors or acknowledgements.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use bytes::Bytes;
use drover_share::{Acquired, MemberId};
use kafka_protocol::{
    error::ResponseError,
    messages::{
        share_fetch_response::{
            AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
        },
        ShareFetchRequest, ShareFetchResponse,
    },
};
use tokio::time::Instant;
use uuid::Uuid;

use super::share_acks::{self, bounds, ids, partition_log, share_error};
use crate::{
    authz::{AclOperation, RequestAuthz, ResourceType},
    broker::{Broker, Partition},
    clock::now_ms,
    server::{
        budget::{Charge, ConnBudget},
        reply::Reply,
    },
    share::{
        log_read,
        sessions::{FetchSession, FetchStep, Origin, SessionError, SessionKey},
        ShareDelivery, ShareKey,
    },
};

/// Most records one ShareFetch acquires when the request sets no positive
/// `max_records` (the Java client's `max.poll.records` default).
pub const DEFAULT_MAX_RECORDS: usize = 500;

/// A partition to fetch or acknowledge, resolved.
#[derive(Clone)]
struct Target {
    topic_id: Uuid,
    partition: i32,
    key: ShareKey,
    log: Arc<Partition>,
}

/// What [`prepare`] decided, for [`serve`].
pub struct Prepared {
    member: MemberId,
    group: Arc<str>,
    /// After epoch 0: answer every requested partition.
    full: bool,
    /// Epoch −1: the session closed.
    closed: bool,
    acks: Vec<(Target, share_acks::WireAcks)>,
    fetch: Vec<Target>,
    /// Partitions answered with an error without a read.
    errors: Vec<(Uuid, i32, ResponseError)>,
    max_wait: Duration,
    max_bytes: usize,
    max_records: usize,
    /// Sessions evicted for this one: their members' records are released.
    evicted: Vec<SessionKey>,
}

fn top_level(error: ResponseError, lock_ms: u64) -> Reply {
    let mut response = ShareFetchResponse::default();
    response.error_code = error.code();
    response.acquisition_lock_timeout_ms = lock_ms.min(i32::MAX as u64) as i32;
    if error == ResponseError::ShareSessionLimitReached {
        // Clients retry a refused session at once; a throttle time makes them wait
        // (KIP-219) instead of asking tens of thousands of times a minute.
        response.throttle_time_ms = REFUSED_SESSION_THROTTLE_MS;
    }
    Reply::new(response, error.code())
}

/// How long a client refused a share session (SHARE_SESSION_LIMIT_REACHED) is asked to
/// wait before it tries again, ms: long against a retry loop, short against a session's
/// idle time (`share.session_idle_ms`), after which room may be made.
pub const REFUSED_SESSION_THROTTLE_MS: i32 = 1_000;

/// The ordered part of a ShareFetch from `origin` (module docs): a
/// request answered now is `Err` with its reply (boxed: it is large).
///
/// Authorization (Kafka's `handleShareFetchRequest`): Read on the group, else
/// GROUP_AUTHORIZATION_FAILED for the whole request; Read on each topic, else its
/// partitions are TOPIC_AUTHORIZATION_FAILED and not fetched.
pub fn prepare(
    broker: &Broker,
    authz: &RequestAuthz,
    origin: Origin,
    request: ShareFetchRequest,
) -> Result<Prepared, Box<Reply>> {
    let delivery = &broker.share;
    // Before the group is known: the broker's lock duration.
    let lock_ms = delivery.partitions.limits().record_lock_duration_ms;
    let (group, member) = ids(
        request.group_id.as_ref().map(|g| g.0.as_str()),
        request.member_id.as_deref(),
    )
    .map_err(|e| Box::new(top_level(e, lock_ms)))?;
    if !authz.allows(ResourceType::Group, &group, AclOperation::Read) {
        return Err(Box::new(top_level(
            ResponseError::GroupAuthorizationFailed,
            lock_ms,
        )));
    }
    let mut errors = Vec::new();
    let resolve = |topic_id: Uuid, partition: i32, errors: &mut Vec<_>| -> Option<Target> {
        let Some(topic) = broker.topics.get_by_id(topic_id) else {
            errors.push((topic_id, partition, ResponseError::UnknownTopicId));
            return None;
        };
        if !authz.allows(ResourceType::Topic, &topic.name, AclOperation::Read) {
            errors.push((topic_id, partition, ResponseError::TopicAuthorizationFailed));
            return None;
        }
        match partition_log(broker, &topic, partition) {
            Ok(log) => Some(Target {
                topic_id,
                partition,
                key: ShareKey {
                    group: Arc::clone(&group),
                    topic: Arc::from(topic.name.as_str()),
                    partition,
                },
                log,
            }),
            Err(e) => {
                errors.push((topic_id, partition, e));
                None
            }
        }
    };
    // The request's partitions: to fetch (added to the session) and to acknowledge.
    let mut named = Vec::new();
    let mut acks = Vec::new();
    let mut any_acks = false;
    for topic in &request.topics {
        for p in &topic.partitions {
            let batches: share_acks::WireAcks = p
                .acknowledgement_batches
                .iter()
                .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                .collect();
            any_acks |= !batches.is_empty();
            match resolve(topic.topic_id, p.partition_index, &mut errors) {
                Some(target) => {
                    if !batches.is_empty() {
                        acks.push((target.clone(), batches));
                    }
                    named.push((topic.topic_id, p.partition_index));
                }
                // A partition this broker does not serve right now (a restarted leader
                // before it is back in the cluster) still joins the session, as Kafka's
                // share session keeps every partition a request adds: the client counts
                // it as added and fetches it incrementally from then on, so leaving it
                // out would starve it for the session's life.
                None if matches!(
                    errors.last(),
                    Some((_, _, ResponseError::NotLeaderOrFollower))
                ) =>
                {
                    named.push((topic.topic_id, p.partition_index));
                }
                None => {}
            }
        }
    }
    let forget: Vec<(Uuid, i32)> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.topic_id, p)))
        .collect();
    let key = SessionKey {
        group: Arc::clone(&group),
        member: Arc::clone(&member),
    };
    let epoch = request.share_session_epoch;
    // Epoch −1 names partitions only to acknowledge them.
    let to_fetch: &[(Uuid, i32)] = if epoch == -1 { &[] } else { &named };
    let step = delivery
        .sessions()
        .fetch(
            &key,
            origin,
            FetchStep {
                epoch,
                fetch: to_fetch,
                forget: &forget,
                acks: any_acks,
            },
            now_ms(),
        )
        .map_err(|e| {
            if e == SessionError::LimitReached {
                crate::info_limited!(
                    "share.session_limit",
                    client = %origin.addr,
                    "share session refused: SHARE_SESSION_LIMIT_REACHED (share.max_sessions \
                     or share.max_sessions_per_client, and no session idle for \
                     share.session_idle_ms)"
                );
            }
            Box::new(top_level(e.error(), lock_ms))
        })?;
    let (full, closed, evicted, session_partitions) = match step {
        FetchSession::Opened {
            evicted,
            partitions,
            ..
        } => (true, false, evicted, partitions),
        FetchSession::Continued { partitions } => (false, false, Vec::new(), partitions),
        FetchSession::Closed => (false, true, Vec::new(), Vec::new()),
    };
    let mut fetch = Vec::new();
    let mut session_errors = Vec::new();
    for (topic_id, partition) in session_partitions {
        if let Some(t) = resolve(topic_id, partition, &mut session_errors) {
            fetch.push(t);
        }
    }
    errors.extend(session_errors);
    errors.sort_by_key(|e| (e.0, e.1));
    errors.dedup_by_key(|e| (e.0, e.1));
    let max_wait = Duration::from_millis(
        (request.max_wait_ms.max(0) as u64).min(broker.config.server.max_fetch_wait_ms),
    );
    let cap = broker.config.server.fetch_max_bytes as usize;
    let max_bytes = if request.max_bytes <= 0 {
        cap
    } else {
        (request.max_bytes as usize).min(cap)
    };
    let limit = delivery.partitions.limits().max_record_locks as usize;
    let max_records = if request.max_records <= 0 {
        DEFAULT_MAX_RECORDS
    } else {
        request.max_records as usize
    }
    .min(limit);
    Ok(Prepared {
        member,
        group,
        full,
        closed,
        acks,
        fetch,
        errors,
        max_wait,
        max_bytes,
        max_records,
        evicted,
    })
}

/// The deferred part (module docs): acknowledgements, then the long poll.
pub async fn serve(
    broker: &Arc<Broker>,
    budget: &Arc<ConnBudget>,
    mut prepared: Prepared,
) -> Reply {
    let delivery = Arc::clone(&broker.share);
    let lock_ms = delivery.settings(&prepared.group).lock_duration_ms;
    let mut out: BTreeMap<(Uuid, i32), PartitionData> = BTreeMap::new();
    let leader = broker.identity.node.id;
    let blank = |partition: i32| {
        let mut data = PartitionData::default();
        data.partition_index = partition;
        data.current_leader = LeaderIdAndEpoch::default()
            .with_leader_id(leader)
            .with_leader_epoch(0);
        data.records = Some(Bytes::new());
        data
    };
    for (topic_id, partition, error) in &prepared.errors {
        let mut data = blank(*partition);
        data.error_code = error.code();
        out.insert((*topic_id, *partition), data);
    }
    // Acknowledgements first, each durable before it is answered; then, on close, the
    // member's other records go back; evicted sessions' members' too.
    let acks = {
        let delivery = Arc::clone(&delivery);
        let member = Arc::clone(&prepared.member);
        let group = Arc::clone(&prepared.group);
        let acks = std::mem::take(&mut prepared.acks);
        let closed = prepared.closed;
        let evicted = std::mem::take(&mut prepared.evicted);
        tokio::task::spawn_blocking(move || {
            let results: Vec<(Uuid, i32, i16)> = acks
                .iter()
                .map(|(t, batches)| {
                    let code =
                        share_acks::apply(&delivery, &t.key, t.topic_id, &t.log, &member, batches)
                            .err()
                            .map_or(0, |e| e.code());
                    (t.topic_id, t.partition, code)
                })
                .collect();
            let now = now_ms();
            if closed {
                delivery.partitions.release_member(&group, &member, now);
            }
            for gone in evicted {
                delivery
                    .partitions
                    .release_member(&gone.group, &gone.member, now);
            }
            results
        })
        .await
        .unwrap_or_default()
    };
    for (topic_id, partition, code) in acks {
        out.entry((topic_id, partition))
            .or_insert_with(|| blank(partition))
            .acknowledge_error_code = code;
    }
    if prepared.full {
        for t in &prepared.fetch {
            out.entry((t.topic_id, t.partition))
                .or_insert_with(|| blank(t.partition));
        }
    }
    let mut charge = None;
    if !prepared.closed && !prepared.fetch.is_empty() {
        let (fetched, c) = long_poll(broker, budget, &delivery, &prepared).await;
        charge = c;
        for (t, result) in prepared.fetch.iter().zip(fetched) {
            let entry = match result {
                Fetched::Nothing => continue,
                Fetched::Error(e) => {
                    let data = out
                        .entry((t.topic_id, t.partition))
                        .or_insert_with(|| blank(t.partition));
                    data.error_code = e.code();
                    continue;
                }
                Fetched::Records(records, acquired) => (records, acquired),
            };
            let data = out
                .entry((t.topic_id, t.partition))
                .or_insert_with(|| blank(t.partition));
            data.records = Some(entry.0);
            data.acquired_records = entry
                .1
                .iter()
                .map(|r| {
                    AcquiredRecords::default()
                        .with_first_offset(r.first_offset)
                        .with_last_offset(r.last_offset)
                        .with_delivery_count(i16::try_from(r.delivery_count).unwrap_or(i16::MAX))
                })
                .collect();
        }
    }
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    let mut first_error = 0;
    for ((topic_id, _), data) in out {
        if first_error == 0 {
            first_error = if data.error_code != 0 {
                data.error_code
            } else {
                data.acknowledge_error_code
            };
        }
        topics.entry(topic_id).or_default().push(data);
    }
    let mut response = ShareFetchResponse::default();
    response.acquisition_lock_timeout_ms = lock_ms.min(i32::MAX as u64) as i32;
    response.responses = topics
        .into_iter()
        .map(|(topic_id, partitions)| {
            ShareFetchableTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect();
    let mut reply = Reply::new(response, first_error);
    reply.charge = charge;
    reply
}

/// One partition's part of a fetch.
enum Fetched {
    /// Nothing acquired.
    Nothing,
    /// The partition could not be served.
    Error(ResponseError),
    /// The batches holding the acquired offsets, and the acquired ranges.
    Records(Bytes, Vec<drover_share::AcquiredRange>),
}

/// Acquires for the member until something is acquired, the deadline passes or
/// shutdown starts, waking on appends to the session's partitions and on records
/// released anywhere (module docs).
async fn long_poll(
    broker: &Arc<Broker>,
    budget: &Arc<ConnBudget>,
    delivery: &Arc<ShareDelivery>,
    prepared: &Prepared,
) -> (Vec<Fetched>, Option<Charge>) {
    let deadline = Instant::now() + prepared.max_wait;
    let mut appended: Vec<_> = {
        let mut seen = std::collections::HashSet::new();
        prepared
            .fetch
            .iter()
            .filter(|t| seen.insert(Arc::as_ptr(&t.log) as usize))
            .map(|t| t.log.subscribe_appends())
            .collect()
    };
    let mut stopping = broker.stopping();
    let mut available = delivery.partitions.subscribe_available();
    let targets = Arc::new(prepared.fetch.clone());
    loop {
        for rx in appended.iter_mut() {
            rx.borrow_and_update();
        }
        available.borrow_and_update();
        let charge = budget.try_reserve(prepared.max_bytes);
        let grant = charge.as_ref().map_or(0, Charge::bytes);
        let (fetched, total, any) = {
            let delivery = Arc::clone(delivery);
            let targets = Arc::clone(&targets);
            let member = Arc::clone(&prepared.member);
            let max_records = prepared.max_records;
            tokio::task::spawn_blocking(move || {
                acquire_all(&delivery, &targets, &member, grant, max_records)
            })
            .await
            .unwrap_or_else(|_| (Vec::new(), 0, false))
        };
        let starved = charge.is_none();
        if any || Instant::now() >= deadline {
            let charge = charge.map(|mut c| {
                c.resize(total);
                c
            });
            return (fetched, charge);
        }
        drop(charge);
        let any_append = async {
            let waits = appended.iter_mut().map(|rx| Box::pin(rx.changed()));
            let _ = futures_util::future::select_all(waits).await;
        };
        let woke = tokio::select! {
            changed = tokio::time::timeout_at(deadline, any_append) => changed.is_ok(),
            released = tokio::time::timeout_at(deadline, available.changed()) => released.is_ok(),
            _ = budget.wait_available(), if starved => true,
            _ = stopping.wait_for(|stop| *stop) => false,
        };
        if !woke {
            return (fetched, None);
        }
    }
}

/// One pass over every target on the blocking pool: (results in target order, record
/// bytes, whether anything was acquired or failed).
fn acquire_all(
    delivery: &ShareDelivery,
    targets: &[Target],
    member: &MemberId,
    max_bytes: usize,
    max_records: usize,
) -> (Vec<Fetched>, usize, bool) {
    let mut left_bytes = max_bytes;
    let mut left_records = max_records;
    let mut total = 0usize;
    let mut any = false;
    // One group per request: its `share.isolation.level`.
    let read_committed = targets
        .first()
        .is_some_and(|t| delivery.settings(&t.key.group).read_committed);
    let out = targets
        .iter()
        .map(|t| {
            // KIP-74: the first partition with records may exceed the byte limit by
            // one batch; with no grant at all nothing is read.
            let limit = if max_bytes == 0 || left_records == 0 {
                0
            } else if total == 0 {
                left_bytes.max(1)
            } else {
                left_bytes
            };
            if limit == 0 {
                return Fetched::Nothing;
            }
            match acquire_one(delivery, t, member, limit, left_records, read_committed) {
                Ok(None) => Fetched::Nothing,
                Ok(Some((bytes, acquired))) => {
                    any = true;
                    total += bytes.len();
                    left_bytes = left_bytes.saturating_sub(bytes.len());
                    left_records = left_records.saturating_sub(acquired.count);
                    Fetched::Records(bytes, acquired.ranges)
                }
                Err(e) => {
                    any = true;
                    Fetched::Error(e)
                }
            }
        })
        .collect();
    (out, total, any)
}

/// Reads one share-partition's log from where it says and acquires for `member`;
/// `None` when nothing was acquired.
fn acquire_one(
    delivery: &ShareDelivery,
    t: &Target,
    member: &MemberId,
    max_bytes: usize,
    max_records: usize,
    committed: bool,
) -> Result<Option<(Bytes, Acquired)>, ResponseError> {
    let slot = delivery
        .partitions
        .slot(&t.key)
        .map_err(|e| share_error(&e))?;
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    let now = now_ms();
    let (log_bounds, offset_at) = bounds(&t.log);
    let partition = delivery
        .partitions
        .load(
            &t.key,
            &mut slot,
            *t.topic_id.as_bytes(),
            log_bounds,
            now,
            offset_at,
        )
        .map_err(|e| share_error(&e))?;
    let Some(from) = partition.next_fetch_offset() else {
        return Ok(None);
    };
    if from >= log_bounds.end {
        return Ok(None);
    }
    let (read, batches) = read_for(t, from, max_bytes, max_records, committed)?;
    let headers: Vec<_> = batches.iter().map(|b| b.batch).collect();
    let aborted = if committed {
        log_read::aborted(&read.aborted)
    } else {
        Vec::new()
    };
    let acquired = partition.acquire(member, now, from, &headers, &aborted, max_records);
    if let Some(snapshot) = &acquired.persist {
        // Durable before the records leave (KIP-932: acquired counts as delivered).
        delivery
            .partitions
            .persist(&t.key, &mut slot, snapshot, now)
            .map_err(|e| share_error(&e))?;
    }
    if acquired.ranges.is_empty() {
        return Ok(None);
    }
    let bytes = log_read::acquired_bytes(&read.records, &batches, &acquired.ranges);
    Ok(Some((bytes, acquired)))
}

/// The first read of a share-partition's log for one acquisition, bytes: the read grows
/// fourfold from here up to the request's `max_bytes` until it holds `max_records`
/// records past `from`.
pub const FIRST_READ_BYTES: usize = 256 * 1024;

/// Reads `t`'s log from `from` for an acquisition of at most `max_records` records:
/// the read and its whole batches. A share fetch asks for a few hundred records
/// (`max_records`) within `max_bytes` (librdkafka sends its `fetch.max.bytes`, 50 MiB),
/// and reading all of `max_bytes` each time — zeroed, copied, then mostly left out —
/// made every fetch cost the size of the log behind it. So the read starts at
/// [`FIRST_READ_BYTES`] and grows fourfold while it holds fewer than `max_records`
/// records from `from` on, was not cut short by the end of a segment or the log, and
/// is under `max_bytes`: at most about 4/3 of the bytes needed are read in all.
/// Records already acquired or acknowledged count too, so a fetch behind other
/// members' acquisitions may get fewer than `max_records`, never none while some are
/// available in the read.
///
/// Errors: the log's, as Kafka error codes.
fn read_for(
    t: &Target,
    from: i64,
    max_bytes: usize,
    max_records: usize,
    committed: bool,
) -> Result<(crate::log::ReadResult, Vec<log_read::ReadBatch>), ResponseError> {
    let mut limit = FIRST_READ_BYTES.min(max_bytes).max(1);
    loop {
        let planned = {
            let log = t.log.lock_log();
            if committed {
                log.plan_read_committed(from, limit)
            } else {
                log.plan_read(from, limit)
            }
        };
        let read = planned
            .and_then(|p| p.execute())
            .map_err(|e| super::errors::log_error(&e))?;
        let batches = log_read::batches(&read.records);
        let records: i64 = batches
            .iter()
            .map(|b| (b.batch.last_offset - b.batch.first_offset.max(from) + 1).max(0))
            .sum();
        let enough = usize::try_from(records).unwrap_or(usize::MAX) >= max_records;
        let short = read.records.len() < limit;
        if enough || short || limit >= max_bytes {
            return Ok((read, batches));
        }
        limit = limit.saturating_mul(4).min(max_bytes);
    }
}
