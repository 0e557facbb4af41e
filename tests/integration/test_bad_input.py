"""Malformed and hostile input on raw sockets. After each case the broker process must
still be alive and a fresh client must still produce and consume.

Expected reactions follow Kafka: an unknown API key or an unsupported version of an
API other than ApiVersions closes the connection; ApiVersions with a version the broker
does not know is answered with an ApiVersions v0 response carrying
UNSUPPORTED_VERSION (35) and the broker's API list; an oversized or negative frame
size closes the connection. For a well-formed header with an absurd array count the
broker may answer with an error or close the connection; it must not crash or try to
allocate the announced size."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from drover_testlib import (API_API_VERSIONS, API_FETCH, API_METADATA, API_PRODUCE, RawConn,
                            assert_healthy, ck_consume, ck_create_topic, ck_watermarks,
                            frame, parse_api_versions_v0, parse_produce_v3,
                            produce_v3_request, record_batch, request_header, unique_topic,
                            uvarint)

UNSUPPORTED_VERSION = 35


def send_and_close(broker, data: bytes) -> None:
    with RawConn(broker) as c:
        try:
            c.send_raw(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the broker may hang up before we are done: fine


def expect_closed(broker, data: bytes, timeout: float = 10) -> None:
    with RawConn(broker) as c:
        try:
            c.send_raw(data)
        except (BrokenPipeError, ConnectionResetError):
            return
        c.wait_closed(timeout)


def expect_error_or_close(c: RawConn, corr: int, timeout: float = 10, flexible=False) -> bytes | None:
    """Either a response to `corr` or the connection closed; None when closed."""
    c.sock.settimeout(timeout)
    try:
        return c.recv_response(corr, flexible_header=flexible)
    except (EOFError, ConnectionResetError):
        return None
    except socket.timeout:
        pytest.fail(f"no response and no close within {timeout} s", pytrace=False)


# ---------------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_bytes(broker, seed):
    rnd = random.Random(seed)
    data = rnd.randbytes(rnd.choice([1, 3, 17, 500, 4096, 65536]))
    send_and_close(broker, data)
    # Random bytes behind a plausible size prefix, too.
    body = rnd.randbytes(200)
    send_and_close(broker, frame(body))
    assert_healthy(broker)


def test_two_gib_frame_is_refused(broker):
    expect_closed(broker, struct.pack(">i", 0x7FFFFFFF) + b"\x00\x12\x00\x00" + b"x" * 100)
    assert_healthy(broker)


@pytest.mark.parametrize("size", [-1, -2147483648, 0])
def test_negative_or_zero_frame_size(broker, size):
    expect_closed(broker, struct.pack(">i", size) + b"x" * 16)
    assert_healthy(broker)


def test_frame_over_configured_max(broker_factory):
    b = broker_factory("[server]\nmax_frame_bytes = 4096\n")
    body = request_header(API_API_VERSIONS, 0, 1) + b"\x00" * 8000
    expect_closed(b, frame(body))
    assert_healthy(b)


def test_truncated_frame(broker):
    send_and_close(broker, struct.pack(">i", 100) + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
    assert_healthy(broker)


def test_truncated_header_in_complete_frame(broker):
    """The frame is complete but too short for a request header."""
    expect_closed(broker, frame(b"\x00\x03\x00"))
    assert_healthy(broker)


def test_many_half_open_connections(broker):
    conns = []
    try:
        for i in range(50):
            c = RawConn(broker)
            c.send_raw(struct.pack(">i", 1000) + b"\x00" * (i % 7))
            conns.append(c)
        assert_healthy(broker)
    finally:
        for c in conns:
            c.close()
    assert_healthy(broker)


def test_idle_connection_is_closed(broker_factory):
    b = broker_factory("[server]\nidle_timeout_ms = 1000\n")
    with RawConn(b) as c:
        c.wait_closed(timeout=15)
    assert_healthy(b)


# ---------------------------------------------------------------------------------
# Headers: unknown API, unsupported versions
# ---------------------------------------------------------------------------------
def test_unknown_api_key_closes(broker):
    expect_closed(broker, frame(request_header(9999, 0, 7)))
    expect_closed(broker, frame(request_header(-1, 0, 7)))
    assert_healthy(broker)


def test_unsupported_metadata_version_closes(broker):
    expect_closed(broker, frame(request_header(API_METADATA, 99, 7, flexible=True) + b"\x01\x00\x00\x00"))
    assert_healthy(broker)


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_unsupported_api_versions_version_gets_v0_answer(broker, version):
    """Kafka reads the header of any ApiVersions v3+ request as header v2 (flexible),
    ignores the body and answers in v0. Kafka 4.1 knows ApiVersions v0-v4."""
    with RawConn(broker) as c:
        body = b"\x05drvr\x021\x00"  # a v3-style body
        c.send_raw(frame(request_header(API_API_VERSIONS, version, 42, flexible=True) + body))
        resp = c.recv_response(42)  # ApiVersions responses always use header v0
        err, apis = parse_api_versions_v0(resp)
        assert err == UNSUPPORTED_VERSION
        assert API_API_VERSIONS in apis and apis[API_API_VERSIONS][0] == 0 \
            and apis[API_API_VERSIONS][1] >= 3, apis
        for key in (API_PRODUCE, API_FETCH, API_METADATA):
            assert key in apis, f"API {key} missing from {sorted(apis)}"
        # The connection stays usable: a v0 request now works.
        c.send_raw(frame(request_header(API_API_VERSIONS, 0, 43)))
        err, _ = parse_api_versions_v0(c.recv_response(43))
        assert err == 0
    assert_healthy(broker)


def test_api_versions_v3_is_flexible_and_complete(broker):
    """ApiVersions v3: flexible request header, response header v0 with a compact body."""
    with RawConn(broker) as c:
        corr = c.request(API_API_VERSIONS, 3, b"\x07drover\x04it1\x00", flexible_header=True)
        resp = c.recv_response(corr)
        (err,) = struct.unpack_from(">h", resp, 0)
        assert err == 0
        # compact array: N+1 as uvarint; small here
        n = resp[2] - 1
        assert 0 < n < 127
        keys = set()
        pos = 3
        for _ in range(n):
            k, lo, hi = struct.unpack_from(">hhh", resp, pos)
            assert resp[pos + 6] == 0, "per-API tagged fields"
            keys.add(k)
            assert 0 <= lo <= hi
            pos += 7
        assert {0, 1, 2, 3, 10, 18, 19, 20} <= keys, sorted(keys)
    assert_healthy(broker)


# ---------------------------------------------------------------------------------
# Well-formed headers, hostile bodies
# ---------------------------------------------------------------------------------
def test_metadata_v1_huge_topic_array(broker):
    with RawConn(broker) as c:
        corr = c.request(API_METADATA, 1, struct.pack(">i", 0x7FFFFFFF))
        expect_error_or_close(c, corr)
    assert_healthy(broker)


@pytest.mark.parametrize("count", [uvarint(0x80000000), b"\xff\xff\xff\xff\x7f",
                                   b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
def test_metadata_v12_huge_compact_array(broker, count):
    with RawConn(broker) as c:
        corr = c.request(API_METADATA, 12, count + b"\x00\x00\x00", flexible_header=True)
        expect_error_or_close(c, corr, flexible=True)
    assert_healthy(broker)


def test_metadata_v1_topic_name_longer_than_frame(broker):
    with RawConn(broker) as c:
        corr = c.request(API_METADATA, 1, struct.pack(">ih", 1, 0x7FFF) + b"abc")
        expect_error_or_close(c, corr)
    assert_healthy(broker)


def test_client_id_longer_than_frame(broker):
    with RawConn(broker) as c:
        c.send_raw(frame(struct.pack(">hhih", API_METADATA, 1, 5, 0x7FFF) + b"abc"))
        expect_error_or_close(c, 5)
    assert_healthy(broker)


def test_metadata_then_garbage_on_same_connection(broker):
    """A valid request is answered even if garbage follows in the same write."""
    with RawConn(broker) as c:
        c.send_raw(frame(request_header(API_METADATA, 1, 1) + struct.pack(">i", 0))
                   + struct.pack(">i", 9) + b"\xff" * 9)
        c.recv_response(1)
    assert_healthy(broker)


def test_produce_huge_records_length(broker):
    topic = unique_topic("bad-produce")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        corr = c.request(API_PRODUCE, 3, produce_v3_request(topic, 0, b"\x00" * 64,
                                                           records_len=0x7FFFFFFF))
        resp = expect_error_or_close(c, corr)
        if resp is not None:
            ((err, _),) = parse_produce_v3(resp).values()
            assert err != 0
    assert ck_watermarks(broker, topic, [0])[0] == (0, 0)
    assert_healthy(broker)


def test_raw_produce_valid_then_corrupt_batches(broker):
    topic = unique_topic("bad-batch")
    ck_create_topic(broker, topic, 1)
    good = record_batch([(b"k1", b"v1"), (None, b"v2"), (b"k3", None)])
    with RawConn(broker) as c:
        corr = c.request(API_PRODUCE, 3, produce_v3_request(topic, 0, good))
        assert parse_produce_v3(c.recv_response(corr)) == {(topic, 0): (0, 0)}
    recs = ck_consume(broker, topic, {0: 3})[0]
    assert [(r.offset, r.key, r.value) for r in recs] == [(0, b"k1", b"v1"), (1, None, b"v2"),
                                                         (2, b"k3", None)]
    bad_cases = {
        "bad crc": record_batch([(b"k", b"v")], corrupt_crc=True),
        "magic 1": record_batch([(b"k", b"v")], magic=1),
        "batch length past the end": good[:8] + struct.pack(">i", len(good) + 100) + good[12:],
        "batch cut short": good[:-5],
        "record count lies": good[:57] + struct.pack(">i", 1000) + good[61:],
    }
    for name, blob in bad_cases.items():
        with RawConn(broker) as c:
            corr = c.request(API_PRODUCE, 3, produce_v3_request(topic, 0, blob))
            resp = expect_error_or_close(c, corr)
            if resp is not None:
                ((err, _),) = parse_produce_v3(resp).values()
                assert err != 0, f"{name}: accepted"
        assert ck_watermarks(broker, topic, [0])[0] == (0, 3), f"{name}: the log grew"
        broker.assert_alive()
    assert_healthy(broker)


def test_produce_to_unknown_partition(broker):
    topic = unique_topic("bad-part")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        corr = c.request(API_PRODUCE, 3, produce_v3_request(topic, 5, record_batch([(b"k", b"v")])))
        ((err, _),) = parse_produce_v3(c.recv_response(corr)).values()
        assert err == 3, "UNKNOWN_TOPIC_OR_PARTITION"
    assert_healthy(broker)


def test_pipelined_requests_answered_in_order(broker):
    with RawConn(broker) as c:
        data = b"".join(frame(request_header(API_API_VERSIONS, 0, corr)) for corr in range(1, 51))
        c.send_raw(data)
        for corr in range(1, 51):
            err, _ = parse_api_versions_v0(c.recv_response(corr))
            assert err == 0
    assert_healthy(broker)


def test_slowloris_bytes_one_at_a_time(broker):
    """A request dribbled in byte by byte is still parsed correctly."""
    data = frame(request_header(API_API_VERSIONS, 0, 77))
    with RawConn(broker) as c:
        for i in range(len(data)):
            c.send_raw(data[i:i + 1])
            time.sleep(0.01)
        err, _ = parse_api_versions_v0(c.recv_response(77))
        assert err == 0
    assert_healthy(broker)
