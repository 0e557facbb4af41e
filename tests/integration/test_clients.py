"""Round trips through real clients: produce keyed messages with headers with every
compression codec, consume them back by partition and offset, compare byte for byte.

Sizes are chosen for a 2-core machine: confluent-kafka (librdkafka) is fast, so it gets
10,000 messages per codec; kafka-python (pure Python) gets 5,000 and kcat 2,000, still
with every codec."""

from __future__ import annotations

import collections

import pytest

from drover_testlib import (CODECS, Msg, assert_contiguous, check_partition_logs, ck_consume,
                            ck_create_topic, ck_produce, ck_topic_partitions, kcat,
                            kcat_consume, kp_consume, kp_produce, make_messages, unique_topic,
                            wait_topic_partitions)

PARTITIONS = 4


def by_partition(msgs: list[Msg], acks: list[tuple[int, int]]) -> dict[int, list[tuple[int, Msg]]]:
    """Group produced messages by the partition they were acknowledged on, in produce
    order, and check the acknowledged offsets are contiguous from 0."""
    out: dict[int, list[tuple[int, Msg]]] = collections.defaultdict(list)
    for m, (p, off) in zip(msgs, acks):
        out[p].append((off, m))
    for p, lst in out.items():
        offs = [o for o, _ in lst]
        assert offs == list(range(len(offs))), f"partition {p}: acknowledged offsets {offs[:10]}..."
    return dict(out)


def check_key_partitioning(expected: dict[int, list[tuple[int, Msg]]]) -> None:
    """Same key -> same partition, and the keys spread over more than one partition."""
    home: dict[bytes, int] = {}
    for p, lst in expected.items():
        for _, m in lst:
            assert home.setdefault(m.key, p) == p, f"key {m.key!r} on partitions {home[m.key]} and {p}"
    assert len(expected) > 1, "every key landed on one partition"


# ---------------------------------------------------------------------------------
# confluent-kafka
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_roundtrip(broker, codec):
    topic = unique_topic(f"ck-{codec}")
    ck_create_topic(broker, topic, PARTITIONS)
    msgs = make_messages(10_000, seed=1, with_ts=True)
    acks = ck_produce(broker, topic, msgs, codec=codec)
    expected = by_partition(msgs, acks)
    check_key_partitioning(expected)
    got = ck_consume(broker, topic, {p: len(v) for p, v in expected.items()})
    check_partition_logs(expected, got, check_ts=True)


def test_confluent_acks_levels(broker):
    """acks=0, 1 and all all land; acks=0 gets no offsets back, so read by position."""
    topic = unique_topic("ck-acks")
    ck_create_topic(broker, topic, 1)
    a1 = ck_produce(broker, topic, [Msg(b"k", b"acks1", partition=0)], acks=1)
    aall = ck_produce(broker, topic, [Msg(b"k", b"acksall", partition=0)], acks="all")
    assert a1 == [(0, 0)] and aall == [(0, 1)]
    ck_produce(broker, topic, [Msg(b"k", b"acks0-%d" % i, partition=0) for i in range(50)], acks=0)
    got = ck_consume(broker, topic, {0: 52}, timeout=30)[0]
    assert [r.value for r in got] == [b"acks1", b"acksall"] + [b"acks0-%d" % i for i in range(50)]
    assert_contiguous({0: got})


def test_confluent_auto_create_by_produce(broker):
    topic = unique_topic("ck-auto")
    assert ck_topic_partitions(broker, topic) is None
    msgs = make_messages(200, seed=2)
    acks = ck_produce(broker, topic, msgs)
    assert {p for p, _ in acks} == {0}, "auto-created topic should have the default 1 partition"
    assert ck_topic_partitions(broker, topic) == 1
    got = ck_consume(broker, topic, {0: 200})
    check_partition_logs(by_partition(msgs, acks), got)


def test_auto_create_default_partitions(broker_factory):
    b = broker_factory("[topics]\nauto_create = true\ndefault_partitions = 3\n")
    topic = unique_topic("ck-auto3")
    msgs = make_messages(300, seed=3)
    acks = ck_produce(b, topic, msgs)
    wait_topic_partitions(b, topic, 3)
    expected = by_partition(msgs, acks)
    assert set(expected) == {0, 1, 2}
    check_partition_logs(expected, ck_consume(b, topic, {p: len(v) for p, v in expected.items()}))


def test_auto_create_disabled(broker_factory):
    b = broker_factory("[topics]\nauto_create = false\n")
    topic = unique_topic("ck-noauto")
    with pytest.raises(AssertionError, match="not delivered|delivery errors"):
        ck_produce(b, topic, [Msg(b"k", b"v")], flush_timeout=15,
                   **{"message.timeout.ms": 4000})
    assert ck_topic_partitions(b, topic) is None
    # Explicit creation still works.
    ck_create_topic(b, topic, 2)
    assert ck_produce(b, topic, [Msg(b"k", b"v", partition=1)]) == [(1, 0)]


# ---------------------------------------------------------------------------------
# kafka-python
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(broker, codec):
    topic = unique_topic(f"kp-{codec}")
    ck_create_topic(broker, topic, PARTITIONS)
    msgs = make_messages(5_000, seed=10, with_ts=True, null_headers=False)
    acks = kp_produce(broker, topic, msgs, codec=codec)
    expected = by_partition(msgs, acks)
    check_key_partitioning(expected)
    got = kp_consume(broker, topic, {p: len(v) for p, v in expected.items()})
    check_partition_logs(expected, got, check_ts=True)


def test_kafka_python_auto_create_by_produce(broker):
    topic = unique_topic("kp-auto")
    msgs = make_messages(100, seed=11, null_headers=False)
    acks = kp_produce(broker, topic, msgs)
    assert {p for p, _ in acks} == {0}
    check_partition_logs(by_partition(msgs, acks), kp_consume(broker, topic, {0: 100}))


# ---------------------------------------------------------------------------------
# kcat
# ---------------------------------------------------------------------------------
KCAT_HEADERS = [("origin", "kcat"), ("run", "42")]


def kcat_produce(broker, topic: str, msgs: list[Msg], codec: str, partition: int | None = None):
    """One kcat -P run: key<TAB>value lines, fixed headers (kcat cannot vary them per
    message), partitioned by key unless `partition` is given."""
    data = b"".join(m.key + b"\t" + m.value + b"\n" for m in msgs)
    args = ["-P", "-t", topic, "-K", "\t", "-X", "acks=all", "-X", "enable.idempotence=false"]
    if codec != "none":
        args += ["-z", codec]
    if partition is not None:
        args += ["-p", str(partition)]
    for k, v in KCAT_HEADERS:
        args += ["-H", f"{k}={v}"]
    kcat(broker, args, input=data, timeout=120)


def kcat_read_all(broker, topic: str, partitions: int) -> dict[int, list[dict]]:
    return {p: kcat_consume(broker, topic, p) for p in range(partitions)}


def check_kcat_records(msgs: list[Msg], got: dict[int, list[dict]]) -> None:
    """Every message exactly once; per partition in produce order with contiguous
    offsets; same key -> same partition; headers as sent."""
    index = {m.value: i for i, m in enumerate(msgs)}
    seen = set()
    home: dict[str, int] = {}
    want_headers = [x for kv in KCAT_HEADERS for x in kv]
    for p, recs in got.items():
        assert [r["offset"] for r in recs] == list(range(len(recs))), f"partition {p}: offsets"
        last = -1
        for r in recs:
            assert r["partition"] == p
            value = r["payload"].encode()
            assert value in index, f"partition {p} offset {r['offset']}: unknown value {value[:40]!r}"
            i = index[value]
            assert i > last, f"partition {p}: message {i} after {last} (order)"
            last = i
            assert i not in seen, f"message {i} consumed twice"
            seen.add(i)
            assert r["key"].encode() == msgs[i].key
            assert home.setdefault(r["key"], p) == p, f"key {r['key']} on two partitions"
            assert r.get("headers") == want_headers, f"headers {r.get('headers')!r}"
    assert len(seen) == len(msgs), f"{len(msgs) - len(seen)} messages missing"


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrip(broker, codec):
    topic = unique_topic(f"kcat-{codec}")
    ck_create_topic(broker, topic, PARTITIONS)
    msgs = make_messages(2_000, seed=20, text=True)
    kcat_produce(broker, topic, msgs, codec)
    got = kcat_read_all(broker, topic, PARTITIONS)
    assert sum(1 for v in got.values() if v) > 1, "every key landed on one partition"
    check_kcat_records(msgs, got)


def test_kcat_explicit_partition_and_auto_create(broker):
    topic = unique_topic("kcat-auto")
    msgs = make_messages(300, seed=21, text=True)
    kcat_produce(broker, topic, msgs, "lz4", partition=0)
    assert ck_topic_partitions(broker, topic) == 1
    got = kcat_read_all(broker, topic, 1)
    check_kcat_records(msgs, got)
    assert len(got[0]) == 300


def test_kcat_metadata_listing(broker):
    topic = unique_topic("kcat-md")
    ck_create_topic(broker, topic, 3)
    import json
    md = json.loads(kcat(broker, ["-L", "-J", "-t", topic]).stdout)
    assert len(md["brokers"]) == 1
    assert md["brokers"][0]["name"].endswith(f":{broker.port}")
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]


# ---------------------------------------------------------------------------------
# Mixed: what one client writes, the others read
# ---------------------------------------------------------------------------------
def test_cross_client(broker):
    topic = unique_topic("mixed")
    ck_create_topic(broker, topic, 1)
    ck_msgs = make_messages(300, seed=30)
    kp_msgs = make_messages(300, seed=31, null_headers=False)
    for m in ck_msgs + kp_msgs:
        m.partition = 0
    acks = ck_produce(broker, topic, ck_msgs[:150], codec="zstd")
    acks += kp_produce(broker, topic, kp_msgs[:150], codec="gzip")
    acks += ck_produce(broker, topic, ck_msgs[150:], codec="snappy")
    acks += kp_produce(broker, topic, kp_msgs[150:], codec="lz4")
    msgs = ck_msgs[:150] + kp_msgs[:150] + ck_msgs[150:] + kp_msgs[150:]
    expected = by_partition(msgs, acks)
    check_partition_logs(expected, ck_consume(broker, topic, {0: 600}))
    check_partition_logs(expected, kp_consume(broker, topic, {0: 600}))
    # kcat's JSON output cannot carry these binary keys: compare offsets and lengths.
    out = kcat(broker, ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                        "-f", "%o %K %S\n"]).stdout.decode()
    rows = [tuple(map(int, line.split())) for line in out.splitlines() if line.strip()]
    assert rows == [(off, len(m.key), len(m.value)) for off, m in expected[0]]
