"""Group configs (resource type GROUP, 32; Kafka's `GroupConfig`, KIP-848/KIP-932) with
confluent-kafka's AdminClient, as `kafka-configs.sh --entity-type groups` uses them: SET
and DELETE of `share.*` overrides, validation as Kafka's, the defaults described, the
overrides kept across a restart (standalone: the data directory) and, in cluster mode,
altered through one broker and described through the other (ZooKeeper)."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, ResourceType)

from cluster_testlib import start_cluster, wait_until
from drover_testlib import RawConn, kstr

TIMEOUT = 20
RESET = "share.auto.offset.reset"


def admin(b) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def describe(b, group: str) -> dict:
    res = ConfigResource(ResourceType.GROUP, group)
    a = admin(b)  # alive until the future is done
    return a.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)


def alter(b, group: str, *changes) -> None:
    """changes: (name, value or None for DELETE)."""
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET if v is not None
                    else AlterConfigOpType.DELETE) for n, v in changes])
    a = admin(b)  # alive until the future is done
    a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)


def refusal(b, group: str, name: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        alter(b, group, (name, value))
    return e.value.args[0]


def test_group_configs_are_set_validated_described_and_kept(broker):
    b = broker
    # A group with no members and no overrides: every supported config at its default.
    configs = describe(b, "orders-share")
    assert configs[RESET].value == "latest"
    assert configs[RESET].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["share.isolation.level"].value == "read_uncommitted"
    assert configs["share.record.lock.duration.ms"].value == "30000"

    alter(b, "orders-share", (RESET, "earliest"), ("share.record.lock.duration.ms", "15000"))
    configs = describe(b, "orders-share")
    assert configs[RESET].value == "earliest"
    assert configs[RESET].source == ConfigSource.GROUP_CONFIG.value
    assert configs["share.record.lock.duration.ms"].value == "15000"
    # Other groups keep the defaults.
    assert describe(b, "other")[RESET].value == "latest"

    # Kafka's validation: INVALID_CONFIG with the reason, nothing changed.
    for name, value in [(RESET, "none"), (RESET, "by_duration:10m"),
                        ("share.record.lock.duration.ms", "1000"),
                        ("share.isolation.level", "READ_COMMITTED"),
                        ("no.such.config", "1")]:
        err = refusal(b, "orders-share", name, value)
        assert err.code() == KafkaError.INVALID_CONFIG, (name, value, err)
    err = refusal(b, "orders-share", "consumer.session.timeout.ms", "60000")
    assert err.code() == KafkaError.INVALID_CONFIG and "coordinator plugin" in err.str(), err
    assert describe(b, "orders-share")[RESET].value == "earliest"
    alter(b, "orders-share", (RESET, "by_duration:PT1H"))

    # Durable: the overrides come back after a restart; DELETE returns to the default.
    b.restart()
    configs = describe(b, "orders-share")
    assert configs[RESET].value == "by_duration:PT1H"
    assert configs["share.record.lock.duration.ms"].value == "15000"
    alter(b, "orders-share", ("share.record.lock.duration.ms", None))
    b.restart()
    configs = describe(b, "orders-share")
    assert configs["share.record.lock.duration.ms"].value == "30000"
    assert configs["share.record.lock.duration.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def reset_on(b, group: str) -> str | None:
    """`share.auto.offset.reset` of `group` as broker `b` itself answers DescribeConfigs v1
    (raw frames: the AdminClient may send a group's DescribeConfigs to any broker)."""
    body = (struct.pack(">i", 1) + struct.pack(">b", 32) + kstr(group)
            + struct.pack(">i", 1) + kstr(RESET) + struct.pack(">?", False))
    with RawConn(b) as c:
        resp = c.recv_response(c.request(32, 1, body))
    # throttle, results count, error code, error message, type, name, configs count
    pos = 8
    (err,) = struct.unpack_from(">h", resp, pos)
    assert err == 0, f"DescribeConfigs error {err}"
    pos += 2
    (n,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + max(n, 0) + 1
    (n,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + n
    (count,) = struct.unpack_from(">i", resp, pos)
    assert count == 1, count
    pos += 4
    (n,) = struct.unpack_from(">h", resp, pos)
    assert resp[pos + 2:pos + 2 + n].decode() == RESET
    pos += 2 + n
    (n,) = struct.unpack_from(">h", resp, pos)
    return resp[pos + 2:pos + 2 + n].decode()


def test_group_configs_altered_on_one_broker_apply_on_the_other(broker_factory, zookeeper):
    b1, b2 = start_cluster(broker_factory, zookeeper, n=2)
    assert reset_on(b2, "cluster-share") == "latest"
    alter(b1, "cluster-share", (RESET, "earliest"))
    wait_until(lambda: reset_on(b2, "cluster-share") == "earliest", 15,
               "broker 2 follows the change")
    b2.restart()
    assert reset_on(b2, "cluster-share") in ("earliest", "latest")
    wait_until(lambda: reset_on(b2, "cluster-share") == "earliest", 15,
               "broker 2 after its restart")
    alter(b2, "cluster-share", (RESET, None))
    wait_until(lambda: reset_on(b1, "cluster-share") == "latest", 15,
               "the delete reaches broker 1")
