"""SASL_SSL against PLAINTEXT through one broker (docs/benchmarks.md, "SASL_SSL and
PLAINTEXT"): starts `drover serve` (release build by default) with four listeners —
PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (certificates made here with the openssl
CLI, tests/integration/tls_testlib.py; a SCRAM-SHA-512 user made with `drover admin
users` before the start) — then, in the same run:

1. **Data**: per round, the same records produced with confluent-kafka over PLAINTEXT,
   SSL and SASL_SSL (SCRAM-SHA-512), in turn, each into a fresh topic, then read
   back by a confluent-kafka consumer (assign, no group) over the same listener; the
   broker's CPU seconds (utime + stime of every thread, /proc/<pid>/stat) per GB
   produced and per GB consumed, the throughput, and the median ratios SSL /
   PLAINTEXT and SASL_SSL / PLAINTEXT (SASL's own cost is the difference between the
   two).
2. **Connection set-up**: `--handshakes` new connections from `--clients` threads,
   each a TLS handshake and a whole SCRAM-SHA-512 exchange (SaslHandshake v1, two
   SaslAuthenticate) then one Metadata request, and the same over SSL (TLS only),
   SASL_PLAINTEXT (SCRAM only) and PLAINTEXT (Metadata only, the baseline): connections
   per broker CPU second, i.e. per core. The client's SCRAM proof reuses its salted
   password (the client's PBKDF2 is the client's cost, not the broker's).

Usage: ck_sasl.py [--broker-bin PATH] [--messages N] [--size BYTES] [--partitions P]
           [--rounds R] [--handshakes N] [--clients C]
Run with target/test-venv/bin/python (scripts/bench-sasl.sh does).
"""

import argparse
import base64
import hashlib
import hmac
import os
import secrets
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from tls_testlib import Certs  # noqa: E402

USER, PASSWORD = "bench", "bench-password-not-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------
# Data: produce and consume with confluent-kafka
# ---------------------------------------------------------------------------------
def produce(conf, topic, partitions, messages, payload, pid):
    from confluent_kafka import Producer

    p = Producer({**conf, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "message.timeout.ms": 120_000})
    errors = []

    def cb(err, _m):
        if err is not None:
            errors.append(err)

    # Connect (and authenticate) before the clock starts.
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


def consume(conf, topic, partitions, messages, pid):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": "bench-unused", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
    # Connect (and authenticate) before the clock starts.
    c.list_topics(topic, timeout=30)
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    got = 0
    deadline = t0 + 300
    while got < messages + 1:  # the warm-up record too
        assert time.monotonic() < deadline, f"consumed {got} of {messages}"
        for m in c.consume(num_messages=10_000, timeout=1):
            assert m.error() is None, m.error()
            got += 1
    secs, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    c.close()
    return secs, cpu


# ---------------------------------------------------------------------------------
# Connection set-up: TLS and SCRAM by hand
# ---------------------------------------------------------------------------------
def kstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Conn:
    def __init__(self, port: int, ctx: ssl.SSLContext | None):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(s, server_hostname="localhost") if ctx else s
        self.corr = 0

    def request(self, key: int, version: int, body: bytes) -> bytes:
        self.corr += 1
        payload = struct.pack(">hhi", key, version, self.corr) + kstr("bench") + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)[4:]

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("closed")
            buf += chunk
        return bytes(buf)

    def authenticate(self, token: bytes) -> bytes:
        body = self.request(36, 1, struct.pack(">i", len(token)) + token)
        err, ln = struct.unpack_from(">hh", body, 0)
        assert err == 0, f"SaslAuthenticate error {err}"
        pos = 4 + max(ln, 0)
        (bl,) = struct.unpack_from(">i", body, pos)
        return body[pos + 4:pos + 4 + bl]

    def close(self):
        self.sock.close()


SALTED: dict[bytes, bytes] = {}


def scram_sha512(c: Conn) -> None:
    body = c.request(17, 1, kstr("SCRAM-SHA-512"))
    assert struct.unpack_from(">h", body, 0)[0] == 0
    nonce = base64.b64encode(secrets.token_bytes(18)).decode()
    bare = f"n={USER},r={nonce}"
    first = c.authenticate(f"n,,{bare}".encode()).decode()
    fields = dict(f.split("=", 1) for f in first.split(","))
    salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    if salt not in SALTED:
        SALTED[salt] = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), salt, iterations)
    salted = SALTED[salt]
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{bare},{first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    final = c.authenticate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert final.startswith(b"v="), final


def setups(port: int, ctx, sasl: bool, n: int, clients: int, pid: int):
    """n connections (TLS if ctx, SCRAM if sasl) from `clients` threads, each with one
    Metadata request; -> (seconds, broker CPU seconds)."""
    per = n // clients
    errors: list[BaseException] = []

    def run():
        try:
            for _ in range(per):
                c = Conn(port, ctx)
                if sasl:
                    scram_sha512(c)
                c.request(3, 1, struct.pack(">i", 0))  # Metadata v1, no topics
                c.close()
        except BaseException as e:  # noqa: BLE001 — reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    assert not errors, errors[:3]
    return per * clients, secs, cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", default="target/release/drover")
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--handshakes", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    work = Path(tempfile.mkdtemp(prefix="drover-bench-sasl-"))
    certs = Certs(work / "certs")
    chain, key = certs.issue("broker", "/O=Drover Bench/CN=localhost", kind="server")
    (work / "plugins").mkdir(mode=0o755)
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    listeners = ", ".join(f'"{n}://127.0.0.1:{p}"' for n, p in ports.items())
    (work / "drover.toml").write_text(f"""
[log]
flush_messages = 1000000000

[server]
listeners = [{listeners}]

[server.ssl]
certificate_chain = "{chain}"
private_key = "{key}"
""")
    r = subprocess.run([args.broker_bin, "admin", "users", "--data-dir", str(work / "data"),
                        "add", USER, "--mechanism", "SCRAM-SHA-512", "--iterations", "4096"],
                       input=PASSWORD.encode() + b"\n", capture_output=True)
    assert r.returncode == 0, r.stderr
    admin_port = free_port()
    broker = subprocess.Popen(
        [args.broker_bin, "serve", "--admin-listen", f"127.0.0.1:{admin_port}",
         "--data-dir", str(work / "data"), "--plugin-dir", str(work / "plugins"),
         "--config", str(work / "drover.toml")],
        stderr=open(work / "broker.log", "w"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", ports["SASL_SSL"]), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        confs = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
            "SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
                    "security.protocol": "SSL", "ssl.ca.location": str(certs.ca)},
            "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
                         "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": USER, "sasl.password": PASSWORD,
                         "ssl.ca.location": str(certs.ca)},
        }
        admin = AdminClient(confs["PLAINTEXT"])
        payload = b"x" * args.size
        gb = args.messages * args.size / 1e9
        results = {k: [] for k in confs}
        for rnd in range(args.rounds):
            for name, conf in confs.items():
                topic = f"bench-{name.lower()}-{rnd}"
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result()
                p_secs, p_cpu = produce(conf, topic, args.partitions, args.messages, payload,
                                        broker.pid)
                c_secs, c_cpu = consume(conf, topic, args.partitions, args.messages,
                                        broker.pid)
                results[name].append((p_secs, p_cpu, c_secs, c_cpu))
                print(f"round {rnd} {name:9}: produce {gb * 1000 / p_secs:6.1f} MB/s, "
                      f"{p_cpu / gb:5.2f} broker CPU s/GB; consume {gb * 1000 / c_secs:6.1f} "
                      f"MB/s, {c_cpu / gb:5.2f} broker CPU s/GB", flush=True)
                admin.delete_topics([topic])[topic].result()
        med = {k: [statistics.median(r[i] for r in v) for i in range(4)]
               for k, v in results.items()}
        for name, (ps, pc, cs, cc) in med.items():
            print(f"median {name:9}: produce {gb * 1000 / ps:6.1f} MB/s, {pc / gb:5.2f} s/GB; "
                  f"consume {gb * 1000 / cs:6.1f} MB/s, {cc / gb:5.2f} s/GB")
        pl = med["PLAINTEXT"]
        for name in ("SSL", "SASL_SSL"):
            ss = med[name]
            ratios = {k: [r_s[i] / r_p[i] for r_p, r_s in zip(results["PLAINTEXT"],
                                                              results[name])]
                      for k, i in (("produce", 1), ("consume", 3))}
            print(f"ratio {name}/PLAINTEXT broker CPU per GB: produce {ss[1] / pl[1]:.2f} "
                  f"(per round {', '.join(f'{x:.2f}' for x in ratios['produce'])}), "
                  f"consume {ss[3] / pl[3]:.2f} "
                  f"(per round {', '.join(f'{x:.2f}' for x in ratios['consume'])})")

        ctx = ssl.create_default_context(cafile=str(certs.ca))
        for name, tls, sasl in (("PLAINTEXT", False, False), ("SSL", True, False),
                                ("SASL_PLAINTEXT", False, True), ("SASL_SSL", True, True)):
            n, secs, cpu = setups(ports[name], ctx if tls else None, sasl, args.handshakes,
                                  args.clients, broker.pid)
            print(f"set-up {name:14}: {n} connections in {secs:5.2f} s ({n / secs:6.0f}/s), "
                  f"broker CPU {cpu:5.2f} s = {cpu / n * 1e3:6.3f} ms each, "
                  f"{n / max(cpu, 1e-9):6.0f} per CPU second", flush=True)
    finally:
        broker.kill()
        broker.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
