"""Durability: acknowledged (acks=all) messages survive kill -9; a torn tail of the newest
segment is cut off on restart, the rest stays intact and producing continues.

Data dir layout relied on: <data_dir>/logs/<topic>-<partition>/<20-digit base offset>.log
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from drover_testlib import (Msg, ck_consume, ck_create_topic, ck_produce, ck_producer,
                            ck_topic_id, ck_watermarks, unique_topic)


def indexed_messages(n: int, seed: int) -> list[Msg]:
    """Messages whose value starts with their index, so any record can be traced back."""
    rnd = random.Random(seed)
    return [Msg(b"key-%d" % (i % 23), b"%08d|" % i + rnd.randbytes(rnd.randint(0, 400)),
                [("idx", b"%d" % i), ("r", rnd.randbytes(4))]) for i in range(n)]


def index_of(value: bytes) -> int:
    return int(value[:8])


def partition_dir(broker, topic: str, partition: int) -> Path:
    d = broker.data_dir / "logs" / f"{topic}-{partition}"
    if not d.is_dir():
        tree = "\n".join(str(p.relative_to(broker.data_dir)) for p in sorted(broker.data_dir.rglob("*")))
        pytest.fail(f"no partition directory {d}; data dir holds:\n{tree}", pytrace=False)
    return d


def segments(broker, topic: str, partition: int) -> list[Path]:
    segs = sorted(partition_dir(broker, topic, partition).glob("*.log"))
    for s in segs:
        assert len(s.stem) == 20 and s.stem.isdigit(), f"segment file name {s.name}"
    assert segs, f"no .log segment for {topic}-{partition}"
    return segs


# Each produce path (acknowledgement after the group-commit fsync, background flushes,
# none) must keep every acknowledged message across kill -9 and recovery. The page
# cache outlives the process, so the policies differ only on a machine crash, which
# this test does not produce.
FLUSH_POLICIES = {
    # The default: every acknowledgement waits for an fsync (group commit).
    "durable-acks": None,
    # Fsyncs in the background every 1000 records; acknowledgements do not wait.
    "flush-every-1000": "[log]\nflush_messages = 1000\n",
    # Kafka's default: the OS flushes. A kill -9 of the process loses nothing written.
    "os-flushes": "[log]\nflush_messages = 9223372036854775807\n",
}


@pytest.mark.parametrize("policy", list(FLUSH_POLICIES))
def test_kill9_keeps_every_acknowledged_message(broker_factory, policy):
    broker = broker_factory(FLUSH_POLICIES[policy])
    topic = unique_topic("dur-kill")
    ck_create_topic(broker, topic, 2)
    topic_id = ck_topic_id(broker, topic)
    msgs = indexed_messages(8000, seed=40)

    p = ck_producer(broker, **{"linger.ms": 2, "compression.type": "lz4",
                               "message.timeout.ms": 15000})
    acked: dict[int, tuple[int, int]] = {}
    failed: dict[int, str] = {}

    def cb(i):
        def on_delivery(err, m):
            if err is None:
                acked[i] = (m.partition(), m.offset())
            else:
                failed[i] = str(err)
        return on_delivery

    kill_after_acks, extra_after_kill, max_outstanding = 3000, 300, 400
    killed_at = None
    deadline = time.monotonic() + 60
    i = 0
    while i < len(msgs) and time.monotonic() < deadline:
        # Keep a window of messages in flight, so some are unacknowledged at the kill.
        while i - len(acked) - len(failed) > max_outstanding and time.monotonic() < deadline:
            p.poll(0.01)
            if killed_at is not None:
                break
        m = msgs[i]
        p.produce(topic, key=m.key, value=m.value, headers=m.headers, on_delivery=cb(i))
        i += 1
        p.poll(0)
        if killed_at is None and len(acked) >= kill_after_acks:
            broker.kill9()
            killed_at = i
        if killed_at is not None and i - killed_at >= extra_after_kill:
            break
    if killed_at is None:
        p.flush(30)
        broker.kill9()
    p.purge(in_queue=True, in_flight=True, blocking=True)
    p.flush(10)
    del p
    assert len(acked) >= kill_after_acks

    broker.start()
    assert ck_topic_id(broker, topic) == topic_id, "topic ID changed across restart"
    wm = ck_watermarks(broker, topic, [0, 1])
    for part in (0, 1):
        top = max((off for (pp, off) in acked.values() if pp == part), default=-1)
        assert wm[part][0] == 0 and wm[part][1] >= top + 1, \
            f"partition {part}: watermarks {wm[part]}, highest acknowledged offset {top}"
    got = ck_consume(broker, topic, {part: wm[part][1] for part in (0, 1)}, timeout=90)
    by_pos = {(r.partition, r.offset): r for recs in got.values() for r in recs}
    for i, pos in sorted(acked.items()):
        r = by_pos.get(pos)
        assert r is not None, f"acknowledged message {i} at {pos} is missing"
        m = msgs[i]
        assert (r.key, r.value, r.headers) == (m.key, m.value, m.headers), \
            f"acknowledged message {i} at {pos} differs"
    for part, recs in got.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        idx = [index_of(r.value) for r in recs]
        assert idx == sorted(idx) and len(set(idx)) == len(idx), \
            f"partition {part}: records out of produce order or duplicated"
        for r in recs:
            m = msgs[index_of(r.value)]
            assert (r.key, r.value, r.headers) == (m.key, m.value, m.headers)

    # Producing continues after the acknowledged tail.
    more = ck_produce(broker, topic, [Msg(b"after", b"restart", partition=0)])
    assert more == [(0, wm[0][1])]


TEAR_CASES = {
    # name: (config, how to damage the newest segment, is the last batch kept?)
    "cut-1-byte": (None, ("cut", 1), False),
    "cut-7-bytes": (None, ("cut", 7), False),
    "cut-40-bytes": (None, ("cut", 40), False),
    # Rolled by age (segment sizes below 1 MiB are refused, as in Kafka 4.x): the last
    # produce call, a separate request more than 1 ms later, starts a new segment.
    "cut-7-bytes-many-segments": ("[log]\nsegment_ms = 1\n", ("cut", 7), False),
    "zero-tail": (None, ("append", b"\x00" * 4096), True),
    "garbage-tail": (None, ("append", random.Random(7).randbytes(100)), True),
}


@pytest.mark.parametrize("case", list(TEAR_CASES))
def test_torn_tail_is_truncated_on_restart(broker_factory, case):
    config, (how, arg), last_kept = TEAR_CASES[case]
    broker = broker_factory(config)
    topic = unique_topic("dur-torn")
    ck_create_topic(broker, topic, 1)
    msgs = indexed_messages(500, seed=41)
    for m in msgs:
        m.partition = 0
    # Small batches: a batch larger than segment_bytes is refused (as in Kafka).
    assert ck_produce(broker, topic, msgs, **{"batch.size": 8192}) == [(0, i) for i in range(500)]
    last = Msg(b"last", b"the-last-batch-" * 20, [("h", b"last")], partition=0)
    assert ck_produce(broker, topic, [last]) == [(0, 500)]  # its own record batch

    assert broker.terminate() == 0, "SIGTERM should exit 0"
    segs = segments(broker, topic, 0)
    if "many-segments" in case:
        assert len(segs) > 1, "segment_ms = 1 should have rolled segments"
    newest = segs[-1]
    size = newest.stat().st_size
    if how == "cut":
        assert size > arg
        os.truncate(newest, size - arg)
    else:
        with open(newest, "ab") as f:
            f.write(arg)

    broker.start()
    kept = 501 if last_kept else 500
    assert ck_watermarks(broker, topic, [0])[0] == (0, kept)
    got = ck_consume(broker, topic, {0: kept}, timeout=60)[0]
    assert [r.offset for r in got] == list(range(kept))
    for r, m in zip(got, msgs + [last]):
        assert (r.key, r.value, r.headers) == (m.key, m.value, m.headers), f"offset {r.offset}"

    # Producing continues at the new end, and what is produced reads back.
    new = Msg(b"new", b"after-recovery", [("h", b"new")], partition=0)
    assert ck_produce(broker, topic, [new]) == [(0, kept)]
    r = ck_consume(broker, topic, {0: 1}, start=kept)[0][0]
    assert (r.offset, r.key, r.value, r.headers) == (kept, new.key, new.value, new.headers)

    # And it survives another restart.
    broker.restart()
    assert ck_watermarks(broker, topic, [0])[0] == (0, kept + 1)
