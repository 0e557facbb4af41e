"""The `acl` authorizer against none through two brokers of the same build, in one run
(docs/benchmarks.md, "Authorization"): broker A has no authorizer; broker B has
`[authorizer] plugin = "acl"` with `--acls` ACLs — ALLOWs of every operation on the
`bench-` topic and group prefixes for the data clients' principal (`User:ANONYMOUS`, a PLAINTEXT
listener) and the rest unrelated PREFIXED ALLOWs of other principals — created through
confluent-kafka's AdminClient by a super user on a SASL_PLAINTEXT listener. Per round,
the same records are produced with confluent-kafka to A and to B in turn, each into a
fresh topic, then read back (assign, no group), A first in even rounds and B first in
odd ones; the brokers' CPU seconds (utime + stime, /proc/<pid>/stat) per GB produced and
consumed, and the median ratio B / A.

Usage: ck_authz.py [--broker-bin PATH] [--acl-plugin PATH] [--messages N] [--size BYTES]
           [--partitions P] [--rounds R] [--acls N]
Run with target/test-venv/bin/python (scripts/bench-authz.sh does).
"""

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ck_sasl import consume, free_port, produce  # noqa: E402

ADMIN, PASSWORD = "admin", "bench-password-not-secret"


def start(bin_path: str, work: Path, acl_plugin: str | None):
    """A broker with a PLAINTEXT and a SASL_PLAINTEXT listener; with `acl_plugin`, the
    `acl` authorizer whose super user is the SASL user -> (process, ports)."""
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT")}
    listeners = ", ".join(f'"{n}://127.0.0.1:{p}"' for n, p in ports.items())
    plugins = work / "plugins"
    plugins.mkdir(mode=0o755)
    authz = ""
    if acl_plugin:
        shutil.copy(acl_plugin, plugins / Path(acl_plugin).name)
        (plugins / Path(acl_plugin).name).chmod(0o644)
        authz = f"""
[authorizer]
plugin = "acl"

[plugins.config.acl]
super_users = ["User:{ADMIN}"]
"""
    (work / "drover.toml").write_text(f"""
[log]
flush_messages = 1000000000

[server]
listeners = [{listeners}]
{authz}""")
    r = subprocess.run([bin_path, "admin", "users", "--data-dir", str(work / "data"),
                        "add", ADMIN, "--mechanism", "SCRAM-SHA-512", "--iterations", "4096"],
                       input=PASSWORD.encode() + b"\n", capture_output=True)
    assert r.returncode == 0, r.stderr
    broker = subprocess.Popen(
        [bin_path, "serve", "--admin-listen", f"127.0.0.1:{free_port()}",
         "--data-dir", str(work / "data"), "--plugin-dir", str(plugins),
         "--config", str(work / "drover.toml")],
        stderr=open(work / "broker.log", "w"))
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]), timeout=1).close()
            return broker, ports
        except OSError:
            assert broker.poll() is None, (work / "broker.log").read_text()
            time.sleep(0.1)
    raise AssertionError("the broker did not start")


def grant(ports, acls: int) -> None:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN,
                         "sasl.password": PASSWORD})
    allow = AclPermissionType.ALLOW
    bindings = [AclBinding(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED,
                           "User:ANONYMOUS", "*", AclOperation.ALL, allow),
                # The consumer's FindCoordinator for its (unused) group.
                AclBinding(ResourceType.GROUP, "bench-", ResourcePatternType.PREFIXED,
                           "User:ANONYMOUS", "*", AclOperation.ALL, allow)]
    bindings += [AclBinding(ResourceType.TOPIC, f"other-{i}-", ResourcePatternType.PREFIXED,
                            f"User:u{i}", "*", AclOperation.READ, allow)
                 for i in range(max(acls - 2, 0))]
    for start_at in range(0, len(bindings), 1000):
        for f in admin.create_acls(bindings[start_at:start_at + 1000]).values():
            f.result()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", default="target/release/drover")
    ap.add_argument("--acl-plugin",
                    default="target/release/libdrover_authorizer_acl.so")
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acls", type=int, default=1000)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    work = Path(tempfile.mkdtemp(prefix="drover-bench-authz-"))
    brokers = {}
    try:
        for name, plugin in (("none", None), ("acl", args.acl_plugin)):
            (work / name).mkdir()
            brokers[name] = start(args.broker_bin, work / name, plugin)
        grant(brokers["acl"][1], args.acls)
        payload = b"x" * args.size
        gb = args.messages * args.size / 1e9
        results = {k: [] for k in brokers}
        for rnd in range(args.rounds):
            # Alternate which broker goes first: the second of a pair runs on a machine
            # the first has just warmed (page cache, CPU frequency, other load).
            order = list(brokers.items())
            if rnd % 2:
                order.reverse()
            for name, (broker, ports) in order:
                conf = {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}
                topic = f"bench-{rnd}"
                admin = AdminClient(conf)
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result()
                p_secs, p_cpu = produce(conf, topic, args.partitions, args.messages, payload,
                                        broker.pid)
                c_secs, c_cpu = consume(conf, topic, args.partitions, args.messages,
                                        broker.pid)
                results[name].append((p_cpu, c_cpu))
                print(f"round {rnd} {name:4}: produce {gb * 1000 / p_secs:6.1f} MB/s, "
                      f"{p_cpu / gb:5.2f} broker CPU s/GB; consume {gb * 1000 / c_secs:6.1f} "
                      f"MB/s, {c_cpu / gb:5.2f} broker CPU s/GB", flush=True)
        for i, what in ((0, "produce"), (1, "consume")):
            per_round = [a[i] / n[i] for n, a in zip(results["none"], results["acl"])]
            med_none = statistics.median(r[i] for r in results["none"])
            med_acl = statistics.median(r[i] for r in results["acl"])
            print(f"ratio acl/none broker CPU per GB {what}: {med_acl / med_none:.2f} "
                  f"(per round {', '.join(f'{x:.2f}' for x in per_round)}); "
                  f"none {med_none / gb:.2f} s/GB, acl {med_acl / gb:.2f} s/GB "
                  f"with {args.acls} ACLs")
    finally:
        for broker, _ in brokers.values():
            broker.kill()
            broker.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
