"""The admin APIs in cluster mode (real ZooKeeper, two `drover serve` processes): topic
configs altered through one broker reach the other through ZooKeeper and survive its
restart; DeleteRecords only on the partition's leader; DescribeCluster lists both."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from cluster_testlib import start_cluster, wait_until
from drover_testlib import Msg, RawConn, ck_produce, kstr

TIMEOUT = 20


def admin(b) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def retention_ms(b, topic: str) -> str | None:
    a = admin(b)
    res = ConfigResource(ResourceType.TOPIC, topic)
    try:
        return a.describe_configs([res], request_timeout=TIMEOUT)[res].result(
            timeout=TIMEOUT)["retention.ms"].value
    except Exception:  # noqa: BLE001 - the topic may not have reached this broker yet
        return None


def test_configs_delete_records_and_describe_cluster_across_brokers(broker_factory, zookeeper):
    brokers = start_cluster(broker_factory, zookeeper, n=2)
    b1, b2 = brokers
    a1 = admin(b1)
    fs = a1.create_topics([NewTopic("cfg", 2, 1, config={"retention.ms": "86400000"})])
    fs["cfg"].result(timeout=TIMEOUT)
    wait_until(lambda: retention_ms(b2, "cfg") == "86400000", 15, "created config on broker 2")

    res = ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    a1.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    wait_until(lambda: retention_ms(b2, "cfg") == "3600000", 15, "altered config on broker 2")
    b2.restart()
    # A broker's copy lags ZooKeeper by up to a refresh interval (cluster/topic_configs.rs),
    # right after a restart too: the admin client may ask any broker for a topic's
    # configs, so the wait above can pass on broker 1's answer before broker 2 applied
    # the change, and broker 2 then restarts with its older copy until its first refresh.
    wait_until(lambda: retention_ms(b2, "cfg") == "3600000", 15, "config after restart")

    # DescribeCluster through either broker lists both (once broker 2's registration
    # after its restart has reached broker 1).
    def described_ids(b):
        a = admin(b)  # alive until the future is done
        result = a.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        return sorted(n.id for n in result.nodes)

    for b in brokers:
        wait_until(lambda: described_ids(b) == [1, 2], 15, "both brokers described")

    # DeleteRecords: the client routes to the leader, which answers; the other broker
    # refuses with NOT_LEADER_OR_FOLLOWER.
    md = a1.list_topics("cfg", timeout=TIMEOUT)
    leaders = {p: pm.leader for p, pm in md.topics["cfg"].partitions.items()}
    ck_produce(b1, "cfg", [Msg(b"k", b"v%d" % i, [], None, partition=0) for i in range(10)])
    tp = TopicPartition("cfg", 0, 4)
    assert a1.delete_records([tp], request_timeout=TIMEOUT)[tp].result(
        timeout=TIMEOUT).low_watermark == 4
    other = b2 if leaders[0] == 1 else b1
    body = (struct.pack(">i", 1) + kstr("cfg") + struct.pack(">i", 1)
            + struct.pack(">iq", 0, 5) + struct.pack(">i", 5000))
    with RawConn(other) as c:
        corr = c.request(21, 0, body)
        resp = c.recv_response(corr)
    name_len = struct.unpack_from(">h", resp, 8)[0]
    pos = 10 + name_len + 4
    _p, low, err = struct.unpack_from(">iqh", resp, pos)
    assert err == 6, f"expected NOT_LEADER_OR_FOLLOWER (6), got {err}"


def topic_configs(b, topic: str) -> dict[str, str]:
    """The topic's dynamic (overridden) configs as broker `b` describes them."""
    from confluent_kafka.admin import ConfigSource
    a = admin(b)
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = a.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    return {n: e.value for n, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def set_config(b, topic: str, name: str, value: str) -> None:
    """IncrementalAlterConfigs SET through broker `b`; raises on any error."""
    a = admin(b)  # alive until the future is done
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)


def test_alters_through_two_brokers_both_stick(broker_factory, zookeeper):
    """A change made through one broker and one made at once through the other are both
    kept: each alter applies its operations to the overrides in ZooKeeper (versioned
    read-modify-write), not to its broker's copy, which lags by up to a refresh. Kafka
    keeps both too (its controller applies each alter to the current set)."""
    b1, b2 = start_cluster(broker_factory, zookeeper, n=2)
    a1 = admin(b1)
    a1.create_topics([NewTopic("race", 1, 1)])["race"].result(timeout=TIMEOUT)
    wait_until(lambda: retention_ms(b2, "race") is not None, 15, "topic on broker 2")
    want = {}
    for i in range(5):
        segment_ms, retention_bytes = str(1000000 + i), str(2000000 + i)
        set_config(b2, "race", "segment.ms", segment_ms)
        set_config(b1, "race", "retention.bytes", retention_bytes)
        want = {"segment.ms": segment_ms, "retention.bytes": retention_bytes}
    for b in (b1, b2):
        wait_until(lambda: topic_configs(b, "race") == want, 15,
                   "both changes on each broker")


def test_concurrent_alters_through_two_brokers_all_succeed(broker_factory, zookeeper):
    """Alters racing through both brokers all succeed (no KAFKA_STORAGE_ERROR for a lost
    ZooKeeper version race, which admin clients do not retry) and every last value
    stays."""
    import threading
    b1, b2 = start_cluster(broker_factory, zookeeper, n=2)
    a1 = admin(b1)
    a1.create_topics([NewTopic("conc", 1, 1)])["conc"].result(timeout=TIMEOUT)
    wait_until(lambda: retention_ms(b2, "conc") is not None, 15, "topic on broker 2")
    rounds = 15
    barrier = threading.Barrier(2)
    errors: list = []

    def run(b, name: str, base: int) -> None:
        for i in range(rounds):
            barrier.wait(timeout=60)
            try:
                set_config(b, "conc", name, str(base + i))
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append((name, i, e))

    threads = [threading.Thread(target=run, args=(b1, "retention.ms", 3600000)),
               threading.Thread(target=run, args=(b2, "segment.bytes", 2000000))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]
    want = {"retention.ms": str(3600000 + rounds - 1), "segment.bytes": str(2000000 + rounds - 1)}
    for b in (b1, b2):
        wait_until(lambda: topic_configs(b, "conc") == want, 15, "every last value on each broker")


def test_one_cluster_id_and_one_controller_across_brokers(broker_factory, zookeeper):
    """Every broker reports the cluster id stored once in ZooKeeper (`/cluster/id`, as
    Kafka's ZooKeeper mode) and the same controller, the lowest live broker id, in
    Metadata and DescribeCluster (librdkafka warns about brokers that "report different
    ClusterId")."""
    b1, b2 = start_cluster(broker_factory, zookeeper, n=2)

    def reported(b):
        a = admin(b)  # alive until the future is done
        dc = a.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        md = a.list_topics(timeout=TIMEOUT)
        return (dc.cluster_id, dc.controller.id, md.cluster_id, md.controller_id,
                sorted(n.id for n in dc.nodes))

    def agreed():
        got = [reported(b) for b in (b1, b2)]
        return got if got[0] == got[1] and got[0][4] == [1, 2] else None

    got = wait_until(agreed, 15, "both brokers reporting the same cluster")[0]
    cluster_id, controller, md_cluster_id, md_controller, _ = got
    assert cluster_id == md_cluster_id and cluster_id
    assert controller == md_controller == 1
    # The id is the cluster's, not a broker's: it stays across a restart of either.
    b1.restart()
    again = wait_until(agreed, 15, "both brokers after a restart")[0]
    assert again[0] == cluster_id
