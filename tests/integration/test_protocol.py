"""Protocol-level facts clients depend on: advertised versions, FindCoordinator,
broker addresses in Metadata."""

from __future__ import annotations

import struct

from drover_testlib import (API_METADATA, RawConn, api_versions,
                            assert_healthy, kp_consumer, kstr)

# Kafka 4.1's ranges for the APIs Drover serves (kafka-protocol 0.18.0 schemas).
KAFKA_41_RANGES = {
    0: (3, 13),   # Produce
    1: (4, 18),   # Fetch
    2: (1, 10),   # ListOffsets
    3: (0, 13),   # Metadata
    10: (0, 6),   # FindCoordinator: librdkafka looks for a coordinator only if v0 is in
    17: (0, 1),   # SaslHandshake (issue 29; answered ILLEGAL_SASL_STATE off SASL listeners)
    18: (0, 4),   # ApiVersions
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords
    32: (1, 4),   # DescribeConfigs
    33: (0, 2),   # AlterConfigs
    35: (1, 4),   # DescribeLogDirs (issue 32)
    36: (0, 2),   # SaslAuthenticate
    44: (0, 1),   # IncrementalAlterConfigs
    48: (0, 1),   # DescribeClientQuotas (issue 32)
    60: (0, 2),   # DescribeCluster
    61: (0, 0),   # DescribeProducers (issue 32)
    75: (0, 0),   # DescribeTopicPartitions (issue 32)
}


def test_advertised_ranges_are_kafka_41s(broker):
    apis = api_versions(broker)
    for key, rng in KAFKA_41_RANGES.items():
        assert apis.get(key) == rng, f"API {key}: advertised {apis.get(key)}, Kafka 4.1 has {rng}"


def test_kafka_python_recognises_a_4x_broker(broker):
    c = kp_consumer(broker)
    try:
        assert tuple(c.config["api_version"]) >= (4, 0), c.config["api_version"]
    finally:
        c.close()


def read_str(buf, pos):
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos:pos + n].decode(), pos + n


def test_metadata_v1_lists_this_broker(broker):
    with RawConn(broker) as c:
        corr = c.request(API_METADATA, 1, struct.pack(">i", -1))  # null: all topics
        body = c.recv_response(corr)
    (nb,) = struct.unpack_from(">i", body, 0)
    assert nb == 1
    (node,) = struct.unpack_from(">i", body, 4)
    host, pos = read_str(body, 8)
    (port,) = struct.unpack_from(">i", body, pos)
    _rack, pos = read_str(body, pos + 4)
    (controller,) = struct.unpack_from(">i", body, pos)
    assert (host, port) == (broker.host, broker.port)
    assert controller == node
