"""Share-group offsets admin and observability (KIP-932, issue 31 item 5), with
confluent-kafka 2.16's ShareConsumer and raw AlterShareGroupOffsets (91) /
DeleteShareGroupOffsets (92) frames (its AdminClient has no share-group methods):

- altering an empty share group's start offset to an earlier offset: a new share
  consumer gets those records again;
- altering or deleting while the group has a member: NON_EMPTY_GROUP;
- deleting a topic's offsets: the group starts over where `share.auto.offset.reset`
  says;
- an unknown group: GROUP_ID_NOT_FOUND; unknown topics and partitions, negative start
  offsets: per-partition errors;
- hostile counts: answered INVALID_REQUEST or the connection closed, the broker unharmed;
- `GET /v1/groups/{group}`'s `share_partitions` and `GET /metrics`: the in-flight,
  acknowledged and archived counts and the delivery counts a consumer caused."""

from __future__ import annotations

import json
import struct
import time

import pytest
from confluent_kafka import AcknowledgeType

from drover_testlib import RawConn, ck_create_topic, http_get, unique_topic, uvarint
from kafka_groups_testlib import _compact_str, start_group_broker
from share_groups_testlib import (API_ALTER_SHARE_GROUP_OFFSETS, API_DELETE_SHARE_GROUP_OFFSETS,
                                  SHARE, alter_share_group_offsets,
                                  alter_share_group_offsets_body, delete_share_group_offsets,
                                  delete_share_group_offsets_body, describe_share_group_offsets,
                                  parse_alter_share_group_offsets, poll_records, produce_values,
                                  share_consumer, share_describe, share_group)

TIMEOUT = 60
# Kafka error codes.
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 3, 42, 68, 69


@pytest.fixture
def broker(broker_factory):
    """A broker with the coordinator plugin, the assignors and the embedded store."""
    return start_group_broker(broker_factory, **SHARE)


def consume(b, group: str, topic: str, want: int, **extra) -> list[tuple[bytes, int]]:
    """(value, delivery count) of the records a new share consumer gets until it has
    `want` of them and nothing more arrives for 3 s (implicit acknowledgement); the
    consumer is closed, so the group is left empty."""
    c = share_consumer(b, group, topic, **extra)
    got: list[tuple[bytes, int]] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(got) < want and time.monotonic() < deadline:
            got.extend((m.value(), m.delivery_count()) for m in poll_records(c))
        quiet_until = time.monotonic() + 3
        while time.monotonic() < quiet_until:
            got.extend((m.value(), m.delivery_count()) for m in poll_records(c))
    finally:
        c.close()
    return got


def wait_empty(b, group: str) -> None:
    """Until the coordinator describes `group` without members (a closed consumer
    leaves at once; a lost one after `share_session_timeout_ms`)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        [g] = share_describe(b, [group])
        if g.error_code == 0 and not g.members:
            return
        time.sleep(0.2)
    raise AssertionError(f"share group {group} still has members")


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def test_altering_an_empty_groups_start_offset_back_delivers_those_records_again(broker):
    b = broker
    topic = unique_topic("share-alter")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-alter")
    produce_values(b, topic, values(10))
    first = consume(b, group, topic, 10)
    assert sorted(v for v, _ in first) == sorted(values(10)), first
    wait_empty(b, group)
    assert describe_share_group_offsets(b, group, {topic: [0]}) == (0, {(topic, 0): (10, 0)})

    err, parts = alter_share_group_offsets(b, group, {topic: {0: 3}})
    assert (err, parts) == (0, {(topic, 0): 0})
    assert describe_share_group_offsets(b, group, {topic: [0]}) == (0, {(topic, 0): (3, 0)})

    # The share-partition in memory was dropped: the next consumer starts at 3, and the
    # state was written anew, so each record is a first delivery again.
    again = consume(b, group, topic, 7)
    assert sorted(again) == sorted((v, 1) for v in values(10)[3:]), again


def test_altering_or_deleting_the_offsets_of_a_group_with_a_member_is_non_empty_group(broker):
    b = broker
    topic = unique_topic("share-busy")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-busy")
    produce_values(b, topic, values(3))
    c = share_consumer(b, group, topic)
    try:
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 3 and time.monotonic() < deadline:
            got.extend(poll_records(c))
        assert len(got) == 3, got
        before = describe_share_group_offsets(b, group, {topic: [0]})
        err, parts = alter_share_group_offsets(b, group, {topic: {0: 2}})
        assert (err, parts) == (NON_EMPTY_GROUP, {}), (err, parts)
        err, topics = delete_share_group_offsets(b, group, [topic])
        assert (err, topics) == (NON_EMPTY_GROUP, {}), (err, topics)
        # Nothing changed.
        assert describe_share_group_offsets(b, group, {topic: [0]}) == before
    finally:
        c.close()
    # Once the member left, the same request succeeds.
    wait_empty(b, group)
    assert alter_share_group_offsets(b, group, {topic: {0: 0}}) == (0, {(topic, 0): 0})


def test_deleting_offsets_starts_the_group_over_per_share_auto_offset_reset(broker):
    b = broker
    topic = unique_topic("share-delete")
    ck_create_topic(b, topic, 2)
    group = share_group(b, "share-delete")
    produce_values(b, topic, values(5))
    assert len(consume(b, group, topic, 5)) == 5
    wait_empty(b, group)
    err, offsets = describe_share_group_offsets(b, group, None)
    assert err == 0 and offsets[(topic, 0)] == (5, 0), offsets

    assert delete_share_group_offsets(b, group, [topic]) == (0, {topic: 0})
    # No state left (−1: not initialised); deleting again finds nothing to delete.
    assert describe_share_group_offsets(b, group, {topic: [0]}) == (0, {(topic, 0): (-1, 0)})
    assert delete_share_group_offsets(b, group, [topic]) == (
        0, {topic: UNKNOWN_TOPIC_OR_PARTITION})
    # share.auto.offset.reset=earliest: everything again, each a first delivery.
    again = consume(b, group, topic, 5)
    assert sorted(again) == sorted((v, 1) for v in values(5)), again


def test_unknown_groups_topics_and_partitions_and_negative_offsets(broker):
    b = broker
    topic = unique_topic("share-unknown")
    ck_create_topic(b, topic, 1)
    never = unique_topic("share-never")
    assert alter_share_group_offsets(b, never, {topic: {0: 0}}) == (GROUP_ID_NOT_FOUND, {})
    assert delete_share_group_offsets(b, never, [topic]) == (GROUP_ID_NOT_FOUND, {})

    group = share_group(b, "share-unknown")
    produce_values(b, topic, values(2))
    assert len(consume(b, group, topic, 2)) == 2
    wait_empty(b, group)
    err, parts = alter_share_group_offsets(
        b, group, {topic: {0: -5, 7: 0}, "no-such-topic": {0: 0}})
    assert err == 0
    assert parts == {(topic, 0): INVALID_REQUEST, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
                     ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}, parts
    assert delete_share_group_offsets(b, group, ["no-such-topic"]) == (
        0, {"no-such-topic": UNKNOWN_TOPIC_OR_PARTITION})
    # Nothing was changed by the refused partitions.
    assert describe_share_group_offsets(b, group, {topic: [0]}) == (0, {(topic, 0): (2, 0)})


def test_hostile_counts_are_refused_and_the_broker_keeps_serving(broker):
    b = broker
    topic = unique_topic("share-hostile")
    ck_create_topic(b, topic, 1)
    group = unique_topic("share-hostile")
    # Counts claiming far more entries than the frame holds: the connection is closed
    # (undecodable) or the request answered, never a crash or a huge allocation.
    for api, body in [
        (API_ALTER_SHARE_GROUP_OFFSETS, _compact_str(group) + uvarint(2**31 - 2) + b"\x00"),
        (API_ALTER_SHARE_GROUP_OFFSETS,
         _compact_str(group) + uvarint(2) + _compact_str(topic) + uvarint(2**31 - 2)),
        (API_DELETE_SHARE_GROUP_OFFSETS, _compact_str(group) + uvarint(2**31 - 2) + b"\x00"),
    ]:
        with RawConn(b) as c:
            corr = c.request(api, 0, body, flexible_header=True)
            try:
                c.recv_response(corr, flexible_header=True)
            except (EOFError, ConnectionError):
                pass
    # Real arrays past the bounds: INVALID_REQUEST for the request.
    many = {topic: {p: 0 for p in range(10_001)}}
    with RawConn(b, timeout=30) as c:
        corr = c.request(API_ALTER_SHARE_GROUP_OFFSETS, 0,
                         alter_share_group_offsets_body(group, many), flexible_header=True)
        err, parts = parse_alter_share_group_offsets(c.recv_response(corr, flexible_header=True))
    assert (err, parts) == (INVALID_REQUEST, {}), err
    err, topics = delete_share_group_offsets(b, group, [f"t{i}" for i in range(1001)])
    assert (err, topics) == (INVALID_REQUEST, {}), err
    # Still serving: an unknown group is answered as such.
    assert alter_share_group_offsets(b, group, {topic: {0: 0}}) == (GROUP_ID_NOT_FOUND, {})


def share_partitions(b, group: str) -> list[dict]:
    status, _, body = http_get(f"{b.admin_url}/v1/groups/{group}")
    assert status == 200, (status, body)
    detail = json.loads(body)
    assert detail["protocol"] == "share", detail
    return detail["share_partitions"]


def metric(text: str, line_prefix: str) -> int:
    found = [l for l in text.splitlines() if l.startswith(line_prefix + " ")]
    assert len(found) == 1, (line_prefix, [l for l in text.splitlines() if "share" in l])
    return int(found[0].rsplit(" ", 1)[1])


def test_admin_api_and_metrics_show_in_flight_archived_and_delivery_counts(broker):
    b = broker
    topic = unique_topic("share-view")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-view")
    produce_values(b, topic, values(10))
    c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 10 and time.monotonic() < deadline:
            batch = poll_records(c)
            for m in batch:
                got.append(m.offset())
                # 0–2 rejected, 3–5 accepted, 6–9 held (acquired, unacknowledged).
                if m.offset() <= 2:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                elif m.offset() <= 5:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                c.commit_sync(30)
        assert sorted(got) == list(range(10)), got
        [p] = share_partitions(b, group)
        assert (p["topic"], p["partition"], p["loaded"]) == (topic, 0, True), p
        assert (p["start_offset"], p["end_offset"], p["log_end_offset"]) == (6, 10, 10), p
        assert (p["in_flight"], p["available"]) == (4, 0), p
        assert (p["archived"], p["acknowledged"]) == (3, 3), p
        assert p["delivery_counts"][0] == 10 and sum(p["delivery_counts"][1:]) == 0, p

        _, _, text = http_get(f"{b.admin_url}/metrics")
        labels = f'group="{group}",topic="{topic}",partition="0"'
        assert metric(text, f"drover_share_partition_records_in_flight{{{labels}}}") == 4
        assert metric(text, f"drover_share_partition_records_archived_total{{{labels}}}") == 3
        assert metric(text, f"drover_share_partition_start_offset{{{labels}}}") == 6
        assert metric(text, f"drover_share_partition_end_offset{{{labels}}}") == 10
        assert metric(
            text,
            f'drover_share_partition_deliveries_total{{{labels},delivery_count="1"}}') == 10
        assert metric(text, "drover_share_records_archived_total") >= 3
        assert metric(text, "drover_share_records_in_flight") >= 4
    finally:
        c.close()
    # Closing released the held records: available again, none in flight; the saved
    # state agrees.
    wait_empty(b, group)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        [p] = share_partitions(b, group)
        if p["in_flight"] == 0:
            break
        time.sleep(0.2)
    assert (p["in_flight"], p["available"], p["start_offset"]) == (0, 4, 6), p
