"""Negative committed offsets as Kafka takes them (issue 17): OffsetCommit stores any
offset value, negative ones included (Kafka checks only the metadata size and the
member and generation), OffsetFetch returns it as stored, and a new consumer of the
group reads a negative committed offset as no valid offset: its `auto.offset.reset`
applies. kafkajs' `admin.resetOffsets({ earliest: true })` commits the sentinel −2 with
OffsetCommit v5 (Drover used to answer OFFSET_OUT_OF_RANGE, and the call never
returned): it completes, and the group then consumes from the beginning.

A real broker with the coordinator plugin; confluent-kafka, raw frames, and kafkajs
under Node.js (installed into target/test-node by scripts/install-test-deps.sh)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from drover_testlib import Msg, RawConn, ck_conf, ck_create_topic, ck_produce, unique_topic
from kafka_groups_testlib import group_broker  # noqa: F401 (fixture)
from test_kafka_group_wire import NONE, commit, fetch

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "target" / "test-node" / "node_modules"
RESET_SCRIPT = Path(__file__).with_name("kafkajs_reset_offsets.js")
PARTITIONS = 2
PER_PARTITION = 5
TIMEOUT = 30  # seconds, for each client call or wait


def setup_topic(broker, prefix: str) -> str:
    topic = unique_topic(prefix)
    ck_create_topic(broker, topic, PARTITIONS)
    ck_produce(broker, topic, [Msg(b"k", f"{p}-{i}".encode(), [], partition=p)
                               for p in range(PARTITIONS) for i in range(PER_PARTITION)])
    return topic


def group_consumer(broker, group: str, reset: str) -> Consumer:
    return Consumer(ck_conf(broker, **{"group.id": group, "auto.offset.reset": reset,
                                       "enable.auto.commit": False,
                                       "session.timeout.ms": 6000,
                                       "heartbeat.interval.ms": 500}))


def first_offsets(broker, topic: str, group: str, reset: str, *, nudge: bool = False):
    """Subscribes a new confluent-kafka consumer of `group` and returns the first offset
    it delivers on each partition. With `nudge`, one more record is produced to the
    partitions that delivered nothing yet on every empty poll once the consumer has an
    assignment (a consumer starting at the end delivers only records written after)."""
    c = group_consumer(broker, group, reset)
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while set(first) != set(range(PARTITIONS)):
            assert time.monotonic() < deadline, \
                f"a consumer of {group} delivered first offsets {first} within {TIMEOUT} s"
            msgs = c.consume(num_messages=100, timeout=0.5)
            for m in msgs:
                assert m.error() is None, f"consumer error: {m.error()}"
                first.setdefault(m.partition(), m.offset())
            if nudge and not msgs and c.assignment():
                ck_produce(broker, topic, [Msg(b"k", b"nudge", [], partition=p)
                                           for p in range(PARTITIONS) if p not in first])
    finally:
        c.close()
    return first


def raw_committed(broker, group: str, topic: str) -> dict[int, int]:
    """OffsetFetch v5 of the topic's partitions: partition -> committed offset."""
    with RawConn(broker) as c:
        err, parts = fetch(c, group, {topic: list(range(PARTITIONS))})
    assert err == NONE, err
    assert all(e == NONE for (_, _, e) in parts.values()), parts
    return {p: o for (_, p), (o, _, _) in parts.items()}


def test_negative_offsets_are_stored_and_mean_no_committed_offset(group_broker):  # noqa: F811
    b = group_broker
    topic = setup_topic(b, "neg-commit")
    group = f"g-{topic}"
    # Committed at 3 first (through the client), so a consumer starting at 0 shows that
    # the negative commit took.
    c = group_consumer(b, group, "earliest")
    try:
        c.commit(offsets=[TopicPartition(topic, p, 3) for p in range(PARTITIONS)],
                 asynchronous=False)
    finally:
        c.close()
    assert raw_committed(b, group, topic) == {0: 3, 1: 3}
    # The sentinels of the beginning (−2) and of "none" (−1) in a raw OffsetCommit v7
    # (librdkafka refuses to send a negative offset: "No offset stored"; kafkajs sends
    # −2), and any other negative value.
    latest, odd = f"g2-{topic}", f"g3-{topic}"
    with RawConn(b) as raw:
        for g, offsets in [(group, (-2, -1)), (latest, (4, 4)), (latest, (-1, -1)),
                           (odd, (-7, -1001))]:
            assert commit(raw, g, -1, "", {(topic, p): (o, None) for p, o in enumerate(offsets)}) \
                == {(topic, p): NONE for p in range(PARTITIONS)}, (g, offsets)
    # OffsetFetch answers them as stored.
    assert raw_committed(b, group, topic) == {0: -2, 1: -1}
    assert raw_committed(b, latest, topic) == {0: -1, 1: -1}
    assert raw_committed(b, odd, topic) == {0: -7, 1: -1001}
    c = group_consumer(b, group, "earliest")
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
    finally:
        c.close()
    # librdkafka reads a committed −1 as no offset (its OFFSET_INVALID, −1001) and keeps
    # −2 (its OFFSET_BEGINNING).
    assert [(tp.partition, tp.offset, tp.error) for tp in got] == \
        [(0, -2, None), (1, -1001, None)]

    # A new consumer of the group: no valid committed offset, so auto.offset.reset.
    assert first_offsets(b, topic, group, "earliest") == {0: 0, 1: 0}
    first = first_offsets(b, topic, latest, "latest", nudge=True)
    assert all(o >= PER_PARTITION for o in first.values()), \
        f"reset to latest, yet delivered from {first}"


@pytest.mark.timeout(300)
def test_kafkajs_reset_offsets_to_earliest_completes(group_broker):  # noqa: F811
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "kafkajs" / "package.json").exists():
        pytest.skip("Node.js or kafkajs is not installed (scripts/install-test-deps.sh "
                    "installs them with apt and npm): the kafkajs test does not run")
    b = group_broker
    topic = setup_topic(b, "kjs-reset")
    group = f"g-{topic}"
    # The group has consumed everything: committed at the end.
    c = group_consumer(b, group, "earliest")
    try:
        c.commit(offsets=[TopicPartition(topic, p, PER_PARTITION) for p in range(PARTITIONS)],
                 asynchronous=False)
    finally:
        c.close()
    assert raw_committed(b, group, topic) == {p: PER_PARTITION for p in range(PARTITIONS)}

    env = dict(os.environ, NODE_PATH=str(NODE_MODULES))
    try:
        run = subprocess.run([node, str(RESET_SCRIPT), b.bootstrap, group, topic], env=env,
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"kafkajs resetOffsets did not complete in 120 s; "
                             f"stderr: {e.stderr}") from None
    assert run.returncode == 0, f"kafkajs failed: {run.stderr[-4000:]}"
    # A promise that never settles lets node exit 0 without printing: resetOffsets hung.
    lines = run.stdout.strip().splitlines()
    assert lines, f"kafkajs resetOffsets never completed; stderr: {run.stderr[-4000:]}"
    fetched = json.loads(lines[-1])
    assert [(t["topic"], sorted((int(p["partition"]), p["offset"]) for p in t["partitions"]))
            for t in fetched] == [(topic, [(p, "-2") for p in range(PARTITIONS)])], fetched
    assert raw_committed(b, group, topic) == {p: -2 for p in range(PARTITIONS)}

    # The group consumes from the beginning again.
    assert first_offsets(b, topic, group, "earliest") == {p: 0 for p in range(PARTITIONS)}
