"""Share groups' membership (KIP-932, issue 31 item 2) against a real broker: four
confluent-kafka 2.16 `ShareConsumer`s subscribe to a one-partition topic and every one
of them is given that partition (ShareGroupDescribe v1 and ListGroups v5 in raw frames:
the Python AdminClient has no describe_share_groups); closing them empties the group.
ShareFetch is not served by this broker yet, so the test checks membership, not
delivery. Then hostile ShareGroupHeartbeats in raw frames: member ids that are not
client UUIDs, an oversized subscription, wrong epochs — each answered with its Kafka
error on a connection that stays open, and the broker healthy."""

from __future__ import annotations

import threading

import pytest

import json

from drover_testlib import (RawConn, api_versions, assert_healthy, ck_conf, ck_create_topic,
                            http_get, unique_topic)
from kafka_groups_testlib import raw_list_groups, start_group_broker, wait_for
from share_groups_testlib import member_uuid, share_describe, share_heartbeat

API_SHARE_GROUP_HEARTBEAT, API_SHARE_GROUP_DESCRIBE = 76, 77
NONE = 0
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110

# Short sessions keep the test quick (Kafka: 45000 ms sessions, 5000 ms heartbeats).
SHARE = {"share_session_timeout_ms": 6000, "share_heartbeat_interval_ms": 500}


@pytest.fixture
def share_broker(broker_factory):
    return start_group_broker(broker_factory, **SHARE)


class PollingShareConsumer:
    """A confluent-kafka ShareConsumer polled on its own thread until closed."""

    def __init__(self, broker, group: str, topic: str, name: str):
        from confluent_kafka import ShareConsumer
        self.errors: list[str] = []
        self.consumer = ShareConsumer(ck_conf(broker, **{"group.id": group, "client.id": name}))
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.consumer.poll(0.2)
            except Exception as e:  # noqa: BLE001 (delivery is not served yet: recorded)
                self.errors.append(repr(e))
                self._stop.wait(0.2)

    def close(self):
        self._stop.set()
        self._thread.join(timeout=10)
        self.consumer.close()


def test_four_share_consumers_on_one_partition_all_get_it(share_broker):
    topic = unique_topic("share-queue")
    ck_create_topic(share_broker, topic, 1)
    group = "share-four"
    consumers = [PollingShareConsumer(share_broker, group, topic, f"share-{i}") for i in range(4)]
    try:
        def described():
            [g] = share_describe(share_broker, [group])
            if g.error_code != NONE or len(g.members) != 4:
                return None
            if any(m.assignment != {topic: [0]} for m in g.members):
                return None
            # Every member has reached the group's assignment epoch.
            if any(m.member_epoch != g.assignment_epoch for m in g.members):
                return None
            return g

        g = wait_for(described, 30, "four share members, each assigned the partition")
        assert (g.state, g.assignor) == ("Stable", "simple")
        assert g.group_epoch == g.assignment_epoch >= 4
        assert sorted(m.client_id for m in g.members) == [f"share-{i}" for i in range(4)]
        assert all(m.subscribed == [topic] for m in g.members)
        # Client-generated member ids (v1), one per consumer.
        assert len({m.member_id for m in g.members}) == 4
        err, listed = raw_list_groups(share_broker, types=["share"])
        assert err == NONE
        assert [(x["group_id"], x["type"], x["protocol_type"], x["state"]) for x in listed] == \
            [(group, "share", "share", "Stable")]
        # The admin API lists and describes it.
        status, _, body = http_get(f"{share_broker.admin_url}/v1/groups")
        assert status == 200, body
        [row] = [r for r in json.loads(body) if r["group"] == group]
        assert (row["protocol"], row["state"], row["members"], row["assignor"]) == \
            ("share", "Stable", 4, "simple"), row
        status, _, body = http_get(f"{share_broker.admin_url}/v1/groups/{group}")
        assert status == 200, body
        detail = json.loads(body)
        assert sorted(m["partitions"] for m in detail["members"]) == [[f"{topic}-0"]] * 4
    finally:
        for c in consumers:
            c.close()
    # Closing leaves the group (epoch −1), or the session timeout removes the member.
    wait_for(lambda: share_describe(share_broker, [group])[0].members == [], 30,
             "the share group emptied")
    [g] = share_describe(share_broker, [group])
    assert g.state == "Empty"
    assert_healthy(share_broker)


def test_hostile_share_heartbeats_get_kafka_errors(share_broker):
    topic = unique_topic("share-hostile")
    ck_create_topic(share_broker, topic, 3)
    group = "share-hostile"
    with RawConn(share_broker) as c:
        # Member ids that are not client UUIDs.
        for bad in ["", "member-1", "x" * 5000, "share-member-00000000!"]:
            a = share_heartbeat(c, group, bad, 0, topics=[topic])
            assert a.error_code == INVALID_REQUEST, (bad[:30], a)
        # A subscription over max_subscription_topics (10000) is refused whole.
        a = share_heartbeat(c, group, member_uuid(), 0,
                            topics=[f"t{i}" for i in range(10_001)])
        assert a.error_code == INVALID_REQUEST, a
        # A join without topics, and epochs below −1.
        assert share_heartbeat(c, group, member_uuid(), 0, topics=[]).error_code == INVALID_REQUEST
        me = member_uuid()
        for epoch in (-2, -100):
            assert share_heartbeat(c, group, me, epoch).error_code == INVALID_REQUEST
        # A heartbeat before any join: the coordinator knows no such group, which is
        # what a member meets after its group's coordinator moved: UNKNOWN_MEMBER_ID
        # (rejoin with epoch 0), not GROUP_ID_NOT_FOUND (fatal to librdkafka).
        assert share_heartbeat(c, group, me, 1).error_code == UNKNOWN_MEMBER_ID
        # A real join, then wrong epochs.
        a = share_heartbeat(c, group, me, 0, topics=[topic])
        assert (a.error_code, a.member_epoch) == (NONE, 1), a
        assert a.assignment is not None and [p for _, p in a.assignment] == [[0, 1, 2]]
        a = share_heartbeat(c, group, me, 99)
        assert a.error_code == FENCED_MEMBER_EPOCH, a
        assert share_heartbeat(c, group, member_uuid(), 1).error_code == UNKNOWN_MEMBER_ID
        # Still a member at its epoch: the refusals changed nothing.
        a = share_heartbeat(c, group, me, 1)
        assert (a.error_code, a.member_epoch, a.assignment) == (NONE, 1, None), a
        a = share_heartbeat(c, group, me, -1)
        assert (a.error_code, a.member_epoch) == (NONE, -1), a
    [g] = share_describe(share_broker, [group])
    assert (g.error_code, g.state, g.members) == (NONE, "Empty", [])
    assert_healthy(share_broker)


def test_api_versions_lists_share_membership_only_with_the_coordinator(share_broker, broker):
    apis = api_versions(share_broker)
    assert apis[API_SHARE_GROUP_HEARTBEAT] == (1, 1)
    assert apis[API_SHARE_GROUP_DESCRIBE] == (1, 1)
    without = api_versions(broker)
    assert API_SHARE_GROUP_HEARTBEAT not in without and API_SHARE_GROUP_DESCRIBE not in without
