"""A real ZooKeeper server and clusters of `drover serve --zookeeper ...` brokers for the
cluster-mode tests. ZooKeeper is Debian's `zookeeper` package (installed by
scripts/install-test-deps.sh), started on a free loopback port with its own data
directory; it dies with the test process (PR_SET_PDEATHSIG) and on teardown."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import conftest
from conftest import Broker, BrokerError, _die_with_parent, free_port

ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"]
# Coordinator slots of the test clusters.
SLOTS_IN_TEST = 8

PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
    "libdrover_offsets_zookeeper.so",
]


class ZooKeeper:
    """One standalone ZooKeeper server on 127.0.0.1."""

    def __init__(self, workdir: Path):
        missing = [j for j in ZK_JARS if not Path(j).exists()]
        if missing:
            pytest.fail(f"ZooKeeper is not installed ({missing}): run "
                        "scripts/install-test-deps.sh", pytrace=False)
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.data = workdir / "data"
        self.data.mkdir(exist_ok=True)
        self.cfg = workdir / "zoo.cfg"
        self.cfg.write_text(
            "tickTime=500\n"
            f"dataDir={self.data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf\n"
            "minSessionTimeout=1000\nmaxSessionTimeout=60000\n"
        )
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "ZooKeeper":
        log = open(self.workdir / "zookeeper.log", "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-cp", ":".join(ZK_JARS), "org.apache.zookeeper.server.quorum.QuorumPeerMain",
             str(self.cfg)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.serving():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"ZooKeeper did not start: see {self.workdir / 'zookeeper.log'}")

    def ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(16) == b"imok"
        except OSError:
            return False

    def serving(self) -> bool:
        """`srvr` answers with the server's mode only once it serves requests (`ruok`
        says imok earlier, while it still resets sessions)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"srvr")
                out = b""
                while chunk := s.recv(4096):
                    out += chunk
                return b"Mode: standalone" in out
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def install_plugins(broker: Broker, libs=PLUGIN_LIBS) -> None:
    conftest.install_plugins(broker, libs)


def cluster_config(zk: ZooKeeper, chroot: str, broker_id: int, *, coordinator: bool,
                   extra: str = "") -> str:
    text = (
        f"[server]\nbroker_id = {broker_id}\n"
        f"[zookeeper]\nenabled = true\nconnect = \"{zk.connect}\"\nchroot = \"{chroot}\"\n"
        "session_timeout_ms = 3000\n"
        f"slots = {SLOTS_IN_TEST}\nslot_claim_delay_ms = 500\n"
    )
    if coordinator:
        text += (
            "[plugins]\nrequired = [\"drover-coordinator\", \"range\", \"sticky\", \"zookeeper\"]\n"
            "[coordinator]\ndefault_assignor = \"sticky\"\noffset_store = \"zookeeper\"\n"
            "[plugins.config.drover-coordinator]\nmin_session_timeout_ms = 1000\n"
            "rebalance_delay_ms = 100\ncommit_interval_ms = 200\n"
            "max_session_timeout_ms = 3000\nslot_takeover_wait_ms = 3000\n"
        )
    return text + extra


def start_cluster(broker_factory, zk: ZooKeeper, n: int = 3, *, coordinator: bool = False,
                  extra: str = "") -> list[Broker]:
    chroot = f"/drover-{uuid.uuid4().hex[:8]}"
    brokers = []
    for i in range(1, n + 1):
        b = broker_factory(cluster_config(zk, chroot, i, coordinator=coordinator, extra=extra),
                           start=False)
        if coordinator:
            install_plugins(b)
        brokers.append(b)
    for b in brokers:
        try:
            b.start()
        except BrokerError as e:
            pytest.fail(str(e), pytrace=False)
    # Every broker sees every other before the test starts.
    import json
    from drover_testlib import http_get

    def all_registered():
        for b in brokers:
            status, _, body = http_get(f"{b.admin_url}/v1/cluster")
            if status != 200 or len(json.loads(body)["view"]["brokers"]) != n:
                return False
        return True
    wait_until(all_registered, 30, f"{n} brokers registered")
    return brokers


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
