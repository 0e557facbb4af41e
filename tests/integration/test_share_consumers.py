"""Share groups end to end (KIP-932, issue 31), both halves merged, with confluent-kafka 2.16's ShareConsumer:
membership through the coordinator plugin (ShareGroupHeartbeat), delivery by the
partition leader (ShareFetch, ShareAcknowledge), state through the offset store.

- Four share consumers on a one-partition topic: every record delivered, each once
  (implicit acknowledgement), and all four receive records.
- Explicit acknowledgement: RELEASE → delivered again with `delivery_count() == 2`;
  REJECT → never again; five deliveries without an ACCEPT → archived.
- A consumer killed with SIGKILL while holding acquired records: another member gets
  them once their lock (`share.record.lock.duration.ms`, 15 s, its minimum) expires.
- The broker killed with SIGKILL and restarted: acknowledged records are not delivered
  again.
- A share group and a consumer group on one topic do not disturb each other.

Every group starts from the earliest offset (`share.auto.offset.reset=earliest`, a group
config set with the AdminClient as `kafka-configs.sh --entity-type groups` would)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from confluent_kafka import AcknowledgeType

import pytest

from drover_testlib import ck_consume, ck_create_topic, unique_topic
from kafka_groups_testlib import start_group_broker
from share_groups_testlib import (SHARE, describe_share_group_offsets, poll_records,
                                  produce_values, share_consumer, share_group)


@pytest.fixture
def broker(broker_factory):
    """A broker with the coordinator plugin, the assignors and the embedded store."""
    return start_group_broker(broker_factory, **SHARE)


TIMEOUT = 60


def test_four_share_consumers_share_one_partition_and_each_record_is_delivered_once(broker):
    b = broker
    topic = unique_topic("share-four")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-four")
    total = 2000
    got: dict[int, list[bytes]] = {i: [] for i in range(4)}
    stop = threading.Event()
    errors: list[BaseException] = []

    def member(i: int) -> None:
        try:
            c = share_consumer(b, group, topic)
            try:
                while not stop.is_set():
                    got[i].extend(m.value() for m in poll_records(c, 0.5))
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    # Records arrive over time, so that every member's fetches find some.
    for r in range(20):
        produce_values(b, topic, [f"v-{r}-{i}".encode() for i in range(total // 20)])
        time.sleep(0.2)
    deadline = time.monotonic() + TIMEOUT
    while sum(len(v) for v in got.values()) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # anything delivered twice would arrive now
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    everything = [v for vs in got.values() for v in vs]
    assert len(everything) == total, (len(everything), {i: len(v) for i, v in got.items()})
    assert len(set(everything)) == total, "a record was delivered twice"
    assert all(got[i] for i in range(4)), {i: len(v) for i, v in got.items()}


def test_explicit_release_reject_and_the_delivery_count_limit(broker):
    b = broker
    topic = unique_topic("share-explicit")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-explicit")
    produce_values(b, topic, [b"release-me", b"reject-me", b"never-accepted", b"accept-me"])
    c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit"})
    seen: dict[bytes, list[int]] = {}
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            batch = poll_records(c)
            for m in batch:
                seen.setdefault(m.value(), []).append(m.delivery_count())
                if m.value() == b"reject-me":
                    c.acknowledge(m, AcknowledgeType.REJECT)
                elif m.value() == b"accept-me":
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                elif m.value() == b"release-me" and len(seen[m.value()]) >= 2:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            if batch:
                c.commit_sync(30)
            if len(seen.get(b"never-accepted", [])) >= 5 and len(seen.get(b"release-me", [])) >= 2:
                break
        # Nothing more comes: the rejected, accepted and archived records are done.
        quiet_until = time.monotonic() + 5
        while time.monotonic() < quiet_until:
            for m in poll_records(c):
                seen.setdefault(m.value(), []).append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
    finally:
        c.close()
    assert seen[b"release-me"] == [1, 2], seen
    assert seen[b"reject-me"] == [1], seen
    assert seen[b"accept-me"] == [1], seen
    assert seen[b"never-accepted"] == [1, 2, 3, 4, 5], seen
    # DescribeShareGroupOffsets: every record is done, so the start offset is past them
    # all; a partition the topic lacks is UNKNOWN_TOPIC_OR_PARTITION (3); null topics
    # list the group's share-partitions.
    err, offsets = describe_share_group_offsets(b, group, {topic: [0, 7]})
    assert err == 0 and offsets[(topic, 0)] == (4, 0), offsets
    assert offsets[(topic, 7)] == (-1, 3), offsets
    err, offsets = describe_share_group_offsets(b, group, None)
    assert err == 0 and offsets == {(topic, 0): (4, 0)}, offsets
    err, offsets = describe_share_group_offsets(b, group, {"no-such-topic": [0]})
    assert offsets[("no-such-topic", 0)][1] == 3, offsets  # UNKNOWN_TOPIC_OR_PARTITION


HOLDER = textwrap.dedent("""
    import sys
    from confluent_kafka import ShareConsumer
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    while True:
        batch = [m for m in c.poll(1.0) if m.error() is None]
        if batch:
            print(" ".join(str(m.offset()) for m in batch), flush=True)
            break
    sys.stdin.read()  # hold the records until killed
""")


def test_records_held_by_a_killed_consumer_go_to_another_after_the_lock(broker):
    b = broker
    topic = unique_topic("share-kill")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-kill", share_record_lock_duration_ms="15000")
    produce_values(b, topic, [f"r{i}".encode() for i in range(10)])
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, b.bootstrap, group, topic],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        held = [int(o) for o in holder.stdout.readline().split()]
        assert held, "the holder acquired nothing"
        holder.kill()
        holder.wait(10)
        killed_at = time.monotonic()
        c = share_consumer(b, group, topic)
        got: dict[int, int] = {}
        try:
            deadline = time.monotonic() + TIMEOUT
            while not set(held) <= set(got) and time.monotonic() < deadline:
                for m in poll_records(c):
                    got.setdefault(m.offset(), m.delivery_count())
        finally:
            c.close()
        assert set(held) <= set(got), (held, got)
        assert all(got[o] == 2 for o in held), got
        # Not before the lock expired (with a margin for the clocks involved).
        assert time.monotonic() - killed_at >= 10
    finally:
        holder.kill()


def test_acknowledged_records_are_not_redelivered_after_a_broker_kill9(broker):
    b = broker
    topic = unique_topic("share-crash")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-crash")
    produce_values(b, topic, [f"a{i}".encode() for i in range(100)])
    c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit"})
    accepted: set[int] = set()
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(accepted) < 50 and time.monotonic() < deadline:
            for m in poll_records(c):
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted.add(m.offset())
            c.commit_sync(30)  # answered: durable
    finally:
        c.close()
    assert accepted
    b.kill9()
    b.start()
    c = share_consumer(b, group, topic)
    again: set[int] = set()
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(accepted | again) < 100 and time.monotonic() < deadline:
            again.update(m.offset() for m in poll_records(c))
    finally:
        c.close()
    assert not (accepted & again), sorted(accepted & again)[:10]
    assert accepted | again == set(range(100))


def test_a_share_group_and_a_consumer_group_on_one_topic_do_not_disturb_each_other(broker):
    b = broker
    topic = unique_topic("share-mixed")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-mixed")
    produce_values(b, topic, [f"m{i}".encode() for i in range(200)])
    c = share_consumer(b, group, topic)
    shared: list[bytes] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(shared) < 200 and time.monotonic() < deadline:
            shared.extend(m.value() for m in poll_records(c))
        # A classic consumer group reads all 200 too, from its own committed offsets.
        got = ck_consume(b, topic, {0: 200})
        assert len(got[0]) == 200
    finally:
        c.close()
    assert sorted(shared) == sorted(f"m{i}".encode() for i in range(200))
