"""CreateTopics / DeleteTopics / Metadata through the confluent-kafka AdminClient."""

from __future__ import annotations

import pytest

from drover_testlib import (Msg, ck_admin, ck_consume, ck_create_topic, ck_produce,
                            ck_topic_id, ck_topic_partitions, ck_watermarks, unique_topic)


def create(broker, topic, partitions, **kw):
    from confluent_kafka.admin import NewTopic
    admin = ck_admin(broker)
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                             operation_timeout=15, request_timeout=15, **kw)
    return fs[topic].result(timeout=20)


def delete(broker, topic):
    admin = ck_admin(broker)
    return admin.delete_topics([topic], operation_timeout=15, request_timeout=15)[topic].result(timeout=20)


def error_code(exc_info):
    return exc_info.value.args[0].code()


def test_create_describe_delete_recreate(broker):
    from confluent_kafka import KafkaError
    topic = unique_topic("tp")
    ck_create_topic(broker, topic, 3)
    first_id = ck_topic_id(broker, topic)
    assert first_id not in ("", "AAAAAAAAAAAAAAAAAAAAAA"), "topic ID is missing (zero UUID)"
    with pytest.raises(Exception) as e:
        create(broker, topic, 3)
    assert error_code(e) == KafkaError.TOPIC_ALREADY_EXISTS
    ck_produce(broker, topic, [Msg(b"k", b"v%d" % p, partition=p) for p in range(3)])

    delete(broker, topic)
    assert ck_topic_partitions(broker, topic) is None
    with pytest.raises(Exception) as e:
        delete(broker, topic)
    assert error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Re-created: a new ID, empty partitions, offsets from 0 again.
    ck_create_topic(broker, topic, 2)
    assert ck_topic_id(broker, topic) != first_id
    assert ck_watermarks(broker, topic, [0, 1]) == {0: (0, 0), 1: (0, 0)}
    assert ck_produce(broker, topic, [Msg(b"k", b"fresh", partition=1)]) == [(1, 0)]
    assert ck_consume(broker, topic, {1: 1})[1][0].value == b"fresh"


def test_deleted_topic_stays_deleted_after_restart(broker):
    topic = unique_topic("tp-del")
    ck_create_topic(broker, topic, 1)
    ck_produce(broker, topic, [Msg(b"k", b"v", partition=0)])
    delete(broker, topic)
    broker.restart()
    assert ck_topic_partitions(broker, topic) is None


def test_create_validate_only(broker):
    topic = unique_topic("tp-validate")
    create(broker, topic, 2, validate_only=True)
    assert ck_topic_partitions(broker, topic) is None


@pytest.mark.parametrize("name,partitions", [("bad/name", 1), ("..", 1), ("x" * 250, 1),
                                             (None, 0)])
def test_create_invalid(broker, name, partitions):
    """Invalid names (Kafka: [a-zA-Z0-9._-], at most 249, not . or ..) and partition
    counts are refused, and nothing is created."""
    from confluent_kafka import KafkaException
    name = name or unique_topic("tp-zero")
    with pytest.raises((KafkaException, ValueError)):
        create(broker, name, partitions)
    broker.assert_alive()
    assert ck_topic_partitions(broker, name) is None


def test_create_with_broker_default_partitions(broker_factory):
    """num_partitions = -1 (KIP-464) takes the broker's default_partitions."""
    b = broker_factory("[topics]\ndefault_partitions = 3\n")
    topic = unique_topic("tp-default")
    create(b, topic, -1)
    assert ck_topic_partitions(b, topic) == 3


def test_topics_created_before_restart_survive(broker):
    topics = {unique_topic(f"tp-keep{i}"): i + 1 for i in range(3)}
    ids = {}
    for t, n in topics.items():
        ck_create_topic(broker, t, n)
        ids[t] = ck_topic_id(broker, t)
    broker.restart()
    for t, n in topics.items():
        assert ck_topic_partitions(broker, t) == n
        assert ck_topic_id(broker, t) == ids[t]


def test_delete_racing_auto_creating_producers_loses_nothing_acknowledged(broker):
    """Producers keep auto-creating a topic while it is deleted again and again; what
    was acknowledged after the last delete must survive a restart (review finding:
    the delete used to remove directories a re-created topic had just opened)."""
    import threading
    import time

    from confluent_kafka import Producer

    topic = unique_topic("tp-race")
    stop = threading.Event()
    acked = []
    lock = threading.Lock()

    def produce():
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                      "enable.idempotence": False})

        def on_delivery(err, msg):
            if err is None:
                with lock:
                    acked.append((time.monotonic(), msg.offset(), msg.value()))

        n = 0
        while not stop.is_set():
            try:
                p.produce(topic, value=b"m%d" % n, partition=0, on_delivery=on_delivery)
            except BufferError:
                pass
            p.poll(0.001)
            n += 1
        p.flush(10)

    threads = [threading.Thread(target=produce) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 3
    last_delete = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        try:
            delete(broker, topic)
            last_delete = time.monotonic()
        except Exception:
            pass  # not there at that moment: fine
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(timeout=30)

    before = ck_watermarks(broker, topic, [0])[0]
    broker.restart()
    after = ck_watermarks(broker, topic, [0])[0]
    assert after == before, f"log end moved across restart: {before} -> {after}"
    # Every message acknowledged well after the last delete is readable.
    survivors = [a for a in acked if a[0] > last_delete + 0.5]
    assert survivors, "nothing was acknowledged after the last delete"
    assert max(o for _, o, _ in survivors) < after[1]


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state",
                                  "__share_group_state"])
def test_kafkas_internal_topic_names_are_reserved(broker, name):
    """Kafka's internal topic names (issue 28 item 7): CreateTopics answers
    INVALID_REQUEST ("Creation of internal topic ... is prohibited"), DeleteTopics
    INVALID_REQUEST, and neither Metadata nor Produce auto-creates them. Before, they
    were created and deleted as ordinary topics."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    with pytest.raises(KafkaException) as e:
        create(broker, name, 1)
    assert error_code(e) == KafkaError.INVALID_REQUEST
    assert "internal topic" in str(e.value)
    with pytest.raises(KafkaException) as e:
        delete(broker, name)
    assert error_code(e) == KafkaError.INVALID_REQUEST
    p = Producer({"bootstrap.servers": f"{broker.host}:{broker.port}",
                  "message.timeout.ms": 1500})
    p.produce(name, b"x")
    p.flush(5)
    assert ck_topic_partitions(broker, name) is None
    broker.assert_alive()


def test_names_colliding_with_internal_topics_are_reserved(broker):
    """`.` and `_` count as the same character (Kafka's Topic.hasCollision): a name that
    collides with an internal topic's is refused too (found by a hostile review)."""
    from confluent_kafka import KafkaError, KafkaException

    with pytest.raises(KafkaException) as e:
        create(broker, "__consumer.offsets", 1)
    assert error_code(e) == KafkaError.INVALID_REQUEST
    assert ck_topic_partitions(broker, "__consumer.offsets") is None
