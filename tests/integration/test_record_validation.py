"""Record validation on produce (issue 13, items 2, 5, 6, 12): batches whose CRC is
valid but whose records lie are refused per partition with Kafka's error code and a
reason, nothing of them is stored, and the partition stays readable by confluent-kafka
and kafka-python. Before validation, each of these was acknowledged and then either
served as wrong data (offsets taken twice or by nothing) or stopped every consumer of
the partition at the offset before it, across restarts.

The batches are built by hand (magic 2, CRC-32C) and sent with raw Produce v8 frames,
whose response carries `error_message` and `record_errors`.
"""

from __future__ import annotations

import gzip
import struct
import time

import pytest

from drover_testlib import (
    RawConn,
    ck_consume,
    ck_create_topic,
    ck_watermarks,
    fetch_v4_request,
    kp_consume,
    kstr,
    parse_fetch_v4,
    unique_topic,
    varint,
)

API_PRODUCE = 0
API_FETCH = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87

NOW_MS = int(time.time() * 1000)
HOUR_MS = 3_600_000


def encode_record(index: int, ts_delta: int, key: bytes | None, value: bytes | None, *,
                  offset_delta: int | None = None, fields: list[int] | None = None,
                  length: int | None = None, headers: list[tuple[bytes, bytes]] = ()) -> bytes:
    """One v2 record. `fields` replaces everything after the attributes byte with
    these varints (to write lengths that lie); `length` overrides the length prefix."""
    if fields is not None:
        body = b"\x00" + b"".join(varint(f) for f in fields)
    else:
        def blob(b):
            return varint(-1) if b is None else varint(len(b)) + b
        body = (b"\x00" + varint(ts_delta) + varint(index if offset_delta is None else offset_delta)
                + blob(key) + blob(value) + varint(len(headers))
                + b"".join(varint(len(k)) + k + varint(len(v)) + v for k, v in headers))
    return varint(len(body) if length is None else length) + body


def encode_batch(records: bytes, *, count: int, last_offset_delta: int | None = None,
                 attributes: int = 0, base_ts: int = NOW_MS, max_ts: int | None = None,
                 producer_id: int = -1, compress=None) -> bytes:
    """A batch around the encoded `records` (compressed with `compress` if given)."""
    import crc32c

    payload = compress(records) if compress else records
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = (struct.pack(">hiqqqhi", attributes, lod, base_ts,
                             base_ts + count - 1 if max_ts is None else max_ts,
                             producer_id, -1, -1 if producer_id < 0 else 0)
                 + struct.pack(">i", count) + payload)
    after_len = struct.pack(">ibI", -1, 2, crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def good_batch(n: int, tag: bytes, **kw) -> bytes:
    recs = b"".join(encode_record(i, i, tag + b"-k%d" % i, tag + b"-v%d" % i) for i in range(n))
    return encode_batch(recs, count=n, **kw)


def produce_v8(conn: RawConn, topic: str, records: bytes) -> dict:
    """Produce v8 of `records` to partition 0; returns the partition's response as a
    dict (error, base_offset, record_errors, error_message)."""
    body = (kstr(None) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(records))
            + records)
    corr = conn.request(API_PRODUCE, 8, body)
    resp = conn.recv_response(corr)
    pos = 0

    def i16():
        nonlocal pos
        (v,) = struct.unpack_from(">h", resp, pos)
        pos += 2
        return v

    def i32():
        nonlocal pos
        (v,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        return v

    def i64():
        nonlocal pos
        (v,) = struct.unpack_from(">q", resp, pos)
        pos += 8
        return v

    def nstr():
        nonlocal pos
        n = i16()
        if n < 0:
            return None
        s = resp[pos:pos + n].decode()
        pos += n
        return s

    assert i32() == 1
    assert nstr() == topic
    assert i32() == 1
    out = {"partition": i32(), "error": i16(), "base_offset": i64()}
    i64()  # log_append_time_ms
    i64()  # log_start_offset
    out["record_errors"] = [(i32(), nstr()) for _ in range(i32())]
    out["error_message"] = nstr()
    return out


def fetch_batches(broker, topic: str) -> list[bytes]:
    """Every stored batch of partition 0, as fetched."""
    with RawConn(broker) as c:
        corr = c.request(API_FETCH, 4, fetch_v4_request(topic, 0, 0, max_wait_ms=0,
                                                        min_bytes=1))
        part = parse_fetch_v4(c.recv_response(corr))[(topic, 0)]
    out, data = [], part.records
    while len(data) >= 12:
        (length,) = struct.unpack_from(">i", data, 8)
        out.append(data[:12 + length])
        data = data[12 + length:]
    return out


def gz(b: bytes) -> bytes:
    return gzip.compress(b)


def zstd(b: bytes) -> bytes:
    import zstandard
    return zstandard.ZstdCompressor().compress(b)


def lz4f(b: bytes) -> bytes:
    import lz4.frame
    return lz4.frame.compress(b)


def three(i: int, ts: int = 0) -> bytes:
    return b"".join(encode_record(j, ts, None, b"x%d" % j) for j in range(i))


# name -> (batch, expected error codes)
HOSTILE = {
    "4 records declaring 2": (encode_batch(three(4), count=2), {INVALID_RECORD}),
    "2 records declaring 5": (encode_batch(three(2), count=5), {INVALID_RECORD}),
    "1 record declaring 1,000,000": (encode_batch(three(1), count=1_000_000), {INVALID_RECORD}),
    "gzip flag over garbage": (encode_batch(b"\x17" * 40, count=1, attributes=1),
                               {CORRUPT_MESSAGE, INVALID_RECORD}),
    "zstd flag over garbage": (encode_batch(b"\x17" * 40, count=1, attributes=4),
                               {CORRUPT_MESSAGE, INVALID_RECORD}),
    "truncated gzip": (encode_batch(three(30), count=30, attributes=1,
                                    compress=lambda b: gz(b)[:-12]),
                       {CORRUPT_MESSAGE, INVALID_RECORD}),
    "truncated zstd": (encode_batch(three(30), count=30, attributes=4,
                                    compress=lambda b: zstd(b)[:-6]),
                       {CORRUPT_MESSAGE, INVALID_RECORD}),
    "truncated lz4": (encode_batch(three(30), count=30, attributes=3,
                                   compress=lambda b: lz4f(b)[:-9]),
                      {CORRUPT_MESSAGE, INVALID_RECORD}),
    "lz4 frame cut before its end mark": (encode_batch(three(30), count=30, attributes=3,
                                                       compress=lambda b: lz4f(b)[:-4]),
                                          {CORRUPT_MESSAGE, INVALID_RECORD}),
    "lz4 frame followed by junk": (encode_batch(three(30), count=30, attributes=3,
                                                compress=lambda b: lz4f(b) + b"12345678"),
                                   {CORRUPT_MESSAGE, INVALID_RECORD}),
    "negative key length": (encode_batch(encode_record(0, 0, None, None,
                                                       fields=[0, 0, -5, -1, 0]), count=1),
                            {INVALID_RECORD}),
    "oversized value length": (encode_batch(encode_record(0, 0, None, None,
                                                          fields=[0, 0, -1, 5000, 0]), count=1),
                               {INVALID_RECORD}),
    "negative record length": (encode_batch(encode_record(0, 0, None, b"v", length=-7), count=1),
                               {INVALID_RECORD}),
    "oversized record length": (encode_batch(encode_record(0, 0, None, b"v", length=9000),
                                             count=1), {INVALID_RECORD}),
    "header count 100,000,000": (encode_batch(encode_record(0, 0, None, None,
                                                            fields=[0, 0, -1, -1, 100_000_000]),
                                              count=1), {INVALID_RECORD}),
    "gzip records with a negative key length": (
        encode_batch(encode_record(0, 0, None, None, fields=[0, 0, -9, -1, 0]), count=1,
                     attributes=1, compress=gz), {INVALID_RECORD}),
    "offset deltas out of sequence": (
        encode_batch(encode_record(0, 0, None, b"a") + encode_record(1, 0, None, b"b",
                                                                      offset_delta=7), count=2),
        {INVALID_RECORD}),
    "timestamp in the year 2100": (good_batch(2, b"y", base_ts=4_102_444_800_000),
                                   {INVALID_TIMESTAMP}),
    "timestamp two hours ahead": (good_batch(2, b"f", base_ts=NOW_MS + 2 * HOUR_MS),
                                  {INVALID_TIMESTAMP}),
    "transactional without producer id": (good_batch(2, b"t", attributes=1 << 4),
                                          {INVALID_RECORD}),
    "two batches for one partition": (good_batch(1, b"a") + good_batch(1, b"b"),
                                      {INVALID_RECORD}),
    "LogAppendTime set by the producer": (good_batch(1, b"l", attributes=1 << 3),
                                          {INVALID_TIMESTAMP}),
    "two gzip members": (encode_batch(three(4), count=4, attributes=1,
                                      compress=lambda b: gz(b[:len(b) // 2]) + gz(b[len(b) // 2:])),
                         {CORRUPT_MESSAGE, INVALID_RECORD}),
}


def test_hostile_batches_are_refused_and_the_partition_stays_readable(broker):
    topic = unique_topic("hostile-batches")
    ck_create_topic(broker, topic, 1)
    expected: list[tuple[bytes, bytes]] = []
    with RawConn(broker) as c:
        r = produce_v8(c, topic, good_batch(3, b"first"))
        assert (r["error"], r["base_offset"]) == (0, 0), r
        expected += [(b"first-k%d" % i, b"first-v%d" % i) for i in range(3)]
        failures = []
        for name, (batch, codes) in HOSTILE.items():
            r = produce_v8(c, topic, batch)
            if r["error"] not in codes:
                failures.append(f"{name}: error {r['error']} (want one of {codes}), {r}")
                continue
            if not r["error_message"] or len(r["error_message"]) < 20:
                failures.append(f"{name}: no reason in error_message: {r}")
            # Between hostile batches, an honest one still lands right after the last.
            tag = b"ok%d" % len(expected)
            ok = produce_v8(c, topic, good_batch(2, tag))
            assert (ok["error"], ok["base_offset"]) == (0, len(expected)), (name, ok)
            expected += [(tag + b"-k%d" % i, tag + b"-v%d" % i) for i in range(2)]
        assert not failures, "\n".join(failures)
    n = len(expected)
    assert ck_watermarks(broker, topic, [0])[0] == (0, n)
    for consume in (ck_consume, kp_consume):
        recs = consume(broker, topic, {0: n}, timeout=60)[0]
        assert [(r.offset, r.key, r.value) for r in recs] == [
            (i, k, v) for i, (k, v) in enumerate(expected)], consume.__name__
    # And after a restart, the same.
    broker.restart()
    recs = ck_consume(broker, topic, {0: n})[0]
    assert [(r.offset, r.value) for r in recs] == [(i, v) for i, (_, v) in enumerate(expected)]


def test_timestamp_refusal_names_the_record(broker):
    topic = unique_topic("ts-refusal")
    ck_create_topic(broker, topic, 1)
    recs = (encode_record(0, 0, None, b"a") + encode_record(1, 1, None, b"b")
            + encode_record(2, 100 * 365 * 24 * HOUR_MS, None, b"c"))
    with RawConn(broker) as c:
        r = produce_v8(c, topic, encode_batch(recs, count=3, max_ts=NOW_MS + 1))
    assert r["error"] == INVALID_TIMESTAMP, r
    assert [i for i, _ in r["record_errors"]] == [2], r
    assert "timestamp" in r["error_message"], r
    assert ck_watermarks(broker, topic, [0])[0] == (0, 0)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_lying_max_timestamp_is_corrected(broker, codec):
    """A header claiming now + 10 years over records of now: stored with the records'
    real maximum, so ListOffsets by timestamp and time retention stay right."""
    topic = unique_topic("max-ts-lie")
    ck_create_topic(broker, topic, 1)
    ten_years = 10 * 365 * 24 * HOUR_MS
    kw = {"attributes": 1, "compress": gz} if codec == "gzip" else {}
    with RawConn(broker) as c:
        r = produce_v8(c, topic, good_batch(5, b"m", base_ts=NOW_MS, max_ts=NOW_MS + ten_years,
                                            **kw))
    assert r["error"] == 0, r
    (stored,) = fetch_batches(broker, topic)
    (max_ts,) = struct.unpack_from(">q", stored, 35)
    assert max_ts == NOW_MS + 4
    # A consumer reads the batch (its CRC was recomputed with the field).
    from confluent_kafka import TopicPartition

    from drover_testlib import ck_consumer
    assert len(ck_consume(broker, topic, {0: 5})[0]) == 5
    c = ck_consumer(broker)
    try:
        (tp,) = c.offsets_for_times([TopicPartition(topic, 0, NOW_MS + ten_years - 1)],
                                    timeout=10)
        assert tp.offset == -1, tp  # nothing that late: the log end, not offset 0
    finally:
        c.close()


def test_honest_zstd_at_level_22_is_accepted(broker):
    """Level 22 written as a stream of unknown size declares a 128 MiB window, as
    Kafka's Java producer does at `compression.zstd.level` 20-22; Kafka accepts it."""
    import io

    import zstandard

    def zstd22(b: bytes) -> bytes:
        out = io.BytesIO()
        with zstandard.ZstdCompressor(level=22).stream_writer(out, closefd=False) as w:
            w.write(b)
        return out.getvalue()

    topic = unique_topic("zstd22")
    ck_create_topic(broker, topic, 1)
    recs = b"".join(encode_record(i, i, None, b"z%d" % i * 50) for i in range(100))
    with RawConn(broker) as c:
        r = produce_v8(c, topic, encode_batch(recs, count=100, attributes=4, compress=zstd22))
    assert (r["error"], r["base_offset"]) == (0, 0), r
    got = kp_consume(broker, topic, {0: 100})[0]
    assert [g.value for g in got] == [b"z%d" % i * 50 for i in range(100)]


def test_a_partition_listed_twice_in_one_produce_is_appended_once(broker):
    topic = unique_topic("dup-partition")
    ck_create_topic(broker, topic, 1)
    one, two = good_batch(2, b"first"), good_batch(2, b"second")
    body = (kstr(None) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 2)
            + struct.pack(">i", 0) + struct.pack(">i", len(one)) + one
            + struct.pack(">i", 0) + struct.pack(">i", len(two)) + two)
    with RawConn(broker) as c:
        corr = c.request(API_PRODUCE, 3, body)
        resp = c.recv_response(corr)
    # v3 response: [topic [partition error base_offset log_append_time]]. As Kafka
    # (one entry per partition): the last entry is appended and answered, once.
    pos = 4 + 2 + len(topic)
    (count,) = struct.unpack_from(">i", resp, pos)
    assert count == 1
    assert struct.unpack_from(">ihqq", resp, pos + 4)[:3] == (0, 0, 0)
    assert ck_watermarks(broker, topic, [0])[0] == (0, 2)
    assert b"second" in fetch_batches(broker, topic)[0]
