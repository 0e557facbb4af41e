"""Client helpers for the integration tests: confluent-kafka, kafka-python, kcat, a raw
Kafka-protocol socket, and the admin HTTP endpoint. Every wait here is bounded."""

from __future__ import annotations

import json
import random
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Record timestamps used where the tests set them explicitly (2024-01-01T00:00:00Z).
T0_MS = 1_704_067_200_000
UNUSED_GROUP = "drover-it-never-joined"


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------
@dataclass
class Msg:
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)  # [(str, bytes | None)]
    timestamp: int | None = None  # CreateTime ms; None = the client's clock
    partition: int | None = None  # explicit partition; None = by key


@dataclass
class Rec:
    """A consumed record, normalised across clients."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list
    timestamp: int | None = None


def make_messages(n: int, seed: int, *, text: bool = False, with_ts: bool = False,
                  keys: int = 37, null_headers: bool = True) -> list[Msg]:
    """n keyed messages with varied sizes, compressible and random payloads, headers
    (duplicate names, binary values) and, unless `text`, binary keys, empty values and
    null header values (unless not `null_headers`: kafka-python cannot send them).
    `text` gives printable, delimiter-free content for kcat."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = i % keys
        if text:
            key = b"key-%02d" % k
            body = "".join(rnd.choice("abcdefghij0123456789") for _ in range(rnd.randint(0, 60)))
            value = b"v%06d-" % i + body.encode() + b"x" * rnd.choice([0, 0, 100, 900])
            headers = []
        else:
            key = b"key-" + bytes([k, 0, 255 - k]) + b"-\xe2\x82\xac"
            kind = i % 500
            if kind == 8:
                value = b""
            else:
                size = rnd.choice([1, 10, 100, 300, 1000, 3000])
                raw = rnd.randbytes(size // 2) + bytes([i % 256]) * (size - size // 2)
                value = b"%08d|" % i + raw
            headers = [("idx", b"%d" % i), ("bin", rnd.randbytes(rnd.randint(1, 16))),
                       ("dup", b"first"), ("dup", b"second")]
            if i % 10 == 0:
                headers = []
            elif i % 100 == 3 and null_headers:
                headers.append(("null-value", None))
        ts = T0_MS + i if with_ts else None
        out.append(Msg(key, value, headers, ts))
    return out


def check_partition_logs(expected: dict[int, list[tuple[int, Msg]]],
                         got: dict[int, list[Rec]], *, check_ts: bool = False) -> None:
    """expected: partition -> [(offset, Msg)] in produce order; got: partition -> Recs in
    consume order. Asserts byte-for-byte equality and the same offsets, in order."""
    assert sorted(p for p, v in got.items() if v) == sorted(p for p, v in expected.items() if v), \
        "records came back from a different set of partitions"
    for p, exp in expected.items():
        recs = got.get(p, [])
        assert len(recs) == len(exp), f"partition {p}: {len(recs)} records consumed, {len(exp)} produced"
        for (off, m), r in zip(exp, recs):
            where = f"partition {p} offset {off}"
            assert r.offset == off, f"{where}: consumed offset {r.offset}"
            assert r.key == m.key, f"{where}: key {r.key!r} != {m.key!r}"
            assert r.value == m.value, f"{where}: value differs ({len(r.value or b'')} vs {len(m.value or b'')} bytes)"
            assert list(r.headers) == list(m.headers), f"{where}: headers {r.headers!r} != {m.headers!r}"
            if check_ts and m.timestamp is not None:
                assert r.timestamp == m.timestamp, f"{where}: timestamp {r.timestamp} != {m.timestamp}"


def assert_contiguous(got: dict[int, list[Rec]], start: int = 0) -> None:
    for p, recs in got.items():
        offs = [r.offset for r in recs]
        assert offs == list(range(start, start + len(offs))), \
            f"partition {p}: offsets not contiguous from {start}: {offs[:5]}...{offs[-5:]}"


# ---------------------------------------------------------------------------------
# confluent-kafka (librdkafka 2.16)
# ---------------------------------------------------------------------------------
def ck_conf(broker, **extra) -> dict:
    conf = {"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000,
            "client.id": "drover-it"}
    conf.update(extra)
    return conf


def ck_admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient(ck_conf(broker))


def ck_create_topic(broker, topic: str, partitions: int, timeout: float = 20) -> None:
    from confluent_kafka.admin import NewTopic
    admin = ck_admin(broker)  # keep a reference: the futures die with the client
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                             operation_timeout=timeout, request_timeout=timeout)
    fs[topic].result(timeout=timeout)
    wait_topic_partitions(broker, topic, partitions)


def ck_topic_partitions(broker, topic: str, timeout: float = 10) -> int | None:
    """Partition count from Metadata, or None when the topic is unknown."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient(ck_conf(broker, **{"allow.auto.create.topics": False})).list_topics(timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return len(t.partitions)


def wait_topic_partitions(broker, topic: str, partitions: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = ck_topic_partitions(broker, topic)
        if seen == partitions:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic}: metadata shows {seen} partitions, want {partitions}")


def ck_topic_id(broker, topic: str, timeout: float = 15) -> str:
    """The topic ID (Metadata v10+) as a string."""
    from confluent_kafka import TopicCollection
    admin = ck_admin(broker)
    fs = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)
    return str(fs[topic].result(timeout=timeout).topic_id)


def ck_watermarks(broker, topic: str, partitions, timeout: float = 10) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) from ListOffsets."""
    from confluent_kafka import TopicPartition
    c = ck_consumer(broker)
    try:
        out = {}
        for p in partitions:
            wm = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            assert wm is not None, f"{topic}-{p}: no watermarks within {timeout} s"
            out[p] = tuple(wm)
        return out
    finally:
        c.close()


def ck_producer(broker, **extra):
    from confluent_kafka import Producer
    conf = ck_conf(broker, **{"acks": "all", "enable.idempotence": False,
                              "linger.ms": 5, "message.timeout.ms": 30000})
    conf.update(extra)
    return Producer(conf)


def ck_produce(broker, topic: str, msgs: list[Msg], *, codec: str = "none",
               acks="all", flush_timeout: float = 60, producer=None,
               **extra) -> list[tuple[int, int]]:
    """Produce msgs; returns [(partition, offset)] in msgs order. Fails on any error."""
    p = producer or ck_producer(broker, **{"compression.type": codec, "acks": str(acks)}, **extra)
    results: list = [None] * len(msgs)
    errors = []

    def cb(i):
        def on_delivery(err, m):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = (m.partition(), m.offset())
        return on_delivery

    for i, m in enumerate(msgs):
        kw = {}
        if m.partition is not None:
            kw["partition"] = m.partition
        if m.timestamp is not None:
            kw["timestamp"] = m.timestamp
        if m.headers:
            kw["headers"] = m.headers
        for _ in range(1000):
            try:
                p.produce(topic, value=m.value, key=m.key, on_delivery=cb(i), **kw)
                break
            except BufferError:
                p.poll(0.05)
        else:
            raise AssertionError("producer queue stayed full")
        p.poll(0)
    left = p.flush(flush_timeout)
    assert left == 0, f"{left} messages not delivered within {flush_timeout} s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    return results


def ck_consumer(broker, **extra):
    from confluent_kafka import Consumer
    conf = ck_conf(broker, **{"group.id": UNUSED_GROUP, "enable.auto.commit": False,
                              "enable.auto.offset.store": False,
                              "auto.offset.reset": "error"})
    conf.update(extra)
    return Consumer(conf)


def ck_consume(broker, topic: str, counts: dict[int, int], *, start: int = 0,
               timeout: float = 60, consumer=None, **extra) -> dict[int, list[Rec]]:
    """Assign the partitions in counts at offset `start`, read until each has
    counts[p] records (or fail at the deadline)."""
    from confluent_kafka import TopicPartition
    c = consumer or ck_consumer(broker, **extra)
    got: dict[int, list[Rec]] = {p: [] for p in counts}
    try:
        c.assign([TopicPartition(topic, p, start) for p in counts])
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < counts[p] for p in counts):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out consuming {topic}: have "
                    f"{ {p: len(v) for p, v in got.items()} }, want {counts}")
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    raise AssertionError(f"consumer error: {m.error()}")
                ts_type, ts = m.timestamp()
                got.setdefault(m.partition(), []).append(
                    Rec(m.partition(), m.offset(), m.key(), m.value(),
                        list(m.headers() or []), ts))
    finally:
        if consumer is None:
            c.close()
    return got


def ck_consume_one(broker, topic: str, partition: int, offset: int, timeout: float = 20) -> Rec:
    return ck_consume(broker, topic, {partition: 1}, start=offset, timeout=timeout)[partition][0]


# ---------------------------------------------------------------------------------
# kafka-python 3.0.12
# ---------------------------------------------------------------------------------
def kp_producer(broker, **extra):
    from kafka import KafkaProducer
    conf = dict(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False,
                linger_ms=5, request_timeout_ms=15000, max_block_ms=20000,
                client_id="drover-it-kp")
    conf.update(extra)
    return KafkaProducer(**conf)


def kp_produce(broker, topic: str, msgs: list[Msg], *, codec: str = "none",
               timeout: float = 60, **extra) -> list[tuple[int, int]]:
    p = kp_producer(broker, compression_type=None if codec == "none" else codec, **extra)
    try:
        futs = [p.send(topic, value=m.value, key=m.key, headers=m.headers or None,
                       partition=m.partition, timestamp_ms=m.timestamp) for m in msgs]
        p.flush(timeout=timeout)
        out = []
        for f in futs:
            md = f.get(timeout=timeout)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=10)


def kp_consumer(broker, **extra):
    from kafka import KafkaConsumer
    conf = dict(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                auto_offset_reset="none", request_timeout_ms=30000, client_id="drover-it-kp",
                fetch_max_wait_ms=500, consumer_timeout_ms=1000)
    conf.update(extra)
    return KafkaConsumer(**conf)


def kp_consume(broker, topic: str, counts: dict[int, int], *, start: int = 0,
               timeout: float = 60, **extra) -> dict[int, list[Rec]]:
    from kafka import TopicPartition
    c = kp_consumer(broker, **extra)
    got: dict[int, list[Rec]] = {p: [] for p in counts}
    try:
        tps = [TopicPartition(topic, p) for p in counts]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, start)
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < counts[p] for p in counts):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out consuming {topic}: have "
                    f"{ {p: len(v) for p, v in got.items()} }, want {counts}")
            for tp, recs in c.poll(timeout_ms=500, max_records=2000).items():
                for r in recs:
                    got.setdefault(r.partition, []).append(
                        Rec(r.partition, r.offset, r.key, r.value,
                            [(k, v) for k, v in (r.headers or [])], r.timestamp))
    finally:
        c.close()
    return got


# ---------------------------------------------------------------------------------
# kcat 1.7.1 (librdkafka 2.0.2)
# ---------------------------------------------------------------------------------
def kcat_path() -> str:
    p = shutil.which("kcat")
    assert p, "kcat not installed: run scripts/install-test-deps.sh"
    return p


def kcat(broker, args: list[str], *, input: bytes | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [kcat_path(), "-b", broker.bootstrap, "-m", "10", "-X", "socket.timeout.ms=10000",
           *args]
    r = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, (
        f"kcat {' '.join(args)} exited {r.returncode}\nstderr: {r.stderr.decode(errors='replace')[-3000:]}")
    return r


def kcat_consume(broker, topic: str, partition: int, *, offset="beginning",
                 count: int | None = None, timeout: float = 60) -> list[dict]:
    args = ["-C", "-t", topic, "-p", str(partition), "-o", str(offset), "-e", "-J", "-q"]
    if count is not None:
        args += ["-c", str(count)]
    r = kcat(broker, args, timeout=timeout)
    return [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]


# ---------------------------------------------------------------------------------
# Raw Kafka protocol
# ---------------------------------------------------------------------------------
API_PRODUCE, API_FETCH, API_LIST_OFFSETS, API_METADATA = 0, 1, 2, 3
API_FIND_COORDINATOR, API_API_VERSIONS, API_CREATE_TOPICS, API_DELETE_TOPICS = 10, 18, 19, 20


def kstr(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def request_header(api_key: int, version: int, corr: int, client_id: str | None = "drover-it-raw",
                   flexible: bool = False) -> bytes:
    h = struct.pack(">hhi", api_key, version, corr) + kstr(client_id)
    if flexible:
        h += b"\x00"  # no tagged fields
    return h


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class RawConn:
    """A plain TCP connection speaking length-prefixed Kafka frames."""

    def __init__(self, broker, timeout: float = 10):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.corr = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, api_key: int, version: int, body: bytes, *, flexible_header=False) -> int:
        self.corr += 1
        self.send_raw(frame(request_header(api_key, version, self.corr, flexible=flexible_header) + body))
        return self.corr

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        assert 0 <= size <= 200 * 1024 * 1024, f"response frame size {size}"
        return self._recv_exact(size)

    def recv_response(self, corr: int, *, flexible_header=False) -> bytes:
        """The body of the response with this correlation id."""
        data = self.recv_frame()
        (got,) = struct.unpack(">i", data[:4])
        assert got == corr, f"correlation id {got}, expected {corr}"
        body = data[4:]
        if flexible_header:
            assert body[0] == 0, "unexpected tagged fields in response header"
            body = body[1:]
        return body

    def wait_closed(self, timeout: float = 10) -> bytes:
        """Read until the peer closes; returns what it sent first. Fails if the
        connection is still open after `timeout` seconds."""
        self.sock.settimeout(0.5)
        deadline = time.monotonic() + timeout
        got = bytearray()
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return bytes(got)
            if not chunk:
                return bytes(got)
            got += chunk
        raise AssertionError(f"broker kept the connection open for {timeout} s "
                             f"(sent {len(got)} bytes)")


def parse_api_versions_v0(body: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """ApiVersions response v0 body -> (error_code, {api_key: (min, max)})."""
    err, n = struct.unpack(">hi", body[:6])
    assert 0 <= n < 1000, f"ApiVersions array count {n}"
    apis = {}
    pos = 6
    for _ in range(n):
        k, lo, hi = struct.unpack(">hhh", body[pos:pos + 6])
        apis[k] = (lo, hi)
        pos += 6
    return err, apis


def api_versions(broker) -> dict[int, tuple[int, int]]:
    with RawConn(broker) as c:
        corr = c.request(API_API_VERSIONS, 0, b"")
        err, apis = parse_api_versions_v0(c.recv_response(corr))
        assert err == 0, f"ApiVersions v0 error {err}"
        return apis


def fetch_v4_request(topic: str, partition: int, offset: int, *, max_wait_ms: int,
                     min_bytes: int, max_bytes: int = 50 * 1024 * 1024,
                     partition_max_bytes: int = 10 * 1024 * 1024) -> bytes:
    return (struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
            + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, partition_max_bytes))


@dataclass
class FetchPartition:
    partition: int
    error: int
    high_watermark: int
    records: bytes | None


def parse_fetch_v4(body: bytes) -> dict[tuple[str, int], FetchPartition]:
    pos = 4  # throttle_time_ms
    out = {}
    (nt,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(nt):
        (tl,) = struct.unpack_from(">h", body, pos)
        pos += 2
        topic = body[pos:pos + tl].decode()
        pos += tl
        (np_,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(np_):
            part, err, hw, _lso = struct.unpack_from(">ihqq", body, pos)
            pos += 22
            (na,) = struct.unpack_from(">i", body, pos)
            pos += 4
            if na > 0:
                pos += 16 * na
            (rl,) = struct.unpack_from(">i", body, pos)
            pos += 4
            recs = None
            if rl >= 0:
                recs = body[pos:pos + rl]
                pos += rl
            out[(topic, part)] = FetchPartition(part, err, hw, recs)
    return out


def batch_base_offsets(records: bytes) -> list[int]:
    """Base offsets of the complete record batches in a Fetch records blob."""
    out, pos = [], 0
    while pos + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break  # a partial trailing batch is allowed
        out.append(base)
        pos += 12 + length
    return out


# ---------------------------------------------------------------------------------
# Admin HTTP
# ---------------------------------------------------------------------------------
def http_get(url: str, timeout: float = 10) -> tuple[int, str, str]:
    """(status, content-type, body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode(errors="replace")


# ---------------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------------
def assert_healthy(broker, topic: str = "health-check") -> None:
    """The process is alive and a fresh client can produce to and consume from it."""
    broker.assert_alive()
    value = uuid.uuid4().bytes
    (part, off), = ck_produce(broker, topic, [Msg(b"hk", value, [("h", b"v")], partition=0)],
                              flush_timeout=30)
    rec = ck_consume_one(broker, topic, part, off, timeout=30)
    assert (rec.key, rec.value, rec.headers) == (b"hk", value, [("h", b"v")])
    broker.assert_alive()


# ---------------------------------------------------------------------------------
# Hand-built record batches (magic 2) and Produce v3, for the malformed-input tests
# ---------------------------------------------------------------------------------
def varint(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def record_batch(records: list[tuple[bytes | None, bytes | None]], *, base_ts: int = T0_MS,
                 corrupt_crc: bool = False, magic: int = 2) -> bytes:
    """An uncompressed record batch holding (key, value) records."""
    import crc32c

    def blob(b):
        return varint(-1) if b is None else varint(len(b)) + b

    recs = b""
    for i, (k, v) in enumerate(records):
        body = b"\x00" + varint(i) + varint(i) + blob(k) + blob(v) + varint(0)
        recs += varint(len(body)) + body
    n = len(records)
    after_crc = (struct.pack(">hiqqqhi", 0, n - 1, base_ts, base_ts + n - 1, -1, -1, -1)
                 + struct.pack(">i", n) + recs)
    crc = crc32c.crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    after_len = struct.pack(">ibI", -1, magic, crc) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def produce_v3_request(topic: str, partition: int, records: bytes, *, acks: int = -1,
                       timeout_ms: int = 10000, records_len: int | None = None) -> bytes:
    n = len(records) if records_len is None else records_len
    return (kstr(None) + struct.pack(">hi", acks, timeout_ms)
            + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">i", partition)
            + struct.pack(">i", n) + records)


def parse_produce_v3(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """-> {(topic, partition): (error_code, base_offset)}"""
    out = {}
    pos = 0
    (nt,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(nt):
        (tl,) = struct.unpack_from(">h", body, pos)
        pos += 2
        topic = body[pos:pos + tl].decode()
        pos += tl
        (np_,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(np_):
            part, err, base, _lat = struct.unpack_from(">ihqq", body, pos)
            pos += 22
            out[(topic, part)] = (err, base)
    return out
