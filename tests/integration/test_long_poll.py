"""Fetch long polling: a fetch parked on an empty partition is answered as soon as data
arrives (well before max_wait_ms), an idle one is held for about max_wait_ms, and
min_bytes / max_bytes are honoured.

Timing assertions are deliberately loose (this runs on 2 busy cores): max wait 10 s,
and a message produced 1 s after the consumer started waiting must arrive within 5 s."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from drover_testlib import (API_FETCH, Msg, RawConn, batch_base_offsets, ck_consumer,
                            ck_create_topic, ck_produce, fetch_v4_request, kcat_path,
                            kp_consumer, parse_fetch_v4, unique_topic)

MAX_WAIT_MS = 10_000
PRODUCE_AFTER_S = 1.0
ARRIVE_WITHIN_S = 5.0  # after the produce was acknowledged


class DelayedProducer:
    """Produces one message PRODUCE_AFTER_S seconds after start(); records when the
    broker acknowledged it."""

    def __init__(self, broker, topic, value=b"wake-up"):
        self.broker, self.topic, self.value = broker, topic, value
        self.acked_at = None
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def _run(self):
        try:
            time.sleep(PRODUCE_AFTER_S)
            ck_produce(self.broker, self.topic, [Msg(b"k", self.value, partition=0)],
                       flush_timeout=20)
            self.acked_at = time.monotonic()
        except Exception as e:  # reported by the test
            self.error = e

    def join(self):
        self.thread.join(timeout=30)
        assert self.error is None, f"delayed produce failed: {self.error}"
        assert self.acked_at is not None, "delayed produce did not finish"


def test_confluent_consumer_wakes_on_produce(broker):
    from confluent_kafka import TopicPartition
    topic = unique_topic("lp-ck")
    ck_create_topic(broker, topic, 1)
    c = ck_consumer(broker, **{"fetch.wait.max.ms": MAX_WAIT_MS, "fetch.min.bytes": 1})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        assert c.poll(0.3) is None  # the consumer is now parked on the empty partition
        dp = DelayedProducer(broker, topic)
        dp.start()
        got = None
        deadline = time.monotonic() + PRODUCE_AFTER_S + ARRIVE_WITHIN_S + 5
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got = (time.monotonic(), m.value(), m.offset())
        dp.join()
        assert got is not None, "message never arrived"
        at, value, offset = got
        assert (value, offset) == (b"wake-up", 0)
        assert at - dp.acked_at < ARRIVE_WITHIN_S, \
            f"arrived {at - dp.acked_at:.2f} s after the ack: the parked fetch was not woken"
    finally:
        c.close()


def test_kafka_python_consumer_wakes_on_produce(broker):
    from kafka import TopicPartition
    topic = unique_topic("lp-kp")
    ck_create_topic(broker, topic, 1)
    c = kp_consumer(broker, fetch_max_wait_ms=MAX_WAIT_MS, fetch_min_bytes=1,
                    request_timeout_ms=MAX_WAIT_MS + 20_000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        assert c.poll(timeout_ms=300) == {}
        dp = DelayedProducer(broker, topic)
        dp.start()
        got = None
        deadline = time.monotonic() + PRODUCE_AFTER_S + ARRIVE_WITHIN_S + 5
        while got is None and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                r = recs[0]
                got = (time.monotonic(), r.value, r.offset)
        dp.join()
        assert got is not None, "message never arrived"
        at, value, offset = got
        assert (value, offset) == (b"wake-up", 0)
        assert at - dp.acked_at < ARRIVE_WITHIN_S, \
            f"arrived {at - dp.acked_at:.2f} s after the ack: the parked fetch was not woken"
    finally:
        c.close()


def test_kcat_consumer_wakes_on_produce(broker):
    topic = unique_topic("lp-kcat")
    ck_create_topic(broker, topic, 1)
    cmd = [kcat_path(), "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
           "-c", "1", "-J", "-q", "-X", f"fetch.wait.max.ms={MAX_WAIT_MS}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        dp = DelayedProducer(broker, topic)
        dp.start()
        out, err = proc.communicate(timeout=PRODUCE_AFTER_S + ARRIVE_WITHIN_S + 10)
        done = time.monotonic()
        dp.join()
        assert proc.returncode == 0, err.decode(errors="replace")
        (rec,) = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
        assert (rec["payload"], rec["offset"]) == ("wake-up", 0)
        assert done - dp.acked_at < ARRIVE_WITHIN_S
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


# ---------------------------------------------------------------------------------
# Raw Fetch v4: what the broker does with max_wait_ms / min_bytes / max_bytes
# ---------------------------------------------------------------------------------
def raw_fetch(broker, topic, offset, **kw):
    with RawConn(broker, timeout=30) as c:
        t = time.monotonic()
        corr = c.request(API_FETCH, 4, fetch_v4_request(topic, 0, offset, **kw))
        body = c.recv_response(corr)
        elapsed = time.monotonic() - t
    part = parse_fetch_v4(body)[(topic, 0)]
    return elapsed, part


def test_raw_fetch_idle_is_held_for_max_wait(broker):
    topic = unique_topic("lp-raw-idle")
    ck_create_topic(broker, topic, 1)
    elapsed, part = raw_fetch(broker, topic, 0, max_wait_ms=2000, min_bytes=1)
    assert part.error == 0 and part.high_watermark == 0
    assert not part.records
    assert elapsed >= 1.0, f"empty fetch answered after {elapsed:.2f} s: max_wait_ms ignored"
    assert elapsed < 8.0, f"empty fetch held {elapsed:.2f} s for max_wait_ms=2000"


def test_raw_fetch_woken_by_produce(broker):
    topic = unique_topic("lp-raw-wake")
    ck_create_topic(broker, topic, 1)
    dp = DelayedProducer(broker, topic)
    dp.start()
    elapsed, part = raw_fetch(broker, topic, 0, max_wait_ms=MAX_WAIT_MS, min_bytes=1)
    dp.join()
    assert part.error == 0 and part.high_watermark == 1
    assert batch_base_offsets(part.records or b"") == [0]
    assert elapsed < PRODUCE_AFTER_S + ARRIVE_WITHIN_S, f"answered after {elapsed:.2f} s"


def test_raw_fetch_min_bytes_waits_then_returns_what_is_there(broker):
    topic = unique_topic("lp-raw-min")
    ck_create_topic(broker, topic, 1)
    ck_produce(broker, topic, [Msg(b"k", b"small", partition=0)])
    elapsed, part = raw_fetch(broker, topic, 0, max_wait_ms=1500, min_bytes=1024 * 1024)
    assert part.error == 0 and part.high_watermark == 1
    assert batch_base_offsets(part.records or b"") == [0], "data available at max wait is returned"
    assert elapsed >= 0.75, f"answered after {elapsed:.2f} s although min_bytes was not reached"
    assert elapsed < 8.0


def test_raw_fetch_max_bytes(broker):
    topic = unique_topic("lp-raw-max")
    ck_create_topic(broker, topic, 1)
    for i in range(5):  # five batches of ~20 KB
        ck_produce(broker, topic, [Msg(b"k", bytes([65 + i]) * 20_000, partition=0)],
                   **{"linger.ms": 0})
    _, full = raw_fetch(broker, topic, 0, max_wait_ms=100, min_bytes=1)
    assert batch_base_offsets(full.records or b"") == [0, 1, 2, 3, 4]
    # A limit smaller than the first batch still returns that whole batch (progress).
    for kw in ({"max_bytes": 1}, {"partition_max_bytes": 1}):
        _, part = raw_fetch(broker, topic, 0, max_wait_ms=100, min_bytes=1, **kw)
        size, bases = len(part.records or b""), batch_base_offsets(part.records or b"")
        assert bases[:1] == [0], f"{kw}: batches {bases}"
        assert size < len(full.records), f"{kw}: limit ignored ({size} bytes, batches {bases})"
    _, part = raw_fetch(broker, topic, 0, max_wait_ms=100, min_bytes=1, max_bytes=45_000)
    size, bases = len(part.records or b""), batch_base_offsets(part.records or b"")
    assert bases[:1] == [0] and len(bases) < 5, f"max_bytes=45000 gave batches {bases}"
    assert size <= 45_000, f"max_bytes=45000 gave {size} bytes"
    # Fetching from the middle starts at that batch.
    _, part = raw_fetch(broker, topic, 3, max_wait_ms=100, min_bytes=1)
    assert batch_base_offsets(part.records or b"") == [3, 4]
