"""Share groups (KIP-932, issue 31 item 6) in cluster mode: a real ZooKeeper
(cluster_testlib), `drover serve` brokers with the coordinator plugin and the zookeeper
offset store, and confluent-kafka 2.16's ShareConsumer.

A share group has two halves that fail over separately (docs/design.md, "Cluster
mode"): its membership follows its coordinator slot, its share-partitions' state stays
with each partition's leader and is durable in the offset store.

- kill -9 of the broker coordinating a share group (not the partition's leader): the
  slot moves to another broker, whose coordinator does not know the group; the
  members' heartbeats there are UNKNOWN_MEMBER_ID, they rejoin with member epoch 0,
  and the ShareConsumers keep consuming: every record produced before and after the
  kill is delivered, and the group is described by its new coordinator with both
  members. (Before the fix the new coordinator answered GROUP_ID_NOT_FOUND, which
  librdkafka's share consumer treats as fatal.)
- kill -9 of the leader of the share-partition while one consumer holds acquired
  records and another acknowledges: once the leader is back (no replication: a
  partition is served again when its leader returns), the share-partition's state is
  read from the store: no acknowledged record is delivered again, the held ones are
  delivered again with their delivery count kept (2), and nothing is lost.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from types import SimpleNamespace

from confluent_kafka import AcknowledgeType, ShareConsumer

from cluster_testlib import SLOTS_IN_TEST, start_cluster, wait_until
from drover_testlib import Msg, ck_create_topic, ck_produce, http_get, unique_topic
from share_groups_testlib import share_describe
from test_share_consumers import Acker, assert_none_again_none_lost, read_rest
from test_transactions_cluster import fnv1a32, leaders, slots_settled

# Share sessions per the cluster tests' coordinator (1-3 s KIP-848 sessions there; a
# share member heartbeats every 500 ms), and every share group from the earliest offset.
EXTRA = ("share_session_timeout_ms = 6000\nshare_heartbeat_interval_ms = 500\n"
         '[share]\nauto_offset_reset = "earliest"\n')
TIMEOUT = 120


def view(b) -> dict:
    status, _, body = http_get(f"{b.admin_url}/v1/cluster")
    assert status == 200, body
    return json.loads(body)["view"]


def slot_owner(b, group: str) -> int | None:
    """The broker owning `group`'s coordinator slot, as `b` sees it."""
    return view(b)["slots"].get(str(fnv1a32(group.encode()) % SLOTS_IN_TEST))


def one_partition_topic(brokers, prefix: str) -> tuple[str, int]:
    """A new one-partition topic that every broker knows, and its leader's id."""
    wait_until(lambda: slots_settled(brokers), 30, "the slots spread over the brokers")
    topic = unique_topic(prefix)
    ck_create_topic(brokers[0], topic, 1)
    wait_until(lambda: all(leaders(b, topic).get(0) for b in brokers), 20,
               "the topic on every broker")
    return topic, leaders(brokers[0], topic)[0]


def group_coordinated_by(brokers, prefix: str, broker_id: int) -> str:
    """A group id whose coordinator slot `broker_id` owns now."""
    return next(g for g in (f"{prefix}-{i}" for i in range(1000))
                if slot_owner(brokers[0], g) == broker_id)


def bootstrap(brokers) -> str:
    return ",".join(b.bootstrap for b in brokers)


def produce(brokers, topic: str, values: list[bytes]) -> None:
    live = next(b for b in brokers if b.alive())
    ck_produce(live, topic, [Msg(None, v, [], partition=0) for v in values])


class Member:
    """A ShareConsumer (implicit acknowledgement) polling in a thread: every delivery
    as (value, delivery count), and every error it reported."""

    def __init__(self, brokers, group: str, topic: str):
        self.deliveries: list[tuple[bytes, int]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.conf = {"bootstrap.servers": bootstrap(brokers), "group.id": group}
        self.topic = topic
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            c = ShareConsumer(self.conf)
            c.subscribe([self.topic])
            try:
                while not self.stop.is_set():
                    for m in c.poll(0.5):
                        with self.lock:
                            if m.error() is None:
                                self.deliveries.append((m.value(), m.delivery_count()))
                            elif m.error().fatal():
                                self.errors.append(str(m.error()))
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            self.errors.append(repr(e))

    def values(self) -> list[bytes]:
        with self.lock:
            return [v for v, _ in self.deliveries]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def delivered(members) -> set[bytes]:
    return {v for m in members for v in m.values()}


def deliver_across_a_coordinator_kill9(brokers, topic: str, group: str, coordinator: int,
                                      delivered) -> tuple[list, int]:
    """Produces 200 records to partition 0 of `topic`, waits until `delivered()` (the
    set of values the group's consumers got) holds them, kills broker `coordinator`
    with SIGKILL, waits until the live brokers agree on another owner of `group`'s
    slot, produces 200 more and waits for them too. Returns the live brokers and the
    new coordinator's id."""
    first = [f"before-{i}".encode() for i in range(200)]
    produce(brokers, topic, first)
    wait_until(lambda: set(first) <= delivered(), TIMEOUT,
               "the records produced before the kill delivered")
    brokers[coordinator - 1].kill9()
    live = [b for b in brokers if b.alive()]

    def moved():
        owners = {slot_owner(b, group) for b in live}
        return owners.pop() if len(owners) == 1 and None not in owners \
            and coordinator not in owners else None
    new_coordinator = wait_until(moved, 60, "the group's slot at a live broker")
    second = [f"after-{i}".encode() for i in range(200)]
    produce(brokers, topic, second)
    wait_until(lambda: set(first + second) <= delivered(), TIMEOUT,
               "the records produced after the kill delivered")
    return live, new_coordinator


def test_share_consumers_follow_their_group_to_a_new_coordinator_after_a_kill9(
        broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=3, coordinator=True, extra=EXTRA)
    topic, leader = one_partition_topic(brokers, "share-fo")
    coordinator = next(b_id for b_id in (1, 2, 3) if b_id != leader)
    group = group_coordinated_by(brokers, "share-fo", coordinator)
    members = [Member(brokers, group, topic) for _ in range(2)]
    try:
        live, new_coordinator = deliver_across_a_coordinator_kill9(
            brokers, topic, group, coordinator, lambda: delivered(members))

        # The new coordinator knows the group again: both members rejoined.
        def described():
            [g] = share_describe(brokers[new_coordinator - 1], [group])
            return g if g.error_code == 0 and len(g.members) == 2 else None
        g = wait_until(described, 60, "both members at the new coordinator")
        assert all(m.subscribed == [topic] for m in g.members), g
        for m in members:
            assert not m.errors, m.errors
    finally:
        for m in members:
            m.close()
    # Implicit acknowledgement with the partition's leader up throughout: a record is
    # delivered again only if its acquisition was released or its lock expired (then
    # with a higher delivery count), never twice as the same delivery.
    seen: dict[bytes, list[int]] = {}
    for m in members:
        for v, count in m.deliveries:
            seen.setdefault(v, []).append(count)
    twice = {v: c for v, c in seen.items() if sorted(c) != list(range(1, len(c) + 1))}
    assert not twice, list(twice.items())[:10]
    for b in live:
        b.assert_alive()


HOLDER = textwrap.dedent("""
    import sys
    from confluent_kafka import ShareConsumer
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 20})
    c.subscribe([topic])
    while True:
        batch = [m for m in c.poll(1.0) if m.error() is None]
        if batch:
            print(" ".join(f"{m.offset()}:{m.delivery_count()}" for m in batch), flush=True)
            break
    sys.stdin.read()  # hold the records until killed
""")


def test_share_partition_state_survives_a_kill9_of_its_leader(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=2, coordinator=True, extra=EXTRA)
    topic, leader = one_partition_topic(brokers, "share-leader")
    other = 3 - leader
    group = group_coordinated_by(brokers, "share-leader", other)
    total = 300
    produce(brokers, topic, [f"r{i}".encode() for i in range(total)])

    # One consumer accepts records throughout, pausing between batches so that records
    # are left for the holder.
    clients = SimpleNamespace(bootstrap=bootstrap(brokers))
    acker = Acker(clients, group, topic, pause=0.2, outages=True)
    try:
        acker.wait_accepted(40)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap(brokers), group,
                                   topic], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        try:
            line = holder.stdout.readline().split()
            held = {int(o): int(n) for o, n in (x.split(":") for x in line)}
            assert held, "the holder acquired nothing"
            # The leader dies while the holder holds its records and the acker goes on.
            victim = brokers[leader - 1]
            victim.kill9()
        finally:
            holder.kill()
            holder.wait(10)
        time.sleep(2)
        victim.start()
        wait_until(lambda: all(leaders(b, topic).get(0) == leader for b in brokers), 60,
                   "the leader back")
        # The acker acknowledges again at the returned leader.
        acker.wait_accepted(len(acker.accepted) + 20)
    finally:
        acker.stop.set()
    acker.close()
    again = read_rest(clients, group, topic, acker.accepted | acker.uncertain, total)
    print(f"held {len(held)}, accepted {len(acker.accepted)}, uncertain "
          f"{len(acker.uncertain)}, read after the restart {len(again)}")
    assert_none_again_none_lost(acker, again, total)
    # The held records' deliveries were durable before they were handed out: each is
    # delivered once more, after the restart (to the acker or the reader), as its
    # second delivery.
    after = {o: acker.deliveries.get(o, []) + again.get(o, []) for o in held}
    assert all(after[o] == [held[o] + 1] for o in held), after
    for b in brokers:
        b.assert_alive()


API_SHARE_FETCH = 78
NOT_LEADER_OR_FOLLOWER = 6


def share_fetch_partitions(conn, group: str, member: str, epoch: int,
                           add: list[tuple[uuid.UUID, int]]) -> list[tuple[int, int]]:
    """A raw ShareFetch v1 (no acknowledgements, no wait) -> the answered (partition,
    error code) pairs; asserts the top-level error is NONE."""
    from drover_testlib import uvarint
    from kafka_groups_testlib import _compact_str, _read_compact_str, _read_uvarint

    body = _compact_str(group) + _compact_str(member)
    body += struct.pack(">iiiiii", epoch, 0, 1, 1 << 20, 10, 10)
    by_topic: dict[uuid.UUID, list[int]] = {}
    for t, p in add:
        by_topic.setdefault(t, []).append(p)
    body += uvarint(len(by_topic) + 1)
    for t, ps in by_topic.items():
        body += t.bytes + uvarint(len(ps) + 1)
        body += b"".join(struct.pack(">i", p) + b"\x01" + b"\x00" for p in ps)
        body += b"\x00"
    body += b"\x01" + b"\x00"  # no forgotten topics, no tags
    corr = conn.request(API_SHARE_FETCH, 1, body, flexible_header=True)
    resp = conn.recv_response(corr, flexible_header=True)
    (err,) = struct.unpack_from(">h", resp, 4)
    assert err == 0, err
    _msg, pos = _read_compact_str(resp, 6)
    pos += 4  # acquisition_lock_timeout_ms
    answered = []
    n, pos = _read_uvarint(resp, pos)
    for _ in range(n - 1):
        pos += 16
        k, pos = _read_uvarint(resp, pos)
        for _ in range(k - 1):
            index, perr = struct.unpack_from(">ih", resp, pos)
            answered.append((index, perr))
            break  # the rest of the partition is not needed
        break
    return answered


def test_a_share_session_keeps_a_partition_the_broker_does_not_lead_yet(
        broker_factory, zookeeper):
    """A ShareFetch that opens a session with a partition this broker does not serve
    (as at a restarted leader before it is back in the cluster) answers it
    NOT_LEADER_OR_FOLLOWER and keeps it in the session: the client counts it as added
    and from then on fetches incrementally without naming it. Before the fix it was
    left out, the session stayed empty, and librdkafka's share consumer spun on empty
    answers and never got the partition's records from that broker (seen in
    test_share_partition_state_survives_a_kill9_of_its_leader under load)."""
    from drover_testlib import RawConn

    brokers = start_cluster(broker_factory, zookeeper, n=2, coordinator=True, extra=EXTRA)
    topic, leader = one_partition_topic(brokers, "share-session")
    follower = brokers[2 - leader]
    tid = uuid.UUID(view(brokers[0])["topics"][topic]["id"])
    with RawConn(follower) as c:
        opened = share_fetch_partitions(c, "share-session", "m-1", 0, [(tid, 0)])
        assert opened == [(0, NOT_LEADER_OR_FOLLOWER)], opened
        # Incremental: the partition is still in the session, so it is answered.
        again = share_fetch_partitions(c, "share-session", "m-1", 1, [])
        assert again == [(0, NOT_LEADER_OR_FOLLOWER)], again
