"""read_committed and the last stable offset (issue 18 item 2, the data plane).

Raw frames against a real broker: transactional batches (attributes bit 4) from two
producers interleaved with plain ones; a read_committed Fetch (isolation level 1)
stops at the last stable offset (the first offset of the earliest ongoing
transaction) and reports it, a read_uncommitted one reads to the end; ListOffsets with
isolation level 1 answers the last stable offset as latest. The ongoing transactions
survive a `kill -9`. A confluent-kafka consumer with isolation.level=read_committed
gets exactly the records below the last stable offset. The transactional producers
get their ids from the transaction coordinator and add the partition to their
transaction first (AddPartitionsToTxn), as the Produce handler verifies (KIP-890 part
1: a transactional batch for a partition not added is INVALID_TXN_STATE). Markers are
tested through the log's API in Rust (log/src/partition/txn_tests.rs) and end to
end with real clients in test_transactions.py.
Before this change, a transactional batch was refused with INVALID_TXN_STATE and
read_committed fetches read to the log end.
"""

from __future__ import annotations

import struct
import time

from drover_testlib import RawConn, ck_create_topic, ck_watermarks, kstr, unique_topic
from test_idempotence import init_producer_id
from test_record_validation import encode_record, produce_v8
from test_transactions_raw import INVALID_TXN_STATE, add_partitions, init_pid


def txn_producer(conn: RawConn, tid: str, topic: str) -> tuple[int, int, int]:
    """A transactional producer whose transaction has partition 0 of `topic`."""
    err, pid, epoch = init_pid(conn, tid)
    assert err == NONE
    assert add_partitions(conn, tid, pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
    return err, pid, epoch

NONE = 0


def txn_batch(pid: int, epoch: int, seq: int, n: int, tag: bytes, *,
              transactional: bool = True) -> bytes:
    """A batch of `n` records from `pid`/`epoch` at sequence `seq`, transactional
    (attributes bit 4) or only idempotent."""
    import crc32c

    now = int(time.time() * 1000)
    attributes = 0x10 if transactional else 0
    recs = b"".join(encode_record(i, i, None, tag + b"-%d" % i) for i in range(n))
    after_crc = (struct.pack(">hiqqqhi", attributes, n - 1, now, now + n - 1, pid, epoch, seq)
                 + struct.pack(">i", n) + recs)
    after_len = struct.pack(">ibI", -1, 2, crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def fetch(conn: RawConn, topic: str, offset: int, isolation: int) -> dict:
    """Fetch v4 of partition 0 from `offset` -> high watermark, last stable offset,
    aborted transactions, base offsets of the batches returned."""
    body = (struct.pack(">iiiib", -1, 0, 1, 50 << 20, isolation)
            + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">iqi", 0, offset, 10 << 20))
    resp = conn.recv_response(conn.request(1, 4, body))
    pos = 4
    (nt,) = struct.unpack_from(">i", resp, pos)
    assert nt == 1
    (tl,) = struct.unpack_from(">h", resp, pos + 4)
    pos += 6 + tl
    (np_,) = struct.unpack_from(">i", resp, pos)
    assert np_ == 1
    _part, err, hw, lso = struct.unpack_from(">ihqq", resp, pos + 4)
    pos += 4 + 22
    (na,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    aborted = []
    for _ in range(max(na, 0)):
        aborted.append(struct.unpack_from(">qq", resp, pos))
        pos += 16
    (rl,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    records = resp[pos:pos + max(rl, 0)]
    bases, at = [], 0
    while at + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, at)
        if at + 12 + length > len(records):
            break
        bases.append(base)
        at += 12 + length
    return {"error": err, "hw": hw, "lso": lso, "aborted": aborted, "bases": bases}


def list_latest(conn: RawConn, topic: str, isolation: int) -> int:
    """ListOffsets v2, latest (-1) of partition 0 at `isolation` -> offset."""
    body = (struct.pack(">ib", -1, isolation) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">iq", 0, -1))
    resp = conn.recv_response(conn.request(2, 2, body))
    (tl,) = struct.unpack_from(">h", resp, 8)
    pos = 10 + tl + 4  # throttle, topic count, name, partition count
    _part, err, _ts, offset = struct.unpack_from(">ihqq", resp, pos)
    assert err == NONE
    return offset


def test_read_committed_stops_at_the_last_stable_offset(broker):
    topic = unique_topic("txn-lso")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        # A batch of a transaction that did not add the partition is refused.
        _, z, ez = init_pid(c, unique_topic("no-add"))
        r = produce_v8(c, topic, txn_batch(z, ez, 0, 1, b"z"))
        assert r["error"] == INVALID_TXN_STATE, r
        (_, a, ea), (_, b, eb) = (txn_producer(c, unique_topic(t), topic) for t in ("a", "b"))
        _, plain, ep = init_producer_id(c)
        steps = [
            (plain, ep, 0, 2, False),  # 0..=1 committed data, no transaction
            (a, ea, 0, 2, True),       # 2..=3 transaction of a: the LSO stops here
            (plain, ep, 2, 1, False),  # 4
            (b, eb, 0, 3, True),       # 5..=7 transaction of b
            (a, ea, 2, 1, True),       # 8 a's transaction goes on
        ]
        for pid, epoch, seq, n, txn in steps:
            r = produce_v8(c, topic, txn_batch(pid, epoch, seq, n, b"r", transactional=txn))
            assert r["error"] == NONE, r
        committed = fetch(c, topic, 0, isolation=1)
        assert (committed["error"], committed["hw"], committed["lso"]) == (NONE, 9, 2)
        assert committed["bases"] == [0]
        assert committed["aborted"] == []
        # Nothing at or past the LSO for read_committed.
        assert fetch(c, topic, 4, isolation=1)["bases"] == []
        uncommitted = fetch(c, topic, 0, isolation=0)
        assert uncommitted["bases"] == [0, 2, 4, 5, 8]
        assert uncommitted["lso"] == 2
        assert list_latest(c, topic, isolation=1) == 2
        assert list_latest(c, topic, isolation=0) == 9
        # A retried transactional batch is still deduplicated.
        dup = produce_v8(c, topic, txn_batch(b, eb, 0, 3, b"r"))
        assert (dup["error"], dup["base_offset"]) == (NONE, 5)

    # The ongoing transactions survive a crash: rebuilt from the snapshot and the log.
    broker.kill9()
    broker.start()
    with RawConn(broker) as c:
        assert fetch(c, topic, 0, isolation=1)["lso"] == 2
        assert list_latest(c, topic, isolation=1) == 2
        assert fetch(c, topic, 0, isolation=0)["bases"] == [0, 2, 4, 5, 8]


def test_a_confluent_kafka_read_committed_consumer_sees_only_stable_records(broker):
    from confluent_kafka import Consumer, TopicPartition

    topic = unique_topic("txn-ck")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        _, plain, ep = init_producer_id(c)
        _, txn, et = txn_producer(c, unique_topic("ck"), topic)
        assert produce_v8(c, topic, txn_batch(plain, ep, 0, 3, b"stable",
                                              transactional=False))["error"] == NONE
        assert produce_v8(c, topic, txn_batch(txn, et, 0, 2, b"open"))["error"] == NONE
        assert produce_v8(c, topic, txn_batch(plain, ep, 3, 2, b"after",
                                              transactional=False))["error"] == NONE
    # librdkafka asks ListOffsets at its default isolation.level, read_committed: the
    # high end it sees is the last stable offset, 3, with 7 records in the log.
    assert ck_watermarks(broker, topic, [0])[0] == (0, 3)

    def consume(isolation: str, want: int) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{isolation}",
                             "enable.auto.commit": False, "isolation.level": isolation,
                             "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < want and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        # Whatever else arrives within a few more polls would be a leak past the LSO.
        for _ in range(4):
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=False)
        consumer.close()
        return got, high

    committed, high = consume("read_committed", 3)
    assert committed == [b"stable-0", b"stable-1", b"stable-2"]
    assert high == 3  # librdkafka's read_committed high watermark is the LSO
    uncommitted, _ = consume("read_uncommitted", 7)
    assert len(uncommitted) == 7
