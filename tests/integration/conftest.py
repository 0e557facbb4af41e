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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that this test run has
    not handed out before: the kernel may offer a port it just released again, so two
    brokers whose ports are picked before either binds could otherwise get the same one
    ("Address already in use" at the second start)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no unused free port after 100 tries")


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


def install_plugins(broker: Broker, libs: list[str]) -> None:
    """Copies plugin libraries (as built next to the drover binary) into the broker's
    plugin directory, readable but not group-writable as the loader requires."""
    import shutil
    src = drover_bin().parent
    missing = [n for n in libs if not (src / n).exists()]
    if missing:
        pytest.fail(f"plugin libraries missing in {src}: {missing}; build them with "
                    "`cargo build --workspace` (see scripts/integration-tests.sh)", pytrace=False)
    for n in libs:
        dst = broker.plugin_dir / n
        shutil.copyfile(src / n, dst)
        os.chmod(dst, 0o644)


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
    # On a failed test, show the broker's logs (a failed start already shows them).
    rep = getattr(request.node, "rep_call", None)
    failed = rep is not None and rep.failed
    for b in made:
        try:
            b.kill9()
        except BrokerError:
            pass
        if failed and b.starts:
            tail = "\n".join(b.all_logs().splitlines()[-150:])
            print(f"\n===== broker {b.workdir.name} logs (tail) =====\n{tail}")


@pytest.fixture
def broker(broker_factory) -> Broker:
    """A running broker with the default configuration."""
    return broker_factory()
