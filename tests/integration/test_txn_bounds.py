"""Issue 28 item 1, three of its parts, against a real broker:

- An InitProducerId storm from one client does not lock transactional producers out:
  new ids from one client address are bounded per second (the rest answered
  COORDINATOR_LOAD_IN_PROGRESS, retriable), and at `max_transactional_ids` a new id
  evicts an idle one, so a new confluent-kafka `transactional.id` from another client
  initialises and commits during and after the storm. Before: the storm filled the cap
  and every new id got POLICY_VIOLATION for `transactional_id_expiration_ms` (7 days).
- EndTxn(abort) after the same transaction committed is INVALID_TXN_STATE, as in Kafka.
  Before: success.
- `segment.bytes` below Kafka 4.x's 1 MiB is INVALID_CONFIG on CreateTopics,
  IncrementalAlterConfigs and AlterConfigs. Before: accepted down to 61 bytes.
"""

from __future__ import annotations

import socket
import threading
import time

from drover_testlib import RawConn, ck_conf, ck_create_topic, http_get, unique_topic
from test_transactions_raw import (
    INVALID_TXN_STATE,
    NONE,
    POLICY_VIOLATION,
    add_partitions,
    describe_txn,
    end_txn,
    init_pid,
    wait_for,
)

COORDINATOR_LOAD_IN_PROGRESS = 14
CAP = 60
PER_SEC = 20
STORM_CONFIG = f"""
[transactions]
max_transactional_ids = {CAP}
new_ids_per_sec_per_client = {PER_SEC}
"""


def raw_conn_from(broker, source_ip: str) -> RawConn:
    """A RawConn whose client address is `source_ip` (any 127/8 address reaches the
    broker's loopback listener), so the broker sees another client."""
    conn = RawConn.__new__(RawConn)
    conn.sock = socket.create_connection((broker.host, broker.port), timeout=10,
                                         source_address=(source_ip, 0))
    conn.sock.settimeout(10)
    conn.corr = 0
    return conn


def metric(broker, name: str) -> int:
    _, _, text = http_get(f"http://{broker.host}:{broker.admin_port}/metrics")
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    assert lines, f"{name} not in /metrics"
    return int(float(lines[0].split()[1]))


def test_an_init_producer_id_storm_does_not_lock_out_new_transactional_ids(broker_factory):
    from confluent_kafka import Producer
    broker = broker_factory(STORM_CONFIG)
    topic = unique_topic("txn-storm")
    ck_create_topic(broker, topic, 1)

    codes: dict[int, int] = {}
    stop = threading.Event()
    started = time.monotonic()
    granted_at: list[float] = []

    def storm():
        with raw_conn_from(broker, "127.0.0.2") as c:
            i = 0
            while not stop.is_set():
                err = init_pid(c, f"storm-{i}")[0]
                codes[err] = codes.get(err, 0) + 1
                if err == NONE:
                    granted_at.append(time.monotonic())
                i += 1

    storming = threading.Thread(target=storm, daemon=True)
    storming.start()
    try:
        # Until the storm has filled the cap (and then some): beyond it, only evictions.
        wait_for(lambda: codes.get(NONE, 0) >= CAP + 10, "the storm to fill the id cap", timeout=60)
        # Another client, meanwhile: a new id at once (its own budget), from raw frames...
        with RawConn(broker) as c:
            err, pid, epoch = init_pid(c, "honest-raw")
            assert err == NONE
            assert add_partitions(c, "honest-raw", pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
            assert end_txn(c, "honest-raw", pid, epoch, True) == NONE
        # ...and from confluent-kafka with its defaults: initialise, commit.
        p = Producer(ck_conf(broker, **{"transactional.id": "honest-ck"}))
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"after-the-storm", partition=0)
        p.commit_transaction(30)
        p.flush(10)
    finally:
        stop.set()
        storming.join(timeout=30)
    elapsed = time.monotonic() - started

    # The storm's client was held to its rate (one second's worth at once, then
    # PER_SEC a second), refused with the retriable COORDINATOR_LOAD_IN_PROGRESS and
    # never with POLICY_VIOLATION: the cap made room by evicting its unused ids.
    assert set(codes) <= {NONE, COORDINATOR_LOAD_IN_PROGRESS}, codes
    assert codes.get(COORDINATOR_LOAD_IN_PROGRESS, 0) > 0, codes
    assert codes[NONE] <= PER_SEC * (elapsed + 1) + 1, (codes, elapsed)
    assert metric(broker, "drover_init_producer_id_throttled_total") == codes[COORDINATOR_LOAD_IN_PROGRESS]
    assert metric(broker, "drover_transactional_ids_evicted_total") >= codes[NONE] + 2 - CAP
    with RawConn(broker) as c:
        assert describe_txn(c, "honest-raw")[1] == "CompleteCommit"
        wait_for(lambda: describe_txn(c, "honest-ck")[1] == "CompleteCommit", "the commit")
        # Still at most CAP ids, the honest ones among them.
        assert describe_txn(c, "storm-0")[0] != NONE  # evicted long ago

    # The honest producers survive a restart; a new id is still accepted after it.
    broker.restart()
    with RawConn(broker) as c:
        assert describe_txn(c, "honest-ck")[1] == "CompleteCommit"
        assert init_pid(c, "after-restart")[0] == NONE
    broker.assert_alive()


def test_every_id_with_an_open_transaction_is_the_only_refusal(broker_factory):
    """POLICY_VIOLATION only when no id is idle: all have a transaction open."""
    broker = broker_factory("[transactions]\nmax_transactional_ids = 3\n")
    topic = unique_topic("txn-cap")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        for name in ("a", "b", "c"):
            err, pid, epoch = init_pid(c, name)
            assert err == NONE
            assert add_partitions(c, name, pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
        assert init_pid(c, "d")[0] == POLICY_VIOLATION
        # One ends: once it is complete (idle), the new id takes its place.
        status, state, pid_a, epoch_a, _ = describe_txn(c, "a")
        assert (status, state) == (NONE, "Ongoing")
        assert end_txn(c, "a", pid_a, epoch_a, False) == NONE
        wait_for(lambda: describe_txn(c, "a")[1] == "CompleteAbort", "the abort")
        assert init_pid(c, "d")[0] == NONE
        assert describe_txn(c, "a")[0] != NONE
        for name in ("b", "c"):
            assert describe_txn(c, name)[1] == "Ongoing"


def test_an_abort_after_the_commit_is_invalid_txn_state(broker_factory):
    broker = broker_factory(None)
    topic = unique_topic("txn-abort-after")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        err, pid, epoch = init_pid(c, "t")
        assert err == NONE
        assert add_partitions(c, "t", pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
        assert end_txn(c, "t", pid, epoch, True) == NONE
        wait_for(lambda: describe_txn(c, "t")[1] == "CompleteCommit", "the commit")
        # Kafka's answer: the committed data is not aborted, and nothing changes.
        assert end_txn(c, "t", pid, epoch, False) == INVALID_TXN_STATE
        assert describe_txn(c, "t")[1:4] == ("CompleteCommit", pid, epoch)
        # A retried commit is still answered success, and the next transaction works.
        assert end_txn(c, "t", pid, epoch, True) == NONE
        assert add_partitions(c, "t", pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
        assert end_txn(c, "t", pid, epoch, False) == NONE
        wait_for(lambda: describe_txn(c, "t")[1] == "CompleteAbort", "the abort")
        assert end_txn(c, "t", pid, epoch, True) == INVALID_TXN_STATE


def test_segment_bytes_below_one_mebibyte_is_invalid_config(broker):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewTopic, ResourceType)
    admin = AdminClient(ck_conf(broker))

    def error_of(future):
        try:
            future.result(timeout=30)
        except Exception as e:  # noqa: BLE001 - the KafkaException carries the error
            return e.args[0]
        raise AssertionError("accepted")

    # CreateTopics.
    small = unique_topic("seg-small")
    fs = admin.create_topics([NewTopic(small, 1, 1, config={"segment.bytes": "128"})],
                             request_timeout=30)
    err = error_of(fs[small])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert "segment.bytes" in err.str() and "at least 1048576" in err.str(), err.str()
    assert not (broker.data_dir / "logs" / f"{small}-0").exists()

    # IncrementalAlterConfigs and AlterConfigs on an existing topic.
    topic = unique_topic("seg-alter")
    ck_create_topic(broker, topic, 1)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.bytes", "128", incremental_operation=AlterConfigOpType.SET)])
    err = error_of(admin.incremental_alter_configs([res], request_timeout=30)[res])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert "at least 1048576" in err.str(), err.str()
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.bytes": "128"})
    err = error_of(admin.alter_configs([legacy], request_timeout=30)[legacy])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    # flush.ms below Kafka's 0, too.
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("flush.ms", "-1", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([res], request_timeout=30)[res]).code() \
        == KafkaError.INVALID_CONFIG

    # The bound itself is accepted.
    ok = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([ok], request_timeout=30)[ok].result(timeout=30)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                       request_timeout=30)
    configs = next(iter(described.values())).result(timeout=30)
    assert configs["segment.bytes"].value == "1048576"
