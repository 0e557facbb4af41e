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

from drover_testlib import (
    RawConn,
    api_versions,
    ck_consume,
    ck_create_topic,
    ck_watermarks,
    kp_consume,
    kstr,
    unique_topic,
)
from test_record_validation import encode_record, produce_v8

API_INIT_PRODUCER_ID = 22
NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


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
        # A transactional id: no transaction coordinator here, as FindCoordinator says.
        assert init_producer_id(c, "txn-1")[0] == COORDINATOR_NOT_AVAILABLE
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
        # An unknown producer starts at any sequence, as Kafka 4.x accepts.
        other = produce_v8(c, topic, idem_batch(pid + 1000, 0, 17, 1, b"z"))
        assert (other["error"], other["base_offset"]) == (NONE, 4)


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
