"""Shared pieces of the Kafka group protocol tests (issue 8): a broker with the
coordinator plugin, and consumer processes of the real clients (confluent-kafka,
kafka-python, kcat) that record what they deliver."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


import pytest

from cluster_testlib import wait_until
from conftest import _die_with_parent, install_plugins, start_or_fail

HERE = Path(__file__).resolve().parent
GROUP_CONSUMER = HERE / "kafka_group_consumer.py"

PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
]

# Short delays keep the tests quick (Kafka's defaults: a 3000 ms initial rebalance delay,
# KIP-848 sessions of 45000 ms with 5000 ms heartbeats).
COORDINATOR = {
    "initial_rebalance_delay_ms": 300,
    "min_session_timeout_ms": 1000,
    "consumer_session_timeout_ms": 3000,
    "consumer_heartbeat_interval_ms": 500,
}


def group_config(extra: str = "", **overrides) -> str:
    """The broker config: the coordinator's keys above with `overrides`, then `extra`
    lines inside the coordinator's table."""
    keys = {**COORDINATOR, **overrides}
    lines = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return ("[plugins]\n"
            'required = ["drover-coordinator", "range", "round-robin", "sticky", "embedded"]\n\n'
            f"[plugins.config.drover-coordinator]\n{lines}{extra}")


def start_group_broker(broker_factory, extra: str = "", **overrides):
    b = broker_factory(group_config(extra, **overrides), start=False)
    install_plugins(b, PLUGIN_LIBS)
    return start_or_fail(b)


@pytest.fixture
def group_broker(broker_factory):
    """A started broker with the coordinator, the assignors and the embedded store."""
    return start_group_broker(broker_factory)


@pytest.fixture
def consumers(tmp_path, request):
    """Group member processes of the test; stopped at the end, their logs printed on
    failure."""
    cs = Consumers(tmp_path / "consumers")
    cs.workdir.mkdir()
    yield cs
    cs.stop_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("\n===== consumers =====\n" + cs.logs())


@dataclass
class GroupConsumer:
    """A `kafka_group_consumer.py` process: one group member of a real client."""
    name: str
    proc: subprocess.Popen
    out: Path
    stderr: Path
    killed: bool = False

    def records(self) -> list[dict]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line being written
        return out

    def delivered(self) -> list[tuple[int, int]]:
        return [(r["p"], r["o"]) for r in self.records() if r.get("ev") == "msg"]

    def assignments(self) -> list[list[int]]:
        return [r["partitions"] for r in self.records() if r.get("ev") == "assigned"]

    def current(self) -> set[int] | None:
        """The partitions it holds now (from its assign/revoke callbacks)."""
        held: set[int] | None = None
        for r in self.records():
            if r.get("ev") == "assigned":
                held = (held or set()) | set(r["partitions"])
            elif r.get("ev") == "revoked":
                held = (held or set()) - set(r["partitions"])
        return held

    def kill(self) -> None:
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM: the client closes cleanly (commits, leaves unless static)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass
class Consumers:
    workdir: Path
    members: list[GroupConsumer] = field(default_factory=list)

    def start(self, client: str, broker, topic: str, group: str, name: str, **opts) -> GroupConsumer:
        out = self.workdir / f"{name}.jsonl"
        err = self.workdir / f"{name}.stderr"
        args = [sys.executable, str(GROUP_CONSUMER), "--client", client,
                "--bootstrap", broker.bootstrap, "--topic", topic, "--group", group,
                "--out", str(out)]
        for k, v in opts.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        with open(err, "wb") as e:
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=e,
                                    preexec_fn=_die_with_parent)
        c = GroupConsumer(name, proc, out, err)
        self.members.append(c)
        return c

    def stop_all(self) -> None:
        for c in self.members:
            if not c.killed:
                c.stop()

    def logs(self) -> str:
        parts = []
        for c in self.members:
            text = c.stderr.read_text(errors="replace") if c.stderr.exists() else ""
            parts.append(f"----- {c.name} (rc={c.proc.poll()}) -----\n{text[-4000:]}")
        return "\n".join(parts)


def wait_for(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, interval=0.2)


# ---------------------------------------------------------------------------------
# Raw Kafka group requests the Python clients do not expose (ListGroups v5 with the
# group type, OffsetDelete v0), on a RawConn of drover_testlib.
# ---------------------------------------------------------------------------------
API_LIST_GROUPS, API_OFFSET_DELETE = 16, 47


def _compact_str(s: str) -> bytes:
    from drover_testlib import uvarint
    b = s.encode()
    return uvarint(len(b) + 1) + b


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    n, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7


def _read_compact_str(buf: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return buf[pos:pos + n - 1].decode(), pos + n - 1


def _skip_tags(buf: bytes, pos: int) -> int:
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def raw_list_groups(broker, states: list[str] = (), types: list[str] = ()) -> tuple[int, list[dict]]:
    """ListGroups v5 (flexible) -> (error_code, [{group_id, protocol_type, state, type}])."""
    import struct
    from drover_testlib import RawConn, uvarint
    body = (uvarint(len(states) + 1) + b"".join(_compact_str(s) for s in states)
            + uvarint(len(types) + 1) + b"".join(_compact_str(t) for t in types) + b"\x00")
    with RawConn(broker) as c:
        corr = c.request(API_LIST_GROUPS, 5, body, flexible_header=True)
        resp = c.recv_response(corr, flexible_header=True)
    _throttle, err = struct.unpack_from(">ih", resp, 0)
    pos = 6
    n, pos = _read_uvarint(resp, pos)
    groups = []
    for _ in range(max(n - 1, 0)):
        gid, pos = _read_compact_str(resp, pos)
        ptype, pos = _read_compact_str(resp, pos)
        state, pos = _read_compact_str(resp, pos)
        gtype, pos = _read_compact_str(resp, pos)
        pos = _skip_tags(resp, pos)
        groups.append({"group_id": gid, "protocol_type": ptype, "state": state, "type": gtype})
    return err, groups


def raw_offset_delete(broker, group: str, topics: dict[str, list[int]]) -> tuple[int, dict]:
    """OffsetDelete v0 -> (group error_code, {(topic, partition): error_code})."""
    import struct
    from drover_testlib import RawConn, kstr
    body = kstr(group) + struct.pack(">i", len(topics))
    for t, parts in topics.items():
        body += kstr(t) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    with RawConn(broker) as c:
        corr = c.request(API_OFFSET_DELETE, 0, body)
        resp = c.recv_response(corr)
    err, _throttle, nt = struct.unpack_from(">hii", resp, 0)
    pos = 10
    out = {}
    for _ in range(nt):
        (tl,) = struct.unpack_from(">h", resp, pos)
        topic = resp[pos + 2:pos + 2 + tl].decode()
        pos += 2 + tl
        (np_,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(np_):
            p, e = struct.unpack_from(">ih", resp, pos)
            pos += 6
            out[(topic, p)] = e
    return err, out
