"""Idempotent against plain produce through one broker (docs/benchmarks.md, "Idempotent
producers"): starts `drover serve` (release build by default), then produces the same
records with confluent-kafka twice per round — `enable.idempotence=false` and `true`,
alternating, into fresh topics — and reports, per run, produce MB/s and the broker's
CPU seconds (utime + stime from /proc/<pid>/stat, every thread) per GB produced, and
the median ratio idempotent / plain, with the Produce requests each run took (from the
broker's `drover_requests_total`): the idempotent producer batches differently (at most
5 requests in flight per connection), which is part of what the ratio shows. Each run's
topic is deleted after it, so the disk holds one run's data at a time.

Usage: ck_idempotence.py [--broker-bin PATH] [--messages N] [--size BYTES]
           [--partitions P] [--rounds R] [--flush-messages N]
Run with target/test-venv/bin/python (scripts/bench-idempotence.sh does).
"""

import argparse
import os
import shutil
import urllib.request
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_requests(admin_url: str) -> int:
    """Produce requests the broker has handled so far."""
    text = urllib.request.urlopen(f"{admin_url}/metrics", timeout=10).read().decode()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("drover_requests_total{") and 'api="Produce"' in line)


def produce(bootstrap, topic, partitions, messages, payload, idempotent, pid):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                  "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "message.timeout.ms": 120_000})
    errors = []

    def cb(err, _m):
        if err is not None:
            errors.append(err)

    # Connect and fetch metadata (and the producer id) before the clock starts.
    p.produce(topic, value=b"warm-up", partition=0, on_delivery=cb)
    p.flush(30)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for i in range(messages):
        while True:
            try:
                p.produce(topic, value=payload, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(300)
    secs, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    assert left == 0 and not errors, (left, errors[:3])
    return secs, cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", default="target/release/drover")
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flush-messages", type=int, default=1)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    work = tempfile.mkdtemp(prefix="drover-bench-idem-")
    os.makedirs(f"{work}/plugins", mode=0o755)
    with open(f"{work}/drover.toml", "w") as f:
        f.write(f"[log]\nflush_messages = {args.flush_messages}\n")
    port, admin_port = free_port(), free_port()
    admin_url = f"http://127.0.0.1:{admin_port}"
    broker = subprocess.Popen(
        [args.broker_bin, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen",
         f"127.0.0.1:{admin_port}", "--data-dir", f"{work}/data", "--plugin-dir",
         f"{work}/plugins", "--config", f"{work}/drover.toml"],
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
        payload = b"x" * args.size
        gb = args.messages * args.size / 1e9
        results = {False: [], True: []}
        for r in range(args.rounds):
            for idem in (False, True):
                topic = f"bench-{'idem' if idem else 'plain'}-{r}"
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result()
                requests = produce_requests(admin_url)
                secs, cpu = produce(bootstrap, topic, args.partitions, args.messages,
                                    payload, idem, broker.pid)
                requests = produce_requests(admin_url) - requests
                results[idem].append((secs, cpu))
                print(f"round {r} {'idempotent' if idem else 'plain     '}: "
                      f"{gb * 1000 / secs:7.1f} MB/s, broker CPU {cpu:5.2f} s "
                      f"= {cpu / gb:5.2f} s/GB, {requests} Produce requests", flush=True)
                admin.delete_topics([topic])[topic].result()
        med = {k: (statistics.median(s for s, _ in v), statistics.median(c for _, c in v))
               for k, v in results.items()}
        print(f"median plain: {gb * 1000 / med[False][0]:.1f} MB/s, "
              f"{med[False][1] / gb:.2f} broker CPU s/GB")
        print(f"median idempotent: {gb * 1000 / med[True][0]:.1f} MB/s, "
              f"{med[True][1] / gb:.2f} broker CPU s/GB")
        print(f"ratio idempotent/plain: throughput {med[False][0] / med[True][0]:.3f}, "
              f"broker CPU {med[True][1] / med[False][1]:.3f}")
    finally:
        broker.kill()
        broker.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
