"""The `zookeeper` offset store in cluster mode, over the brokers' own ZooKeeper
sessions (lent to plugins through HostServices.zookeeper), with real processes: a
ZooKeeper server (cluster_testlib) and `drover serve` brokers in cluster mode.

- Two brokers whose `[plugins.config.zookeeper]` has no usable `connect` (broker 1: an
  unreachable one, which would fail the required store at startup if the store opened
  its own session; broker 2: none at all) start, and each logs that the store uses the
  broker's session. Commits made with the native CommitOffset API through each group's
  coordinator (one group per broker) are read back with FetchOffsets and are in
  ZooKeeper at `<broker chroot>/consumers/<group>/offsets/<topic>/<partition>`, and
  nowhere outside the chroot.
- ZooKeeper is stopped for longer than the session timeout (the brokers' sessions
  expire) and started again: commits fail with retriable errors meanwhile (the brokers
  give up their coordinator slots as soon as the connection drops), then work again
  over the brokers' new sessions (the stores are not reopened), and the earlier offsets
  are intact. (The store's own `Unavailable` answers while the lent session has no
  ZooKeeper are covered by host/tests/all/zookeeper_lent_session.rs.)
- A swap (POST /v1/offset-store) to the zookeeper store on a broker in cluster mode
  opens it with the broker's session too (its config has no `connect`).

ZooKeeper nodes are read with the small client below (getData / getChildren), so the
test needs no ZooKeeper library.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid

import pytest

import native_protocol as np
from cluster_testlib import SLOTS_IN_TEST, ZooKeeper, install_plugins, wait_until
from conftest import BrokerError, free_port
from drover_testlib import ck_create_topic, http_get
from test_offset_swap import post_swap, wait_swap

SESSION_TIMEOUT_MS = 3000
TOPIC = "orders"
PARTITIONS = 4
# CommitOffset / FetchOffsets codes that mean "ask again later" (coordinator moving or
# its store unavailable).
RETRIABLE = {14, 15, 16}
# How long after creating the topic a coordinator may not know it yet, s.
TOPIC_SETTLE_S = 10
STORE_LOG = "zookeeper offset store opened over the broker's ZooKeeper session"


# ---------------------------------------------------------------------------------
# A minimal ZooKeeper client: connect, getData, getChildren (jute over TCP)
# ---------------------------------------------------------------------------------
class ZkClient:
    GET_DATA, GET_CHILDREN, CLOSE = 4, 8, -11
    NO_NODE = -101

    def __init__(self, zk: ZooKeeper, timeout: float = 10):
        self.sock = socket.create_connection(("127.0.0.1", zk.port), timeout=timeout)
        # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd.
        self._send(struct.pack(">iqiqi", 0, 0, 10_000, 0, 16) + b"\0" * 16 + b"\0")
        self._recv()
        self.xid = 0

    def _send(self, body: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("ZooKeeper closed the connection")
            out += chunk
        return out

    def _recv(self) -> bytes:
        (n,) = struct.unpack(">i", self._exact(4))
        return self._exact(n)

    def _request(self, op: int, path: str) -> tuple[int, bytes]:
        self.xid += 1
        p = path.encode()
        self._send(struct.pack(">ii", self.xid, op) + struct.pack(">i", len(p)) + p + b"\0")
        while True:
            reply = self._recv()
            xid, _zxid, err = struct.unpack_from(">iqi", reply, 0)
            if xid == self.xid:
                return err, reply[16:]

    def get(self, path: str) -> bytes | None:
        err, body = self._request(self.GET_DATA, path)
        if err == self.NO_NODE:
            return None
        assert err == 0, f"getData {path}: ZooKeeper error {err}"
        (n,) = struct.unpack_from(">i", body, 0)
        return b"" if n < 0 else body[4:4 + n]

    def children(self, path: str) -> list[str] | None:
        err, body = self._request(self.GET_CHILDREN, path)
        if err == self.NO_NODE:
            return None
        assert err == 0, f"getChildren {path}: ZooKeeper error {err}"
        (count,) = struct.unpack_from(">i", body, 0)
        pos, out = 4, []
        for _ in range(count):
            (n,) = struct.unpack_from(">i", body, pos)
            out.append(body[pos + 4:pos + 4 + n].decode())
            pos += 4 + n
        return sorted(out)

    def close(self) -> None:
        try:
            self.xid += 1
            self._send(struct.pack(">ii", self.xid, self.CLOSE))
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------------
# Brokers and commits
# ---------------------------------------------------------------------------------
def broker_config(zk: ZooKeeper, chroot: str, broker_id: int, store: str,
                  offset_store: str = "zookeeper") -> str:
    """Cluster mode with the coordinator; `store` is the `[plugins.config.zookeeper]`
    table's body."""
    required = ["drover-coordinator", "range", "sticky", offset_store]
    return (
        f"[server]\nbroker_id = {broker_id}\n"
        f"[zookeeper]\nenabled = true\nconnect = \"{zk.connect}\"\nchroot = \"{chroot}\"\n"
        f"session_timeout_ms = {SESSION_TIMEOUT_MS}\n"
        f"slots = {SLOTS_IN_TEST}\nslot_claim_delay_ms = 500\n"
        f"[plugins]\nrequired = {json.dumps(required)}\n"
        f"[coordinator]\ndefault_assignor = \"sticky\"\noffset_store = \"{offset_store}\"\n"
        f"[plugins.config.zookeeper]\n{store}"
        "[plugins.config.drover-coordinator]\nmin_session_timeout_ms = 1000\n"
        "rebalance_delay_ms = 100\ncommit_interval_ms = 200\n"
        "max_session_timeout_ms = 3000\nslot_takeover_wait_ms = 3000\n"
    )


def cluster_view(b) -> dict:
    status, _, body = http_get(f"{b.admin_url}/v1/cluster")
    assert status == 200, body
    return json.loads(body)


def start_brokers(broker_factory, zk: ZooKeeper, chroot: str, stores: list[str],
                  offset_store: str = "zookeeper") -> list:
    brokers = []
    for i, store in enumerate(stores, start=1):
        b = broker_factory(broker_config(zk, chroot, i, store, offset_store), start=False)
        install_plugins(b)
        brokers.append(b)
    for b in brokers:
        try:
            b.start()
        except BrokerError as e:
            pytest.fail(str(e), pytrace=False)
    n = len(brokers)

    def settled(b) -> bool:
        view = cluster_view(b)["view"]
        return (len(view["brokers"]) == n and len(view["slots"]) == SLOTS_IN_TEST
                and len(set(view["slots"].values())) == n)
    wait_until(lambda: all(settled(b) for b in brokers), 30,
               f"{n} brokers registered, the slots spread over them")
    return brokers


def coordinator_port(brokers, group: str) -> int | None:
    """The Kafka port of `group`'s coordinator, asked of the first live broker."""
    for b in brokers:
        try:
            with np.Conn(b.host, b.port, connect_timeout=5) as c:
                err, _node, _host, port = c.find_coordinator(group, timeout=10)
        except (OSError, np.ProtocolError, TimeoutError):
            continue
        return port if err == 0 else None
    return None


def commit(brokers, group: str, offsets: dict[int, int], metadata: str,
           timeout: float = 60) -> int:
    """Commits `offsets` (partition -> offset) of TOPIC for `group` through its
    coordinator (standalone commit: no member, generation -1), retrying retriable
    answers until `timeout`. Returns the coordinator's port."""
    started = time.monotonic()
    deadline = started + timeout
    last = None
    while time.monotonic() < deadline:
        port = coordinator_port(brokers, group)
        if port is not None:
            try:
                with np.Conn("127.0.0.1", port, connect_timeout=5) as c:
                    resp = c.request(np.CommitOffsetRequest(group, "", -1, [
                        (TOPIC, [(p, o, metadata) for p, o in offsets.items()])]), timeout=40)
                codes = {code for _, parts in resp.topics for _, code in parts}
                if codes == {0}:
                    return port
                # UNKNOWN_TOPIC_OR_PARTITION for a moment after the topic was created,
                # until the coordinator's broker has its copy.
                young = time.monotonic() < started + TOPIC_SETTLE_S
                assert codes <= RETRIABLE | ({3} if young else set()), \
                    f"commit {group}: codes {codes}"
                last = codes
            except (OSError, np.ProtocolError, TimeoutError) as e:
                last = e
        time.sleep(0.3)
    raise AssertionError(f"commit {group} not acknowledged within {timeout}s (last: {last!r})")


def fetch(brokers, group: str, timeout: float = 60) -> dict[int, tuple[int, str]]:
    """FetchOffsets at the coordinator: partition -> (offset, metadata) of TOPIC."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        port = coordinator_port(brokers, group)
        if port is not None:
            try:
                with np.Conn("127.0.0.1", port, connect_timeout=5) as c:
                    resp = c.request(np.FetchOffsetsRequest(group, None), timeout=40)
                if resp.error_code == 0:
                    return {p: (off, meta) for t, parts in resp.topics if t == TOPIC
                            for p, off, meta, _err in parts}
                assert resp.error_code in RETRIABLE, f"fetch {group}: {resp.error_code}"
                last = resp.error_code
            except (OSError, np.ProtocolError, TimeoutError) as e:
                last = e
        time.sleep(0.3)
    raise AssertionError(f"fetch {group} failed for {timeout}s (last: {last!r})")


def node_value(zk: ZooKeeper, path: str) -> dict | None:
    with ZkClient(zk) as c:
        data = c.get(path)
    return None if data is None else json.loads(data)


def create_topic(brokers) -> None:
    """Creates TOPIC through the first broker; waits until every broker has it."""
    ck_create_topic(brokers[0], TOPIC, PARTITIONS)
    wait_until(lambda: all(TOPIC in cluster_view(b)["view"]["topics"] for b in brokers), 15,
               f"{TOPIC} on every broker")


def groups_by_coordinator(brokers, prefix: str) -> dict[int, str]:
    """One group per broker (by Kafka port), coordinated by that broker."""
    found: dict[int, str] = {}
    for i in range(500):
        g = f"{prefix}-{i}"
        port = coordinator_port(brokers, g)
        if port is not None and port not in found:
            found[port] = g
        if len(found) == len(brokers):
            return found
    raise AssertionError(f"no group for every broker: {found}")


# ---------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------
def test_the_store_uses_the_brokers_session_and_survives_a_zookeeper_restart(
        broker_factory, zookeeper):
    zk = zookeeper
    chroot = f"/drover-{uuid.uuid4().hex[:8]}"
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    brokers = start_brokers(broker_factory, zk, chroot, [
        # Its own session would need this ensemble: the required store could not open
        # and the broker would not start.
        f'connect = "{dead}"\nrequest_timeout_ms = 1000\n',
        # No connect at all (refused standalone: `connect` is required).
        "",
    ])
    for b in brokers:
        logs = b.all_logs()
        assert STORE_LOG in logs, logs[-3000:]
        assert "zookeeper offset store opened with its own ZooKeeper session" not in logs
    assert "`connect` is ignored" in brokers[0].all_logs()

    create_topic(brokers)
    groups = groups_by_coordinator(brokers, "shared")
    assert sorted(groups) == sorted(b.port for b in brokers), groups

    # Commits through each broker's coordinator land below the broker chroot.
    for port, group in groups.items():
        got_port = commit(brokers, group, {p: 100 + p for p in range(PARTITIONS)}, f"m-{group}")
        assert got_port == port
        assert fetch(brokers, group) == {p: (100 + p, f"m-{group}") for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            v = node_value(zk, f"{chroot}/consumers/{group}/offsets/{TOPIC}/{p}")
            assert v is not None, f"no node for {group} partition {p} below {chroot}"
            assert (v["offset"], v["metadata"], v["version"]) == (100 + p, f"m-{group}", 1), v
    with ZkClient(zk) as c:
        # Nothing outside the brokers' chroot (the zookeeper node is ZooKeeper's own).
        assert c.children("/") == sorted(["zookeeper", chroot.lstrip("/")]), c.children("/")
        assert c.children(f"{chroot}/consumers") == sorted(groups.values())

    # ZooKeeper away for longer than the session timeout: the sessions expire.
    zk.stop()
    outage_started = time.monotonic()
    group = next(iter(groups.values()))
    port = next(iter(groups))
    with np.Conn("127.0.0.1", port, connect_timeout=5) as c:
        t0 = time.monotonic()
        resp = c.request(np.CommitOffsetRequest(group, "", -1, [(TOPIC, [(0, 555, "outage")])]),
                         timeout=40)
        took = time.monotonic() - t0
    codes = {code for _, parts in resp.topics for _, code in parts}
    assert codes and codes <= RETRIABLE, f"a commit while ZooKeeper is down: codes {codes}"
    assert took < 30, f"the failing commit took {took:.1f}s"
    print(f"a commit while ZooKeeper was down: codes {codes} after {took:.1f}s")
    time.sleep(max(0.0, SESSION_TIMEOUT_MS / 1000 * 2 - (time.monotonic() - outage_started)))
    zk.start()

    # Service resumes over the brokers' new sessions; the earlier offsets are intact.
    for port, group in groups.items():
        commit(brokers, group, {0: 200}, "after-restart", timeout=90)
        got = fetch(brokers, group)
        assert got[0] == (200, "after-restart"), got
        # Partition 0 may hold the outage commit's 555 only if it was applied; it was
        # not acknowledged, and the later commit overwrote it anyway.
        assert {p: got[p] for p in range(1, PARTITIONS)} == {
            p: (100 + p, f"m-{group}") for p in range(1, PARTITIONS)}, got
        v = node_value(zk, f"{chroot}/consumers/{group}/offsets/{TOPIC}/0")
        assert (v["offset"], v["metadata"]) == (200, "after-restart"), v
    for b in brokers:
        b.assert_alive()
        # The brokers register again with new sessions, which the store followed. A
        # broker whose earlier session ZooKeeper still holds (ZooKeeper restarted and
        # gave it a fresh timeout) waits for that session to expire first, so this may
        # lag the commits above by up to a session timeout plus ZooKeeper's tick.
        wait_until(lambda: b.all_logs().count("registered in the cluster") >= 2, 30,
                   f"broker on port {b.port} to register with its new session")
        logs = b.all_logs()
        assert logs.count(STORE_LOG) == 1, "the store was opened once, not reopened"


def test_a_swap_in_cluster_mode_gets_the_brokers_session(broker_factory, zookeeper):
    zk = zookeeper
    chroot = f"/drover-{uuid.uuid4().hex[:8]}"
    (b,) = start_brokers(broker_factory, zk, chroot, [""], offset_store="embedded")
    create_topic([b])
    commit([b], "before-swap", {0: 7, 1: 8}, "embedded")
    # No `connect`: only the broker's session can open it; a store root of its own.
    status, body = post_swap(b, "zookeeper", 'chroot = "/swapped"\n')
    assert status == 202, body
    s = wait_swap(b, timeout=60)
    assert s["swap"]["state"] == "completed" and s["active"] == "zookeeper", s
    assert s["swap"]["copied"] == 2, s
    commit([b], "after-swap", {3: 33}, "zk")
    assert fetch([b], "before-swap") == {0: (7, "embedded"), 1: (8, "embedded")}
    v = node_value(zk, f"{chroot}/swapped/consumers/before-swap/offsets/{TOPIC}/1")
    assert (v["offset"], v["metadata"]) == (8, "embedded"), v
    v = node_value(zk, f"{chroot}/swapped/consumers/after-swap/offsets/{TOPIC}/3")
    assert (v["offset"], v["metadata"]) == (33, "zk"), v
    assert STORE_LOG in b.all_logs()
