"""confluent-kafka's consumer for the connector_e2e bench.

Assigns partitions 0..P-1 of a topic at offset 0 (assign(), no group coordination: the
bench measures fetch throughput; group rebalances are the group_rebalance bench's) and
consumes until it has
--messages messages, then prints one JSON line: messages, payload bytes, seconds
(from creating the Consumer until the last message), when the first batch came,
MB/s, the process CPU seconds (every thread, librdkafka's included) and the
librdkafka settings used.

Usage: ck_consume.py --bootstrap HOST:PORT --topic T --partitions P --messages N
           [--set key=value ...]   (extra librdkafka settings)
"""

import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--batch", type=int, default=10_000, help="consume(num_messages=)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    from confluent_kafka import Consumer, TopicPartition, libversion, version

    settings = {
        # Kafka's defaults, written out so the report shows them.
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 1_048_576,
        "fetch.wait.max.ms": 500,
        "fetch.min.bytes": 1,
        # librdkafka's prefetch queue, per partition-set (its default is 65536 KiB,
        # 100000 messages).
        "queued.max.messages.kbytes": 65_536,
        "queued.min.messages": 100_000,
        "check.crcs": False,
    }
    for kv in args.set:
        key, _, value = kv.partition("=")
        settings[key] = int(value) if value.lstrip("-").isdigit() else value
    conf = {
        "bootstrap.servers": args.bootstrap,
        # Required by librdkafka; never used to join a Kafka group (assign only).
        "group.id": "connector-bench-ck",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        **settings,
    }

    cpu0 = time.process_time()
    start = time.perf_counter()
    c = Consumer(conf)
    c.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    seen = 0
    payload = 0
    first = None
    deadline = time.monotonic() + args.timeout
    while seen < args.messages:
        if time.monotonic() > deadline:
            print(f"timed out after {seen} messages", file=sys.stderr)
            return 1
        batch = c.consume(num_messages=args.batch, timeout=1.0)
        if first is None and batch:
            first = time.perf_counter() - start
        for m in batch:
            if m.error() is not None:
                print(f"consumer error: {m.error()}", file=sys.stderr)
                return 1
            payload += len(m.value())
            seen += 1
    secs = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    c.close()
    ck_version = version()
    if isinstance(ck_version, tuple):
        ck_version = ck_version[0]
    print(json.dumps({
        "client": f"confluent-kafka {ck_version} (librdkafka {libversion()[0]})",
        "messages": seen,
        "payload_bytes": payload,
        "seconds": secs,
        "first_message_seconds": first,
        "mb_per_s": payload / secs / 1e6,
        "cpu_seconds": cpu,
        "settings": settings,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
