"""Kafka group administration with confluent-kafka's AdminClient against a broker with
the coordinator plugin (issue 8): list groups (state and type filters), describe a
group (members, assignment, state, protocol), delete groups (empty, non-empty,
unknown), list and alter committed offsets (a consumer then starts from them), and
OffsetDelete (not exposed by confluent-kafka 2.16: a raw v0 request).

The group members are `kafka_group_consumer.py` processes (confluent-kafka, classic
protocol); on failure their stderr and the broker's log are printed."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType,
                             KafkaError, KafkaException, TopicPartition)

from drover_testlib import Msg, ck_admin, ck_conf, ck_create_topic, ck_produce, unique_topic
from kafka_groups_testlib import (consumers, group_broker,  # noqa: F401 (fixtures)
                                  raw_list_groups, raw_offset_delete, wait_for)

PARTITIONS = 4
SESSION_TIMEOUT_MS = 3000
TIMEOUT = 15  # seconds, for each admin call

GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86


@pytest.fixture
def admin(group_broker):
    return ck_admin(group_broker)


# ---------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------
def setup_topic(broker, prefix: str, per_partition: int = 5) -> str:
    topic = unique_topic(prefix)
    ck_create_topic(broker, topic, PARTITIONS)
    ck_produce(broker, topic, [Msg(b"k", f"{p}-{i}".encode(), [], partition=p)
                               for p in range(PARTITIONS) for i in range(per_partition)])
    return topic


def start_member(consumers, broker, topic, group, name):
    return consumers.start("confluent", broker, topic, group, name,
                           session_timeout_ms=SESSION_TIMEOUT_MS, assignor="range")


def full_assignment(members) -> bool:
    held = [m.current() for m in members]
    if any(h is None for h in held):
        return False
    return (set().union(*held) == set(range(PARTITIONS))
            and sum(len(h) for h in held) == PARTITIONS)


def consumed_all(members, per_partition: int) -> bool:
    got = {(p, o) for m in members for p, o in m.delivered()}
    return got >= {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}


def listed(admin, **kw) -> dict[str, object]:
    """group id -> ConsumerGroupListing; fails on any error in the result."""
    res = admin.list_consumer_groups(request_timeout=TIMEOUT, **kw).result(timeout=TIMEOUT)
    assert not res.errors, f"ListGroups errors: {res.errors}"
    return {g.group_id: g for g in res.valid}


def describe(admin, group: str):
    return admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group] \
        .result(timeout=TIMEOUT)


def group_state(admin, group: str):
    g = listed(admin).get(group)
    return None if g is None else g.state


def committed(admin, group: str, topic: str, partitions=range(PARTITIONS)) -> dict[int, int]:
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    res = admin.list_consumer_group_offsets([req], request_timeout=TIMEOUT)[group] \
        .result(timeout=TIMEOUT)
    assert res.group_id == group
    out = {}
    for tp in res.topic_partitions:
        assert tp.error is None, f"{tp.topic}-{tp.partition}: {tp.error}"
        out[tp.partition] = tp.offset
    return out


def alter(admin, group: str, topic: str, offsets: dict[int, int]):
    req = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p, o) for p, o in offsets.items()])
    return admin.alter_consumer_group_offsets([req], request_timeout=TIMEOUT)[group] \
        .result(timeout=TIMEOUT)


def delete_error(admin, group: str):
    """None when DeleteGroups succeeded, else the KafkaError."""
    try:
        admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result(timeout=TIMEOUT)
        return None
    except KafkaException as e:
        return e.args[0]


def first_offsets_of_group(broker, topic: str, group: str, partitions, timeout: float = 30):
    """Subscribes a fresh confluent-kafka consumer of `group` and returns the first offset
    it delivers on each partition. auto.offset.reset=latest: only the committed offsets
    can make it deliver anything already in the log."""
    from confluent_kafka import Consumer
    c = Consumer(ck_conf(broker, **{"group.id": group, "auto.offset.reset": "latest",
                                    "enable.auto.commit": False,
                                    "session.timeout.ms": SESSION_TIMEOUT_MS,
                                    "heartbeat.interval.ms": 500}))
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while set(first) != set(partitions):
            assert time.monotonic() < deadline, \
                f"the consumer of {group} delivered first offsets {first} within {timeout} s"
            for m in c.consume(num_messages=100, timeout=0.3):
                assert m.error() is None, f"consumer error: {m.error()}"
                first.setdefault(m.partition(), m.offset())
    finally:
        c.close()
    return first


# ---------------------------------------------------------------------------------
# ListGroups / DescribeGroups
# ---------------------------------------------------------------------------------
def test_list_and_describe_a_stable_classic_group(group_broker, admin, consumers):
    b = group_broker
    topic = setup_topic(b, "adm-describe")
    group = f"g-{topic}"
    members = [start_member(consumers, b, topic, group, f"m{i}") for i in range(2)]
    wait_for(lambda: consumed_all(members, 5), 30, "the group to consume the topic")
    wait_for(lambda: full_assignment(members), 30, "a full assignment over both members")
    wait_for(lambda: group_state(admin, group) == ConsumerGroupState.STABLE, 15,
             "ListGroups to show the group Stable")

    # ListGroups: the group, its state and its type; the state and type filters.
    g = listed(admin)[group]
    assert (g.state, g.type, g.is_simple_consumer_group) == \
        (ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC, False), vars(g)
    assert group in listed(admin, states={ConsumerGroupState.STABLE})
    assert group not in listed(admin, states={ConsumerGroupState.EMPTY})
    assert group not in listed(admin, states={ConsumerGroupState.PREPARING_REBALANCING,
                                              ConsumerGroupState.COMPLETING_REBALANCING})
    assert group in listed(admin, types={ConsumerGroupType.CLASSIC})
    assert group not in listed(admin, types={ConsumerGroupType.CONSUMER})
    both = listed(admin, states={ConsumerGroupState.STABLE}, types={ConsumerGroupType.CLASSIC})
    assert both[group].state == ConsumerGroupState.STABLE

    # DescribeGroups: state, protocol (the assignor), members and their assignments.
    d = describe(admin, group)
    assert d.group_id == group
    assert d.state == ConsumerGroupState.STABLE, d.state
    assert d.partition_assignor == "range", d.partition_assignor
    assert d.is_simple_consumer_group is False
    assert d.type in (ConsumerGroupType.CLASSIC, ConsumerGroupType.UNKNOWN), d.type
    assert d.coordinator is not None and d.coordinator.port == b.port, d.coordinator
    assert len(d.members) == 2, [vars(m) for m in d.members]
    assert len({m.member_id for m in d.members}) == 2
    described = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                       for m in d.members)
    held = sorted(sorted(m.current()) for m in members)
    assert described == held, f"DescribeGroups assignments {described}, consumers hold {held}"
    for m in d.members:
        assert {tp.topic for tp in m.assignment.topic_partitions} == {topic}
        assert m.client_id == "rdkafka", m.client_id  # librdkafka's default client.id
        assert m.group_instance_id is None
    # Kafka reports the address each member connected from ("/127.0.0.1").
    hosts = [m.host for m in d.members]
    assert all("127.0.0.1" in h for h in hosts), f"member hosts {hosts!r}"


def test_an_empty_classic_group_keeps_its_protocol_type(group_broker, admin, consumers):
    """Kafka's ClassicGroup keeps its protocol type when its last member leaves (issue
    17): after the consumer closed, ListGroups and DescribeGroups still report a
    `consumer` group, Empty (librdkafka: not a simple consumer group, which is what an
    empty protocol type means to it)."""
    b = group_broker
    topic = setup_topic(b, "adm-empty-type")
    group = f"g-{topic}"
    member = start_member(consumers, b, topic, group, "m0")
    wait_for(lambda: consumed_all([member], 5), 30, "the member to consume the topic")
    wait_for(lambda: group_state(admin, group) == ConsumerGroupState.STABLE, 15,
             "ListGroups to show the group Stable")
    assert listed(admin)[group].is_simple_consumer_group is False

    member.stop()  # SIGTERM: close, LeaveGroup
    wait_for(lambda: group_state(admin, group) == ConsumerGroupState.EMPTY, 15,
             "the group to be Empty after its member left")
    g = listed(admin)[group]
    assert (g.state, g.type, g.is_simple_consumer_group) == \
        (ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC, False), vars(g)
    d = describe(admin, group)
    assert (d.state, d.members, d.is_simple_consumer_group) == \
        (ConsumerGroupState.EMPTY, [], False), vars(d)
    err, groups = raw_list_groups(b)
    assert err == 0
    assert {"group_id": group, "protocol_type": "consumer", "state": "Empty",
            "type": "classic"} in groups, groups


def test_describe_an_unknown_group(admin):
    """Kafka 4 (DescribeGroups v6): GROUP_ID_NOT_FOUND; librdkafka may ask an older
    version and get state Dead. Either way: no members."""
    group = unique_topic("never-seen")
    try:
        d = describe(admin, group)
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND, e
        return
    assert d.state in (ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN), d.state
    assert d.members == []


# ---------------------------------------------------------------------------------
# DeleteGroups
# ---------------------------------------------------------------------------------
def test_delete_groups(group_broker, admin, consumers):
    b = group_broker
    topic = setup_topic(b, "adm-delete")
    group = f"g-{topic}"
    member = start_member(consumers, b, topic, group, "m0")
    wait_for(lambda: consumed_all([member], 5), 30, "the member to consume the topic")
    wait_for(lambda: committed(admin, group, topic) == {p: 5 for p in range(PARTITIONS)}, 15,
             "the member's commits")

    # A group with a member: refused.
    err = delete_error(admin, group)
    assert err is not None and err.code() == KafkaError.NON_EMPTY_GROUP, err
    assert group in listed(admin)
    assert committed(admin, group, topic) == {p: 5 for p in range(PARTITIONS)}

    # An unknown group.
    err = delete_error(admin, unique_topic("no-such-group"))
    assert err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND, err

    # Once the member has left (SIGTERM: close, LeaveGroup), the empty group goes, its
    # offsets with it.
    member.stop()
    wait_for(lambda: group_state(admin, group) == ConsumerGroupState.EMPTY, 15,
             "the group to be Empty after its member left")
    assert delete_error(admin, group) is None
    assert group not in listed(admin)
    assert committed(admin, group, topic) == {p: -1001 for p in range(PARTITIONS)}, \
        "offsets survived DeleteGroups"
    # Deleted twice: it is gone.
    err = delete_error(admin, group)
    assert err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND, err


# ---------------------------------------------------------------------------------
# ListConsumerGroupOffsets / AlterConsumerGroupOffsets
# ---------------------------------------------------------------------------------
def test_alter_offsets_of_an_empty_group_then_consume_from_them(group_broker, admin, consumers):
    b = group_broker
    topic = setup_topic(b, "adm-alter", per_partition=10)
    group = f"g-{topic}"
    member = start_member(consumers, b, topic, group, "m0")
    wait_for(lambda: consumed_all([member], 10), 30, "the member to consume the topic")
    wait_for(lambda: committed(admin, group, topic) == {p: 10 for p in range(PARTITIONS)}, 15,
             "the member's commits")

    # While the group has a member, an admin (generation −1) commit is refused.
    res = None
    try:
        res = alter(admin, group, topic, {0: 1})
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID, e
    if res is not None:
        errs = [tp.error for tp in res.topic_partitions]
        assert errs and all(e is not None and e.code() == KafkaError.UNKNOWN_MEMBER_ID
                            for e in errs), errs
    assert committed(admin, group, topic) == {p: 10 for p in range(PARTITIONS)}

    member.stop()
    wait_for(lambda: group_state(admin, group) == ConsumerGroupState.EMPTY, 15,
             "the group to be Empty after its member left")

    want = {0: 3, 1: 7, 2: 0, 3: 10}
    res = alter(admin, group, topic, want)
    assert res.group_id == group
    assert {tp.partition: (tp.offset, tp.error) for tp in res.topic_partitions} == \
        {p: (o, None) for p, o in want.items()}
    assert committed(admin, group, topic) == want
    # Only some partitions asked: only those answered.
    assert committed(admin, group, topic, [1, 3]) == {1: 7, 3: 10}
    # The whole group (no partitions named).
    whole = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                              request_timeout=TIMEOUT)[group].result(timeout=TIMEOUT)
    assert {(tp.topic, tp.partition): tp.offset for tp in whole.topic_partitions} == \
        {(topic, p): o for p, o in want.items()}

    # A consumer of the group starts from the altered offsets (partition 3 is at its
    # end: more records there, so it delivers something).
    ck_produce(b, topic, [Msg(b"k", b"more", [], partition=3)])
    first = first_offsets_of_group(b, topic, group, range(PARTITIONS))
    assert first == want, f"first offsets delivered {first}, altered to {want}"


def test_a_group_with_only_committed_offsets_is_listed_empty(group_broker, admin):
    """Kafka creates an (Empty) group on a commit with generation −1: ListGroups lists
    it, DescribeGroups describes it Empty (kafka-consumer-groups --list shows it)."""
    b = group_broker
    topic = setup_topic(b, "adm-offsets-only")
    group = f"g-{topic}"
    res = alter(admin, group, topic, {0: 2, 1: 4})
    assert [tp.error for tp in res.topic_partitions] == [None, None]
    assert committed(admin, group, topic, [0, 1]) == {0: 2, 1: 4}
    g = listed(admin).get(group)
    assert g is not None, "ListGroups does not list a group that has committed offsets"
    assert g.state == ConsumerGroupState.EMPTY, g.state
    d = describe(admin, group)
    assert (d.state, d.members) == (ConsumerGroupState.EMPTY, [])


# ---------------------------------------------------------------------------------
# OffsetDelete (raw v0: confluent-kafka 2.16 has no delete_consumer_group_offsets)
# ---------------------------------------------------------------------------------
def test_offset_delete(group_broker, admin, consumers):
    b = group_broker
    topic = setup_topic(b, "adm-offdel")
    other = setup_topic(b, "adm-offdel-other")
    group = f"g-{topic}"
    member = start_member(consumers, b, topic, group, "m0")
    wait_for(lambda: consumed_all([member], 5), 30, "the member to consume the topic")
    wait_for(lambda: committed(admin, group, topic) == {p: 5 for p in range(PARTITIONS)}, 15,
             "the member's commits")

    # The member consumes `topic`: its offsets stay (GROUP_SUBSCRIBED_TO_TOPIC).
    err, parts = raw_offset_delete(b, group, {topic: [0, 1]})
    assert err == 0, err
    assert parts == {(topic, 0): GROUP_SUBSCRIBED_TO_TOPIC,
                     (topic, 1): GROUP_SUBSCRIBED_TO_TOPIC}, parts
    assert committed(admin, group, topic) == {p: 5 for p in range(PARTITIONS)}

    member.stop()
    wait_for(lambda: group_state(admin, group) == ConsumerGroupState.EMPTY, 15,
             "the group to be Empty after its member left")
    # Offsets of another topic, committed while the group is empty.
    alter(admin, group, other, {0: 1, 1: 2})

    err, parts = raw_offset_delete(b, group, {topic: [0, 1], other: [1]})
    assert err == 0, err
    assert parts == {(topic, 0): 0, (topic, 1): 0, (other, 1): 0}, parts
    assert committed(admin, group, topic) == {0: -1001, 1: -1001, 2: 5, 3: 5}
    assert committed(admin, group, other, [0, 1]) == {0: 1, 1: -1001}

    # A group that does not exist (Kafka: GROUP_ID_NOT_FOUND for the whole request).
    err, parts = raw_offset_delete(b, unique_topic("no-such-group"), {topic: [0]})
    assert err == GROUP_ID_NOT_FOUND, (err, parts)
