"""FindCoordinator for a group (docs/protocol.md section 4): a broker that runs the
coordinator plugin names itself; a broker that runs none answers
COORDINATOR_NOT_AVAILABLE with node -1, host "" and port -1, at top level in v0-v3 and
per key from v4 on. Transaction keys (key type 1) are served by the broker itself,
standalone, whether or not a group coordinator runs (test_transactions_raw.py covers
them further). Raw requests, every layout."""

from __future__ import annotations

import struct

import pytest

from conftest import start_or_fail
from drover_testlib import API_FIND_COORDINATOR, RawConn, kstr, uvarint
from test_native_group import CONFIG, install_plugins

NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
GROUP, TRANSACTION = 0, 1
NOT_SERVED = (COORDINATOR_NOT_AVAILABLE, -1, "", -1)


class Body:
    """A response body reader for classic and compact (flexible) fields."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _unpack(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def uvarint(self) -> int:
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def no_tagged_fields(self) -> None:
        assert self.uvarint() == 0, "unexpected tagged fields"

    def end(self) -> None:
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} bytes left over"


def compact_str(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def find_v0(c: RawConn, key: str) -> tuple[int, int, str, int]:
    """-> (error_code, node_id, host, port)"""
    r = Body(c.recv_response(c.request(API_FIND_COORDINATOR, 0, kstr(key))))
    out = (r.int16(), r.int32(), r.string(), r.int32())
    r.end()
    return out


def find_v1(c: RawConn, key: str, key_type: int) -> tuple[int, int, str, int]:
    body = kstr(key) + struct.pack(">b", key_type)
    r = Body(c.recv_response(c.request(API_FIND_COORDINATOR, 1, body)))
    r.int32()  # throttle_time_ms
    err = r.int16()
    r.string()  # error_message
    out = (err, r.int32(), r.string(), r.int32())
    r.end()
    return out


def find_v3(c: RawConn, key: str, key_type: int) -> tuple[int, int, str, int]:
    body = compact_str(key) + struct.pack(">b", key_type) + b"\x00"
    corr = c.request(API_FIND_COORDINATOR, 3, body, flexible_header=True)
    r = Body(c.recv_response(corr, flexible_header=True))
    r.int32()  # throttle_time_ms
    err = r.int16()
    r.compact_string()  # error_message
    out = (err, r.int32(), r.compact_string(), r.int32())
    r.no_tagged_fields()
    r.end()
    return out


def find_v4(c: RawConn, keys: list[str], key_type: int) -> list[tuple[str, int, int, str, int]]:
    """-> per key: (key, error_code, node_id, host, port)"""
    body = struct.pack(">b", key_type) + uvarint(len(keys) + 1)
    body += b"".join(compact_str(k) for k in keys) + b"\x00"
    corr = c.request(API_FIND_COORDINATOR, 4, body, flexible_header=True)
    r = Body(c.recv_response(corr, flexible_header=True))
    r.int32()  # throttle_time_ms
    out = []
    for _ in range(r.uvarint() - 1):
        key, node, host, port = r.compact_string(), r.int32(), r.compact_string(), r.int32()
        err = r.int16()
        r.compact_string()  # error_message
        r.no_tagged_fields()
        out.append((key, err, node, host, port))
    r.no_tagged_fields()
    r.end()
    return out


@pytest.fixture
def coordinator_broker(broker_factory):
    """A broker with the coordinator plugin (and what it needs) loaded."""
    b = broker_factory(CONFIG, start=False)
    install_plugins(b)
    return start_or_fail(b)


def test_without_a_coordinator_groups_are_not_served(broker):
    """The default broker's plugin directory is empty: no coordinator runs."""
    with RawConn(broker) as c:
        assert find_v0(c, "billing") == NOT_SERVED
        assert find_v1(c, "billing", GROUP) == NOT_SERVED
        assert find_v3(c, "billing", GROUP) == NOT_SERVED
        assert find_v4(c, ["billing", "audit"], GROUP) == [
            ("billing", *NOT_SERVED), ("audit", *NOT_SERVED)]
        # Transactions are served by the transaction coordinator, not the group one.
        err, node, host, port = find_v1(c, "tx", TRANSACTION)
        assert (err, host, port) == (NONE, broker.host, broker.port)
        assert find_v4(c, ["tx"], TRANSACTION) == [("tx", NONE, node, broker.host, broker.port)]
        # The error is an answer: the connection stays usable.
        assert find_v0(c, "billing") == NOT_SERVED
    broker.assert_alive()


def test_with_the_coordinator_the_broker_names_itself(coordinator_broker):
    b = coordinator_broker
    me = (NONE, b.host, b.port)
    with RawConn(b) as c:
        err, node, host, port = find_v0(c, "billing")
        assert (err, host, port) == me
        assert node >= 0
        assert find_v1(c, "billing", GROUP) == (NONE, node, b.host, b.port)
        assert find_v3(c, "billing", GROUP) == (NONE, node, b.host, b.port)
        assert find_v4(c, ["billing", "audit"], GROUP) == [
            ("billing", NONE, node, b.host, b.port), ("audit", NONE, node, b.host, b.port)]
        # Transaction keys: this broker too.
        assert find_v1(c, "tx", TRANSACTION) == (NONE, node, b.host, b.port)
        assert find_v4(c, ["tx"], TRANSACTION) == [("tx", NONE, node, b.host, b.port)]
    b.assert_alive()
