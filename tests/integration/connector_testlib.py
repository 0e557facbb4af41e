"""Helpers for test_connector.py: a broker with the native coordinator and fast group
timings, `drover consume` subprocesses whose output lines are read as they arrive (each
with its arrival time), a Kafka-aware TCP proxy that can cut one consumer's coordinator
channel without closing it, and small produce / admin helpers. Every wait is bounded.

Timestamps are `time.monotonic()` taken by the reader threads when a chunk of output
arrives; one chunk's lines share a timestamp.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


from conftest import Broker, _die_with_parent, drover_bin, install_plugins, start_or_fail
from drover_testlib import http_get

# Plugins the broker needs for native groups, as built next to the drover binary.
# (The sticky assignor is left out: every plugin file costs broker start-up time.)
PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_offsets_embedded.so",
]

# Fast group timings: consumers may use session timeouts down to 1 s, rebalances start
# 100 ms after their trigger, heartbeat-reported offsets reach the store every 200 ms.
MIN_SESSION_TIMEOUT_MS = 1000
CONFIG = f"""\
[plugins]
required = ["drover-coordinator", "range", "round-robin", "embedded"]

[plugins.config.drover-coordinator]
min_session_timeout_ms = {MIN_SESSION_TIMEOUT_MS}
rebalance_delay_ms = 100
commit_interval_ms = 200
"""


def start_connector_broker(workdir: Path, config: str = CONFIG) -> Broker:
    """A started broker with the plugins installed, or pytest.fail with its log."""
    b = Broker(workdir, config=config)
    install_plugins(b, PLUGIN_LIBS)
    start_or_fail(b)
    return b


def broker_log_since(b: Broker, mark: tuple[int, int], lines: int = 150) -> str:
    """The broker's stderr written since `mark` = (starts, length of that start's
    log), across restarts; the last `lines` lines."""
    start, offset = mark
    parts = []
    for n in range(max(start, 1), b.starts + 1):
        p = b.workdir / f"broker-{n}.stderr"
        if not p.exists():
            continue
        text = p.read_text(errors="replace")
        if n == start:
            text = text[offset:]
        parts.append(f"----- start #{n}: {p} -----\n{text}")
    return "\n".join("\n".join(parts).splitlines()[-lines:])


# ---------------------------------------------------------------------------------
# Waiting
# ---------------------------------------------------------------------------------
def wait_for(what: str, cond, timeout: float, *, check=None, interval: float = 0.05):
    """Polls cond() until it returns True or a non-string truthy value (returned); a
    string is a description of the current state, shown on timeout. `check()` runs
    before every poll (e.g. "every consumer is still running")."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        if check is not None:
            check()
        last = cond()
        if last is True or (last and not isinstance(last, (str, bool))):
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}"
                                 + (f": {last}" if isinstance(last, str) else ""))
        time.sleep(interval)


# ---------------------------------------------------------------------------------
# Producing
# ---------------------------------------------------------------------------------
def produce_keyed(broker, topic: str, n: int, *, start: int = 0, keys: int = 1000,
                  partition: int | None = None, timeout: float = 90) -> list[tuple[int, int]]:
    """n keyed records (value "v<i>") with confluent-kafka, acks=all, no idempotence;
    returns the (partition, offset) of each. Fails on any delivery error."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                  "enable.idempotence": False, "linger.ms": 10,
                  "batch.num.messages": 5000, "queue.buffering.max.messages": 200000,
                  "message.timeout.ms": 60000, "socket.timeout.ms": 10000,
                  "client.id": "drover-it-connector"})
    acked: list[tuple[int, int]] = []
    errors: list = []

    def on_delivery(err, m):
        if err is not None:
            errors.append(err)
        else:
            acked.append((m.partition(), m.offset()))

    kw = {} if partition is None else {"partition": partition}
    for i in range(start, start + n):
        while True:
            try:
                p.produce(topic, key=b"key-%d" % (i % keys), value=b"v%d" % i,
                          on_delivery=on_delivery, **kw)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(timeout)
    assert left == 0, f"{left} records to {topic} not delivered within {timeout} s"
    assert not errors, f"{len(errors)} delivery errors to {topic}, first {errors[:3]}"
    assert len(acked) == n
    return acked


class BackgroundProducer:
    """Produces `batch` keyed records every `pause` seconds until stopped; `acked`
    collects (partition, offset)."""

    def __init__(self, broker, topic: str, *, batch: int = 200, pause: float = 0.05,
                 start: int = 10_000_000):
        self.broker, self.topic, self.batch, self.pause = broker, topic, batch, pause
        self.next = start
        self.acked: set[tuple[int, int]] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            while not self._stop.is_set():
                self.acked |= set(produce_keyed(self.broker, self.topic, self.batch,
                                                start=self.next))
                self.next += self.batch
                self._stop.wait(self.pause)
        except BaseException as e:  # noqa: BLE001 - re-raised by stop()
            self.error = e

    def __enter__(self):
        self._thread.start()
        return self

    def stop(self) -> set[tuple[int, int]]:
        self._stop.set()
        self._thread.join(timeout=90)
        assert not self._thread.is_alive(), "background producer did not stop"
        if self.error is not None:
            raise self.error
        return self.acked

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=90)


# ---------------------------------------------------------------------------------
# Admin API
# ---------------------------------------------------------------------------------
def admin_group(broker, group: str) -> dict | None:
    """GET /v1/groups/{group} as JSON; None on 404."""
    status, _ctype, body = http_get(f"{broker.admin_url}/v1/groups/{group}")
    if status == 404:
        return None
    assert status == 200, f"GET /v1/groups/{group}: {status} {body[:500]}"
    return json.loads(body)


def committed_offsets(broker, group: str) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> committed_offset, from the admin API."""
    g = admin_group(broker, group)
    if g is None:
        return {}
    return {(p["topic"], p["partition"]): p["committed_offset"] for p in g["partitions"]}


# ---------------------------------------------------------------------------------
# `drover consume` subprocesses
# ---------------------------------------------------------------------------------
class _Reader(threading.Thread):
    """Reads a pipe in chunks; keeps (arrival time, line) pairs and a raw copy."""

    def __init__(self, fd, copy_path: Path):
        super().__init__(daemon=True)
        self.fd = fd
        self.copy = open(copy_path, "wb")
        self.lines: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self._partial = b""
        self.closed = False
        self.reading = threading.Event()  # cleared: stop reading (the pipe fills up)
        self.reading.set()

    def run(self):
        try:
            while True:
                self.reading.wait()
                chunk = os.read(self.fd, 1 << 16)
                now = time.monotonic()
                if not chunk:
                    break
                self.copy.write(chunk)
                data = self._partial + chunk
                *complete, self._partial = data.split(b"\n")
                if complete:
                    with self.cond:
                        self.lines.extend((now, ln.decode(errors="replace")) for ln in complete)
                        self.cond.notify_all()
        finally:
            self.copy.flush()
            with self.cond:
                if self._partial:
                    self.lines.append((time.monotonic(), self._partial.decode(errors="replace")))
                self.closed = True
                self.cond.notify_all()
            self.copy.close()
            try:
                os.close(self.fd)
            except OSError:
                pass

    def snapshot(self) -> list[tuple[float, str]]:
        with self.lock:
            return list(self.lines)

    def count(self) -> int:
        with self.lock:
            return len(self.lines)


@dataclass(frozen=True)
class Line:
    ts: float
    topic: str
    partition: int
    offset: int


def _tp_list(text: str) -> set[tuple[str, int]]:
    out = set()
    for item in filter(None, text.split(",")):
        t, p = item.rsplit("-", 1)
        out.add((t, int(p)))
    return out


class ConsumerProc:
    """One `drover consume --format offsets` process."""

    def __init__(self, name: str, workdir: Path, args: list[str], env_extra: dict | None = None):
        self.name = name
        self.args = args
        self.cmd = [str(drover_bin()), "consume", "--format", "offsets", *args]
        env = dict(os.environ)
        env["RUST_LOG"] = os.environ.get("DROVER_TEST_CONSUMER_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        env.update(env_extra or {})
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=workdir,
                                     preexec_fn=_die_with_parent)
        self.out = _Reader(os.dup(self.proc.stdout.fileno()), workdir / f"{name}.stdout")
        self.err = _Reader(os.dup(self.proc.stderr.fileno()), workdir / f"{name}.stderr")
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.out.start()
        self.err.start()
        self.signals: list[tuple[float, str]] = []

    # -- output ------------------------------------------------------------------
    def lines(self) -> list[Line]:
        out = []
        for ts, text in self.out.snapshot():
            parts = text.split(" ")
            if len(parts) != 3:
                raise AssertionError(f"{self.name}: unexpected stdout line {text!r}")
            out.append(Line(ts, parts[0], int(parts[1]), int(parts[2])))
        return out

    def stderr_lines(self) -> list[tuple[float, str]]:
        return self.err.snapshot()

    def events(self) -> list[tuple[float, str, str]]:
        """(ts, kind, rest) of the `event ...` stderr lines."""
        out = []
        for ts, text in self.err.snapshot():
            if text.startswith("event "):
                kind, _, rest = text[len("event "):].partition(" ")
                out.append((ts, kind, rest))
        return out

    def assignments(self) -> list[tuple[float, int, set[tuple[str, int]]]]:
        """(ts, generation, partitions) of every `event assigned` line."""
        out = []
        for ts, kind, rest in self.events():
            if kind != "assigned":
                continue
            fields = dict(f.split("=", 1) for f in rest.split(" ") if "=" in f)
            out.append((ts, int(fields["generation"]), _tp_list(fields.get("partitions", ""))))
        return out

    def owned(self) -> tuple[int | None, set[tuple[str, int]]]:
        """(generation, partitions) as the event lines say now."""
        gen, owned = None, set()
        for _ts, kind, rest in self.events():
            fields = dict(f.split("=", 1) for f in rest.split(" ") if "=" in f)
            if kind == "assigned":
                gen, owned = int(fields["generation"]), _tp_list(fields.get("partitions", ""))
            elif kind == "stopped":
                owned -= _tp_list(fields.get("partitions", ""))
            elif kind == "lost":
                owned = set()
        return gen, owned

    # -- process -----------------------------------------------------------------
    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> float:
        t = time.monotonic()
        self.proc.send_signal(sig)
        self.signals.append((t, sig.name))
        return t

    def kill9(self) -> float:
        t = self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.join_readers()
        return t

    def terminate(self, timeout: float = 20) -> int:
        """SIGTERM (commit and leave) and wait; fails if it does not exit in time."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM")
        self.join_readers()
        return rc

    def join_readers(self, timeout: float = 10) -> None:
        self.out.join(timeout)
        self.err.join(timeout)

    def wait_exit(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} still running after {timeout} s:\n"
                                 + self.tail())
        self.join_readers()
        return rc

    def tail(self, n: int = 60) -> str:
        err = [t for _, t in self.err.snapshot()]
        return "\n".join(err[-n:])

    def describe(self) -> str:
        rc = self.proc.poll()
        t0 = self.started
        err = self.err.snapshot()
        shown = "\n".join(f"  +{ts - t0:8.3f}s {t}" for ts, t in err[-80:])
        sig = ", ".join(f"{n} at +{ts - t0:.3f}s" for ts, n in self.signals)
        return (f"===== consumer {self.name}: exit {rc}; signals [{sig}]; "
                f"{self.out.count()} stdout lines =====\n"
                f"command: {' '.join(self.cmd)}\n"
                f"--- stderr (last 80 lines, +seconds since start) ---\n{shown}")


class Consumers:
    """Starts `drover consume` processes; stops them and prints their logs on failure."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path / "consumers"
        self.dir.mkdir(exist_ok=True)
        self.procs: dict[str, ConsumerProc] = {}

    def start(self, name: str, *args: str) -> ConsumerProc:
        assert name not in self.procs, name
        c = ConsumerProc(name, self.dir, list(args))
        self.procs[name] = c
        return c

    def assert_running(self, *names: str) -> None:
        for n in names or list(self.procs):
            c = self.procs[n]
            rc = c.proc.poll()
            if rc is not None and not any(s in ("SIGKILL", "SIGTERM", "EXITED")
                                          for _, s in c.signals):
                raise AssertionError(f"consumer {n} exited with status {rc}\n{c.describe()}")

    def stop_all(self) -> None:
        for c in self.procs.values():
            if c.proc.poll() is None:
                try:
                    c.proc.send_signal(signal.SIGCONT)
                    c.proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for c in self.procs.values():
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait(timeout=10)
            c.join_readers(2)

    def dump(self) -> str:
        return "\n".join(c.describe() for c in self.procs.values())


def consumer_args(broker, group: str, *subscription: str, consumer_id: str,
                  session_timeout_ms: int = 2000, auto_commit_ms: int = 200,
                  brokers: str | None = None, extra: tuple = ()) -> list[str]:
    return ["--brokers", brokers or broker.bootstrap, "--group", group,
            "--consumer-id", consumer_id, "--session-timeout-ms", str(session_timeout_ms),
            "--auto-commit-interval-ms", str(auto_commit_ms), *subscription, *extra]


# ---------------------------------------------------------------------------------
# A Kafka-aware TCP proxy
# ---------------------------------------------------------------------------------
API_METADATA, API_FIND_COORDINATOR, API_REGISTER_CONSUMER = 3, 10, 20000


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _enc_uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _skip_tagged(buf: bytes, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def _string(buf: bytes, pos: int, compact: bool) -> tuple[bytes | None, int]:
    if compact:
        n, pos = _uvarint(buf, pos)
        if n == 0:
            return None, pos
        return buf[pos:pos + n - 1], pos + n - 1
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos:pos + n], pos + n


def _enc_string(s: bytes, compact: bool) -> bytes:
    if compact:
        return _enc_uvarint(len(s) + 1) + s
    return struct.pack(">h", len(s)) + s


def rewrite_metadata(body: bytes, version: int, host: bytes, port: int) -> bytes:
    """A Metadata response body (after the response header) with every broker's
    address replaced by host:port."""
    flexible = version >= 9
    pos = 4 if version >= 3 else 0  # throttle_time_ms
    out = bytearray(body[:pos])
    if flexible:
        n, pos = _uvarint(body, pos)
        n -= 1
        out += _enc_uvarint(n + 1)
    else:
        (n,) = struct.unpack_from(">i", body, pos)
        pos += 4
        out += struct.pack(">i", n)
    for _ in range(max(n, 0)):
        node = body[pos:pos + 4]
        pos += 4
        _h, pos = _string(body, pos, flexible)
        pos += 4  # port
        out += node + _enc_string(host, flexible) + struct.pack(">i", port)
        start = pos
        if version >= 1:
            _rack, pos = _string(body, pos, flexible)
        if flexible:
            pos = _skip_tagged(body, pos)
        out += body[start:pos]
    out += body[pos:]
    return bytes(out)


def rewrite_find_coordinator(body: bytes, version: int, host: bytes, port: int) -> bytes:
    """A FindCoordinator v0-v3 response body with the coordinator's address replaced."""
    assert version <= 3, f"FindCoordinator v{version} (batched) not supported by the proxy"
    flexible = version >= 3
    pos = 0
    if version >= 1:
        pos += 4  # throttle_time_ms
    pos += 2  # error_code
    if version >= 1:
        _msg, pos = _string(body, pos, flexible)
    pos += 4  # node_id
    head = body[:pos]
    h, pos = _string(body, pos, flexible)
    pos += 4  # port
    if not h:  # an error answer: leave it alone
        return body
    return head + _enc_string(host, flexible) + struct.pack(">i", port) + body[pos:]


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> bytes | None:
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _recv_exact(sock, size)
    return None if body is None else body


class _ProxiedConn:
    """One client connection and its upstream connection. Until a RegisterConsumer is
    seen the client sends requests and the broker answers; after the RegisterConsumer
    answer the connection is a coordinator channel and the roles turn: the coordinator
    sends requests (Heartbeat, StopFetcher, StartFetcher) and the client answers.
    Channel frames are logged as (time forwarded, "K->C" or "C->K", api key or None)."""

    def __init__(self, proxy: "KafkaProxy", client: socket.socket, upstream: socket.socket, n: int):
        self.proxy, self.client, self.upstream, self.n = proxy, client, upstream, n
        self.pending: dict[int, tuple[int, int]] = {}
        self.register_corr: int | None = None
        self.is_channel = False   # a RegisterConsumer went up
        self.turned = False       # its answer came down: K sends requests from now on
        self.cut = threading.Event()
        self.closed = threading.Event()
        self.log: list[tuple[float, str, int | None]] = []

    def start(self):
        threading.Thread(target=self._guard, args=(self._up,), daemon=True).start()
        threading.Thread(target=self._guard, args=(self._down,), daemon=True).start()

    def _guard(self, fn):
        try:
            fn()
        except OSError:  # a side closed while we were writing to it
            self.close()
        except Exception as e:  # noqa: BLE001 - reported through proxy.errors
            self.proxy.errors.append(f"connection {self.n} {fn.__name__}: {e!r}")
            self.close()

    def _park(self):
        """A cut link: read nothing more, forward nothing, close nothing — until the
        proxy heals or stops, which closes both sides."""
        self.proxy._released.wait()
        self.close()

    def close(self):
        if self.closed.is_set():
            return
        self.closed.set()
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _up(self):
        while True:
            frame = _recv_frame(self.client)
            if self.cut.is_set():
                return self._park()
            if frame is None:
                return self.close()
            if self.turned:  # an answer of C on its channel
                self.upstream.sendall(struct.pack(">i", len(frame)) + frame)
                self.log.append((time.monotonic(), "C->K", None))
                continue
            api, ver, corr = struct.unpack_from(">hhi", frame, 0)
            if api == API_REGISTER_CONSUMER:
                self.is_channel = True
                self.register_corr = corr
                self.proxy._channel_opened(self)
                if self.cut.is_set():  # new registrations are blackholed while cut
                    return self._park()
            self.pending[corr] = (api, ver)
            self.upstream.sendall(struct.pack(">i", len(frame)) + frame)
            if self.is_channel:
                self.log.append((time.monotonic(), "C->K", api))

    def _down(self):
        while True:
            frame = _recv_frame(self.upstream)
            if self.cut.is_set():
                return self._park()
            if frame is None:
                return self.close()
            if self.turned:  # a request of K on the channel
                (api,) = struct.unpack_from(">h", frame, 0)
                self.client.sendall(struct.pack(">i", len(frame)) + frame)
                self.log.append((time.monotonic(), "K->C", api))
                continue
            (corr,) = struct.unpack_from(">i", frame, 0)
            api, ver = self.pending.pop(corr, (None, None))
            if api in (API_METADATA, API_FIND_COORDINATOR):
                flexible = (api == API_METADATA and ver >= 9) or \
                           (api == API_FIND_COORDINATOR and ver >= 3)
                pos = 4
                if flexible:
                    pos = _skip_tagged(frame, pos)
                body = frame[pos:]
                host, port = self.proxy.host.encode(), self.proxy.port
                if api == API_METADATA:
                    body = rewrite_metadata(body, ver, host, port)
                else:
                    body = rewrite_find_coordinator(body, ver, host, port)
                frame = frame[:pos] + body
                self.proxy.rewrites += 1
            if api == API_REGISTER_CONSUMER and corr == self.register_corr:
                # An accepted registration (error_code NONE) turns the connection into
                # the channel; a refused one leaves it ordinary.
                (error_code,) = struct.unpack_from(">h", frame, 4)
                self.turned = error_code == 0
                self.is_channel = self.turned
            self.client.sendall(struct.pack(">i", len(frame)) + frame)
            if self.is_channel:
                self.log.append((time.monotonic(), "K->C", api))


class KafkaProxy:
    """Listens on 127.0.0.1:<port> and forwards every connection to the broker,
    rewriting the broker addresses in Metadata and FindCoordinator answers to its own,
    so a client given `--brokers <proxy>` sends everything — coordinator channel
    included — through the proxy. `cut_channels()` turns every coordinator channel
    (a connection that sent RegisterConsumer), and every one opened later, into a cut
    link: nothing is forwarded either way and nothing is closed. `heal()` closes the
    cut connections (both sides) and stops cutting new ones."""

    host = "127.0.0.1"

    def __init__(self, broker):
        self.broker = broker
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((self.host, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.conns: list[_ProxiedConn] = []
        self.errors: list[str] = []
        self.rewrites = 0
        self.cutting = False
        self.cut_at: float | None = None
        self.channel_log: list[tuple[float, int, bool]] = []  # (ts, conn no, cut)
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept(self):
        n = 0
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection((self.broker.host, self.broker.port), timeout=10)
                up.settimeout(None)
            except OSError as e:
                self.errors.append(f"connect to broker: {e}")
                client.close()
                continue
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            n += 1
            c = _ProxiedConn(self, client, up, n)
            with self._lock:
                self.conns.append(c)
            c.start()

    def _channel_opened(self, c: _ProxiedConn):
        with self._lock:
            if self.cutting:
                c.cut.set()
            self.channel_log.append((time.monotonic(), c.n, c.cut.is_set()))

    def channels(self) -> list[_ProxiedConn]:
        with self._lock:
            return [c for c in self.conns if c.is_channel and not c.closed.is_set()]

    def cut_channels(self) -> float:
        with self._lock:
            self.cutting = True
            self.cut_at = time.monotonic()
            for c in self.conns:
                if c.is_channel and not c.closed.is_set():
                    c.cut.set()
            return self.cut_at

    def heal(self) -> None:
        with self._lock:
            self.cutting = False
            cut = [c for c in self.conns if c.cut.is_set()]
        self._released.set()
        for c in cut:
            c.close()
        self._released = threading.Event()

    def close(self) -> None:
        self._stopped = True
        self._released.set()
        try:
            self.listener.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self.conns)
        for c in conns:
            c.close()
