"""Transactions in cluster mode (issue 18): a real ZooKeeper (cluster_testlib), two
`drover serve` brokers, topics whose partitions sit on both.

- A transactional id is coordinated by the owner of its coordinator slot: FindCoordinator
  (key type 1) on every broker names it. confluent-kafka's transactional producer
  commits and aborts interleaved over partitions on both brokers (the coordinator's
  own partitions get their markers in-process, the other broker's through its marker
  queue in ZooKeeper); a read_committed consumer sees exactly the committed records, a
  read_uncommitted one all of them.
- kill -9 of the coordinating broker mid-transaction: the other broker takes the slot
  over (FindCoordinator moves), aborts the open transaction after its timeout — its
  markers for the dead broker's partitions wait in that broker's queue
  (`<chroot>/txn_markers/<id>`) until it returns —, read_committed consumers never see
  the transaction's records, and a producer with the same transactional id then
  commits.
- A producer keeps committing while its transactional id's slot is handed to a
  broker that joins (NOT_COORDINATOR, then the new owner loads the slot).
- A leader down when a transaction commits: its markers wait in its queue, the
  transaction stays PrepareCommit, and they are written when it returns.
- KIP-890 part 1 at a leader that is not the coordinator: a raw transactional Produce
  for a partition not added to the transaction is refused with INVALID_TXN_STATE, the
  same batch after AddPartitionsToTxn is appended, and after the commit's marker the
  partition needs adding again.

Before this change FindCoordinator answered COORDINATOR_NOT_AVAILABLE for
transactional ids in cluster mode and every transactional batch was INVALID_TXN_STATE.
"""

from __future__ import annotations

import json
import re
import struct
import time

import pytest

from cluster_testlib import SLOTS_IN_TEST, start_cluster, wait_until
from drover_testlib import RawConn, ck_create_topic, http_get, kstr, parse_produce_v3, unique_topic
from test_offset_store_cluster import ZkClient
from test_read_committed import txn_batch
from test_transactions import consume_all
from test_transactions_raw import (INVALID_TXN_STATE, NONE, add_partitions, describe_txn,
                                   end_txn, find_txn_coordinator, init_pid)

# A fast timeout sweep, so a timed-out transaction aborts within the test.
CONFIG = """
[transactions]
transaction_abort_timed_out_transaction_cleanup_interval_ms = 200
"""
API_PRODUCE = 0
NOT_COORDINATOR = 16


def coordinator_of(brokers, tid: str) -> int | None:
    """The broker id every broker's FindCoordinator names for `tid`, once they agree."""
    named = set()
    for b in brokers:
        if not b.alive():
            continue
        with RawConn(b) as c:
            err, node, _host, _port = find_txn_coordinator(c, tid)
        if err != NONE:
            return None
        named.add(node)
    return named.pop() if len(named) == 1 else None


def by_id(brokers, broker_id: int):
    return brokers[broker_id - 1]


def leaders(b, topic: str) -> dict[int, int]:
    status, _, body = http_get(f"{b.admin_url}/v1/cluster")
    assert status == 200, body
    placement = json.loads(body)["view"]["topics"].get(topic)
    return {} if placement is None else dict(enumerate(placement["leaders"]))


def slots_settled(brokers) -> bool:
    """Every coordinator slot owned by its preferred owner (slot mod live brokers), as
    every broker sees it: no slot moves during the test unless a broker dies."""
    ids = list(range(1, len(brokers) + 1))
    want = {str(s): ids[s % len(ids)] for s in range(SLOTS_IN_TEST)}
    for b in brokers:
        status, _, body = http_get(f"{b.admin_url}/v1/cluster")
        if status != 200 or json.loads(body)["view"]["slots"] != want:
            return False
    return True


def create_topic(brokers, topic: str, partitions: int) -> dict[int, int]:
    wait_until(lambda: slots_settled(brokers), 30, "the slots spread over the brokers")
    ck_create_topic(brokers[0], topic, partitions)
    wait_until(lambda: all(len(leaders(b, topic)) == partitions for b in brokers), 20,
               "the topic on every broker")
    placement = leaders(brokers[0], topic)
    assert set(placement.values()) == {b_id for b_id in range(1, len(brokers) + 1)}, placement
    return placement


def transactions(b) -> dict[str, dict]:
    status, _, body = http_get(f"{b.admin_url}/v1/transactions")
    assert status == 200, body
    return {t["transactional_id"]: t for t in json.loads(body)["transactions"]}


def txn_producer(brokers, tid: str, timeout_ms: int = 60000):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                     "transactional.id": tid, "transaction.timeout.ms": timeout_ms,
                     "linger.ms": 5, "socket.timeout.ms": min(10000, timeout_ms)})


def wait_complete(brokers, tid: str, state: str = "CompleteCommit") -> None:
    """Until the broker coordinating `tid` has its last transaction complete: EndTxn is
    answered once the outcome is durable, its markers are written after that (the last
    stable offset moves then)."""
    def done():
        return any(b.alive() and transactions(b).get(tid, {}).get("state") == state
                   for b in brokers)
    wait_until(done, 60, f"{tid} {state}")


def chroot_of(b) -> str:
    return re.search(r'chroot = "([^"]+)"', b.config_path.read_text()).group(1)


def test_commit_and_abort_across_brokers(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=2, extra=CONFIG)
    topic = unique_topic("txc-mixed")
    create_topic(brokers, topic, 4)
    tid = "txc-mixed"
    coordinator = wait_until(lambda: coordinator_of(brokers, tid), 20, "the coordinator")
    p = txn_producer(brokers, tid)
    p.init_transactions(30)
    committed, everything = [], []
    for i in range(6):
        p.begin_transaction()
        values = [f"{i}-{part}".encode() for part in range(4)]
        for part, v in enumerate(values):
            p.produce(topic, v, partition=part)
        everything += values
        # Written before the outcome: aborted records are in the logs too.
        assert p.flush(30) == 0
        if i % 2 == 0:
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
    wait_until(lambda: transactions(by_id(brokers, coordinator))[tid]["state"]
               in ("CompleteCommit", "CompleteAbort"), 30, "the last transaction complete")
    # Only the coordinator knows the id.
    other = by_id(brokers, 3 - coordinator)
    assert tid not in transactions(other)
    assert sorted(consume_all(brokers[0], topic, 4, "read_committed")) == sorted(committed)
    assert sorted(consume_all(brokers[1], topic, 4, "read_uncommitted")) == sorted(everything)
    for b in brokers:
        b.assert_alive()


def test_the_coordinators_kill9_moves_the_slot_and_aborts_the_open_transaction(
        broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=2, extra=CONFIG)
    topic = unique_topic("txc-kill")
    placement = create_topic(brokers, topic, 4)
    tid = "txc-kill"
    coordinator = wait_until(lambda: coordinator_of(brokers, tid), 20, "the coordinator")
    victim, survivor = by_id(brokers, coordinator), by_id(brokers, 3 - coordinator)

    p = txn_producer(brokers, tid, timeout_ms=5000)
    p.init_transactions(30)
    p.begin_transaction()
    before = [f"before-{part}".encode() for part in range(4)]
    for part, v in enumerate(before):
        p.produce(topic, v, partition=part)
    p.commit_transaction(30)
    p.begin_transaction()
    open_values = [f"open-{part}".encode() for part in range(4)]
    for part, v in enumerate(open_values):
        p.produce(topic, v, partition=part)
    assert p.flush(30) == 0
    victim.kill9()

    # The survivor takes the slot over; FindCoordinator names it.
    wait_until(lambda: coordinator_of(brokers, tid) == 3 - coordinator, 30,
               "the slot to move to the survivor")
    # The open transaction is aborted after its timeout; its markers for the dead
    # broker's partitions wait in that broker's queue, so it stays PrepareAbort.
    state = wait_until(lambda: transactions(survivor).get(tid, {}).get("state")
                       in ("PrepareAbort",) and transactions(survivor)[tid], 30,
                       "the open transaction aborted by its timeout")
    assert state["state"] == "PrepareAbort", state
    queue = f"{chroot_of(victim)}/txn_markers/{coordinator}"
    with ZkClient(zookeeper) as zk:
        queued = wait_until(lambda: zk.children(queue), 20, "markers queued for the dead leader")
        assert all(name.startswith("m-") for name in queued), queued
    del p

    victim.start()
    # Its markers are written when it returns; the transaction completes.
    def complete():
        for b in brokers:
            t = transactions(b).get(tid)
            if t is not None and t["state"] == "CompleteAbort":
                return True
        return False
    wait_until(complete, 60, "the aborted transaction complete")
    with ZkClient(zookeeper) as zk:
        wait_until(lambda: zk.children(queue) == [], 20, "the queue drained")

    # A new producer with the same transactional id commits.
    p2 = txn_producer(brokers, tid)
    p2.init_transactions(60)
    p2.begin_transaction()
    after = [f"after-{part}".encode() for part in range(4)]
    for part, v in enumerate(after):
        p2.produce(topic, v, partition=part)
    p2.commit_transaction(30)
    wait_complete(brokers, tid)
    assert sorted(consume_all(survivor, topic, 4, "read_committed")) == sorted(before + after)
    assert sorted(consume_all(survivor, topic, 4, "read_uncommitted")) == sorted(
        before + open_values + after)
    assert {placement[p] for p in range(4)} == {1, 2}
    for b in brokers:
        b.assert_alive()


def produce_txn(b, tid: str, topic: str, partition: int, records: bytes) -> tuple[int, int]:
    """Produce v3 with a transactional id -> (error, base offset)."""
    body = (kstr(tid) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records)
    with RawConn(b) as c:
        resp = c.recv_response(c.request(API_PRODUCE, 3, body))
    return parse_produce_v3(resp)[(topic, partition)]


def test_a_remote_leader_refuses_a_partition_not_added(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=2, extra=CONFIG)
    topic = unique_topic("txc-verify")
    placement = create_topic(brokers, topic, 2)
    tid = "txc-verify"
    coordinator = wait_until(lambda: coordinator_of(brokers, tid), 20, "the coordinator")
    coord = by_id(brokers, coordinator)
    local = next(p for p, leader in placement.items() if leader == coordinator)
    remote = next(p for p, leader in placement.items() if leader != coordinator)
    leader = by_id(brokers, placement[remote])

    with RawConn(coord) as c:
        err, pid, epoch = init_pid(c, tid)
        assert err == NONE
        assert add_partitions(c, tid, pid, epoch, {topic: [local]}) == {(topic, local): NONE}
        assert describe_txn(c, tid)[:4] == (NONE, "Ongoing", pid, epoch)
    # The other broker does not coordinate the id: clients are sent back to
    # FindCoordinator.
    with RawConn(leader) as c:
        assert init_pid(c, tid)[0] == NOT_COORDINATOR
        assert describe_txn(c, tid)[0] == NOT_COORDINATOR
        assert end_txn(c, tid, pid, epoch, True) == NOT_COORDINATOR
    # Not added: refused at the remote leader, which reads the transaction's record.
    batch = txn_batch(pid, epoch, 0, 2, b"v")
    assert produce_txn(leader, tid, topic, remote, batch)[0] == INVALID_TXN_STATE
    # Without the transactional id in the request it cannot be checked: refused too.
    assert produce_txn(leader, None, topic, remote, batch)[0] == INVALID_TXN_STATE
    with RawConn(coord) as c:
        assert add_partitions(c, tid, pid, epoch, {topic: [remote]}) == {(topic, remote): NONE}
    err, base = produce_txn(leader, tid, topic, remote, batch)
    assert (err, base) == (NONE, 0)
    with RawConn(coord) as c:
        assert end_txn(c, tid, pid, epoch, True) == NONE
    wait_until(lambda: transactions(coord)[tid]["state"] == "CompleteCommit", 30,
               "the commit complete (its marker written by the remote leader)")
    # The marker ended the transaction there: the next batch needs AddPartitionsToTxn.
    assert produce_txn(leader, tid, topic, remote, txn_batch(pid, epoch, 2, 1, b"w"))[0] \
        == INVALID_TXN_STATE
    for b in brokers:
        b.assert_alive()


def test_markers_for_a_leader_that_is_down_are_written_when_it_returns(
        broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=2, extra=CONFIG)
    topic = unique_topic("txc-leader")
    create_topic(brokers, topic, 4)
    tid = "txc-leader"
    coordinator = wait_until(lambda: coordinator_of(brokers, tid), 20, "the coordinator")
    coord, leader = by_id(brokers, coordinator), by_id(brokers, 3 - coordinator)
    p = txn_producer(brokers, tid)
    p.init_transactions(30)
    p.begin_transaction()
    values = [f"v-{part}".encode() for part in range(4)]
    for part, v in enumerate(values):
        p.produce(topic, v, partition=part)
    assert p.flush(30) == 0
    leader.kill9()
    # EndTxn is answered once PrepareCommit is durable; the coordinator's own partitions
    # get their markers, the dead leader's wait in its queue.
    p.commit_transaction(30)
    assert transactions(coord)[tid]["state"] == "PrepareCommit"
    queue = f"{chroot_of(coord)}/txn_markers/{3 - coordinator}"
    with ZkClient(zookeeper) as zk:
        wait_until(lambda: zk.children(queue), 20, "markers queued for the dead leader")
    leader.start()
    # Whichever broker coordinates `tid` by then (a slot may move while the leader
    # rejoins) completes the commit.
    wait_complete(brokers, tid)
    with ZkClient(zookeeper) as zk:
        assert zk.children(queue) == []
    assert sorted(consume_all(coord, topic, 4, "read_committed")) == sorted(values)
    for b in brokers:
        b.assert_alive()


def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def test_a_producer_keeps_committing_while_its_slot_moves_to_a_joining_broker(
        broker_factory, zookeeper):
    from cluster_testlib import cluster_config

    chroot = "/drover-handback"
    first = broker_factory(cluster_config(zookeeper, chroot, 1, coordinator=False, extra=CONFIG))
    # An id whose slot's preferred owner, once two brokers are live, is broker 2.
    tid = next(f"txc-move-{i}" for i in range(100)
               if fnv1a32(f"txc-move-{i}".encode()) % SLOTS_IN_TEST % 2 == 1)
    wait_until(lambda: coordinator_of([first], tid) == 1, 30, "broker 1 coordinating")
    topic = unique_topic("txc-move")
    ck_create_topic(first, topic, 1)
    p = txn_producer([first], tid)
    p.init_transactions(30)
    committed = []

    def commit_one(n: int) -> None:
        p.begin_transaction()
        value = f"m-{n}".encode()
        p.produce(topic, value, partition=0)
        p.commit_transaction(30)  # a fatal error would raise here
        committed.append(value)

    for n in range(5):
        commit_one(n)
    second = broker_factory(cluster_config(zookeeper, chroot, 2, coordinator=False, extra=CONFIG))
    n = 5
    deadline = time.monotonic() + 60
    while coordinator_of([first, second], tid) != 2:
        assert time.monotonic() < deadline, "the slot never moved to broker 2"
        commit_one(n)
        n += 1
    for _ in range(5):
        commit_one(n)
        n += 1
    wait_complete([first, second], tid)
    assert tid in transactions(second)
    assert sorted(consume_all(first, topic, 1, "read_committed")) == sorted(committed)
    for b in (first, second):
        b.assert_alive()
