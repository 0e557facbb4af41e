"""Transactional offset commits in cluster mode (issue 18, stage 2): the group's
coordinator and the transaction's coordinator are two brokers (txn::group_offsets).

- confluent-kafka's consume-transform-produce with `send_offsets_to_transaction`,
  the group coordinated by broker 1 and the transactional id by broker 2: committed
  transactions move the group's committed offsets, an aborted one does not, the
  staged and outcome nodes in ZooKeeper are all gone afterwards, and a read_committed
  reader sees each output record once.

- Three instances in one group over two brokers, and `kill -9` of the broker that
  coordinates the group (and leads some partitions), restarted after 3 s: the group's
  slot moves to the other broker and back, and the output still holds every input
  record exactly once while the committed offsets reach the end of the input. (Found
  two bugs: a deadlock of a broker that is a transaction's coordinator and a partition's
  leader at once, and an outcome queued again by a new coordinator that the group's
  coordinator dropped as stale, losing its offsets; and, in a loaded run, 40 duplicate
  output records, after which the slot guard's keepalive no longer waits behind the
  refresh and a slot reaches the plugin only together with its staged offsets.)
- Offsets staged for an open transaction follow the group's slot to a broker that
  joins: the new owner answers OffsetFetch with `require_stable` UNSTABLE_OFFSET_COMMIT
  for them (restored when it gained the slot), applies them when the transaction
  (coordinated by the first broker) commits, and drops those of an aborted one.

Before this change AddOffsetsToTxn and TxnOffsetCommit answered
COORDINATOR_NOT_AVAILABLE in cluster mode, so `send_offsets_to_transaction` never
succeeded there.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time

from cluster_testlib import SLOTS_IN_TEST, start_cluster, wait_until
from drover_testlib import ck_conf, unique_topic
from test_offset_store_cluster import ZkClient
from test_transactions import consume_all
from test_transactions_cluster import (CONFIG, chroot_of, coordinator_of, create_topic,
                                       fnv1a32, txn_producer, wait_complete)

N_IN = 3  # input partitions
API_OFFSET_FETCH = 9
UNSTABLE_OFFSET_COMMIT = 88
RETRIABLE = {14, 15, 16}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR


def offset_fetch_stable(b, group: str, topic: str, partition: int) -> tuple[int, int]:
    """OffsetFetch v7 with require_stable (KIP-447) for one partition ->
    (error, committed offset); a group-level error is returned as the error."""
    from drover_testlib import RawConn, uvarint
    from test_transactions_raw import cstr, read_cstr, read_uvarint

    body = (cstr(group) + uvarint(2) + cstr(topic) + uvarint(2) + struct.pack(">i", partition)
            + b"\x00" + b"\x01" + b"\x00")
    with RawConn(b) as c:
        corr = c.request(API_OFFSET_FETCH, 7, body, flexible_header=True)
        data = c.recv_response(corr, flexible_header=True)
    at = 4  # throttle_time_ms
    topics, at = read_uvarint(data, at)
    found = None
    for _ in range(topics - 1):
        _name, at = read_cstr(data, at)
        parts, at = read_uvarint(data, at)
        for _ in range(parts - 1):
            _p, offset, _epoch = struct.unpack_from(">iqi", data, at)
            at += 16
            n, at = read_uvarint(data, at)
            at += max(n - 1, 0)
            (err,) = struct.unpack_from(">h", data, at)
            at += 2
            _tags, at = read_uvarint(data, at)
            found = (err, offset)
        _tags, at = read_uvarint(data, at)
    (group_err,) = struct.unpack_from(">h", data, at)
    if group_err:
        return group_err, -1
    assert found is not None, data
    return found


def settled_fetch(b, group: str, topic: str, partition: int) -> tuple[int, int]:
    """offset_fetch_stable once `b` answers as the group's coordinator."""
    def answer():
        got = offset_fetch_stable(b, group, topic, partition)
        return None if got[0] in RETRIABLE else got
    return wait_until(answer, 30, f"{group} coordinated by {b.bootstrap}")


def owned_by(prefix: str, broker_id: int) -> str:
    """A name whose coordinator slot's preferred owner among 2 live brokers is
    `broker_id` (slot s belongs to broker (s mod 2) + 1, as slots_settled expects)."""
    return next(f"{prefix}-{i}" for i in range(1000)
                if fnv1a32(f"{prefix}-{i}".encode()) % SLOTS_IN_TEST % 2 == broker_id - 1)


def committed(brokers, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(ck_conf(brokers[0], **{"group.id": group, "enable.auto.commit": False,
                                         "bootstrap.servers": ",".join(
                                             b.bootstrap for b in brokers if b.alive())}))
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def registered(b, count: int) -> bool:
    """Whether `b` sees `count` brokers registered."""
    import json

    from drover_testlib import http_get

    status, _, body = http_get(f"{b.admin_url}/v1/cluster")
    return status == 200 and len(json.loads(body)["view"]["brokers"]) == count


def zk_leftovers(zookeeper, chroot: str) -> dict[str, list[str]]:
    """Every staged or outcome node still in ZooKeeper, by slot directory."""
    left = {}
    with ZkClient(zookeeper) as zk:
        for root in ("txn_offsets", "txn_outcomes"):
            for slot in zk.children(f"{chroot}/{root}") or []:
                names = zk.children(f"{chroot}/{root}/{slot}") or []
                if names:
                    left[f"{root}/{slot}"] = names
    return left


def rewind_to_committed(consumer) -> None:
    """Seeks every partition `consumer` holds back to its group's committed offset (the
    beginning where none is committed), after an aborted transaction. A partition lost
    to a rebalance meanwhile is skipped: its next owner starts from the committed
    offset anyway."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

    try:
        committed = consumer.committed(consumer.assignment(), timeout=10)
    except KafkaException:
        return
    for tp in committed:
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        try:
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        except KafkaException:
            pass


def test_send_offsets_to_a_group_coordinated_by_another_broker(broker_factory, zookeeper):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    brokers = start_cluster(broker_factory, zookeeper, n=2, coordinator=True, extra=CONFIG)
    src, dst = unique_topic("txg-in"), unique_topic("txg-out")
    create_topic(brokers, src, N_IN)
    create_topic(brokers, dst, 2)
    group, tid = owned_by("txg-group", 1), owned_by("txg-tid", 2)
    assert wait_until(lambda: coordinator_of(brokers, tid), 20, "the coordinator") == 2

    bootstrap = ",".join(b.bootstrap for b in brokers)
    feeder = txn_producer(brokers, "txg-feeder")
    feeder.init_transactions(30)
    feeder.begin_transaction()
    n = 30
    for i in range(n):
        feeder.produce(src, b"%04d" % i, partition=i % N_IN)
    feeder.commit_transaction(30)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
                         # The test cluster's coordinator allows 1-3 s (cluster_testlib).
                         "session.timeout.ms": 3000, "heartbeat.interval.ms": 500})
    consumer.subscribe([src])
    p = txn_producer(brokers, tid)
    p.init_transactions(30)
    done: set[bytes] = set()
    aborted = 0
    deadline = time.monotonic() + 90
    while len(done) < n:
        assert time.monotonic() < deadline, f"only {len(done)} of {n} records processed"
        msgs = [m for m in consumer.consume(num_messages=7, timeout=0.5) if m.error() is None]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, b"out-" + m.value(), partition=m.partition() % 2)
        ends = {}
        for m in msgs:
            ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
        try:
            p.send_offsets_to_transaction(
                [TopicPartition(src, q, o) for q, o in ends.items()],
                consumer.consumer_group_metadata(), 30)
            p.commit_transaction(30)
        except KafkaException as e:
            # As an EOS application does: a member fenced meanwhile (its 3 s session
            # can lapse on two loaded cores) makes the transaction abortable; abort it
            # and go on from the group's committed offsets.
            if not e.args[0].txn_requires_abort() or aborted >= 5:
                raise
            aborted += 1
            p.abort_transaction(30)
            rewind_to_committed(consumer)
            continue
        done.update(m.value() for m in msgs)
    assert done == {b"%04d" % i for i in range(n)}
    wait_complete(brokers, tid)
    want = [n // N_IN] * N_IN
    wait_until(lambda: committed(brokers, group, src, N_IN) == want, 30,
               "the group's committed offsets at the end of the input")

    # An aborted transaction's offsets never become committed.
    p.begin_transaction()
    p.produce(dst, b"aborted", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 1)],
                                  consumer.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    wait_complete(brokers, tid, "CompleteAbort")
    assert committed(brokers, group, src, N_IN) == want
    consumer.close()

    out = consume_all(brokers[0], dst, 2, "read_committed")
    assert sorted(out) == sorted(b"out-%04d" % i for i in range(n))
    chroot = chroot_of(brokers[0])
    wait_until(lambda: zk_leftovers(zookeeper, chroot) == {}, 20,
               "staged and outcome nodes cleaned up")
    for b in brokers:
        b.assert_alive()


def test_staged_offsets_follow_the_group_slot_to_a_joining_broker(broker_factory, zookeeper):
    from confluent_kafka import Consumer, TopicPartition

    from cluster_testlib import cluster_config, install_plugins
    from drover_testlib import ck_create_topic

    chroot = f"/drover-txg-follow-{os.getpid()}"

    def start_broker(broker_id: int):
        b = broker_factory(cluster_config(zookeeper, chroot, broker_id, coordinator=True,
                                          extra=CONFIG), start=False)
        install_plugins(b)
        b.start()
        return b

    first = start_broker(1)
    wait_until(lambda: registered(first, 1), 30, "broker 1 registered")
    src, dst = unique_topic("txg-follow-in"), unique_topic("txg-follow-out")
    ck_create_topic(first, src, 1)
    ck_create_topic(first, dst, 1)
    group = owned_by("txg-follow-group", 2)  # moves to broker 2 when it joins
    tid = owned_by("txg-follow-tid", 1)      # stays with broker 1
    feeder = txn_producer([first], "txg-follow-feeder")
    feeder.init_transactions(30)
    feeder.begin_transaction()
    for i in range(10):
        feeder.produce(src, b"%d" % i, partition=0)
    feeder.commit_transaction(30)

    consumer = Consumer({"bootstrap.servers": first.bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 3000,
                         "heartbeat.interval.ms": 500})
    consumer.subscribe([src])
    wait_until(lambda: consumer.poll(0.2) is not None and consumer.assignment(), 30,
               "the consumer assigned")
    p = txn_producer([first], tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(dst, b"out", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)],
                                  consumer.consumer_group_metadata(), 30)
    assert settled_fetch(first, group, src, 0)[0] == UNSTABLE_OFFSET_COMMIT

    # Broker 2 joins and gains the group's slot while the transaction is open.
    brokers = [first, start_broker(2)]
    wait_until(lambda: registered(brokers[1], 2), 30, "broker 2 registered")
    second = brokers[1]
    assert settled_fetch(second, group, src, 0)[0] == UNSTABLE_OFFSET_COMMIT
    assert offset_fetch_stable(first, group, src, 0)[0] == 16  # NOT_COORDINATOR

    p.commit_transaction(30)
    wait_complete(brokers, tid)
    assert wait_until(lambda: settled_fetch(second, group, src, 0) == (0, 5) or None, 30,
                      "the staged offset committed at the new owner")

    # An aborted transaction's offset is dropped there. The consumer rejoins at the
    # new coordinator first: until it has, its old member id is refused (KIP-447).
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + 30
    while True:
        consumer.poll(0.5)
        p.begin_transaction()
        try:
            p.send_offsets_to_transaction([TopicPartition(src, 0, 9)],
                                          consumer.consumer_group_metadata(), 30)
            break
        except KafkaException as e:
            assert e.args[0].txn_requires_abort() and time.monotonic() < deadline, e
            p.abort_transaction(30)
    assert settled_fetch(second, group, src, 0)[0] == UNSTABLE_OFFSET_COMMIT
    p.abort_transaction(30)
    wait_complete(brokers, tid, "CompleteAbort")
    assert settled_fetch(second, group, src, 0) == (0, 5)
    consumer.close()
    wait_until(lambda: zk_leftovers(zookeeper, chroot) == {}, 20,
               "staged and outcome nodes cleaned up")
    for b in brokers:
        b.assert_alive()


def test_eos_pipeline_survives_a_kill9_of_the_group_coordinator(
        broker_factory, zookeeper, tmp_path):
    from test_transactions import ck_watermarks_of, stop_workers
    from test_transactions_cluster import by_id

    brokers = start_cluster(broker_factory, zookeeper, n=2, coordinator=True, extra=CONFIG)
    src, dst = unique_topic("txg-kill-in"), unique_topic("txg-kill-out")
    create_topic(brokers, src, N_IN)
    create_topic(brokers, dst, N_IN)
    group = owned_by("txg-kill-group", 1)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    feeder = txn_producer(brokers, "txg-kill-feeder")
    feeder.init_transactions(30)
    n = 600
    feeder.begin_transaction()
    for i in range(n):
        feeder.produce(src, b"%06d" % i, key=b"%d" % i, partition=i % N_IN)
    feeder.commit_transaction(30)
    stop = tmp_path / "stop"
    worker = os.path.join(os.path.dirname(__file__), "txn_eos_worker.py")

    def spawn(k: int) -> subprocess.Popen:
        # Instance k keeps its transactional id across restarts (a restart fences its
        # predecessor, as a supervisor's restart of a Streams instance does).
        return subprocess.Popen(
            [sys.executable, worker, bootstrap, group, src, dst, f"txg-kill-{k}", str(stop)],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"worker{k}.log", "ab"),
            env={**os.environ, "EOS_SESSION_TIMEOUT_MS": "3000"})

    procs = [spawn(k) for k in range(3)]
    restarts = 0
    victim = by_id(brokers, 1)
    try:
        def output_flowing() -> bool:
            try:
                return sum(hw for _, hw in ck_watermarks_of(brokers[1], dst, N_IN).values()) >= n // 4
            except Exception:
                return False  # asked again
        wait_until(output_flowing, 120, "output flowing")
        victim.kill9()
        time.sleep(3)
        victim.start()
        deadline = time.monotonic() + 240
        want = [n // N_IN] * N_IN
        while True:
            try:
                if committed(brokers, group, src, N_IN) == want:
                    break
            except Exception:
                pass  # a coordinator moving: asked again
            assert time.monotonic() < deadline, "the group never committed the whole input"
            for k, pr in enumerate(procs):
                if pr.poll() is not None:
                    # A fatal client error (fenced after the kill): the supervisor's
                    # restart.
                    restarts += 1
                    assert restarts <= 6, "workers keep dying: see worker*.log"
                    procs[k] = spawn(k)
            time.sleep(0.5)
    finally:
        stop_workers(stop, procs)
    out = consume_all(brokers[1], dst, N_IN, "read_committed")
    assert sorted(out) == sorted(b"out-%06d" % i for i in range(n)), (
        f"{len(out)} output records for {n} inputs, {len(set(out))} distinct")
    wait_until(lambda: zk_leftovers(zookeeper, chroot_of(brokers[0])) == {}, 30,
               "staged and outcome nodes cleaned up")
    for b in brokers:
        b.assert_alive()
