//! The transaction coordinator's ZooKeeper store (`txn::zk_store`) against a real
//! ZooKeeper server from the testkit, over a real broker's session (cluster mode):
//!
//! - a record written after a take-over is read back by the next owner's take-over,
//!   under `/transactions/<slot>/<escaped id>`;
//! - once another owner has taken the slot over (the slot node's version bumped), the
//!   previous owner's writes and removals fail with `Fenced` and change nothing;
//! - a record larger than a node may hold is refused with `TooLarge` before any write;
//! - `read` (the KIP-890 check at a remote leader) sees the latest record.

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use drover_host::{
    serve::Running,
    txn::{
        store::{StoreError, TxnStore},
        types::{ProducerIdEpoch, TopicPartition, TransactionalId, TxnMetadata, TxnState},
        zk_store::{self, ZkTxnStore},
    },
};
use drover_tests::{
    cluster_broker,
    services::zookeeper::{unique_chroot, ZkServer},
};
use zookeeper_client as zk;

const SLOTS: u32 = 4;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A broker in cluster mode, connected, whose own transaction coordinator has taken
/// every slot over (so it writes nothing during the test); returns it with its chroot.
fn start_broker(rt: &tokio::runtime::Runtime, server: &ZkServer, root: &Path) -> (Running, String) {
    let chroot = unique_chroot("txn");
    let extra = format!("session_timeout_ms = 2000\nslots = {SLOTS}\n");
    let running = cluster_broker::start(rt, &server.connect(), root, &chroot, 1, &extra);
    let txn = Arc::clone(running.broker.transactions());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while txn.slots().len() < SLOTS as usize {
        assert!(std::time::Instant::now() < deadline, "slots not taken over");
        std::thread::sleep(Duration::from_millis(50));
    }
    (running, chroot)
}

fn meta(id: &TransactionalId, epoch: i16, partitions: &[(&str, i32)]) -> TxnMetadata {
    TxnMetadata {
        id: id.clone(),
        producer: ProducerIdEpoch { id: 77, epoch },
        last_producer: ProducerIdEpoch::NONE,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: partitions
            .iter()
            .map(|(t, p)| TopicPartition {
                topic: (*t).to_owned(),
                partition: *p,
            })
            .collect(),
        groups: BTreeMap::new(),
        start_ms: 1,
        last_update_ms: 2,
        timed_out: false,
        ever_opened: true,
    }
}

#[test]
fn a_stale_owner_is_fenced_and_records_move_with_the_slot() {
    let server = ZkServer::shared();
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    let (running, chroot) = start_broker(&rt, server, root.path());
    let c = Arc::clone(running.broker.cluster().unwrap());
    let id = TransactionalId::new("app/1.x").unwrap();

    let first = ZkTxnStore::new(Arc::clone(&c));
    let slot = first.slot_of(&id);
    let (epoch1, _) = first.take_over(slot).unwrap();
    assert!(first.adopt(slot, epoch1));
    first.put(&[meta(&id, 0, &[("out", 0)])]).unwrap();
    first
        .put(&[meta(&id, 0, &[("out", 0), ("out", 1)])])
        .unwrap();

    // The node is where the docs say, its name escaped.
    let path = format!("{chroot}{}", zk_store::record_path(slot, &id));
    assert!(
        path.ends_with(&format!("/transactions/{slot}/app%2F1%2Ex")),
        "{path}"
    );
    let raw = rt.block_on(async {
        let client = zk::Client::connect(&server.connect()).await.unwrap();
        client.get_data(&path).await.map(|(d, _)| d)
    });
    assert!(raw.is_ok(), "{path}: {raw:?}");

    // The next owner takes over: a higher epoch, the record read back.
    let second = ZkTxnStore::new(Arc::clone(&c));
    let (epoch2, records) = second.take_over(slot).unwrap();
    assert!(epoch2 > epoch1);
    assert_eq!(records, vec![meta(&id, 0, &[("out", 0), ("out", 1)])]);
    assert!(second.adopt(slot, epoch2));

    // The stale owner can change nothing any more.
    let stale = first.put(&[meta(&id, 1, &[])]);
    assert!(
        matches!(stale, Err(StoreError::Fenced { slot: s }) if s == slot),
        "{stale:?}"
    );
    let stale = first.remove(std::slice::from_ref(&id));
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(
        second.read(&id).unwrap(),
        Some(meta(&id, 0, &[("out", 0), ("out", 1)]))
    );

    // The owner writes; a record too large for a node is refused, nothing written.
    second.put(&[meta(&id, 3, &[("out", 2)])]).unwrap();
    let topic = "t".repeat(249);
    let huge: Vec<(&str, i32)> = (0..5_000).map(|p| (topic.as_str(), p)).collect();
    let too_large = second.put(&[meta(&id, 3, &huge)]);
    assert!(
        matches!(too_large, Err(StoreError::TooLarge { .. })),
        "{too_large:?}"
    );
    assert_eq!(second.read(&id).unwrap(), Some(meta(&id, 3, &[("out", 2)])));

    // A slot given up is fenced locally at once; removal by the owner sticks.
    second.remove(std::slice::from_ref(&id)).unwrap();
    assert_eq!(second.read(&id).unwrap(), None);
    second.give_up(slot);
    assert!(matches!(
        second.put(&[meta(&id, 4, &[])]),
        Err(StoreError::Fenced { .. })
    ));
    rt.block_on(running.stop());
}
