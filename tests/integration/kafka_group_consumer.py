#!/usr/bin/env python3
"""One member of a Kafka consumer group, with a real client, for the issue-8 tests.

Writes one JSON object per line to --out: {"ev": "assigned"|"revoked", "partitions": [...]}
from the client's rebalance callbacks, and {"ev": "msg", "p": partition, "o": offset,
"v": value} per delivered record, written *before* the record's offset is committed
(so after a kill the next owner may deliver the last recorded offset again, never skip
one). Runs until SIGTERM, then closes the client cleanly (final commit, LeaveGroup
unless static).

Clients: confluent-kafka (`--protocol classic|consumer`, `--assignor` = the classic
partition.assignment.strategy or the KIP-848 group.remote.assignor), kafka-python
(classic; range or roundrobin), kcat (`kcat -G`, auto-commit, assignments parsed from its
log lines)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading

stop = threading.Event()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=["confluent", "kafka-python", "kcat"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    ap.add_argument("--assignor", default="")
    ap.add_argument("--instance-id", default="")
    ap.add_argument("--rack", default="", help="client.rack (confluent-kafka)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--kcat", default="kcat")
    ap.add_argument("--assign-delay-ms", type=int, default=0,
                    help="confluent-kafka: the first assignment callback returns this "
                         "much later (the client keeps heartbeating meanwhile)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    out = open(args.out, "a", buffering=1)

    def emit(**rec) -> None:
        out.write(json.dumps(rec) + "\n")
        out.flush()
        os.fsync(out.fileno())

    if args.client == "confluent":
        return run_confluent(args, emit)
    if args.client == "kafka-python":
        return run_kafka_python(args, emit)
    return run_kcat(args, emit)


def run_confluent(args, emit) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "group.protocol": args.protocol,
    }
    if args.protocol == "classic":
        conf["session.timeout.ms"] = args.session_timeout_ms
        conf["heartbeat.interval.ms"] = max(100, args.session_timeout_ms // 6)
        if args.assignor:
            conf["partition.assignment.strategy"] = args.assignor
    elif args.assignor:
        conf["group.remote.assignor"] = args.assignor
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.rack:
        conf["client.rack"] = args.rack
    c = Consumer(conf)

    first_assign = [True]

    def on_assign(consumer, parts):
        emit(ev="assigned", partitions=sorted(p.partition for p in parts))
        if first_assign[0] and args.assign_delay_ms > 0:
            first_assign[0] = False
            stop.wait(args.assign_delay_ms / 1000)

    def on_revoke(consumer, parts):
        emit(ev="revoked", partitions=sorted(p.partition for p in parts))

    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                print(f"consumer error: {m.error()}", file=sys.stderr, flush=True)
                continue
            emit(ev="msg", p=m.partition(), o=m.offset(), v=(m.value() or b"").decode())
            try:
                c.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)],
                         asynchronous=False)
            except KafkaException as e:
                print(f"commit failed: {e}", file=sys.stderr, flush=True)
    finally:
        c.close()
    return 0


def run_kafka_python(args, emit) -> int:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    strategies = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    c = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=max(100, args.session_timeout_ms // 6),
        partition_assignment_strategy=[strategies[args.assignor or "range"]],
    )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(ev="revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            emit(ev="assigned", partitions=sorted(tp.partition for tp in assigned))

    c.subscribe([args.topic], listener=Listener())
    try:
        while not stop.is_set():
            batches = c.poll(timeout_ms=200)
            for tp, records in batches.items():
                for r in records:
                    emit(ev="msg", p=r.partition, o=r.offset, v=(r.value or b"").decode())
                    try:
                        c.commit({TopicPartition(tp.topic, tp.partition):
                                  OffsetAndMetadata(r.offset + 1, "", -1)})
                    except Exception as e:  # noqa: BLE001 - logged, the test judges
                        print(f"commit failed: {e!r}", file=sys.stderr, flush=True)
    finally:
        c.close()
    return 0


ASSIGNED = re.compile(r"assigned: (.*)$")


def run_kcat(args, emit) -> int:
    cmd = [args.kcat, "-b", args.bootstrap, "-G", args.group, "-o", "beginning",
           "-f", "%p %o %s\\n", "-X", "auto.commit.interval.ms=200",
           "-X", f"session.timeout.ms={args.session_timeout_ms}", args.topic]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read_log():
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            m = ASSIGNED.search(line.strip())
            if m and "rebalanced" in line:
                parts = sorted(int(p) for p in re.findall(r"\[(\d+)\]", m.group(1)))
                emit(ev="assigned", partitions=parts)
            elif "rebalanced" in line and "revoked" in line:
                parts = sorted(int(p) for p in re.findall(r"\[(\d+)\]", line))
                emit(ev="revoked", partitions=parts)

    threading.Thread(target=read_log, daemon=True).start()

    def reader():
        for line in proc.stdout:
            p, o, v = line.rstrip("\n").split(" ", 2)
            emit(ev="msg", p=int(p), o=int(o), v=v)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    stop.wait()
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    t.join(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
