"""Committed offsets die with their topic (issue 13, item 1), with confluent-kafka
against real brokers: a group commits offset 60 on `t` (and 7 on another topic); `t` is
deleted and created again with the same name; 100 records are produced to the new `t`.
OffsetFetch then answers no offset (−1) for `t` — the other topic's offset stays — and
a new member with `auto.offset.reset=earliest` reads all 100 records from offset 0, as
in Kafka (whose group coordinator drops the offsets of deleted partitions). Before the
fix OffsetFetch kept answering 60 and the member started there, skipping 60 records.

- standalone, on the embedded store (the default); and the same with the native
  protocol (a non-member CommitOffset, FetchOffsets answering −1 afterwards);
- standalone, on the zookeeper store and on the postgres store;
- in cluster mode (three brokers, the zookeeper store over their sessions): the topic is
  deleted through broker 1 and the group is coordinated by another broker, which learns
  of the deletion from ZooKeeper.

Waits for the offset to disappear are bounded (the removal follows the deletion
asynchronously, as in Kafka); nothing asserts a duration."""

from __future__ import annotations

import json
import uuid

import native_protocol as np
from cluster_testlib import SLOTS_IN_TEST, ZooKeeper, start_cluster, wait_until
from conftest import install_plugins, start_or_fail
from drover_testlib import (Msg, ck_admin, ck_conf, ck_create_topic, ck_produce, http_get,
                            unique_topic)
from pg_testlib import postgresql  # noqa: F401  (session fixture)

N = 100
COMMITTED = 60
OTHER = 7
# librdkafka's OFFSET_INVALID: what `committed()` reports for OffsetFetch's −1.
NO_OFFSET = -1001


def delete_topic(broker, topic: str) -> None:
    admin = ck_admin(broker)  # alive until the future resolves
    admin.delete_topics([topic], operation_timeout=15, request_timeout=15)[topic].result(
        timeout=20)


def commit(broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A standalone commit (no member, generation −1), as the admin tools send. In
    cluster mode the group's coordinator may learn of a new topic a moment after the
    broker that created it, and slots may still move: UNKNOWN_TOPIC_OR_PART and the
    retriable coordinator errors are retried for up to 20 s."""
    import time

    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    c = Consumer(ck_conf(broker, **{"group.id": group, "enable.auto.commit": False}))
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                         asynchronous=False)
                return
            except KafkaException as e:
                retriable = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_COORDINATOR,
                             KafkaError.COORDINATOR_NOT_AVAILABLE,
                             KafkaError.COORDINATOR_LOAD_IN_PROGRESS}
                if e.args[0].code() not in retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def committed(broker, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """OffsetFetch of `group` for `tps`."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(ck_conf(broker, **{"group.id": group, "enable.auto.commit": False}))
    try:
        got = c.committed([TopicPartition(t, p) for t, p in tps], timeout=15)
        return {(tp.topic, tp.partition): tp.offset for tp in got}
    finally:
        c.close()


def read_as_new_member(broker, group: str, topic: str,
                       session_timeout_ms: int) -> list[tuple[int, bytes]]:
    """Joins `group` subscribed to `topic` with auto.offset.reset=earliest and reads
    until N records arrived (or fails after 60 s); returns (offset, value) pairs."""
    import time

    from confluent_kafka import Consumer
    c = Consumer(ck_conf(broker, **{"group.id": group, "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False,
                                    "session.timeout.ms": session_timeout_ms,
                                    "heartbeat.interval.ms": session_timeout_ms // 6}))
    got: list[tuple[int, bytes]] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < N:
            assert time.monotonic() < deadline, \
                f"the new member read {len(got)} of {N} records: first {got[:3]}"
            for m in c.consume(num_messages=N, timeout=0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    return got


def topic_ids(cluster, topic: str) -> set:
    """The id of `topic` in each broker's view of the cluster (None: no such topic)."""
    ids = set()
    for b in cluster:
        status, _, body = http_get(f"{b.admin_url}/v1/cluster")
        assert status == 200, body
        ids.add((json.loads(body)["view"]["topics"].get(topic) or {}).get("id"))
    return ids


def settle(cluster, topic: str, present: bool) -> None:
    """Cluster mode: waits until every broker's view (and so its local copy) has the
    same `topic` (present) or none. Producing while a broker still has the old copy
    would write to it."""
    if cluster:
        wait_until(lambda: (lambda ids: len(ids) == 1 and (None not in ids) == present)(
            topic_ids(cluster, topic)), 30, f"every broker's view of {topic} to agree")


def scenario(admin_broker, client_broker, group: str, topic: str,
             session_timeout_ms: int = 6000, cluster=None) -> None:
    """The issue's scenario: deletion through `admin_broker`, everything else through
    `client_broker`; the new member's session timeout must be within the coordinator's
    bounds. `cluster`: every broker, in cluster mode."""
    other = unique_topic("kept")
    ck_create_topic(admin_broker, topic, 1)
    ck_create_topic(admin_broker, other, 1)
    settle(cluster, topic, True)
    settle(cluster, other, True)
    ck_produce(client_broker, topic,
               [Msg(b"k", f"old-{i}".encode(), [], partition=0) for i in range(N)])
    commit(client_broker, group, {(topic, 0): COMMITTED, (other, 0): OTHER})
    assert committed(client_broker, group, [(topic, 0), (other, 0)]) == \
        {(topic, 0): COMMITTED, (other, 0): OTHER}

    delete_topic(admin_broker, topic)
    settle(cluster, topic, False)
    ck_create_topic(admin_broker, topic, 1)
    settle(cluster, topic, True)
    ck_produce(client_broker, topic,
               [Msg(b"k", f"new-{i}".encode(), [], partition=0) for i in range(N)])

    wait_until(lambda: committed(client_broker, group, [(topic, 0)])[(topic, 0)] == NO_OFFSET,
               30, f"OffsetFetch of {group} to answer no offset for the re-created {topic}",
               interval=0.5)
    # The group's offsets of other topics stay.
    assert committed(client_broker, group, [(other, 0)]) == {(other, 0): OTHER}
    got = read_as_new_member(client_broker, group, topic, session_timeout_ms)
    assert got == [(i, f"new-{i}".encode()) for i in range(N)], got[:5]


# ---------------------------------------------------------------------------------
# Standalone
# ---------------------------------------------------------------------------------
STANDALONE_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
    "libdrover_offsets_zookeeper.so",
    "libdrover_offsets_postgres.so",
]


def standalone_config(store: str, store_config: str = "") -> str:
    return ("[plugins]\n"
            f'required = ["drover-coordinator", "range", "sticky", "{store}"]\n'
            f'[coordinator]\noffset_store = "{store}"\n'
            "[plugins.config.drover-coordinator]\ninitial_rebalance_delay_ms = 100\n"
            + (f"[plugins.config.{store}]\n{store_config}" if store_config else ""))


def test_offsets_of_a_deleted_and_recreated_topic_are_gone_embedded(broker_factory):
    b = broker_factory(standalone_config("embedded"), start=False)
    install_plugins(b, STANDALONE_LIBS)
    start_or_fail(b)
    topic = unique_topic("redo")
    scenario(b, b, f"g-{topic}", topic)
    assert "committed offsets of deleted topics removed" in b.stderr_text()


def test_native_offsets_of_a_deleted_and_recreated_topic_are_gone(broker_factory):
    b = broker_factory(standalone_config("embedded"), start=False)
    install_plugins(b, STANDALONE_LIBS)
    start_or_fail(b)
    topic, other = unique_topic("redo"), unique_topic("kept")
    group = f"native-{topic}"
    ck_create_topic(b, topic, 1)
    ck_create_topic(b, other, 1)
    with np.Conn(b.host, b.port) as c:
        r = c.request(np.CommitOffsetRequest(group, "", -1, [
            (topic, [(0, COMMITTED, "")]), (other, [(0, OTHER, "")])]))
    assert {code for _, parts in r.topics for _, code in parts} == {np.NONE}, r

    def fetched() -> dict[tuple[str, int], tuple[int, int]]:
        r = np.fetch_offsets(b.host, b.port, group, [(topic, [0]), (other, [0])])
        assert r.error_code == np.NONE, np.error_name(r.error_code)
        return r.offsets()
    assert fetched() == {(topic, 0): (COMMITTED, np.NONE), (other, 0): (OTHER, np.NONE)}
    delete_topic(b, topic)
    ck_create_topic(b, topic, 1)
    wait_until(lambda: fetched()[(topic, 0)] == (-1, np.NONE), 30,
               f"FetchOffsets of {group} to answer −1 for the re-created {topic}",
               interval=0.5)
    assert fetched()[(other, 0)] == (OTHER, np.NONE)


def test_offsets_of_a_deleted_and_recreated_topic_are_gone_zookeeper_store(broker_factory,
                                                                            tmp_path):
    zk = ZooKeeper(tmp_path / "zookeeper").start()
    try:
        store = (f'connect = "{zk.connect}"\nchroot = "/drover-{uuid.uuid4().hex[:8]}"\n'
                 "session_timeout_ms = 4000\nrequest_timeout_ms = 1000\n")
        b = broker_factory(standalone_config("zookeeper", store), start=False)
        install_plugins(b, STANDALONE_LIBS)
        start_or_fail(b)
        topic = unique_topic("redo")
        scenario(b, b, f"g-{topic}", topic)
    finally:
        zk.stop()


def test_offsets_of_a_deleted_and_recreated_topic_are_gone_postgres_store(broker_factory,
                                                                           postgresql):
    b = broker_factory(standalone_config("postgres", postgresql.store_config()), start=False)
    install_plugins(b, STANDALONE_LIBS)
    start_or_fail(b)
    topic = unique_topic("redo")
    scenario(b, b, f"g-{topic}", topic)


# ---------------------------------------------------------------------------------
# Cluster mode
# ---------------------------------------------------------------------------------
def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def slot_owner(broker, group: str) -> int | None:
    status, _, body = http_get(f"{broker.admin_url}/v1/cluster")
    assert status == 200, body
    slots = json.loads(body)["view"]["slots"]
    owner = slots.get(str(fnv1a32(group.encode()) % SLOTS_IN_TEST))
    return None if owner is None else int(owner)


def test_offsets_of_a_topic_deleted_on_another_broker_are_gone_cluster(broker_factory,
                                                                        tmp_path):
    zk = ZooKeeper(tmp_path / "zookeeper").start()
    try:
        brokers = start_cluster(broker_factory, zk, 3, coordinator=True)
        def spread() -> bool:
            slots = json.loads(http_get(f"{brokers[0].admin_url}/v1/cluster")[2])["view"]["slots"]
            return len(slots) == SLOTS_IN_TEST and len(set(slots.values())) == len(brokers)
        wait_until(spread, 30, "every slot owned, the slots spread over the brokers")
        topic = unique_topic("redo")
        # A group coordinated by broker 2 or 3; the topic is deleted through broker 1.
        group = next(g for g in (f"g-{topic}-{i}" for i in range(1000))
                     if slot_owner(brokers[0], g) not in (None, 1))
        owner = brokers[slot_owner(brokers[0], group) - 1]
        # cluster_config: max_session_timeout_ms = 3000.
        scenario(brokers[0], brokers[1], group, topic, session_timeout_ms=3000,
                 cluster=brokers)
        assert "committed offsets of deleted topics removed" in owner.stderr_text()
    finally:
        zk.stop()
