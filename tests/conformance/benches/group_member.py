"""One confluent-kafka group member for the group_rebalance bench (issue 8).

Driven over stdin/stdout by `benches/group_rebalance.rs`:

1. imports confluent-kafka and creates the Consumer, then prints {"ev": "ready"};
2. on the stdin line `go`: prints {"ev": "subscribed"}, subscribes to --topic and polls;
   every rebalance callback prints one line: {"ev": "assigned"|"revoked", "partitions":
   [...]} (the partitions added or removed: incremental with cooperative-sticky and
   group.protocol=consumer, the whole assignment with eager assignors) or {"ev":
   "lost"} (every partition dropped);
3. on the stdin line `close` (or at EOF): prints {"ev": "closing"}, closes the Consumer
   (LeaveGroup / a leave heartbeat), prints {"ev": "closed"} and exits.

Every line carries "t": CLOCK_MONOTONIC in seconds, taken when the event happened (at
the start of the callback), comparable across processes on one machine. Offsets are
never committed (enable.auto.commit false; the topic may be empty).

`--create-topic` instead creates --topic with --partitions partitions (AdminClient),
waits until Metadata shows all of them and prints {"ev": "created"}.

Usage: group_member.py --bootstrap HOST:PORT --topic T --group G
           [--protocol classic|consumer] [--assignor NAME] [--client-id ID]
           [--set key=value ...]
       group_member.py --create-topic --bootstrap HOST:PORT --topic T --partitions P
"""

import argparse
import json
import sys
import threading
import time


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


_out_lock = threading.Lock()


def emit(ev: str, **fields) -> None:
    fields = {"ev": ev, "t": fields.pop("t", None) or now(), **fields}
    with _out_lock:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def create_topic(args) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    futures = admin.create_topics(
        [NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)],
        operation_timeout=30)
    try:
        futures[args.topic].result(timeout=60)
    except Exception as e:  # noqa: BLE001 - reported, the bench decides
        if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
            print(f"create_topics failed: {e!r}", file=sys.stderr, flush=True)
            return 1
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics(topic=args.topic, timeout=10)
        t = md.topics.get(args.topic)
        if t is not None and t.error is None and len(t.partitions) == args.partitions:
            break
        if time.monotonic() > deadline:
            print(f"topic {args.topic} not visible with {args.partitions} partitions: "
                  f"{t.error if t else 'missing'}, "
                  f"{len(t.partitions) if t else 0} partitions", file=sys.stderr, flush=True)
            return 1
        time.sleep(0.2)
    emit("created", partitions=args.partitions)
    return 0


def member(args) -> int:
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id or args.group,
        "group.protocol": args.protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if args.assignor:
        key = ("partition.assignment.strategy" if args.protocol == "classic"
               else "group.remote.assignor")
        conf[key] = args.assignor
    for kv in args.set:
        key, _, value = kv.partition("=")
        conf[key] = int(value) if value.lstrip("-").isdigit() else value

    c = Consumer(conf)
    go = threading.Event()
    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "go":
                go.set()
            elif cmd == "close":
                break
        go.set()
        stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    emit("ready")
    go.wait()
    if stop.is_set():
        c.close()
        return 0

    def on_assign(consumer, parts):
        t = now()
        emit("assigned", t=t, partitions=sorted(p.partition for p in parts))

    def on_revoke(consumer, parts):
        t = now()
        emit("revoked", t=t, partitions=sorted(p.partition for p in parts))

    def on_lost(consumer, parts):
        t = now()
        emit("lost", t=t, partitions=sorted(p.partition for p in parts))

    emit("subscribed")
    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not stop.is_set():
        m = c.poll(0.1)
        if m is not None and m.error():
            emit("error", msg=str(m.error()))
    emit("closing")
    c.close()
    emit("closed")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="")
    ap.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    ap.add_argument("--assignor", default="")
    ap.add_argument("--client-id", default="")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--create-topic", action="store_true")
    ap.add_argument("--partitions", type=int, default=0)
    args = ap.parse_args()
    if args.create_topic:
        return create_topic(args)
    if not args.group:
        ap.error("--group is required")
    return member(args)


if __name__ == "__main__":
    sys.exit(main())
