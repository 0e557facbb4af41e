"""TxnOffsetCommit (API 28) reaches the coordinator plugin and is answered (issue 18,
item 3), with hand-encoded frames (v2: non-flexible).

The coordinator (coordinator ABI 3.4) validates the request — a partition the broker
does not have is refused UNKNOWN_TOPIC_OR_PARTITION, which only the coordinator
answers — and asks the broker to record the accepted offsets with the transaction.
The producer id here has no open transaction that added the group, so the broker's
transaction coordinator refuses the recording with INVALID_TXN_STATE
(docs/operations.md) and nothing is committed; test_transactions_groups.py stages and
commits offsets through a real transaction.
Before the change the broker did not serve API 28 at all (the connection closed)."""

from __future__ import annotations

import struct

from drover_testlib import RawConn, api_versions, assert_healthy, ck_create_topic, kstr, unique_topic
from test_kafka_group_wire import Reader, fetch, wire_broker  # noqa: F401 (fixture)

API_TXN_OFFSET_COMMIT = 28
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TXN_STATE = 48


def txn_offset_commit_v2(txn_id: str, group: str, producer_id: int, epoch: int,
                         offsets: dict[tuple[str, int], int]) -> bytes:
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append((p, o))
    body = kstr(txn_id) + kstr(group) + struct.pack(">qh", producer_id, epoch)
    body += struct.pack(">i", len(by_topic))
    for t, parts in by_topic.items():
        body += kstr(t) + struct.pack(">i", len(parts))
        for p, o in parts:
            body += struct.pack(">iqi", p, o, -1) + kstr("meta")
    return body


def parse_txn_offset_commit_v2(body: bytes) -> dict[tuple[str, int], int]:
    r = Reader(body)
    r.i32()  # throttle time
    out = {}
    for _ in range(r.i32()):
        t = r.str()
        for _ in range(r.i32()):
            p = r.i32()
            out[(t, p)] = r.i16()
    r.done()
    return out


def test_txn_offset_commit_reaches_the_coordinator_and_is_answered(wire_broker):
    topic = unique_topic("txn-offsets")
    ck_create_topic(wire_broker, topic, 2)
    apis = api_versions(wire_broker)
    assert apis.get(API_TXN_OFFSET_COMMIT) == (0, 5), "Kafka 4.1's TxnOffsetCommit range"
    with RawConn(wire_broker) as c:
        corr = c.request(API_TXN_OFFSET_COMMIT, 2, txn_offset_commit_v2(
            "tx-1", "txn-group", 1000, 0, {(topic, 0): 7, (topic, 1): 8, ("no-such-topic", 0): 5}))
        answer = parse_txn_offset_commit_v2(c.recv_response(corr))
        assert answer == {
            (topic, 0): INVALID_TXN_STATE,
            (topic, 1): INVALID_TXN_STATE,
            ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }, answer
        # Nothing was committed, and the connection still serves the group APIs.
        err, parts = fetch(c, "txn-group", {topic: [0, 1]})
        assert err == 0
        assert parts[(topic, 0)][0] == -1 and parts[(topic, 1)][0] == -1, parts
    assert_healthy(wire_broker)
