//! The cluster task: keeps a ZooKeeper session, this broker's registration, the view
//! of brokers, topics and slot owners, the local copies of topics, and the slots this
//! broker's coordinator owns.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    pin::Pin,
    sync::Arc,
    time::{Duration, Instant},
};

use zookeeper_client as zk;

use super::{
    liveness::{keepalive, Liveness},
    BrokerAddr, Cluster, ClusterView, TopicPlacement, BROKERS, CLUSTER_ID, SLOTS, TOPICS,
};
use crate::broker::Broker;

/// How often the view is re-read besides watches (topic data changes, slot claims).
const REFRESH: Duration = Duration::from_millis(500);

fn options() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(crate::cluster::acl::nodes())
}

/// Connects, registers, follows the cluster; reconnects with a new session after an
/// expiry; stops at broker shutdown.
pub async fn run(broker: Arc<Broker>, cluster: Arc<Cluster>) {
    let mut stopping = broker.stopping();
    let mut backoff = Duration::from_millis(200);
    loop {
        let session = tokio::select! {
            s = session(&broker, &cluster) => s,
            _ = stopping.wait_for(|s| *s) => Ok(()),
        };
        give_up_slots(&broker, &cluster, "the ZooKeeper session ended").await;
        cluster.set_client(None);
        cluster.update(|v| {
            v.connected = false;
            v.slots.clear();
        });
        broker.metrics.zookeeper_connected(false);
        if *stopping.borrow() {
            return;
        }
        match session {
            Ok(()) => tracing::warn!("ZooKeeper session ended; registering again"),
            Err(e) => tracing::warn!("ZooKeeper: {e}; retrying in {backoff:?}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Tells the coordinator it no longer owns any slot.
async fn give_up_slots(broker: &Broker, cluster: &Cluster, why: &str) {
    let owned: Vec<u32> =
        std::mem::take(&mut *cluster.owned.lock().unwrap_or_else(|e| e.into_inner()))
            .into_iter()
            .collect();
    if owned.is_empty() {
        return;
    }
    cluster.owned_changed.notify_one();
    tracing::warn!(slots = ?owned, "giving up coordinator slots: {why}");
    for &slot in &owned {
        stop_slot(broker, cluster, slot).await;
    }
}

/// Tells the coordinator it no longer owns `slot`, and remembers when it stopped.
async fn stop_slot(broker: &Broker, cluster: &Cluster, slot: u32) {
    // The transaction coordinator stops serving the slot's transactional ids at once
    // (its state is dropped by `txn::slots` shortly after).
    let zk = broker.transactions().zk_store();
    let _handover = match zk {
        Some(zk) => Some(zk.offsets_slots.handover().await),
        None => None,
    };
    if let Some(zk) = zk {
        zk.give_up(slot);
        zk.offsets_slots.lost(slot);
    }
    if let Some(c) = broker.coordinator() {
        c.slot_lost(slot).await;
    }
    cluster
        .stopped_at
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(slot, Instant::now());
}

/// A lower bound, in ms, of how long slot `slot`'s previous owner has not coordinated
/// it, when this broker gains it (docs/protocol.md §6.8): this broker itself, since it
/// gave the slot up; another broker whose session has expired (it is gone from the
/// live brokers), `session − guard − 100 ms`, since every broker stops coordinating
/// `guard` after its last answer from ZooKeeper and the session expires no earlier
/// than `session` after it; otherwise (a live owner handing the slot back, or an owner
/// not seen) 0.
fn previous_owner_stopped_ms(
    cluster: &Cluster,
    slot: u32,
    previous: &ClusterView,
    now_live: &BTreeMap<i32, BrokerAddr>,
    session: Duration,
) -> u64 {
    match previous.slots.get(&slot) {
        Some(&owner) if owner == cluster.me => cluster
            .stopped_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&slot)
            .map_or(0, |t| t.elapsed().as_millis() as u64),
        Some(owner) if previous.connected && !now_live.contains_key(owner) => {
            let session = session.as_millis() as u64;
            session.saturating_sub(cluster.settings.slot_guard() + GUARD_MARGIN_MS)
        }
        _ => 0,
    }
}

/// Allowance for the time between a broker's guard expiring and its coordinator
/// having stopped, and for clock-rate differences, ms.
const GUARD_MARGIN_MS: u64 = 100;

/// One session: connect, register, then follow until it expires.
async fn session(broker: &Arc<Broker>, cluster: &Arc<Cluster>) -> Result<(), String> {
    let settings = &cluster.settings;
    let mut connector = zk::Client::connector()
        .with_session_timeout(Duration::from_millis(settings.session_timeout_ms))
        .with_connection_timeout(Duration::from_millis(settings.session_timeout_ms));
    if let Some(digest) = super::acl::digest() {
        // zookeeper.auth_digest_file: the session's identity, which owns its nodes.
        connector = connector.with_auth("digest", digest);
    }
    let root = connector
        .connect(&settings.connect)
        .await
        .map_err(|e| format!("connecting to {}: {e}", settings.connect))?;
    if settings.chroot != "/" {
        match root.mkdir(&settings.chroot, &options()).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(format!("creating {}: {e}", settings.chroot)),
        }
    }
    let client = root
        .chroot(settings.chroot.clone())
        .map_err(|_| format!("bad chroot {}", settings.chroot))?;
    for path in [BROKERS, TOPICS, SLOTS] {
        match client.mkdir(path, &options()).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(format!("creating {path}: {e}")),
        }
    }
    // zookeeper.auth_digest_file: nodes made before it was configured get its ACL.
    if let Some(done) = super::acl::restrict_existing(&client, &settings.chroot).await? {
        tracing::info!(
            nodes = done.nodes,
            changed = done.changed,
            refused = done.refused,
            chroot = %settings.chroot,
            "zookeeper: existing nodes checked against the digest ACL"
        );
    }
    cluster.set_cluster_id(agree_cluster_id(&client, &broker.identity.cluster_id).await?);
    let registered_at = Instant::now();
    register(&client, cluster).await?;
    tracing::info!(
        broker = cluster.me,
        session = %client.session_id(),
        zookeeper = %settings.connect,
        chroot = %settings.chroot,
        "registered in the cluster"
    );
    cluster.set_client(Some(client.clone()));
    broker.metrics.zookeeper_connected(true);
    cluster.update(|v| v.connected = true);

    let mut state = client.state_watcher();
    let mut disconnected_since: Option<Instant> = None;
    let mut timers = SlotTimers::default();
    let session_timeout = client
        .session_timeout()
        .min(Duration::from_millis(settings.session_timeout_ms));
    let guard = Duration::from_millis(settings.slot_guard());
    // The slot guard: coordinating is safe only until `guard` after the start of the
    // last request ZooKeeper answered (the server heard from us after that start, so our
    // session cannot expire before `session_timeout` after it). The keepalive pings on
    // its own, so a long refresh does not starve it.
    let alive = Liveness::new(registered_at, guard);
    let me = format!("{BROKERS}/{}", cluster.me);
    let _keepalive = keepalive(client.clone(), me, Arc::clone(&alive));
    let mut refresh_tick = tokio::time::interval(REFRESH);
    refresh_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    refresh_tick.tick().await;
    let mut refresh_due = true;
    let mut watch_fired: Pin<Box<dyn Future<Output = ()> + Send>> =
        Box::pin(std::future::pending());
    loop {
        if refresh_due && disconnected_since.is_none() {
            refresh_due = false;
            let started = Instant::now();
            // Slots claimed by the refresh are gained only while the slot guard holds.
            let sessions = Sessions {
                session_timeout,
                alive: &alive,
            };
            let owns_slots = owns_any(cluster);
            let outcome = tokio::select! {
                r = tokio::time::timeout(
                    session_timeout,
                    refresh(broker, cluster, &client, &mut timers, sessions),
                ) => Some(r),
                // A refresh stuck on an unanswered request must not keep us
                // coordinating past the guard; it is dropped and starts over.
                _ = alive.expired(), if owns_slots => None,
            };
            match outcome {
                Some(Ok(Ok(watches))) => {
                    alive.answered(started);
                    // Brokers joining or leaving and slots freed or claimed trigger the
                    // next refresh at once.
                    watch_fired = Box::pin(async move {
                        if watches.is_empty() {
                            std::future::pending::<()>().await;
                        }
                        let changed = watches.into_iter().map(|w| Box::pin(w.changed()));
                        futures_util::future::select_all(changed).await;
                    });
                }
                Some(Ok(Err(zk::Error::SessionExpired))) => return Err("session expired".into()),
                Some(Ok(Err(e))) => tracing::debug!("cluster refresh: {e}"),
                Some(Err(_)) => {
                    tracing::debug!("cluster refresh: no answer within the session timeout");
                    refresh_due = true;
                }
                None => {
                    give_up_slots(
                        broker,
                        cluster,
                        &format!("no answer from ZooKeeper for the slot guard ({guard:?})"),
                    )
                    .await;
                    refresh_due = true;
                }
            }
        }
        let owns_slots = owns_any(cluster);
        tokio::select! {
            s = state.changed() => match s {
                zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed => {
                    return Err(format!("session {s:?}"));
                }
                zk::SessionState::Disconnected => {
                    tracing::warn!("ZooKeeper connection lost; serving local partitions meanwhile");
                    broker.metrics.zookeeper_connected(false);
                    cluster.update(|v| v.connected = false);
                    disconnected_since.get_or_insert_with(Instant::now);
                    // The session may expire on the server at any moment from now (its
                    // timer started when the server last heard from us), and another
                    // broker may then claim our slots: stop coordinating at once. The
                    // slots are gained again (after the takeover wait) if the session
                    // survives the disconnection.
                    give_up_slots(broker, cluster, "disconnected from ZooKeeper").await;
                }
                _ => {
                    if disconnected_since.take().is_some() {
                        tracing::info!("ZooKeeper connection restored");
                    }
                    broker.metrics.zookeeper_connected(true);
                    cluster.update(|v| v.connected = true);
                    refresh_due = true;
                }
            },
            _ = alive.expired(), if owns_slots => {
                give_up_slots(
                    broker,
                    cluster,
                    &format!("no answer from ZooKeeper for the slot guard ({guard:?})"),
                )
                .await;
            }
            _ = &mut watch_fired => {
                watch_fired = Box::pin(std::future::pending());
                refresh_due = true;
            }
            _ = refresh_tick.tick() => refresh_due = true,
        }
        if let Some(since) = disconnected_since {
            if since.elapsed() >= session_timeout {
                tracing::debug!(
                    "ZooKeeper unreachable for {:?}: the session has surely expired",
                    since.elapsed()
                );
            }
        }
    }
}

/// Whether this broker's coordinator owns any slot.
fn owns_any(cluster: &Cluster) -> bool {
    !cluster
        .owned
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_empty()
}

/// What slot claims need to know about sessions.
#[derive(Clone, Copy)]
struct Sessions<'a> {
    /// The ZooKeeper session timeout (the negotiated one, if shorter).
    session_timeout: Duration,
    /// The slot guard: coordinating is safe while it holds.
    alive: &'a Liveness,
}

/// The cluster's id: the one in [`CLUSTER_ID`], or, when no broker stored one yet,
/// `local` (this broker's own id), stored with a conditional create so that of brokers
/// starting at once exactly one id wins and every broker reads it back.
async fn agree_cluster_id(client: &zk::Client, local: &str) -> Result<String, String> {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct IdNode {
        version: String,
        id: String,
    }
    match client.mkdir("/cluster", &options()).await {
        Ok(()) | Err(zk::Error::NodeExists) => {}
        Err(e) => return Err(format!("creating /cluster: {e}")),
    }
    let node = IdNode {
        version: "1".into(),
        id: local.to_owned(),
    };
    let data = serde_json::to_vec(&node).unwrap_or_default();
    match client.create(CLUSTER_ID, &data, &options()).await {
        Ok(_) => return Ok(node.id),
        Err(zk::Error::NodeExists) => {}
        Err(e) => return Err(format!("creating {CLUSTER_ID}: {e}")),
    }
    let (data, _) = client
        .get_data(CLUSTER_ID)
        .await
        .map_err(|e| format!("reading {CLUSTER_ID}: {e}"))?;
    serde_json::from_slice::<IdNode>(&data)
        .map(|n| n.id)
        .map_err(|e| format!("{CLUSTER_ID}: {e}"))
}

/// Creates this broker's ephemeral node, waiting for a previous session's node (a
/// restart within the session timeout) to expire.
async fn register(client: &zk::Client, cluster: &Cluster) -> Result<(), String> {
    let path = format!("{BROKERS}/{}", cluster.me);
    let data = serde_json::to_vec(&cluster.addr).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_millis(cluster.settings.session_timeout_ms * 3);
    loop {
        match client.create(&path, &data, &ephemeral()).await {
            Ok(_) => return Ok(()),
            Err(zk::Error::NodeExists) if Instant::now() < deadline => {
                tracing::info!(
                    broker = cluster.me,
                    "broker id {} is registered by an earlier session; waiting for it to expire",
                    cluster.me
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(zk::Error::NodeExists) => {
                return Err(format!(
                    "broker id {} is registered by another live broker",
                    cluster.me
                ))
            }
            Err(e) => return Err(format!("registering {path}: {e}")),
        }
    }
}

/// Since when each slot has been unowned, and since when each slot we own has had a
/// live preferred owner other than us.
#[derive(Default)]
struct SlotTimers {
    unowned: BTreeMap<u32, Instant>,
    handback: BTreeMap<u32, Instant>,
}

/// Re-reads brokers, topics and slots; syncs local topics; claims slots.
async fn refresh(
    broker: &Arc<Broker>,
    cluster: &Arc<Cluster>,
    client: &zk::Client,
    timers: &mut SlotTimers,
    sessions: Sessions<'_>,
) -> Result<Vec<zk::OneshotWatcher>, zk::Error> {
    let mut brokers = BTreeMap::new();
    let (ids, brokers_watch) = client.list_and_watch_children(BROKERS).await?;
    for id in ids {
        let Ok(n) = id.parse::<i32>() else { continue };
        match client.get_data(&format!("{BROKERS}/{id}")).await {
            Ok((data, _)) => {
                if let Ok(addr) = serde_json::from_slice::<BrokerAddr>(&data) {
                    brokers.insert(n, addr);
                }
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
    let mut owners = BTreeMap::new();
    let (names, slots_watch) = client.list_and_watch_children(SLOTS).await?;
    for name in names {
        let Ok(slot) = name.parse::<u32>() else {
            continue;
        };
        match client.get_data(&format!("{SLOTS}/{name}")).await {
            Ok((data, _)) => {
                if let Some(owner) = serde_json::from_slice::<serde_json::Value>(&data)
                    .ok()
                    .and_then(|v| v["broker"].as_i64())
                {
                    owners.insert(slot, owner as i32);
                }
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
    // Claim free slots: at once when preferred (slot mod live brokers), else after the
    // claim delay.
    let live: Vec<i32> = brokers.keys().copied().collect();
    let delay = Duration::from_millis(cluster.settings.slot_claim_delay_ms);
    if !live.is_empty() {
        for slot in 0..cluster.settings.slots {
            if owners.contains_key(&slot) {
                timers.unowned.remove(&slot);
                continue;
            }
            let since = *timers.unowned.entry(slot).or_insert_with(Instant::now);
            let preferred = live[slot as usize % live.len()] == cluster.me;
            if !preferred && since.elapsed() < delay {
                continue;
            }
            let data = serde_json::json!({ "broker": cluster.me }).to_string();
            match client
                .create(&format!("{SLOTS}/{slot}"), data.as_bytes(), &ephemeral())
                .await
            {
                Ok(_) => {
                    owners.insert(slot, cluster.me);
                    timers.unowned.remove(&slot);
                }
                Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
    }
    // Hand back slots whose preferred owner is another live broker (one that joined
    // after we claimed them), once it has been live for the claim delay: slots spread
    // again after a broker joins or returns.
    if !live.is_empty() {
        let mine: Vec<u32> = owners
            .iter()
            .filter(|(_, o)| **o == cluster.me)
            .map(|(s, _)| *s)
            .collect();
        for slot in mine {
            let preferred = live[slot as usize % live.len()];
            if preferred == cluster.me {
                timers.handback.remove(&slot);
                continue;
            }
            let since = *timers.handback.entry(slot).or_insert_with(Instant::now);
            if since.elapsed() >= delay {
                // Stop coordinating the slot before anyone else can claim it.
                let was_owned = cluster
                    .owned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&slot);
                if was_owned {
                    cluster.owned_changed.notify_one();
                    stop_slot(broker, cluster, slot).await;
                }
                match client.delete(&format!("{SLOTS}/{slot}"), None).await {
                    Ok(()) | Err(zk::Error::NoNode) => {
                        tracing::info!(
                            slot,
                            to = preferred,
                            "handing a coordinator slot to its preferred owner"
                        );
                        owners.remove(&slot);
                        timers.handback.remove(&slot);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    // Topics before slots: a slot gained here has its transactions taken over at once
    // (txn::slots), and their markers are routed by the topics' leaders in the view.
    let mut topics = BTreeMap::new();
    for name in client.list_children(TOPICS).await? {
        match client.get_data(&format!("{TOPICS}/{name}")).await {
            Ok((data, _)) => {
                if let Ok(p) = serde_json::from_slice::<TopicPlacement>(&data) {
                    topics.insert(name, p);
                }
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
    let view = ClusterView {
        connected: true,
        brokers,
        topics,
        slots: owners,
    };
    sync_local_topics(broker, &view).await;
    // Only the topics: `sync_slots` compares the slots and brokers with the view before.
    cluster.update(|v| v.topics = view.topics.clone());
    sync_slots(broker, cluster, &view, sessions).await;
    cluster.update(|v| *v = view);
    Ok(vec![brokers_watch, slots_watch])
}

/// Makes the local topic registry match ZooKeeper: same topics, ids, partition counts.
async fn sync_local_topics(broker: &Arc<Broker>, view: &ClusterView) {
    let broker = Arc::clone(broker);
    let topics = view.topics.clone();
    let _ = tokio::task::spawn_blocking(move || {
        let max = broker.config.topics.max_partitions.max(1);
        for (name, placement) in &topics {
            let count = placement.leaders.len() as u32;
            match broker.topics.get(name) {
                Some(t) if t.id == placement.id => {
                    if (t.partitions.len() as u32) < count {
                        if let Err(e) = broker.topics.add_partitions(name, i64::from(count), max) {
                            tracing::warn!(topic = %name, "growing the local copy: {e}");
                        }
                    }
                    if broker.topics.overrides(name) != placement.configs {
                        match broker.topics.set_overrides(name, &placement.configs, true) {
                            Ok(()) => tracing::info!(topic = %name, "topic configs changed"),
                            Err(e) => tracing::warn!(topic = %name, "applying topic configs: {e}"),
                        }
                    }
                }
                Some(_) => {
                    // Re-created with another id: replace the local copy.
                    let _ = broker.topics.delete(name);
                    if let Err(e) = broker.topics.create_with_configs(
                        name,
                        placement.id,
                        i64::from(count),
                        max,
                        &placement.configs,
                    ) {
                        tracing::warn!(topic = %name, "re-creating the local copy: {e}");
                    }
                }
                None => {
                    if let Err(e) = broker.topics.create_with_configs(
                        name,
                        placement.id,
                        i64::from(count),
                        max,
                        &placement.configs,
                    ) {
                        tracing::warn!(topic = %name, "creating the local copy: {e}");
                    }
                }
            }
        }
        let local: BTreeSet<String> = broker
            .topics
            .list()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        for name in local {
            if !topics.contains_key(&name) {
                match broker.topics.delete(&name) {
                    Ok(_) => tracing::info!(topic = %name, "topic deleted in the cluster"),
                    Err(e) => tracing::warn!(topic = %name, "deleting the local copy: {e}"),
                }
            }
        }
    })
    .await;
}

/// Tells the coordinator about slots gained and lost. A slot is gained only while the
/// slot guard holds; each with how long its previous owner has surely not coordinated
/// it ([`previous_owner_stopped_ms`]).
async fn sync_slots(
    broker: &Broker,
    cluster: &Cluster,
    view: &ClusterView,
    sessions: Sessions<'_>,
) {
    let previous = cluster.view();
    let safe = sessions.alive.holds();
    let mine: BTreeSet<u32> = view
        .slots
        .iter()
        .filter(|(_, owner)| **owner == cluster.me)
        .map(|(slot, _)| *slot)
        .collect();
    let (gained, lost) = {
        let mut owned = cluster.owned.lock().unwrap_or_else(|e| e.into_inner());
        let gained: Vec<u32> = if safe {
            mine.difference(&owned).copied().collect()
        } else {
            Vec::new()
        };
        let lost: Vec<u32> = owned.difference(&mine).copied().collect();
        for slot in &lost {
            owned.remove(slot);
        }
        owned.extend(gained.iter().copied());
        (gained, lost)
    };
    if !gained.is_empty() || !lost.is_empty() {
        cluster.owned_changed.notify_one();
    }
    for slot in lost {
        tracing::info!(slot, "coordinator slot lost");
        stop_slot(broker, cluster, slot).await;
    }
    // Transactional offsets: the transaction store's takeover of each gained slot
    // fences its previous owner; only then are the slot's staged offsets read, and the
    // plugin gets them with the slot (txn::group_offsets::slot_states). The wait is
    // bounded: a slot not taken over by then is deferred, and handed to the plugin by
    // the outcome follower once it is.
    let txn_zk = broker.transactions().zk_store().cloned();
    if let Some(zk) = &txn_zk {
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        while gained.iter().any(|s| zk.epoch(*s).is_none()) && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    let Some(c) = broker.coordinator() else {
        return;
    };
    for slot in gained {
        // The wait above may have outlived the guard: hand nothing over then (the
        // session loop gives every owned slot up at once; they are gained again).
        if !sessions.alive.holds() {
            break;
        }
        let stopped_ms = previous_owner_stopped_ms(
            cluster,
            slot,
            &previous,
            &view.brokers,
            sessions.session_timeout,
        );
        let Some(zk) = &txn_zk else {
            tracing::info!(
                slot,
                previous_owner_stopped_ms = stopped_ms,
                "coordinator slot gained"
            );
            let _ = c.slot_gained(slot, stopped_ms, Vec::new()).await;
            continue;
        };
        let staged = match zk.epoch(slot) {
            Some(_) => crate::txn::group_offsets::outcome::staged_of_slot(cluster, slot)
                .await
                .map_err(|e| tracing::warn!(slot, "staged transactional offsets not read: {e}"))
                .ok(),
            None => None,
        };
        let _handover = zk.offsets_slots.handover().await;
        match staged {
            Some(staged) => {
                tracing::info!(
                    slot,
                    previous_owner_stopped_ms = stopped_ms,
                    staged_nodes = staged.len(),
                    "coordinator slot gained"
                );
                if c.slot_gained(slot, stopped_ms, staged).await.is_ok() {
                    zk.offsets_slots.restored(slot);
                }
            }
            None => {
                tracing::info!(
                    slot,
                    previous_owner_stopped_ms = stopped_ms,
                    "coordinator slot gained; handed to the coordinator once its transactions are taken over"
                );
                zk.offsets_slots.defer(slot, stopped_ms);
            }
        }
    }
}
