"""Memory a broker keeps after classic-group churn (docs/benchmarks.md, "Classic-group
churn: memory given back"; issue 28 item 7).

Starts `drover serve` with the coordinator, range and embedded plugins, then runs M
members in G classic groups for `--seconds`, with hand-encoded Kafka frames (the
encoders of tests/integration/test_kafka_group_wire.py): each member connects, joins
(KIP-394: a JoinGroup for its member id, then the JoinGroup that counts), syncs (the
leader sends a range-like assignment), heartbeats once, commits an offset, leaves and
closes, then starts over as a new member on a new connection. Then nothing runs for
`--rest-s` (sessions of members that were cut off expire, empty groups are dropped),
and the broker's memory is read again: VmRSS, and anonymous memory split into the main
heap and the other anonymous mappings (malloc arenas, thread stacks).

Usage: classic_churn_memory.py --bin DIR [--members M] [--groups G] [--seconds S]
           [--rest-s R] [--rounds N]
Run with target/test-venv/bin/python (scripts/bench-classic-churn-memory.sh does).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))

from drover_testlib import frame, request_header  # noqa: E402
from memory_bench import Broker, create_topic, memory  # noqa: E402
from test_kafka_group_wire import (API_HEARTBEAT, API_JOIN_GROUP, API_LEAVE_GROUP,  # noqa: E402
                                   API_OFFSET_COMMIT, API_SYNC_GROUP, MEMBER_ID_REQUIRED,
                                   assignment, heartbeat_v3, join_group_v5,
                                   leave_group_v3, offset_commit_v7, parse_join_group_v5,
                                   parse_sync_group_v3, subscription, sync_group_v3)

TOPIC = "churn"
PARTITIONS = 8


def in_use(pid: int, log: str, trim: bool = False) -> str:
    """glibc's own account (malloc_stats(), called through gdb, printed to the broker's
    log): bytes the allocator holds from the system and bytes in use, all arenas."""
    cmds = ["-ex", "call (void) malloc_stats()"]
    if trim:
        cmds += ["-ex", "call (int) malloc_trim(0)"]
    subprocess.run(["gdb", "-p", str(pid), "-batch", *cmds], capture_output=True,
                   timeout=120)
    time.sleep(0.5)
    with open(log) as f:
        lines = f.read().splitlines()
    total = max(i for i, line in enumerate(lines) if line.startswith("Total (incl. mmap)"))
    system = int(lines[total + 1].split("=")[1])
    used = int(lines[total + 2].split("=")[1])
    arenas = sum(1 for line in lines[:total] if line.startswith("Arena"))
    return (f"{system / 2**20:.1f} MB held from the system, {used / 2**20:.1f} MB in use "
            f"({arenas} arena lines so far in the log)")


def show(what: str, m: dict[str, int]) -> None:
    print(f"{what}: VmRSS {m['rss'] / 1024:6.1f} MB, anonymous {m['anon'] / 1024:6.1f} MB "
          f"(heap {m['heap'] / 1024:5.1f}, other anonymous maps "
          f"{m['anon_maps'] / 1024:5.1f})", flush=True)


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r, self.w, self.corr = reader, writer, 0

    async def call(self, api: int, version: int, body: bytes) -> bytes:
        self.corr += 1
        self.w.write(frame(request_header(api, version, self.corr) + body))
        await self.w.drain()
        (size,) = struct.unpack(">i", await self.r.readexactly(4))
        payload = await self.r.readexactly(size)
        (corr,) = struct.unpack(">i", payload[:4])
        assert corr == self.corr, (corr, self.corr)
        return payload[4:]


class Stats:
    cycles = 0
    errors = 0


async def member(host: str, port: int, group: str, deadline: float, stats: Stats) -> None:
    meta = subscription([TOPIC])
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            stats.errors += 1
            await asyncio.sleep(0.1)
            continue
        c = Conn(reader, writer)
        try:
            first = parse_join_group_v5(await c.call(
                API_JOIN_GROUP, 5, join_group_v5(group, "", [("range", meta)],
                                                 session_timeout_ms=10000,
                                                 rebalance_timeout_ms=10000)))
            if first.error != MEMBER_ID_REQUIRED:
                raise RuntimeError(f"first join: {first.error}")
            joined = parse_join_group_v5(await c.call(
                API_JOIN_GROUP, 5, join_group_v5(group, first.member_id, [("range", meta)],
                                                 session_timeout_ms=10000,
                                                 rebalance_timeout_ms=10000)))
            me = first.member_id
            if joined.error == 0:
                plan = []
                if joined.leader == me:
                    ids = [m for m, _, _ in joined.members]
                    plan = [(m, assignment({TOPIC: [p for p in range(PARTITIONS)
                                                    if p % len(ids) == i]}))
                            for i, m in enumerate(ids)]
                err, _ = parse_sync_group_v3(await c.call(
                    API_SYNC_GROUP, 3, sync_group_v3(group, joined.generation, me, plan)))
                await c.call(API_HEARTBEAT, 3, heartbeat_v3(group, joined.generation, me))
                if err == 0:
                    await c.call(API_OFFSET_COMMIT, 7, offset_commit_v7(
                        group, joined.generation, me, {(TOPIC, 0): (stats.cycles, None)}))
            await c.call(API_LEAVE_GROUP, 3, leave_group_v3(group, [me]))
            stats.cycles += 1
        except (OSError, EOFError, asyncio.IncompleteReadError, RuntimeError,
                AssertionError):
            stats.errors += 1
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


async def churn(host: str, port: int, members: int, groups: int, seconds: float) -> Stats:
    stats = Stats()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(member(host, port, f"churn-{i % groups}", deadline, stats)
                           for i in range(members)))
    return stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="dir with drover and the plugins")
    ap.add_argument("--members", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rest-s", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the broker")
    ap.add_argument("--gdb-trim", action="store_true",
                    help="at the end, print glibc's malloc_stats() (from the broker's log) "
                         "and call malloc_trim(0) in the broker through gdb: what is "
                         "left then is in use, not merely kept by the allocator")
    args = ap.parse_args()
    broker = Broker(args.bin, f"[server]\nmax_connections = {args.members * 2 + 100}\n",
                    args.env)
    try:
        broker.start()
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        time.sleep(2)
        show("before churn", memory(broker.pid))
        if args.gdb_trim:
            print(f"allocator: {in_use(broker.pid, broker.log)}")
        for r in range(1, args.rounds + 1):
            stats = asyncio.run(churn("127.0.0.1", broker.port, args.members, args.groups,
                                      args.seconds))
            show(f"round {r}: right after {stats.cycles} member cycles "
                 f"({stats.errors} cut off)", memory(broker.pid))
            time.sleep(args.rest_s)
            show(f"round {r}: {args.rest_s:.0f} s later", memory(broker.pid))
            if args.gdb_trim and r < args.rounds:
                print(f"allocator: {in_use(broker.pid, broker.log)}")
        if args.gdb_trim:
            print(f"allocator: {in_use(broker.pid, broker.log, trim=True)}")
            show("after malloc_trim(0)", memory(broker.pid))
        if broker.proc is not None and broker.proc.poll() is not None:
            raise SystemExit(f"the broker exited: {open(broker.log).read()}")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
