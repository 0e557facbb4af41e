"""Transactions end to end (docs/benchmarks.md, "Transactions"): one release broker,
confluent-kafka's transactional producer and consumers.

1. Small transactions on one partition: begin, one record, commit; transactions/s.
2. Transactions of 100 records over 10 partitions (10 each); transactions/s.
3. read_committed against read_uncommitted: the same topic (records written in
   transactions of 1,000 records, every tenth one aborted) consumed from the beginning
   to its end by a consumer of each isolation level, alternating; records/s and the
   ratio.

Usage: ck_transactions.py [--broker-bin PATH] [--small N] [--large N] [--records N]
       [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 1,
                  "batch.size": 1_000_000})
    p.init_transactions(30)
    return p


def transactions_per_second(bootstrap: str, topic: str, tid: str, txns: int,
                            partitions: int, per_partition: int) -> float:
    p = producer(bootstrap, tid)
    payload = b"x" * 100
    start = time.monotonic()
    for _ in range(txns):
        p.begin_transaction()
        for q in range(partitions):
            for _ in range(per_partition):
                p.produce(topic, payload, partition=q)
        p.commit_transaction(30)
    return txns / (time.monotonic() - start)


def consume_rate(bootstrap: str, topic: str, partitions: int, isolation: str) -> tuple[float, int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic()}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800})
    ends = {q: c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1]
            for q in range(partitions)}
    c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in range(partitions)])
    n = 0
    start = time.monotonic()
    done = set()
    while len(done) < partitions:
        n += sum(1 for m in c.consume(10_000, 0.2) if m.error() is None)
        # The position passes the markers and aborted records too.
        pos = c.position([TopicPartition(topic, q) for q in range(partitions)])
        done = {tp.partition for tp in pos if tp.offset >= ends[tp.partition]}
    secs = time.monotonic() - start
    c.close()
    return n / secs, n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", default="target/release/drover")
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=300)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    work = tempfile.mkdtemp(prefix="drover-bench-txn-")
    os.makedirs(f"{work}/plugins", mode=0o755)
    port, admin_port = free_port(), free_port()
    broker = subprocess.Popen(
        [args.broker_bin, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen",
         f"127.0.0.1:{admin_port}", "--data-dir", f"{work}/data", "--plugin-dir",
         f"{work}/plugins"],
        stderr=open(f"{work}/broker.log", "w"))
    try:
        bootstrap = f"127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for topic, n in (("small", 1), ("large", 10), ("mixed", 4)):
            admin.create_topics([NewTopic(topic, n, 1)])[topic].result()
        small = transactions_per_second(bootstrap, "small", "bench-small", args.small, 1, 1)
        print(f"small transactions (1 record, 1 partition): {small:8.1f} transactions/s", flush=True)
        large = transactions_per_second(bootstrap, "large", "bench-large", args.large, 10, 10)
        print(f"100 records over 10 partitions: {large:8.1f} transactions/s "
              f"({large * 100:.0f} records/s)", flush=True)
        p = producer(bootstrap, "bench-mixed")
        payload = b"y" * 100
        per_txn = 1000
        for t in range(args.records // per_txn):
            p.begin_transaction()
            for i in range(per_txn):
                p.produce("mixed", payload, partition=i % 4)
            p.flush(30)  # aborted records are written too, as an application's would be
            if t % 10 == 9:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
        rates = {"read_committed": [], "read_uncommitted": []}
        for r in range(args.rounds):
            for iso in rates:
                rate, n = consume_rate(bootstrap, "mixed", 4, iso)
                rates[iso].append(rate)
                print(f"round {r} {iso:16}: {rate:10.0f} records/s ({n} records)", flush=True)
        rc = statistics.median(rates["read_committed"])
        ru = statistics.median(rates["read_uncommitted"])
        print(f"median read_committed {rc:.0f} records/s, read_uncommitted {ru:.0f} records/s, "
              f"ratio {rc / ru:.2f} (read_committed reads 90% of the records)")
    finally:
        broker.terminate()
        broker.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
