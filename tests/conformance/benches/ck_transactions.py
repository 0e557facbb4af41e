"""Transactions end to end (docs/benchmarks.md, "Transactions"): one release broker,
confluent-kafka's transactional producer and consumers.

1. Small transactions on one partition: begin, one record, commit; transactions/s.
2. Transactions of 100 records over 10 partitions (10 each); transactions/s.
3. read_committed against read_uncommitted: the same topic (records written in
   transactions of 1,000 records, every tenth one aborted) consumed from the beginning
   to its end by a consumer of each isolation level, alternating; records/s and the
   ratio (skipped with --records 0).
4. With --cluster: 1 and 2 again in a two-broker cluster (a ZooKeeper server from
   Debian's `zookeeper` package, brokers in cluster mode): each transactional id's
   state in ZooKeeper, the topics' partitions spread over both brokers, so markers for
   the other broker's partitions go through its ZooKeeper queue.

Usage: ck_transactions.py [--broker-bin PATH] [--small N] [--large N] [--records N]
       [--rounds R] [--cluster]
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


ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"]


def wait_port(port: int) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def start_zookeeper(work: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    os.makedirs(f"{work}/zk", exist_ok=True)
    with open(f"{work}/zoo.cfg", "w") as f:
        f.write(f"tickTime=500\ndataDir={work}/zk\nclientPort={port}\n"
                "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n")
    zk = subprocess.Popen(
        ["java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         "-cp", ":".join(ZK_JARS), "org.apache.zookeeper.server.quorum.QuorumPeerMain",
         f"{work}/zoo.cfg"], stdout=open(f"{work}/zk.log", "w"), stderr=subprocess.STDOUT)
    wait_port(port)
    return zk, port


def cluster_transactions(args) -> None:
    """Small and large transactions/s in a two-broker cluster."""
    from confluent_kafka.admin import AdminClient, NewTopic

    work = tempfile.mkdtemp(prefix="drover-bench-txn-cluster-")
    zk, zk_port = start_zookeeper(work)
    brokers = []
    try:
        ports = []
        for b in (1, 2):
            d = f"{work}/b{b}"
            os.makedirs(f"{d}/plugins", mode=0o755)
            with open(f"{d}/drover.toml", "w") as f:
                f.write(f"[server]\nbroker_id = {b}\n[zookeeper]\nenabled = true\n"
                        f"connect = \"127.0.0.1:{zk_port}\"\nchroot = \"/bench\"\n")
            port, admin_port = free_port(), free_port()
            brokers.append(subprocess.Popen(
                [args.broker_bin, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen",
                 f"127.0.0.1:{admin_port}", "--data-dir", f"{d}/data", "--plugin-dir",
                 f"{d}/plugins", "--config", f"{d}/drover.toml"],
                stderr=open(f"{d}/broker.log", "w")))
            ports.append(port)
        for port in ports:
            wait_port(port)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for _ in range(100):  # both brokers registered: partitions go to both
            if len(admin.list_topics(timeout=10).brokers) == 2:
                break
            time.sleep(0.1)
        for topic, n in (("small", 1), ("large", 10)):
            admin.create_topics([NewTopic(topic, n, 1)])[topic].result()
        # Every broker has the topics, and slots claimed by the first broker up are
        # handed to their preferred owner (slot_claim_delay_ms, 2 s) before measuring.
        time.sleep(5)
        small = transactions_per_second(bootstrap, "small", "bench-small", args.small, 1, 1)
        print(f"cluster: small transactions (1 record, 1 partition): {small:8.1f} "
              "transactions/s", flush=True)
        large = transactions_per_second(bootstrap, "large", "bench-large", args.large, 10, 10)
        print(f"cluster: 100 records over 10 partitions: {large:8.1f} transactions/s "
              f"({large * 100:.0f} records/s)", flush=True)
    finally:
        for b in brokers:
            b.terminate()
            b.wait(30)
        zk.terminate()
        zk.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", default="target/release/drover")
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=300)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cluster", action="store_true",
                    help="also measure transactions/s in a two-broker cluster")
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
        if args.records == 0:
            return 0
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
        if args.cluster:
            cluster_transactions(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
