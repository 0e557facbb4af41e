"""The admin APIs tools call, through confluent-kafka's AdminClient and raw frames:
DescribeConfigs, IncrementalAlterConfigs / AlterConfigs, DeleteRecords, DescribeCluster.

Every test runs a real `drover serve` process; nothing about timings is asserted (waits
poll until a deadline)."""

from __future__ import annotations

import struct
import time

import pytest

from drover_testlib import (Msg, RawConn, ck_admin, ck_consume, ck_create_topic, ck_produce,
                            ck_watermarks, kcat, kstr, unique_topic)

TIMEOUT = 20


def _describe(broker, rtype, name: str) -> dict:
    """name -> ConfigEntry (librdkafka always asks for synonyms)."""
    from confluent_kafka.admin import ConfigResource
    admin = ck_admin(broker)
    res = ConfigResource(rtype, name)
    fs = admin.describe_configs([res], request_timeout=TIMEOUT)
    return fs[res].result(timeout=TIMEOUT)


def _describe_topic(broker, topic: str) -> dict:
    from confluent_kafka.admin import ResourceType
    return _describe(broker, ResourceType.TOPIC, topic)


def _error_of(future):
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException) as e:
        future.result(timeout=TIMEOUT)
    return e.value.args[0]


def _incremental(broker, topic: str, entries, validate_only: bool = False):
    from confluent_kafka.admin import ConfigResource, ResourceType
    admin = ck_admin(broker)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    fs = admin.incremental_alter_configs([res], validate_only=validate_only,
                                         request_timeout=TIMEOUT)
    return _Done(fs[res])


def _set(name: str, value: str | None, op=None):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    return ConfigEntry(name, value, incremental_operation=op or AlterConfigOpType.SET)


# ---- DescribeConfigs ---------------------------------------------------------------


def test_describe_topic_configs_defaults_and_broker_settings(broker_factory):
    from confluent_kafka.admin import ConfigSource
    broker = broker_factory("[log]\nretention_bytes = 123456789\n")
    topic = unique_topic("dc")
    ck_create_topic(broker, topic, 1)
    configs = _describe_topic(broker, topic)
    for name in ["cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes",
                 "segment.ms", "flush.messages", "flush.ms", "max.message.bytes"]:
        assert name in configs, f"{name} missing from {sorted(configs)}"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    # Set in drover.toml: the broker's value, reported as a static broker config, with
    # its synonym under the broker-level name.
    rb = configs["retention.bytes"]
    assert rb.value == "123456789"
    assert rb.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not rb.is_read_only
    # (confluent-kafka keys synonyms by name, so the broker's two collapse into one.)
    assert "log.retention.bytes" in rb.synonyms, rb.synonyms


def test_describe_topic_config_filter_and_unknown_topic(broker):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigResource, ResourceType
    topic = unique_topic("dcf")
    ck_create_topic(broker, topic, 1)
    admin = ck_admin(broker)
    missing = ConfigResource(ResourceType.TOPIC, unique_topic("absent"))
    fs = admin.describe_configs([missing], request_timeout=TIMEOUT)
    err = _error_of(fs[missing])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err

    # Raw DescribeConfigs v1 with configuration_keys: unknown names are just absent.
    body = (struct.pack(">i", 1) + struct.pack(">b", 2) + kstr(topic)
            + struct.pack(">i", 2) + kstr("retention.ms") + kstr("no.such.config")
            + b"\x00")
    with RawConn(broker) as conn:
        corr = conn.request(32, 1, body)
        results = _parse_describe_v1(conn.recv_response(corr))
    assert results == [(0, 2, topic, [("retention.ms", "604800000")])]


def test_describe_broker_configs(broker):
    from confluent_kafka.admin import ResourceType
    md = ck_admin(broker).list_topics(timeout=TIMEOUT)
    broker_id = next(iter(md.brokers))
    configs = _describe(broker, ResourceType.BROKER, str(broker_id))
    assert configs["broker.id"].value == str(broker_id)
    assert configs["log.retention.ms"].value == "604800000"
    assert configs["log.cleanup.policy"].value == "delete"
    assert configs["message.max.bytes"].value == "1048588"
    assert all(c.is_read_only for c in configs.values())


def test_describe_cluster(broker):
    admin = ck_admin(broker)
    result = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert result.cluster_id
    assert [n.port for n in result.nodes] == [broker.port]
    assert result.controller is not None and result.controller.id == result.nodes[0].id
    assert result.nodes[0].rack is None


def test_describe_cluster_and_metadata_report_the_configured_rack(broker_factory):
    broker = broker_factory('[server]\nrack = "rack-a"\n')
    admin = ck_admin(broker)
    result = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert [n.rack for n in result.nodes] == ["rack-a"]
    md = admin.list_topics(timeout=TIMEOUT)
    assert [b.id for b in md.brokers.values()] == [result.nodes[0].id]


def test_kcat_metadata_listing_still_works(broker):
    topic = unique_topic("kl")
    ck_create_topic(broker, topic, 2)
    out = kcat(broker, ["-L", "-t", topic]).stdout.decode()
    assert "1 brokers:" in out, out
    assert f'topic "{topic}" with 2 partitions:' in out, out


def test_hostile_describe_configs_with_100000_resources(broker):
    n = 100_000
    body = struct.pack(">i", n) + (struct.pack(">b", 2) + kstr("t") + struct.pack(">i", -1)) * n
    body += b"\x00"
    with RawConn(broker, timeout=60) as conn:
        corr = conn.request(32, 1, body)
        results = _parse_describe_v1(conn.recv_response(corr))
    assert len(results) == n
    assert {r[0] for r in results} == {42}  # INVALID_REQUEST, nothing looked up
    assert all(r[3] == [] for r in results)
    broker.assert_alive()


def _parse_describe_v1(body: bytes):
    """[(error, resource type, name, [(config, value)])] of a DescribeConfigs v1 body."""
    pos = 4  # throttle
    (n,) = struct.unpack_from(">i", body, pos)
    pos += 4

    def string():
        nonlocal pos
        (ln,) = struct.unpack_from(">h", body, pos)
        pos += 2
        if ln < 0:
            return None
        s = body[pos:pos + ln].decode()
        pos += ln
        return s

    out = []
    for _ in range(n):
        (err,) = struct.unpack_from(">h", body, pos)
        pos += 2
        string()  # message
        (rtype,) = struct.unpack_from(">b", body, pos)
        pos += 1
        name = string()
        (nc,) = struct.unpack_from(">i", body, pos)
        pos += 4
        configs = []
        for _ in range(nc):
            cname = string()
            value = string()
            pos += 1 + 1 + 1  # read only, source, sensitive
            (ns,) = struct.unpack_from(">i", body, pos)
            pos += 4
            for _ in range(ns):
                string()
                string()
                pos += 1
            configs.append((cname, value))
        out.append((err, rtype, name, configs))
    return out


# ---- DeleteRecords -----------------------------------------------------------------

# Segments roll by age (a produce call after more than 1 ms starts a new one): Kafka 4.x
# and Drover refuse segment sizes below 1 MiB, which these small logs would never reach.
SMALL_SEGMENTS = "[log]\nsegment_ms = 1\nretention_ms = -1\n"


def _fill(broker, topic: str, n: int, batches: int, ts_ms: int | None = None) -> None:
    per = n // batches
    for b in range(batches):  # one produce call per batch: several record batches
        msgs = [Msg(b"k", b"v%05d" % i + b"x" * 200, [], ts_ms, partition=0)
                for i in range(b * per, (b + 1) * per)]
        ck_produce(broker, topic, msgs)


class _Done:
    """A finished admin future's outcome (the client that made it is gone)."""

    def __init__(self, future):
        self.value, self.error = None, None
        try:
            self.value = future.result(timeout=TIMEOUT)
        except Exception as e:  # noqa: BLE001 - re-raised by result()
            self.error = e

    def result(self, timeout=None):
        if self.error is not None:
            raise self.error
        return self.value


def _delete_records(broker, topic: str, partition: int, offset: int) -> _Done:
    from confluent_kafka import TopicPartition
    admin = ck_admin(broker)  # alive until the future is done: futures die with it
    tp = TopicPartition(topic, partition, offset)
    return _Done(admin.delete_records([tp], request_timeout=TIMEOUT)[tp])


def test_delete_records_moves_the_earliest_offset_durably(broker_factory):
    from confluent_kafka import KafkaError
    broker = broker_factory(SMALL_SEGMENTS)
    topic = unique_topic("dr")
    ck_create_topic(broker, topic, 2)
    _fill(broker, topic, 100, 10)
    logs = broker.data_dir / "logs" / f"{topic}-0"
    segments_before = len(list(logs.glob("*.log")))
    assert segments_before > 3

    assert _delete_records(broker, topic, 0, 40).result(timeout=TIMEOUT).low_watermark == 40
    assert ck_watermarks(broker, topic, [0, 1]) == {0: (40, 100), 1: (0, 0)}
    assert len(list(logs.glob("*.log"))) < segments_before
    # A consumer from the beginning starts at the new log start offset.
    got = ck_consume(broker, topic, {0: 60}, start=-2)  # OFFSET_BEGINNING
    assert [r.offset for r in got[0]] == list(range(40, 100))

    # Beyond the high watermark: OFFSET_OUT_OF_RANGE, nothing changes.
    err = _error_of(_delete_records(broker, topic, 0, 101))
    assert err.code() == KafkaError.OFFSET_OUT_OF_RANGE, err

    # The start offset survives kill -9 (no clean shutdown) and a restart.
    broker.kill9()
    broker.start()
    assert ck_watermarks(broker, topic, [0]) == {0: (40, 100)}
    # -1: up to the high watermark.
    assert _delete_records(broker, topic, 0, -1).result(timeout=TIMEOUT).low_watermark == 100
    broker.restart()
    assert ck_watermarks(broker, topic, [0]) == {0: (100, 100)}
    ck_produce(broker, topic, [Msg(b"k", b"after", [], None, partition=0)])
    assert ck_watermarks(broker, topic, [0]) == {0: (100, 101)}


def test_fetch_below_the_log_start_offset_is_out_of_range(broker_factory):
    broker = broker_factory(SMALL_SEGMENTS)
    topic = unique_topic("drf")
    ck_create_topic(broker, topic, 1)
    _fill(broker, topic, 50, 5)
    assert _delete_records(broker, topic, 0, 30).result(timeout=TIMEOUT).low_watermark == 30
    from drover_testlib import fetch_v4_request, parse_fetch_v4
    with RawConn(broker) as conn:
        corr = conn.request(1, 4, fetch_v4_request(topic, 0, 10, max_wait_ms=0, min_bytes=1))
        parts = parse_fetch_v4(conn.recv_response(corr))
    assert parts[(topic, 0)].error == 1  # OFFSET_OUT_OF_RANGE


# ---- IncrementalAlterConfigs / AlterConfigs / CreateTopics configs -----------------


def _low(broker, topic: str) -> int:
    return ck_watermarks(broker, topic, [0])[0][0]


def test_retention_ms_altered_live_deletes_old_segments_and_survives_restart(broker_factory):
    from confluent_kafka.admin import ConfigSource
    broker = broker_factory(SMALL_SEGMENTS)  # retention off at the broker level
    topic = unique_topic("ret")
    ck_create_topic(broker, topic, 1)
    two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
    _fill(broker, topic, 50, 5, ts_ms=two_hours_ago)
    # Large enough to roll: the old records are all in sealed segments.
    fresh = b"fresh" + b"x" * 3000
    ck_produce(broker, topic, [Msg(b"k", fresh, [], None, partition=0)])
    assert _low(broker, topic) == 0

    _incremental(broker, topic, [_set("retention.ms", "3600000")]).result()
    # The maintenance pass applies the new retention without a restart.
    deadline = time.monotonic() + 30
    while _low(broker, topic) != 50:
        assert time.monotonic() < deadline, f"earliest offset still {_low(broker, topic)}"
        time.sleep(0.2)
    got = ck_consume(broker, topic, {0: 1}, start=-2)
    assert got[0][0].value == fresh

    configs = _describe_topic(broker, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    broker.restart()
    configs = _describe_topic(broker, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    broker.kill9()
    broker.start()
    assert _describe_topic(broker, topic)["retention.ms"].value == "3600000"

    # DELETE goes back to the broker's value.
    from confluent_kafka.admin import AlterConfigOpType
    _incremental(broker, topic, [_set("retention.ms", None, AlterConfigOpType.DELETE)]).result()
    assert _describe_topic(broker, topic)["retention.ms"].value == "-1"


def test_alter_configs_validation_errors(broker):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigResource, ResourceType
    topic = unique_topic("val")
    ck_create_topic(broker, topic, 1)

    def refused(entries, code, *, validate_only=False, name=topic):
        err = _error_of(_incremental(broker, name, entries, validate_only))
        assert err.code() == code, err
        return err.str()

    msg = refused([_set("retention.ms", "abc")], KafkaError.INVALID_CONFIG)
    assert "retention.ms" in msg and "abc" in msg, msg
    refused([_set("retention.ms", "-5")], KafkaError.INVALID_CONFIG)
    refused([_set("segment.bytes", "12")], KafkaError.INVALID_CONFIG)
    msg = refused([_set("cleanup.policy", "compact")], KafkaError.INVALID_CONFIG)
    assert "compaction is not implemented" in msg, msg
    msg = refused([_set("cleanup.policy", "compact", AlterConfigOpType.APPEND)],
                  KafkaError.INVALID_CONFIG)
    assert "compaction" in msg, msg
    msg = refused([_set("retention.ms", "5", AlterConfigOpType.APPEND)], KafkaError.INVALID_CONFIG)
    assert "append" in msg, msg
    refused([_set("no.such.config", "1")], KafkaError.INVALID_CONFIG)
    refused([_set("retention.ms", "1000")], KafkaError.UNKNOWN_TOPIC_OR_PART,
            name=unique_topic("absent"))
    # A list config takes APPEND of an allowed value.
    _incremental(broker, topic, [_set("cleanup.policy", "delete", AlterConfigOpType.APPEND)]).result()
    # validate_only checks and changes nothing.
    _incremental(broker, topic, [_set("retention.ms", "1000")], validate_only=True).result()
    refused([_set("retention.ms", "x")], KafkaError.INVALID_CONFIG, validate_only=True)
    configs = _describe_topic(broker, topic)
    assert configs["retention.ms"].value == "604800000"
    assert configs["cleanup.policy"].value == "delete"

    # Broker configs are refused with a clear message.
    md = ck_admin(broker).list_topics(timeout=TIMEOUT)
    admin = ck_admin(broker)
    res = ConfigResource(ResourceType.BROKER, str(next(iter(md.brokers))),
                         incremental_configs=[_set("log.retention.ms", "1000")])
    err = _error_of(admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert "drover.toml" in err.str(), err


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_legacy_alter_configs_replaces_the_override_set(broker):
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType
    topic = unique_topic("legacy")
    ck_create_topic(broker, topic, 1)
    admin = ck_admin(broker)

    def alter(configs):
        res = ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
        return _Done(admin.alter_configs([res], request_timeout=TIMEOUT)[res])

    alter({"retention.bytes": "1000000", "segment.ms": "3600000"}).result()
    configs = _describe_topic(broker, topic)
    assert configs["retention.bytes"].value == "1000000"
    assert configs["segment.ms"].value == "3600000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    alter({"segment.ms": "7200000"}).result()
    configs = _describe_topic(broker, topic)
    assert configs["segment.ms"].value == "7200000"
    assert configs["retention.bytes"].value == "-1"
    assert configs["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    from confluent_kafka import KafkaError
    err = _error_of(alter({"cleanup.policy": "compact"}))
    assert err.code() == KafkaError.INVALID_CONFIG, err


def test_create_topics_accepts_topic_configs(broker):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigSource, NewTopic
    admin = ck_admin(broker)
    topic = unique_topic("ctc")
    fs = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "86400000",
                                                           "max.message.bytes": "2097152"})],
                             request_timeout=TIMEOUT)
    fs[topic].result(timeout=TIMEOUT)
    configs = _describe_topic(broker, topic)
    assert configs["retention.ms"].value == "86400000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "2097152"
    bad = unique_topic("ctcbad")
    fs = admin.create_topics([NewTopic(bad, 1, 1, config={"cleanup.policy": "compact"})],
                             request_timeout=TIMEOUT)
    err = _error_of(fs[bad])
    assert err.code() == KafkaError.INVALID_CONFIG, err


def test_hostile_delete_records_with_20000_partitions(broker):
    topic = unique_topic("drh")
    ck_create_topic(broker, topic, 1)
    ck_produce(broker, topic, [Msg(b"k", b"v", [], None, partition=0)])
    n = 20_000
    # DeleteRecords v0: [topic [partition offset]] timeout_ms
    body = (struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", n)
            + struct.pack(">iq", 0, 1) * n + struct.pack(">i", 1000))
    with RawConn(broker, timeout=60) as conn:
        corr = conn.request(21, 0, body)
        resp = conn.recv_response(corr)
    name_len = struct.unpack_from(">h", resp, 8)[0]
    pos = 10 + name_len
    (count,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    assert count == n
    errors = {struct.unpack_from(">iqh", resp, pos + 14 * i)[2] for i in range(n)}
    assert errors == {42}  # INVALID_REQUEST, no log touched
    assert ck_watermarks(broker, topic, [0]) == {0: (0, 1)}


def test_kafka_python_admin_client(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.structs import TopicPartition
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        topic = unique_topic("kp")
        a.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "86400000"})])
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                 config_filter="all")["topic"][topic]
        assert got["retention.ms"]["value"] == "86400000"
        assert got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert got["cleanup.policy"]["value"] == "delete"
        # kafka-python's alter_configs keeps the other modified configs itself.
        a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                        configs={"segment.ms": "3600000"})])
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert {k: v["value"] for k, v in got.items()} == {"retention.ms": "86400000",
                                                           "segment.ms": "3600000"}
        ck_produce(broker, topic, [Msg(b"k", b"v%d" % i, [], None, partition=0)
                                   for i in range(5)])
        deleted = a.delete_records({TopicPartition(topic, 0): 3})
        assert deleted[TopicPartition(topic, 0)]["low_watermark"] == 3
        cluster = a.describe_cluster()
        assert [b["port"] for b in cluster["brokers"]] == [broker.port]
    finally:
        a.close()


# ---- per-topic limits applied by Produce ---------------------------------------------


def _produce_one(broker, topic: str, value: bytes, *, timestamp: int | None = None,
                 **conf):
    """Produces one record (acks=all, no retries); returns the delivery error or None."""
    from drover_testlib import ck_producer
    p = ck_producer(broker, **{"retries": 0, **conf})
    out = []
    kw = {} if timestamp is None else {"timestamp": timestamp}
    p.produce(topic, value=value, partition=0, on_delivery=lambda err, m: out.append(err), **kw)
    assert p.flush(TIMEOUT) == 0
    return out[0]


def _create_with(broker, topic: str, config: dict) -> None:
    from confluent_kafka.admin import NewTopic
    admin = ck_admin(broker)  # kept alive until the result arrives
    fs = admin.create_topics([NewTopic(topic, 1, 1, config=config)], request_timeout=TIMEOUT)
    fs[topic].result(timeout=TIMEOUT)


def test_produce_applies_the_topic_max_message_bytes(broker):
    """Kafka's LogValidator checks a batch against the partition log's config, so a
    topic's `max.message.bytes` wins over the broker's `message.max.bytes` both ways;
    the frame size cap (`server.max_frame_bytes`, 100 MiB) is a separate bound."""
    from confluent_kafka import KafkaError
    small = unique_topic("mmb-small")
    _create_with(broker, small, {"max.message.bytes": "2000"})
    err = _produce_one(broker, small, b"x" * 3000)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    assert _produce_one(broker, small, b"x" * 1000) is None
    # The broker's default (max_batch_bytes, 1 MiB + 12) is below 2 MB; the topic's
    # 5000000 lets a 2 MB record in.
    large = unique_topic("mmb-large")
    _create_with(broker, large, {"max.message.bytes": "5000000"})
    big = b"y" * 2_000_000
    assert _produce_one(broker, large, big, **{"message.max.bytes": 10_000_000}) is None
    # Altered live: the next produce follows the new value.
    _incremental(broker, large, [_set("max.message.bytes", "1000000")]).result()
    err = _produce_one(broker, large, big, **{"message.max.bytes": 10_000_000})
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    assert ck_watermarks(broker, large, [0])[0] == (0, 1)


def test_produce_applies_the_topic_timestamp_limits(broker):
    """`message.timestamp.before.max.ms` / `after.max.ms` of the topic (KIP-937) bound
    record timestamps: ±30 min against 1000 ms limits is INVALID_TIMESTAMP."""
    from confluent_kafka import KafkaError
    topic = unique_topic("ts-lim")
    _create_with(broker, topic, {"message.timestamp.before.max.ms": "1000",
                                 "message.timestamp.after.max.ms": "1000"})
    now = int(time.time() * 1000)
    for ts in (now - 30 * 60 * 1000, now + 30 * 60 * 1000):
        err = _produce_one(broker, topic, b"v", timestamp=ts)
        assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP, (ts, err)
    assert ck_watermarks(broker, topic, [0])[0] == (0, 0)
    # The same records on a topic without overrides (broker defaults: any past
    # timestamp, up to an hour ahead) are accepted.
    plain = unique_topic("ts-plain")
    _create_with(broker, plain, {})
    for ts in (now - 30 * 60 * 1000, now + 30 * 60 * 1000):
        assert _produce_one(broker, plain, b"v", timestamp=ts) is None


def _log_offsets(broker, topic: str, partition: int) -> tuple[int, int]:
    """(log end offset, flushed offset) of one partition from GET /metrics."""
    from drover_testlib import http_get
    status, _, body = http_get(broker.admin_url + "/metrics")
    assert status == 200, status
    got = {}
    for name in ("drover_log_end_offset", "drover_log_flushed_offset"):
        prefix = f'{name}{{topic="{topic}",partition="{partition}"}} '
        lines = [line for line in body.splitlines() if line.startswith(prefix)]
        assert len(lines) == 1, (name, lines)
        got[name] = int(lines[0][len(prefix):])
    return got["drover_log_end_offset"], got["drover_log_flushed_offset"]


@pytest.mark.parametrize("broker_flush,topic_flush,waits", [
    # A durable topic on a broker that leaves flushing to the OS: the ack waits.
    ("1000000", "1", True),
    # A lax topic on a default (durable) broker: the ack does not wait, and with
    # 1000000 records between flushes and no flush.ms, no flush runs.
    (None, "1000000", False),
])
def test_topic_flush_messages_decides_whether_the_ack_waits_for_fsync(
        broker_factory, broker_flush, topic_flush, waits):
    """The topic's `flush.messages` (not the broker's `flush_messages`) decides whether
    an acks=all answer waits for the fsync. Observed through the partition's flushed
    offset (`drover_log_flushed_offset`), read after the acknowledgement: nothing else
    flushes these partitions (no roll, no flush.ms), so it is the log end exactly when
    the ack waited for the fsync, and 0 when it did not. (Before the fix the first case
    acknowledged ahead of a background fsync it had just started, which this read can
    only catch by chance; the second case failed every time.)"""
    broker = broker_factory(None if broker_flush is None
                            else f"[log]\nflush_messages = {broker_flush}\n")
    topic = unique_topic("flushm")
    _create_with(broker, topic, {"flush.messages": topic_flush})
    ck_produce(broker, topic, [Msg(b"k", b"v%d" % i, partition=0) for i in range(5)])
    end, flushed = _log_offsets(broker, topic, 0)
    assert end == 5
    assert flushed == (5 if waits else 0), (end, flushed)
    # Altered live to the other setting: the next acknowledgement follows it.
    _incremental(broker, topic, [_set("flush.messages", "1" if not waits else "1000000")]).result()
    ck_produce(broker, topic, [Msg(b"k", b"w", partition=0)])
    end, flushed = _log_offsets(broker, topic, 0)
    assert end == 6
    assert flushed == (5 if waits else 6), (end, flushed)


def _offset_for_time(broker, topic: str, partition: int, ts_ms: int) -> tuple[int, int]:
    """(offset, timestamp) AdminClient.list_offsets answers for OffsetSpec.for_timestamp."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    admin = ck_admin(broker)
    tp = TopicPartition(topic, partition)
    fs = admin.list_offsets({tp: OffsetSpec.for_timestamp(ts_ms)}, request_timeout=TIMEOUT)
    (res,) = [f.result(timeout=TIMEOUT) for f in fs.values()]
    return res.offset, res.timestamp


def test_list_offsets_by_timestamp_never_answers_below_the_log_start(broker):
    """After DeleteRecords to the middle of a batch, ListOffsets by timestamp answers the
    first offset at or above the log start whose timestamp is >= the target (Kafka's
    `fetchOffsetByTimestamp` searches from the log start); on a partition whose records
    are all deleted it answers offset -1, as for a timestamp past every record."""
    topic = unique_topic("lo-dr")
    _create_with(broker, topic, {})
    base = int(time.time() * 1000) - 60_000
    # One produce call, one partition, 10 records 1 s apart: one record batch.
    msgs = [Msg(b"k", b"v%d" % i, [], base + i * 1000, partition=0) for i in range(10)]
    ck_produce(broker, topic, msgs, **{"linger.ms": 1000})
    assert _offset_for_time(broker, topic, 0, 0) == (0, base)
    _delete_records(broker, topic, 0, 5).result()
    assert ck_watermarks(broker, topic, [0])[0] == (5, 10)
    assert _offset_for_time(broker, topic, 0, 0) == (5, base + 5000)
    assert _offset_for_time(broker, topic, 0, base + 2000) == (5, base + 5000)
    assert _offset_for_time(broker, topic, 0, base + 7000) == (7, base + 7000)
    # Everything deleted: no offset, whatever the target.
    _delete_records(broker, topic, 0, 10).result()
    assert ck_watermarks(broker, topic, [0])[0] == (10, 10)
    assert _offset_for_time(broker, topic, 0, 0)[0] == -1
    assert _offset_for_time(broker, topic, 0, base + 9000)[0] == -1
