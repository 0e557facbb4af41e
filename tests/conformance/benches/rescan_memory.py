"""Resident memory a broker keeps per replaced plugin library (docs/benchmarks.md,
"Plugin rescans: memory per replaced library"; issue 28 item 4).

Starts `drover serve` with the coordinator, range, embedded and `load-aware` plugins,
then replaces the `load-aware` file with N genuinely rebuilt versions
(scripts/build-plugin-versions.sh: rustc rebuilt each with its version bumped), one at a
time, with a rescan (`POST /v1/plugins/rescan`) after each, and reads the broker's memory
from /proc/<pid>/smaps after each: VmRSS, and the anonymous memory split by where it is
(the main heap, other anonymous mappings — malloc arenas, thread stacks, large
allocations —, and copy-on-write pages of the plugin libraries' own mappings, which the
kernel also counts as anonymous: relocated data).

With `--load`, groups use the replaced assignor while it is replaced: G KIP-848 groups
(confluent-kafka, `group.remote.assignor=load-aware`) of M members on one topic, a
member of one group replaced every `--churn-s` seconds (so each replacement starts a new
group epoch whose target the assignor computes), and a producer writing small records
to every partition (so the assignor's context carries produce rates).

Usage: rescan_memory.py --bin DIR --builds DIR [--versions N] [--load] [--settle-s S]
Run with target/test-venv/bin/python (scripts/bench-rescan-memory.sh does).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memory_bench import Broker, create_topic, memory  # noqa: E402

COORDINATOR = """
[plugins.config.drover-coordinator]
initial_rebalance_delay_ms = 300
min_session_timeout_ms = 1000
consumer_session_timeout_ms = 3000
consumer_heartbeat_interval_ms = 500
"""
TARGET = "libdrover_assignor_load_aware.so"


def post(url: str) -> dict:
    req = urllib.request.Request(url, data=b"", method="POST")
    return json.loads(urllib.request.urlopen(req, timeout=60).read())


class Load:
    """KIP-848 groups using `load-aware`, churned, and a producer (module docs)."""

    def __init__(self, bootstrap: str, topic: str, groups: int, members: int,
                 churn_s: float) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.groups, self.members, self.churn_s = groups, members, churn_s
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.produced = 0
        self.replaced = 0

    def member(self, group: str, alive: threading.Event) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                      "group.protocol": "consumer", "group.remote.assignor": "load-aware",
                      "auto.offset.reset": "latest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 500})
        c.subscribe([self.topic])
        while alive.is_set() and not self.stop.is_set():
            c.poll(0.2)
        c.close()

    def start_member(self, group: str) -> threading.Event:
        alive = threading.Event()
        alive.set()
        t = threading.Thread(target=self.member, args=(group, alive), daemon=True)
        t.start()
        self.threads.append(t)
        return alive

    def producer(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20})
        while not self.stop.is_set():
            for _ in range(100):
                p.produce(self.topic, value=b"x" * 100)
            self.produced += 100
            p.poll(0)
            time.sleep(0.1)
        p.flush(10)

    def run(self) -> None:
        t = threading.Thread(target=self.producer, daemon=True)
        t.start()
        self.threads.append(t)
        members = {f"rescan-mem-{g}": [self.start_member(f"rescan-mem-{g}")
                                       for _ in range(self.members)]
                   for g in range(self.groups)}
        turn = 0
        while not self.stop.wait(self.churn_s):
            group = f"rescan-mem-{turn % self.groups}"
            turn += 1
            members[group].pop(0).clear()
            members[group].append(self.start_member(group))
            self.replaced += 1
        for alive in (a for ms in members.values() for a in ms):
            alive.clear()

    def start(self) -> None:
        t = threading.Thread(target=self.run, daemon=True)
        t.start()
        self.runner = t

    def finish(self) -> None:
        self.stop.set()
        self.runner.join(30)
        for t in self.threads:
            t.join(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="dir with drover and the plugins")
    ap.add_argument("--builds", required=True, help="dir with libload_aware-0.1.K.so")
    ap.add_argument("--versions", type=int, default=30)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--churn-s", type=float, default=1.0)
    ap.add_argument("--settle-s", type=float, default=None,
                    help="seconds after each rescan before memory is read "
                         "(default 1 idle, 5 under load)")
    ap.add_argument("--every", type=int, default=5, help="print every N versions")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the broker")
    args = ap.parse_args()
    settle = args.settle_s if args.settle_s is not None else (5.0 if args.load else 1.0)
    builds = [os.path.join(args.builds, f"libload_aware-0.1.{k}.so")
              for k in range(1, args.versions + 2)]
    missing = [b for b in builds if not os.path.exists(b)]
    if missing:
        raise SystemExit(f"missing builds (scripts/build-plugin-versions.sh "
                         f"{args.versions + 1}): {missing[0]}")
    broker = Broker(args.bin, COORDINATOR, args.env)
    broker.install(builds[0], TARGET)
    load = None
    try:
        broker.start()
        if args.load:
            create_topic(broker.bootstrap, "rescan-mem", 12)
            load = Load(broker.bootstrap, "rescan-mem", args.groups, args.members, args.churn_s)
            load.start()
            time.sleep(10)
        rows = []

        def row(i: int) -> None:
            m = memory(broker.pid, broker.cache)
            rows.append((i, m))
            print(f"{i:3} versions: VmRSS {m['rss'] / 1024:6.1f} MB, anonymous "
                  f"{m['anon'] / 1024:6.1f} MB (heap {m['heap'] / 1024:5.1f}, other "
                  f"anonymous maps {m['anon_maps'] / 1024:5.1f}, library copy-on-write "
                  f"{m['lib_anon'] / 1024:5.1f}), library file pages "
                  f"{m['lib_file'] / 1024:5.1f} MB, {m['threads']} threads", flush=True)

        time.sleep(settle)
        row(0)
        for i in range(1, args.versions + 1):
            broker.install(builds[i], TARGET)
            report = post(f"{broker.admin_url}/v1/plugins/rescan")
            if not report.get("replaced"):
                raise SystemExit(f"version {i} not replaced: {report}")
            time.sleep(settle)
            if i % args.every == 0 or i == args.versions:
                row(i)
        first, last = rows[0][1], rows[-1][1]
        n = rows[-1][0]
        print(f"per replaced version over {n}: VmRSS "
              f"{(last['rss'] - first['rss']) / 1024 / n:.2f} MB, anonymous "
              f"{(last['anon'] - first['anon']) / 1024 / n:.2f} MB")
        if len(rows) > 2:
            mid = rows[len(rows) // 2]
            k = n - mid[0]
            print(f"per replaced version over the last {k}: VmRSS "
                  f"{(last['rss'] - mid[1]['rss']) / 1024 / k:.2f} MB, anonymous "
                  f"{(last['anon'] - mid[1]['anon']) / 1024 / k:.2f} MB")
        if load is not None:
            print(f"load: {load.produced} records produced, {load.replaced} members "
                  f"replaced")
    finally:
        if load is not None:
            load.stop.set()
        broker.stop()
        if load is not None:
            load.finish()


if __name__ == "__main__":
    main()
