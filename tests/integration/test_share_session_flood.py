"""A hostile client against the share-session cache (KIP-932 share sessions; the bound
`share.max_sessions_per_client`, docs/operations.md "`[share]`").

A raw client on the same address as a real consumer (loopback: every test client shares
127.0.0.1, as clients behind one NAT do) opens share sessions in a loop, each under a
new member id, pipelined. Once its address holds
`max_sessions_per_client` sessions, every further one is answered
SHARE_SESSION_LIMIT_REACHED, after a throttle time of 1 s (librdkafka retries a
refusal at once, tens of thousands of times a minute otherwise): a session in use is
never pushed out. The confluent-kafka
ShareConsumer fetching beside it keeps its session, so none of its acquired records is
released and delivered again (before the fix the flood evicted the address's least
recently used sessions, the consumer's among them: its records went back and came again
with delivery count 2). The flood's sessions live on its connection: once it closes
they are gone and a newcomer on the address gets a session.

A member that acquires records and then disappears (its socket closed, as when its
process dies) has its records released at once, not when their lock expires: a share
session goes with the connection that last used it, as Kafka drops a disconnected
client's.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid

from drover_testlib import RawConn, ck_admin, ck_create_topic, unique_topic
from kafka_groups_testlib import _compact_str, start_group_broker
from share_groups_testlib import SHARE, member_uuid, produce_values, share_consumer, share_group

API_SHARE_FETCH = 78
SHARE_SESSION_LIMIT_REACHED = 133
PER_CLIENT = 20
FLOOD = 60


def send_open(conn: RawConn, group: str, member: str) -> int:
    """Sends a raw ShareFetch v1 at epoch 0 with no partitions (a new session); returns
    its correlation id."""
    body = _compact_str(group) + _compact_str(member)
    # epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size
    body += struct.pack(">iiiiii", 0, 0, 1, 1 << 20, 10, 10)
    body += b"\x01" + b"\x01" + b"\x00"  # no topics, no forgotten topics, no tags
    return conn.request(API_SHARE_FETCH, 1, body, flexible_header=True)


def error_of(conn: RawConn, corr: int) -> int:
    """The top-level error code of the ShareFetch answer `corr` (the next one)."""
    resp = conn.recv_response(corr, flexible_header=True)
    (err,) = struct.unpack_from(">h", resp, 4)
    return err


def open_session(conn: RawConn, group: str, member: str) -> int:
    """A new session -> the top-level error code of its answer."""
    return error_of(conn, send_open(conn, group, member))


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

    # The flood, pipelined, while records keep arriving for the consumer. (A refusal
    # is answered after its throttle time, 1 s; the requests in flight wait together.)
    answers: dict[int, int] = {}
    with RawConn(b) as raw:
        sent = []
        for i in range(FLOOD):
            sent.append(send_open(raw, group, member_uuid()))
            if i % 10 == 0:
                produce_values(b, topic, [f"during-{i}-{k}".encode() for k in range(10)])
        for corr in sent:
            err = error_of(raw, corr)
            answers[err] = answers.get(err, 0) + 1
        # The consumer's session counts against its address too, so the flood gets at
        # most PER_CLIENT - 1 sessions; every other attempt is refused, a newcomer's
        # too while the flood's connection is open.
        assert set(answers) <= {0, SHARE_SESSION_LIMIT_REACHED}, answers
        assert answers.get(0, 0) <= PER_CLIENT - 1, answers
        assert answers.get(SHARE_SESSION_LIMIT_REACHED, 0) >= FLOOD - PER_CLIENT + 1, answers
        with RawConn(b) as newcomer:
            assert open_session(newcomer, group, member_uuid()) == SHARE_SESSION_LIMIT_REACHED
    # The flood's connection closed and its sessions went with it (as soon as the
    # broker has seen the close): a newcomer gets one.
    deadline = time.monotonic() + 10
    while True:
        with RawConn(b) as newcomer:
            err = open_session(newcomer, group, member_uuid())
        if err == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert err == 0, err
    # The refusals are logged, at most once a second.
    refusals = b.stderr_text().count("share session refused")
    assert 1 <= refusals < 100, f"{refusals} refusal lines: not rate-limited"

    last = [f"after-{i}".encode() for i in range(100)]
    produce_values(b, topic, last)
    total = len(first) + len(last) + 10 * len(range(0, FLOOD, 10))
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


def topic_id(b, topic: str) -> uuid.UUID:
    """`topic`'s id (KIP-516), from confluent-kafka's DescribeTopics."""
    from confluent_kafka import TopicCollection

    admin = ck_admin(b)  # alive until the future resolves
    d = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=15)
    u = d.topic_id
    mask = (1 << 64) - 1
    return uuid.UUID(int=((u.get_most_significant_bits() & mask) << 64)
                     | (u.get_least_significant_bits() & mask))


def test_records_of_a_member_whose_connection_closed_come_back_at_once(broker_factory):
    """A raw member acquires 10 records (ShareFetch, lock 60 s) and closes its socket;
    a ShareConsumer gets them well within the lock duration (it polls for 30 s at most),
    with delivery count 2."""
    from test_share_groups_cluster import share_fetch_partitions
    from share_groups_testlib import group_config

    b = start_group_broker(broker_factory, **SHARE)
    topic = unique_topic("share-gone")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-gone")
    group_config(b, group, share_record_lock_duration_ms="60000")
    values = [f"v-{i}".encode() for i in range(20)]
    produce_values(b, topic, values)
    tid = topic_id(b, topic)
    with RawConn(b) as raw:
        answered = share_fetch_partitions(raw, group, member_uuid(), 0, [(tid, 0)])
        assert answered == [(0, 0)], answered
    started = time.monotonic()
    c = share_consumer(b, group, topic)
    got: list[tuple[bytes, int]] = []
    try:
        while len(got) < len(values) and time.monotonic() - started < 30:
            got.extend((m.value(), m.delivery_count()) for m in c.poll(0.5) if m.error() is None)
    finally:
        c.close()
    assert sorted(v for v, _ in got) == sorted(values), got
    # The raw member acquired the first 10 (its max_records): its acquisition counted
    # as a delivery, so theirs is the second; the rest are delivered for the first time.
    counts = dict(got)
    assert all(counts[v] == 2 for v in values[:10]), got
    assert all(counts[v] == 1 for v in values[10:]), got
