//! The cluster task: keeps a ZooKeeper session, this broker's registration, the view
//! of brokers, topics and slot owners, the local copies of topics, and the slots this
//! broker's coordinator owns.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use zookeeper_client as zk;

use super::{BrokerAddr, Cluster, ClusterView, TopicPlacement, BROKERS, SLOTS, TOPICS};
use crate::broker::Broker;

/// How often the view is re-read besides watches (topic data changes, slot claims).
const REFRESH: Duration = Duration::from_millis(500);

fn options() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
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
    tracing::warn!(slots = ?owned, "giving up coordinator slots: {why}");
    if let Some(c) = broker.coordinator() {
        for slot in owned {
            c.slot_lost(slot).await;
        }
    }
}

/// One session: connect, register, then follow until it expires.
async fn session(broker: &Arc<Broker>, cluster: &Arc<Cluster>) -> Result<(), String> {
    let settings = &cluster.settings;
    let root = zk::Client::connector()
        .with_session_timeout(Duration::from_millis(settings.session_timeout_ms))
        .with_connection_timeout(Duration::from_millis(settings.session_timeout_ms))
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
    let session_timeout = Duration::from_millis(settings.session_timeout_ms);
    loop {
        if disconnected_since.is_none() {
            match refresh(broker, cluster, &client, &mut timers).await {
                Ok(()) => {}
                Err(zk::Error::SessionExpired) => return Err("session expired".into()),
                Err(e) => tracing::debug!("cluster refresh: {e}"),
            }
        }
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
                }
            },
            _ = tokio::time::sleep(REFRESH) => {}
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
) -> Result<(), zk::Error> {
    let mut brokers = BTreeMap::new();
    for id in client.list_children(BROKERS).await? {
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
    let mut owners = BTreeMap::new();
    for name in client.list_children(SLOTS).await? {
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
                    if let Some(c) = broker.coordinator() {
                        c.slot_lost(slot).await;
                    }
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
    let view = ClusterView {
        connected: true,
        brokers,
        topics,
        slots: owners,
    };
    sync_local_topics(broker, &view).await;
    sync_slots(broker, cluster, &view).await;
    cluster.update(|v| *v = view);
    Ok(())
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
                }
                Some(_) => {
                    // Re-created with another id: replace the local copy.
                    let _ = broker.topics.delete(name);
                    if let Err(e) =
                        broker
                            .topics
                            .create_with_id(name, placement.id, i64::from(count), max)
                    {
                        tracing::warn!(topic = %name, "re-creating the local copy: {e}");
                    }
                }
                None => {
                    if let Err(e) =
                        broker
                            .topics
                            .create_with_id(name, placement.id, i64::from(count), max)
                    {
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

/// Tells the coordinator about slots gained and lost.
async fn sync_slots(broker: &Broker, cluster: &Cluster, view: &ClusterView) {
    let mine: BTreeSet<u32> = view
        .slots
        .iter()
        .filter(|(_, owner)| **owner == cluster.me)
        .map(|(slot, _)| *slot)
        .collect();
    let (gained, lost) = {
        let mut owned = cluster.owned.lock().unwrap_or_else(|e| e.into_inner());
        let gained: Vec<u32> = mine.difference(&owned).copied().collect();
        let lost: Vec<u32> = owned.difference(&mine).copied().collect();
        *owned = mine;
        (gained, lost)
    };
    if let Some(c) = broker.coordinator() {
        for slot in lost {
            tracing::info!(slot, "coordinator slot lost");
            c.slot_lost(slot).await;
        }
        for slot in gained {
            tracing::info!(slot, "coordinator slot gained");
            c.slot_gained(slot).await;
        }
    }
}
