"""A hostile client against the share-session cache (KIP-932 share sessions; the bound
`share.max_sessions_per_client`, docs/operations.md "`[share]`").

A raw client on the same address as a real consumer (loopback: every test client shares
127.0.0.1, as clients behind one NAT do) opens share sessions in a loop, each under a
new member id, as fast as the broker answers. Once its address holds
`max_sessions_per_client` sessions, every further one is answered
SHARE_SESSION_LIMIT_REACHED: a session in use is never pushed out. The confluent-kafka
ShareConsumer fetching beside it keeps its session, so none of its acquired records is
released and delivered again (before the fix the flood evicted the address's least
recently used sessions, the consumer's among them: its records went back and came again
with delivery count 2).
"""

from __future__ import annotations

import struct
import threading
import time

from drover_testlib import RawConn, ck_create_topic, unique_topic
from kafka_groups_testlib import _compact_str, start_group_broker
from share_groups_testlib import SHARE, member_uuid, produce_values, share_consumer, share_group

API_SHARE_FETCH = 78
SHARE_SESSION_LIMIT_REACHED = 133
PER_CLIENT = 20
FLOOD = 300


def open_session(conn: RawConn, group: str, member: str) -> int:
    """A raw ShareFetch v1 at epoch 0 with no partitions (a new session) -> its
    top-level error code."""
    body = _compact_str(group) + _compact_str(member)
    # epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size
    body += struct.pack(">iiiiii", 0, 0, 1, 1 << 20, 10, 10)
    body += b"\x01" + b"\x01" + b"\x00"  # no topics, no forgotten topics, no tags
    corr = conn.request(API_SHARE_FETCH, 1, body, flexible_header=True)
    resp = conn.recv_response(corr, flexible_header=True)
    (err,) = struct.unpack_from(">h", resp, 4)
    return err


def test_a_client_opening_share_sessions_in_a_loop_does_not_push_out_a_consumers(
        broker_factory):
    b = start_group_broker(broker_factory, extra=f"[share]\nmax_sessions_per_client = {PER_CLIENT}\n",
                           **SHARE)
    topic = unique_topic("share-flood")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-flood")
    deliveries: list[tuple[bytes, int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def consume():
        try:
            c = share_consumer(b, group, topic)
            try:
                while not stop.is_set():
                    for m in c.poll(0.5):
                        if m.error() is None:
                            deliveries.append((m.value(), m.delivery_count()))
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    first = [f"before-{i}".encode() for i in range(100)]
    produce_values(b, topic, first)
    deadline = time.monotonic() + 60
    while len(deliveries) < len(first) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(deliveries) >= len(first), (len(deliveries), errors)

    # The flood, while records keep arriving for the consumer.
    answers: dict[int, int] = {}
    with RawConn(b) as raw:
        for i in range(FLOOD):
            err = open_session(raw, group, member_uuid())
            answers[err] = answers.get(err, 0) + 1
            if i % 30 == 0:
                produce_values(b, topic, [f"during-{i}-{k}".encode() for k in range(10)])
    # The consumer's session counts against its address too, so the flood gets at
    # most PER_CLIENT - 1 sessions; every other attempt is refused.
    assert set(answers) <= {0, SHARE_SESSION_LIMIT_REACHED}, answers
    assert answers.get(0, 0) <= PER_CLIENT - 1, answers
    assert answers.get(SHARE_SESSION_LIMIT_REACHED, 0) >= FLOOD - PER_CLIENT + 1, answers

    last = [f"after-{i}".encode() for i in range(100)]
    produce_values(b, topic, last)
    total = len(first) + len(last) + 10 * len(range(0, FLOOD, 30))
    deadline = time.monotonic() + 60
    while len(deliveries) < total and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # anything delivered again would arrive now
    stop.set()
    t.join(30)
    assert not errors, errors
    values = [v for v, _ in deliveries]
    assert len(set(values)) == total, (len(set(values)), total)
    again = [(v, n) for v, n in deliveries if n != 1]
    assert not again, f"records delivered again after the flood: {again[:10]}"
    b.assert_alive()
