"""Share-group test helpers (KIP-932): confluent-kafka's ShareConsumer and group configs,
and raw frames of what the Python clients do not expose — ShareGroupHeartbeat v1 (76),
ShareGroupDescribe v1 (77), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91)
and DeleteShareGroupOffsets (92), all flexible: confluent-kafka 2.16's AdminClient has
no share-group methods."""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from drover_testlib import Msg, RawConn, ck_admin, ck_produce, unique_topic, uvarint
from kafka_groups_testlib import _compact_str, _read_compact_str, _read_uvarint, _skip_tags

# Short sessions and heartbeats keep the tests quick (Kafka: 45000 ms, 5000 ms).
SHARE = {"share_session_timeout_ms": 6000, "share_heartbeat_interval_ms": 500}


def group_config(b, group: str, **configs) -> None:
    """Sets group configs (names with `_` for `.`)."""
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    a = ck_admin(b)
    a.incremental_alter_configs([res], request_timeout=30)[res].result(timeout=30)


def share_group(b, prefix: str, **configs) -> str:
    group = unique_topic(prefix)
    group_config(b, group, share_auto_offset_reset="earliest", **configs)
    return group


def share_consumer(b, group: str, topic: str, **extra) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def produce_values(b, topic: str, values: list[bytes]) -> None:
    ck_produce(b, topic, [Msg(None, v, [], partition=0) for v in values])


def poll_records(c: ShareConsumer, timeout: float = 1.0) -> list:
    return [m for m in c.poll(timeout) if m.error() is None]


class ShareMembers:
    """`n` share consumers of `group` on `topic`, each polling in a thread of its own
    until stopped. `got[i]`: the values member `i` received; `errors`: what a member's
    thread raised."""

    def __init__(self, b, group: str, topic: str, n: int):
        self.got: dict[int, list[bytes]] = {i: [] for i in range(n)}
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.args = (b, group, topic)
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def run(self, i: int) -> None:
        b, group, topic = self.args
        try:
            c = share_consumer(b, group, topic)
            try:
                while not self.stop.is_set():
                    self.got[i].extend(m.value() for m in poll_records(c, 0.5))
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            self.errors.append(e)

    def expect_each_once(self, total: int, timeout: float) -> None:
        """Waits up to `timeout` s for `total` records, a second more for any delivered
        twice, stops the members and asserts: no member failed, `total` distinct
        records arrived, each once, and every member received some."""
        deadline = time.monotonic() + timeout
        while sum(len(v) for v in self.got.values()) < total and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # anything delivered twice would arrive now
        self.stop.set()
        for t in self.threads:
            t.join(30)
        assert not self.errors, self.errors
        counts = {i: len(v) for i, v in self.got.items()}
        everything = [v for vs in self.got.values() for v in vs]
        assert len(everything) == total, (len(everything), counts)
        assert len(set(everything)) == total, "a record was delivered twice"
        assert all(self.got.values()), counts


API_SHARE_GROUP_HEARTBEAT, API_SHARE_GROUP_DESCRIBE = 76, 77


def member_uuid() -> str:
    """A member id as Kafka clients make it: a random UUID in URL-safe base64, 22
    characters."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _compact_nullable_str(s: str | None) -> bytes:
    return b"\x00" if s is None else _compact_str(s)


@dataclass
class HeartbeatAnswer:
    error_code: int
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    # (topic id, sorted partitions), or None when the answer carries no assignment.
    assignment: list[tuple[uuid.UUID, list[int]]] | None


def heartbeat_body(group: str, member_id: str, epoch: int, *, rack: str | None = None,
                   topics: list[str] | None = None) -> bytes:
    body = _compact_str(group) + _compact_str(member_id) + struct.pack(">i", epoch)
    body += _compact_nullable_str(rack)
    if topics is None:
        body += b"\x00"
    else:
        body += uvarint(len(topics) + 1) + b"".join(_compact_str(t) for t in topics)
    return body + b"\x00"


def parse_heartbeat(resp: bytes) -> HeartbeatAnswer:
    _throttle, err = struct.unpack_from(">ih", resp, 0)
    pos = 6
    message, pos = _read_compact_str(resp, pos)
    member, pos = _read_compact_str(resp, pos)
    epoch, interval = struct.unpack_from(">ii", resp, pos)
    pos += 8
    (present,) = struct.unpack_from(">b", resp, pos)
    pos += 1
    assignment = None
    if present == 1:
        assignment = []
        n, pos = _read_uvarint(resp, pos)
        for _ in range(max(n - 1, 0)):
            tid = uuid.UUID(bytes=resp[pos:pos + 16])
            pos += 16
            k, pos = _read_uvarint(resp, pos)
            parts = list(struct.unpack_from(f">{max(k - 1, 0)}i", resp, pos))
            pos += 4 * max(k - 1, 0)
            pos = _skip_tags(resp, pos)
            assignment.append((tid, sorted(parts)))
    return HeartbeatAnswer(err, message, member, epoch, interval, assignment)


def share_heartbeat(conn: RawConn, group: str, member_id: str, epoch: int, **kw) -> HeartbeatAnswer:
    corr = conn.request(API_SHARE_GROUP_HEARTBEAT, 1, heartbeat_body(group, member_id, epoch, **kw),
                        flexible_header=True)
    return parse_heartbeat(conn.recv_response(corr, flexible_header=True))


@dataclass
class DescribedMember:
    member_id: str
    member_epoch: int
    client_id: str
    subscribed: list[str]
    # topic name -> sorted partitions
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class DescribedShareGroup:
    error_code: int
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[DescribedMember]


def share_describe(broker, groups: list[str]) -> list[DescribedShareGroup]:
    body = uvarint(len(groups) + 1) + b"".join(_compact_str(g) for g in groups) + b"\x00" + b"\x00"
    with RawConn(broker) as c:
        corr = c.request(API_SHARE_GROUP_DESCRIBE, 1, body, flexible_header=True)
        resp = c.recv_response(corr, flexible_header=True)
    pos = 4
    n, pos = _read_uvarint(resp, pos)
    out = []
    for _ in range(max(n - 1, 0)):
        (err,) = struct.unpack_from(">h", resp, pos)
        pos += 2
        _msg, pos = _read_compact_str(resp, pos)
        gid, pos = _read_compact_str(resp, pos)
        state, pos = _read_compact_str(resp, pos)
        gepoch, aepoch = struct.unpack_from(">ii", resp, pos)
        pos += 8
        assignor, pos = _read_compact_str(resp, pos)
        m, pos = _read_uvarint(resp, pos)
        members = []
        for _ in range(max(m - 1, 0)):
            mid, pos = _read_compact_str(resp, pos)
            _rack, pos = _read_compact_str(resp, pos)
            (mepoch,) = struct.unpack_from(">i", resp, pos)
            pos += 4
            client_id, pos = _read_compact_str(resp, pos)
            _host, pos = _read_compact_str(resp, pos)
            k, pos = _read_uvarint(resp, pos)
            subscribed = []
            for _ in range(max(k - 1, 0)):
                t, pos = _read_compact_str(resp, pos)
                subscribed.append(t)
            assignment = {}
            k, pos = _read_uvarint(resp, pos)
            for _ in range(max(k - 1, 0)):
                pos += 16  # topic id
                name, pos = _read_compact_str(resp, pos)
                j, pos = _read_uvarint(resp, pos)
                parts = list(struct.unpack_from(f">{max(j - 1, 0)}i", resp, pos))
                pos += 4 * max(j - 1, 0)
                pos = _skip_tags(resp, pos)
                assignment[name] = sorted(parts)
            pos = _skip_tags(resp, pos)  # the assignment's tags
            pos = _skip_tags(resp, pos)  # the member's tags
            members.append(DescribedMember(mid, mepoch, client_id, subscribed, assignment))
        pos += 4  # authorized operations
        pos = _skip_tags(resp, pos)
        out.append(DescribedShareGroup(err, gid, state, gepoch, aepoch, assignor, members))
    return out


API_DESCRIBE_SHARE_GROUP_OFFSETS = 90


def describe_share_group_offsets(broker, group: str, topics: dict[str, list[int]] | None
                                 ) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    """DescribeShareGroupOffsets v0 (flexible) for one group -> (group error code,
    {(topic, partition): (start offset, partition error code)})."""
    body = uvarint(2) + _compact_str(group)
    if topics is None:
        body += b"\x00"
    else:
        body += uvarint(len(topics) + 1)
        for name, parts in topics.items():
            body += _compact_str(name) + uvarint(len(parts) + 1)
            body += b"".join(struct.pack(">i", p) for p in parts) + b"\x00"
    body += b"\x00" + b"\x00"
    with RawConn(broker) as c:
        corr = c.request(API_DESCRIBE_SHARE_GROUP_OFFSETS, 0, body, flexible_header=True)
        resp = c.recv_response(corr, flexible_header=True)
    pos = 4  # throttle
    n, pos = _read_uvarint(resp, pos)
    assert n - 1 == 1, n
    _group, pos = _read_compact_str(resp, pos)
    out = {}
    n_topics, pos = _read_uvarint(resp, pos)
    for _ in range(n_topics - 1):
        name, pos = _read_compact_str(resp, pos)
        pos += 16  # topic id
        n_parts, pos = _read_uvarint(resp, pos)
        for _ in range(n_parts - 1):
            index, start, _epoch, err = struct.unpack_from(">iqih", resp, pos)
            pos += 18
            _msg, pos = _read_compact_str(resp, pos)
            pos = _skip_tags(resp, pos)
            out[(name, index)] = (start, err)
        pos = _skip_tags(resp, pos)
    (group_err,) = struct.unpack_from(">h", resp, pos)
    return group_err, out


API_ALTER_SHARE_GROUP_OFFSETS, API_DELETE_SHARE_GROUP_OFFSETS = 91, 92


def alter_share_group_offsets_body(group: str, offsets: dict[str, dict[int, int]]) -> bytes:
    """AlterShareGroupOffsets v0 (flexible): {topic: {partition: start offset}}."""
    body = _compact_str(group) + uvarint(len(offsets) + 1)
    for name, parts in offsets.items():
        body += _compact_str(name) + uvarint(len(parts) + 1)
        body += b"".join(struct.pack(">iq", p, o) + b"\x00" for p, o in parts.items())
        body += b"\x00"
    return body + b"\x00"


def _send(broker, api: int, body: bytes) -> bytes:
    with RawConn(broker) as c:
        corr = c.request(api, 0, body, flexible_header=True)
        return c.recv_response(corr, flexible_header=True)


def alter_share_group_offsets(broker, group: str, offsets: dict[str, dict[int, int]]
                              ) -> tuple[int, dict[tuple[str, int], int]]:
    """AlterShareGroupOffsets v0 -> (request error code, {(topic, partition): error code})."""
    resp = _send(broker, API_ALTER_SHARE_GROUP_OFFSETS,
                 alter_share_group_offsets_body(group, offsets))
    return parse_alter_share_group_offsets(resp)


def parse_alter_share_group_offsets(resp: bytes) -> tuple[int, dict[tuple[str, int], int]]:
    (err,) = struct.unpack_from(">h", resp, 4)
    pos = 6
    _msg, pos = _read_compact_str(resp, pos)
    out = {}
    n, pos = _read_uvarint(resp, pos)
    for _ in range(max(n - 1, 0)):
        name, pos = _read_compact_str(resp, pos)
        pos += 16  # topic id
        k, pos = _read_uvarint(resp, pos)
        for _ in range(max(k - 1, 0)):
            index, perr = struct.unpack_from(">ih", resp, pos)
            pos += 6
            _msg, pos = _read_compact_str(resp, pos)
            pos = _skip_tags(resp, pos)
            out[(name, index)] = perr
        pos = _skip_tags(resp, pos)
    return err, out


def delete_share_group_offsets_body(group: str, topics: list[str]) -> bytes:
    """DeleteShareGroupOffsets v0 (flexible)."""
    body = _compact_str(group) + uvarint(len(topics) + 1)
    body += b"".join(_compact_str(t) + b"\x00" for t in topics)
    return body + b"\x00"


def delete_share_group_offsets(broker, group: str, topics: list[str]
                               ) -> tuple[int, dict[str, int]]:
    """DeleteShareGroupOffsets v0 -> (request error code, {topic: error code})."""
    resp = _send(broker, API_DELETE_SHARE_GROUP_OFFSETS,
                 delete_share_group_offsets_body(group, topics))
    (err,) = struct.unpack_from(">h", resp, 4)
    pos = 6
    _msg, pos = _read_compact_str(resp, pos)
    out = {}
    n, pos = _read_uvarint(resp, pos)
    for _ in range(max(n - 1, 0)):
        name, pos = _read_compact_str(resp, pos)
        pos += 16  # topic id
        (terr,) = struct.unpack_from(">h", resp, pos)
        pos += 2
        _msg, pos = _read_compact_str(resp, pos)
        pos = _skip_tags(resp, pos)
        out[name] = terr
    return err, out
