"""The `zookeeper` and `postgres` offset stores on a running broker, against real
servers started by the tests (ZooKeeper from cluster_testlib, PostgreSQL from
pg_testlib; both installed by scripts/install-test-deps.sh), under the commit load of
test_offset_swap.Load (100 groups x 100 partitions, increasing offsets, a reader that
flags any offset older than an acknowledged one):

- a swap chain embedded -> zookeeper -> postgres -> embedded (back to the original
  database file, which holds stale offsets from before the first swap: the copy
  overwrites them) loses no commit and serves no stale read;
- a swap to an unreachable or misconfigured backend fails within the plugin's
  timeouts, says why, and leaves the old store serving;
- stopping the server under an active zookeeper or postgres store makes commits fail
  with a retriable error (COORDINATOR_NOT_AVAILABLE), loses no acknowledged commit,
  and service resumes by itself once the server is back.

The stores' plugin files are the ones scripts/integration-tests.sh builds next to the
drover binary.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import pytest

from cluster_testlib import ZooKeeper, wait_until
from conftest import BrokerError, drover_bin, free_port, link_plugin
from drover_testlib import ck_create_topic
from pg_testlib import postgresql, unique_name  # noqa: F401  (session fixture)
from test_offset_swap import (GROUPS, PARTITIONS, TOPIC, Load, final_check, post_swap,
                              store_status, wait_swap)

PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_offsets_embedded.so",
    "libdrover_offsets_zookeeper.so",
    "libdrover_offsets_postgres.so",
]
# The backends' stores are not in `required`: a swap loads them from the plugin dir.
CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "embedded"]
"""
# Short timeouts, so that failures show within a few seconds. ZooKeeper: a call fails
# after at most about twice request_timeout_ms while the server is down.
ZK_TIMEOUTS = "session_timeout_ms = 4000\nrequest_timeout_ms = 1000\n"
# PostgreSQL: a call fails after at most connect_timeout_ms + statement_timeout_ms.
PG_TIMEOUTS = dict(connect_timeout_ms=1000, statement_timeout_ms=2000)
# Longest a failing swap may take: open + health check within the timeouts above.
FAIL_WITHIN_S = 15
# Longest wait for commits to be acknowledged again after the server is back.
RESUME_WITHIN_S = 30


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    zk = ZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    yield zk
    zk.stop()


def zk_config(zk: ZooKeeper, timeouts: str = ZK_TIMEOUTS) -> str:
    """A `zookeeper` store on `zk` in a chroot of its own."""
    return f'connect = "{zk.connect}"\nchroot = "/drover-{uuid.uuid4().hex[:8]}"\n{timeouts}'


@pytest.fixture
def store_broker(broker_factory):
    b = broker_factory(CONFIG, start=False)
    src = drover_bin().parent
    for n in PLUGIN_LIBS:
        if not (src / n).exists():
            pytest.fail(f"plugin library {n} missing in {src}: run "
                        "scripts/integration-tests.sh (or cargo build -p drover-offsets-"
                        "zookeeper -p drover-offsets-postgres ...)", pytrace=False)
        link_plugin(src / n, b.plugin_dir / n)
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    ck_create_topic(b, TOPIC, PARTITIONS)
    return b


def swap(broker, plugin: str, config: str, timeout: float = 60) -> dict:
    """Swaps through the admin API and waits; returns the final status."""
    status, body = post_swap(broker, plugin, config)
    assert status == 202, (status, body)
    return wait_swap(broker, timeout)


def swap_ok(broker, plugin: str, config: str) -> dict:
    s = swap(broker, plugin, config)
    assert s["swap"]["state"] == "completed" and s["active"] == plugin, s
    return s


def swap_fails(broker, plugin: str, config: str, active: str) -> str:
    """A swap that must fail within FAIL_WITHIN_S and leave `active` serving; returns
    the status's error."""
    t0 = time.monotonic()
    s = swap(broker, plugin, config, timeout=FAIL_WITHIN_S + 30)
    took = time.monotonic() - t0
    assert s["swap"]["state"] == "failed" and s["active"] == active, s
    assert s["swap"]["error"], s
    assert took < FAIL_WITHIN_S, f"the failing swap to {plugin} took {took:.1f}s: {s}"
    print(f"swap to {plugin} failed after {took:.1f}s: {s['swap']['error']}")
    return s["swap"]["error"]


def wait_commits(load: Load, n: int, timeout: float, what: str) -> None:
    """Waits until `n` more commits are acknowledged."""
    start = load.commits
    wait_until(lambda: load.commits >= start + n or load.errors, timeout,
               f"{n} acknowledged commits {what} (acknowledged: {load.commits - start}, "
               f"retriable failures: {load.retriable})")
    assert not load.errors, load.errors[:3]


def pg_offsets(pg, table: str) -> dict[str, tuple[int, int, int]]:
    """group -> (rows, min offset, max offset), read from the table directly."""
    out = pg.psql(f'SELECT group_id, count(*), min(committed_offset), max(committed_offset) '
                  f'FROM "{table}" GROUP BY group_id')
    rows = {}
    for line in out.splitlines():
        g, n, lo, hi = line.split("|")
        rows[g] = (int(n), int(lo), int(hi))
    return rows


# ---------------------------------------------------------------------------------
# A swap chain through every store
# ---------------------------------------------------------------------------------
def test_swap_chain_embedded_zookeeper_postgres_embedded(store_broker, zookeeper, postgresql,
                                                         tmp_path):
    b = store_broker
    assert store_status(b)["active"] == "embedded"
    original = b.data_dir / "offsets.redb"
    table = unique_name("chain")
    with Load(b) as load:
        # Every group committed at least once: each swap copies all 10,000 offsets.
        wait_commits(load, GROUPS, 30, "before the first swap")
        every = GROUPS * PARTITIONS

        # The default (longer) timeouts here: no commit is expected to fail.
        s = swap_ok(b, "zookeeper", zk_config(zookeeper, timeouts=""))
        assert s["swap"]["from"] == "embedded" and s["swap"]["total"] == every, s
        assert s["swap"]["copied"] == every, s
        # The original file is closed: it holds at most what was sent until now.
        in_original = dict(load.attempted)
        wait_commits(load, GROUPS, 30, "on zookeeper")

        s = swap_ok(b, "postgres", postgresql.store_config(
            table, connect_timeout_ms=5000, statement_timeout_ms=10000))
        assert s["swap"]["from"] == "zookeeper" and s["swap"]["total"] == every, s
        assert s["swap"]["copied"] == every, s
        wait_commits(load, GROUPS, 30, "on postgres")
        # The table holds every partition, none below what was acknowledged before.
        floor = dict(load.acked)
        rows = pg_offsets(postgresql, table)
        assert len(rows) == GROUPS, sorted(rows)[:5]
        for g in range(GROUPS):
            n, lo, _hi = rows[load.group(g)]
            assert n == PARTITIONS and lo >= floor[g], (load.group(g), rows[load.group(g)],
                                                        floor[g])

        # Back to the original embedded file (closed at the first swap; it still
        # holds the offsets of before it), with `drover admin offset-store swap`.
        back = tmp_path / "back.toml"
        back.write_text(f'path = "{original}"\n')
        r = subprocess.run([str(drover_bin()), "admin", "--admin",
                            f"{b.host}:{b.admin_port}", "offset-store", "swap", "--to",
                            "embedded", "--config", str(back)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "active offset store: embedded" in r.stdout, r.stdout
        s = store_status(b)
        assert s["swap"]["from"] == "postgres" and s["swap"]["total"] == every, s
        wait_commits(load, GROUPS, 30, "back on embedded")
    assert not load.errors, load.errors[:3]
    assert load.reads > 10, load.reads
    # The reopened file held older offsets for every partition; the copy from postgres
    # overwrote them all (final_check: each partition holds the last acknowledged one).
    moved_on = [g for g in range(GROUPS) if load.acked[g] > in_original[g]]
    assert len(moved_on) == GROUPS, f"only {len(moved_on)} groups committed after the first swap"
    final_check(b, load)
    # No commit failed along the way: each store took every commit.
    assert load.retriable == 0, f"{load.retriable} commits failed with a retriable error"
    assert load.acked == load.attempted


# ---------------------------------------------------------------------------------
# Swaps to an unreachable or misconfigured backend
# ---------------------------------------------------------------------------------
def test_swap_to_an_unreachable_or_misconfigured_backend_fails_cleanly(store_broker,
                                                                        postgresql):
    b = store_broker
    pg = postgresql
    role, password = unique_name("role"), "right-password"
    pg.create_role(role, password)
    pg.psql(f'GRANT CREATE ON SCHEMA public TO "{role}"')  # to create its table
    closed = free_port()  # nothing listens there
    with Load(b) as load:
        wait_commits(load, GROUPS // 2, 30, "before the first swap")

        # ZooKeeper: nothing listens on the port.
        err = swap_fails(b, "zookeeper",
                         f'connect = "127.0.0.1:{closed}"\n{ZK_TIMEOUTS}', "embedded")
        assert "zookeeper" in err and f"127.0.0.1:{closed}" in err, err
        wait_commits(load, 10, 20, "after the failed swap to zookeeper")

        # PostgreSQL: nothing listens on the port.
        err = swap_fails(b, "postgres", pg.store_config(
            url=f"postgres://postgres@127.0.0.1:{closed}/postgres", **PG_TIMEOUTS), "embedded")
        assert "postgres" in err and f"127.0.0.1:{closed}" in err, err

        # PostgreSQL: a wrong password (never shown).
        err = swap_fails(b, "postgres", pg.store_config(
            url=pg.url(role, "wrong-password"), **PG_TIMEOUTS), "embedded")
        assert "password authentication failed" in err and "28P01" in err, err
        assert "wrong-password" not in err and password not in err, err
        wait_commits(load, 10, 20, "after the failed swap with a wrong password")

        # PostgreSQL: an unknown database.
        err = swap_fails(b, "postgres", pg.store_config(
            url=pg.url(database="no_such_database"), **PG_TIMEOUTS), "embedded")
        assert "no_such_database" in err and "does not exist" in err and "3D000" in err, err

        # PostgreSQL: an unknown config key (named).
        err = swap_fails(b, "postgres", pg.store_config(no_such_key=1), "embedded")
        assert "no_such_key" in err, err
        wait_commits(load, 10, 20, "after the failed swaps")

        # And the right password swaps after all that.
        swap_ok(b, "postgres", pg.store_config(url=pg.url(role, password), **PG_TIMEOUTS))
        wait_commits(load, 10, 20, "on postgres")
    assert not load.errors, load.errors[:3]
    assert load.retriable == 0, f"{load.retriable} commits failed with a retriable error"
    final_check(b, load)


# ---------------------------------------------------------------------------------
# The backend goes away under the active store
# ---------------------------------------------------------------------------------
OUTAGE_S = 3.0
# Longest wait for the first commit to fail once the server is down: a commit may
# queue behind a store call already waiting (the reader's fetch), each bounded by the
# plugin's timeouts above (about 2 s for both stores), so a few of those.
FIRST_FAILURE_WITHIN_S = 12


def outage(b, load: Load, stop, start, what: str) -> None:
    """Takes the server away (`stop`) under load for at least OUTAGE_S and until a
    commit failed, then brings it back (`start`). Checks that commits failed with a
    retriable error within FIRST_FAILURE_WITHIN_S (no hang), that none was
    acknowledged while the server was away, and that acknowledgements resume within
    RESUME_WITHIN_S."""
    wait_commits(load, GROUPS, 30, f"on {what} before the outage")
    retriable_before = load.retriable
    going = time.monotonic()
    stop()
    down = time.monotonic()  # gone (stop() waits for the process to exit)
    try:
        wait_until(lambda: load.retriable > retriable_before or load.errors,
                   FIRST_FAILURE_WITHIN_S,
                   f"a commit to fail while {what} is away ({load.commits} acknowledged "
                   "so far; a commit that neither fails nor succeeds hangs)")
        assert not load.errors, load.errors[:3]
        first_failure = load.last_retriable - going
        time.sleep(max(0.0, down + OUTAGE_S - time.monotonic()))
    finally:
        up = time.monotonic()
        start()
    # An acknowledgement needs the store: none while the server was away (allowing a
    # second for answers already on their way when it went).
    during = [t for t in load.ack_times if down + 1.0 < t < up]
    assert not during, (f"{len(during)} commits acknowledged while {what} was away "
                        f"(first {during[0] - down:.1f}s after it went)")
    wait_until(lambda: load.last_ack > up or load.errors, RESUME_WITHIN_S,
               f"commits to be acknowledged again after {what} came back "
               f"(retriable failures: {load.retriable})")
    assert not load.errors, load.errors[:3]
    print(f"{what}: first commit failure after {first_failure:.1f}s, "
          f"{load.retriable - retriable_before} retriable failures in {up - down:.1f}s, "
          f"acknowledged again {load.last_ack - up:.1f}s after it came back")
    wait_commits(load, GROUPS, RESUME_WITHIN_S, f"after {what} came back")


def test_zookeeper_outage_under_the_active_store(store_broker, zookeeper):
    b = store_broker
    zk = zookeeper

    def signal_zk(sig):
        if zk.proc is not None and zk.proc.poll() is None:
            os.kill(zk.proc.pid, sig)

    with Load(b) as load:
        wait_commits(load, GROUPS // 2, 30, "before the swap")
        swap_ok(b, "zookeeper", zk_config(zk))
        try:
            # Stopped: connections are refused.
            outage(b, load, zk.stop, zk.start, "ZooKeeper (stopped)")
            # Frozen (SIGSTOP): connections stay open and nothing answers; each call
            # must give up after the request timeout, never hang.
            outage(b, load, lambda: signal_zk(signal.SIGSTOP),
                   lambda: signal_zk(signal.SIGCONT), "ZooKeeper (frozen)")
        finally:
            signal_zk(signal.SIGCONT)
            if not zk.serving():
                zk.stop()
                zk.start()
    assert not load.errors, load.errors[:3]
    assert store_status(b)["active"] == "zookeeper"
    final_check(b, load)


def test_postgres_outage_under_the_active_store(store_broker, postgresql):
    b = store_broker
    pg = postgresql
    table = unique_name("outage")
    with Load(b) as load:
        wait_commits(load, GROUPS // 2, 30, "before the swap")
        swap_ok(b, "postgres", pg.store_config(table, **PG_TIMEOUTS))
        try:
            # Stopped (fast shutdown): sessions end with an error, connections refused.
            outage(b, load, pg.stop, pg.start, "PostgreSQL (stopped)")
            # Frozen (SIGSTOP): nothing answers on open or new connections; each call
            # must give up after connect_timeout_ms + statement_timeout_ms.
            outage(b, load, pg.freeze, pg.thaw, "PostgreSQL (frozen)")
        finally:
            pg.thaw()
            pg.start()
    assert not load.errors, load.errors[:3]
    assert store_status(b)["active"] == "postgres"
    final_check(b, load)
    # The table itself holds every acknowledged commit.
    rows = pg_offsets(pg, table)
    for g in range(GROUPS):
        n, lo, hi = rows[load.group(g)]
        assert n == PARTITIONS and load.acked[g] <= lo and hi <= load.attempted[g], \
            (load.group(g), rows[load.group(g)], load.acked[g], load.attempted[g])
