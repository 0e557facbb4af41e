//! Cluster mode: transaction markers for partitions another broker leads, through
//! ZooKeeper. Partitions live on one broker each (no replication), and only that
//! leader writes to its logs, so a coordinator hands it the markers to write. Drover
//! serves no WriteTxnMarkers (27) to clients — any client could forge markers and
//! brokers do not authenticate each other — so the channel is ZooKeeper, already the
//! cluster's trust boundary:
//!
//! ```text
//! /txn_markers/<leader broker id>/m-<pid>-<epoch>-<c|a>-<coordinator epoch>-<hash>
//! ```
//!
//! - The coordinator ([`ClusterMarkers`]) writes markers of its own partitions
//!   in-process ([`LogMarkers`]) and creates one persistent node per remote leader
//!   (more when the partitions do not fit [`MAX_NODE_BYTES`]) holding a [`MarkerNode`].
//!   The name is derived from the content (not the timestamp), so a retry or a new
//!   coordinator re-queueing the same transaction finds the node there instead of
//!   queueing it twice. The write resolves once the node is deleted; a leader that is
//!   down leaves it waiting (the completion driver retries every [`WAIT`]), as Kafka
//!   waits for a partition's leader.
//! - Each broker follows its own queue ([`run`], a children watch plus a poll every
//!   [`POLL`]): for each node it writes the markers through
//!   [`crate::log::PartitionLog::append_txn_marker`] (fsynced; a repeated marker is
//!   harmless) and then deletes the node. A node whose coordinator epoch is older than
//!   its slot's current one (`/transactions/<slot>`'s version) comes from a
//!   coordinator another broker has taken the slot from: it is deleted unwritten (the
//!   new coordinator re-queues every transaction it found decided).
//! - Bounds: at most [`MAX_QUEUED_PER_BROKER`] nodes wait per leader (a coordinator
//!   finding more retries later), a node holds at most [`MAX_NODE_BYTES`], a leader
//!   reads at most [`MAX_BATCH`] nodes per pass.
//!
//! Node format, version 1, big-endian: `u8` version; slot `u32`; coordinator epoch
//! `i32`; producer id `i64`, epoch `i16`; `u8` 1 commit / 0 abort; timestamp ms `i64`;
//! partitions (`u32` count, each a `u16`-length topic and an `i32` partition).

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use zookeeper_client as zk;

use super::{
    broker_ports::LogMarkers,
    codec::{put_str16, CodecError, Reader},
    ports::{MarkerRequest, MarkerWriter},
    types::{ProducerIdEpoch, TopicPartition, TransactionalId},
    zk_store,
};
use crate::cluster::Cluster;

/// The root of the queues below the chroot.
pub const ROOT: &str = "/txn_markers";
/// Most nodes waiting in one broker's queue.
pub const MAX_QUEUED_PER_BROKER: i32 = 10_000;
/// Largest node written, bytes (ZooKeeper's `jute.maxbuffer` is 1 MiB by default).
pub const MAX_NODE_BYTES: usize = 512 * 1024;
/// Most nodes a leader reads in one pass of its queue.
pub const MAX_BATCH: usize = 1_000;
/// How long a coordinator waits for a leader to take a node before reporting the
/// partitions unwritten (the completion driver then retries).
pub const WAIT: Duration = Duration::from_secs(10);
/// How often a leader looks at its queue besides the children watch.
pub const POLL: Duration = Duration::from_secs(1);

const VERSION: u8 = 1;

/// One queued set of markers: what a leader writes to its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerNode {
    /// The transactional id's coordinator slot.
    pub slot: u32,
    /// The coordinator epoch of that slot when the node was queued.
    pub coordinator_epoch: i32,
    /// The producer id and epoch the markers carry.
    pub producer: ProducerIdEpoch,
    /// Commit (true) or abort markers.
    pub committed: bool,
    /// The markers' timestamp, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// The leader's partitions to write a marker to.
    pub partitions: Vec<TopicPartition>,
}

/// Encodes `node`.
pub fn encode(node: &MarkerNode) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + node.partitions.len() * 16);
    out.push(VERSION);
    out.extend_from_slice(&node.slot.to_be_bytes());
    out.extend_from_slice(&node.coordinator_epoch.to_be_bytes());
    out.extend_from_slice(&node.producer.id.to_be_bytes());
    out.extend_from_slice(&node.producer.epoch.to_be_bytes());
    out.push(u8::from(node.committed));
    out.extend_from_slice(&node.timestamp_ms.to_be_bytes());
    encode_partitions(&mut out, &node.partitions);
    out
}

fn encode_partitions(out: &mut Vec<u8>, partitions: &[TopicPartition]) {
    out.extend_from_slice(&(partitions.len() as u32).to_be_bytes());
    for p in partitions {
        put_str16(out, &p.topic);
        out.extend_from_slice(&p.partition.to_be_bytes());
    }
}

/// Decodes a node written by [`encode`]; every count is bounded by the bytes left.
///
/// Errors: [`CodecError`].
pub fn decode(bytes: &[u8]) -> Result<MarkerNode, CodecError> {
    let mut r = Reader(bytes);
    let version = r.u8()?;
    if version != VERSION {
        return Err(CodecError::Version(version));
    }
    let slot = r.u32()?;
    let coordinator_epoch = r.i32()?;
    let producer = ProducerIdEpoch {
        id: r.i64()?,
        epoch: r.i16()?,
    };
    let committed = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(CodecError::Invalid("marker result")),
    };
    let timestamp_ms = r.i64()?;
    let count = r.count(2 + 4)?;
    let mut partitions = Vec::with_capacity(count);
    for _ in 0..count {
        partitions.push(TopicPartition {
            topic: r.str16()?,
            partition: r.i32()?,
        });
    }
    if !r.0.is_empty() {
        return Err(CodecError::Invalid("trailing bytes"));
    }
    Ok(MarkerNode {
        slot,
        coordinator_epoch,
        producer,
        committed,
        timestamp_ms,
        partitions,
    })
}

/// `node` split so that each part encodes to at most [`MAX_NODE_BYTES`] (a
/// partition's entry is at most 2 + 65535 + 4 bytes, far below).
pub fn split(node: MarkerNode) -> Vec<MarkerNode> {
    const FIXED: usize = 1 + 4 + 4 + 8 + 2 + 1 + 8 + 4;
    let mut parts = Vec::new();
    let mut current = Vec::new();
    let mut size = FIXED;
    for p in &node.partitions {
        let entry = 2 + p.topic.len().min(usize::from(u16::MAX)) + 4;
        if !current.is_empty() && size + entry > MAX_NODE_BYTES {
            parts.push(std::mem::take(&mut current));
            size = FIXED;
        }
        size += entry;
        current.push(p.clone());
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
        .into_iter()
        .map(|partitions| MarkerNode {
            partitions,
            ..node.clone()
        })
        .collect()
}

/// The node name of `node`: from the producer, outcome, coordinator epoch and a hash
/// of the partitions — not the timestamp — so the same markers queued again get the
/// same name.
pub fn node_name(node: &MarkerNode) -> String {
    let mut partitions = Vec::new();
    encode_partitions(&mut partitions, &node.partitions);
    format!(
        "m-{}-{}-{}-{}-{:08x}",
        node.producer.id,
        node.producer.epoch,
        if node.committed { 'c' } else { 'a' },
        node.coordinator_epoch,
        drover_protocol::slot::fnv1a32(&partitions)
    )
}

/// The queue directory of broker `broker`.
pub fn queue_path(broker: i32) -> String {
    format!("{ROOT}/{broker}")
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(crate::cluster::acl::nodes())
}

/// Markers in cluster mode: this broker's partitions in-process, the others through
/// their leader's queue.
pub struct ClusterMarkers {
    /// This broker's own partitions.
    pub local: LogMarkers,
    /// Its cluster membership.
    pub cluster: Arc<Cluster>,
}

impl MarkerWriter for ClusterMarkers {
    fn write_markers(&self, request: MarkerRequest) -> BoxFuture<'static, Vec<TopicPartition>> {
        let local_markers = self.local.clone();
        let cluster = Arc::clone(&self.cluster);
        Box::pin(async move {
            let view = cluster.view();
            let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
            for tp in &request.partitions {
                // A partition not in the view (its topic deleted, or the view not read
                // yet after a restart) goes the local way, which skips a deleted topic
                // and leaves a partition it does not lead for a retry.
                let leader = view
                    .topics
                    .get(&tp.topic)
                    .and_then(|t| t.leaders.get(usize::try_from(tp.partition).ok()?))
                    .copied()
                    .unwrap_or(cluster.me);
                by_leader.entry(leader).or_default().push(tp.clone());
            }
            let mut failed = Vec::new();
            for (leader, partitions) in by_leader {
                if leader == cluster.me {
                    let local = MarkerRequest {
                        partitions,
                        ..request.clone()
                    };
                    failed.extend(local_markers.write_markers(local).await);
                } else {
                    let node = MarkerNode {
                        slot: drover_protocol::coordinator_slot(
                            request.transactional_id.as_str(),
                            cluster.settings.slots,
                        ),
                        coordinator_epoch: request.coordinator_epoch,
                        producer: request.producer,
                        committed: request.committed,
                        timestamp_ms: request.timestamp_ms,
                        partitions,
                    };
                    failed.extend(
                        queue_and_wait(&cluster, leader, node, &request.transactional_id).await,
                    );
                }
            }
            failed
        })
    }
}

/// Queues `node` for `leader` and waits up to [`WAIT`] for it to be taken; returns
/// the partitions not known to be written.
async fn queue_and_wait(
    cluster: &Cluster,
    leader: i32,
    node: MarkerNode,
    id: &TransactionalId,
) -> Vec<TopicPartition> {
    let Ok(client) = cluster.client() else {
        return node.partitions;
    };
    let dir = queue_path(leader);
    let deadline = Instant::now() + WAIT;
    let mut failed = Vec::new();
    let mut queued = Vec::new();
    for part in split(node) {
        let path = format!("{dir}/{}", node_name(&part));
        match queue_one(&client, &dir, &path, &part).await {
            Ok(()) => queued.push((path, part.partitions)),
            Err(e) => {
                crate::warn_limited!(
                    "txn.marker_queue_failed",
                    transactional_id = %id,
                    leader,
                    "queueing transaction markers: {e}"
                );
                failed.extend(part.partitions);
            }
        }
    }
    for (path, partitions) in queued {
        if !wait_deleted(&client, &path, deadline).await {
            failed.extend(partitions);
        }
    }
    failed
}

async fn queue_one(
    client: &zk::Client,
    dir: &str,
    path: &str,
    node: &MarkerNode,
) -> Result<(), String> {
    match client.check_stat(dir).await {
        Ok(Some(stat)) if stat.num_children >= MAX_QUEUED_PER_BROKER => {
            if client.check_stat(path).await.ok().flatten().is_some() {
                return Ok(());
            }
            return Err(format!(
                "{dir} holds {} nodes (at most {MAX_QUEUED_PER_BROKER})",
                stat.num_children
            ));
        }
        Ok(Some(_)) => {}
        Ok(None) => match client.mkdir(dir, &persistent()).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(format!("creating {dir}: {e}")),
        },
        Err(e) => return Err(e.to_string()),
    }
    match client.create(path, &encode(node), &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(format!("creating {path}: {e}")),
    }
}

/// Whether `path` is gone by `deadline`.
pub(crate) async fn wait_deleted(client: &zk::Client, path: &str, deadline: Instant) -> bool {
    loop {
        let watcher = match client.check_and_watch_stat(path).await {
            Ok((None, _)) => return true,
            Ok((Some(_), watcher)) => watcher,
            Err(_) => return false,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || tokio::time::timeout(left, watcher.changed()).await.is_err() {
            return false;
        }
    }
}

/// Follows this broker's queue until `stop` becomes true: writes each node's markers
/// to the local partitions through `markers`, then deletes it.
pub async fn run(markers: LogMarkers, cluster: Arc<Cluster>, mut stop: watch::Receiver<bool>) {
    let dir = queue_path(cluster.me);
    loop {
        let wait: BoxFuture<'static, ()> = match cluster.client() {
            Err(_) => Box::pin(tokio::time::sleep(POLL)),
            Ok(client) => match pass(&markers, &client, &dir).await {
                Ok(Some(watcher)) => Box::pin(async move {
                    let _ = tokio::time::timeout(POLL, watcher.changed()).await;
                }),
                Ok(None) => Box::pin(std::future::ready(())),
                Err(e) => {
                    crate::warn_limited!(
                        "txn.marker_queue_read",
                        "transaction marker queue {dir}: {e}"
                    );
                    Box::pin(tokio::time::sleep(POLL))
                }
            },
        };
        tokio::select! {
            _ = wait => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One pass over the queue: `Some(watch)` when it is drained (wait for a change),
/// `None` when more nodes wait than one pass takes.
async fn pass(
    markers: &LogMarkers,
    client: &zk::Client,
    dir: &str,
) -> Result<Option<zk::OneshotWatcher>, zk::Error> {
    let (mut names, watcher) = match client.list_and_watch_children(dir).await {
        Ok(found) => found,
        Err(zk::Error::NoNode) => {
            match client.mkdir(dir, &persistent()).await {
                Ok(()) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(e),
            }
            client.list_and_watch_children(dir).await?
        }
        Err(e) => return Err(e),
    };
    names.sort();
    let more = names.len() > MAX_BATCH;
    let mut all_done = true;
    for name in names.into_iter().take(MAX_BATCH) {
        let path = format!("{dir}/{name}");
        all_done &= take_one(markers, client, &path).await?;
    }
    Ok((!more && all_done).then_some(watcher))
}

/// Writes the markers of the node at `path` and deletes it; `false` if some could
/// not be written (the node stays for the next pass).
async fn take_one(
    markers: &LogMarkers,
    client: &zk::Client,
    path: &str,
) -> Result<bool, zk::Error> {
    let data = match client.get_data(path).await {
        Ok((data, _)) => data,
        Err(zk::Error::NoNode) => return Ok(true),
        Err(e) => return Err(e),
    };
    let node = match decode(&data) {
        Ok(node) => node,
        Err(e) => {
            tracing::warn!(node = %path, "transaction marker node dropped: {e}");
            return delete(client, path).await.map(|()| true);
        }
    };
    let current = client
        .check_stat(&zk_store::slot_path(node.slot))
        .await?
        .map_or(0, |s| s.version);
    if node.coordinator_epoch < current {
        tracing::info!(
            node = %path,
            coordinator_epoch = node.coordinator_epoch,
            current,
            "transaction markers from a coordinator whose slot moved on: dropped"
        );
        return delete(client, path).await.map(|()| true);
    }
    let request = MarkerRequest {
        // Only the log path reads it, for nothing but logs.
        transactional_id: TransactionalId::new("-").expect("valid id"),
        producer: node.producer,
        committed: node.committed,
        coordinator_epoch: node.coordinator_epoch,
        timestamp_ms: node.timestamp_ms,
        partitions: node.partitions,
    };
    let failed = markers.write_markers(request).await;
    if !failed.is_empty() {
        return Ok(false);
    }
    delete(client, path).await.map(|()| true)
}

async fn delete(client: &zk::Client, path: &str) -> Result<(), zk::Error> {
    match client.delete(path, None).await {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(partitions: Vec<TopicPartition>) -> MarkerNode {
        MarkerNode {
            slot: 7,
            coordinator_epoch: 3,
            producer: ProducerIdEpoch { id: 4001, epoch: 2 },
            committed: true,
            timestamp_ms: 1_700_000_000_000,
            partitions,
        }
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn round_trips_and_every_truncation_is_an_error() {
        let n = node(vec![tp("out", 0), tp("é", 5)]);
        let bytes = encode(&n);
        assert_eq!(decode(&bytes).unwrap(), n);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "prefix of {cut} bytes");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn a_forged_count_is_refused_without_allocating() {
        let mut bytes = encode(&node(Vec::new()));
        let at = bytes.len() - 4;
        bytes[at..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&bytes), Err(CodecError::Truncated));
    }

    #[test]
    fn the_name_ignores_the_timestamp_and_follows_the_content() {
        let a = node(vec![tp("out", 0)]);
        let later = MarkerNode {
            timestamp_ms: a.timestamp_ms + 5,
            ..a.clone()
        };
        assert_eq!(node_name(&a), node_name(&later));
        assert_ne!(node_name(&a), node_name(&node(vec![tp("out", 1)])));
        let abort = MarkerNode {
            committed: false,
            ..a.clone()
        };
        assert_ne!(node_name(&a), node_name(&abort));
        assert!(node_name(&a).starts_with("m-4001-2-c-3-"));
    }

    #[test]
    fn large_sets_split_into_nodes_under_the_bound() {
        let topic = "t".repeat(249);
        let partitions: Vec<_> = (0..10_000).map(|p| tp(&topic, p)).collect();
        let parts = split(node(partitions.clone()));
        assert!(parts.len() > 1);
        for part in &parts {
            assert!(encode(part).len() <= MAX_NODE_BYTES);
        }
        let back: Vec<_> = parts.into_iter().flat_map(|p| p.partitions).collect();
        assert_eq!(back, partitions);
        assert!(split(node(Vec::new())).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = decode(&data);
        }
    }
}
