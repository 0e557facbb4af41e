"""Storage bounds against one client (issue 13, items 8, 10, 11): auto-creation bounded
per request and per second, file descriptors that do not grow with the number of
segments, a partition limit that fits the open-file limit, and a partition taken
offline by a full disk that comes back once space is freed.

Each broker here is a real `drover serve` process; descriptor counts are read from
/proc/<pid>/fd, and the open-file limit is set with `prlimit` around the broker."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Broker, BrokerError
from drover_testlib import (API_FETCH, API_METADATA, API_PRODUCE, RawConn, assert_healthy,
                            batch_base_offsets, ck_admin, ck_create_topic, fetch_v4_request,
                            kstr, parse_fetch_v4, parse_produce_v3, produce_v3_request,
                            record_batch, unique_topic)

UNKNOWN_TOPIC_OR_PARTITION = 3
KAFKA_STORAGE_ERROR = 56
POLICY_VIOLATION = 44


class LimitedBroker(Broker):
    """A broker started under `prlimit --nofile=N:N` (soft and hard limit N)."""

    def __init__(self, workdir: Path, config: str, nofile: int):
        super().__init__(workdir, config=config)
        self.nofile = nofile

    def command(self) -> list[str]:
        return [shutil.which("prlimit") or "prlimit", f"--nofile={self.nofile}:{self.nofile}",
                "--"] + super().command()


@pytest.fixture
def limited_broker(tmp_path, request):
    """make(config, nofile) -> a started LimitedBroker; killed at teardown."""
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    made: list[Broker] = []

    def make(config: str, nofile: int) -> LimitedBroker:
        b = LimitedBroker(tmp_path / f"broker{len(made)}", config, nofile)
        made.append(b)
        try:
            b.start()
        except BrokerError as e:
            pytest.fail(str(e), pytrace=False)
        return b

    yield make
    rep = getattr(request.node, "rep_call", None)
    for b in made:
        try:
            b.kill9()
        except BrokerError:
            pass
        if rep is not None and rep.failed and b.starts:
            tail = "\n".join(b.all_logs().splitlines()[-100:])
            print(f"\n===== broker {b.workdir.name} logs (tail) =====\n{tail}")


def open_fds(broker: Broker) -> int:
    """Descriptors the broker process holds now (prlimit exec()s the broker itself)."""
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def metadata_v1_request(topics: list[str]) -> bytes:
    return struct.pack(">i", len(topics)) + b"".join(kstr(t) for t in topics)


def parse_metadata_v1(body: bytes) -> dict[str, tuple[int, int]]:
    """-> {topic: (error_code, partition count)}"""
    pos = 0

    def i16():
        nonlocal pos
        (v,) = struct.unpack_from(">h", body, pos)
        pos += 2
        return v

    def i32():
        nonlocal pos
        (v,) = struct.unpack_from(">i", body, pos)
        pos += 4
        return v

    def string():
        nonlocal pos
        n = i16()
        if n < 0:
            return None
        s = body[pos:pos + n].decode()
        pos += n
        return s

    for _ in range(i32()):  # brokers: node id, host, port, rack
        i32(), string(), i32(), string()
    i32()  # controller id
    out = {}
    for _ in range(i32()):
        err = i16()
        name = string()
        pos += 1  # is_internal
        partitions = i32()
        for _ in range(partitions):
            i16(), i32(), i32()  # error, index, leader
            for _ in range(2):  # replicas, isr
                n = i32()
                pos += 4 * n
        out[name] = (err, partitions)
    return out


def produce(conn: RawConn, topic: str, partition: int, value: bytes) -> tuple[int, int]:
    corr = conn.request(API_PRODUCE, 3, produce_v3_request(
        topic, partition, record_batch([(None, value)], base_ts=int(time.time() * 1000))))
    return parse_produce_v3(conn.recv_response(corr))[(topic, partition)]


def read_offsets(broker: Broker, topic: str, partition: int = 0) -> list[int]:
    """Base offsets of every batch from offset 0 to the end, fetch after fetch."""
    got: list[int] = []
    offset = 0
    with RawConn(broker, timeout=30) as c:
        while True:
            corr = c.request(API_FETCH, 4, fetch_v4_request(
                topic, partition, offset, max_wait_ms=0, min_bytes=0))
            p = parse_fetch_v4(c.recv_response(corr))[(topic, partition)]
            assert p.error == 0, f"fetch at {offset}: error {p.error}"
            bases = batch_base_offsets(p.records or b"")
            if not bases:
                assert offset == p.high_watermark, f"no data at {offset} < {p.high_watermark}"
                return got
            got += [b for b in bases if b >= offset]
            offset = bases[-1] + 1


def test_one_metadata_request_naming_10000_new_topics_creates_at_most_the_bound(broker_factory):
    broker = broker_factory("[topics]\nauto_create_max_per_request = 50\n")
    prefix = unique_topic("storm")
    names = [f"{prefix}-{i}" for i in range(10_000)]
    before = open_fds(broker)
    with RawConn(broker, timeout=60) as c:
        corr = c.request(API_METADATA, 1, metadata_v1_request(names))
        topics = parse_metadata_v1(c.recv_response(corr))
    assert set(topics) == set(names)
    created = [n for n, (err, _) in topics.items() if err == 0]
    refused = {err for n, (err, _) in topics.items() if err != 0}
    assert 1 <= len(created) <= 50, len(created)
    assert refused == {UNKNOWN_TOPIC_OR_PARTITION}
    assert all(topics[n][1] == 1 for n in created)

    # A retry creates more, still bounded per request.
    with RawConn(broker, timeout=60) as c:
        corr = c.request(API_METADATA, 1, metadata_v1_request(names[:200]))
        again = parse_metadata_v1(c.recv_response(corr))
    assert sum(1 for err, _ in again.values() if err == 0) <= len(created) + 50

    # One descriptor per partition, plus index files through the bounded cache: far
    # below the 3 per topic the storm used to cost (and it created all 10,000).
    after = open_fds(broker)
    assert after - before <= 3 * 100 + 20, (before, after)
    assert_healthy(broker)
    log = broker.stderr_text()
    assert len(log.splitlines()) < 400, f"{len(log.splitlines())} log lines"
    broker.assert_alive()


def produce_many_topics_v3(names: list[str], records: bytes) -> bytes:
    """One Produce v3 request with `records` for partition 0 of every name."""
    body = kstr(None) + struct.pack(">hi", 1, 10000) + struct.pack(">i", len(names))
    for name in names:
        body += (kstr(name) + struct.pack(">i", 1) + struct.pack(">i", 0)
                 + struct.pack(">i", len(records)) + records)
    return body


def test_one_produce_request_naming_1000_new_topics_creates_at_most_the_bound(broker_factory):
    broker = broker_factory("[topics]\nauto_create_max_per_request = 20\n")
    prefix = unique_topic("produce-storm")
    names = [f"{prefix}-{i}" for i in range(1_000)]
    with RawConn(broker, timeout=60) as c:
        corr = c.request(API_PRODUCE, 3, produce_many_topics_v3(names, record_batch([(b"k", b"v")])))
        results = parse_produce_v3(c.recv_response(corr))
    codes = {name: err for (name, _), (err, _) in results.items()}
    assert set(codes) == set(names)
    created = [n for n, err in codes.items() if err == 0]
    assert 1 <= len(created) <= 20, len(created)
    assert {err for err in codes.values() if err != 0} == {UNKNOWN_TOPIC_OR_PARTITION}
    assert_healthy(broker)
    broker.assert_alive()


def test_thousands_of_small_segments_keep_descriptors_bounded_and_stay_readable(limited_broker):
    # Before: three descriptors per segment, so the log stopped rolling (and serving
    # appends) after about 130 segments under this limit.
    config = ("[server]\nmax_connections = 20\n"
              "[log]\nsegment_ms = 1\nopen_files_cache = 32\nretention_ms = -1\n"
              "flush_messages = 1000000\n")
    broker = limited_broker(config, nofile=400)
    topic = unique_topic("segments")
    n = 1_500
    with RawConn(broker, timeout=30) as c:
        for i in range(n):
            err, base = produce(c, topic, 0, b"v%06d" % i + b"x" * 100)
            assert (err, base) == (0, i), f"produce #{i}"
            # A segment per produce: they roll by age (segment_ms = 1 rolls once the
            # active segment is more than 1 ms old; sizes below 1 MiB are refused).
            time.sleep(0.003)
    fds = open_fds(broker)
    assert fds < 32 + 100, fds
    segments = list((broker.data_dir / "logs" / f"{topic}-0").glob("*.log"))
    assert len(segments) >= n - 1
    assert read_offsets(broker, topic) == list(range(n))
    assert open_fds(broker) < 32 + 100

    broker.restart()
    assert read_offsets(broker, topic) == list(range(n))
    broker.kill9()
    broker.start()
    assert read_offsets(broker, topic) == list(range(n))
    assert open_fds(broker) < 32 + 100
    with RawConn(broker) as c:
        assert produce(c, topic, 0, b"after") == (0, n)


def test_max_partitions_fit_under_the_open_file_limit(limited_broker):
    # Room: 1000 - (64 cache + 2 x 20 connections + 256 reserved) = 640 partitions.
    # Before: three descriptors per partition, so 500 partitions needed 1,500.
    config = ("[server]\nmax_connections = 20\n[log]\nopen_files_cache = 64\n"
              "[topics]\nmax_partitions = 500\n")
    broker = limited_broker(config, nofile=1000)
    topic = unique_topic("wide")
    ck_create_topic(broker, topic, 500, timeout=60)
    assert "room for 640 partitions" in broker.stderr_text()
    with RawConn(broker) as c:
        for p in (0, 250, 499):
            assert produce(c, topic, p, b"x") == (0, 0), p

    # Beyond the room the open-file limit leaves: refused up front, with a reason.
    from confluent_kafka.admin import NewTopic
    admin = ck_admin(broker)
    too_many = unique_topic("too-many")
    fs = admin.create_topics([NewTopic(too_many, num_partitions=200, replication_factor=1)],
                             request_timeout=30)
    with pytest.raises(Exception) as refused:
        fs[too_many].result(timeout=30)
    err = refused.value.args[0]
    assert err.code() == POLICY_VIOLATION, err
    assert "open-file limit" in err.str(), err

    # All of it opens again under the same limit.
    broker.restart()
    with RawConn(broker) as c:
        assert produce(c, topic, 499, b"y") == (0, 1)
        corr = c.request(API_METADATA, 1, metadata_v1_request([topic]))
        assert parse_metadata_v1(c.recv_response(corr))[topic] == (0, 500)


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs mounted for the test; skips if mounting is not permitted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_partition_offline_after_disk_full_comes_back_once_space_is_freed(broker_factory,
                                                                           small_disk):
    broker = broker_factory("[log]\nretention_ms = -1\n", start=False)
    broker.data_dir = small_disk / "data"
    broker.data_dir.mkdir()
    broker.start()
    topic = unique_topic("full")
    value = b"z" * 50_000
    acked: list[int] = []
    filler = small_disk / "filler"
    try:
        with RawConn(broker) as c:
            assert produce(c, topic, 0, value) == (0, 0)
            acked.append(0)
            # Take the rest of the disk.
            with open(filler, "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                except OSError:
                    pass
            refused = 0
            for _ in range(20):
                err, base = produce(c, topic, 0, value)
                if err == 0:
                    acked.append(base)
                else:
                    assert err == KAFKA_STORAGE_ERROR, err
                    refused += 1
            assert refused > 0, "the disk never filled up"
            # Offline now, even for a small record that would fit.
            assert produce(c, topic, 0, b"s")[0] == KAFKA_STORAGE_ERROR

            filler.unlink()
            deadline = time.monotonic() + 60
            while True:
                err, base = produce(c, topic, 0, b"back")
                if err == 0:
                    break
                assert err == KAFKA_STORAGE_ERROR, err
                assert time.monotonic() < deadline, "the partition never came back"
                time.sleep(0.2)
        offsets = read_offsets(broker, topic)
        assert offsets[:len(acked)] == acked
        assert offsets[-1] == base
        log = broker.stderr_text()
        assert "back online" in log
        broker.restart()
        assert read_offsets(broker, topic) == offsets
    finally:
        broker.kill9()
