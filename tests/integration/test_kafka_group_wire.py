"""Kafka's classic group protocol at the wire level, with hand-encoded requests (issue 8):
KIP-394 member ids, the initial rebalance delay, SyncGroup, Heartbeat, LeaveGroup;
OffsetCommit from a stale generation or an unknown member refused; a standalone commit
(generation −1, no member id) to an unknown group accepted and readable; a JoinGroup
over the metadata limit, or with a session timeout out of bounds, refused cleanly; a
truncated JoinGroup closes only its own connection; ApiVersions lists the group APIs
only when the coordinator plugin serves them; KIP-848: OffsetCommit v9 from a stale
member epoch refused (ConsumerGroupHeartbeat and OffsetCommit in flexible versions).

The broker runs with max_join_metadata_bytes = 1000, min_session_timeout_ms = 1000 and
initial_rebalance_delay_ms = 300 (kafka_groups_testlib.CONFIG)."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import pytest

from drover_testlib import (API_API_VERSIONS, RawConn, api_versions, assert_healthy,
                            ck_create_topic, frame, kstr, parse_api_versions_v0,
                            request_header, unique_topic, uvarint)
from kafka_groups_testlib import start_group_broker

API_OFFSET_COMMIT, API_OFFSET_FETCH, API_JOIN_GROUP, API_HEARTBEAT = 8, 9, 11, 12
API_LEAVE_GROUP, API_SYNC_GROUP, API_DESCRIBE_GROUPS, API_LIST_GROUPS = 13, 14, 15, 16
API_DELETE_GROUPS, API_OFFSET_DELETE = 42, 47

NONE = 0
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
INVALID_REQUEST = 42
MEMBER_ID_REQUIRED = 79

METADATA_LIMIT = 1000
SESSION_TIMEOUT_MS = 3000
INITIAL_DELAY_S = 0.3


@pytest.fixture
def wire_broker(broker_factory):
    return start_group_broker(broker_factory, extra=f"max_join_metadata_bytes = {METADATA_LIMIT}\n")


# ---------------------------------------------------------------------------------
# Encoding and decoding (non-flexible versions: JoinGroup v5, SyncGroup v3,
# Heartbeat v3, LeaveGroup v3, OffsetCommit v7, OffsetFetch v5)
# ---------------------------------------------------------------------------------
def kbytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


class Reader:
    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 0

    def _take(self, fmt: str):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def str(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def array(self, item) -> list:
        return [item() for _ in range(self.i32())]

    def done(self) -> None:
        assert self.pos == len(self.buf), f"{len(self.buf) - self.pos} bytes left over in the response"


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(kstr(t) for t in topics) + kbytes(None)


def assignment(parts: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += kstr(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + kbytes(None)


def join_group_v5(group: str, member_id: str, protocols: list[tuple[str, bytes]], *,
                  session_timeout_ms: int = SESSION_TIMEOUT_MS,
                  rebalance_timeout_ms: int = 10000, instance_id: str | None = None,
                  protocol_type: str = "consumer") -> bytes:
    body = (kstr(group) + struct.pack(">ii", session_timeout_ms, rebalance_timeout_ms)
            + kstr(member_id) + kstr(instance_id) + kstr(protocol_type)
            + struct.pack(">i", len(protocols)))
    for name, meta in protocols:
        body += kstr(name) + kbytes(meta)
    return body


@dataclass
class JoinResponse:
    error: int
    generation: int
    protocol_name: str | None
    leader: str | None
    member_id: str | None
    members: list[tuple[str, str | None, bytes]]


def parse_join_group_v5(body: bytes) -> JoinResponse:
    r = Reader(body)
    r.i32()  # throttle
    out = JoinResponse(r.i16(), r.i32(), r.str(), r.str(), r.str(),
                       r.array(lambda: (r.str(), r.str(), r.bytes())))
    r.done()
    return out


def sync_group_v3(group: str, generation: int, member_id: str,
                  assignments: list[tuple[str, bytes]]) -> bytes:
    body = kstr(group) + struct.pack(">i", generation) + kstr(member_id) + kstr(None)
    body += struct.pack(">i", len(assignments))
    for m, a in assignments:
        body += kstr(m) + kbytes(a)
    return body


def parse_sync_group_v3(body: bytes) -> tuple[int, bytes | None]:
    r = Reader(body)
    r.i32()
    out = (r.i16(), r.bytes())
    r.done()
    return out


def heartbeat_v3(group: str, generation: int, member_id: str) -> bytes:
    return kstr(group) + struct.pack(">i", generation) + kstr(member_id) + kstr(None)


def parse_error_after_throttle(body: bytes) -> int:
    r = Reader(body)
    r.i32()
    err = r.i16()
    r.done()
    return err


def leave_group_v3(group: str, members: list[str]) -> bytes:
    return (kstr(group) + struct.pack(">i", len(members))
            + b"".join(kstr(m) + kstr(None) for m in members))


def parse_leave_group_v3(body: bytes) -> tuple[int, list[tuple[str, str | None, int]]]:
    r = Reader(body)
    r.i32()
    out = (r.i16(), r.array(lambda: (r.str(), r.str(), r.i16())))
    r.done()
    return out


def offset_commit_v7(group: str, generation: int, member_id: str,
                     offsets: dict[tuple[str, int], tuple[int, str | None]]) -> bytes:
    by_topic: dict[str, list[tuple[int, int, str | None]]] = {}
    for (t, p), (o, meta) in offsets.items():
        by_topic.setdefault(t, []).append((p, o, meta))
    body = kstr(group) + struct.pack(">i", generation) + kstr(member_id) + kstr(None)
    body += struct.pack(">i", len(by_topic))
    for t, parts in by_topic.items():
        body += kstr(t) + struct.pack(">i", len(parts))
        for p, o, meta in parts:
            body += struct.pack(">iqi", p, o, -1) + kstr(meta)
    return body


def parse_offset_commit_v7(body: bytes) -> dict[tuple[str, int], int]:
    r = Reader(body)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        t = r.str()
        for _ in range(r.i32()):
            p = r.i32()
            out[(t, p)] = r.i16()
    r.done()
    return out


def offset_fetch_v5(group: str, topics: dict[str, list[int]] | None) -> bytes:
    body = kstr(group)
    if topics is None:
        return body + struct.pack(">i", -1)
    body += struct.pack(">i", len(topics))
    for t, ps in topics.items():
        body += kstr(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return body


def parse_offset_fetch_v5(body: bytes) -> tuple[int, dict[tuple[str, int], tuple[int, str | None, int]]]:
    """-> (group error, {(topic, partition): (offset, metadata, error)})"""
    r = Reader(body)
    r.i32()
    parts = {}
    for _ in range(r.i32()):
        t = r.str()
        for _ in range(r.i32()):
            p, o, _epoch, meta, err = r.i32(), r.i64(), r.i32(), r.str(), r.i16()
            parts[(t, p)] = (o, meta, err)
    err = r.i16()
    r.done()
    return err, parts


def call(c: RawConn, api: int, version: int, body: bytes) -> bytes:
    corr = c.request(api, version, body)
    return c.recv_response(corr)


def join(c: RawConn, *args, **kw) -> JoinResponse:
    return parse_join_group_v5(call(c, API_JOIN_GROUP, 5, join_group_v5(*args, **kw)))


def heartbeat(c: RawConn, group: str, generation: int, member_id: str) -> int:
    return parse_error_after_throttle(call(c, API_HEARTBEAT, 3,
                                           heartbeat_v3(group, generation, member_id)))


def commit(c: RawConn, *args) -> dict[tuple[str, int], int]:
    return parse_offset_commit_v7(call(c, API_OFFSET_COMMIT, 7, offset_commit_v7(*args)))


def fetch(c: RawConn, group: str, topics) -> tuple[int, dict]:
    return parse_offset_fetch_v5(call(c, API_OFFSET_FETCH, 5, offset_fetch_v5(group, topics)))


def apis_on(c: RawConn) -> dict[int, tuple[int, int]]:
    err, apis = parse_api_versions_v0(call(c, API_API_VERSIONS, 0, b""))
    assert err == NONE, err
    return apis


def joined_member(c: RawConn, group: str, topic: str) -> tuple[str, int]:
    """A member of `group` through the KIP-394 dance, synced; -> (member id, generation)."""
    meta = subscription([topic])
    first = join(c, group, "", [("range", meta)])
    assert first.error == MEMBER_ID_REQUIRED, first
    second = join(c, group, first.member_id, [("range", meta)])
    assert second.error == NONE, second
    err, _ = parse_sync_group_v3(call(c, API_SYNC_GROUP, 3, sync_group_v3(
        group, second.generation, second.member_id,
        [(second.member_id, assignment({topic: [0, 1]}))])))
    assert err == NONE, err
    return second.member_id, second.generation


# ---------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------
def test_join_sync_heartbeat_commit_leave(wire_broker):
    b = wire_broker
    topic = unique_topic("wire")
    ck_create_topic(b, topic, 2)
    group = f"g-{topic}"
    meta = subscription([topic])
    with RawConn(b) as c:
        # KIP-394: JoinGroup v4+ without a member id gets one, with MEMBER_ID_REQUIRED.
        first = join(c, group, "", [("range", meta), ("roundrobin", meta)])
        assert first.error == MEMBER_ID_REQUIRED, first
        assert first.member_id, first
        assert first.generation == -1, first
        assert first.members == [], first

        # Joining with it: after the initial rebalance delay, leader of generation 1.
        t0 = time.monotonic()
        r = join(c, group, first.member_id, [("range", meta), ("roundrobin", meta)])
        took = time.monotonic() - t0
        assert r.error == NONE, r
        assert (r.generation, r.protocol_name, r.leader, r.member_id) == \
            (1, "range", first.member_id, first.member_id), r
        assert r.members == [(first.member_id, None, meta)], r
        assert took >= INITIAL_DELAY_S - 0.05, f"JoinGroup answered after {took:.3f} s"
        member, gen = r.member_id, r.generation

        # SyncGroup: the leader's assignment comes back to it.
        mine = assignment({topic: [0, 1]})
        err, got = parse_sync_group_v3(call(c, API_SYNC_GROUP, 3, sync_group_v3(
            group, gen, member, [(member, mine)])))
        assert (err, got) == (NONE, mine)

        assert heartbeat(c, group, gen, member) == NONE
        assert heartbeat(c, group, gen + 1, member) == ILLEGAL_GENERATION
        assert heartbeat(c, group, gen, "nobody") == UNKNOWN_MEMBER_ID

        # OffsetCommit v7: the member in its generation is accepted ...
        assert commit(c, group, gen, member, {(topic, 0): (5, "m"), (topic, 1): (7, None)}) == \
            {(topic, 0): NONE, (topic, 1): NONE}
        # ... a stale generation is not ...
        assert commit(c, group, gen - 1, member, {(topic, 0): (99, None)}) == \
            {(topic, 0): ILLEGAL_GENERATION}
        assert commit(c, group, gen + 1, member, {(topic, 0): (99, None)}) == \
            {(topic, 0): ILLEGAL_GENERATION}
        # ... nor an unknown member, nor a standalone commit while the group has members.
        assert commit(c, group, gen, "nobody", {(topic, 0): (99, None)}) == \
            {(topic, 0): UNKNOWN_MEMBER_ID}
        assert commit(c, group, -1, "", {(topic, 0): (99, None)}) == \
            {(topic, 0): UNKNOWN_MEMBER_ID}
        err, offs = fetch(c, group, {topic: [0, 1]})
        assert err == NONE
        assert offs == {(topic, 0): (5, "m", NONE), (topic, 1): (7, None, NONE)} or \
            offs == {(topic, 0): (5, "m", NONE), (topic, 1): (7, "", NONE)}, offs

        # LeaveGroup v3 (batch): the member leaves; then it is unknown.
        err, members = parse_leave_group_v3(call(c, API_LEAVE_GROUP, 3,
                                                 leave_group_v3(group, [member])))
        assert (err, members) == (NONE, [(member, None, NONE)])
        assert heartbeat(c, group, gen, member) == UNKNOWN_MEMBER_ID
        # The group is empty now: a standalone commit is accepted.
        assert commit(c, group, -1, "", {(topic, 0): (6, None)}) == {(topic, 0): NONE}
        assert fetch(c, group, {topic: [0]})[1][(topic, 0)][0] == 6


def test_standalone_commit_to_an_unknown_group(wire_broker):
    b = wire_broker
    topic = unique_topic("wire-simple")
    ck_create_topic(b, topic, 3)
    group = unique_topic("g-simple")
    with RawConn(b) as c:
        assert fetch(c, group, {topic: [0]})[1] == {(topic, 0): (-1, "", NONE)} or \
            fetch(c, group, {topic: [0]})[1] == {(topic, 0): (-1, None, NONE)}
        assert commit(c, group, -1, "", {(topic, 0): (11, "meta"), (topic, 2): (0, None)}) == \
            {(topic, 0): NONE, (topic, 2): NONE}
        err, offs = fetch(c, group, {topic: [0, 1, 2]})
        assert err == NONE
        assert {k: (o, e) for k, (o, _m, e) in offs.items()} == \
            {(topic, 0): (11, NONE), (topic, 1): (-1, NONE), (topic, 2): (0, NONE)}, offs
        assert offs[(topic, 0)][1] == "meta"
        # Every committed partition of the group (topics = null).
        err, offs = fetch(c, group, None)
        assert err == NONE
        assert {k: o for k, (o, _m, _e) in offs.items()} == {(topic, 0): 11, (topic, 2): 0}
        # A generation ≥ 0 for a group that does not exist is refused (v7: Kafka's
        # ILLEGAL_GENERATION; GROUP_ID_NOT_FOUND from v9).
        other = unique_topic("g-none")
        assert commit(c, other, 1, "m", {(topic, 0): (1, None)}) == \
            {(topic, 0): ILLEGAL_GENERATION}
        assert fetch(c, other, {topic: [0]})[1][(topic, 0)][0] == -1


def test_join_over_the_metadata_limit_is_refused_cleanly(wire_broker):
    b = wire_broker
    topic = unique_topic("wire-big")
    ck_create_topic(b, topic, 2)
    group = f"g-{topic}"
    with RawConn(b) as c:
        member, gen = joined_member(c, group, topic)

        # Protocol name + metadata over the limit: INVALID_REQUEST, nothing else changes.
        big = b"\x00" * (METADATA_LIMIT - len("range") + 1)
        r = join(c, group, member, [("range", big)])
        assert r.error == INVALID_REQUEST, r
        # The connection still serves requests, and the member is still in its generation.
        assert API_JOIN_GROUP in apis_on(c)
        assert heartbeat(c, group, gen, member) == NONE
        # Also for a new member (empty id).
        r = join(c, group, "", [("range", big)])
        assert r.error == INVALID_REQUEST, r
        assert heartbeat(c, group, gen, member) == NONE
        # Several protocols count together.
        half = b"\x00" * (METADATA_LIMIT // 2)
        r = join(c, unique_topic("g-other"), "", [("range", half), ("roundrobin", half)])
        assert r.error == INVALID_REQUEST, r
        # Exactly at the limit: accepted (a new member gets its id).
        at = b"\x00" * (METADATA_LIMIT - len("range"))
        r = join(c, unique_topic("g-other"), "", [("range", at)])
        assert r.error == MEMBER_ID_REQUIRED, r
        assert heartbeat(c, group, gen, member) == NONE


def test_join_with_a_session_timeout_out_of_bounds(wire_broker):
    b = wire_broker
    group = unique_topic("g-timeout")
    meta = subscription(["t"])
    with RawConn(b) as c:
        for timeout in (999, 0, -1, 1_800_001):
            r = join(c, group, "", [("range", meta)], session_timeout_ms=timeout)
            assert r.error == INVALID_SESSION_TIMEOUT, (timeout, r)
        r = join(c, group, "", [("range", meta)], session_timeout_ms=1000)
        assert r.error == MEMBER_ID_REQUIRED, r


def test_truncated_join_closes_only_its_connection(wire_broker):
    b = wire_broker
    group = unique_topic("g-trunc")
    meta = subscription(["t"])
    with RawConn(b) as bystander:
        assert API_JOIN_GROUP in apis_on(bystander)
        good = join_group_v5(group, "", [("range", meta)])
        cases = {
            "cut in the protocols": good[:-10],
            "cut in the group id": kstr(group)[:4],
            "protocol count larger than the frame": good[:-(len(meta) + 4 + 2 + 5 + 4)]
            + struct.pack(">i", 1000),
            "negative protocol count": good[:-(len(meta) + 4 + 2 + 5 + 4)]
            + struct.pack(">i", -5),
        }
        for case, body in cases.items():
            with RawConn(b) as c:
                c.send_raw(frame(request_header(API_JOIN_GROUP, 5, 1) + body))
                got = c.wait_closed(timeout=10)
                assert got == b"", f"{case}: answered {got!r} before closing"
            # The broker goes on serving others, including the connection opened before.
            assert API_JOIN_GROUP in apis_on(bystander), case
            with RawConn(b) as c:
                r = join(c, group, "", [("range", meta)])
                assert r.error == MEMBER_ID_REQUIRED, (case, r)
    b.assert_alive()
    assert_healthy(b)


GROUP_APIS = {
    API_OFFSET_COMMIT: "OffsetCommit", API_OFFSET_FETCH: "OffsetFetch",
    API_JOIN_GROUP: "JoinGroup", API_HEARTBEAT: "Heartbeat", API_LEAVE_GROUP: "LeaveGroup",
    API_SYNC_GROUP: "SyncGroup", API_DESCRIBE_GROUPS: "DescribeGroups",
    API_LIST_GROUPS: "ListGroups", API_DELETE_GROUPS: "DeleteGroups",
    API_OFFSET_DELETE: "OffsetDelete",
}


def test_api_versions_with_the_coordinator(wire_broker):
    apis = api_versions(wire_broker)
    missing = [name for k, name in GROUP_APIS.items() if k not in apis]
    assert not missing, f"ApiVersions lacks {missing}: {sorted(apis.items())}"
    assert apis[API_JOIN_GROUP] == (0, 9)
    assert apis[API_OFFSET_COMMIT][1] == 9 and apis[API_OFFSET_COMMIT][0] <= 2
    assert apis[API_OFFSET_FETCH][1] == 9 and apis[API_OFFSET_FETCH][0] <= 1
    # Kafka 4.1's ranges for the rest.
    assert apis[API_SYNC_GROUP] == (0, 5)
    assert apis[API_HEARTBEAT] == (0, 4)
    assert apis[API_LEAVE_GROUP] == (0, 5)
    assert apis[API_DESCRIBE_GROUPS] == (0, 6)
    assert apis[API_LIST_GROUPS] == (0, 5)
    assert apis[API_DELETE_GROUPS] == (0, 2)
    assert apis[API_OFFSET_DELETE] == (0, 0)


def test_api_versions_without_the_coordinator(broker):
    apis = api_versions(broker)
    listed = [name for k, name in GROUP_APIS.items() if k in apis]
    assert not listed, f"a broker without the coordinator advertises {listed}"


# ---------------------------------------------------------------------------------
# KIP-848 at the wire level (flexible versions: compact strings and arrays, tagged
# fields): ConsumerGroupHeartbeat v0, OffsetCommit v9 with member epochs
# ---------------------------------------------------------------------------------
API_CONSUMER_GROUP_HEARTBEAT = 68
STALE_MEMBER_EPOCH = 113


def cstr(s: str | None) -> bytes:
    """COMPACT_NULLABLE_STRING."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items: list[bytes] | None) -> bytes:
    """COMPACT_NULLABLE_ARRAY of encoded items."""
    if items is None:
        return b"\x00"
    return uvarint(len(items) + 1) + b"".join(items)


class CReader(Reader):
    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def cstr(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        s = self.buf[self.pos:self.pos + n - 1].decode()
        self.pos += n - 1
        return s


def consumer_heartbeat(c: RawConn, group: str, member_id: str, epoch: int,
                       topics: list[str] | None) -> tuple[int, str, int]:
    """ConsumerGroupHeartbeat v0: (error code, member id, member epoch)."""
    body = (cstr(group) + cstr(member_id) + struct.pack(">i", epoch)
            + cstr(None) + cstr(None)                  # instance id, rack id
            + struct.pack(">i", 10000 if epoch == 0 else -1)
            + carray(None if topics is None else [cstr(t) for t in topics])
            + cstr(None)                               # server assignor
            + carray(None if epoch != 0 else [])       # owned partitions
            + b"\x00")
    corr = c.request(API_CONSUMER_GROUP_HEARTBEAT, 0, body, flexible_header=True)
    r = CReader(c.recv_response(corr, flexible_header=True))
    r.i32()  # throttle
    error = r.i16()
    r.cstr()  # error message
    member = r.cstr() or ""
    return error, member, r.i32()


def commit_v9(c: RawConn, group: str, member_id: str, epoch: int, topic: str,
              offset: int) -> int:
    """OffsetCommit v9 of partition 0: its error code."""
    partition = struct.pack(">iqi", 0, offset, -1) + cstr("") + b"\x00"
    body = (cstr(group) + struct.pack(">i", epoch) + cstr(member_id) + cstr(None)
            + carray([cstr(topic) + carray([partition]) + b"\x00"]) + b"\x00")
    corr = c.request(API_OFFSET_COMMIT, 9, body, flexible_header=True)
    r = CReader(c.recv_response(corr, flexible_header=True))
    r.i32()  # throttle
    assert r.uvarint() == 2, "one topic"
    assert r.cstr() == topic
    assert r.uvarint() == 2, "one partition"
    assert r.i32() == 0
    return r.i16()


def test_kip848_commit_from_a_stale_member_epoch_is_refused(wire_broker):
    topic = unique_topic("kip848-wire")
    ck_create_topic(wire_broker, topic, 2)
    group = f"g-{topic}"
    with RawConn(wire_broker) as c:
        error, member, epoch = consumer_heartbeat(c, group, "", 0, [topic])
        assert (error, bool(member)) == (NONE, True), (error, member)
        assert epoch >= 1, epoch
        # The member's own epoch commits; any other is STALE_MEMBER_EPOCH.
        assert commit_v9(c, group, member, epoch, topic, 5) == NONE
        assert commit_v9(c, group, member, epoch - 1, topic, 6) == STALE_MEMBER_EPOCH
        assert commit_v9(c, group, member, epoch + 1, topic, 6) == STALE_MEMBER_EPOCH
        assert commit_v9(c, group, "not-a-member", epoch, topic, 6) == UNKNOWN_MEMBER_ID
        # Leaving (epoch −1): the group is empty, a standalone commit is accepted again.
        error, _, left = consumer_heartbeat(c, group, member, -1, None)
        assert (error, left) == (NONE, -1), (error, left)
        assert commit_v9(c, group, "", -1, topic, 7) == NONE
