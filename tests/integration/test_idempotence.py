"""Idempotent producers (issue 17, item 1; KIP-98 as Kafka 4.x serves it).

Raw protocol: InitProducerId hands out producer ids; a retried batch gets its original
base offset back and writes nothing; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an
older epoch is INVALID_PRODUCER_EPOCH; a producer idle for producer_id_expiration_ms is
forgotten; the state survives a clean restart and a kill -9. Real clients:
confluent-kafka (enable.idempotence) through broker crashes, and kafka-python with its
default enable_idempotence=True, read back exactly once.
Before this change, InitProducerId closed the connection and confluent-kafka stopped
with a fatal "Idempotent producer not supported" error.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from conftest import BrokerError
from drover_testlib import (
    RawConn,
    http_get,
    api_versions,
    ck_consume,
    ck_create_topic,
    ck_watermarks,
    kp_consume,
    kstr,
    unique_topic,
)
from test_record_validation import encode_record, produce_v8
from cluster_testlib import start_cluster

API_INIT_PRODUCER_ID = 22
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_PRODUCER_ID = 59


def init_producer_id(conn: RawConn, transactional_id: str | None = None) -> tuple[int, int, int]:
    """InitProducerId v1 (non-flexible) -> (error, producer_id, epoch)."""
    corr = conn.request(API_INIT_PRODUCER_ID, 1, kstr(transactional_id) + struct.pack(">i", 60000))
    body = conn.recv_response(corr)
    _throttle, error, pid, epoch = struct.unpack_from(">ihqh", body, 0)
    return error, pid, epoch


def idem_batch(pid: int, epoch: int, seq: int, n: int, tag: bytes) -> bytes:
    """A batch of `n` records from producer `pid`/`epoch` starting at sequence `seq`."""
    import crc32c

    now = int(time.time() * 1000)
    recs = b"".join(encode_record(i, i, None, tag + b"-%d" % i) for i in range(n))
    after_crc = (struct.pack(">hiqqqhi", 0, n - 1, now, now + n - 1, pid, epoch, seq)
                 + struct.pack(">i", n) + recs)
    after_len = struct.pack(">ibI", -1, 2, crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def end_offset(broker, topic: str) -> int:
    return ck_watermarks(broker, topic, [0])[0][1]


def test_init_producer_id_is_advertised_and_ids_are_unique_across_restarts(broker):
    lo, hi = api_versions(broker)[API_INIT_PRODUCER_ID]
    assert (lo, hi) == (0, 5)  # Kafka 4.1's range
    with RawConn(broker) as c:
        first = [init_producer_id(c) for _ in range(3)]
        assert [(e, ep) for e, _, ep in first] == [(NONE, 0)] * 3
        assert len({p for _, p, _ in first}) == 3
        # A transactional id: the transaction coordinator hands out another new id.
        error, txn_pid, epoch = init_producer_id(c, "txn-1")
        assert (error, epoch) == (NONE, 0) and txn_pid not in {p for _, p, _ in first}
    broker.kill9()
    broker.start()
    with RawConn(broker) as c:
        error, pid, _ = init_producer_id(c)
    assert error == NONE and pid not in {p for _, p, _ in first} and pid > max(p for _, p, _ in first)


def test_duplicate_gap_and_fenced_epoch(broker):
    topic = unique_topic("idem-raw")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, pid, epoch = init_producer_id(c)
        first = produce_v8(c, topic, idem_batch(pid, epoch, 0, 3, b"a"))
        assert (first["error"], first["base_offset"]) == (NONE, 0)
        second = produce_v8(c, topic, idem_batch(pid, epoch, 3, 2, b"b"))
        assert (second["error"], second["base_offset"]) == (NONE, 3)
        # A retry of the first batch: its original offset, nothing written.
        dup = produce_v8(c, topic, idem_batch(pid, epoch, 0, 3, b"a"))
        assert (dup["error"], dup["base_offset"]) == (NONE, 0)
        assert end_offset(broker, topic) == 5
        # A gap: sequence 6 where 5 is next.
        gap = produce_v8(c, topic, idem_batch(pid, epoch, 6, 1, b"c"))
        assert gap["error"] == OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        # A bumped epoch must start at 0 ...
        bumped = produce_v8(c, topic, idem_batch(pid, epoch + 1, 5, 1, b"d"))
        assert bumped["error"] == OUT_OF_ORDER_SEQUENCE_NUMBER, bumped
        ok = produce_v8(c, topic, idem_batch(pid, epoch + 1, 0, 1, b"d"))
        assert (ok["error"], ok["base_offset"]) == (NONE, 5)
        # ... and then the old epoch is fenced.
        old = produce_v8(c, topic, idem_batch(pid, epoch, 5, 1, b"e"))
        assert old["error"] == INVALID_PRODUCER_EPOCH, old
        assert end_offset(broker, topic) == 6


def test_an_idle_producer_expires(broker_factory):
    broker = broker_factory("[log]\nproducer_id_expiration_ms = 1500\n")
    topic = unique_topic("idem-expiry")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, pid, epoch = init_producer_id(c)
        assert produce_v8(c, topic, idem_batch(pid, epoch, 0, 2, b"a"))["base_offset"] == 0
        assert produce_v8(c, topic, idem_batch(pid, epoch, 0, 2, b"a"))["base_offset"] == 0
        time.sleep(2.0)
        # Forgotten: the same batch is a new producer's first batch now, and appended.
        again = produce_v8(c, topic, idem_batch(pid, epoch, 0, 2, b"a"))
        assert (again["error"], again["base_offset"]) == (NONE, 2)
        # A producer the partition does not know starts at any sequence, as Kafka 4.x
        # accepts (an id InitProducerId handed out: made-up ids are refused).
        _, other_pid, _ = init_producer_id(c)
        other = produce_v8(c, topic, idem_batch(other_pid, 0, 17, 1, b"z"))
        assert (other["error"], other["base_offset"]) == (NONE, 4)



def metric(broker, name: str) -> float:
    """The value of the unlabelled sample `name` on /metrics."""
    from test_admin import parse_metrics

    samples = parse_metrics(http_get(broker.admin_url + "/metrics")[2])
    values = [v for n, labels, v in samples if n == name and not labels]
    assert len(values) == 1, (name, values)
    return values[0]


def test_a_hostile_client_minting_producer_ids_does_not_lock_producers_out(broker_factory):
    """A client minting producer ids (raw frames, a new id per batch) past
    max_producer_ids_per_partition: the made-up ids are refused UNKNOWN_PRODUCER_ID
    (issue 28) and never enter the partition's producer state, so new producers keep
    being accepted, an active producer's retry is still deduplicated, and the partition
    remembers only real producers. Before issue 17, the 51st id and every later one were
    refused with POLICY_VIOLATION for a day; before issue 28 they were taken and evicted
    honest producers."""
    cap, flood = 50, 400
    broker = broker_factory(f"[log]\nmax_producer_ids_per_partition = {cap}\n")
    topic = unique_topic("idem-hostile")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, active, epoch = init_producer_id(c)
        seq, last = 0, None
        for i in range(flood):
            if i % 10 == 0:
                last = produce_v8(c, topic, idem_batch(active, epoch, seq, 1, b"active"))
                assert last["error"] == NONE, last
                seq += 1
            minted = produce_v8(c, topic, idem_batch(10_000_000 + i, 0, 0, 1, b"x"))
            assert minted["error"] == UNKNOWN_PRODUCER_ID, minted
        end = end_offset(broker, topic)
        # The active producer's retry of its last batch: its offset, nothing written.
        retry = produce_v8(c, topic, idem_batch(active, epoch, seq - 1, 1, b"active"))
        assert (retry["error"], retry["base_offset"]) == (NONE, last["base_offset"])
        assert end_offset(broker, topic) == end
        # A producer from InitProducerId is accepted too.
        _, fresh, fresh_epoch = init_producer_id(c)
        ok = produce_v8(c, topic, idem_batch(fresh, fresh_epoch, 0, 1, b"fresh"))
        assert (ok["error"], ok["base_offset"]) == (NONE, end)
    assert metric(broker, "drover_producer_ids") == 2
    assert metric(broker, "drover_producer_ids_evicted_total") == 0


def test_a_lowered_cap_keeps_the_snapshot_and_its_active_producers(broker_factory):
    """A clean restart with a lower max_producer_ids_per_partition: the snapshot is
    loaded and trimmed (the producers idle longest go), so a kept producer's retry is
    still deduplicated. Before, the snapshot was refused and the state rebuilt from the
    last two segments only."""
    # Each produce below starts a segment (segment_ms = 1 and 5 ms between them), so a state
    # rebuilt from the last two segments would not know pids[-4].
    broker = broker_factory("[log]\nsegment_ms = 1\n")
    topic = unique_topic("idem-lowered")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        pids = [init_producer_id(c)[1] for _ in range(12)]
        offsets = []
        for pid in pids:
            r = produce_v8(c, topic, idem_batch(pid, 0, 0, 2, b"p"))
            assert r["error"] == NONE, r
            offsets.append(r["base_offset"])
            time.sleep(0.005)  # distinct last-write times, so the idle order is defined
    broker.terminate()
    broker.config_path.write_text("[log]\nsegment_ms = 1\nmax_producer_ids_per_partition = 4\n")
    broker.start()
    end = end_offset(broker, topic)
    with RawConn(broker) as c:
        dup = produce_v8(c, topic, idem_batch(pids[-4], 0, 0, 2, b"p"))
        assert (dup["error"], dup["base_offset"]) == (NONE, offsets[-4])
        assert end_offset(broker, topic) == end
    assert metric(broker, "drover_producer_ids") == 4
    # The 8 forgotten at load are counted (with the partition's first append).
    assert metric(broker, "drover_producer_ids_evicted_total") == 12 - 4


def test_after_a_kill9_the_cap_evicts_the_producer_that_wrote_longest_ago(broker_factory):
    """A long-lived producer L (the lowest id) writes, newer producers fill the table
    (L is evicted), L writes again, one more producer comes; after a kill -9 the state
    is rebuilt from the log at max_producer_ids_per_partition, and L's retry of its last
    batch is still a duplicate. Before, replay stamped every batch with the restart time
    and eviction broke the tie by the lowest id: L went, and its retry was written twice
    (issue 17 review, item 1)."""
    cap = 4
    # Eviction of producers that wrote a moment ago (the floor is for floods, not this).
    broker = broker_factory(f"[log]\nmax_producer_ids_per_partition = {cap}\n"
                            "producer_id_eviction_min_idle_ms = 0\n")
    topic = unique_topic("idem-kill9-cap")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, long_lived, epoch = init_producer_id(c)
        others = [init_producer_id(c)[1] for _ in range(cap + 1)]
        assert all(pid > long_lived for pid in others)
        r = produce_v8(c, topic, idem_batch(long_lived, epoch, 0, 1, b"L0"))
        assert (r["error"], r["base_offset"]) == (NONE, 0)
        for pid in others[:cap]:
            assert produce_v8(c, topic, idem_batch(pid, 0, 0, 1, b"o"))["error"] == NONE
        last = produce_v8(c, topic, idem_batch(long_lived, epoch, 1, 1, b"L1"))
        assert (last["error"], last["base_offset"]) == (NONE, cap + 1)
        assert produce_v8(c, topic, idem_batch(others[cap], 0, 0, 1, b"o"))["error"] == NONE
    broker.kill9()
    broker.start()
    end = end_offset(broker, topic)
    assert end == cap + 3
    with RawConn(broker) as c:
        retry = produce_v8(c, topic, idem_batch(long_lived, epoch, 1, 1, b"L1"))
        assert (retry["error"], retry["base_offset"]) == (NONE, cap + 1)
    assert end_offset(broker, topic) == end


def test_a_damaged_producer_id_block_file_stops_startup(broker_factory):
    """An empty or corrupt <data_dir>/producer_id_block: the broker refuses to start,
    naming the file, instead of reporting ready and failing every InitProducerId."""
    for contents in ["", "not a number\n"]:
        broker = broker_factory(start=False)
        path = broker.data_dir / "producer_id_block"
        path.write_text(contents)
        with pytest.raises(BrokerError) as failed:
            broker.start()
        assert broker.returncodes and broker.returncodes[-1] != 0
        assert str(path) in broker.stderr_text(), broker.stderr_text()
        assert "producer" in str(failed.value)
        # The file is left as it was, for the operator to repair.
        assert path.read_text() == contents


def test_a_partition_named_twice_in_one_produce_keeps_the_last_entry(broker):
    """Produce v3 naming partition 0 twice: as Kafka (one map entry per partition in
    KafkaApis.handleProduceRequest), the last entry is appended and answered once;
    the first is dropped. Before, the first was appended and the second refused with
    INVALID_RECORD."""
    from drover_testlib import parse_fetch_v4, fetch_v4_request, record_batch

    topic = unique_topic("produce-twice")
    ck_create_topic(broker, topic, 1)
    first = record_batch([(b"k", b"first")])
    last = record_batch([(b"k", b"last-1"), (b"k", b"last-2")])
    body = (kstr(None) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 2)
            + struct.pack(">i", 0) + struct.pack(">i", len(first)) + first
            + struct.pack(">i", 0) + struct.pack(">i", len(last)) + last)
    with RawConn(broker) as c:
        corr = c.request(0, 3, body)
        resp = c.recv_response(corr)
        (nt,) = struct.unpack_from(">i", resp, 0)
        assert nt == 1
        (tl,) = struct.unpack_from(">h", resp, 4)
        pos = 6 + tl
        (np_,) = struct.unpack_from(">i", resp, pos)
        assert np_ == 1, "one answer for the partition"
        part, err, base = struct.unpack_from(">ihq", resp, pos + 4)
        assert (part, err, base) == (0, NONE, 0)
        corr = c.request(1, 4, fetch_v4_request(topic, 0, 0, max_wait_ms=0, min_bytes=1))
        fetched = parse_fetch_v4(c.recv_response(corr))[(topic, 0)]
    assert end_offset(broker, topic) == 2
    assert b"last-1" in fetched.records and b"first" not in fetched.records


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_state_survives_a_restart(broker, how):
    topic = unique_topic("idem-restart")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, pid, epoch = init_producer_id(c)
        for i in range(4):
            r = produce_v8(c, topic, idem_batch(pid, epoch, 2 * i, 2, b"r%d" % i))
            assert (r["error"], r["base_offset"]) == (NONE, 2 * i)
    if how == "restart":
        broker.restart()
    else:
        broker.kill9()
        broker.start()
    with RawConn(broker) as c:
        dup = produce_v8(c, topic, idem_batch(pid, epoch, 4, 2, b"r2"))
        assert (dup["error"], dup["base_offset"]) == (NONE, 4)
        gap = produce_v8(c, topic, idem_batch(pid, epoch, 9, 1, b"x"))
        assert gap["error"] == OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = produce_v8(c, topic, idem_batch(pid, epoch, 8, 1, b"n"))
        assert (nxt["error"], nxt["base_offset"]) == (NONE, 8)
    assert end_offset(broker, topic) == 9


def test_confluent_kafka_idempotent_producer_survives_broker_crashes(broker):
    """100,000 records over 3 partitions with enable.idempotence=true while the broker
    is killed with SIGKILL twice and started again on the same data dir and port within
    the client's message.timeout.ms: every record is delivered, and the log holds each
    exactly once, in the order produced per partition."""
    from confluent_kafka import Producer

    topic = unique_topic("idem-ck")
    partitions, total = 3, 100_000
    ck_create_topic(broker, topic, partitions)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 180000,
                  "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500})
    delivered = [0]
    errors = []
    lock = threading.Lock()

    def on_delivery(err, _msg):
        with lock:
            if err is not None:
                errors.append(err)
            else:
                delivered[0] += 1

    crashes = []

    def crash_when(at: int):
        while True:
            with lock:
                if delivered[0] >= at or errors:
                    break
            time.sleep(0.01)
        broker.kill9()
        crashes.append(delivered[0])
        time.sleep(1.0)
        broker.start()

    finished = threading.Event()

    def disrupt():
        crash_when(total // 4)
        crash_when(total * 3 // 5)
        # The broker dies with the thread that started it (the fixture's
        # PR_SET_PDEATHSIG follows the starting thread): stay until the test is done.
        finished.wait()

    t = threading.Thread(target=disrupt, daemon=True)
    t.start()
    # Each crash must land while records are still being produced: the producer waits
    # (delivering what it has sent) at 40% for the first crash and at 80% for the
    # second. On a loaded machine the restart after the first crash took so long that
    # every record was delivered before the second one (crashes [38825, 100000]).
    pauses = {total * 2 // 5: 1, total * 4 // 5: 2}
    for i in range(total):
        if i in pauses:
            deadline = time.monotonic() + 120
            while len(crashes) < pauses[i] and not errors and time.monotonic() < deadline:
                p.poll(0.05)
        part = i % partitions
        value = b"%d-%d" % (part, i // partitions)
        while True:
            try:
                p.produce(topic, value=value, partition=part, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    try:
        left = p.flush(240)
        check_crash_run(broker, p, topic, partitions, total, left, errors, crashes)
    finally:
        finished.set()
        t.join(timeout=10)


def check_crash_run(broker, p, topic, partitions, total, left, errors, crashes):
    assert left == 0, f"{left} records not delivered"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    assert len(crashes) == 2 and all(c < total for c in crashes), crashes
    per_part = {q: len(range(q, total, partitions)) for q in range(partitions)}
    marks = ck_watermarks(broker, topic, list(range(partitions)))
    assert {q: marks[q][1] for q in range(partitions)} == per_part, "duplicates or losses"
    got = ck_consume(broker, topic, per_part, timeout=180)
    for q in range(partitions):
        values = [r.value for r in got[q]]
        assert values == [b"%d-%d" % (q, j) for j in range(per_part[q])], f"partition {q}"


def test_kafka_python_default_idempotent_producer(broker):
    from kafka import KafkaProducer

    topic = unique_topic("idem-kp")
    ck_create_topic(broker, topic, 2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5,
                      request_timeout_ms=15000, max_block_ms=20000)
    assert p.config["enable_idempotence"], "kafka-python's default"
    n = 2_000
    futs = [p.send(topic, value=b"v%d" % i, partition=i % 2) for i in range(n)]
    p.flush(timeout=60)
    metas = [f.get(timeout=30) for f in futs]
    p.close(timeout=10)
    assert len({(m.partition, m.offset) for m in metas}) == n
    got = kp_consume(broker, topic, {0: n // 2, 1: n // 2})
    for q in (0, 1):
        assert [r.value for r in got[q]] == [b"v%d" % i for i in range(q, n, 2)]
    assert ck_watermarks(broker, topic, [0, 1]) == {0: (0, n // 2), 1: (0, n // 2)}


def test_producer_ids_are_unique_across_a_cluster(broker_factory, zookeeper):
    """Two brokers take blocks of producer ids from /latest_producer_id_block; ids never
    repeat across brokers, nor after both are killed and started again."""
    brokers = start_cluster(broker_factory, zookeeper, n=2)
    seen: list[int] = []

    def take(b, n):
        with RawConn(b) as c:
            for _ in range(n):
                # Retriable while the restarted broker has no ZooKeeper session yet, as
                # clients retry it.
                deadline = time.monotonic() + 30
                while True:
                    error, pid, epoch = init_producer_id(c)
                    if error != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                assert (error, epoch) == (NONE, 0)
                seen.append(pid)

    for b in brokers:
        take(b, 3)
    for b in brokers:
        b.kill9()
    for b in brokers:
        b.start()
    for b in reversed(brokers):
        take(b, 3)
    assert len(seen) == len(set(seen)) == 12, seen
