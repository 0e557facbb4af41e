"""CreatePartitions (API key 37) through the confluent-kafka AdminClient: growing a
topic, using the new partitions, and Kafka's refusals."""

from __future__ import annotations

import pytest

from drover_testlib import (Msg, api_versions, ck_admin, ck_consume, ck_create_topic,
                            ck_produce, ck_topic_id, ck_topic_partitions, ck_watermarks,
                            unique_topic)


def create_partitions(broker, topic, total, *, validate_only=False, replica_assignment=None):
    from confluent_kafka.admin import NewPartitions
    admin = ck_admin(broker)  # keep a reference: the futures die with the client
    new = (NewPartitions(topic, total) if replica_assignment is None
           else NewPartitions(topic, total, replica_assignment))
    fs = admin.create_partitions([new],
                                 operation_timeout=15, request_timeout=15,
                                 validate_only=validate_only)
    return fs[topic].result(timeout=20)


def refusal(broker, topic, total, **kw):
    """The KafkaError of a refused create_partitions."""
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException) as e:
        create_partitions(broker, topic, total, **kw)
    return e.value.args[0]


def test_advertises_kafka_41_range(broker):
    assert api_versions(broker).get(37) == (0, 3)


def test_grow_produce_consume_and_restart(broker):
    topic = unique_topic("cp-grow")
    ck_create_topic(broker, topic, 3)
    topic_id = ck_topic_id(broker, topic)
    old = [Msg(b"k%d" % p, b"before-%d" % p, [("h", b"%d" % p)], partition=p) for p in range(3)]
    assert ck_produce(broker, topic, old) == [(p, 0) for p in range(3)]

    assert create_partitions(broker, topic, 6) is None
    # Metadata shows the new partitions right after the response.
    assert ck_topic_partitions(broker, topic) == 6
    assert ck_topic_id(broker, topic) == topic_id
    assert ck_watermarks(broker, topic, range(6)) == {
        0: (0, 1), 1: (0, 1), 2: (0, 1), 3: (0, 0), 4: (0, 0), 5: (0, 0)}

    new = [Msg(b"k5", b"after-%d" % i, [("i", b"%d" % i)], partition=5) for i in range(3)]
    assert ck_produce(broker, topic, new) == [(5, 0), (5, 1), (5, 2)]
    got = ck_consume(broker, topic, {5: 3})[5]
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == \
        [(i, m.key, m.value, m.headers) for i, m in enumerate(new)]
    # The old partitions kept their data.
    got = ck_consume(broker, topic, {0: 1, 1: 1, 2: 1})
    assert {p: (recs[0].offset, recs[0].value) for p, recs in got.items()} == \
        {p: (0, b"before-%d" % p) for p in range(3)}

    broker.restart()
    assert ck_topic_partitions(broker, topic) == 6
    assert ck_topic_id(broker, topic) == topic_id
    assert ck_watermarks(broker, topic, [0, 5]) == {0: (0, 1), 5: (0, 3)}
    assert ck_consume(broker, topic, {5: 3})[5][2].value == b"after-2"


def test_refusals(broker_factory):
    from confluent_kafka import KafkaError
    b = broker_factory("[topics]\nmax_partitions = 8\n")
    topic = unique_topic("cp-refuse")
    ck_create_topic(b, topic, 3)
    for total in (2, 3):  # shrink, same count
        err = refusal(b, topic, total)
        assert err.code() == KafkaError.INVALID_PARTITIONS, err
        assert "would not be an increase" in err.str(), err
    err = refusal(b, topic, 9)  # above topics.max_partitions
    assert err.code() == KafkaError.INVALID_PARTITIONS, err
    err = refusal(b, unique_topic("cp-missing"), 4)
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err
    assert "does not exist" in err.str(), err
    # Manual placement: only this broker (id 0), once per new partition.
    err = refusal(b, topic, 5, replica_assignment=[[0], [1]])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, err
    assert "only broker is 0" in err.str(), err  # the broker's answer, not a local check
    assert ck_topic_partitions(b, topic) == 3
    b.assert_alive()
    create_partitions(b, topic, 5, replica_assignment=[[0], [0]])
    assert ck_topic_partitions(b, topic) == 5
    create_partitions(b, topic, 8)
    assert ck_topic_partitions(b, topic) == 8


def test_validate_only_changes_nothing(broker):
    from confluent_kafka import KafkaError
    topic = unique_topic("cp-validate")
    ck_create_topic(broker, topic, 3)
    assert create_partitions(broker, topic, 6, validate_only=True) is None
    assert ck_topic_partitions(broker, topic) == 3
    err = refusal(broker, topic, 2, validate_only=True)
    assert err.code() == KafkaError.INVALID_PARTITIONS, err
    assert ck_topic_partitions(broker, topic) == 3
    broker.restart()
    assert ck_topic_partitions(broker, topic) == 3
    assert not (broker.data_dir / "logs" / f"{topic}-3").exists()
