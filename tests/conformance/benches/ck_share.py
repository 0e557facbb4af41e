"""Share groups against a consumer group on the same data, in one run (docs/benchmarks.md,
"Share groups"; issue 31's benchmark).

One broker (the coordinator plugin, the range assignor, the embedded store) and one
topic of one partition holding `--messages` records of `--size` bytes, produced once.
Each round reads all of them in every phase, each phase with a group of its own, from
the earliest offset:

- `group`: one confluent-kafka `Consumer` in a consumer group (subscribe; the records
  are fetched, nothing is acknowledged; one offset commit at the end);
- `share-K` for K in `--share` (default 1, 4, 16): K confluent-kafka `ShareConsumer`s
  (KIP-932, implicit acknowledgement: every record delivered is acquired under a lock
  and acknowledged with the next ShareFetch), each in a process of its own.

A phase ends when its consumers have received `--messages` deliveries. Per phase: the
records per second delivered (from the first record to the last), the broker's CPU
seconds (utime + stime of the broker process, /proc/<pid>/stat, from the consumers'
start to the last record: joining included) per GB delivered, and deliveries beyond
one per record (redeliveries; 0 expected). The phases' order rotates from round to
round; medians over the rounds, and each share phase's ratio to `group` in the same
round (the median of the per-round ratios).

Usage: ck_share.py --broker-bin PATH --plugins DIR [--messages N] [--size BYTES]
           [--rounds R] [--share K ...]
Run with target/test-venv/bin/python (scripts/bench-share.sh does).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_broker import cpu_seconds, start_broker  # noqa: E402

def start(bin_path: str, plugin_dir: str, work: Path):
    """The broker -> (process, bootstrap)."""
    proc, kafka, _admin = start_broker(bin_path, plugin_dir, work, """
[log]
flush_messages = 1000000000
""")
    return proc, f"127.0.0.1:{kafka}"


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    payload = os.urandom(size)
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, key=b"%d" % i, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def earliest_share_group(bootstrap: str, group: str) -> None:
    """`share.auto.offset.reset=earliest` on `group` (a group config, KIP-932)."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([res], request_timeout=30)[res].result(timeout=30)


def consume(kind: str, bootstrap: str, topic: str, group: str, delivered, first, stop) -> None:
    """One consumer process: polls until `stop`, adding what it receives to
    `delivered` and noting the first record's time in `first`."""
    if kind == "share":
        from confluent_kafka import ShareConsumer
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        poll = lambda: c.poll(0.5)  # noqa: E731 - a list of messages
    else:
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        poll = lambda: c.consume(num_messages=10_000, timeout=0.5)  # noqa: E731
    c.subscribe([topic])
    try:
        while not stop.is_set():
            got = sum(1 for m in poll() if m.error() is None)
            if got:
                with delivered.get_lock():
                    if first.value == 0.0:
                        first.value = time.time()
                    delivered.value += got
        if kind != "share":
            c.commit(asynchronous=False)
    finally:
        c.close()


def phase(broker, bootstrap: str, topic: str, name: str, n: int, size: int) -> dict:
    kind, k = ("group", 1) if name == "group" else ("share", int(name.split("-")[1]))
    group = f"bench-{name}-{time.time_ns()}"
    if kind == "share":
        earliest_share_group(bootstrap, group)
    ctx = mp.get_context("spawn")
    delivered, first, stop = ctx.Value("q", 0), ctx.Value("d", 0.0), ctx.Event()
    cpu0 = cpu_seconds(broker.pid)
    procs = [ctx.Process(target=consume, args=(kind, bootstrap, topic, group, delivered,
                                               first, stop)) for _ in range(k)]
    for p in procs:
        p.start()
    deadline = time.time() + 600
    while delivered.value < n:
        if time.time() > deadline:
            stop.set()
            sys.exit(f"{name}: only {delivered.value} of {n} records in 600 s")
        time.sleep(0.01)
    end = time.time()
    cpu = cpu_seconds(broker.pid) - cpu0
    stop.set()
    for p in procs:
        p.join(60)
    got = delivered.value
    gb = n * size / 1e9
    return {"phase": name, "records_per_s": n / max(end - first.value, 1e-9),
            "cpu_s_per_gb": cpu / gb, "redelivered": max(got - n, 0)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", required=True)
    ap.add_argument("--plugins", required=True)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--share", type=int, nargs="*", default=[1, 4, 16])
    args = ap.parse_args()

    import confluent_kafka
    names = ["group"] + [f"share-{k}" for k in args.share]
    with tempfile.TemporaryDirectory() as tmp:
        broker, bootstrap = start(args.broker_bin, args.plugins, Path(tmp))
        try:
            topic = "bench-share"
            produce(bootstrap, topic, args.messages, args.size)
            rounds: list[dict[str, dict]] = []
            for r in range(args.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                results = {}
                for name in order:
                    res = phase(broker, bootstrap, topic, name, args.messages, args.size)
                    results[name] = res
                    print(f"round {r} {name:9} {res['records_per_s']:10.0f} records/s "
                          f"{res['cpu_s_per_gb']:7.2f} broker CPU-s/GB "
                          f"{res['redelivered']} redelivered", flush=True)
                rounds.append(results)
        finally:
            broker.terminate()
            broker.wait(30)
    print(f"\nconfluent-kafka {confluent_kafka.__version__} (librdkafka "
          f"{confluent_kafka.libversion()[0]}), {args.messages} records of {args.size} B, "
          f"{args.rounds} rounds, medians:")
    print("| phase | records/s | broker CPU-s per GB | records/s ÷ group | CPU/GB ÷ group |")
    print("|---|---|---|---|---|")
    for name in names:
        rps = statistics.median(r[name]["records_per_s"] for r in rounds)
        cpu = statistics.median(r[name]["cpu_s_per_gb"] for r in rounds)
        rr = statistics.median(r[name]["records_per_s"] / r["group"]["records_per_s"]
                               for r in rounds)
        cr = statistics.median(r[name]["cpu_s_per_gb"] / r["group"]["cpu_s_per_gb"]
                               for r in rounds)
        print(f"| {name} | {rps:,.0f} | {cpu:.2f} | {rr:.2f} | {cr:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
