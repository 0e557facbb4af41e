"""Fixtures for the real-client integration tests: a `drover serve` process per test.

The broker binary is `target/debug/drover` (override with DROVER_BIN). Each broker gets
two free loopback ports (Kafka and admin HTTP), a fresh data directory and an empty
plugin directory under the test's tmp_path, and is killed on teardown whatever
happened. Its stderr goes to a file; when a test fails, the tail of that log is
printed in the teardown section of the report.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO / "target" / "debug" / "drover"
READY_MARKER = "drover ready"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when pytest dies (even by os._exit, as
    pytest-timeout does), so no broker outlives the test run."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except Exception:
        pass


_PORTS_GIVEN: set[int] = set()

# Ports are handed out from a block of its own per test process, below the kernel's
# ephemeral range (32768-60999 by default): the kernel's "any free port" is shared by
# every process, so two pytest-xdist workers (or a worker and a client's outgoing
# connection) could be offered the same port between its pick and the broker's bind.
# A block is PORT_BLOCK ports in [PORT_LOW, PORT_HIGH); each worker of a run takes the
# next block after the run's first one, which is derived from the run's id, so that two
# runs on one machine are unlikely to share blocks; every port is checked free by
# binding it before it is handed out.
PORT_LOW = 10000
PORT_HIGH = 32000
PORT_BLOCK = 500


def _port_block() -> range:
    blocks = (PORT_HIGH - PORT_LOW) // PORT_BLOCK
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    first = int.from_bytes(run.encode(), "big") % 1_000_003 % blocks
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    start = PORT_LOW + (first + index) % blocks * PORT_BLOCK
    return range(start, start + PORT_BLOCK)


_BLOCK = _port_block()
_NEXT = 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that this test run has
    not handed out before (until the process's block wraps around): ports come from the
    process's own block (see PORT_BLOCK), so two brokers whose ports are picked before
    either binds, in this process or in another worker, never get the same one
    ("Address already in use" at the second start)."""
    global _NEXT
    for _ in range(2 * len(_BLOCK)):
        port = _BLOCK[_NEXT % len(_BLOCK)]
        _NEXT += 1
        if _NEXT >= len(_BLOCK):  # wrapped around: ports of finished tests are free again
            _PORTS_GIVEN.clear()
            _NEXT = 0
        if port in _PORTS_GIVEN or not _bindable(port):
            continue
        _PORTS_GIVEN.add(port)
        return port
    raise RuntimeError(f"no free port in {_BLOCK}")


def drover_bin() -> Path:
    return Path(os.environ.get("DROVER_BIN") or DEFAULT_BIN)


class BrokerError(Exception):
    pass


class Broker:
    """One `drover serve` process; restartable on the same ports and data dir."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path, config: str | None = None):
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.admin_port = free_port()
        while self.admin_port == self.port:
            self.admin_port = free_port()
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.plugin_dir = workdir / "plugins"
        self.plugin_dir.mkdir(exist_ok=True)
        # The loader refuses plugin directories writable by group/others.
        os.chmod(self.plugin_dir, 0o755)
        self.config_path: Path | None = None
        if config is not None:
            self.config_path = workdir / "drover.toml"
            self.config_path.write_text(config)
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.log_path: Path | None = None
        self.returncodes: list[int] = []

    # -- addresses -----------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    def command(self) -> list[str]:
        cmd = [
            str(drover_bin()),
            "serve",
            "--listen",
            self.bootstrap,
            "--admin-listen",
            f"{self.host}:{self.admin_port}",
            "--data-dir",
            str(self.data_dir),
            "--plugin-dir",
            str(self.plugin_dir),
        ]
        if self.config_path is not None:
            cmd += ["--config", str(self.config_path)]
        return cmd

    # -- lifecycle -----------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def all_logs(self) -> str:
        """stderr of every start of this broker, oldest first."""
        parts = []
        for n in range(1, self.starts + 1):
            p = self.workdir / f"broker-{n}.stderr"
            if p.exists():
                parts.append(f"----- start #{n}: {p} -----\n" + p.read_text(errors="replace"))
        return "\n".join(parts)

    def _fail(self, why: str) -> None:
        tail = "\n".join(self.stderr_text().splitlines()[-80:])
        out = ""
        if self.starts:
            sp = self.workdir / f"broker-{self.starts}.stdout"
            if sp.exists():
                out = "\n".join(sp.read_text(errors="replace").splitlines()[-20:])
        raise BrokerError(
            f"{why}\ncommand: {' '.join(self.command())}\n"
            f"--- broker stderr (last 80 lines) ---\n{tail or '(empty)'}\n"
            + (f"--- broker stdout (last 20 lines) ---\n{out}\n" if out else "")
        )

    def start(self, timeout: float = READY_TIMEOUT_S) -> "Broker":
        if self.alive():
            raise BrokerError("broker already running")
        exe = drover_bin()
        if not exe.exists():
            raise BrokerError(
                f"drover binary not found at {exe}: run `cargo build -p drover-host` "
                "or set DROVER_BIN"
            )
        share_plugin_cache(self.data_dir)
        self.starts += 1
        self.log_path = self.workdir / f"broker-{self.starts}.stderr"
        stdout_path = self.workdir / f"broker-{self.starts}.stdout"
        env = dict(os.environ)
        env["RUST_LOG"] = os.environ.get("DROVER_TEST_RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        with open(self.log_path, "wb") as err, open(stdout_path, "wb") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while True:
            if READY_MARKER in self.stderr_text():
                break
            rc = self.proc.poll()
            if rc is not None:
                self.returncodes.append(rc)
                self._fail(
                    f"drover exited with status {rc} before printing {READY_MARKER!r}"
                )
            if time.monotonic() > deadline:
                self.kill9()
                self._fail(f"drover did not print {READY_MARKER!r} within {timeout:.0f} s")
            time.sleep(0.05)
        # The ready line promises a listening Kafka port; check it once.
        try:
            socket.create_connection((self.host, self.port), timeout=5).close()
        except OSError as e:
            self._fail(f"drover printed {READY_MARKER!r} but {self.bootstrap} refuses: {e}")
        return self

    def kill9(self) -> None:
        """SIGKILL the broker and reap it (no-op if not running)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:  # the broker runs in its own session: take anything it spawned too
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.kill()
        try:
            self.returncodes.append(self.proc.wait(timeout=10))
        except subprocess.TimeoutExpired:
            raise BrokerError("broker did not die within 10 s of SIGKILL")

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM the broker and return its exit status (SIGKILL + error on timeout)."""
        if self.proc is None:
            raise BrokerError("broker was never started")
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            self._fail(f"broker did not exit within {timeout:.0f} s of SIGTERM")
        self.returncodes.append(rc)
        return rc

    def restart(self, timeout: float = READY_TIMEOUT_S) -> "Broker":
        """Stop (SIGTERM, if still running) and start again: same ports, same data."""
        if self.alive():
            rc = self.terminate()
            if rc != 0:
                self._fail(f"broker exited with status {rc} on SIGTERM")
        return self.start(timeout=timeout)

    def assert_alive(self) -> None:
        if not self.alive():
            rc = self.proc.poll() if self.proc else None
            self._fail(f"broker process is gone (exit status {rc})")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def link_plugin(src: Path, dst: Path) -> None:
    """Puts the built plugin library `src` at `dst` as a hard link (a copy if `src` is on
    another file system), mode 0644 (readable, not group-writable, as the loader
    requires). Debug builds of the plugins are large (~280 MB together), and a copy per
    broker was a real cost of the suite. The link shares its inode with the build's
    file: a test that changes the file's bytes or mode in place must copy it instead
    (an existing `dst` is unlinked first, so nothing is written through a link)."""
    import shutil
    try:
        os.unlink(dst)
    except FileNotFoundError:
        pass
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)


# One plugin cache per test process (see share_plugin_cache), set by a session fixture.
SHARED_PLUGIN_CACHE: Path | None = None


def share_plugin_cache(data_dir: Path) -> None:
    """Makes `<data_dir>/plugin-cache` (the broker's default plugin cache) a symlink to
    this test process's shared cache, unless the data directory already has one. The
    broker copies every plugin it loads into its cache as `<sha256>.so`, fsynced, unless
    an identical copy is there: with a cache per broker, that was ~100 MB written and
    synced at every broker's first start. The loader resolves the symlink and checks the
    real directory (owned by us, mode 0700, safe parents); cached copies are content-
    addressed and written by rename, so brokers can share them (a broker prunes only
    copies it does not use that are older than an hour: longer than a worker's session).
    On the 2-core test machine the wall-time effect was within noise; the saving is
    disk writes (up to ~100 MB per broker with plugins). Off with
    DROVER_TEST_SHARED_PLUGIN_CACHE=0."""
    if SHARED_PLUGIN_CACHE is None or os.environ.get("DROVER_TEST_SHARED_PLUGIN_CACHE") == "0":
        return
    link = data_dir / "plugin-cache"
    if not data_dir.is_dir() or os.path.lexists(link):
        return
    os.symlink(SHARED_PLUGIN_CACHE, link)


@pytest.fixture(scope="session", autouse=True)
def _shared_plugin_cache(tmp_path_factory):
    global SHARED_PLUGIN_CACHE
    cache = tmp_path_factory.getbasetemp() / "plugin-cache"
    cache.mkdir(mode=0o700, exist_ok=True)
    os.chmod(cache, 0o700)
    SHARED_PLUGIN_CACHE = cache
    yield cache
    SHARED_PLUGIN_CACHE = None


def install_plugins(broker: Broker, libs: list[str]) -> None:
    """Links plugin libraries (as built next to the drover binary) into the broker's
    plugin directory, readable but not group-writable as the loader requires."""
    src = drover_bin().parent
    missing = [n for n in libs if not (src / n).exists()]
    if missing:
        pytest.fail(f"plugin libraries missing in {src}: {missing}; build them with "
                    "`cargo build --workspace` (see scripts/integration-tests.sh)", pytrace=False)
    for n in libs:
        link_plugin(src / n, broker.plugin_dir / n)


def stop_and_show_logs(request, brokers: list[Broker], lines: int = 150) -> None:
    """A broker fixture's teardown: kills every broker and, when the test failed, prints
    the tail of each one's logs (a failed start already shows them)."""
    rep = getattr(request.node, "rep_call", None)
    failed = rep is not None and rep.failed
    for b in brokers:
        try:
            b.kill9()
        except BrokerError:
            pass
        if failed and b.starts:
            tail = "\n".join(b.all_logs().splitlines()[-lines:])
            print(f"\n===== broker {b.workdir.name} logs (tail) =====\n{tail}")


def start_or_fail(broker: Broker) -> Broker:
    """Starts the broker, or fails the test with its log."""
    err = None
    try:
        broker.start()
    except BrokerError as e:
        err = str(e)
    if err is not None:
        pytest.fail(err, pytrace=False)
    return broker


@pytest.fixture
def broker_factory(tmp_path, request):
    """make(config=None, start=True) -> Broker. `config` is TOML text for --config."""
    made: list[Broker] = []

    def make(config: str | None = None, start: bool = True) -> Broker:
        b = Broker(tmp_path / f"broker{len(made)}", config=config)
        made.append(b)
        if start:
            err = None
            try:
                b.start()
            except BrokerError as e:
                err = str(e)
            if err is not None:
                pytest.fail(err, pytrace=False)
        return b

    yield make

    # Destroy client objects the test left behind while their broker is still up, so
    # librdkafka does not log reconnect failures into later tests' output.
    gc.collect()
    # On a failed test, show the broker's logs.
    stop_and_show_logs(request, made)


@pytest.fixture
def zookeeper(tmp_path):
    """A ZooKeeper server of the test's own (cluster_testlib.ZooKeeper), stopped at the end."""
    from cluster_testlib import ZooKeeper  # cluster_testlib imports this module

    zk = ZooKeeper(tmp_path / "zookeeper").start()
    yield zk
    zk.stop()


@pytest.fixture
def broker(broker_factory) -> Broker:
    """A running broker with the default configuration."""
    return broker_factory()


# The quick tier (`scripts/test.sh --quick`): one smoke test per API family and client,
# marked `smoke` here so the list lives in one place. A name that no longer matches a
# collected test fails the collection (the list must not rot silently).
SMOKE = {
    # Clients: confluent-kafka, kafka-python and kcat against one broker; kafkajs.
    "test_clients.py::test_cross_client",
    "test_offset_reset.py::test_kafkajs_reset_offsets_to_earliest_completes",
    # Topics, configs, admin HTTP API, records, fetch, offsets.
    "test_topics.py::test_create_describe_delete_recreate",
    "test_admin_configs.py::test_kafka_python_admin_client",
    "test_admin.py::test_metrics",
    "test_create_partitions.py::test_grow_produce_consume_and_restart",
    "test_record_validation.py::test_a_partition_listed_twice_in_one_produce_is_appended_once",
    "test_long_poll.py::test_raw_fetch_woken_by_produce",
    "test_list_offsets.py::test_confluent_watermarks",
    "test_protocol.py::test_advertised_ranges_are_kafka_41s",
    "test_bad_input.py::test_unknown_api_key_closes",
    # Groups: Kafka's group APIs, the native protocol, the connector, the coordinator.
    "test_kafka_group_admin.py::test_list_and_describe_a_stable_classic_group",
    "test_find_coordinator.py::test_with_the_coordinator_the_broker_names_itself",
    "test_native_group.py::test_leaving_commits_first",
    "test_connector.py::test_consume_two_topics_given_out_of_name_order",
    # Producers: idempotence, transactions.
    "test_idempotence.py::test_duplicate_gap_and_fenced_epoch",
    "test_transactions.py::test_commit_and_abort_interleaved_read_committed_sees_only_committed",
    # Plugins, offset stores, cluster mode.
    "test_plugin_rescan.py::test_a_new_assignor_is_selectable_after_a_rescan_and_a_replaced_one_is_used",
    "test_offset_swap.py::test_a_failing_swap_leaves_the_old_store_serving",
    "test_cluster.py::test_brokers_share_topics_and_serve_only_their_partitions",
}


@pytest.hookimpl(tryfirst=True)  # before `-m smoke` deselects
def pytest_collection_modifyitems(config, items):
    seen = set()
    for item in items:
        name = item.nodeid.split("/")[-1]
        base = name.split("[")[0]
        if name in SMOKE or base in SMOKE:
            item.add_marker(pytest.mark.smoke)
            seen.add(name if name in SMOKE else base)
    # Only a run that collected the whole suite can tell a stale name.
    if not config.args or [str(a).rstrip("/") for a in config.args] == ["tests/integration"]:
        stale = SMOKE - seen
        if stale and len(items) > len(SMOKE):
            raise pytest.UsageError(f"conftest.SMOKE names tests that do not exist: {sorted(stale)}")
