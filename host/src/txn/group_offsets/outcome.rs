//! Outcomes of transactions for groups coordinated elsewhere, in cluster mode: queued
//! by the transaction's coordinator ([`ClusterGroupOffsets`]), applied by the owner of
//! the group's slot ([`run`]); and the staged offsets a broker gaining a slot restores
//! ([`staged_of_slot`]). The module docs of [`super`] give the protocol.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use abi_stable::std_types::{RString, RVec};
use drover_abi::{coordinator::PendingTxnOffsets, offset_store::OffsetRecord};
use futures_util::future::BoxFuture;
use tokio::sync::watch;
use zookeeper_client as zk;

use super::{
    codec::{decode_outcome, decode_staged, encode_outcome, OutcomeNode, StagedNode},
    outcome_dir, outcome_path,
    slot_states::Deferred,
    staged_dir, staged_path, MAX_NODES_PER_SLOT,
};
use crate::{
    cluster::Cluster,
    coordination::CoordinatorClient,
    txn::{
        marker_queue::wait_deleted,
        ports::{CompleteError, GroupOffsetsCompleter, OffsetsCompletion},
        zk_store::{slot_path, ZkTxnStore},
    },
};

/// How long the transaction's coordinator waits for the groups' coordinators to apply
/// an outcome before it reports a failure (the completion driver retries).
pub const WAIT: Duration = Duration::from_secs(10);
/// How often a slot's owner looks at its outcomes besides the children watches.
pub const POLL: Duration = Duration::from_secs(1);
/// Most outcomes of one slot applied in one pass.
pub const MAX_BATCH: usize = 1_000;

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes())
}

/// The transaction coordinator's [`GroupOffsetsCompleter`] in cluster mode: an
/// outcome node per group, waited for until the group's coordinator applied it.
pub struct ClusterGroupOffsets(pub Arc<Cluster>);

impl GroupOffsetsCompleter for ClusterGroupOffsets {
    fn complete(
        &self,
        completion: OffsetsCompletion,
    ) -> BoxFuture<'static, Result<(), CompleteError>> {
        let cluster = Arc::clone(&self.0);
        Box::pin(async move {
            let client = cluster.client().map_err(|e| CompleteError(e.to_string()))?;
            let slots = cluster.settings.slots;
            let txn_slot =
                drover_protocol::coordinator_slot(completion.transactional_id.as_str(), slots);
            let deadline = Instant::now() + WAIT;
            let mut queued = Vec::with_capacity(completion.groups.len());
            for group in &completion.groups {
                let gslot = drover_protocol::coordinator_slot(group, slots);
                let node = OutcomeNode {
                    txn_slot,
                    coordinator_epoch: completion.coordinator_epoch,
                    producer: completion.producer,
                    committed: completion.committed,
                    group: group.clone(),
                };
                let path = outcome_path(
                    gslot,
                    group,
                    completion.producer,
                    completion.committed,
                    completion.coordinator_epoch,
                );
                queue(&client, &outcome_dir(gslot), &path, &encode_outcome(&node))
                    .await
                    .map_err(CompleteError)?;
                queued.push(path);
            }
            let mut waiting = 0;
            for path in &queued {
                if !wait_deleted(&client, path, deadline).await {
                    waiting += 1;
                }
            }
            if waiting > 0 {
                return Err(CompleteError(format!(
                    "{waiting} group coordinator(s) have not applied the outcome yet"
                )));
            }
            Ok(())
        })
    }
}

/// Creates the outcome node `path` (found there: queued already).
async fn queue(client: &zk::Client, dir: &str, path: &str, data: &[u8]) -> Result<(), String> {
    for _ in 0..2 {
        match client.create(path, data, &persistent()).await {
            Ok(_) | Err(zk::Error::NodeExists) => return Ok(()),
            Err(zk::Error::NoNode) => match client.mkdir(dir, &persistent()).await {
                Ok(()) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(format!("creating {dir}: {e}")),
            },
            Err(e) => return Err(format!("creating {path}: {e}")),
        }
    }
    Err(format!("{dir} deleted while queueing"))
}

/// `node`'s offsets as the coordinator's pending transactional offsets.
fn pending_of(node: &StagedNode) -> PendingTxnOffsets {
    let group = RString::from(node.group.as_str());
    PendingTxnOffsets {
        group: group.clone(),
        producer_id: node.producer.id,
        producer_epoch: node.producer.epoch,
        offsets: node
            .offsets
            .iter()
            .map(|(p, o)| OffsetRecord {
                group: group.clone(),
                topic: RString::from(p.topic.as_str()),
                partition: p.partition,
                offset: o.offset,
                metadata: RString::from(o.metadata.as_str()),
                commit_time_ms: o.commit_time_ms,
            })
            .collect::<RVec<_>>(),
    }
}

/// The staged offsets of `slot` (at most [`MAX_NODES_PER_SLOT`] nodes), for a broker
/// that gained the slot and fenced its previous owner to restore.
///
/// Errors: ZooKeeper's, as text.
pub async fn staged_of_slot(
    cluster: &Cluster,
    slot: u32,
) -> Result<Vec<PendingTxnOffsets>, String> {
    let client = cluster.client().map_err(|e| e.to_string())?;
    let dir = staged_dir(slot);
    let names = match client.list_children(&dir).await {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(format!("{dir}: {e}")),
    };
    let mut pending = Vec::new();
    for name in names.into_iter().take(MAX_NODES_PER_SLOT) {
        let path = format!("{dir}/{name}");
        match client.get_data(&path).await {
            Ok((data, _)) => match decode_staged(&data) {
                Ok(node) => pending.push(pending_of(&node)),
                Err(e) => tracing::warn!(node = %path, "staged transactional offsets skipped: {e}"),
            },
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(format!("{path}: {e}")),
        }
    }
    Ok(pending)
}

/// What the outcome follower works with.
pub struct Follower {
    /// This broker's transaction store (the slots taken over and their epochs).
    pub store: Arc<ZkTxnStore>,
    /// The coordinator that holds the pending offsets.
    pub coordinator: CoordinatorClient,
}

/// Restores the staged offsets of each slot gained and taken over (fenced) but not
/// restored yet, then applies the outcomes queued for the restored slots, until `stop`
/// becomes true.
pub async fn run(follower: Follower, mut stop: watch::Receiver<bool>) {
    let states = &follower.store.offsets_slots;
    loop {
        let wait: BoxFuture<'_, ()> = match follower.store.cluster().client() {
            Err(_) => Box::pin(tokio::time::sleep(POLL)),
            Ok(client) => {
                let taken = follower.store.slots();
                for (slot, deferral) in states.deferred() {
                    if taken.contains(&slot) {
                        hand_over(&follower, slot, deferral).await;
                    }
                }
                let slots: Vec<u32> = taken
                    .intersection(&states.restored_set())
                    .copied()
                    .collect();
                let mut watchers = Vec::new();
                let mut again = false;
                for slot in slots {
                    match pass(&follower, &client, slot).await {
                        Ok(Some(w)) => watchers.push(w),
                        Ok(None) => again = true,
                        Err(e) => {
                            crate::warn_limited!(
                                "txn.outcomes_read",
                                slot,
                                "transactional offset outcomes: {e}"
                            );
                        }
                    }
                }
                if again {
                    Box::pin(std::future::ready(()))
                } else {
                    Box::pin(async move {
                        if watchers.is_empty() {
                            tokio::time::sleep(POLL).await;
                        } else {
                            let changed = futures_util::future::select_all(
                                watchers
                                    .into_iter()
                                    .map(|w| Box::pin(async move { w.changed().await })),
                            );
                            let _ = tokio::time::timeout(POLL, changed).await;
                        }
                    })
                }
            }
        };
        tokio::select! {
            _ = wait => {}
            _ = states.woken() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Hands deferred `slot` to the coordinator plugin with its staged offsets, now that
/// the transaction store has taken it over (slot_states); on a ZooKeeper error
/// nothing changes (tried again next pass), and a slot lost or deferred again
/// meanwhile is left alone.
async fn hand_over(follower: &Follower, slot: u32, deferral: Deferred) {
    let staged = match staged_of_slot(follower.store.cluster(), slot).await {
        Ok(staged) => staged,
        Err(e) => {
            crate::warn_limited!(
                "txn.offsets_restore",
                slot,
                "staged transactional offsets not read yet: {e}"
            );
            return;
        }
    };
    let states = &follower.store.offsets_slots;
    let _handover = states.handover().await;
    if states.deferral(slot) != Some(deferral) {
        return;
    }
    let nodes = staged.len();
    if follower
        .coordinator
        .slot_gained(slot, deferral.stopped_ms, staged)
        .await
        .is_ok()
    {
        states.restored(slot);
        tracing::info!(
            slot,
            previous_owner_stopped_ms = deferral.stopped_ms,
            staged_nodes = nodes,
            "coordinator slot handed to the coordinator after its transactions' takeover"
        );
    }
}

/// One pass over `slot`'s outcomes: `Some(watch)` when all are applied (wait for a
/// change), `None` when some are left for the next pass.
async fn pass(
    follower: &Follower,
    client: &zk::Client,
    slot: u32,
) -> Result<Option<zk::OneshotWatcher>, String> {
    let dir = outcome_dir(slot);
    let (mut names, watcher) = match client.list_and_watch_children(&dir).await {
        Ok(found) => found,
        Err(zk::Error::NoNode) => {
            match client.mkdir(&dir, &persistent()).await {
                Ok(()) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(format!("creating {dir}: {e}")),
            }
            client
                .list_and_watch_children(&dir)
                .await
                .map_err(|e| format!("{dir}: {e}"))?
        }
        Err(e) => return Err(format!("{dir}: {e}")),
    };
    names.sort();
    let more = names.len() > MAX_BATCH;
    let mut all_done = true;
    for name in names.into_iter().take(MAX_BATCH) {
        all_done &= apply(follower, client, slot, &format!("{dir}/{name}")).await?;
    }
    Ok((!more && all_done).then_some(watcher))
}

/// Applies the outcome at `path` of group slot `slot` and deletes it with the staged
/// node; `false` if it must be tried again.
async fn apply(
    follower: &Follower,
    client: &zk::Client,
    slot: u32,
    path: &str,
) -> Result<bool, String> {
    let data = match client.get_data(path).await {
        Ok((data, _)) => data,
        Err(zk::Error::NoNode) => return Ok(true),
        Err(e) => return Err(e.to_string()),
    };
    let node = match decode_outcome(&data) {
        Ok(node) => node,
        Err(e) => {
            tracing::warn!(node = %path, "transactional offset outcome dropped: {e}");
            return delete(client, path, None).await.map(|()| true);
        }
    };
    let current = client
        .check_stat(&slot_path(node.txn_slot))
        .await
        .map_err(|e| e.to_string())?
        .map_or(0, |s| s.version);
    if node.coordinator_epoch < current {
        tracing::info!(
            node = %path,
            coordinator_epoch = node.coordinator_epoch,
            current,
            "transactional offset outcome from a coordinator whose slot moved on: dropped"
        );
        return delete(client, path, None).await.map(|()| true);
    }
    let Some(gepoch) = follower.store.epoch(slot) else {
        return Ok(false);
    };
    let staged = staged_path(slot, &node.group, node.producer.id);
    let found = match client.get_data(&staged).await {
        Ok((data, stat)) => Some((decode_staged(&data).ok(), stat.version)),
        Err(zk::Error::NoNode) => None,
        Err(e) => return Err(e.to_string()),
    };
    // Handed over again (a no-op when the coordinator holds them), then completed:
    // the driver completes only after any staging of the producer still in flight.
    if let Some((Some(s), _)) = &found {
        if s.producer.id == node.producer.id {
            follower
                .coordinator
                .restore_txn_offsets(vec![pending_of(s)])
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    follower
        .coordinator
        .complete_txn(node.producer.id, node.producer.epoch, node.committed)
        .await
        .map_err(|e| e.to_string())?;
    if let Some((_, version)) = found {
        let mut multi = client.new_multi_writer();
        multi
            .add_check_version(&slot_path(slot), gepoch)
            .map_err(|e| e.to_string())?;
        multi
            .add_delete(&staged, Some(version))
            .map_err(|e| e.to_string())?;
        match multi.commit().await {
            Ok(_)
            | Err(zk::MultiWriteError::OperationFailed {
                index: 1,
                source: zk::Error::NoNode,
            }) => {}
            // This broker lost the slot, or the node changed: the next pass (here or
            // at the slot's new owner) applies the outcome again.
            Err(zk::MultiWriteError::OperationFailed { .. }) => return Ok(false),
            Err(e) => return Err(e.to_string()),
        }
    }
    delete(client, path, None).await.map(|()| true)
}

async fn delete(client: &zk::Client, path: &str, version: Option<i32>) -> Result<(), String> {
    match client.delete(path, version).await {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}
