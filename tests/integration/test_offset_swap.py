"""Hot swap of the offset store on a running broker, under continuous commit load.

A load generator commits increasing offsets for 100 groups x 100 partitions with the
native CommitOffset API (standalone commits: empty consumer id, generation -1) while a
reader checks that FetchOffsets never returns an offset older than one already
acknowledged. Meanwhile the store is swapped through the admin API and `drover admin
offset-store swap`. Afterwards every partition holds its last acknowledged offset.

The stores available here are the ones whose plugin files are built next to the
drover binary: `embedded` always (a swap may move it to another database file), and
`zookeeper` / `postgres` against real servers in test_offset_store_backends.py, which
reuses this load generator)."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import native_protocol as np
from conftest import BrokerError, drover_bin, link_plugin
from drover_testlib import ck_create_topic, http_get

GROUPS = 100
PARTITIONS = 100
TOPIC = "swap-load"
PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_offsets_embedded.so",
]
CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "embedded"]
"""


def install_plugins(broker) -> None:
    src = drover_bin().parent
    for n in PLUGIN_LIBS:
        if not (src / n).exists():
            pytest.fail(f"plugin library {n} missing in {src}", pytrace=False)
        link_plugin(src / n, broker.plugin_dir / n)


@pytest.fixture
def store_broker(broker_factory):
    b = broker_factory(CONFIG, start=False)
    install_plugins(b)
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    ck_create_topic(b, TOPIC, PARTITIONS)
    return b


def post_swap(broker, plugin: str, config: str) -> tuple[int, dict]:
    body = json.dumps({"plugin": plugin, "config": config}).encode()
    req = urllib.request.Request(f"{broker.admin_url}/v1/offset-store", data=body,
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def store_status(broker) -> dict:
    status, _, body = http_get(f"{broker.admin_url}/v1/offset-store")
    assert status == 200, body
    return json.loads(body)


def wait_swap(broker, timeout: float = 120) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = store_status(broker)
        if s["swap"]["state"] in ("completed", "failed"):
            return s
        time.sleep(0.1)
    raise AssertionError(f"swap did not finish within {timeout}s: {store_status(broker)}")


def wait_every_group_acked(load: "Load", timeout: float = 60) -> None:
    """Waits until every group has an acknowledged commit: one pass of the load over
    all groups takes a few seconds on a loaded machine, longer than a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        with load.lock:
            missing = [g for g in range(GROUPS) if load.acked[g] == 0]
        if not missing or load.errors:
            return
        assert time.monotonic() < deadline, \
            f"{len(missing)} groups without an acknowledged commit after {timeout}s"
        time.sleep(0.05)


class Load:
    """Commits and checks reads until stopped; records every violation."""

    def __init__(self, broker):
        self.broker = broker
        self.acked = {g: 0 for g in range(GROUPS)}
        # The highest offset sent per group: a commit answered with a retriable error
        # may still be written (the coordinator retries it, and a store may have
        # applied it before failing), so the store may hold up to this much.
        self.attempted = {g: 0 for g in range(GROUPS)}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.commits = 0
        self.reads = 0
        self.retriable = 0
        self.last_ack = 0.0  # time.monotonic() of the latest acknowledged commit
        self.last_retriable = 0.0  # ... and of the latest retriable failure
        self.ack_times: list[float] = []  # time.monotonic() of every acknowledgement

    def group(self, g: int) -> str:
        return f"swap-g{g:03d}"

    def commit_loop(self):
        offset = 0
        with np.Conn(self.broker.host, self.broker.port) as c:
            while not self.stop.is_set():
                offset += 1
                for g in range(GROUPS):
                    if self.stop.is_set():
                        return
                    req = np.CommitOffsetRequest(self.group(g), "", -1, [
                        (TOPIC, [(p, offset, None) for p in range(PARTITIONS)])])
                    with self.lock:
                        self.attempted[g] = offset
                    resp = c.request(req, timeout=30)
                    codes = {code for _, parts in resp.topics for _, code in parts}
                    if codes == {0}:
                        now = time.monotonic()
                        with self.lock:
                            self.acked[g] = offset
                            self.commits += 1
                            self.last_ack = now
                            self.ack_times.append(now)
                    elif codes <= {15, 16}:  # coordinator/store not available: retriable
                        with self.lock:
                            self.retriable += 1
                            self.last_retriable = time.monotonic()
                    else:
                        self.errors.append(f"commit {self.group(g)}@{offset}: codes {codes}")
                        return

    def read_loop(self):
        rng = random.Random(7)
        with np.Conn(self.broker.host, self.broker.port) as c:
            while not self.stop.is_set():
                g = rng.randrange(GROUPS)
                with self.lock:
                    floor = self.acked[g]
                resp = c.request(np.FetchOffsetsRequest(self.group(g), None), timeout=30)
                if resp.error_code != 0:  # the store is unavailable (an outage test)
                    time.sleep(0.05)
                    continue
                got = {p: off for _, parts in resp.topics for p, off, _m, _e in parts}
                stale = [p for p in range(PARTITIONS) if got.get(p, -1) < floor]
                if floor > 0 and stale:
                    self.errors.append(
                        f"stale read of {self.group(g)}: partition {stale[0]} at "
                        f"{got.get(stale[0])} after {floor} was acknowledged")
                    return
                self.reads += 1

    def __enter__(self):
        self.threads = [threading.Thread(target=self.commit_loop, daemon=True),
                        threading.Thread(target=self.read_loop, daemon=True)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def final_check(broker, load: Load) -> None:
    """Every partition holds its group's last acknowledged offset: exactly, when the
    group's last commit was acknowledged; otherwise at least that (no acknowledged
    commit lost) and at most the last offset sent (a commit answered with a retriable
    error may have been written, or be written by the coordinator's retry)."""
    for g in range(GROUPS):
        resp = np.fetch_offsets(broker.host, broker.port, load.group(g))
        assert resp.error_code == 0, f"FetchOffsets {load.group(g)}: error {resp.error_code}"
        got = {p: off for _, parts in resp.topics for p, off, _m, _e in parts}
        lo, hi = load.acked[g], load.attempted[g]
        if hi == 0:
            # Never sent a commit (a slow machine's load did not get this far): nothing
            # may be stored for it.
            assert all(got.get(p, -1) == -1 for p in range(PARTITIONS)), \
                f"{load.group(g)} never committed, but the store has {got}"
            continue
        bad = [p for p in range(PARTITIONS) if not (lo <= got.get(p, -1) <= hi)]
        assert not bad, (f"{load.group(g)} partition {bad[0]}: store has {got.get(bad[0])}, "
                         f"last acknowledged {lo}" + (f", last sent {hi}" if hi != lo else ""))


def test_swap_under_load_loses_no_commit_and_serves_no_stale_read(store_broker, tmp_path):
    b = store_broker
    assert store_status(b)["active"] == "embedded"
    moved = tmp_path / "moved" / "offsets.redb"
    with Load(b) as load:
        time.sleep(2)  # a store full of offsets before the first swap
        wait_every_group_acked(load)
        # embedded -> embedded on another file, through the admin API.
        status, body = post_swap(b, "embedded", f'path = "{moved}"\n')
        assert status == 202, body
        s = wait_swap(b)
        assert s["swap"]["state"] == "completed", s
        assert s["swap"]["total"] >= GROUPS * PARTITIONS // 2, s
        assert s["swap"]["copied"] >= s["swap"]["total"], s
        time.sleep(1)
        # ... and back to the first file, with `drover admin offset-store swap`.
        back = tmp_path / "back.toml"
        back.write_text(f'path = "{b.data_dir / "offsets.redb"}"\n')
        r = subprocess.run([str(drover_bin()), "admin", "--admin",
                            f"{b.host}:{b.admin_port}", "offset-store", "swap", "--to",
                            "embedded", "--config", str(back)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "active offset store: embedded" in r.stdout, r.stdout
        time.sleep(1)
    assert not load.errors, load.errors[:3]
    assert load.commits > GROUPS and load.reads > 10, (load.commits, load.reads)
    final_check(b, load)
    assert moved.exists()


def test_a_failing_swap_leaves_the_old_store_serving(store_broker, tmp_path):
    b = store_broker
    with Load(b) as load:
        time.sleep(1)
        # An unknown plugin.
        status, body = post_swap(b, "no-such-store", "")
        assert status == 202, body
        s = wait_swap(b)
        assert s["swap"]["state"] == "failed" and s["active"] == "embedded", s
        assert "no offset-store plugin `no-such-store`" in s["swap"]["error"], s
        # A misconfigured backend: a database path that cannot be created.
        blocker = tmp_path / "file"
        blocker.write_text("not a directory")
        status, body = post_swap(b, "embedded", f'path = "{blocker}/sub/offsets.redb"\n')
        assert status == 202, body
        s = wait_swap(b)
        assert s["swap"]["state"] == "failed" and s["active"] == "embedded", s
        assert "path" in s["swap"]["error"], s
        # A bad body.
        status, body = post_swap(b, "embedded", "")
        assert status in (202, 409), body
        wait_swap(b)
        time.sleep(1)
        wait_every_group_acked(load)
    assert not load.errors, load.errors[:3]
    final_check(b, load)
