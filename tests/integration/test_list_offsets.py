"""ListOffsets: earliest, latest and by timestamp, through every client.

Partition 0 of the topic holds N records with CreateTime T0 + i*STEP (record i at
offset i), written in several batches; partition 1 is empty."""

from __future__ import annotations


import pytest

from drover_testlib import (T0_MS, Msg, ck_admin, ck_consumer, ck_create_topic, ck_produce,
                            kcat, kcat_consume, kp_consumer, unique_topic)

N = 100
STEP = 1000
BATCHES = 4


def ts(i: int) -> int:
    return T0_MS + i * STEP


# (target timestamp, expected offset or None when no record is at or after it)
CASES = [
    (T0_MS - 3_600_000, 0),
    (ts(0), 0),
    (ts(0) + 1, 1),
    (ts(37), 37),  # first record of the second batch is 25; 37 is inside a batch
    (ts(50) - 500, 50),
    (ts(50), 50),
    (ts(N - 1), N - 1),
    (ts(N - 1) + 1, None),
]


@pytest.fixture
def ts_topic(broker):
    topic = unique_topic("lo")
    ck_create_topic(broker, topic, 2)
    per = N // BATCHES
    for b in range(BATCHES):  # one flush per batch: several record batches
        msgs = [Msg(b"k%d" % i, b"v%d" % i, [], ts(i), partition=0)
                for i in range(b * per, (b + 1) * per)]
        acks = ck_produce(broker, topic, msgs, codec="lz4" if b % 2 else "none")
        assert acks == [(0, i) for i in range(b * per, (b + 1) * per)]
    return topic


def test_confluent_watermarks(broker, ts_topic):
    from confluent_kafka import TopicPartition
    c = ck_consumer(broker)
    try:
        assert c.get_watermark_offsets(TopicPartition(ts_topic, 0), timeout=10) == (0, N)
        assert c.get_watermark_offsets(TopicPartition(ts_topic, 1), timeout=10) == (0, 0)
    finally:
        c.close()


def test_confluent_offsets_for_times(broker, ts_topic):
    from confluent_kafka import TopicPartition
    c = ck_consumer(broker)
    try:
        for target, want in CASES:
            (res,) = c.offsets_for_times([TopicPartition(ts_topic, 0, target)], timeout=10)
            assert res.error is None, f"ts {target}: {res.error}"
            assert res.offset == (-1 if want is None else want), f"ts {target}"
        (res,) = c.offsets_for_times([TopicPartition(ts_topic, 1, T0_MS)], timeout=10)
        assert res.error is None and res.offset == -1, "empty partition"
    finally:
        c.close()


def test_confluent_admin_list_offsets(broker, ts_topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    admin = ck_admin(broker)
    tp0, tp1 = TopicPartition(ts_topic, 0), TopicPartition(ts_topic, 1)
    for spec, tp, want in [(OffsetSpec.earliest(), tp0, 0), (OffsetSpec.latest(), tp0, N),
                           (OffsetSpec.earliest(), tp1, 0), (OffsetSpec.latest(), tp1, 0),
                           (OffsetSpec.for_timestamp(ts(50) - 500), tp0, 50)]:
        fs = admin.list_offsets({tp: spec}, request_timeout=10)
        (res,) = [f.result(timeout=15) for f in fs.values()]
        assert res.offset == want, f"{spec} on partition {tp.partition}"


def test_kafka_python_offsets(broker, ts_topic):
    from kafka import TopicPartition
    c = kp_consumer(broker)
    try:
        tp0, tp1 = TopicPartition(ts_topic, 0), TopicPartition(ts_topic, 1)
        assert c.beginning_offsets([tp0, tp1], timeout_ms=10000) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1], timeout_ms=10000) == {tp0: N, tp1: 0}
        for target, want in CASES:
            res = c.offsets_for_times({tp0: target}, timeout_ms=10000)[tp0]
            if want is None:
                assert res is None, f"ts {target}: {res}"
            else:
                assert res is not None and res.offset == want, f"ts {target}: {res}"
                # The broker reports the timestamp of the record it found.
                assert res.timestamp == ts(want), f"ts {target}: {res}"
        assert c.offsets_for_times({tp1: T0_MS}, timeout_ms=10000)[tp1] is None
    finally:
        c.close()


def test_kcat_offsets(broker, ts_topic):
    for target, want in CASES:
        recs = kcat_consume(broker, ts_topic, 0, offset=f"s@{target}", count=1)
        if want is None:
            assert recs == [], f"ts {target}"
        else:
            assert [(r["offset"], r["ts"], r["payload"]) for r in recs] == \
                [(want, ts(want), f"v{want}")], f"ts {target}"
    # Relative from the end: -3 starts at latest - 3.
    recs = kcat_consume(broker, ts_topic, 0, offset="-3")
    assert [r["offset"] for r in recs] == [N - 3, N - 2, N - 1]
    assert kcat_consume(broker, ts_topic, 1, offset="beginning") == []


def test_kcat_query_mode(broker, ts_topic):
    out = kcat(broker, ["-Q", "-t", f"{ts_topic}:0:{ts(50) - 500}"]).stdout.decode()
    # kcat prints "<topic> [<partition>] offset <n>"
    assert f"{ts_topic} [0] offset 50" in out, out


def test_latest_moves_with_appends(broker, ts_topic):
    from confluent_kafka import TopicPartition
    ck_produce(broker, ts_topic, [Msg(b"k", b"late", [], ts(N), partition=0)])
    c = ck_consumer(broker)
    try:
        assert c.get_watermark_offsets(TopicPartition(ts_topic, 0), timeout=10) == (0, N + 1)
        (res,) = c.offsets_for_times([TopicPartition(ts_topic, 0, ts(N))], timeout=10)
        assert res.offset == N
    finally:
        c.close()


def test_unknown_partition_is_an_error(broker, ts_topic):
    """Asking for a partition the topic does not have must not hang or crash."""
    from confluent_kafka import KafkaException, TopicPartition
    c = ck_consumer(broker)
    try:
        try:
            res = c.offsets_for_times([TopicPartition(ts_topic, 7, T0_MS)], timeout=10)
            assert res[0].error is not None or res[0].offset < 0
        except KafkaException:
            pass
    finally:
        c.close()
    broker.assert_alive()
