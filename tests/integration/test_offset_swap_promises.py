"""What an offset-store swap promises beyond "no commit lost" (issue 13, items 3 and 4),
against real broker processes, with confluent-kafka's AdminClient (OffsetCommit via
alter offsets, OffsetFetch, DeleteGroups) and raw OffsetDelete v0 requests:

- deletions made after a swap are not undone by swapping back, although the store
  swapped back to still holds the deleted offsets from when it was active;
- deletions made while a swap is under way are not undone either (the swap is held in
  its `opening` state by stopping its ZooKeeper server with SIGSTOP, so the deletions
  land during the swap without any timing assumption);
- the swapped-to store stays active across a graceful restart and a `kill -9`, and
  serves the offsets committed to it;
- a drover.toml that names another store than the recorded active one is refused with
  a message that says how to move; `--use-configured-offset-store` overrides it; a
  recorded store whose plugin file is gone is refused too;
- shutdown closes the active store (the embedded store logs each close with its path).

Stores: `embedded` on two database files (the data dir's and a moved one) and
`zookeeper` against a ZooKeeper server this module starts.
"""

from __future__ import annotations

import os
import re
import signal
import uuid

import pytest

from cluster_testlib import ZooKeeper
from conftest import Broker, BrokerError, install_plugins, start_or_fail
from drover_testlib import ck_admin, ck_create_topic
from kafka_groups_testlib import raw_offset_delete
from test_kafka_group_admin import alter, committed, delete_error
from test_offset_swap import post_swap, store_status, wait_swap

PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_offsets_embedded.so",
    "libdrover_offsets_zookeeper.so",
]
CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "embedded"]
"""
TOPIC = "promises"
PARTITIONS = 4
NO_OFFSET = -1001  # confluent-kafka's OFFSET_INVALID: no committed offset


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    zk = ZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    yield zk
    if zk.proc is not None and zk.proc.poll() is None:
        os.kill(zk.proc.pid, signal.SIGCONT)
    zk.stop()


def zk_config(zk: ZooKeeper) -> str:
    # Long timeouts: the server is stopped (SIGSTOP) for a while in one test, and the
    # swap must wait for it rather than fail.
    return (f'connect = "{zk.connect}"\nchroot = "/drover-{uuid.uuid4().hex[:8]}"\n'
            "session_timeout_ms = 30000\nrequest_timeout_ms = 60000\n")


@pytest.fixture
def store_broker(broker_factory):
    b = broker_factory(CONFIG, start=False)
    install_plugins(b, PLUGIN_LIBS)
    start_or_fail(b)
    ck_create_topic(b, TOPIC, PARTITIONS)
    return b


def embedded_at(path) -> str:
    return f'path = "{path}"\n'


def home(b: Broker) -> str:
    """The config of the store drover.toml names: the data dir's embedded database."""
    return embedded_at(b.data_dir / "offsets.redb")


def swap_ok(b: Broker, plugin: str, config: str) -> dict:
    status, body = post_swap(b, plugin, config)
    assert status == 202, (status, body)
    s = wait_swap(b)
    assert s["swap"]["state"] == "completed" and s["active"] == plugin, s
    return s


def offsets(b: Broker, group: str, partitions=range(PARTITIONS)) -> dict[int, int]:
    return committed(ck_admin(b), group, TOPIC, partitions)


def close_lines(b: Broker, start: int, path) -> int:
    """How many times start #`start` of `b` logged closing the embedded store at `path`."""
    log = (b.workdir / f"broker-{start}.stderr").read_text(errors="replace")
    return sum(1 for line in log.splitlines()
               if "embedded offset store closed" in line and f"path={path}" in line)


def test_deletions_after_a_swap_survive_swapping_back(store_broker, tmp_path):
    b = store_broker
    admin = ck_admin(b)
    alter(admin, "g-partial", TOPIC, {0: 20, 1: 5})
    alter(admin, "g-whole", TOPIC, {0: 7})
    moved = tmp_path / "moved" / "offsets.redb"
    swap_ok(b, "embedded", embedded_at(moved))
    # On the moved store: OffsetDelete of one partition, DeleteGroups of a group.
    err, parts = raw_offset_delete(b, "g-partial", {TOPIC: [0]})
    assert (err, parts) == (0, {(TOPIC, 0): 0}), (err, parts)
    assert delete_error(admin, "g-whole") is None
    assert offsets(b, "g-partial", [0, 1]) == {0: NO_OFFSET, 1: 5}
    # Swap back to the data dir's database, which still holds 20 and 7.
    swap_ok(b, "embedded", home(b))
    assert offsets(b, "g-partial", [0, 1]) == {0: NO_OFFSET, 1: 5}
    assert offsets(b, "g-whole", [0]) == {0: NO_OFFSET}
    # And once more there and back: what is left is what was committed.
    swap_ok(b, "embedded", embedded_at(moved))
    swap_ok(b, "embedded", home(b))
    assert offsets(b, "g-partial", [0, 1]) == {0: NO_OFFSET, 1: 5}
    assert offsets(b, "g-whole", [0]) == {0: NO_OFFSET}


def test_deletions_while_a_swap_runs_are_not_undone(store_broker, zookeeper):
    b = store_broker
    admin = ck_admin(b)
    zk = zk_config(zookeeper)
    alter(admin, "g-partial", TOPIC, {0: 20, 1: 5})
    alter(admin, "g-whole", TOPIC, {0: 7})
    # The zookeeper store gets both groups, then is left behind holding them.
    swap_ok(b, "zookeeper", zk)
    swap_ok(b, "embedded", home(b))
    # Swap to it again, held in `opening` while its server is stopped.
    os.kill(zookeeper.proc.pid, signal.SIGSTOP)
    try:
        status, body = post_swap(b, "zookeeper", zk)
        assert status == 202, (status, body)
        err, parts = raw_offset_delete(b, "g-partial", {TOPIC: [0]})
        assert (err, parts) == (0, {(TOPIC, 0): 0}), (err, parts)
        assert delete_error(admin, "g-whole") is None
        s = store_status(b)
        # The deletions were answered while the swap was under way.
        assert s["swap"]["state"] == "opening" and s["swap"]["to"] == "zookeeper", s
    finally:
        os.kill(zookeeper.proc.pid, signal.SIGCONT)
    s = wait_swap(b)
    assert s["swap"]["state"] == "completed" and s["active"] == "zookeeper", s
    assert offsets(b, "g-partial", [0, 1]) == {0: NO_OFFSET, 1: 5}
    assert offsets(b, "g-whole", [0]) == {0: NO_OFFSET}


def test_shutdown_while_a_swap_opens_its_store_stays_on_the_old_store(store_broker, zookeeper):
    """A guard for the shutdown path (it does not wait for a store that is still being
    opened): SIGTERM while the swap waits for its stopped ZooKeeper server."""
    b = store_broker
    alter(ck_admin(b), "g", TOPIC, {p: 354 for p in range(PARTITIONS)})
    os.kill(zookeeper.proc.pid, signal.SIGSTOP)
    try:
        status, body = post_swap(b, "zookeeper", zk_config(zookeeper))
        assert status == 202, (status, body)
        assert store_status(b)["swap"]["state"] == "opening"
        assert b.terminate() == 0
    finally:
        os.kill(zookeeper.proc.pid, signal.SIGCONT)
    assert close_lines(b, 1, b.data_dir / "offsets.redb") == 1, b.stderr_text()[-3000:]
    start_or_fail(b)
    assert offsets(b, "g") == {p: 354 for p in range(PARTITIONS)}
    s = store_status(b)
    assert (s["active"], s["recorded"]) == ("embedded", False), s


def test_the_swapped_to_store_survives_a_graceful_restart_and_is_closed_at_shutdown(
        store_broker, tmp_path):
    b = store_broker
    alter(ck_admin(b), "g", TOPIC, {p: 354 for p in range(PARTITIONS)})
    moved = tmp_path / "moved" / "offsets.redb"
    swap_ok(b, "embedded", embedded_at(moved))
    alter(ck_admin(b), "g", TOPIC, {p: 1034 for p in range(PARTITIONS)})
    assert b.terminate() == 0
    # Shutdown closed the active store (the moved file), and the store it started
    # with only once (at the end of the swap).
    assert close_lines(b, 1, moved) == 1, b.stderr_text()[-3000:]
    assert close_lines(b, 1, b.data_dir / "offsets.redb") == 1, b.stderr_text()[-3000:]

    start_or_fail(b)
    s = store_status(b)
    assert (s["active"], s["configured"], s["recorded"]) == ("embedded", "embedded", True), s
    assert offsets(b, "g") == {p: 1034 for p in range(PARTITIONS)}
    assert "opened the offset store a swap made active before the restart" in b.stderr_text()
    # Back to the configured store: nothing recorded any more, and a restart opens it.
    swap_ok(b, "embedded", home(b))
    assert not (b.data_dir / "offset_store.json").exists()
    assert b.terminate() == 0
    # Start #2 opened the data dir's database (a required store) and closed it again at
    # once, since it was not the active one; then the swap back opened it, and shutdown
    # closed it. The moved one closed at the end of the swap.
    assert close_lines(b, 2, b.data_dir / "offsets.redb") == 2, b.stderr_text()[-3000:]
    assert close_lines(b, 2, moved) == 1, b.stderr_text()[-3000:]
    start_or_fail(b)
    s = store_status(b)
    assert (s["active"], s["recorded"]) == ("embedded", False), s
    assert offsets(b, "g") == {p: 1034 for p in range(PARTITIONS)}


def test_the_swapped_to_store_survives_kill_9(store_broker, zookeeper):
    b = store_broker
    alter(ck_admin(b), "g", TOPIC, {p: 354 for p in range(PARTITIONS)})
    swap_ok(b, "zookeeper", zk_config(zookeeper))
    alter(ck_admin(b), "g", TOPIC, {p: 1034 for p in range(PARTITIONS)})
    b.kill9()
    start_or_fail(b)
    assert offsets(b, "g") == {p: 1034 for p in range(PARTITIONS)}
    s = store_status(b)
    assert (s["active"], s["configured"], s["recorded"]) == ("zookeeper", "embedded", True), s

    # The recorded store's plugin file is gone: refused, not a silent fall-back to the
    # configured store (which holds 354).
    b.kill9()
    plugin = b.plugin_dir / "libdrover_offsets_zookeeper.so"
    saved = plugin.read_bytes()
    plugin.unlink()
    with pytest.raises(BrokerError):
        b.start()
    err = b.stderr_text()
    assert "no offset-store plugin `zookeeper`" in err, err[-3000:]
    assert "--use-configured-offset-store" in err, err[-3000:]
    plugin.write_bytes(saved)
    os.chmod(plugin, 0o644)
    start_or_fail(b)
    assert store_status(b)["active"] == "zookeeper"
    assert offsets(b, "g") == {p: 1034 for p in range(PARTITIONS)}


def test_a_config_naming_another_store_is_refused_until_the_operator_moves(
        store_broker, tmp_path):
    b = store_broker
    alter(ck_admin(b), "g", TOPIC, {p: 354 for p in range(PARTITIONS)})
    moved = tmp_path / "moved" / "offsets.redb"
    swap_ok(b, "embedded", embedded_at(moved))
    alter(ck_admin(b), "g", TOPIC, {p: 1034 for p in range(PARTITIONS)})
    assert b.terminate() == 0

    # drover.toml now names a third store: the same plugin on another file.
    third = tmp_path / "third" / "offsets.redb"
    b.config_path.write_text(CONFIG + f"\n[plugins.config.embedded]\n{embedded_at(third)}")
    with pytest.raises(BrokerError):
        b.start()
    err = b.stderr_text()
    assert re.search(r"drover.toml names offset store `embedded` \(its config differs in: path\)",
                     err), err[-3000:]
    assert "the active offset store is `embedded`" in err, err[-3000:]
    assert "drover admin offset-store swap --to embedded" in err, err[-3000:]
    assert "--use-configured-offset-store" in err, err[-3000:]
    assert str(b.data_dir / "offset_store.json") in err, err[-3000:]
    assert not third.exists()

    # drover.toml describing the recorded store is accepted, and the record goes.
    b.config_path.write_text(CONFIG + f"\n[plugins.config.embedded]\n{embedded_at(moved)}")
    start_or_fail(b)
    s = store_status(b)
    assert (s["active"], s["recorded"]) == ("embedded", False), s
    assert offsets(b, "g") == {p: 1034 for p in range(PARTITIONS)}
    assert not (b.data_dir / "offset_store.json").exists()

    # The override: start on what drover.toml names, on purpose, without copying.
    swap_ok(b, "embedded", embedded_at(third))
    assert b.terminate() == 0
    b.config_path.write_text(CONFIG)
    with pytest.raises(BrokerError):
        b.start()
    plain = b.command
    b.command = lambda: plain() + ["--use-configured-offset-store"]
    start_or_fail(b)
    s = store_status(b)
    assert (s["active"], s["recorded"]) == ("embedded", False), s
    assert offsets(b, "g") == {p: 354 for p in range(PARTITIONS)}
    assert not (b.data_dir / "offset_store.json").exists()
