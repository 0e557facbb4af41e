"""Share groups end to end (KIP-932, issue 31), both halves merged, with confluent-kafka 2.16's ShareConsumer:
membership through the coordinator plugin (ShareGroupHeartbeat), delivery by the
partition leader (ShareFetch, ShareAcknowledge), state through the offset store.

- Four share consumers on a one-partition topic: every record delivered, each once
  (implicit acknowledgement), and all four receive records.
- Explicit acknowledgement: RELEASE → delivered again with `delivery_count() == 2`;
  REJECT → never again; five deliveries without an ACCEPT → archived.
- A consumer frozen with SIGSTOP while holding acquired records: another member gets
  them once their lock (`share.record.lock.duration.ms`, 15 s, its minimum) expires;
  one killed with SIGKILL: at once, its share session going with its connection.
- The broker killed with SIGKILL and restarted: acknowledged records are not delivered
  again.
- A hot swap of the offset store (embedded to embedded on another file, through the
  admin API) while a consumer acknowledges: after the swap and a kill -9 of the broker
  (so that the state is read back from the new store), no record acknowledged before
  or during the swap is delivered again, and nothing is lost.
- A share group and a consumer group on one topic do not disturb each other.

Every group starts from the earliest offset (`share.auto.offset.reset=earliest`, a group
config set with the AdminClient as `kafka-configs.sh --entity-type groups` would)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

import pytest

from drover_testlib import ck_consume, ck_create_topic, unique_topic
from kafka_groups_testlib import start_group_broker
from share_groups_testlib import (SHARE, ShareMembers, describe_share_group_offsets,
                                  poll_records, produce_values, share_consumer, share_group)


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
    members = ShareMembers(b, group, topic, 4)
    # Records arrive over time, so that every member's fetches find some.
    for r in range(20):
        produce_values(b, topic, [f"v-{r}-{i}".encode() for i in range(total // 20)])
        time.sleep(0.2)
    members.expect_each_once(total, TIMEOUT)


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


@pytest.mark.parametrize("stop", ["SIGSTOP", "SIGKILL"])
def test_records_held_by_a_stopped_or_killed_consumer_go_to_another(broker, stop):
    """A consumer holding acquired records is frozen (SIGSTOP: its connection stays
    open) or killed (SIGKILL: the kernel closes its connection): another member gets
    the records, with delivery count 2 — from a frozen consumer once their lock (15 s)
    expires, from a killed one at once (well within a 60 s lock), since its share
    session goes with its connection (as Kafka drops a disconnected client's)."""
    b = broker
    topic = unique_topic("share-kill")
    ck_create_topic(b, topic, 1)
    # A frozen holder's records wait out a 15 s lock (the minimum); a killed one's must
    # come back long before a 60 s one would end.
    lock_ms = 15_000 if stop == "SIGSTOP" else 60_000
    group = share_group(b, "share-kill", share_record_lock_duration_ms=str(lock_ms))
    produce_values(b, topic, [f"r{i}".encode() for i in range(10)])
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, b.bootstrap, group, topic],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        held = [int(o) for o in holder.stdout.readline().split()]
        assert held, "the holder acquired nothing"
        holder.send_signal(getattr(signal, stop))
        stopped_at = time.monotonic()
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
        waited = time.monotonic() - stopped_at
        if stop == "SIGSTOP":
            # Not before the lock expired (with a margin for the clocks involved).
            assert waited >= 10, waited
        else:
            # Long before the lock would have expired: the close released them.
            assert waited < 45, waited
    finally:
        holder.kill()
        holder.wait(10)


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



class Acker:
    """A ShareConsumer in explicit mode in a thread, accepting every record it gets
    until stopped. An acknowledgement counts (`accepted`) once commit_sync answered
    its partition with NONE; one in a commit_sync that failed is `uncertain`. Every
    delivery is kept (`deliveries`: offset -> delivery counts), and a delivery of a
    record already accepted is `resurrected`. With `outages`, errors of the broker
    being away (poll or commit_sync raising a retriable error) do not stop it."""

    def __init__(self, b, group: str, topic: str, pause: float = 0.05, outages: bool = False,
                 **extra):
        self.extra = extra
        self.accepted: set[int] = set()
        self.uncertain: set[int] = set()
        self.deliveries: dict[int, list[int]] = {}
        self.resurrected: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.args = (b, group, topic, pause, outages)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        from confluent_kafka import KafkaException

        b, group, topic, pause, outages = self.args
        try:
            c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit",
                                                   "max.poll.records": 10, **self.extra})
            try:
                while not self.stop.is_set():
                    try:
                        self.step(c)
                    except KafkaException as e:
                        if not outages or e.args[0].fatal():
                            raise
                        time.sleep(0.5)
                    time.sleep(pause)
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            self.errors.append(e)

    def step(self, c: ShareConsumer) -> None:
        batch = poll_records(c, 0.5)
        with self.lock:
            for m in batch:
                if m.offset() in self.accepted:
                    self.resurrected.append((m.offset(), m.delivery_count()))
                self.deliveries.setdefault(m.offset(), []).append(m.delivery_count())
        for m in batch:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if not batch:
            return
        offsets = [m.offset() for m in batch]
        try:
            results = c.commit_sync(30)
        except BaseException:
            self.uncertain.update(offsets)
            raise
        ok = all(e is None for e in results.values())
        with self.lock:
            (self.accepted if ok else self.uncertain).update(offsets)

    def wait_accepted(self, n: int) -> None:
        deadline = time.monotonic() + TIMEOUT
        while len(self.accepted) < n and not self.errors and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(self.accepted) >= n and not self.errors, (len(self.accepted), self.errors)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.errors, self.errors


def read_rest(b, group: str, topic: str, done: set[int], total: int) -> dict[int, list[int]]:
    """Every record `group` gets until, with `done`, all `total` offsets were seen (and
    3 s more, for anything delivered twice): offset -> its delivery counts."""
    again: dict[int, list[int]] = {}
    c = share_consumer(b, group, topic)
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(done | set(again)) < total and time.monotonic() < deadline:
            for m in poll_records(c):
                again.setdefault(m.offset(), []).append(m.delivery_count())
        quiet_until = time.monotonic() + 3
        while time.monotonic() < quiet_until:
            for m in poll_records(c, 0.5):
                again.setdefault(m.offset(), []).append(m.delivery_count())
    finally:
        c.close()
    return again


def assert_none_again_none_lost(acker: Acker, again: dict[int, list[int]], total: int) -> None:
    """No record `acker` accepted was delivered again (to it or in `again`), and every
    record of `total` was accepted or is in `again`."""
    assert not acker.resurrected, acker.resurrected[:10]
    assert not (acker.accepted & set(again)), sorted(acker.accepted & set(again))[:10]
    lost = set(range(total)) - acker.accepted - acker.uncertain - set(again)
    assert not lost, sorted(lost)[:10]
    assert all(len(n) == 1 for n in again.values()), {o: n for o, n in again.items() if len(n) > 1}


def test_a_hot_swap_of_the_offset_store_loses_no_acknowledgement(broker, tmp_path):
    from test_offset_swap import post_swap, store_status, wait_swap

    b = broker
    assert store_status(b)["active"] == "embedded"
    topic = unique_topic("share-swap")
    ck_create_topic(b, topic, 1)
    total = 2000
    produce_values(b, topic, [f"s{i}".encode() for i in range(total)])
    # One group acknowledges before the swap only: only the swap's copy carries its
    # state to the new store. Another acknowledges before, during and after it: its
    # writes go to both stores meanwhile.
    idle = Acker(b, share_group(b, "share-swap-idle"), topic)
    idle.wait_accepted(100)
    idle.close()
    busy_group = share_group(b, "share-swap-busy")
    busy = Acker(b, busy_group, topic)
    busy.wait_accepted(100)
    before_swap = len(busy.accepted)
    status, body = post_swap(b, "embedded", f'path = "{tmp_path / "moved.redb"}"\n')
    assert status == 202, body
    s = wait_swap(b)
    assert s["swap"]["state"] == "completed" and s["active"] == "embedded", s
    busy.wait_accepted(before_swap + 100)
    busy.close()
    assert len(busy.accepted) < total, "all acknowledged before the swap ended"
    # The share-partitions' state is read back from the new store.
    b.kill9()
    b.start()
    assert store_status(b)["active"] == "embedded"
    for acker, group in ((idle, idle.args[1]), (busy, busy_group)):
        again = read_rest(b, group, topic, acker.accepted | acker.uncertain, total)
        assert_none_again_none_lost(acker, again, total)
