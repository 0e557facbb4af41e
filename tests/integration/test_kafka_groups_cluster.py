"""KIP-848 consumer groups in cluster mode: a real ZooKeeper (cluster_testlib), three
`drover serve` brokers with the coordinator plugin and the zookeeper offset store, and
confluent-kafka consumers at `group.protocol=consumer`.

- kill -9 of the broker coordinating the group (not the partition's leader): the slot
  moves to another broker, whose coordinator does not know the group. The members'
  heartbeats there are answered UNKNOWN_MEMBER_ID (as Kafka's coordinator answers a
  heartbeat for a group it does not have), so librdkafka rejoins at member epoch 0
  and the consumers keep consuming from the committed offsets: every record produced
  before and after the kill is delivered, no consumer sees a fatal error, and the new
  coordinator shows both members. GROUP_ID_NOT_FOUND, which the coordinator answered
  before, is fatal to a librdkafka consumer: it stopped consuming for good.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer

from cluster_testlib import start_cluster, wait_until
from connector_testlib import admin_group
from test_share_groups_cluster import (bootstrap, deliver_across_a_coordinator_kill9,
                                       group_coordinated_by, one_partition_topic)


class Member:
    """A KIP-848 consumer (auto commit) polling in a thread: every value delivered, and
    every fatal error it reported."""

    def __init__(self, brokers, group: str, topic: str):
        self.values: list[bytes] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.conf = {"bootstrap.servers": bootstrap(brokers), "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "auto.commit.interval.ms": 200}
        self.topic = topic
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            c = Consumer(self.conf)
            c.subscribe([self.topic])
            try:
                while not self.stop.is_set():
                    m = c.poll(0.5)
                    if m is None:
                        continue
                    with self.lock:
                        if m.error() is None:
                            self.values.append(m.value())
                        elif m.error().fatal():
                            self.errors.append(str(m.error()))
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            with self.lock:
                self.errors.append(repr(e))

    def seen(self) -> list[bytes]:
        with self.lock:
            return list(self.values)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def delivered(members) -> set[bytes]:
    return {v for m in members for v in m.seen()}


def test_kip848_consumers_follow_their_group_to_a_new_coordinator_after_a_kill9(
        broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=3, coordinator=True)
    topic, leader = one_partition_topic(brokers, "kip848-fo")
    coordinator = next(b_id for b_id in (1, 2, 3) if b_id != leader)
    group = group_coordinated_by(brokers, "kip848-fo", coordinator)
    members = [Member(brokers, group, topic) for _ in range(2)]
    try:
        live, new_coordinator = deliver_across_a_coordinator_kill9(
            brokers, topic, group, coordinator, lambda: delivered(members))

        # The new coordinator knows the group again: both members rejoined.
        def described():
            g = admin_group(brokers[new_coordinator - 1], group)
            return g if g and len(g.get("members", [])) == 2 else None
        g = wait_until(described, 60, "both members at the new coordinator")
        assert g["protocol"] == "consumer", g
        for m in members:
            assert not m.errors, m.errors
    finally:
        for m in members:
            m.close()
    for b in live:
        b.assert_alive()
