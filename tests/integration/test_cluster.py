"""Cluster mode with a real ZooKeeper and three brokers on loopback: metadata from any
broker, topics created through one broker served by the others, leaders and
NOT_LEADER_OR_FOLLOWER, a killed broker's partitions reported leaderless and served
again after its restart, and a ZooKeeper restart."""

from __future__ import annotations

import json
import struct
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_testlib import start_cluster, wait_until
from drover_testlib import (Msg, RawConn, ck_consume, ck_produce, http_get, kstr)


def admin(b) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def cluster_view(b) -> dict:
    status, _, body = http_get(f"{b.admin_url}/v1/cluster")
    assert status == 200, body
    return json.loads(body)


def leaders(b, topic: str) -> dict[int, int]:
    md = admin(b).list_topics(topic, timeout=10)
    t = md.topics[topic]
    return {p: pm.leader for p, pm in t.partitions.items()}


def create(b, topic: str, partitions: int) -> None:
    a = admin(b)  # keep the client alive until the futures resolve
    for _t, f in a.create_topics([NewTopic(topic, partitions, 1)]).items():
        f.result(timeout=20)


def test_brokers_share_topics_and_serve_only_their_partitions(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper)
    # Every broker lists all three.
    for b in brokers:
        wait_until(lambda: sorted(admin(b).list_topics(timeout=10).brokers) == [1, 2, 3], 15,
                   "three live brokers")
    # A topic created through broker 1 is known to 2 and 3, with the same id and leaders.
    create(brokers[0], "shared", 6)
    views = lambda: [cluster_view(b)["view"]["topics"].get("shared") for b in brokers]
    wait_until(lambda: None not in views(), 15, "the topic on every broker's view")
    placement = views()
    assert placement[0] == placement[1] == placement[2], placement
    assert sorted(set(placement[0]["leaders"])) == [1, 2, 3]
    expected = dict(enumerate(placement[0]["leaders"]))
    for b in brokers:
        assert wait_until(lambda: leaders(b, "shared") == expected, 15, "leaders") is True
    # Produce through the leaders (the client routes by Metadata) and read back.
    msgs = [Msg(f"k{i}".encode(), f"v{i}".encode(), [], partition=i % 6) for i in range(600)]
    ck_produce(brokers[1], "shared", msgs)
    got = ck_consume(brokers[2], "shared", {p: 100 for p in range(6)})
    assert {p: len(recs) for p, recs in got.items()} == {p: 100 for p in range(6)}
    # A broker answers NOT_LEADER_OR_FOLLOWER for a partition it does not lead.
    foreign = next(p for p, l in expected.items() if l != 1)
    with RawConn(brokers[0]) as c:
        # ListOffsets v1: replica_id, [topic, [partition, timestamp]]
        body = (struct.pack(">i", -1) + struct.pack(">i", 1) + kstr("shared")
                + struct.pack(">i", 1) + struct.pack(">iq", foreign, -1))
        corr = c.request(2, 1, body)
        resp = c.recv_response(corr)
    (_n,) = struct.unpack_from(">i", resp, 0)
    _name_len = struct.unpack_from(">h", resp, 4)[0]
    pos = 6 + _name_len + 4
    _p, err = struct.unpack_from(">ih", resp, pos)
    assert err == 6, f"expected NOT_LEADER_OR_FOLLOWER (6), got {err}"


def test_a_healthy_cluster_keeps_its_coordinator_slots(broker_factory, zookeeper):
    # Gaining slots takes their transactions over and restores their staged offsets;
    # however long that takes, the keepalive keeps the slot guard fed, so no broker
    # gives its slots up while ZooKeeper answers (it did on every start once).
    brokers = start_cluster(broker_factory, zookeeper, n=2, coordinator=True)
    wait_until(lambda: len(cluster_view(brokers[0])["view"]["slots"]) == 8, 15,
               "every slot owned")
    create(brokers[0], "healthy", 4)
    time.sleep(3)  # past the claim delay: slots handed back, topics synced
    owners = set(cluster_view(brokers[0])["view"]["slots"].values())
    assert owners == {1, 2}, owners
    for b in brokers:
        assert "for the slot guard" not in b.stderr_text(), \
            "a broker gave its slots up while ZooKeeper was answering"
        b.assert_alive()


def test_a_killed_broker_is_leaderless_until_it_returns(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper)
    create(brokers[0], "lost", 3)
    # The placement as the brokers record it (librdkafka's metadata may lag behind).
    placement = wait_until(lambda: cluster_view(brokers[0])["view"]["topics"].get("lost"), 15,
                           "placement")
    by_leader = {l: p for p, l in enumerate(placement["leaders"])}
    assert set(by_leader) == {1, 2, 3}, placement
    wait_until(lambda: leaders(brokers[0], "lost").get(by_leader[2]) == 2, 15,
               "Metadata naming broker 2 as a leader")
    p2 = by_leader[2]
    ck_produce(brokers[0], "lost", [Msg(b"k", b"before", [], partition=p2)])
    brokers[1].kill9()
    # After its session expires, its partition has no leader.
    wait_until(lambda: leaders(brokers[0], "lost")[p2] == -1, 20, "leader -1")
    # librdkafka may ask any broker it knows, and each broker's view converges on its own.
    wait_until(lambda: sorted(admin(brokers[0]).list_topics(timeout=10).brokers) == [1, 3], 15,
               "brokers 1 and 3 listed")
    # The others keep serving theirs.
    p1 = by_leader[1]
    ck_produce(brokers[2], "lost", [Msg(b"k", b"still", [], partition=p1)])
    brokers[1].start()
    wait_until(lambda: leaders(brokers[0], "lost")[p2] == 2, 30, "leader back")
    got = ck_consume(brokers[0], "lost", {p2: 1})
    assert [r.value for r in got[p2]] == [b"before"]


def test_brokers_survive_a_zookeeper_restart(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper)
    create(brokers[0], "zkr", 3)
    wait_until(lambda: all("zkr" in cluster_view(b)["view"]["topics"] for b in brokers), 15,
               "topic everywhere")
    zookeeper.stop()
    # Disconnected: the metric says so, the brokers keep serving their partitions.
    wait_until(lambda: all("drover_zookeeper_connected 0" in http_get(f"{b.admin_url}/metrics")[2]
                           for b in brokers), 15, "disconnected metric")
    ck_produce(brokers[0], "zkr", [Msg(b"k", b"during", [], partition=0)])
    zookeeper.start()
    wait_until(lambda: all("drover_zookeeper_connected 1" in http_get(f"{b.admin_url}/metrics")[2]
                           for b in brokers), 40, "reconnected metric")
    wait_until(lambda: all(sorted(cluster_view(b)["view"]["brokers"]) == ["1", "2", "3"]
                           for b in brokers), 40, "all brokers registered again")
    # Topics survive (they are in ZooKeeper's data dir).
    assert all("zkr" in cluster_view(b)["view"]["topics"] for b in brokers)


# ---------------------------------------------------------------------------------
# Consumer groups across brokers: slots spread, coordinator failover
# ---------------------------------------------------------------------------------
import subprocess  # noqa: E402

from cluster_testlib import SLOTS_IN_TEST  # noqa: E402
from conftest import drover_bin  # noqa: E402


def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def coordinator_of(b, group: str) -> int | None:
    slot = fnv1a32(group.encode()) % SLOTS_IN_TEST
    return cluster_view(b)["view"]["slots"].get(str(slot))


class Consumer:
    def __init__(self, brokers, group, topic, cid, tmp):
        self.out = open(tmp / f"{cid}.out", "w+")
        self.err = open(tmp / f"{cid}.err", "w+")
        self.path = tmp / f"{cid}.out"
        boot = ",".join(b.bootstrap for b in brokers)
        self.proc = subprocess.Popen(
            [str(drover_bin()), "consume", "--brokers", boot, "--group", group, "--topic", topic,
             "--consumer-id", cid, "--session-timeout-ms", "2000", "--format", "offsets",
             "--auto-commit-interval-ms", "200"],
            stdout=self.out, stderr=self.err)

    def records(self) -> list[tuple[int, int]]:
        out = []
        for line in self.path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                out.append((int(parts[1]), int(parts[2])))
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def test_groups_spread_and_survive_the_loss_of_their_coordinator(broker_factory, zookeeper,
                                                                 tmp_path):
    brokers = start_cluster(broker_factory, zookeeper, coordinator=True)
    # Slots spread over the three brokers.
    wait_until(lambda: len(set(cluster_view(brokers[0])["view"]["slots"].values())) == 3
               and len(cluster_view(brokers[0])["view"]["slots"]) == SLOTS_IN_TEST, 20,
               "every slot owned, by all three brokers")
    create(brokers[0], "orders", 6)
    placement = wait_until(lambda: cluster_view(brokers[1])["view"]["topics"].get("orders"), 15,
                           "placement")
    leaders_of = dict(enumerate(placement["leaders"]))
    # A group whose coordinator is not broker 1 (we keep broker 1 for the checks).
    group = next(g for g in (f"grp-{i}" for i in range(100))
                 if coordinator_of(brokers[0], g) not in (None, 1))
    coord = coordinator_of(brokers[0], group)
    victim = brokers[coord - 1]
    survivors = [b for b in brokers if b is not victim]
    msgs = [Msg(f"k{i}".encode(), f"v{i}".encode(), [], partition=i % 6) for i in range(1200)]
    ck_produce(brokers[0], "orders", msgs)
    consumers = [Consumer(survivors, group, "orders", f"c{i}", tmp_path) for i in range(3)]
    try:
        def consumed():
            return {r for c in consumers for r in c.records()}
        want_all = {(p, o) for p in range(6) for o in range(200)}
        wait_until(lambda: consumed() >= want_all, 60, "the first batch consumed")
        # The store is shared: only the group's coordinator lists it (not as an empty
        # native group on every other broker).
        def listed(b):
            status, _, body = http_get(f"{b.admin_url}/v1/groups")
            assert status == 200, body
            return {g["group"] for g in json.loads(body)}
        def committed_in_store():
            status, _, body = http_get(f"{victim.admin_url}/v1/groups/{group}")
            return status == 200 and any(p.get("committed_offset") is not None
                                         for p in json.loads(body)["partitions"])
        wait_until(committed_in_store, 15, "the group's offsets in the shared store")
        assert group in listed(victim)
        assert group not in listed(brokers[0]), "listed by a broker that does not coordinate it"
        # Kill the group's coordinator (with its partitions).
        victim.kill9()
        dead = {p for p, l in leaders_of.items() if l == coord}
        live = [p for p in range(6) if p not in dead]
        # The slot moves to a live broker; the consumers find it and register again.
        wait_until(lambda: coordinator_of(survivors[0], group) not in (None, coord), 30,
                   "the slot owned by a live broker")
        more = [Msg(f"k2-{i}".encode(), b"after", [], partition=live[i % len(live)])
                for i in range(600)]
        ck_produce(survivors[0], "orders", more)
        want_live = {(p, o) for p in live for o in range(200 + 600 // len(live))}
        t0 = time.time()
        wait_until(lambda: consumed() >= want_live, 60, "consumption on the live partitions")
        print(f"group consuming again {time.time() - t0:.1f}s after the second batch")
        # The killed broker returns with its partitions; everything is consumed.
        victim.start()
        more2 = [Msg(f"k3-{i}".encode(), b"back", [], partition=p) for i, p in enumerate(sorted(dead))]
        wait_until(lambda: all(leaders(survivors[0], "orders")[p] == coord for p in dead), 30,
                   "partitions back")
        ck_produce(survivors[0], "orders", more2)
        want_end = want_live | {(p, o) for p in dead for o in range(201)}
        wait_until(lambda: consumed() >= want_end, 60, "everything consumed")
        # Committed offsets never went backwards and reached what was consumed.
        for c in consumers:
            assert c.proc.poll() is None, c.err.name
    finally:
        for c in consumers:
            c.stop()
