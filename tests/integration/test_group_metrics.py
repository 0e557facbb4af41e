"""The metrics tell the truth about the coordinator's answers and closes (issue 15,
item 6): a group API answered with an error is counted under that error (Kafka's
`errorCounts()`: one per partition for OffsetCommit), not as NONE; a connection the
coordinator closes (here: a group request at a version it does not serve) is closed
and counted in drover_connections_closed_by_broker_total with its reason. Raw frames
against a real broker with the coordinator plugin."""

from __future__ import annotations

import re
import struct

from drover_testlib import RawConn, ck_create_topic, http_get, unique_topic
from kafka_groups_testlib import group_broker  # noqa: F401 (fixture)
from test_kafka_group_wire import (API_HEARTBEAT, ILLEGAL_GENERATION, NONE, UNKNOWN_MEMBER_ID,
                                   commit, heartbeat, joined_member)

SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$')


def samples(broker, name: str) -> dict[frozenset, float]:
    """The samples of metric `name` (with its `_total` suffix), by their label set."""
    status, _, body = http_get(broker.admin_url + "/metrics")
    assert status == 200
    out = {}
    for line in body.splitlines():
        m = SAMPLE.match(line)
        if m and m.group("name") == name:
            labels = frozenset(re.findall(r'([a-z_]+)="([^"]*)"', m.group("labels")))
            out[labels] = float(m.group("value"))
    return out


def requests(broker, api: str, error: str) -> float:
    return samples(broker, "drover_requests_total").get(
        frozenset({("api", api), ("error", error)}), 0)


def closed_by_broker(broker, reason: str) -> float:
    return samples(broker, "drover_connections_closed_by_broker_total").get(
        frozenset({("reason", reason)}), 0)


def test_group_api_errors_are_counted_by_their_code(group_broker):  # noqa: F811
    b = group_broker
    topic = unique_topic("gm-errors")
    ck_create_topic(b, topic, 2)
    group = unique_topic("g-errors")
    with RawConn(b) as c:
        member, generation = joined_member(c, group, topic)
        assert heartbeat(c, group, generation, member) == NONE
        assert heartbeat(c, group, generation, "no-such-member") == UNKNOWN_MEMBER_ID
        # A commit to the classic group from another generation: refused per partition.
        assert commit(c, group, generation + 1, member, {(topic, 0): (5, None)}) == \
            {(topic, 0): ILLEGAL_GENERATION}
        # A standalone commit (generation -1), a negative offset included: both stored,
        # as Kafka does.
        other = unique_topic("g-simple")
        assert commit(c, other, -1, "", {(topic, 0): (5, None), (topic, 1): (-3, None)}) == \
            {(topic, 0): NONE, (topic, 1): NONE}
    assert requests(b, "Heartbeat", "UnknownMemberId") == 1
    assert requests(b, "Heartbeat", "NONE") >= 1
    # One count per partition: one ILLEGAL_GENERATION, then two NONE.
    assert requests(b, "OffsetCommit", "IllegalGeneration") == 1
    assert requests(b, "OffsetCommit", "NONE") == 2


def test_a_group_request_at_an_unsupported_version_is_closed_and_counted(group_broker):  # noqa: F811
    b = group_broker
    assert closed_by_broker(b, "coordinator_closed") == 0
    with RawConn(b) as c:
        body = struct.pack(">h", 3) + b"g" * 3 + struct.pack(">i", 1) + struct.pack(">h", 1) + b"m"
        c.request(API_HEARTBEAT, 99, body)
        try:
            data = c.sock.recv(1)
        except ConnectionResetError:
            data = b""
        assert data == b"", "the connection was closed without an answer"
    assert closed_by_broker(b, "coordinator_closed") == 1
    # The broker keeps serving group requests on other connections.
    with RawConn(b) as c:
        assert heartbeat(c, unique_topic("g-after"), 1, "m") != NONE


def test_refused_group_requests_are_logged_at_most_once_a_second(group_broker):  # noqa: F811
    """A client that sends refused frames at will (here 300 group requests at a version
    the coordinator does not serve, each closing its connection) gets every one refused
    and counted, but the broker's log gets at most one info line per second about them,
    saying how many it held back (issue 17: one client wrote 1,854 lines in 37 s)."""
    import time

    b = group_broker
    before = closed_by_broker(b, "coordinator_closed")
    lines_before = b.stderr_text().count("closing connection")
    started = time.monotonic()
    body = struct.pack(">h", 3) + b"g" * 3 + struct.pack(">i", 1) + struct.pack(">h", 1) + b"m"

    def refused():
        with RawConn(b) as c:
            c.request(API_HEARTBEAT, 99, body)
            try:
                assert c.sock.recv(1) == b""
            except ConnectionResetError:
                pass

    for _ in range(300):
        refused()
    # One more once the second the burst started in is over: its line says how many
    # refusals were held back.
    time.sleep(max(0.0, 1.2 - (time.monotonic() - started)))
    refused()
    elapsed = time.monotonic() - started
    assert closed_by_broker(b, "coordinator_closed") - before == 301
    log = b.stderr_text()
    lines = log.count("closing connection") - lines_before
    # At most one line per started second (plus the first).
    assert 2 <= lines <= int(elapsed) + 2, (lines, elapsed)
    assert re.search(r"closing connection.*suppressed=[1-9]", log), log[-2000:]
    # The broker keeps serving group requests.
    with RawConn(b) as c:
        assert heartbeat(c, unique_topic("g-after-burst"), 1, "m") != NONE
