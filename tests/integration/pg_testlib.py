"""A real PostgreSQL server for the offset-store tests (the Python twin of
tests/conformance/src/services/postgres.rs).

Debian's `postgresql` package (installed by scripts/install-test-deps.sh) provides
`initdb`, `postgres` and `psql` in /usr/lib/postgresql/<version>/bin. A `PostgreSQL`
runs `initdb` into a fresh directory, then `postgres -D <dir>/data -p PORT -k <dir>
-c listen_addresses=127.0.0.1` on a free loopback port. PostgreSQL refuses to run as
root: when the tests run as root (as in CI) both run as the `postgres` system user the
package creates, and the directory is chowned to it. That directory lives under the
system temp dir, not the test's tmp_path (pytest makes /tmp/pytest-of-root mode 0700,
which the `postgres` user cannot enter).

Authentication (`pg_hba.conf`): the superuser `postgres` connects without a password
(TCP on loopback and the socket); every other role needs its SCRAM password over TCP,
so tests can give a wrong one (`create_role`).

`postgres` is the direct child of the test process (not `pg_ctl`, which daemonizes),
started with PR_SET_PDEATHSIG(SIGQUIT) (immediate shutdown) set after the change of
user, so it dies with pytest even when pytest is killed. `stop()` is a fast shutdown
(SIGINT: sessions end with an error), `start()` starts it again on the same port with
the same data, `freeze()`/`thaw()` SIGSTOP/SIGCONT it and its backends (connections
stay open, nothing answers), `close()` stops it and removes the directory. The
postmaster runs in a process group of its own, so a freeze is one signal to the group
(a backend being forked at that moment is stopped too; listing the postmaster's children
and then stopping them missed one forked in between, which kept serving). A server
frozen when pytest was killed cannot act on its death signal: the next run's
`PostgreSQL()` thaws and stops it while removing the directories of dead test
processes. The server runs with `fsync = off`: the tests kill servers, not machines.

Fixture: `postgresql` (session scope; import it into the test module), shared by the
tests, which keep apart by table (`store_config()` picks a fresh one).
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import free_port

PG_LIB_DIR = Path("/usr/lib/postgresql")
SUPERUSER = "postgres"
# Server directories are `<tmp>/<prefix><pid>-<random>`; those of dead test processes
# (killed before teardown) are removed by the next run.
DIR_PREFIX = "drover-pg-py-"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HBA = (
    "# Written by the Drover integration tests.\n"
    "local all all trust\n"
    "host all postgres 127.0.0.1/32 trust\n"
    "host all all 127.0.0.1/32 scram-sha-256\n"
)

# Resolved in the parent: after the child's change of user it may not be able to read
# the Python installation (e.g. under /root) to import ctypes.
_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent_quit() -> None:
    """In the child before exec (after the change of user, which would clear it):
    SIGQUIT, PostgreSQL's immediate shutdown, when the parent thread dies."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGQUIT), 0, 0, 0)


def bin_dir() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin with initdb and postgres."""
    found = []
    if PG_LIB_DIR.is_dir():
        for d in PG_LIB_DIR.iterdir():
            b = d / "bin"
            if d.name.isdigit() and (b / "postgres").is_file() and (b / "initdb").is_file():
                found.append((int(d.name), b))
    if not found:
        pytest.fail(f"PostgreSQL server binaries not found ({PG_LIB_DIR}/<version>/bin/"
                    "postgres and initdb): run scripts/install-test-deps.sh (Debian package "
                    "`postgresql`)", pytrace=False)
    return max(found)[1]


class PostgreSQL:
    """One PostgreSQL server on 127.0.0.1; restartable on the same port and data."""

    def __init__(self) -> None:
        self.bin = bin_dir()
        self.run_as: tuple[int, int] | None = None
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root and there is no `postgres` user to run "
                            "PostgreSQL as: run scripts/install-test-deps.sh", pytrace=False)
            self.run_as = (pw.pw_uid, pw.pw_gid)
        remove_stale_dirs()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        if self.run_as:
            os.chown(self.dir, *self.run_as)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._initdb()

    # -- addresses -----------------------------------------------------------------
    def url(self, user: str = SUPERUSER, password: str | None = None,
            database: str = "postgres") -> str:
        pw = f":{password}" if password is not None else ""
        return f"postgres://{user}{pw}@127.0.0.1:{self.port}/{database}"

    def store_config(self, table: str | None = None, **extra) -> str:
        """TOML for the `postgres` offset store: the superuser's URL, a table of its own
        (unless given), short timeouts by default, and `extra` keys."""
        keys = {"url": self.url(), "table": table or unique_name("offsets"),
                "connect_timeout_ms": 2000, "statement_timeout_ms": 3000}
        keys.update(extra)
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())

    # -- processes -------------------------------------------------------------------
    def _popen(self, argv: list[str], **kw) -> subprocess.Popen:
        """As the `postgres` user when root. Not through `runuser -u postgres`: runuser
        forks, so a death signal would reach runuser, not the server; Popen's `user=`
        changes the user in the child itself, before `preexec_fn` sets the signal."""
        user = {}
        if self.run_as:
            user = dict(user=self.run_as[0], group=self.run_as[1], extra_groups=[])
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return subprocess.Popen(argv, cwd=self.dir, env=env, stdin=subprocess.DEVNULL,
                                **user, **kw)

    def _initdb(self) -> None:
        p = self._popen([str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                         "-E", "UTF8", "--locale=C", "--auth=trust", "-N"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"initdb failed ({p.returncode}):\n{out.decode(errors='replace')}")
        hba = self.data / "pg_hba.conf"
        hba.write_text(HBA)
        os.chmod(hba, 0o600)
        if self.run_as:
            os.chown(hba, *self.run_as)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> "PostgreSQL":
        """Starts the server (same port and data as before) and waits until it accepts
        the superuser."""
        if self.alive():
            return self
        deadline = time.monotonic() + timeout
        while True:
            log = open(self.log, "ab")
            try:
                self.proc = self._popen(
                    [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                     "-k", str(self.dir), "-c", "listen_addresses=127.0.0.1",
                     "-c", "fsync=off", "-c", "full_page_writes=off",
                     "-c", "shared_buffers=32MB", "-c", "max_connections=200"],
                    stdout=log, stderr=log, preexec_fn=_die_with_parent_quit,
                    # Its own process group (and session): freeze() signals the group.
                    start_new_session=True)
            finally:
                log.close()
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                # The data directory confirms the answer comes from this server.
                if self.try_psql("SHOW data_directory", connect_timeout=2) == (True, str(self.data)):
                    return self
                time.sleep(0.05)
            if self.proc.poll() is None:
                self._kill()
                raise AssertionError(f"PostgreSQL on port {self.port} did not accept "
                                     f"connections within {timeout:.0f}s:\n{self.log_tail()}")
            # Exited: most likely the old postmaster's port/socket lock was not yet
            # released after a restart; retry until the deadline.
            if time.monotonic() >= deadline:
                raise AssertionError(f"PostgreSQL exited with status {self.proc.returncode} "
                                     f"on port {self.port}:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Fast shutdown (SIGINT): open sessions end with an error, the data is kept."""
        if not self.alive():
            return
        self.thaw()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown, backends too
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def freeze(self) -> None:
        """SIGSTOP the server and its backends: connections stay open, nothing answers.
        Returns once every process of the server is stopped. Undo with thaw() (stop()
        thaws too)."""
        if self.alive():
            freeze_server(self.proc.pid)

    def thaw(self) -> None:
        if self.alive():
            if _pgid(self.proc.pid) == self.proc.pid:
                try:
                    os.killpg(self.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            signal_tree(self.proc.pid, signal.SIGCONT)

    def close(self) -> None:
        """Stops the server and removes its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- SQL -------------------------------------------------------------------------
    def try_psql(self, sql: str, database: str = "postgres",
                 connect_timeout: int = 5) -> tuple[bool, str]:
        """Runs `sql` as the superuser (unaligned, tuples only); (ok, output or error)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["PGCONNECT_TIMEOUT"] = str(connect_timeout)
        r = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v",
                            "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                            "-U", SUPERUSER, "-d", database, "-c", sql],
                           env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        if r.returncode == 0:
            return True, r.stdout.rstrip("\n")
        return False, r.stderr

    def psql(self, sql: str, database: str = "postgres") -> str:
        ok, out = self.try_psql(sql, database)
        assert ok, f"psql {sql!r} failed: {out}"
        return out

    def create_role(self, name: str, password: str) -> None:
        """A login role that must give its SCRAM password over TCP."""
        self.psql(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat fields after `(comm)`: [state, ppid, pgrp, ...]; None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...: comm may hold spaces, split after the last ')'.
    return stat.rsplit(")", 1)[1].split()


def _pgid(pid: int) -> int | None:
    st = _stat(pid)
    return int(st[2]) if st else None


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None and int(st[1]) == pid:
                out.append(int(d.name))
    return out


def signal_tree(pid: int, sig: int) -> None:
    """Sends `sig` to process `pid` and its children (the postmaster's backends)."""
    for p in [pid, *_children(pid)]:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def freeze_server(pid: int, timeout: float = 10.0) -> None:
    """Stops (SIGSTOP) the postmaster `pid` and every backend, atomically: no backend
    forked during the freeze keeps running. The postmaster leads its own process group,
    so one killpg reaches it and all its children, including a child being forked at
    that moment (the kernel restarts a fork that races a group signal). Then, for a
    server not in a group of its own as well as a check: the postmaster is stopped first
    (a stopped postmaster forks nothing), then its children, again until none is left
    running. Returns once every one of them is in the stopped state."""
    if _pgid(pid) == pid:
        try:
            os.killpg(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
    deadline = time.monotonic() + timeout

    def stop_until_stopped(p: int) -> bool:
        """SIGSTOP `p` (again) unless it reads stopped; whether it is stopped or gone."""
        st = _stat(p)
        if st is None or st[0] in ("T", "Z", "X"):
            return True
        try:
            os.kill(p, signal.SIGSTOP)
        except ProcessLookupError:
            return True
        return False

    while not stop_until_stopped(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"PostgreSQL postmaster {pid} did not stop on SIGSTOP")
        time.sleep(0.005)
    # The postmaster is stopped: its set of children can no longer grow.
    while True:
        running = [c for c in _children(pid) if not stop_until_stopped(c)]
        if not running:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"PostgreSQL backends {running} did not stop on SIGSTOP")
        time.sleep(0.005)


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def remove_stale_dirs() -> None:
    """Removes the directories of servers whose test process is gone. A server frozen
    (SIGSTOP) when its test process was killed did not act on its death signal: thaw
    it and shut it down first."""
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob(f"{DIR_PREFIX}*"):
        pid = d.name[len(DIR_PREFIX):].split("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        try:
            server = int((d / "data" / "postmaster.pid").read_text().split()[0])
            cmdline = Path(f"/proc/{server}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            server = None
        if server is not None and str(d / "data").encode() in cmdline:
            signal_tree(server, signal.SIGCONT)
            os.kill(server, signal.SIGQUIT)
            deadline = time.monotonic() + 10
            while _running(server) and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(d, ignore_errors=True)


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def postgresql():
    """One PostgreSQL server for the test session; tests keep apart by table name. A
    test that stops it must start it again (in a finally)."""
    pg = PostgreSQL().start()
    yield pg
    pg.close()
