"""Transactional offset commits through the transaction coordinator (issue 18, items
1 and 3 together), raw frames: TxnOffsetCommit (v3, with KIP-447's generation and
member id) is validated by the group coordinator, then recorded with the producer's
transaction by the transaction coordinator, and becomes the group's committed offset
only when the transaction commits.

- A member of an old generation is refused (ILLEGAL_GENERATION) and nothing is staged.
- Offsets for a group the transaction did not add (no AddOffsetsToTxn) are refused
  (INVALID_TXN_STATE).
- Staged offsets are invisible until EndTxn(commit) completes, then committed; an
  aborted transaction's offsets are dropped.
"""

from __future__ import annotations

import struct
import time

from drover_testlib import RawConn, ck_create_topic, unique_topic, uvarint
from test_kafka_group_wire import fetch, joined_member, wire_broker  # noqa: F401 (fixture)
from test_transactions_raw import add_offsets, cstr, end_txn, init_pid, read_cstr, read_uvarint

API_TXN_OFFSET_COMMIT = 28
NONE = 0
ILLEGAL_GENERATION = 22
INVALID_TXN_STATE = 48


def txn_offset_commit_v3(c: RawConn, tid: str, group: str, pid: int, epoch: int, generation: int,
                         member: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append((p, o))
    body = cstr(tid) + cstr(group) + struct.pack(">qhi", pid, epoch, generation) + cstr(member)
    body += b"\x00"  # group_instance_id: null
    body += uvarint(len(by_topic) + 1)
    for t, parts in by_topic.items():
        body += cstr(t) + uvarint(len(parts) + 1)
        for p, o in parts:
            body += struct.pack(">iqi", p, o, -1) + b"\x00" + b"\x00"  # null metadata, tags
        body += b"\x00"
    body += b"\x00"
    data = c.recv_response(c.request(API_TXN_OFFSET_COMMIT, 3, body, flexible_header=True),
                           flexible_header=True)
    at = 4
    n, at = read_uvarint(data, at)
    out = {}
    for _ in range(n - 1):
        t, at = read_cstr(data, at)
        m, at = read_uvarint(data, at)
        for _ in range(m - 1):
            p, err = struct.unpack_from(">ih", data, at)
            at += 7
            out[(t, p)] = err
        at += 1
    return out


def committed(c: RawConn, group: str, topic: str) -> dict[int, int]:
    err, parts = fetch(c, group, {topic: [0, 1]})
    assert err == 0
    return {p: parts[(topic, p)][0] for p in (0, 1)}


def wait_for(pred, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_txn_offsets_are_fenced_staged_and_committed_with_the_transaction(wire_broker):
    b = wire_broker
    topic = unique_topic("txn-offsets")
    group = unique_topic("txn-group")
    ck_create_topic(b, topic, 2)
    with RawConn(b) as member_conn, RawConn(b) as c:
        member, generation = joined_member(member_conn, group, topic)
        _, pid, epoch = init_pid(c, "tx-offsets")
        # The group was not added to a transaction: refused, nothing staged.
        got = txn_offset_commit_v3(c, "tx-offsets", group, pid, epoch, generation, member, {(topic, 0): 5})
        assert got == {(topic, 0): INVALID_TXN_STATE}
        assert add_offsets(c, "tx-offsets", pid, epoch, group) == NONE
        # A member of an old generation (KIP-447's zombie): refused by the group.
        got = txn_offset_commit_v3(c, "tx-offsets", group, pid, epoch, generation - 1, member, {(topic, 0): 5})
        assert got == {(topic, 0): ILLEGAL_GENERATION}
        got = txn_offset_commit_v3(c, "tx-offsets", group, pid, epoch, generation, member,
                                   {(topic, 0): 5, (topic, 1): 6})
        assert got == {(topic, 0): NONE, (topic, 1): NONE}
        # Pending until the transaction commits.
        assert committed(c, group, topic) == {0: -1, 1: -1}
        assert end_txn(c, "tx-offsets", pid, epoch, True) == NONE
        wait_for(lambda: committed(c, group, topic) == {0: 5, 1: 6}, "the commit")
        # An aborted transaction's offsets are dropped.
        assert add_offsets(c, "tx-offsets", pid, epoch, group) == NONE
        got = txn_offset_commit_v3(c, "tx-offsets", group, pid, epoch, generation, member, {(topic, 0): 9})
        assert got == {(topic, 0): NONE}
        assert end_txn(c, "tx-offsets", pid, epoch, False) == NONE
        from test_transactions_raw import describe_txn
        wait_for(lambda: describe_txn(c, "tx-offsets")[1] == "CompleteAbort", "the abort")
        assert committed(c, group, topic) == {0: 5, 1: 6}
