"""The admin APIs tools call (issue 32 item 2): DescribeLogDirs, DescribeProducers,
DescribeClientQuotas, DescribeTopicPartitions and ApiVersions' feature flags, through
kafka-python's admin client (the client that offers them: confluent-kafka 2.16's
AdminClient has none of them) and, for DescribeClientQuotas, which no client here
offers, kafka-python's schema-generated protocol classes sent through its admin
client's connection.

Every test runs a real `drover serve` process; nothing about timings is asserted."""

from __future__ import annotations

import pytest

from drover_testlib import (Msg, ck_conf, ck_create_topic, ck_produce, unique_topic)
from kafka_groups_testlib import start_group_broker

TIMEOUT = 20

# Kafka error codes.
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42


def kp_admin(broker):
    from kafka.admin import KafkaAdminClient  # noqa: PLC0415
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                            request_timeout_ms=TIMEOUT * 1000)


@pytest.fixture
def admin(broker):
    """kafka-python's admin client on the test's broker."""
    a = kp_admin(broker)
    yield a
    a.close()


def send(admin, request):
    """Sends one request through the admin client's connection; the response."""
    return admin._manager.run(admin._manager.send, request)


def log_files_bytes(broker, topic: str, partition: int) -> int:
    """The bytes of a partition's segment `.log` files on disk."""
    d = broker.data_dir / "logs" / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in d.glob("*.log"))


def sizes(admin, topic_partitions=None) -> tuple[dict, dict]:
    """(the one log directory's result, {(topic, partition): size})."""
    [per_broker] = admin.describe_log_dirs(topic_partitions)
    [log_dir] = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    out = {}
    for t in log_dir["topics"]:
        for p in t["partitions"]:
            assert p["offset_lag"] == 0 and p["is_future_key"] is False
            out[(t["name"], p["partition_index"])] = p["partition_size"]
    return log_dir, out


# ---- DescribeLogDirs -----------------------------------------------------------------


def test_log_dir_sizes_are_the_segment_files_and_grow_with_produce(broker, admin):
    topic = unique_topic("logdirs")
    ck_create_topic(broker, topic, 2)
    log_dir, before = sizes(admin)
    assert log_dir["log_dir"] == str((broker.data_dir / "logs").resolve())
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert before[(topic, 0)] == 0 and before[(topic, 1)] == 0

    ck_produce(broker, topic, [Msg(key=None, value=b"v" * 1000, partition=0) for _ in range(50)])
    _, after = sizes(admin)
    assert after[(topic, 0)] >= 50 * 1000
    assert after[(topic, 0)] == log_files_bytes(broker, topic, 0)
    assert after[(topic, 1)] == 0

    # Named partitions only; names that are not partitions here are left out.
    missing = unique_topic("no-such-topic")
    _, named = sizes(admin, {topic: [1, 7], missing: [0]})
    assert named == {(topic, 1): 0}


# ---- DescribeProducers ---------------------------------------------------------------


def test_idempotent_and_transactional_producers_are_described(broker, admin):
    from confluent_kafka import Producer  # noqa: PLC0415
    from kafka import TopicPartition  # noqa: PLC0415

    topic = unique_topic("producers")
    ck_create_topic(broker, topic, 2)
    # An idempotent producer writes 7 records to partition 0.
    idem = Producer(ck_conf(broker, **{"enable.idempotence": True, "linger.ms": 0}))
    ck_produce(broker, topic, [Msg(key=None, value=b"i", partition=0) for _ in range(7)],
               producer=idem)
    [state] = admin.describe_producers([TopicPartition(topic, 0)]).values()
    [p] = state.active_producers
    assert p.producer_id >= 0 and p.producer_epoch == 0
    assert p.last_sequence == 6
    assert p.current_transaction_start_offset == -1
    assert p.last_timestamp > 0 and p.coordinator_epoch == -1

    # A transactional producer with an open transaction in partition 1.
    tid = unique_topic("tid")
    txn = Producer(ck_conf(broker, **{"transactional.id": tid, "linger.ms": 0}))
    txn.init_transactions(TIMEOUT)
    txn.begin_transaction()
    ck_produce(broker, topic, [Msg(key=None, value=b"t", partition=1) for _ in range(3)],
               producer=txn)
    described = admin.describe_transactions([tid])[tid]
    pid, epoch = described.producer_id, described.producer_epoch
    result = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    in_txn = {s.producer_id: s for s in result[TopicPartition(topic, 1)].active_producers}
    assert set(in_txn) == {pid}
    assert in_txn[pid].producer_epoch == epoch
    assert in_txn[pid].last_sequence == 2
    assert in_txn[pid].current_transaction_start_offset == 0
    # Partition 0 still has only the idempotent producer.
    assert [s.producer_id for s in result[TopicPartition(topic, 0)].active_producers] \
        == [p.producer_id]

    txn.commit_transaction(TIMEOUT)
    [after] = admin.describe_producers([TopicPartition(topic, 1)]).values()
    [q] = after.active_producers
    assert q.producer_id == pid and q.current_transaction_start_offset == -1


def test_describe_producers_errors(broker, admin):
    from kafka.protocol.admin.transactions import DescribeProducersRequest  # noqa: PLC0415

    topic = unique_topic("producers-err")
    ck_create_topic(broker, topic, 1)
    T = DescribeProducersRequest.TopicRequest
    response = send(admin, DescribeProducersRequest(topics=[
        T(name=topic, partition_indexes=[0, 5]),
        T(name=unique_topic("missing"), partition_indexes=[0]),
        T(name="bad name!", partition_indexes=[0, 1]),
    ]))
    got = {(t.name, p.partition_index): (p.error_code, list(p.active_producers))
           for t in response.topics for p in t.partitions}
    assert got[(topic, 0)] == (0, [])
    assert got[(topic, 5)][0] == UNKNOWN_TOPIC_OR_PARTITION
    missing = [k for k in got if k[0].startswith("missing")]
    assert [got[k][0] for k in missing] == [UNKNOWN_TOPIC_OR_PARTITION]
    assert got[("bad name!", 0)][0] == INVALID_TOPIC_EXCEPTION
    assert got[("bad name!", 1)][0] == INVALID_TOPIC_EXCEPTION


# ---- DescribeClientQuotas ------------------------------------------------------------


def test_client_quotas_none_configured_and_filters_checked(broker, admin):
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R  # noqa: PLC0415

    C = R.ComponentData
    for components in ([], [C(entity_type="user", match_type=0, match="alice")],
                       [C(entity_type="client-id", match_type=2, match=None),
                        C(entity_type="user", match_type=1, match=None)]):
        r = send(admin, R(components=components, strict=False))
        assert (r.error_code, r.error_message, list(r.entries)) == (0, None, []), components
    for components, code, message in [
        ([C(entity_type="group", match_type=2, match=None)], UNSUPPORTED_VERSION,
         "Unsupported entity type group"),
        ([C(entity_type="user", match_type=0, match=None)], INVALID_REQUEST,
         "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([C(entity_type="ip", match_type=2, match=None),
          C(entity_type="user", match_type=2, match=None)], INVALID_REQUEST,
         "Invalid entity filter component combination. IP filter component should not "
         "be used with user or clientId filter component."),
        ([C(entity_type="user", match_type=2, match=None),
          C(entity_type="user", match_type=1, match=None)], INVALID_REQUEST,
         "Entity type user cannot appear more than once in the filter."),
    ]:
        r = send(admin, R(components=components, strict=True))
        assert (r.error_code, r.error_message, r.entries) == (code, message, None)


# ---- DescribeTopicPartitions ---------------------------------------------------------


def pages(admin, topics, limit):
    """Follows the cursor to the end; the pages' topic entries."""
    out, cursor = [], None
    for _ in range(100):
        page = admin.describe_topic_partitions(topics, response_partition_limit=limit,
                                               cursor=cursor)
        out.append(page["topics"])
        cursor = page["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError("the cursor never ran out")


def test_describe_topic_partitions_pages_with_a_cursor(broker, admin):
    big, small = unique_topic("dtp-big"), unique_topic("dtp-small")
    missing = unique_topic("dtp-missing")
    ck_create_topic(broker, big, 25)
    ck_create_topic(broker, small, 3)
    got = pages(admin, [small, missing, big], 10)
    assert len(got) == 3  # 25 + 3 partitions, 10 per page
    listed, errors = [], {}
    for page in got:
        assert sum(len(t["partitions"]) for t in page) <= 10
        for t in page:
            if t["error_code"]:
                errors[t["name"]] = t["error_code"]
            for p in t["partitions"]:
                assert p["leader_id"] == 0 and p["replica_nodes"] == [0]
                assert p["isr_nodes"] == [0] and p["offline_replicas"] == []
                listed.append((t["name"], p["partition_index"]))
    # Name order, each partition once, in order.
    expected = sorted([(big, i) for i in range(25)] + [(small, i) for i in range(3)])
    assert listed == expected
    assert errors == {missing: UNKNOWN_TOPIC_OR_PARTITION}

    # Every topic (empty list): the same partitions among all topics.
    everything = [(t["name"], p["partition_index"])
                  for page in pages(admin, [], 7) for t in page for p in t["partitions"]]
    assert [x for x in everything if x[0] in (big, small)] == expected

    # A cursor naming a topic that is not asked for: INVALID_REQUEST for each topic.
    page = admin.describe_topic_partitions([small], cursor={"topic_name": big,
                                                            "partition_index": 0})
    assert [(t["name"], t["error_code"]) for t in page["topics"]] \
        == [(small, INVALID_REQUEST)]


# ---- ApiVersions' features -----------------------------------------------------------


def test_features_report_a_kafka_41_broker(admin):
    features = admin.describe_features()
    assert features["metadata.version"]["supported"] == (7, 27)
    assert features["metadata.version"]["finalized"] == (27, 27)
    assert features["metadata.version"]["finalized_epoch"] >= 0
    # No coordinator plugin: no KIP-848 groups, no group.version; never transaction
    # version 2 (EndTxn v5 is not served).
    assert "group.version" not in features
    assert "transaction.version" not in features


def test_features_with_the_coordinator_finalize_group_version_1(broker_factory):
    admin = kp_admin(start_group_broker(broker_factory))
    features = admin.describe_features()
    admin.close()
    assert features["group.version"]["finalized"] == (1, 1)
    assert features["metadata.version"]["finalized"] == (27, 27)


# ---- Cluster mode --------------------------------------------------------------------


def test_cluster_mode_answers_for_the_partitions_each_broker_leads(broker_factory, zookeeper):
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from kafka import TopicPartition  # noqa: PLC0415
    from kafka.protocol.admin.transactions import DescribeProducersRequest  # noqa: PLC0415

    from cluster_testlib import start_cluster, wait_until  # noqa: PLC0415

    b1, b2 = start_cluster(broker_factory, zookeeper, n=2)
    topic = unique_topic("cluster-admin")
    ck = AdminClient({"bootstrap.servers": b1.bootstrap})
    ck.create_topics([NewTopic(topic, 4, 1)])[topic].result(timeout=TIMEOUT)
    admin = kp_admin(b1)
    try:
        # DescribeTopicPartitions names each partition's leader, both brokers among them.
        def leaders():
            page = admin.describe_topic_partitions([topic])
            [t] = page["topics"]
            found = {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            return found if len(found) == 4 and -1 not in found.values() else None
        leader = wait_until(leaders, 15, "the partitions' leaders")
        assert set(leader.values()) == {1, 2}

        # One idempotent producer writes to every partition.
        p = Producer(ck_conf(b1, **{"enable.idempotence": True, "linger.ms": 0}))
        ck_produce(b1, topic, [Msg(key=None, value=b"x" * 100, partition=i % 4)
                               for i in range(40)], producer=p)

        # DescribeLogDirs asks every broker: each lists the partitions it leads.
        by_broker = {r["broker"]: r["log_dirs"] for r in admin.describe_log_dirs([topic])}
        assert set(by_broker) == {1, 2}
        for broker_id, [log_dir] in by_broker.items():
            listed = {p["partition_index"]: p["partition_size"]
                      for t in log_dir["topics"] if t["name"] == topic for p in t["partitions"]}
            mine = {i for i, b in leader.items() if b == broker_id}
            assert set(listed) == mine, (broker_id, listed, leader)
            assert all(size >= 10 * 100 for size in listed.values())

        # DescribeProducers: the leaders describe the producer; another broker answers
        # NOT_LEADER_OR_FOLLOWER.
        tps = [TopicPartition(topic, i) for i in range(4)]
        states = admin.describe_producers(tps)
        ids = {s.producer_id for tp in tps for s in states[tp].active_producers}
        assert len(ids) == 1
        other = {1: 2, 2: 1}[leader[0]]
        T = DescribeProducersRequest.TopicRequest
        response = admin._manager.run(
            admin._manager.send,
            DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[0])]),
            other)
        [[part]] = [t.partitions for t in response.topics]
        assert part.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    finally:
        admin.close()
