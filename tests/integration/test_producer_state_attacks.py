"""What one stranger could do to transactions and producer state (issue 28 item 1).

Raw frames play the stranger; the victims are real clients or honest raw producers:
- A plain idempotent batch carrying an open transaction's producer id (read through
  DescribeTransactions) with its epoch + 1 is refused INVALID_TXN_STATE, as Kafka's
  "expected transactional write"; the victim's commit then ends its transaction and a
  read_committed consumer (confluent-kafka's default) reads it, before and after a
  kill -9. Before, the batch was accepted, the commit marker was dropped as fenced and
  the partition's last stable offset stayed frozen for good.
- A transaction that hangs anyway (its coordinator's record gone, as after a lost data
  directory) is listed by `drover admin transactions partitions --hanging` and ended by
  `drover admin transactions abort`, deleting nothing.
- 100,000 made-up producer ids are refused UNKNOWN_PRODUCER_ID and never reach the
  partition's producer state: an honest producer's retry is still a duplicate.
  Before, they evicted the honest producer and its retry was written twice.
- Issued ids past max_producer_ids_per_partition never evict a producer that wrote
  within producer_id_eviction_min_idle_ms: the newcomer is refused (retriable) instead.
"""

from __future__ import annotations

import json
import struct
import subprocess
import time

import pytest

from conftest import drover_bin
from drover_testlib import (RawConn, ck_conf, ck_create_topic, kstr, unique_topic,
                            wait_topic_partitions)
from test_idempotence import end_offset, idem_batch, init_producer_id, metric
from test_read_committed import fetch, txn_batch
from test_record_validation import produce_v8
from test_transactions_raw import INVALID_TXN_STATE, add_partitions, describe_txn, init_pid

NONE = 0
NOT_ENOUGH_REPLICAS = 19
UNKNOWN_PRODUCER_ID = 59


def admin(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(drover_bin()), "admin", "--admin", f"127.0.0.1:{broker.admin_port}",
         "transactions", *args],
        capture_output=True, text=True, timeout=30)


def read_committed(broker, topic: str, expect: int, timeout: float = 20) -> list[bytes]:
    """What a confluent-kafka consumer at its default isolation (read_committed) reads
    from partition 0 of `topic` until it has `expect` records (or the time is up)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(ck_conf(broker, **{"group.id": unique_topic("rc"),
                                    "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        # A little longer: nothing more may come.
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


def test_a_strangers_plain_batch_cannot_freeze_read_committed(broker):
    from confluent_kafka import Producer

    topic = unique_topic("txn-hijack")
    ck_create_topic(broker, topic, 1)
    tid = unique_topic("victim")
    victim = Producer(ck_conf(broker, **{"transactional.id": tid, "linger.ms": 5}))
    victim.init_transactions(30)
    victim.begin_transaction()
    for i in range(7):
        victim.produce(topic, value=b"v%d" % i, partition=0)
    assert victim.flush(20) == 0
    with RawConn(broker) as c:
        error, state, pid, epoch, _topics = describe_txn(c, tid)
        assert (error, state) == (NONE, "Ongoing")
        for bad_epoch, seq in [(epoch + 1, 0), (epoch, 7)]:
            r = produce_v8(c, topic, idem_batch(pid, bad_epoch, seq, 1, b"stranger"))
            assert r["error"] == INVALID_TXN_STATE, r
    victim.commit_transaction(30)
    assert read_committed(broker, topic, 7) == [b"v%d" % i for i in range(7)]
    with RawConn(broker) as c:
        f = fetch(c, topic, 0, isolation=1)
        assert f["lso"] == f["hw"] == 8, f
    broker.kill9()
    broker.start()
    assert read_committed(broker, topic, 7) == [b"v%d" % i for i in range(7)]
    with RawConn(broker) as c:
        f = fetch(c, topic, 0, isolation=1)
        assert f["lso"] == f["hw"] == 8, f


def test_an_operator_ends_a_hanging_transaction_without_deleting_data(broker):
    """A transaction whose coordinator record is gone hangs: nothing will write its
    marker. Simulated by replacing the transaction coordinator's store after a crash
    (a lost `__transaction_state`, in Kafka's terms): the partition still has the
    transaction open, the coordinator does not know it."""
    topic = unique_topic("txn-hanging")
    ck_create_topic(broker, topic, 1)
    tid = unique_topic("lost")
    with RawConn(broker) as c:
        _, pid, epoch = init_pid(c, tid)
        assert add_partitions(c, tid, pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
        _, plain, pe = init_producer_id(c)
        assert produce_v8(c, topic, idem_batch(plain, pe, 0, 2, b"before"))["error"] == NONE
        assert produce_v8(c, topic, txn_batch(pid, epoch, 0, 3, b"txn"))["error"] == NONE
        assert produce_v8(c, topic, idem_batch(plain, pe, 2, 2, b"after"))["error"] == NONE
        assert fetch(c, topic, 0, isolation=1)["lso"] == 2
    # Not hanging while its coordinator has it open: listed, and the abort is refused.
    listed = json.loads(admin(broker, "partitions").stdout)["open"]
    assert [(t["producer_id"], t["hanging"], t["transactional_id"]) for t in listed] == [
        (pid, False, tid)]
    refused = admin(broker, "abort", "--topic", topic, "--partition", "0",
                    "--producer-id", str(pid))
    assert refused.returncode != 0 and "409" in refused.stderr, refused
    # The coordinator's record is lost.
    broker.kill9()
    (broker.data_dir / "transactions.redb").unlink()
    broker.start()
    hanging = json.loads(admin(broker, "partitions", "--hanging").stdout)["open"]
    assert [(t["topic"], t["partition"], t["producer_id"], t["first_offset"]) for t in hanging] == [
        (topic, 0, pid, 2)], hanging
    with RawConn(broker) as c:
        assert fetch(c, topic, 0, isolation=1)["lso"] == 2
    done = admin(broker, "abort", "--topic", topic, "--partition", "0",
                 "--producer-id", str(pid))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"first_offset": 2, "marker_offset": 7}
    with RawConn(broker) as c:
        f = fetch(c, topic, 0, isolation=1)
        assert (f["lso"], f["hw"]) == (8, 8), f
        assert f["aborted"] == [(pid, 2)], f
        # Nothing deleted: read_uncommitted still reads every batch.
        assert fetch(c, topic, 0, isolation=0)["bases"] == [0, 2, 5, 7]
    assert json.loads(admin(broker, "partitions").stdout)["open"] == []
    again = admin(broker, "abort", "--topic", topic, "--partition", "0",
                  "--producer-id", str(pid))
    assert again.returncode != 0 and "404" in again.stderr, again


def produce_request(corr: int, topic: str, records: bytes) -> bytes:
    """A framed Produce v8 request (acks -1) of `records` to partition 0."""
    from drover_testlib import frame, request_header

    body = (kstr(None) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(records))
            + records)
    return frame(request_header(0, 8, corr) + body)


def partition_error(response: bytes) -> int:
    """The error code of the one partition of a Produce v8 response body."""
    (name_len,) = struct.unpack_from(">h", response, 4)
    (error,) = struct.unpack_from(">h", response, 4 + 2 + name_len + 4 + 4)
    return error


def test_a_flood_of_made_up_producer_ids_cannot_undo_deduplication(broker):
    topic = unique_topic("idem-flood")
    ck_create_topic(broker, topic, 1)
    flood, in_flight = 100_000, 8
    with RawConn(broker, timeout=30) as honest, RawConn(broker, timeout=30) as stranger:
        _, pid, epoch = init_producer_id(honest)
        first = produce_v8(honest, topic, idem_batch(pid, epoch, 0, 2, b"honest"))
        assert (first["error"], first["base_offset"]) == (NONE, 0)
        sent = 0
        errors: dict[int, int] = {}
        started = time.monotonic()
        while sent < flood:
            n = min(in_flight, flood - sent)
            frames = b"".join(
                produce_request(sent + i + 1, topic,
                                idem_batch(1_000_000 + sent + i, 0, 0, 1, b"x"))
                for i in range(n))
            stranger.send_raw(frames)
            for i in range(n):
                code = partition_error(stranger.recv_response(sent + i + 1))
                errors[code] = errors.get(code, 0) + 1
            sent += n
        took = time.monotonic() - started
        assert errors == {UNKNOWN_PRODUCER_ID: flood}, errors
        # The honest producer's retry of its batch: a duplicate, nothing written.
        retry = produce_v8(honest, topic, idem_batch(pid, epoch, 0, 2, b"honest"))
        assert (retry["error"], retry["base_offset"]) == (NONE, 0), retry
        assert end_offset(broker, topic) == 2
    assert metric(broker, "drover_producer_ids") == 1
    print(f"{flood} made-up producer ids refused in {took:.1f} s")


def test_issued_ids_past_the_cap_never_evict_a_recent_producer(broker_factory):
    cap = 5
    broker = broker_factory(f"[log]\nmax_producer_ids_per_partition = {cap}\n")
    topic = unique_topic("idem-floor")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, honest, epoch = init_producer_id(c)
        first = produce_v8(c, topic, idem_batch(honest, epoch, 0, 1, b"honest"))
        assert first["error"] == NONE
        others = [init_producer_id(c)[1] for _ in range(cap + 10)]
        codes = [produce_v8(c, topic, idem_batch(p, 0, 0, 1, b"o"))["error"] for p in others]
        assert codes == [NONE] * (cap - 1) + [NOT_ENOUGH_REPLICAS] * 11, codes
        retry = produce_v8(c, topic, idem_batch(honest, epoch, 0, 1, b"honest"))
        assert (retry["error"], retry["base_offset"]) == (NONE, 0), retry
    assert metric(broker, "drover_producer_ids") == cap
    assert metric(broker, "drover_producer_ids_evicted_total") == 0


def test_in_cluster_mode_ids_from_any_broker_are_taken_made_up_ones_refused(broker_factory,
                                                                         zookeeper):
    """Cluster mode: the leader of a partition takes a producer id that another broker
    handed out (its block is newer than the leader's last reading of ZooKeeper, which
    it reads again), and refuses one no broker handed out."""
    from cluster_testlib import start_cluster, wait_until
    from test_cluster import leaders

    brokers = start_cluster(broker_factory, zookeeper, n=2)
    topic = unique_topic("idem-cluster")
    ck_create_topic(brokers[0], topic, 2)
    placement = wait_until(lambda: len(leaders(brokers[0], topic)) == 2
                           and leaders(brokers[0], topic), 15, "leaders")
    by_id = {i + 1: b for i, b in enumerate(brokers)}
    for b in brokers:  # every broker has its copy of the topic
        wait_topic_partitions(b, topic, 2)
    for partition, leader_id in placement.items():
        leader = by_id[leader_id]
        other = by_id[3 - leader_id]
        with RawConn(other) as c:
            # Take a fresh block on the other broker: newer than what the leader read.
            for _ in range(3):
                error, pid, epoch = init_producer_id(c)
            assert error == NONE
        with RawConn(leader) as c:
            # Until the leader has its local copy of the topic: UNKNOWN_TOPIC_OR_PARTITION.
            deadline = time.monotonic() + 15
            while True:
                ok = produce_v8_to(c, topic, partition, idem_batch(pid, epoch, 0, 1, b"ok"))
                if ok != 3 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert ok == NONE
            made_up = produce_v8_to(c, topic, partition,
                                    idem_batch(pid + 5_000_000, 0, 0, 1, b"no"))
            assert made_up in (UNKNOWN_PRODUCER_ID, NOT_ENOUGH_REPLICAS), made_up
            # Once the leader may read ZooKeeper again, the answer is definite.
            time.sleep(0.2)
            made_up = produce_v8_to(c, topic, partition,
                                    idem_batch(pid + 5_000_001, 0, 0, 1, b"no"))
            assert made_up == UNKNOWN_PRODUCER_ID


def produce_v8_to(c: RawConn, topic: str, partition: int, records: bytes) -> int:
    """Produce v8 of `records` to `partition`; the partition's error code."""
    body = (kstr(None) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">i", partition)
            + struct.pack(">i", len(records)) + records)
    return partition_error(c.recv_response(c.request(0, 8, body)))


def test_producer_ids_without_a_transactional_id_are_bounded_per_client(broker_factory):
    """InitProducerId without a transactional id hands out a new producer id each time:
    at most transactions.new_ids_per_sec_per_client per second per client address, then
    COORDINATOR_LOAD_IN_PROGRESS (retriable); another address is not held back."""
    broker = broker_factory("[transactions]\nnew_ids_per_sec_per_client = 5\n")
    with RawConn(broker) as c:
        codes = [init_producer_id(c)[0] for _ in range(40)]
    assert codes.count(NONE) < 15 and codes[:5] == [NONE] * 5, codes
    assert set(codes) == {NONE, 14}, codes
    import socket
    s = socket.create_connection((broker.host, broker.port), source_address=("127.0.0.2", 0))
    other = RawConn.__new__(RawConn)
    other.sock, other.corr = s, 0
    with other:
        assert init_producer_id(other)[0] == NONE


def test_in_cluster_mode_a_live_transaction_cannot_be_aborted_by_the_admin_api(
        broker_factory, zookeeper):
    """Cluster mode: on the leader of a partition whose transaction another broker
    coordinates, the admin abort is refused (409) while the transaction may still be
    committed — its last write younger than transactions.max_timeout_ms — so the
    producer's acknowledged commit keeps every partition's records (found by a hostile
    review: it was accepted there and half of a committed transaction was lost)."""
    import uuid

    from confluent_kafka import Producer

    from cluster_testlib import start_cluster, wait_until
    from drover_testlib import http_get, wait_topic_partitions
    from test_cluster import leaders
    from test_transactions_raw import find_txn_coordinator

    brokers = start_cluster(broker_factory, zookeeper, n=2)
    topic = unique_topic("txn-atomic")
    ck_create_topic(brokers[0], topic, 2)
    lead = wait_until(lambda: len(leaders(brokers[0], topic)) == 2
                      and leaders(brokers[0], topic), 20, "leaders")
    for b in brokers:
        wait_topic_partitions(b, topic, 2)
    by_id = {1: brokers[0], 2: brokers[1]}
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
    # A transactional id whose coordinator does not lead some partition of the topic.
    for _ in range(20):
        tid = "victim-" + uuid.uuid4().hex[:8]
        with RawConn(brokers[0]) as c:
            _err, node, _host, _port = find_txn_coordinator(c, tid)
        others = [p for p, leader in lead.items() if leader != node]
        if others:
            break
    assert others, lead
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for part in (0, 1):
        for i in range(3):
            p.produce(topic, value=b"p%d-v%d" % (part, i), partition=part)
    assert p.flush(20) == 0
    target = others[0]
    leader = by_id[lead[target]]
    listed = json.loads(http_get(leader.admin_url + "/v1/transactions/partitions")[2])["open"]
    entry = [e for e in listed if e["topic"] == topic and e["partition"] == target][0]
    assert entry["hanging"] is False, entry
    refused = admin(leader, "abort", "--topic", topic, "--partition", str(target),
                    "--producer-id", str(entry["producer_id"]))
    assert refused.returncode != 0 and "409" in refused.stderr, refused
    p.commit_transaction(30)
    for part in (0, 1):
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("rc"),
                      "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(topic, part, 0)])
            got, deadline = [], time.monotonic() + 20
            while len(got) < 3 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
        finally:
            c.close()
        assert got == [b"p%d-v%d" % (part, i) for i in range(3)], (part, got)
